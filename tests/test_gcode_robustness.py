"""Bad input to `armtwin check` / `armtwin run`: bounded memory for long programs, output paths,
all faults of a file in one pass, how far an unreachable target misses, odd program files."""

from __future__ import annotations

import csv
import json
import os
import tracemalloc

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode import ErrorCode, machine_for
from armtwin.controllers.gcode.compile import compile_report
from armtwin.controllers.gcode.preflight import preflight
from armtwin.controllers.gcode.trajectory import CHUNK_SAMPLES, ControlTrajectory, HoldPiece, MotionPiece
from armtwin.envs.runner import RunConfig, run_program
from armtwin.scripts import cmd_check
from armtwin.scripts.cli import main

IRB = robots.get("irb120")


def _write(tmp_path, name: str, text: str):
    p = tmp_path / name
    p.write_text(text)
    return p


# ----- 1. long programs: the preflight bounds them, the run never materialises a dwell ----------

def test_check_flags_an_absurd_dwell(tmp_path, capsys):
    p = _write(tmp_path, "dw.ngc", "G21 G90\nG1 X0 Y0 Z0 F600\nG4 P1000000\nG1 X10\n")
    assert main(["check", str(p), "--robot", "irb120"]) == 1
    out = capsys.readouterr().out
    assert "line 3, column 4: error 37 (dwell_too_long)" in out and "P1000000" in out and "3600 s" in out
    assert main(["run", str(p), "--robot", "irb120"]) == 1          # refused, nothing allocated or moved
    assert "refused" in capsys.readouterr().err


def test_program_time_limit_names_the_line_that_passes_it():
    machine = machine_for(IRB, max_program_time=7.0)
    # the rapid from home (~0.43 m) takes about 1 s: the first dwell ends near 6 s, the second near 11 s
    rep = preflight("G21 G90\nG0 X0 Y0 Z0\nG1 X1 F600\nG4 P5\nG4 P5\nG1 X2\n", IRB, machine)
    f = [f for f in rep.faults if f.code is ErrorCode.PROGRAM_TOO_LONG]
    assert len(f) == 1 and f[0].line == 5 and "7 s maximum" in f[0].message
    assert not rep.clean()


def test_a_long_dwell_is_stepped_without_per_sample_arrays():
    """A 1 h dwell: ~900,000 control samples, one HoldPiece; memory stays far below per-sample arrays."""
    rep = preflight("G21 G90\nG1 X0 Y0 Z0 F600\nG4 P3600\nG1 X10\n", IRB)
    assert rep.clean()
    traj = ControlTrajectory(rep, IRB)
    assert traj.count > 900_000
    tracemalloc.start()
    try:
        traj.check()
        holds, moving = [], 0
        for piece in traj:
            if isinstance(piece, HoldPiece):
                holds.append(piece)
            else:
                assert isinstance(piece, MotionPiece) and len(piece) <= CHUNK_SAMPLES
                moving += len(piece)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(holds) == 1 and holds[0].line == 3 and len(holds[0]) > 899_000
    assert moving + len(holds[0]) == traj.count
    assert peak < 40e6, f"{peak / 1e6:.0f} MB"          # per-sample arrays would need several hundred MB
    # the held pose is where the first move ended; q_at holds it through the dwell
    np.testing.assert_allclose(holds[0].position, np.array(IRB.workcell.origin), atol=1e-9)
    np.testing.assert_allclose(traj.q_at(1800.0), holds[0].q, atol=0)


def test_control_trajectory_arrays_are_bounded():
    rep = preflight("G21 G90\nG1 X0 Y0 Z0 F600\nG4 P3600\nG4 P3600\nG1 X10\n", IRB)
    assert rep.clean()
    with pytest.raises(ValueError, match="control samples"):
        ControlTrajectory(rep, IRB).arrays()   # 1.8 M samples: refused before allocating
    short = preflight("G21 G90\nG1 X0 Y0 Z0 F600\nG4 P0.5\nG1 X10\n", IRB)
    with pytest.raises(ValueError, match="more than the 100"):
        ControlTrajectory(short, IRB).arrays(max_samples=100)


def test_lazy_samples_match_the_arrays_and_dwell_rows_hold(tmp_path):
    prog = "G21 G90 G0 X-10 Y0 Z5\nG1 Z0 F1500\nG2 X10 Y0 R10 F3000\nG1 Y10\nG4 P0.2\nG0 Z5\n"
    rep = preflight(prog, IRB)
    ps, q, qd = ControlTrajectory(rep, IRB).arrays()
    small = ControlTrajectory(rep, IRB, chunk=97)                  # many chunks: same samples, same velocities
    parts = list(small)
    qq = np.concatenate([np.repeat(p.q[None], len(p), 0) if isinstance(p, HoldPiece) else p.q for p in parts])
    qdd = np.concatenate([np.zeros((len(p), IRB.dof)) if isinstance(p, HoldPiece) else p.qd for p in parts])
    np.testing.assert_allclose(qq, q, atol=1e-12)
    np.testing.assert_allclose(qdd, qd, atol=1e-9)
    for t in np.linspace(0.0, small.duration, 41):               # q_at = linear between control samples
        ref = [np.interp(t, ps.t, q[:, j]) for j in range(IRB.dof)]
        np.testing.assert_allclose(small.q_at(t), ref, atol=1e-12)
    log = tmp_path / "run.csv"
    res = run_program(compile_report(rep, IRB), IRB, RunConfig(), log_path=str(log))
    rows = np.array(list(csv.reader(log.open()))[1:], dtype=float)
    dwell = rows[rows[:, 1] == 5]
    assert len(dwell) >= 0.2 / rep.machine.control_period - 2 and res.samples == len(rows)
    assert np.ptp(dwell[:, 2:5], axis=0).max() == 0.0            # the commanded point does not move


# ----- 2. output paths ---------------------------------------------------------------------------

def test_run_refuses_outputs_that_overwrite_the_program_or_each_other(tmp_path, capsys):
    text = "G21 G90 G0 X0 Y0 Z20\n"
    p = _write(tmp_path, "prog.ngc", text)
    os.link(p, tmp_path / "hard.csv")
    (tmp_path / "sym.csv").symlink_to(p)
    cases = [["--log", str(p)], ["--video", str(tmp_path / "prog.ngc")],
             ["--log", str(tmp_path / "sub" / ".." / "prog.ngc")], ["--log", str(tmp_path / "hard.csv")],
             ["--log", str(tmp_path / "sym.csv")],
             ["--log", str(tmp_path / "same.mp4"), "--video", str(tmp_path / "same.mp4")]]
    for extra in cases:
        assert main(["run", str(p), "--robot", "irb120", *extra]) == 2, extra
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert ("program itself" in err) or ("same file as --log" in err), err
    assert p.read_text() == text and not (tmp_path / "same.mp4").exists() and not (tmp_path / "sub").exists()


def _one_line_error(capsys, *needles) -> str:
    err = capsys.readouterr().err
    err = "\n".join(ln for ln in err.splitlines() if not ln.startswith("checking "))   # the progress note
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


def test_run_log_must_be_a_csv_file_name(tmp_path, capsys):
    """--log other.ngc would overwrite another G-code program with the CSV log: refused, naming --log."""
    prog = _write(tmp_path, "prog.ngc", "G21 G90 G0 X0 Y0 Z20\n")
    other = _write(tmp_path, "other.ngc", "G0 X1\n")
    (tmp_path / "adir.ngc").mkdir()
    (tmp_path / "dir.csv").mkdir()
    os.mkfifo(tmp_path / "fifo.csv")                  # opening it for writing would block the run
    (tmp_path / "null.csv").symlink_to("/dev/null")
    cases = [(str(other), "must end in .csv"), (str(tmp_path / "log.CSV.ngc"), "must end in .csv"),
             (str(tmp_path / "adir.ngc"), "names a folder"), (str(tmp_path / "dir.csv"), "names a folder"),
             (str(tmp_path / "new.csv") + "/", "names a folder"), (str(tmp_path / "fifo.csv"), "FIFO"),
             (str(tmp_path / "null.csv"), "character device"), (".csv", "needs a file name before .csv"),
             (str(tmp_path / ".CSV"), "needs a file name"), ("", "needs a file name")]
    for log, why in cases:
        assert main(["run", str(prog), "--robot", "irb120", "--log", log]) == 2, log
        _one_line_error(capsys, f"--log {log}".strip(), why)
    assert other.read_text() == "G0 X1\n" and not (tmp_path / "new.csv").exists()


def test_run_video_needs_a_file_name(tmp_path, capsys):
    prog = _write(tmp_path, "prog.ngc", "G21 G90 G0 X0 Y0 Z20\n")
    (tmp_path / "adir.ngc").mkdir()
    for video, why in ((".mp4", "needs a file name before .mp4 (e.g. out.mp4)"), (".GIF", "needs a file name"),
                       (str(tmp_path / "v.avi"), "must end in .mp4 or .gif"),
                       (str(tmp_path / "adir.ngc"), "names a folder")):
        assert main(["run", str(prog), "--robot", "irb120", "--video", video]) == 2, video
        _one_line_error(capsys, f"--video {video}", why)


def test_run_accepts_outputs_in_any_case_and_names_an_output_that_fails_later(tmp_path, capsys, monkeypatch):
    prog = _write(tmp_path, "prog.ngc", "G21 G90\nG1 X0 Y0 Z10 F3000\nG1 X2\n")
    log = tmp_path / "LOG.CSV"
    assert main(["run", str(prog), "--robot", "irb120", "--log", str(log)]) == 0
    capsys.readouterr()
    assert log.read_text().startswith("time_s,line,")
    from armtwin.envs import runner

    def fail(*_a, log_path=None, **_k):
        raise IsADirectoryError(21, "Is a directory", log_path)
    monkeypatch.setattr(runner, "run_program", fail)
    assert main(["run", str(prog), "--robot", "irb120", "--log", str(tmp_path / "l.csv")]) == 2
    _one_line_error(capsys, f"--log {tmp_path / 'l.csv'}: cannot write it: Is a directory")


@pytest.mark.parametrize("fps", ["0.001", "0.5", "0", "-1", "121", "240", "nan", "inf"])
def test_run_fps_is_bounded_as_for_show(tmp_path, capsys, fps):
    """--fps 0.001 wrote a one-frame video "lasting" 1000 s: run takes 1 to 120, as `armtwin show`."""
    prog = _write(tmp_path, "prog.ngc", "G21 G90 G0 X0 Y0 Z20\n")
    assert main(["run", str(prog), "--robot", "irb120", "--fps", fps, "--video", str(tmp_path / "v.mp4")]) == 2
    _one_line_error(capsys, "--fps ", "between 1 and 120 frames/s")
    assert not (tmp_path / "v.mp4").exists()


@pytest.mark.parametrize("fps", ["1", "120"])
def test_run_fps_limits_are_accepted(tmp_path, capsys, fps):
    prog = _write(tmp_path, "prog.ngc", "")          # refused by the preflight (106) after the settings passed
    assert main(["run", str(prog), "--robot", "irb120", "--fps", fps]) == 1
    err = capsys.readouterr().err
    assert "--fps" not in err and "refused" in err


# ----- 3. all faults in one pass -------------------------------------------------------------

def test_syntax_faults_do_not_hide_preflight_faults(tmp_path, capsys):
    p = _write(tmp_path, "mix.ngc", "G21 G90\nG1 X0 Y0 Z0 F600\nG1 X5 Q1\nG1 X5000\n")
    assert main(["check", str(p), "--robot", "irb120", "--json"]) == 1
    faults = json.loads(capsys.readouterr().out)["faults"]
    assert [(f["line"], f["code"]) for f in faults] == [(3, 11), (4, 100)]
    log = tmp_path / "log.csv"
    assert main(["run", str(p), "--robot", "irb120", "--log", str(log)]) == 1
    assert not log.exists() and "refused" in capsys.readouterr().err


def test_a_skipped_line_changes_nothing_for_the_lines_after_it():
    # grbl's rule: the faulty G1 X10 (Q) is skipped, so the incremental move after it starts at home
    rep = preflight("G21 G91 F600\nG1 X10 Q1\nG1 X10\n", IRB)
    assert [f.code for f in rep.errors()] == [ErrorCode.UNSUPPORTED_WORD]
    start, end = np.array(rep.plan.motions[0].start), np.array(rep.plan.motions[-1].end)
    np.testing.assert_allclose(end - start, [0.010, 0.0, 0.0], atol=1e-12)
    assert rep.q is not None and np.isfinite(rep.q).all()


# ----- 4. how far an unreachable target misses --------------------------------------------------

def test_unreachable_reports_the_targets_own_distance():
    rep = preflight("G21 G90\nG1 X5000 Y0 Z0 F600\n", IRB)
    (f,) = [f for f in rep.faults if f.code is ErrorCode.UNREACHABLE]
    assert f.line == 2
    miss = float(f.message.split("out of reach by ")[1].split(" mm")[0])
    # the target is 5350 mm in front of the base; the IRB120 reaches 580 mm: it misses by metres
    assert miss > 5350 - 1000 * IRB.reach - 50, f.message
    assert "(5350.0, 0.0, 200.0) mm" in f.message and "leaves the workspace at" in f.message


# ----- 5. odd files, empty programs, progress ---------------------------------------------------

def test_check_names_what_a_non_file_is(tmp_path, capsys):
    (tmp_path / "d.ngc").mkdir()
    fifo = tmp_path / "f.ngc"
    os.mkfifo(fifo)                                   # must not be opened: reading it would hang
    for path, what in ((tmp_path / "d.ngc", "is a directory"), (fifo, "FIFO"), ("/dev/null", "character device"),
                       (tmp_path / "none.ngc", "no such file")):
        assert main(["check", str(path), "--robot", "irb120"]) == 2
        err = capsys.readouterr().err
        assert what in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("text", ["", "\n\n", "(only a comment)\n; and another\n", "%\nG21 G90 G54\n%\n",
                                  "G21\nG4 P1\nM0\nM30\n", "G0 B0\n", "G10 L2 P1 X5\nG92 X0\n"])
def test_check_and_run_agree_on_a_program_without_motion(tmp_path, capsys, text):
    """Nothing moves: error 106. `check` must not call clean (exit 0) what `run` refuses: both exit 1."""
    p = _write(tmp_path, "empty.ngc", text)
    assert main(["check", str(p), "--robot", "irb120"]) == 1
    out = capsys.readouterr().out
    assert f"{p}: error 106 (no_motion): nothing in the program moves the robot" in out and "FAULTY" in out
    assert main(["check", str(p), "--robot", "irb120", "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    assert rep["clean"] is False and [f["code"] for f in rep["faults"]] == [106]
    assert rep["faults"][0]["severity"] == "error"
    assert main(["run", str(p), "--robot", "irb120"]) == 1
    cap = capsys.readouterr()
    assert "error 106 (no_motion)" in cap.out and "refused" in cap.err and "Traceback" not in cap.err


def test_long_programs_show_progress_but_not_under_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cmd_check, "PROGRESS_MIN_LINES", 5)
    p = _write(tmp_path, "p.ngc", "G21 G90\n" + "".join(f"G1 X{i % 5} Y0 Z0 F3000\n" for i in range(20)))
    assert main(["check", str(p), "--robot", "irb120"]) == 0
    err = capsys.readouterr().err
    assert f"checking {p}: interpret" in err and "IK" in err or "limits" in err
    assert main(["check", str(p), "--robot", "irb120", "--json"]) == 0
    assert capsys.readouterr().err == ""


# ----- 6. the fault cap: TOO_MANY_FAULTS (119) names where the report stops ---------------------

def test_too_many_faults_is_reported_once_at_the_first_fault_not_shown():
    from armtwin.controllers.gcode import load_program, parse_program
    # parser alone
    res = parse_program("E1\n" * 50, max_faults=10)
    assert [int(f.code) for f in res.faults] == [11] * 9 + [119] and res.truncated
    assert res.faults[-1].line == 10 and "error 11 (unsupported_word) on line 10" in res.faults[-1].message
    # exactly the cap: everything shown, no notice
    res = parse_program("E1\n" * 10, max_faults=10)
    assert [int(f.code) for f in res.faults] == [11] * 10 and not res.truncated
    # parser and interpreter faults interleaved: the first ones in line order, whichever stage found them
    text = "".join("G1 X1\n" if i % 2 == 0 else "E1\n" for i in range(40))
    prog = load_program(text, IRB, max_faults=10)
    assert [(f.line, int(f.code)) for f in prog.faults] == [(i + 1, 20 if i % 2 == 0 else 11) for i in range(9)] + [
        (10, 119)]
    assert prog.truncated
    # parser faults first in the file, interpreter faults later: the cap still counts in line order
    prog = load_program("E1\n" * 8 + "G1 X1\n" * 8, IRB, max_faults=10)
    assert [(f.line, int(f.code)) for f in prog.faults][-2:] == [(9, 20), (10, 119)]
    assert [int(f.code) for f in prog.faults].count(119) == 1
    assert load_program("E1\n" * 5 + "G1 X1\n" * 5, IRB, max_faults=10).truncated is False


def test_too_many_faults_among_preflight_findings():
    # 30 unreachable lines; the cap of 10 shows 9 and the notice at the 10th
    text = "G21 G90 F600\n" + "".join(f"G1 X{5000 + i} Y0 Z0\n" for i in range(30))
    rep = preflight(text, IRB, max_faults=10)
    assert [int(f.code) for f in rep.faults] == [100] * 9 + [119] and rep.truncated
    assert rep.faults[-1].line == 11 and rep.faults[-1].severity.value == "error"
    assert not rep.clean()
    # an earlier syntax fault is kept in line order, with the preflight's own findings after it
    rep = preflight("G21 G90 F600\nQ1\n" + text.split("\n", 1)[1], IRB, max_faults=10)
    assert [(f.line, int(f.code)) for f in rep.faults][:2] == [(2, 11), (3, 100)]
    assert rep.faults[-1].code is ErrorCode.TOO_MANY_FAULTS and rep.faults[-1].line == 11
    # the parser and interpreter alone reach the cap: no planning, the notice is there
    rep = preflight("E1\n" * 200, IRB, max_faults=5)
    assert rep.plan is None and [int(f.code) for f in rep.faults] == [11] * 4 + [119] and rep.faults[-1].line == 5
    # exactly at the cap: every finding and no notice
    text = "G21 G90 F600\n" + "".join(f"G1 X{5000 + i} Y0 Z0\n" for i in range(10))
    rep = preflight(text, IRB, max_faults=10)
    assert [int(f.code) for f in rep.faults] == [100] * 10 and not rep.truncated


def test_only_warnings_cut_make_a_warning_notice():
    from armtwin.controllers.gcode import Fault, Severity
    from armtwin.controllers.gcode.errors import cap_faults
    warn = [Fault(ErrorCode.NEAR_SINGULARITY, i, 0, "w", Severity.WARNING) for i in range(1, 8)]
    shown, cut = cap_faults(warn, 5)
    assert cut and shown[-1].code is ErrorCode.TOO_MANY_FAULTS and shown[-1].severity is Severity.WARNING
    assert shown[-1].line == 5 and len(shown) == 5
    err = warn[:6] + [Fault(ErrorCode.JOINT_LIMIT, 9, 0, "e")]
    assert cap_faults(err, 5)[0][-1].severity is Severity.ERROR
    assert cap_faults(warn, 1) == (warn[:1], True)          # no room for a notice
    assert cap_faults(warn, 7) == (warn, False)


# ----- 7. bounded memory whatever the input: huge arcs, the path-point cap ----------------------

def test_many_large_legal_arcs_stop_at_the_path_point_cap():
    machine = machine_for(IRB, max_path_samples=50_000)
    # 4 m circles round a far centre: each needs ~5,000 IK samples and ~2,000 chords
    text = "G21 G90 G0 X0 Y0 Z0 F600\n" + "G2 I0 J-4000\n" * 100
    tracemalloc.start()
    try:
        rep = preflight(text, IRB, machine)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    (cap,) = [f for f in rep.faults if f.code is ErrorCode.PROGRAM_TOO_LONG]
    assert 2 < cap.line < 20 and "50,000 interpolation points" in cap.message
    assert rep.plan.segment_count + len(rep.samples) <= 50_000
    assert max(rep.plan.lines) < cap.line
    assert peak < 200e6, f"{peak / 1e6:.0f} MB"


def _points(text: str) -> int:
    """The path points a program counts against ``max_path_samples`` (the interpreter's count)."""
    from armtwin.controllers.gcode import Interpreter, parse_program
    it = Interpreter(IRB, machine_for(IRB))
    for line in parse_program(text).lines:
        it.execute(line)
    return it.points


@pytest.mark.parametrize("name,make,sizes", [
    # the audit's full circles (chords), long lines (IK samples), 0.01 mm moves (blocks)
    ("circles", lambda n: "G21 G90 G17\nG0 X0 Y-100\nG1 Z0 F30000\n" + "G2 X0 Y-100 I0 J100\n" * n, (200, 1000)),
    ("lines", lambda n: "G21 G90\nG0 X0 Y-200\nG1 Z0 F30000\n" + "G1 Y200\nG1 Y-200\n" * (n // 2), (1500, 7500)),
    ("short", lambda n: "G21 G90\nG1 X0 Y0 Z0 F30000\n" + "G1 X0.01\nG1 X0\n" * (n // 2), (30_000, 90_000)),
])
def test_preflight_memory_per_path_point_keeps_the_cap_under_a_gigabyte(name, make, sizes):
    """Planning, IK and limit checks work in chunks: the memory a check adds per path point
    counted against the cap (measured between two sizes, so the fixed IK batch does not count;
    the blocks, made while reading, are not in it) is small enough that
    MAX_PATH_SAMPLES points stay well under 1 GB (it was 360-600 B per point, and 11,000 full
    circles took 2 GB)."""
    from armtwin.controllers.gcode.config import MAX_PATH_SAMPLES
    from armtwin.controllers.gcode.interpreter import load_program
    from armtwin.controllers.gcode.preflight import preflight_program
    machine = machine_for(IRB)
    res = []
    for n in sizes:
        text = make(n)
        prog = load_program(text, IRB, machine)
        tracemalloc.start()
        try:
            rep = preflight_program(prog, IRB, machine)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert rep.clean(), [str(f) for f in rep.faults][:3]
        res.append((_points(text), peak))
    (p1, m1), (p2, m2) = res
    per_point = (m2 - m1) / (p2 - p1)
    assert per_point < 330, f"{name}: {per_point:.0f} B per point"
    assert MAX_PATH_SAMPLES * per_point < 0.7e9
