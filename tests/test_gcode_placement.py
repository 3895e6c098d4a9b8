"""Placing a job (``check --place``, :mod:`armtwin.controllers.gcode.placement`) and the dialect
warnings of :mod:`armtwin.controllers.gcode.intent` (long dwells, G92 before the first move, ``--dwell-ms``)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode import ErrorCode, Severity, machine_for
from armtwin.controllers.gcode.placement import PlaceConstraint, joint_margin, parse_constraint, place_program
from armtwin.controllers.gcode.preflight import preflight
from armtwin.scripts.cli import main

IRB = robots.get("irb120")
SCARA = robots.get("scara")

#: a 40 mm square with a circle, written with its zero 600 mm off (a CAM program's stock corner):
#: out of the IRB120's reach at its default origin (350, 0, 200) mm
FAR = """G21 G90 G17
G0 X600 Y0 Z5
G1 Z0 F600
G1 X640 F1200
G1 Y40
G2 X620 Y60 I-20 J0
G1 X600 Y40
G1 Y0
G0 Z5
"""

#: a 2 m square: larger than any of the arms
HUGE = "G21 G90\nG0 X0 Y0 Z0\nG1 X2000 F3000\nG1 Y2000\nG1 X0\nG1 Y0\n"


def _job_margin(spec, rep, first_line: int) -> float:
    """The joint margin of a report's samples from ``first_line`` on, computed here from the joints."""
    q = rep.q[rep.samples.line >= first_line]
    lo, hi = spec.lower, spec.upper
    return float((np.minimum(q - lo, hi - q) / (hi - lo)).min())


def test_a_program_out_of_reach_at_the_default_origin_is_placed_where_it_checks_clean():
    machine = machine_for(IRB)
    assert not preflight(FAR, IRB, machine).clean()
    res = place_program(FAR, IRB, machine)
    assert res.best is not None, res.reason
    assert res.tried >= res.feasible >= 1 and res.verified >= res.clean >= 1
    o = res.best.origin
    again = preflight(FAR, IRB, machine.with_origin_mm([v * 1000 for v in o]))
    assert again.clean(), [str(f) for f in again.faults]
    assert all(abs(v * 1000 - round(v * 1000)) < 1e-9 for v in o)        # whole millimetres: what the user types
    # the margin is the job's: line 3 on (line 2 is the approach from the robot's home)
    assert res.best.margin == pytest.approx(_job_margin(IRB, again, 3), abs=1e-12)
    assert 0 < res.best.margin <= 0.5


@pytest.mark.parametrize("by_hand", [(-250, 0, 200), (-250, 0, 100), (-200, -100, 250), (-300, 100, 150)])
def test_the_placement_found_beats_placements_by_hand(by_hand):
    """Where a user would put the job (where the examples run, higher, lower, to a side): each is clean,
    and the search's margin is at least as large."""
    rep = preflight(FAR, IRB, machine_for(IRB, by_hand))
    assert rep.clean()
    res = place_program(FAR, IRB, machine_for(IRB))
    assert res.best.margin >= _job_margin(IRB, rep, 3)


@pytest.mark.parametrize("spec,text", [(IRB, "z=150"), (IRB, "x=-300,y=-50"), (SCARA, "y=250,x=-280")])
def test_a_constraint_is_honoured(spec, text):
    c = parse_constraint(text)
    res = place_program(FAR, spec, machine_for(spec), c)
    assert res.best is not None, res.reason
    for k, want in zip("xyz", c.fixed):
        if want is not None:
            assert res.best.origin["xyz".index(k)] == pytest.approx(want)
    assert preflight(FAR, spec, machine_for(spec).with_origin_mm([v * 1000 for v in res.best.origin])).clean()


def test_a_program_too_big_fits_nowhere():
    res = place_program(HUGE, IRB, machine_for(IRB))
    assert res.best is None and res.reason and res.clean == 0
    # a constraint that puts the job out of reach: nowhere either
    res = place_program(FAR, IRB, machine_for(IRB), PlaceConstraint(z=2.0))
    assert res.best is None and "no work origin" in res.reason


def test_a_program_with_errors_of_its_own_is_not_placed(tmp_path, capsys):
    res = place_program("G21\nG1 X1\nG0 X1 @\nG0 X9\n", IRB, machine_for(IRB))
    assert res.best is None and [(f.line, f.code) for f in res.faults] == [(2, ErrorCode.UNDEFINED_FEED_RATE),
                                                                             (3, ErrorCode.UNEXPECTED_CHARACTER)]
    p = tmp_path / "bad.ngc"
    p.write_text("G21\nG1 X1\nG0 X9\n")
    assert main(["check", str(p), "--robot", "irb120", "--place"]) == 1
    out, err = capsys.readouterr()
    assert "line 2, column 1: error 20" in out and "cannot be placed" in err


def test_a_program_tied_to_the_robot_by_g92_cannot_be_placed():
    res = place_program("G92 X0 Y0 Z0\nG1 X10 F600\nG1 Y10\n", IRB, machine_for(IRB))
    assert res.best is None and "G92" in res.reason


def test_joint_margin_is_a_fraction_of_the_range():
    lo, hi = IRB.lower, IRB.upper
    mid = (lo + hi) / 2
    assert joint_margin(IRB, mid[None])[0] == pytest.approx(0.5)
    q = np.stack([mid, mid.copy()])
    q[1, 4] = hi[4] - math.radians(24)              # J5 24° from its upper limit (range 240°)
    m, j, d = joint_margin(IRB, q)
    assert (j, m, d) == (4, pytest.approx(0.1), pytest.approx(math.radians(24)))
    assert joint_margin(IRB, np.full((2, 6), np.nan))[0] == -math.inf


@pytest.mark.parametrize("bad", ["q=1", "z", "z=abc", "z=1,z=2", "x=inf", "x=1e9"])
def test_bad_constraints_are_refused(bad):
    with pytest.raises(ValueError):
        parse_constraint(bad)


def test_check_and_run_place_through_the_cli(tmp_path, capsys):
    prog = tmp_path / "far.ngc"
    prog.write_text(FAR)
    assert main(["check", str(prog), "--robot", "irb120"]) == 1
    capsys.readouterr()
    assert main(["check", str(prog), "--robot", "irb120", "--place"]) == 0
    out = capsys.readouterr().out
    assert "placed for irb120 at origin" in out and "joint margin" in out and "origins tried" in out
    assert "clean for irb120" in out
    assert main(["check", str(prog), "--robot", "irb120", "--place", "z=150", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["clean"] and data["placement"]["origin_mm"] == data["origin_mm"] and data["origin_mm"][2] == 150
    assert data["placement"]["tried"] >= data["placement"]["feasible"] >= 1
    # the origin found is one at which a plain check is clean
    assert main(["check", str(prog), "--robot", "irb120", "--origin", *map(str, data["origin_mm"])]) == 0
    capsys.readouterr()
    assert main(["run", str(prog), "--robot", "irb120", "--place", "z=150", "--json"]) == 0
    ran = json.loads(capsys.readouterr().out)
    assert ran["ran"] and ran["placement"]["origin_mm"] == data["origin_mm"] and ran["max_error_mm"] < 0.01


def test_fits_nowhere_and_usage_errors_through_the_cli(tmp_path, capsys):
    huge = tmp_path / "huge.ngc"
    huge.write_text(HUGE)
    assert main(["check", str(huge), "--robot", "irb120", "--place"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len([ln for ln in err if "fits nowhere" in ln]) == 1 and "Traceback" not in "".join(err)
    assert main(["check", str(huge), "--robot", "irb120", "--place", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["placement"] is None and data["reason"] and not data["clean"]
    assert main(["check", str(huge), "--robot", "irb120", "--place", "--origin", "0", "0", "0"]) == 2
    for argv in (["check", "--place", str(huge), "--robot", "irb120"],    # the program taken as the constraint
                 ["check", str(huge), "--robot", "irb120", "--place", "w=3"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "exclude each other" in err and "give the program before --place" in err and "w=3" in err


# ----- the dialect warnings -------------------------------------------------------------------------

def _codes(rep, code):
    return [f for f in rep.faults if f.code is code]


def test_a_long_dwell_is_a_warning_naming_its_line_and_a_short_one_is_not():
    rep = preflight("G0 X1\nG4 P150 (wait 150ms)\nG4 P10\nG0 X2\n", IRB)
    long = _codes(rep, ErrorCode.LONG_DWELL)
    assert [(f.line, f.severity) for f in long] == [(2, Severity.WARNING)] and "--dwell-ms" in long[0].message
    assert rep.clean() and not rep.clean(strict=True)
    assert rep.duration > 160       # read as seconds: 150 + 10 s


def test_dwell_ms_reads_p_as_milliseconds():
    ms = machine_for(IRB, dwell_ms=True)
    rep = preflight("G21\nG0 X1\nG4 P150\nG0 X2\n", IRB, ms)
    assert rep.clean(strict=True) and not _codes(rep, ErrorCode.LONG_DWELL)
    seconds = preflight("G21\nG0 X1\nG4 P0.15\nG0 X2\n", IRB)
    assert rep.duration == pytest.approx(seconds.duration, abs=1e-9)
    assert [b.seconds for b in rep.program.blocks if hasattr(b, "seconds")] == [pytest.approx(0.15)]
    # milliseconds over the threshold: still a warning, in seconds
    rep = preflight("G21\nG0 X1\nG4 P20000\nG0 X2\n", IRB, ms)
    assert [f.line for f in _codes(rep, ErrorCode.LONG_DWELL)] == [3]
    # over the maximum: the maximum is in seconds, the message says P's unit
    rep = preflight("G21\nG0 X1\nG4 P900000\nG0 X2\n", IRB, machine_for(IRB, dwell_ms=True, max_dwell=600.0))
    f = _codes(rep, ErrorCode.DWELL_TOO_LONG)[0]
    assert f.line == 3 and "900 s" in f.message and "milliseconds" in f.message


def test_dwell_ms_through_the_cli(tmp_path, capsys):
    p = tmp_path / "dwell.ngc"
    p.write_text("G21\nG0 X1\nG4 P150\nG0 X2\n")
    assert main(["check", str(p), "--robot", "irb120", "--json"]) == 0
    assert [f["code"] for f in json.loads(capsys.readouterr().out)["faults"]] == [107]
    assert main(["check", str(p), "--robot", "irb120", "--json", "--dwell-ms"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["faults"] == [] and data["program_time_s"] < 5


def test_g92_before_the_first_move_is_a_warning_and_after_it_is_not():
    rep = preflight("G21 G90\n(start here)\nG92 X0 Y0 Z0\nG0 X10\nG92 X0\nG0 X5\n", IRB)
    w = _codes(rep, ErrorCode.WORK_ZERO_AT_START)
    assert [(f.line, f.column, f.severity) for f in w] == [(3, 1, Severity.WARNING)]
    assert "--origin" in w[0].message and rep.clean() and not rep.clean(strict=True)
    assert not _codes(preflight("G0 X10\nG92 X0 Y0\nG0 X5\n", IRB), ErrorCode.WORK_ZERO_AT_START)
    as_lines = preflight(["G21 G90", "(start here)", "G92 X0 Y0 Z0", "G0 X10"], IRB)   # a program given as lines
    assert [f.line for f in _codes(as_lines, ErrorCode.WORK_ZERO_AT_START)] == [3]
    # what it warns about: the origin no longer moves the program
    text = "G92 X0 Y0 Z0\nG1 X10 F600\n"
    a = preflight(text, IRB, machine_for(IRB, (350, 0, 200)))
    b = preflight(text, IRB, machine_for(IRB, (300, 50, 150)))
    assert np.allclose(a.samples.position, b.samples.position)


def test_bench_place_small(capsys):
    assert main(["bench", "place", "--lines", "200", "--repeat", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = data["results"]
    assert [r["lines"] > 0 for r in rows] == [True, True] and rows[1]["lines"] >= 199
    for r in rows:   # each program is placed (it starts out of reach) and the time is measured
        assert r["origin_mm"] is not None and r["wall_s"] > 0 and r["verified"] >= r["clean"] >= 1


def test_place_with_a_cell_checks_every_candidate_for_collisions(tmp_path, capsys):
    prog = tmp_path / "far.ngc"
    prog.write_text(FAR)
    assert main(["check", str(prog), "--robot", "irb120", "--cell", "default", "--place", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["clean"] and data["cell"] is not None and data["placement"]["origin_mm"] == data["origin_mm"]
    # the origin found is clean with the cell in a plain check too
    assert main(["check", str(prog), "--robot", "irb120", "--cell", "default",
                 "--origin", *map(str, data["origin_mm"])]) == 0


#: a laser job that never writes Z (it runs at the robot's height), its zero 600 mm off
FLAT = "G21 G90\nG0 X600 Y0\nM4 S500\nG1 X640 F1200\nG1 Y40\nG1 X600\nG1 Y0\nM5\n"


def test_a_job_without_z_words_is_placed_in_x_and_y():
    """A 2-D laser or plotter program follows the origin in x and y only: it is placed there (the
    origin's z, which moves none of it, stays), and the origin found checks clean."""
    machine = machine_for(IRB)
    assert not preflight(FLAT, IRB, machine).clean()            # out of reach where it is written
    res = place_program(FLAT, IRB, machine)
    assert res.best is not None, res.reason
    assert res.best.origin[2] == pytest.approx(machine.origin_array[2])
    assert preflight(FLAT, IRB, machine.with_origin_mm([v * 1000 for v in res.best.origin])).clean()
    # a z given by the user is kept (it moves nothing of the job either)
    res_z = place_program(FLAT, IRB, machine, PlaceConstraint(z=0.15))
    assert res_z.best is not None and res_z.best.origin[2] == pytest.approx(0.15)
    # a program whose moves follow the origin in no axis still has no job
    tied = place_program("G21 G90\nG92 X0 Y0 Z0\nG1 X10 F600\n", IRB, machine)
    assert res_z.best is not None and tied.best is None and "follows the work origin" in tied.reason



@pytest.mark.parametrize("text,line", [
    ("G90\nG0 X1 Y1\nG1 X2 F100\n", 2),          # the first move, in no stated unit
    ("G90\nF100\nG20\nG1 X2\n", 2),               # a feed before G20: read as mm/min
    ("G17\nG10 L2 P1 X5\nG21\nG0 X1\n", 2),       # a work offset before G21
])
def test_a_length_before_the_units_are_given_is_a_warning(text, line):
    """LinuxCNC reads a program without G20/G21 in its machine's units (often inches), grbl in mm:
    armtwin reads mm and says so at the first length or feed (warning 109, never an error)."""
    rep = preflight(text, IRB)
    (w,) = _codes(rep, ErrorCode.UNITS_NOT_GIVEN)
    assert (w.line, w.severity) == (line, Severity.WARNING) and "G21 or G20" in w.message
    assert rep.clean() and not rep.clean(strict=True)


@pytest.mark.parametrize("text", ["G21 G90\nG0 X1\n", "G90\nG0 G20 X1\n", "(header)\nG0 C170\nG21\nG0 X1\n",
                                  "G90\nG0 C170\n"])
def test_units_given_before_any_length_are_no_warning(text):
    assert not _codes(preflight(text, IRB), ErrorCode.UNITS_NOT_GIVEN)
