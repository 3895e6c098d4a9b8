"""The joint-model comparison (envs/compare.py, ``armtwin compare``). Runtime ≈ 15 s (the CLI smoke test is slow)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.kinematics import chain_of, fk_batch
from armtwin.envs.compare import build_motion, dt_sweep, metrics, run_motion, stable_run
from armtwin.envs.sim import JointMode
from armtwin.scripts.cli import main


@pytest.mark.parametrize("name", ["irb120", "aubo_i5", "scara"])
def test_pick_place_has_vertical_approaches_and_respects_the_limits(name):
    spec = robots.get(name)
    traj = build_motion(spec, "pick-place")
    t = np.arange(0, traj.duration, 1 / 500)
    q, qd, _ = traj.sample(t)
    assert np.all(np.abs(qd) <= spec.max_velocity * 0.8 + 1e-6)  # the swing peaks at 80 % of the limit
    assert np.all((q >= spec.lower - 1e-9) & (q <= spec.upper + 1e-9))
    chain = chain_of(spec)
    approaches = [s for s in traj.segments if s.kind == "approach"]
    assert len(approaches) == 4
    for seg in approaches:
        P = fk_batch(chain, seg.q_grid)[:, :3, 3]
        assert np.max(np.abs(P[:, :2] - P[0, :2])) < 1e-5  # straight down: x, y constant
        assert abs(abs(P[-1, 2] - P[0, 2]) - 0.10) < 1e-5


def test_reference_velocity_is_the_derivative_of_the_position():
    traj = build_motion(robots.get("irb120"), "pick-place")
    t = np.arange(0.0, traj.duration, 1e-3)
    q, qd, _ = traj.sample(t)
    np.testing.assert_allclose(np.gradient(q, t, axis=0)[1:-1], qd[1:-1], atol=0.02)


def test_metrics_of_a_kinematic_run_are_exact_and_torques_come_from_inverse_dynamics():
    spec = robots.get("irb120")
    traj = build_motion(spec, "swing")
    m0 = metrics(spec, traj, run_motion(spec, traj, JointMode.KINEMATIC))
    m3 = metrics(spec, traj, run_motion(spec, traj, JointMode.KINEMATIC, payload=3.0))
    assert m0.rms_joint_err == 0 and m0.max_flange_err_mm == 0 and m0.overshoot == 0
    assert m3.peak_tau > m0.peak_tau + 3.0 * 9.81 * 0.2  # the payload must be carried


def test_dt_search_brackets_the_hinge_limit():
    spec = robots.get("irb120")
    s = dt_sweep(spec, build_motion(spec, "swing"), JointMode.HINGE, bisections=2)
    assert not s.capped and s.largest_stable_dt < s.first_unstable_dt
    assert s.first_unstable_dt / s.largest_stable_dt <= 2 ** 0.5 + 1e-9
    # a step counted stable is a working drive, not a limit cycle at the effort limit
    for m in s.tried:
        if stable_run(m):
            assert np.isfinite(m.settling_s) and m.peak_tau < 0.5 * spec.max_effort.max()


@pytest.mark.parametrize("dt", ["-1", "0", "1e-9", "nan", "0.5"])
def test_cli_rejects_a_bad_step(capsys, dt):
    # 1e-9 s would ask for billions of steps (tens of GiB of arrays): refused before anything runs
    assert main(["compare", "irb120", "--dt", dt]) == 2
    assert "--dt" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_quick_writes_the_csv_and_the_plots(tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", "scara", "--quick", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for f in ("metrics.csv", "tracking_error.png", "error_vs_payload.png", "error_vs_dt.png"):
        assert (out / f).stat().st_size > 1000
        assert str(out / f) in text
    rows = list(csv.DictReader(open(out / "metrics.csv")))
    assert {r["mode"] for r in rows} == {"kinematic", "hinge", "articulation"}
    assert {r["experiment"] for r in rows} == {"main", "payload_sweep", "dt_search"}


def test_cli_motion_names_match_the_experiment():
    from armtwin.envs import compare
    from armtwin.scripts import cmd_compare
    assert tuple(cmd_compare.MOTIONS) == tuple(compare.MOTIONS)


def test_cli_compare_video_takes_size_and_fps_and_shows_each_arm_in_its_tile(tmp_path, capsys):
    """``--size`` and ``--fps`` reach the side-by-side video; each third shows its own arm (the
    IRB120's orange wrist in every tile) at the frame rate asked for."""
    import imageio.v2 as imageio
    out = tmp_path / "c"
    assert main(["compare", "irb120", "--motion", "swing", "--payload", "0", "--no-sweeps", "--out", str(out),
                 "--gif", "--size", "600x240", "--fps", "5"]) == 0
    frames = imageio.mimread(out / "compare.mp4")
    duration = build_motion(robots.get("irb120"), "swing").duration
    assert frames[0].shape == (240, 600, 3)
    assert abs(len(frames) - (duration * 5 + 1)) <= 1.5, (len(frames), duration)
    assert (out / "compare.gif").stat().st_size > 0
    f = frames[0].astype(int)
    orange = (f[..., 0] > 180) & (f[..., 1] > 60) & (f[..., 1] < 140) & (f[..., 2] < 80)
    tiles = [int(orange[:, k * 200:(k + 1) * 200].sum()) for k in range(3)]
    assert min(tiles) >= 30, tiles


@pytest.mark.parametrize("argv, words", [
    (["--size", "13x7"], "--size 13x7: a video size must be even"),
    (["--fps", "0"], "--fps 0.0: the video frame rate must be between 1 and 120"),
])
def test_cli_compare_refuses_a_bad_video_option_in_one_line_before_running(argv, words, tmp_path, capsys):
    assert main(["compare", "irb120", "--video", "--out", str(tmp_path / "c"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"armtwin: error: {words}") and err.count("\n") == 1
    assert not (tmp_path / "c").exists()
