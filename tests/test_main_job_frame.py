"""The README's main job makes a video worth showing, and keeps making it.

The last frame of ``armtwin run examples/irb120_word.ngc --robot irb120 --video …`` (the README's
first command, at a lower frame rate) must show the arm and the word it wrote: the arm as pixels
that differ from the same cameras' view of the empty world, around the point where its base
projects; the followed path as magenta pixels in the close-up (top left) and in the scene. The
frame is kept as ``artifacts/main_job_frame.png`` for a person to look at.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode.compile import compile_program
from armtwin.envs.camera import cameras_for_work
from armtwin.envs.sim import World

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "examples" / "irb120_word.ngc"
ARTIFACTS = ROOT / "artifacts"
W, H = 640, 480


def _magenta(img: np.ndarray) -> np.ndarray:
    """The followed path's colour (235, 30, 200) after H.264: red and blue high, green low."""
    r, g, b = (img[..., k].astype(int) for k in range(3))
    return (r > 170) & (b > 130) & (g < 110) & (r - g > 100)


@pytest.fixture(scope="module")
def last_frame(tmp_path_factory) -> np.ndarray:
    out = tmp_path_factory.mktemp("main_job") / "irb120_word.mp4"
    code = "import sys; from armtwin.scripts.cli import main; sys.exit(main(sys.argv[1:]))"
    res = subprocess.run([sys.executable, "-c", code, "run", str(PROGRAM), "--robot", "irb120", "--video", str(out),
                          "--fps", "4", "--size", f"{W}x{H}"], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ))
    assert res.returncode == 0, res.stderr[-2000:]
    frames = iio.imread(out, index=None)
    frame = np.asarray(frames[-1])[..., :3]
    ARTIFACTS.mkdir(exist_ok=True)
    iio.imwrite(ARTIFACTS / "main_job_frame.png", frame)
    return frame


def _cameras():
    """The run's two cameras, made as ``run`` makes them, and the empty world's view through each."""
    spec = robots.get("irb120")
    program = compile_program(PROGRAM.read_text(), spec)
    assert program.trajectory is not None, program.refusal
    with World(renderer="tiny") as w:
        robot = w.add_robot(spec)
        wp = program.trajectory.work_points()
        wp = (robot.world_T_report @ np.c_[wp, np.ones(len(wp))].T).T[:, :3]
        base = np.asarray(robot.base_position, dtype=float)
    scene, close = cameras_for_work(spec, wp, base, aspect=W / H)
    with World(renderer="tiny") as empty:
        bg = empty.render(scene, W, H).astype(int)
    return scene, close, bg, base


def test_the_main_jobs_last_frame_shows_the_arm_and_the_word(last_frame):
    frame = last_frame.astype(int)
    assert frame.shape == (H, W, 3)
    scene, _close, bg, base = _cameras()
    iw, ih = int(W * 0.42) // 2 * 2, int(H * 0.42) // 2 * 2      # the close-up, pasted at (6, 6)
    # the scene outside the close-up, the legend (top right) and the text band (bottom)
    region = np.zeros((H, W), bool)
    region[: H - 110, :] = True
    region[: ih + 12, : iw + 12] = False
    region[:30, W - 240:] = False
    path = _magenta(last_frame)
    arm = (np.abs(frame - bg).sum(axis=2) > 60) & region & ~path
    assert arm.sum() > 0.04 * region.sum(), f"only {arm.sum()} arm pixels in the scene"
    # the arm stands where its base projects: arm pixels in a box around that point
    bx, by = (int(v) for v in scene.project(base[None] + [0, 0, 0.1], W, H)[0])
    assert 0 <= bx < W and 0 <= by < H, (bx, by)
    box = arm[max(by - 60, 0):by + 60, max(bx - 60, 0):bx + 60]
    assert box.mean() > 0.15, f"the base at ({bx}, {by}) px is not drawn ({box.mean():.0%} of the box)"
    # the word: large in the close-up, visible in the scene
    in_close = path[6:6 + ih, 6:6 + iw].sum()
    in_scene = (path & region).sum()
    assert in_close > 400, f"{in_close} path pixels in the close-up"
    assert in_scene > 40, f"{in_scene} path pixels in the scene"
    ys, xs = np.nonzero(path[6:6 + ih, 6:6 + iw])
    assert xs.max() - xs.min() > 0.35 * iw, "the word spans less than a third of the close-up: too small to read"
