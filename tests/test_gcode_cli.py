"""`armtwin check`, `armtwin run` and `armtwin bench gcode` through the CLI entry point; run accuracy."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode.compile import compile_report
from armtwin.controllers.gcode.preflight import preflight
from armtwin.controllers.kinematics import chain_of, fk, fk_batch
from armtwin.envs.runner import RunConfig, log_columns, run_program
from armtwin.scripts.cli import main

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"


@pytest.mark.parametrize("path", sorted(EX.glob("*.ngc")), ids=lambda p: p.name)
def test_examples_are_clean(path, capsys):
    robot = next(r for r in ("scara", "irb120", "aubo_i5") if path.name.startswith(r + "_"))
    assert main(["check", str(path), "--robot", robot]) == 0
    assert "clean" in capsys.readouterr().out


def test_check_exit_codes_and_json(tmp_path, capsys):
    bad = tmp_path / "bad.ngc"
    bad.write_text("G21\nG1 X1\nG0 X1 @\nG0 X900\n")
    assert main(["check", str(bad), "--robot", "irb120"]) == 1
    out = capsys.readouterr().out
    assert "line 2, column 1: error 20" in out and "line 3, column 7: error 3" in out
    assert main(["check", str(bad), "--robot", "irb120", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    # the lines that parsed are still planned: line 4 (900 mm beyond the origin) is out of reach
    assert not data["clean"] and [(f["line"], f["code"]) for f in data["faults"]] == [(2, 20), (3, 3), (4, 100)]
    # usage errors: exit 2, one line, no traceback
    assert main(["check", str(tmp_path / "missing.ngc"), "--robot", "irb120"]) == 2
    assert main(["check", str(bad), "--robot", "nosuchbot"]) == 2
    assert main(["check", str(bad), "--robot", "irb120", "--origin", "nan", "0", "0"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "missing.ngc" in err


def test_unreachable_program_fails_and_origin_moves_it(tmp_path, capsys):
    p = tmp_path / "far.ngc"
    p.write_text("G21 G90 G0 X0 Y0 Z0\n")
    assert main(["check", str(p), "--robot", "irb120", "--origin", "900", "0", "200"]) == 1
    assert "error 100" in capsys.readouterr().out
    assert main(["check", str(p), "--robot", "irb120", "--origin", "300", "0", "200"]) == 0


def test_run_refuses_a_faulty_program(tmp_path, capsys):
    p = tmp_path / "bad.ngc"
    p.write_text("G0 X500\n")
    log = tmp_path / "log.csv"
    assert main(["run", str(p), "--robot", "irb120", "--log", str(log)]) == 1
    assert not log.exists()
    assert "refused" in capsys.readouterr().err


PATH_PROGRAM = "G21 G90 G0 X-10 Y0 Z5\nG1 Z0 F1500\nG2 X10 Y0 R10 F3000\nG1 Y10\nG4 P0.2\nG0 Z5\n"


def _dist_to_segment(p: np.ndarray, a, b) -> np.ndarray:
    """(K,) distance of points p (K, 3) from the segment a-b (same units)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    d = b - a
    u = np.clip((p - a) @ d / max(d @ d, 1e-300), 0.0, 1.0)
    return np.linalg.norm(p - (a + u[:, None] * d), axis=1)


@pytest.mark.parametrize("robot", ["irb120", "aubo_i5", "scara"])
def test_kinematic_run_reproduces_the_path(robot, tmp_path):
    """The flange the engine reports follows the programmed lines and arc within 0.01 mm.

    The reference is the geometry as written (work coordinates + the robot's work origin; the
    G0 of line 1 starts at the FK of the home pose), not the runner's own commanded samples;
    the AUBO-i5 also checks its offset reporting frame (flange_pose vs. the origin's frame).
    """
    spec = robots.get(robot)
    rep = preflight(PATH_PROGRAM, spec)
    assert rep.clean()
    log = tmp_path / "run.csv"
    res = run_program(compile_report(rep, spec), spec, RunConfig(), log_path=str(log))
    assert res.stable and res.max_error_mm < 0.01
    assert res.program_time == pytest.approx(rep.duration, abs=1e-9)
    assert res.lines_executed == 6
    rows = list(csv.reader(log.open()))
    assert rows[0] == log_columns(spec)
    assert rows[0][:8] == ["time_s", "line", "x_cmd_mm", "y_cmd_mm", "z_cmd_mm", "x_mm", "y_mm", "z_mm"]
    n = spec.dof
    assert rows[0][8:8 + 2 * n] == [f"j{i}_cmd" for i in range(1, n + 1)] + [f"j{i}" for i in range(1, n + 1)]
    data = np.array(rows[1:], dtype=float)
    assert len(data) == res.samples
    line = data[:, 1].astype(int)
    origin_mm = np.array(spec.workcell.origin) * 1000.0
    p = data[:, 5:8] - origin_mm            # the engine's flange, work coordinates, mm
    home = fk(chain_of(spec), spec.home)[:3, 3] * 1000.0 - origin_mm
    geometry = {                             # line -> distance of its samples from the line as written
        1: lambda q: _dist_to_segment(q, home, (-10, 0, 5)),
        2: lambda q: _dist_to_segment(q, (-10, 0, 5), (-10, 0, 0)),
        3: lambda q: np.hypot(np.hypot(q[:, 0], q[:, 1]) - 10.0, q[:, 2]),   # clockwise over +Y
        4: lambda q: _dist_to_segment(q, (10, 0, 0), (10, 10, 0)),
        5: lambda q: np.linalg.norm(q - (10, 10, 0), axis=1),
        6: lambda q: _dist_to_segment(q, (10, 10, 0), (10, 10, 5)),
    }
    assert set(line) <= set(geometry) and {1, 2, 3, 4, 6} <= set(line)
    for ln, dist in geometry.items():
        if (line == ln).any():
            assert dist(p[line == ln]).max() <= 0.01, f"{robot} line {ln}"
    arc = p[line == 3]
    assert arc[:, 1].min() > -0.01 and arc[:, 1].max() == pytest.approx(10.0, abs=0.01)   # the upper half (G2)
    assert np.linalg.norm(p[-1] - (10, 10, 5)) <= 0.01 and np.linalg.norm(p[0] - home) <= 0.01


def test_run_cli_smoke_scara_with_video(tmp_path, capsys):
    prog = tmp_path / "p.ngc"
    prog.write_text("G21 G90 G0 X0 Y0 Z20 C0\nG1 Z10 F3000\nG0 Z20\n")
    log, video = tmp_path / "s.csv", tmp_path / "s.gif"
    assert main(["run", str(prog), "--robot", "scara", "--log", str(log), "--video", str(video), "--fps", "5",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ran"] and out["max_error_mm"] < 0.01 and out["lines_executed"] == 3
    header = log.read_text().splitlines()[0].split(",")
    assert header[8:16] == ["j1_cmd", "j2_cmd", "j3_cmd", "j4_cmd", "j1", "j2", "j3", "j4"]
    assert video.stat().st_size > 0


def test_work_points_are_the_feed_moves():
    from armtwin.controllers.gcode import ControlTrajectory
    spec = robots.get("irb120")
    traj = ControlTrajectory(preflight("G21 G90 G0 X-30 Y0 Z30\nG1 Z0 F600\nG1 X10 Y5\nG0 Z30\n", spec), spec)
    o = np.asarray(spec.workcell.origin)
    wp = (traj.work_points() - o) * 1000          # mm, work frame
    assert np.allclose(wp.min(axis=0), [-30, 0, 0], atol=1e-6) and np.allclose(wp.max(axis=0), [10, 5, 30], atol=1e-6)
    rep = preflight("G0 X5 Y5 Z5\nG0 X-5\n", spec)
    rapids_only = ControlTrajectory(rep, spec).work_points()   # no feed move: every chord, from the start pose
    ends = {tuple(np.round((p - o) * 1000, 6)) for p in rapids_only}
    assert {(5.0, 5.0, 5.0), (-5.0, 5.0, 5.0)} <= ends
    assert np.allclose(rapids_only.min(axis=0), np.minimum(fk(chain_of(spec), rep.program.q_start)[:3, 3], o + [-0.005, 0.005, 0.005]))


def test_bench_gcode_small(capsys):
    assert main(["bench", "gcode", "--lines", "300", "--repeat", "1", "--worst-mb", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("armtwin_parse_lines_per_s", "gcodeparser_lines_per_s", "preflight_s", "parse_speed_ratio"):
        assert out[key] > 0
    assert out["preflight_clean"] and out["parse_faults"] == 0
    assert out["worst_case"]["mb"] == pytest.approx(1.0, abs=0.01) and out["worst_case"]["stopped_at_line"] > 1000


def test_strict_counts_warnings(tmp_path, capsys):
    p = tmp_path / "sing.ngc"
    # ends with the wrist centre almost above the IRB120's base (shoulder singularity): warning 103 only
    p.write_text("G21 G90 G0 X-340 Y0 Z200\n")
    assert main(["check", str(p), "--robot", "irb120"]) == 0
    assert "warning 103" in capsys.readouterr().out
    assert main(["check", str(p), "--robot", "irb120", "--strict"]) == 1


def test_run_config_is_checked_at_construction():
    from armtwin.envs.runner import CAMERAS
    from armtwin.envs.sim import JointMode, cameras_for
    assert set(CAMERAS) == {"work"} | set(cameras_for(robots.get("irb120")))
    assert RunConfig(mode="Hinge").mode is JointMode.HINGE and RunConfig(camera="TOP").camera == "top"
    with pytest.raises(ValueError, match="joint mode"):
        RunConfig(mode="kinematc")
    with pytest.raises(ValueError, match="camera"):
        RunConfig(camera="isometric")
    for bad in (0.0, -1e-3, float("nan"), float("inf"), "0.001", True):
        with pytest.raises(ValueError, match="physics_step"):
            RunConfig(physics_step=bad)
    for bad in (0.0, -30.0, float("nan"), 1000.0):
        with pytest.raises(ValueError, match="video_fps"):
            RunConfig(video_fps=bad)
    for bad in ((641, 480), (640, 481), (8, 8), (640,), (640.0, 480), (9000, 480), "640x480"):
        with pytest.raises(ValueError, match="video_size"):
            RunConfig(video_size=bad)
    assert RunConfig(video_size=[320, 240]).video_size == (320, 240)


def test_run_cli_rejects_a_bad_setting_in_one_line(tmp_path, capsys):
    prog = tmp_path / "p.ngc"
    prog.write_text("G21 G90 G0 X0 Y0 Z20\n")
    assert main(["run", str(prog), "--robot", "irb120", "--fps", "0"]) == 2
    err = capsys.readouterr().err
    assert "fps" in err and "Traceback" not in err


@pytest.mark.parametrize("robot", ["scara", "irb120", "aubo_i5"])
def test_control_trajectory_stays_on_the_branch_for_every_example(robot):
    """Every example program, on every robot: a clean preflight gives a control trajectory
    whose every sample solves on the preflight's branch (nothing filled in), reaches the
    commanded pose, stays in range and moves continuously. A robot's own examples
    (``<robot>_*.ngc``) are all clean on it; another robot's may not be (the 140 mm gripper
    example is out of the SCARA's quill range)."""
    from armtwin.controllers.ik import branch_of
    from armtwin.controllers.gcode import ControlTrajectory
    spec = robots.get(robot)
    chain = chain_of(spec)
    checked = 0
    for path in sorted(EX.glob("*.ngc")):
        rep = preflight(path.read_text(), spec)
        if not rep.clean():
            assert not path.name.startswith(f"{robot}_"), (path.name, rep.faults[:1])
            continue
        ps, q, _ = ControlTrajectory(rep, spec).arrays()
        assert np.isfinite(q).all() and spec.within_limits(q).all()
        every = slice(None, None, 7)
        T = fk_batch(chain, q[every])
        if rep.plan.flange_of_block is not None:      # a tool mounted (the pick-and-place cup): its TCP is on the path
            T = T @ np.array([m.tcp for m in rep.plan.motions])[ps.block[every]]
        assert np.abs(T[:, :3, 3] - ps.position[every]).max() < 1e-6, path.name
        rev = ~spec.prismatic
        assert np.abs(np.diff(q[:, rev], axis=0)).max() < 0.05, path.name       # no jump between 4 ms samples
        arm = {"/".join(branch_of(spec, v).split("/")[:2]) for v in q[::25]}
        assert len(arm) == 1, (path.name, arm)                                   # no shoulder/elbow flip
        checked += 1
    assert checked >= len(list(EX.glob(f"{robot}_*.ngc"))) >= 4


def test_control_trajectory_reports_a_sample_off_the_branch():
    from dataclasses import replace

    from armtwin.controllers.gcode import ControlTrajectory, ControlTrajectoryError
    spec = robots.get("irb120")
    rep = preflight(PATH_PROGRAM, spec)
    q = rep.q.copy()
    bad = rep.samples.line == 4
    q[bad, 0] += 0.6          # pretend the checked path were 34° away on line 4: no solution is near it
    with pytest.raises(ControlTrajectoryError, match=r"^line 4: .*branch") as exc:
        ControlTrajectory(replace(rep, q=q), spec).arrays()
    assert exc.value.line == 4 and exc.value.count > 0
    q[:] = np.nan
    with pytest.raises(ValueError, match="joint path"):
        ControlTrajectory(replace(rep, q=q), spec)


# ----- audit: --origin out of bounds, orientation-only moves, huge arcs, the fault cap -----------

@pytest.mark.parametrize("cmd", ["check", "run"])
@pytest.mark.parametrize("origin", [["1e300", "0", "0"], ["1e308", "1e308", "1e308"], ["10001", "0", "0"],
                                    ["inf", "0", "0"]])
def test_origin_far_away_or_overflowing_is_a_usage_error(tmp_path, capsys, cmd, origin):
    p = tmp_path / "p.ngc"
    p.write_text("G21 G90 G0 X0 Y0 Z0\n")
    assert main([cmd, str(p), "--robot", "irb120", "--origin", *origin]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and "--origin" in err, err


@pytest.mark.parametrize("robot", ["irb120", "aubo_i5"])
def test_check_orientation_only_moves_to_the_current_pose(tmp_path, capsys, robot):
    p = tmp_path / "p.ngc"
    p.write_text("G0 B0\nG0 C180\n")
    rc = main(["check", str(p), "--robot", robot])
    out = capsys.readouterr().out
    assert "Traceback" not in out
    if robot == "irb120":    # home A0 B0 C180: no motion at all, error 106 (nothing to run), not a traceback
        assert rc == 1 and "error 106 (no_motion)" in out and "FAULTY" in out
    else:                    # home C90: C180 is a turn
        assert rc == 0 and "clean" in out


def test_check_huge_arcs_and_the_fault_cap(tmp_path, capsys):
    p = tmp_path / "arcs.ngc"
    p.write_text("G21 G90 G0 X0 Y0 Z0 F600\nG2 X0.00005 Y-10 I999999 J0\nG2 I999999 J0\n")
    assert main(["check", str(p), "--robot", "irb120", "--json"]) == 1
    faults = json.loads(capsys.readouterr().out)["faults"]
    assert [(f["line"], f["column"], f["code"]) for f in faults] == [(2, 18, 36), (3, 4, 36)]
    many = tmp_path / "many.ngc"
    many.write_text("G21 G90\n" + "E1\n" * 150)
    assert main(["check", str(many), "--robot", "irb120", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert len(data["faults"]) == 100 and data["truncated"]
    last = data["faults"][-1]
    assert (last["code"], last["name"], last["line"]) == (119, "too_many_faults", 101)   # first not shown
    assert [f["code"] for f in data["faults"][:-1]] == [11] * 99


@pytest.mark.parametrize("cmd", ["check", "run"])
def test_a_fourth_origin_number_is_named_in_one_line_with_the_subcommand(tmp_path, capsys, cmd):
    prog = tmp_path / "p.ngc"
    prog.write_text("G21 G90 G0 X0 Y0 Z20\n")
    with pytest.raises(SystemExit) as e:
        main([cmd, str(prog), "--robot", "irb120", "--origin", "350", "0", "200", "1"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" not in err and "Traceback" not in err and err.count("\n") == 1
    assert err.startswith(f"armtwin: error: {cmd}: unrecognized arguments: 1 (--origin takes three numbers: X Y Z, mm)")
    with pytest.raises(SystemExit):
        main([cmd, str(prog), "--robot", "irb120", "stray"])
    assert "unrecognized arguments: stray (see" in capsys.readouterr().err


def test_a_run_counts_every_pass_of_a_loop_as_a_block_executed(tmp_path, capsys):
    """A loop's lines run once per pass: the run reports the blocks run (each pass) and the distinct
    lines; a program without O-word flow reports one number, as before."""
    prog = tmp_path / "loop.ngc"
    prog.write_text("G21 G91\nG0 X0 Y0 Z10\no7 repeat [3]\nG1 X5 F1200\nG4 P0.1\no7 endrepeat\nG90 G1 X0 F1200\n")
    assert main(["run", str(prog), "--robot", "irb120", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["blocks_executed"] == 1 + 3 * 2 + 1 and out["lines_executed"] == 4
    assert main(["run", str(prog), "--robot", "irb120"]) == 0
    assert "8 motion and dwell blocks executed (4 distinct lines)" in capsys.readouterr().out
