"""Modal behaviour of the G-code interpreter: distances, units, offsets, planes, arcs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode import (Dwell, ErrorCode, MotionKind, Stop, StopKind, interpret, load_program, machine_for,
                                      parse_program)
from armtwin.controllers.gcode.interpreter import abc_of, orientation_matrix

IRB = robots.get("irb120")
SCARA = robots.get("scara")
M = machine_for(IRB, (400.0, 10.0, 100.0))   # origin at (0.4, 0.01, 0.1) m
O = np.array([0.4, 0.01, 0.1])


def ends(text, spec=IRB, machine=M):
    prog = load_program(text, spec, machine)
    assert prog.ok, [str(f) for f in prog.faults]
    return prog, [np.array(b.end) for b in prog.blocks if hasattr(b, "end")]


def mm(*xyz):
    return O + np.array(xyz) / 1000.0


def test_absolute_and_incremental():
    _, e = ends("G90 G0 X10 Y20 Z30\nG91 G0 X5\nG0 Y-5 Z-10\nG90 G0 X0\n")
    np.testing.assert_allclose(e, [mm(10, 20, 30), mm(15, 20, 30), mm(15, 15, 20), mm(0, 15, 20)], atol=1e-12)


def test_inches_and_feed_units():
    prog, e = ends("G20 G90 G1 X1 Y-2 Z0.5 F10\nG21 G1 X1 F600\n")
    np.testing.assert_allclose(e[0], mm(25.4, -50.8, 12.7), atol=1e-12)
    np.testing.assert_allclose(e[1], mm(1, -50.8, 12.7), atol=1e-12)
    assert prog.blocks[0].feed == pytest.approx(254.0 / 60000)   # 10 inch/min in m/s
    assert prog.blocks[1].feed == pytest.approx(600.0 / 60000)


def test_work_offsets_g54_to_g59_and_g10():
    _, e = ends("G10 L2 P2 X100 Y0 Z0\nG10 L2 P6 X0 Y-50 Z5\nG54 G0 X1 Y1 Z1\nG55 G0 X1\nG59 G0 Y1\n"
                "G54 G0 X0 Y0 Z0\n")
    # unprogrammed axes do not move when the system changes (G59: only Y is programmed)
    np.testing.assert_allclose(e, [mm(1, 1, 1), mm(101, 1, 1), mm(101, -49, 1), mm(0, 0, 0)], atol=1e-12)


def test_g10_l20_and_g92_and_g92_1():
    _, e = ends("G0 X10 Y10 Z10\nG92 X0 Y0\nG0 X5\nG92.1\nG0 X5\nG10 L20 P1 X0\nG0 X1\n")
    np.testing.assert_allclose(e, [mm(10, 10, 10), mm(15, 10, 10), mm(5, 10, 10), mm(6, 10, 10)], atol=1e-12)


def test_g28_alone_homes_every_axis():
    prog, e = ends("G0 X0 Y0 Z0 C90\nG28\n")
    np.testing.assert_allclose(e[1], prog.start, atol=1e-9)      # home flange position
    np.testing.assert_allclose(prog.blocks[-1].rot_end, prog.rot_start, atol=1e-12)   # and orientation
    assert all(b.kind is MotionKind.RAPID for b in prog.blocks) and prog.blocks[-1].line == 2


def test_g28_with_axis_words_homes_only_those_axes_through_the_point():
    """Issue 15.2: ``G28 Z50`` rapids to Z50, then Z alone goes home (grbl's and LinuxCNC's rule);
    X, Y and the tool orientation stay where they are."""
    prog, e = ends("G0 X0 Y0 Z0\nG28 Z50\n")
    home = prog.start
    np.testing.assert_allclose(e[1], mm(0, 0, 50), atol=1e-12)
    np.testing.assert_allclose(e[2], [O[0], O[1], home[2]], atol=1e-9)
    assert [b.line for b in prog.blocks] == [1, 2, 2]
    prog, e = ends("G0 X5 Y-5 Z0 C90\nG28 X0 C0\n")       # named: X and C; Y, Z stay
    np.testing.assert_allclose(e[1], mm(0, -5, 0), atol=1e-12)
    np.testing.assert_allclose(e[2], [home[0], O[1] - 0.005, O[2]], atol=1e-9)
    np.testing.assert_allclose(prog.blocks[-1].rot_end, prog.rot_start, atol=1e-12)


def test_g28_retract_at_the_end_of_a_cam_job_issue_reproduction():
    """``G0 X0 Y0 Z10 / G28 G91 Z0 / G90 / G1 X10 F600``: line 2 lifts Z only (no intermediate
    move: G91 Z0 is where the tool is), then line 4 moves along X only, not diagonally."""
    prog, e = ends("G0 X0 Y0 Z10\nG28 G91 Z0\nG90\nG1 X10 F600\n")
    home = prog.start
    assert [b.line for b in prog.blocks] == [1, 2, 4]
    np.testing.assert_allclose(e[1], [O[0], O[1], home[2]], atol=1e-9)
    last = prog.blocks[-1]
    np.testing.assert_allclose(last.start, e[1], atol=1e-12)
    np.testing.assert_allclose(last.end, [O[0] + 0.010, O[1], home[2]], atol=1e-9)


def test_dwell_pause_end_and_lines_after_the_end():
    prog = load_program("G4 P1.5\nM0\nG0 X1\nM30\nG0 X2\nE100\n", IRB, M)
    kinds = [type(b).__name__ for b in prog.blocks]
    assert kinds == ["Dwell", "Stop", "Motion", "Stop"]
    assert prog.blocks[0] == Dwell(1, 1.5) and prog.blocks[1].kind is StopKind.PAUSE
    assert prog.blocks[3] == Stop(4, StopKind.END) and prog.ended_at == 4
    assert [f.line for f in prog.faults] == [6]   # lines after M30 are still parsed


def _arc(text, spec=IRB):
    prog, _ = ends("G21 G90 G0 X0 Y0 Z0\nF600\n" + text)
    return [b for b in prog.blocks if b.kind is MotionKind.ARC]


@pytest.mark.parametrize("g,sign", [("G2", -1), ("G3", 1)])
def test_arcs_with_ij_both_directions(g, sign):
    (a,) = _arc(f"{g} X20 Y0 I10 J0\n")
    np.testing.assert_allclose(a.centre, mm(10, 0, 0), atol=1e-12)
    assert a.sweep == pytest.approx(sign * math.pi)
    assert a.radius_start == pytest.approx(0.010)


@pytest.mark.parametrize("g,r,sweep", [("G2", 10, -math.pi / 2), ("G3", 10, math.pi / 2),
                                       ("G2", -10, -1.5 * math.pi), ("G3", -10, 1.5 * math.pi)])
def test_arcs_with_r_short_and_long_way(g, r, sweep):
    (a,) = _arc(f"{g} X10 Y10 R{r}\n")
    assert a.sweep == pytest.approx(sweep)
    assert a.radius_start == pytest.approx(0.010)
    c = (np.array(a.centre) - O) * 1000
    assert np.linalg.norm(c[:2] - [0, 0]) == pytest.approx(10)   # the centre is 10 mm from the start
    assert np.linalg.norm(c[:2] - [10, 10]) == pytest.approx(10)  # and from the end


@pytest.mark.parametrize("g,sign", [("G2", -1), ("G3", 1)])
def test_full_circles(g, sign):
    (a, b) = _arc(f"{g} I5 J0\n{g} X0 Y0 I0 J-5\n")
    for arc in (a, b):
        assert arc.sweep == pytest.approx(sign * 2 * math.pi)
        np.testing.assert_allclose(arc.end, arc.start, atol=1e-12)


def test_arc_planes_g18_g19_and_helix():
    (a,) = _arc("G18 G2 X10 Z0 I5 K0\n")
    assert a.plane == (2, 0, 1)
    np.testing.assert_allclose(a.centre, mm(5, 0, 0), atol=1e-12)
    (b,) = _arc("G19 G3 Y10 Z0 J5 K0 X3\n")
    assert b.plane == (1, 2, 0) and b.sweep == pytest.approx(math.pi)
    np.testing.assert_allclose(b.end, mm(3, 10, 0), atol=1e-12)   # helical: X along the normal


def test_orientation_words():
    R = orientation_matrix(0, 0, 0)
    np.testing.assert_allclose(R @ [0, 0, 1], [0, 0, -1], atol=1e-12)   # tool points down
    np.testing.assert_allclose(R @ [1, 0, 0], [1, 0, 0], atol=1e-12)    # tool x along base x
    np.testing.assert_allclose(orientation_matrix(0, 0, 90) @ [1, 0, 0], [0, 1, 0], atol=1e-12)
    assert abc_of(orientation_matrix(10, -20, 30)) == pytest.approx((10, -20, 30))
    prog, _ = ends("G0 C45\n")
    np.testing.assert_allclose(prog.blocks[0].rot_end, orientation_matrix(0, 0, 45), atol=1e-12)
    # the program starts in the home orientation
    np.testing.assert_allclose(prog.rot_start, orientation_matrix(0, 0, 180), atol=1e-9)


def test_scara_tool_roll_is_c():
    prog, _ = ends("G0 C30\n", SCARA, machine_for(SCARA))
    np.testing.assert_allclose(prog.blocks[0].rot_end @ [1, 0, 0],
                               [math.cos(math.radians(30)), math.sin(math.radians(30)), 0], atol=1e-12)


# ----- per-robot machine data (RobotSpec.workcell) ---------------------------------------------

def test_machine_for_reads_the_robot_data_and_the_docs_agree():
    from dataclasses import replace
    from pathlib import Path

    from armtwin.robots.spec import WorkCell
    doc = (Path(__file__).resolve().parents[1] / "docs" / "GCODE.md").read_text()
    for name in robots.names():
        spec = robots.get(name)
        cell = spec.workcell
        m = machine_for(spec)
        assert m.origin == cell.origin and m.rapid_speed == cell.rapid_speed and m.acceleration == cell.acceleration
        row = next(ln for ln in doc.splitlines() if ln.startswith(f"| {name} |"))
        cols = [c.strip() for c in row.strip("|").split("|")]
        assert [float(v) / 1000.0 for v in cols[1].split(",")] == pytest.approx(cell.origin, abs=1e-12)
        assert (float(cols[2]), float(cols[3])) == (cell.rapid_speed, cell.acceleration)
        # --origin (mm) wins over the default, overrides over the rest
        m2 = machine_for(spec, (100.0, -20.0, 30.0), rapid_speed=0.25)
        assert m2.origin == pytest.approx((0.1, -0.02, 0.03)) and m2.rapid_speed == 0.25
        assert m2.acceleration == cell.acceleration
    # a new robot brings its data; none in the G-code code
    other = replace(IRB, name="irb120_copy", workcell=WorkCell((0.3, 0.1, 0.25), 0.8, 3.0))
    m = machine_for(other)
    assert (m.origin, m.rapid_speed, m.acceleration) == ((0.3, 0.1, 0.25), 0.8, 3.0)
    with pytest.raises(ValueError, match="work cell"):
        machine_for(replace(IRB, workcell=None))
    for bad in (dict(origin=(0, 0)), dict(origin=(0, 0, math.nan)), dict(rapid_speed=0.0), dict(acceleration=-1.0)):
        with pytest.raises(ValueError):
            WorkCell(**{"origin": (0.3, 0.0, 0.2), "rapid_speed": 0.5, "acceleration": 2.0, **bad})


# ----- audit: origin bounds, overflow-safe distances, absurd arcs, the path-point cap -----------

def test_origin_must_be_finite_and_within_10_m_of_the_base():
    from armtwin.controllers.gcode.config import MachineConfig
    for bad in ((1e300, 0, 0), (1e308, 1e308, 0), (10_000.001, 0, 0), (0, -7100, 7100)):
        with pytest.raises(ValueError, match="from the robot base"):
            machine_for(IRB, bad)
    with pytest.raises(ValueError, match="finite"):
        machine_for(IRB, (math.inf, 0, 0))
    with pytest.raises(ValueError, match="from the robot base"):
        MachineConfig(origin=(10.5, 0.0, 0.0))
    assert machine_for(IRB, (9999.0, 0, 0)).origin == pytest.approx((9.999, 0, 0))


def test_target_distance_never_overflows():
    from armtwin.controllers.gcode import GcodeError, parse_line
    from armtwin.controllers.gcode.interpreter import Interpreter
    from armtwin.controllers.gcode.rules import _check_reach, Fail
    it = Interpreter(IRB, M)
    fail = Fail(parse_line("G0 X1"))
    fail.allowed = (ErrorCode.TARGET_OUT_OF_RANGE,)
    for t in ([1e200, 0, 0], [1e308, 1e308, 1e308], [math.inf, 0, 0], [math.nan, 0, 0]):
        with pytest.raises(GcodeError) as e:
            _check_reach(t, it.context, fail)
        assert e.value.code == 36
    # offsets add up without bound in the program, the check still faults cleanly
    prog = load_program("G10 L2 P1 X1000000\nG10 L2 P2 X-1000000\nG54 G0 X1000000\nG55 G0 X-1000000\n", IRB, M)
    assert [(f.line, int(f.code)) for f in prog.faults] == [(3, 36), (4, 36)]


@pytest.mark.parametrize("text,col", [
    ("G2 X10 Y0 I999999 J0", 11),           # end within tolerance of a 1 km circle
    ("G2 I999999 J0", 4),                   # full circle
    ("G3 I0 J-999999", 4),
    ("G2 X10 Y0 R-999999", 11),             # the long way round a 1 km circle
    ("G18 G2 I999999 K0", 8),
    ("G19 G3 J0 K-9999 X5", 8),             # helix
    ("G2 X0 Y-0.2 I0 J-5000", 13),          # both ends near the origin, the circle's far side 10 m away
])
def test_arcs_reaching_beyond_10_m_are_faults(text, col):
    prog = load_program("G21 G90 G0 X0 Y0 Z0\nF600\n" + text + "\n", IRB, M)
    (f,) = prog.faults
    assert (f.line, f.column, int(f.code)) == (3, col, 36), str(f)
    assert "from the robot base" in f.message and "arc" in f.message
    assert sum(b.kind is MotionKind.ARC for b in prog.blocks if hasattr(b, "kind")) == 0


def test_large_radius_short_arcs_stay_legal():
    # a 1 km radius between two points 10 mm apart is almost a straight line: fine, and one chord
    from armtwin.controllers.gcode.planner import plan
    (a,) = _arc("G2 X10 Y0 R999999\n")
    assert a.radius_start == pytest.approx(999.999) and abs(a.sweep) < 1e-4
    assert plan([a], M).segment_count == 1
    (b,) = _arc("G2 X0 Y-0.2 I0 J-4000\n")       # a 4 m circle whose far side stays within 10 m
    assert abs(b.sweep) == pytest.approx(2 * math.pi, abs=1e-3)


def test_path_point_cap_names_the_line_and_bounds_the_blocks():
    # the moves need about 97 points (the rapid from home), then 23 per 100 mm line: line 5 passes 180
    m = machine_for(IRB, (400.0, 10.0, 100.0), max_path_samples=180)
    text = "G21 G90 G0 X0 Y0 Z0\nG1 X100 F3000\nG1 X0\nG1 X100\nG1 X0\nG1 X100\nG1 Q1\nG1 X0\n"
    prog = load_program(text, IRB, m)
    # issue 15.16: the cap bounds the time of a check too: nothing after the line that passes it is
    # read (the Q on line 7 is not reached)
    assert [(f.line, int(f.code)) for f in prog.faults] == [(5, 105)]
    assert "180 interpolation points" in prog.faults[0].message and "read" in prog.faults[0].message
    assert max(b.line for b in prog.blocks) == 4       # nothing from the line that passes the cap on
    assert prog.faults == interpret(parse_program(text), IRB, m).faults    # whole or streamed: the same


def test_lines_that_make_no_motion_count_against_the_cap():
    """Every line read costs a point, so a file of settings lines is bounded by the cap too."""
    m = machine_for(IRB, max_path_samples=1000)
    prog = load_program("G21 G90\n" * 5000, IRB, m)
    assert [(f.line, int(f.code)) for f in prog.faults] == [(1001, 105)]


def test_reading_stops_at_the_cap_line_issue_reproduction():
    """Issue 15.16: 50 MB of full circles took 31-102 s although the cap stopped the planning at
    line ~55,000: every later line was still interpreted. Now the pieces after the cap are never
    parsed (the pieces are made lazily: count the ones made)."""
    from armtwin.controllers.gcode import parser as P
    from armtwin.controllers.gcode.interpreter import _interpret_chunks
    m = machine_for(IRB, max_path_samples=20_000)
    data = b"G21 G90 G0 X0 Y0 Z0\nG1 F600\n" + b"G2 I1 J0\n" * 100_000 + b"G1 Q1\n"
    made = []

    def pieces():
        for chunk in P.parse_chunks(data, chunk_bytes=4096):
            made.append(chunk.lines[-1].lineno if len(chunk.lines) else 0)
            yield chunk
    prog = _interpret_chunks(pieces(), P.count_lines(data), IRB, m, None, 100, None)
    (cap,) = prog.faults
    assert int(cap.code) == 105 and cap.line < 1000 and prog.line_count == 100_003
    assert len(made) <= 3 and max(made) < 1500          # 100,000 lines in ~220 pieces: 2 or 3 were read
    # the estimate bounds what the planner and the preflight really make
    from armtwin.controllers.gcode.interpreter import Interpreter
    from armtwin.controllers.gcode.preflight import preflight
    text = ("G21 G90 G0 X0 Y0 Z0\nG1 C0 A10 B-5 F3000\nG2 X20 Y0 I10 J0 C90\nG3 X0 Y0 R10 Z5\nG1 X0.0001\n"
            "G2 I0.001 J0\nG2 I100 J0 A0 B0\nG18 G3 X0 Z5 I30 K0 Y40\n")
    it = Interpreter(IRB, M)
    from armtwin.controllers.gcode import parse_program
    for pl in parse_program(text).lines:
        it.execute(pl)
    rep = preflight(text, IRB, M)
    assert it.points >= rep.plan.segment_count + len(rep.samples) + len(rep.program.blocks)


def test_huge_arc_full_circle_costs_no_memory():
    import tracemalloc
    from armtwin.controllers.gcode.preflight import preflight
    tracemalloc.start()
    try:
        for text in ("G21 G90 F600\nG2 I999999 J0\n", "G21 G90 F600\nG2 X10 Y0 I999999 J0\n",
                     "G21 G90 F600\nG2 X10 Y0 R-999999\n"):
            rep = preflight(text, IRB)
            assert [int(f.code) for f in rep.faults] == [36]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20e6, f"{peak / 1e6:.0f} MB"
