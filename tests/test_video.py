"""Video recorder (envs/video.py), the render/camera side of envs/sim.py and `armtwin show`."""

from __future__ import annotations

import json
import math
import os
import pkgutil
import subprocess
import sys

import numpy as np
import pytest

iio = pytest.importorskip("imageio.v3")
pytest.importorskip("imageio_ffmpeg")

from armtwin import robots
from armtwin.envs.frames import EncoderError
from armtwin.envs.sim import PhysicsConfig, SimulationError, World, camera_for_path, cameras_for
from armtwin.envs.video import (
    FOLLOWED_STYLE,
    PLANNED_STYLE,
    VideoRecorder,
    draw_polyline,
)

W, H = 160, 120


def _world(dt: float = 1.0 / 240.0, renderer: str = "tiny", robot: str = "irb120"):
    w = World(PhysicsConfig(dt=dt), renderer=renderer)
    return w, w.add_robot(robots.get(robot))


def _wiggle(robot, t: float) -> np.ndarray:
    spec = robot.spec
    return spec.home + 0.3 * math.sin(2 * math.pi * t) * np.r_[1.0, np.zeros(spec.dof - 1)]


def _run(world, robot, rec, seconds: float, info=None) -> None:
    n = int(round(seconds / world.physics.dt))
    rec.maybe_capture(info)
    for _ in range(n):
        robot.command(_wiggle(robot, world.time))
        world.step()
        rec.maybe_capture(info)


def test_mp4_has_the_frames_and_size_of_the_run(tmp_path):
    w, r = _world(dt=1.0 / 100.0)
    path = tmp_path / "run.mp4"
    with w, VideoRecorder(w, r, path, fps=20, size=(W, H), progress=False) as rec:
        _run(w, r, rec, 1.0)
    frames = list(iio.imiter(path))
    assert len(frames) == 21 == rec.result.frames  # floor(1.0 s * 20 fps) + 1 (the frame at t=0)
    assert frames[0].shape == (H, W, 3)
    meta = iio.immeta(path, plugin="FFMPEG")
    assert meta["fps"] == pytest.approx(20.0)
    assert meta["codec"] == "h264" and meta["pix_fmt"].startswith("yuv420p")
    assert not np.array_equal(frames[0], frames[-1])  # the arm moved


def test_odd_sizes_become_even_and_bad_arguments_raise(tmp_path):
    w, r = _world()
    with w:
        with VideoRecorder(w, r, tmp_path / "odd.mp4", size=(161, 121), progress=False) as rec:
            rec.capture()
        assert rec.result.size == (160, 120)
        assert iio.imread(tmp_path / "odd.mp4", index=0).shape == (120, 160, 3)
        with pytest.raises(ValueError, match="must end in"):
            VideoRecorder(w, r, tmp_path / "x.avi", progress=False)
        with pytest.raises(ValueError, match="camera"):
            VideoRecorder(w, r, tmp_path / "x.mp4", camera="nadir", progress=False)
        with pytest.raises(ValueError, match="fps"):
            VideoRecorder(w, r, tmp_path / "x.mp4", fps=0, progress=False)


def test_gif_alongside_mp4(tmp_path):
    w, r = _world(dt=1.0 / 50.0)
    with w, VideoRecorder(w, r, tmp_path / "a.mp4", fps=10, size=(W, H), gif=True, progress=False) as rec:
        _run(w, r, rec, 0.5)
    assert [p.suffix for p in rec.result.paths] == [".mp4", ".gif"]
    gif = iio.imread(tmp_path / "a.gif", index=None)
    assert gif.shape[0] == 6 and gif.shape[1:3] == (H, W)
    durations = [iio.immeta(tmp_path / "a.gif", index=i)["duration"] for i in range(gif.shape[0])]
    assert sum(durations) == pytest.approx(600, abs=10)  # 6 frames of 100 ms


def test_frame_rate_is_independent_of_the_physics_step(tmp_path):
    counts = {}
    for dt in (1.0 / 240.0, 1.0 / 30.0, 0.25):  # finer than, near and coarser than a frame period
        w, r = _world(dt=dt)
        with w, VideoRecorder(w, r, tmp_path / f"f{dt:.3f}.gif", fps=10, size=(32, 24), overlay=False,
                              trail=False, progress=False) as rec:
            _run(w, r, rec, 2.0)
        counts[dt] = rec.result.frames
    assert set(counts.values()) == {21}, counts


def test_trail_is_drawn_where_the_camera_projects_it(tmp_path):
    w, r = _world()
    with w:
        cam = cameras_for(r.spec)["iso"]
        th = np.linspace(0, 2 * np.pi, 64)
        circle = np.c_[0.45 * np.cos(th), 0.45 * np.sin(th), np.full_like(th, 0.35)]  # world frame, m
        px = cam.project(circle, W, H)
        frames = {}
        for trail in (False, True):
            with VideoRecorder(w, r, tmp_path / f"t{trail}.mp4", camera=cam, size=(W, H), overlay=False,
                               trail=trail, progress=False, background=False) as rec:
                rec.add_planned_path(circle, frame="world")
                rec.capture()
                frames[trail] = rec.last_frame.astype(int)
        diff = np.abs(frames[True] - frames[False]).sum(axis=2) > 30
        flange = cam.project((r.world_T_report @ r.flange_pose())[:3, 3], W, H)[0]
        diff[max(int(flange[1]) - 4, 0):int(flange[1]) + 5, max(int(flange[0]) - 4, 0):int(flange[0]) + 5] = False
        ys, xs = np.nonzero(diff)  # changed pixels, apart from the followed path's first dot at the flange
        assert len(xs) > 100
        # every changed pixel lies near the projected polyline ...
        c = np.c_[xs, ys] + 0.5
        a, b = px[:-1], px[1:]
        ab = b - a
        t = np.clip(np.einsum("mkj,kj->mk", c[:, None, :] - a[None], ab) / np.einsum("kj,kj->k", ab, ab), 0, 1)
        d = np.min(np.linalg.norm(c[:, None, :] - (a[None] + t[..., None] * ab[None]), axis=2), axis=1)
        assert d.max() < PLANNED_STYLE.width / 2 + 1.5
        # ... and the projected points themselves are drawn in the trail colour
        inside = (px[:, 0] >= 1) & (px[:, 0] < W - 1) & (px[:, 1] >= 1) & (px[:, 1] < H - 1)
        pts = px[inside].astype(int)
        colours = frames[True][pts[:, 1], pts[:, 0]]
        close = np.abs(colours - np.array(PLANNED_STYLE.color)).max(axis=1) < 80
        assert close.mean() > 0.8


def test_followed_trail_grows_with_the_motion(tmp_path):
    w, r = _world(dt=1.0 / 60.0, robot="aubo_i5")  # blue and white: nothing of the trail's magenta

    def magenta() -> int:
        return int((np.abs(rec.last_frame.astype(int) - FOLLOWED_STYLE.color).max(axis=2) < 40).sum())

    with w, VideoRecorder(w, r, tmp_path / "f.mp4", size=(W, H), overlay=False, progress=False,
                          background=False) as rec:
        counts = []
        for k in range(1, 31):  # J1 turns steadily by 1.2 rad in 0.5 s
            q = r.spec.home.copy()
            q[0] += 0.04 * k
            r.command(q)
            w.step()
            rec.maybe_capture()
            if k in (6, 30):
                counts.append(magenta())
    assert counts[1] > 3 * counts[0] > 0


def test_overlay_changes_pixels_and_shows_time(tmp_path):
    w, r = _world(dt=1.0 / 30.0)
    with w:
        shots = {}
        for overlay in (False, True):
            with VideoRecorder(w, r, tmp_path / f"o{overlay}.mp4", size=(320, 240), overlay=overlay, trail=False,
                               progress=False, background=False) as rec:
                rec.capture({"line": "N10 G1 X100"})
                shots[overlay] = rec.last_frame.copy()
                w.step(15)  # the clock advances, the arm stands still
                rec.capture({"line": "N10 G1 X100"})
                shots[(overlay, "later")] = rec.last_frame.copy()
    changed = np.abs(shots[True].astype(int) - shots[False].astype(int)).sum(axis=2) > 0
    assert changed[200:].mean() > 0.5  # the bottom strip is darkened and written on
    assert changed[:10, :150].sum() == 0  # the top-left of the scene is untouched
    assert not np.array_equal(shots[True], shots[(True, "later")])  # the time changed
    assert np.array_equal(shots[False], shots[(False, "later")])  # without overlay nothing did


def test_draw_polyline_is_antialiased_and_clipped():
    a = np.zeros((20, 30), np.float32)
    draw_polyline(a, np.array([[-10.0, 10.3], [50.0, 10.3]]), 2.0)
    assert a.max() == pytest.approx(1.0)
    assert 0 < a[9, 15] < 1 and 0 < a[11, 15] < 1  # soft edges around the centre line y = 10.3 ...
    np.testing.assert_allclose(a.sum(axis=0), 2.0, atol=0.05)  # ... and each column covers the width
    assert a[0].max() == 0 and a[-1].max() == 0
    b = np.zeros((20, 30), np.float32)
    draw_polyline(b, np.array([[np.nan, np.nan], [5.0, 5.0]]), 2.0)  # nothing to draw, no error
    assert b.max() == 0


def test_camera_projection_matches_the_renderer():
    """The flange, projected with Camera.project, lands on the robot in the rendered image."""
    spec = robots.get("irb120")
    w, r = _world()
    with w:
        cam = cameras_for(spec)["front"]
        with_robot = w.render(cam, W, H).astype(int)
        flange = (r.world_T_report @ r.flange_pose())[:3, 3]
        base = np.array([0.0, 0.0, 0.05])
        w2 = World(renderer="tiny")
        with w2:
            empty = w2.render(cam, W, H).astype(int)
    mask = np.abs(with_robot - empty).sum(axis=2) > 40
    for p in cam.project(np.array([flange, base]), W, H):
        x, y = int(p[0]), int(p[1])
        assert mask[max(y - 3, 0):y + 4, max(x - 3, 0):x + 4].any(), p


@pytest.mark.parametrize("base, work", [((0, 0, 0), (0.37, 0.0, 0.2)), ((1.0, -2.0, 0.0), (1.0, -1.6, 0.1))])
def test_work_camera_frames_the_path_and_reads_it_the_right_way_round(base, work):
    """A 60 x 20 mm "word" in the x-y plane: inside the picture, large enough, +x to the right and
    +y up (relative to the work direction), whichever way the work lies from the base."""
    ahead = np.subtract(work[:2], base[:2])
    ahead /= np.linalg.norm(ahead)
    left = np.array([-ahead[1], ahead[0]])
    # the word's x runs along the work direction, as G-code X does for a robot facing +x
    local = np.array([[0, 0], [0.06, 0], [0.06, 0.02], [0, 0.02]])
    pts = np.c_[np.asarray(work[:2]) + local[:, :1] * ahead + local[:, 1:] * left, np.full(4, work[2])]
    cam = camera_for_path(pts, base)
    px = cam.project(pts, 640, 480)
    assert np.all((px > 0) & (px < [640, 480]))
    assert px[1, 0] > px[0, 0] + 55      # +x of the word: to the right, ~65 px long (readable)
    assert px[3, 1] < px[0, 1] - 10      # +y of the word: up
    with pytest.raises(ValueError, match="finite"):
        camera_for_path(np.full((3, 3), np.nan))


def _egl_available() -> bool:
    if pkgutil.find_loader("eglRenderer") is None:
        return False
    try:
        World(renderer="egl").close()
        return True
    except SimulationError:
        return False


@pytest.mark.skipif(not _egl_available(), reason="PyBullet's EGL renderer does not load here")
def test_egl_is_used_where_it_loads_and_matches_tiny():
    masks = {}
    for renderer in ("auto", "tiny"):
        w, r = _world(renderer=renderer)
        with w:
            assert w.renderer == ("egl" if renderer == "auto" else "tiny")
            cam = cameras_for(r.spec)["iso"]
            img = w.render(cam, W, H).astype(int)
            r.reset(r.spec.home + 0.0)
            w.robots[0].reset(r.spec.home)
            # robot silhouette: what changes when the arm is moved far away from where it stands
            q_away = r.spec.home.copy()
            q_away[0] = r.spec.upper[0]
            r.reset(q_away)
            img_away = w.render(cam, W, H).astype(int)
            masks[renderer] = np.abs(img - img_away).sum(axis=2) > 60
            assert img.shape == (H, W, 3)
    a, b = masks["auto"], masks["tiny"]
    iou = (a & b).sum() / max((a | b).sum(), 1)
    assert iou > 0.6, iou


def _run_cli(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    code = "import sys; from armtwin.scripts.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_armtwin_show_smoke_and_clean_json(tmp_path):
    out = tmp_path / "new" / "folder" / "show.mp4"   # created, as run and replay do
    p = _run_cli("show", "scara", "--video", str(out), "--seconds", "0.5", "--fps", "10", "--size", "96x72",
                 "--gif", "--json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)  # nothing but JSON on stdout (the EGL plugin's chatter is silenced)
    assert rep["files"] == [str(out), str(out.with_suffix(".gif"))]
    assert rep["frames"] == 6
    assert len(list(iio.imiter(out))) == 6


@pytest.mark.parametrize("args, words", [
    (("show", "nosuchbot", "--video", "x.mp4"), "unknown robot"),
    (("show", "irb120", "--video", "x.avi"), ".mp4 or .gif"),
    (("show", "irb120"), "--video"),
    (("show", "irb120", "--video", "x.mp4", "--seconds", "0"), "--seconds"),
    (("show", "irb120", "--video", "x.mp4", "--size", "12x3"), "--size"),
    (("show", "irb120", "--video", "/proc/no/such/x.mp4"), "cannot create its folder"),
])
def test_armtwin_show_rejects_bad_input_in_one_line(args, words):
    p = _run_cli(*args)
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("armtwin:")]
    assert len(lines) == 1 and words in lines[0]
    assert "Traceback" not in p.stderr


# ----- the helper process (envs/frames.py) ---------------------------------------------------

def _recorded_last_frames(tmp_path, background: bool) -> list[np.ndarray]:
    w, r = _world(dt=1.0 / 50.0)
    out = []
    with w, VideoRecorder(w, r, tmp_path / f"bg{background}.mp4", fps=25, size=(W, H), progress=False,
                          background=background) as rec:
        rec.add_planned_path(np.array([[0.30, -0.15, 0.45], [0.30, 0.15, 0.45]]))
        for i in range(12):
            r.command(_wiggle(r, w.time))
            w.step()
            rec.maybe_capture({"line": f"N{i} G1 X{i}"})
            if i in (3, 11):
                out.append(rec.last_frame.copy())
    return out


def test_helper_process_draws_the_same_pixels_as_drawing_in_this_thread(tmp_path):
    in_thread = _recorded_last_frames(tmp_path, background=False)
    helper = _recorded_last_frames(tmp_path, background=True)
    for a, b in zip(in_thread, helper):
        assert a.shape == (H, W, 3)
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(helper[0], helper[1])  # later frame: the arm and the overlay moved


def test_helper_process_runs_at_idle_priority_and_leaves_no_shared_memory(tmp_path):
    w, r = _world()
    with w:
        before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
        rec = VideoRecorder(w, r, tmp_path / "idle.mp4", size=(W, H), progress=False)
        pid = rec._enc._proc.pid
        if hasattr(os, "SCHED_IDLE"):
            assert os.sched_getscheduler(pid) == os.SCHED_IDLE
        _run(w, r, rec, 0.2)  # 7 frames through 4 slots: the helper has answered
        rec.close()
    assert rec._enc._proc.poll() is not None
    assert (set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()) == before   # nothing named was made
    assert len(list(iio.imiter(tmp_path / "idle.mp4"))) == rec.result.frames


def test_a_dead_helper_process_is_reported_not_hung_on(tmp_path):
    w, r = _world()
    with w:
        rec = VideoRecorder(w, r, tmp_path / "dead.mp4", size=(W, H), progress=False)
        _run(w, r, rec, 0.1)
        rec._enc._proc.kill()
        with pytest.raises(EncoderError, match="video encoding failed: the video encoding process stopped"):
            _run(w, r, rec, 1.0)  # more frames than slots: the recorder must notice
        with pytest.raises(EncoderError, match="video encoding failed"):
            rec.close()


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to another process")
def test_ctrl_c_reaches_the_simulation_and_the_helper_still_finishes_the_file(tmp_path):
    import signal
    w, r = _world(dt=1.0 / 100.0)
    path = tmp_path / "sigint.mp4"
    with w:
        rec = VideoRecorder(w, r, path, fps=20, size=(W, H), progress=False)
        _run(w, r, rec, 0.3)
        os.kill(rec._enc._proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends to the whole group
        _run(w, r, rec, 0.2)
        rec.close()
    assert len(list(iio.imiter(path))) == rec.result.frames == 11


def test_bench_video_small_prints_the_measured_keys(capsys):
    from armtwin.scripts.cli import main as cli_main
    assert cli_main(["bench", "video", "--frames", "3", "--rounds", "2", "--size", "160x120", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["raw_fps"] > 0 and out["recorder_fps"] > 0
    per_round = out["overhead_fraction_per_round"]
    assert len(per_round) == 2 and out["overhead_fraction"] == pytest.approx(float(np.median(per_round)))
    assert out["recorder_start_s"] > 0 and out["recorder_close_s"] > 0 and out["mp4_bytes"] > 0


# ----- views: picture-in-picture, tiles, travel moves, the title card ----------------------------

def test_the_inset_is_a_second_camera_in_its_corner_with_its_own_paths(tmp_path):
    from armtwin.envs.camera import cameras_for_work
    w, r = _world()
    with w:
        work = np.array([[0.35, -0.03, 0.2], [0.38, 0.03, 0.2]])
        scene, close = cameras_for_work(r.spec, work, r.base_position)
        rec = VideoRecorder(w, r, tmp_path / "pip.mp4", camera=scene, inset=close, size=(320, 240), progress=False,
                            background=False)
        rec.add_planned_path(np.array([[0.35, -0.03, 0.2], [0.38, 0.03, 0.2]]))
        rec.capture()
        img = rec.last_frame
        _, (x, y, iw, ih) = rec._views[1]
        assert (iw, ih) == (134, 100)
        assert np.all(img[y - 2, x:x + iw] == 235)                    # the inset's light frame
        plain = w.render(scene, 320, 240)
        inside = img[y:y + ih, x:x + iw].astype(int)
        assert np.abs(inside - plain[y:y + ih, x:x + iw]).mean() > 10  # not the scene camera's picture there
        close_img = w.render(close, iw, ih).astype(int)
        cyan = np.abs(inside - PLANNED_STYLE.color).max(axis=2) < 60
        assert cyan.sum() > 20                                         # the close-up has its own programmed path
        assert np.abs(inside - close_img)[~cyan].mean() < 12           # ... over the close-up camera's picture
        rec.close()


def test_tiles_show_equal_joints_equally_whatever_their_place_in_the_world(tmp_path):
    from armtwin.envs.camera import cameras_for
    spec = robots.get("irb120")
    with World(PhysicsConfig(dt=1 / 30), ground=False) as w:       # no floor: its checker differs from place to place
        rs = [w.add_robot(spec, position=(0.0, k * 6.0, 0.0)) for k in range(3)]   # apart: no arm in another's view
        for rb in rs:
            rb.reset(np.radians([20, 10, -15, 30, 45, 0]))
        tiles = [(cameras_for(spec, rb.base_position)["iso"], f"robot {k}") for k, rb in enumerate(rs)]
        rec = VideoRecorder(w, rs[0], tmp_path / "tiles.mp4", tiles=tiles, size=(480, 160), overlay=False,
                            progress=False, background=False)
        rec.capture()
        img = rec.last_frame
        rec.close()
    a, b, c = img[40:, 0:160].astype(int), img[40:, 160:320].astype(int), img[40:, 320:480].astype(int)
    robot_px = np.abs(a - a[-1, -1]).sum(axis=2) > 30                  # not the floor colour at the corner
    assert robot_px.sum() > 300
    for other in (b, c):                                               # the same arm seen from the same place
        assert np.abs(a - other)[robot_px].mean() < 3
    assert (img[6:22, 6:60] < 120).mean() > 0.5                         # the labels' dark boxes


def test_travel_moves_are_dashed_and_the_followed_path_skips_them(tmp_path):
    with World(PhysicsConfig(dt=1 / 240), ground=False) as w:        # a plain background
        r = w.add_robot(robots.get("irb120"))
        cam = cameras_for(r.spec)["top"]
        rec = VideoRecorder(w, r, tmp_path / "travel.mp4", camera=cam, size=(320, 240), overlay=False,
                            progress=False, background=False)
        line = np.array([[0.0, -0.45, 0.3], [0.0, -0.25, 0.3]])   # beside the arm, over the background
        bg = w.render(cam, 320, 240).astype(int)
        rec.add_planned_path(line, travel=True)
        q0 = r.q.copy()
        for k in range(20):                        # the arm moves, but as travel: no followed path
            r.command(q0 + [0.01 * k, 0, 0, 0, 0, 0][: r.spec.dof])
            w.step()
            rec.maybe_capture(trail=False)
        img = rec.last_frame.astype(int)
        rec.close()
    px = cam.project(line, 320, 240)
    samples = np.linspace(px[0], px[1], 200).round().astype(int)
    drawn = [np.abs(img[y, x] - bg[y, x]).max() > 25 for x, y in samples if 0 <= x < 320 and 0 <= y < 240]
    assert len(drawn) > 100
    on = float(np.mean(drawn))
    assert 0.25 < on < 0.85                         # dashed: some of the line, not all of it
    assert (np.abs(img - FOLLOWED_STYLE.color).max(axis=2) < 40).sum() == 0


def test_a_title_card_comes_before_the_first_frame(tmp_path):
    w, r = _world()
    path = tmp_path / "card.mp4"
    with w:
        with VideoRecorder(w, r, path, fps=10, size=(160, 120), progress=False, title_card=["ABB IRB120", "a test"],
                           card_seconds=1.0) as rec:
            _run(w, r, rec, 0.5)
    frames = list(iio.imiter(path))
    assert len(frames) == rec.result.frames + 10
    assert frames[0].mean() < 0.6 * frames[-1].mean()          # darkened, with text
    assert frames[0].max() > 200


def test_a_run_draws_its_travel_dashed_and_follows_only_the_work(tmp_path, monkeypatch):
    """``run --video``: the G0 moves go to the recorder as travel paths and the followed path is off
    exactly while a G0 block runs (the approach from home and the lifts between strokes)."""
    from armtwin.controllers.gcode.compile import compile_program
    from armtwin.envs.runner import RunConfig, run_program
    program = "G21 G90\nG0 X0 Y0 Z30\nG1 Z0 F1200\nG1 X20 F1200\nG0 Z30\nG0 X-20\nG1 Z0 F1200\nG1 Y15\n"
    spec = robots.get("irb120")
    compiled = compile_program(program, spec)
    paths, trails = [], []
    add, capture = VideoRecorder.add_planned_path, VideoRecorder.maybe_capture
    monkeypatch.setattr(VideoRecorder, "add_planned_path",
                        lambda self, pts, **kw: (paths.append((np.array(pts), kw.get("travel", False))),
                                                 add(self, pts, **kw))[1])
    monkeypatch.setattr(VideoRecorder, "maybe_capture",
                        lambda self, info=None, trail=True: (trails.append((info["line"], trail)),
                                                             capture(self, info, trail=trail))[1])
    run_program(compiled, spec, RunConfig(video_size=(320, 240)), video_path=str(tmp_path / "v.mp4"))
    assert [t for _, t in paths] == [True, False, True, False]        # G0 | G1 G1 | G0 G0 | G1 G1
    assert paths[0][0][-1][2] == pytest.approx(paths[1][0][0][2])     # one continuous path, split
    by_line = {}
    for line, trail in trails:
        by_line.setdefault(int(line.split(":")[0]), set()).add(trail)
    assert by_line[2] == {False} and by_line[5] == {False} and by_line[6] == {False}
    assert by_line[3] == {True} and by_line[4] == {True} and by_line[8] == {True}


def test_a_row_too_long_for_the_frame_is_shortened_at_a_glyph_with_an_ellipsis():
    """A long program name or robot title (the SCARA's at 480 px) ends in "…" inside the frame
    instead of being clipped through a letter; a row that fits is drawn whole."""
    from armtwin.envs.frames import _Overlay
    ov = _Overlay(480, 360)
    short = "t =   1.000 s   irb120_word.ngc"
    assert ov.fitted(short, 472) == short
    long = "t =  23.500 s   scara_pick_place.ngc  ·  SCARA 600 mm (LS6-B602 class)  ·  kinematic joints"
    cut = ov.fitted(long, 472)
    assert cut.endswith("\u2026") and long.startswith(cut[:-1]) and len(cut) < len(long)
    assert ov._row_mask(cut).shape[1] <= 472 < ov._row_mask(long).shape[1]
    assert ov._row_mask(cut).shape[1] > 472 - 3 * ov._glyph("W").shape[1]      # cut near the edge, not far before
