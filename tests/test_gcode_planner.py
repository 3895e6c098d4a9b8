"""Motion planner: feed and acceleration limits (property test), junctions, arcs, sampling."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from armtwin import robots
from armtwin.controllers.gcode import load_program, machine_for
from armtwin.controllers.gcode.planner import junction_speed_sq, plan

IRB = robots.get("irb120")
M = machine_for(IRB)

moves = st.lists(st.tuples(st.sampled_from(["G0", "G1"]),
                           st.floats(-40, 40), st.floats(-40, 40), st.floats(0, 20),
                           st.integers(30, 6000)), min_size=1, max_size=8)


@settings(max_examples=40, deadline=None)
@given(moves)
def test_plan_respects_feed_and_acceleration(ms):
    text = "G21 G90\n" + "".join(f"{g} X{x:.3f} Y{y:.3f} Z{z:.3f} F{f}\n" for g, x, y, z, f in ms)
    prog = load_program(text, IRB, M)
    assert prog.ok
    pl = plan(prog.blocks, M)
    if pl.segment_count == 0:
        return
    dt = 0.002
    ps = pl.sample_every(dt)
    # speed of the profile: never above the programmed feed of the move (G0: the rapid speed)
    limit = pl.v_nominal[ps.segment]
    assert np.all(ps.speed <= limit * (1 + 1e-9) + 1e-12)
    # tangential acceleration within the limit (the profile is continuous across chords)
    acc = np.abs(np.diff(ps.speed)) / np.diff(ps.t)
    assert acc.max() <= M.acceleration * (1 + 1e-6) + 1e-9
    # the positions agree with the speeds: distance between samples <= max speed * dt
    step = np.linalg.norm(np.diff(ps.position, axis=0), axis=1)
    vmax = np.maximum(ps.speed[:-1], ps.speed[1:]) + M.acceleration * dt
    assert np.all(step <= vmax * np.diff(ps.t) * (1 + 1e-6) + 1e-12)
    # starts and ends at rest, and at the programmed end point
    assert ps.speed[0] == pytest.approx(0, abs=1e-12) and ps.speed[-1] == pytest.approx(0, abs=1e-9)
    np.testing.assert_allclose(ps.position[-1], prog.blocks[-1].end, atol=1e-12)
    # a long enough move reaches its feed
    total = sum(np.linalg.norm(np.subtract(b.end, b.start)) for b in prog.blocks)
    assert pl.duration >= total / max(M.rapid_speed, max(b.feed for b in prog.blocks)) - 1e-9


def test_straight_line_time_is_the_trapezoid():
    prog = load_program("G21 G90 G0 X0 Y0 Z0\nG1 X100 F6000\n", IRB, M)
    pl = plan(prog.blocks[1:], M)   # 100 mm at 0.1 m/s, a = 2 m/s^2
    v, a, L = 0.1, M.acceleration, 0.1
    assert pl.duration == pytest.approx(L / v + v / a)


def test_junction_deviation_formula_and_corner_speed():
    d1 = np.array([[1.0, 0, 0]])
    d2 = np.array([[0.0, 1, 0]])
    v2 = junction_speed_sq(d1, d2, 2.0, 1e-5)
    s = math.sin(math.pi / 4)
    assert v2[0] == pytest.approx(2.0 * 1e-5 * s / (1 - s))
    assert junction_speed_sq(d1, -d1, 2.0, 1e-5)[0] == 0.0
    assert np.isinf(junction_speed_sq(d1, d1, 2.0, 1e-5)[0])
    # a 90° corner is taken at the junction speed, not at rest and not at full feed
    prog = load_program("G21 G90 G0 X0 Y0 Z0\nG1 X20 F3000\nG1 Y20\n", IRB, M)
    pl = plan(prog.blocks[1:], M)
    assert pl.v_exit[0] == pytest.approx(math.sqrt(v2[0]))


def test_dwell_stops_the_tool_and_adds_time():
    a = plan(load_program("G21 G0 X0 Y0 Z0\nG1 X20 F3000\nG1 X40\n", IRB, M).blocks[1:], M)
    b = plan(load_program("G21 G0 X0 Y0 Z0\nG1 X20 F3000\nG4 P1.5\nG1 X40\n", IRB, M).blocks[1:], M)
    assert a.v_exit[0] == pytest.approx(0.05)          # straight on at feed
    assert b.v_exit[0] == 0.0
    assert b.duration > a.duration + 1.5


def test_arc_chords_within_tolerance_and_centripetal_limit():
    prog = load_program("G21 G90 G0 X0 Y0 Z0\nG2 I10 J0 F60000\n", IRB, M)
    pl = plan(prog.blocks[1:], M)
    centre = np.array(prog.blocks[1].centre)
    mids = (pl.p0 + pl.p1) / 2
    dev = 0.010 - np.linalg.norm(mids - centre, axis=1)
    assert dev.max() <= M.arc_tolerance * (1 + 1e-9)
    assert np.allclose(np.linalg.norm(pl.p1 - centre, axis=1), 0.010)
    assert pl.v_cruise.max() <= math.sqrt(M.acceleration * 0.010) * (1 + 1e-9)


def test_geometric_samples_spacing_and_times():
    prog = load_program("G21 G90 G0 X0 Y0 Z0\nG1 X50 F1200\nG3 X0 Y0 R25\n", IRB, M)
    pl = plan(prog.blocks, M)
    gs = pl.geometric_samples(0.005)
    assert np.diff(gs.s).max() <= 0.005 + 1e-12
    assert np.all(np.diff(gs.t) >= -1e-12)
    ps = pl.sample(gs.t)   # sampling at the same times gives the same points
    np.testing.assert_allclose(ps.position, gs.position, atol=1e-9)


def test_preflight_slows_rapids_that_a_joint_cannot_follow():
    from armtwin.controllers.gcode.preflight import preflight
    rep = preflight("G0 C0\nG0 C180\n", IRB)   # J6 turns 180° twice at the rapid speed
    assert rep.clean(), [str(f) for f in rep.faults]
    assert np.all(rep.plan.rapid_scale < 1.0)
    assert np.all(rep.joint_speed <= IRB.max_velocity * (1 + 1e-6))
    # the same turn as a feed move too fast for J6 is a fault, not slowed
    rep = preflight("G21 G1 C0 F100000\n", IRB)
    assert [f.code.value for f in rep.faults] == [102]


# ----- audit: zero-length moves (orientation-only moves to the current pose) --------------------

@pytest.mark.parametrize("robot", ["irb120", "aubo_i5"])
@pytest.mark.parametrize("text", ["G0 B0", "G0 A0", "G0 C180", "G0 C90", "G1 B0 F600", "G0 X0 Y0 Z0 A0 B0\nG0 B0"])
def test_orientation_only_moves_to_the_current_pose_are_no_motion(robot, text):
    """On the IRB120 (home C180) and the AUBO-i5 (home C90) these are zero-length moves: no traceback."""
    from armtwin.controllers.gcode.preflight import preflight
    spec = robots.get(robot)
    rep = preflight("G21 " + text + "\n", spec)
    assert all(f.code.value == 106 for f in rep.faults), [str(f) for f in rep.faults]
    if rep.plan.segment_count == 0:
        assert [f.code.value for f in rep.faults] == [106]          # the program has no motion (an error: nothing to run)
        assert rep.lines_with_motion == 0
    else:
        assert rep.clean()


def test_zero_length_moves_between_moves_and_dwells():
    from armtwin.controllers.gcode.preflight import preflight
    text = "G21 G90 G1 X0 Y0 Z0 F3000\nG0 B0\nG4 P0.5\nG0 A0\nG1 X10\nG0 C90 B0\nG0 C90\nG1 X20 C0\nG1 X20.0000000001\n"
    rep = preflight(text, IRB)
    assert rep.clean(), [str(f) for f in rep.faults]
    lines = sorted(set(rep.plan.lines[rep.plan.block].tolist()))
    assert lines == [1, 5, 6, 8] and rep.lines_with_motion == 4     # the zero-length lines have no chord
    # the dwell still stops the tool and takes its time
    (t0,), (t1,), (ln,) = rep.plan.hold_intervals()
    assert ln == 3 and t1 - t0 == pytest.approx(0.5)
    ps = rep.plan.sample([0.5 * (t0 + t1)])
    assert ps.speed[0] == 0.0 and ps.line[0] == 3


def test_plan_of_zero_length_blocks_only():
    """Blocks made elsewhere (not by the interpreter) may have zero length: no chords, only the dwells."""
    from armtwin.controllers.gcode import Dwell
    from armtwin.controllers.gcode.interpreter import Motion, MotionKind
    from armtwin.controllers.gcode.planner import retime
    R = np.eye(3)
    p = (0.3, 0.0, 0.3)
    blocks = [Dwell(1, 0.5), Motion(2, MotionKind.LINEAR, p, p, R, R, 0.01), Dwell(3, 0.25),
              Motion(4, MotionKind.RAPID, p, p, R, R.copy(), 0.0)]
    pl = plan(blocks, M)
    assert pl.segment_count == 0 and pl.duration == pytest.approx(0.75)
    t0, t1, ln = pl.hold_intervals()
    np.testing.assert_allclose(t0, [0.0, 0.5])
    np.testing.assert_allclose(t1, [0.5, 0.75])
    assert ln.tolist() == [1, 3]
    assert len(pl.geometric_samples(0.005)) == 0
    assert retime(pl, np.full(2, 0.5)).duration == pytest.approx(0.75)
    with pytest.raises(ValueError, match="no motion"):
        pl.sample([0.1])
    # with a real move after them: the dwells before the zero-length blocks come first
    blocks.append(Motion(5, MotionKind.LINEAR, p, (0.31, 0.0, 0.3), R, R, 0.01))
    pl = plan(blocks, M)
    assert pl.segment_count == 1 and pl.t_start[0] == pytest.approx(0.75)


@pytest.mark.parametrize("robot,text", [("irb120", "G0 C90"), ("irb120", "G1 A10 B-10 F600"),
                                        ("aubo_i5", "G0 C0"), ("aubo_i5", "G1 B15 F600"), ("scara", "G0 C0")])
def test_orientation_only_moves_turn_about_a_fixed_tool_point(robot, text):
    from armtwin.controllers.gcode.interpreter import abc_of, orientation_matrix
    from armtwin.controllers.gcode.preflight import preflight
    spec = robots.get(robot)
    rep = preflight(text + "\n", spec)
    assert rep.clean(), [str(f) for f in rep.faults]
    ps = rep.plan.sample_every(rep.machine.control_period)
    np.testing.assert_allclose(ps.position, np.broadcast_to(rep.program.start, ps.position.shape), atol=1e-12)
    assert rep.duration > 0 and ps.speed.max() > 0
    words = dict((w[0], float(w[1:])) for w in text.split()[1:] if w[0] in "ABC")
    if spec.roll_only:
        return
    a, b, c = abc_of(rep.program.rot_start)
    want = orientation_matrix(words.get("A", a), words.get("B", b), words.get("C", c))
    np.testing.assert_allclose(ps.rotation[-1], want, atol=1e-9)
    np.testing.assert_allclose(ps.rotation[0], rep.program.rot_start, atol=1e-9)


def test_plan_refuses_more_chords_than_the_cap():
    """Blocks that did not come through the interpreter's point count still cannot blow up the planner."""
    prog = load_program("G21 G90 G0 X0 Y0 Z0\nG1 X10 F600\nG2 I20 J0\n", IRB, M)
    assert prog.ok
    small = machine_for(IRB, max_path_samples=100)
    with pytest.raises(ValueError, match=r"^line 3: .*more than 100 chords"):
        plan(prog.blocks, small)
