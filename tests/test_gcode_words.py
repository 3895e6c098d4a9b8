"""The words that blocked the most real programs (issue 17.3): path control G61 / G61.1 / G64 P Q,
arc centre mode G90.1 / G91.1, a zero off-plane arc word (K0 on G17), G53, M1 with the optional
stop, M17/M18/M84, grbl host command lines. Each on both sides: accepted with its meaning, refused
with its code, line and column."""

from __future__ import annotations

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode import ErrorCode, Severity, StopKind, load_program, machine_for, parse_program
from armtwin.controllers.gcode.blocks import Junction, Motion
from armtwin.controllers.gcode.planner import plan
from armtwin.scripts.cli import main

IRB = robots.get("irb120")
M = machine_for(IRB)
START = "G21 G90 G17\nG0 X0 Y0 Z10\n"


def _motions(prog):
    return [b for b in prog.blocks if isinstance(b, Motion)]


def _block_entry_speeds(text: str, machine=M) -> tuple[list[float], float]:
    """The path speed at the start of every motion block (m/s) and the program time (s)."""
    prog = load_program(START + text, IRB, machine)
    assert prog.ok, prog.faults
    pl = plan(prog.blocks, machine)
    first = np.searchsorted(pl.block, np.arange(len(pl.motions)))
    return [float(pl.v_entry[i]) for i in first], pl.duration


def _only_fault(text: str, machine=M):
    prog = load_program(text, IRB, machine)
    errors = [f for f in prog.faults if f.severity is Severity.ERROR]
    assert len(errors) == 1, prog.faults
    return errors[0]


# ----- G61 / G61.1 / G64 P Q ------------------------------------------------------------------------

CORNERS = "G1 X20 F3000\nY20\nX40 Y20\nX60\n"      # corner, corner, collinear


def test_path_control_modes_change_the_corner_speeds():
    blend, t_blend = _block_entry_speeds("G64\n" + CORNERS)
    wide, t_wide = _block_entry_speeds("G64 P0.5\n" + CORNERS)
    exact_path, t_path = _block_entry_speeds("G61\n" + CORNERS)
    exact_stop, t_stop = _block_entry_speeds("G61.1\n" + CORNERS)
    # blocks: G0, X20, Y20 (after a 90° corner), X40 Y20 (corner), X60 (collinear)
    assert blend[2] > 0 and blend[4] > blend[2]                     # grbl's junction deviation: slow corner
    assert wide[2] > blend[2] and t_wide < t_blend                  # a 0.5 mm tolerance takes corners faster
    assert exact_path[2] == exact_path[3] == 0.0 and exact_path[4] > 0   # stops at corners, not between collinear moves
    assert exact_stop[2] == exact_stop[3] == exact_stop[4] == 0.0   # stops at the end of every move
    assert t_blend < t_path < t_stop
    # P0 is G64 alone (no tolerance: the machine's junction deviation)
    assert _block_entry_speeds("G64 P0\n" + CORNERS)[0] == pytest.approx(blend)


def test_the_mode_governs_the_end_of_the_moves_programmed_under_it():
    prog = load_program(START + "G61.1\nG1 X20 F3000\nG64 P0.1 Q0.01\nY20\nG20 G64 P0.01\nX1\n", IRB)
    kinds = [(m.junction, m.tolerance) for m in _motions(prog)]
    assert kinds[1] == (Junction.EXACT_STOP, None)
    assert kinds[2][0] is Junction.BLEND and kinds[2][1] == pytest.approx(0.1e-3)      # P in mm -> m
    assert kinds[3][1] == pytest.approx(0.01 * 25.4e-3)                                # P in inches under G20
    speeds, _ = _block_entry_speeds("G61.1\nG1 X20 F3000\nG64\nY20\nX40\n")
    assert speeds[2] == 0.0 and speeds[3] > 0      # the X20 move (G61.1) stops; the Y20 move (G64) blends


@pytest.mark.parametrize("text,col", [("G64 P-0.1", 5), ("G64 P0.1 Q-1", 10), ("G64 Q-0.5", 5)])
def test_negative_blending_tolerances_are_refused(text, col):
    f = _only_fault(START + text + "\n")
    assert (f.code, f.line, f.column) == (ErrorCode.BAD_BLEND_TOLERANCE, 3, col)
    assert "mm" in f.message


def test_p_and_q_belong_to_g64_only():
    f = _only_fault(START + "G61 P0.1\n")
    assert (f.code, f.line, f.column) == (ErrorCode.UNUSED_WORD, 3, 5)
    f = _only_fault(START + "G1 X1 Q0.1 F100\n")
    assert (f.code, f.column) == (ErrorCode.UNUSED_WORD, 7) and "G64" in f.message
    # G4 on the line takes P (its dwell); G64 then has no tolerance
    prog = load_program(START + "G4 P0.5 G64\nG1 X1 F100\n", IRB)
    assert prog.ok and _motions(prog)[-1].tolerance is None


# ----- G90.1 / G91.1 ---------------------------------------------------------------------------------

def test_absolute_arc_centres_give_the_arc_of_the_offsets():
    inc = _motions(load_program(START + "G0 X10 Y5\nG2 X20 Y5 I5 J0 F600\n", IRB))[-1]
    ab = _motions(load_program(START + "G0 X10 Y5\nG90.1 G2 X20 Y5 I15 J5 F600\n", IRB))[-1]
    assert ab.centre == pytest.approx(inc.centre) and ab.sweep == pytest.approx(inc.sweep)
    # under work offsets the centre is in program coordinates too
    off = _motions(load_program(START + "G10 L2 P1 X5 Y5\nG0 X10 Y5\nG90.1 G2 X20 Y5 I15 J5 F600\n", IRB))[-1]
    assert np.subtract(off.centre, ab.centre) == pytest.approx([0.005, 0.005, 0.0])
    # G91.1 goes back to offsets; modal across lines
    back = load_program(START + "G90.1\nG91.1\nG0 X10 Y5\nG2 X20 Y5 I5 J0 F600\n", IRB)
    assert _motions(back)[-1].centre == pytest.approx(inc.centre)


def test_absolute_arc_centre_needs_both_words():
    f = _only_fault(START + "G90.1 G2 X20 Y0 I10 F600\n")
    assert (f.code, f.line, f.column) == (ErrorCode.ARC_OFFSETS_MISSING, 3, 17)


def test_g90_1_and_g91_1_are_one_modal_group():
    (f,) = parse_program("G90.1 G91.1\n").faults
    assert (f.code, f.column) == (ErrorCode.MODAL_GROUP_VIOLATION, 7)


# ----- a zero off-plane arc word ----------------------------------------------------------------------

@pytest.mark.parametrize("plane,arc,zero", [
    ("G17", "G2 X10 Y0 I5 J0", "K0"), ("G18", "G2 X10 Z0 I5 K0", "J0"), ("G19", "G2 Y10 Z0 J5 K0", "I0"),
])
def test_a_zero_off_plane_word_is_accepted_and_changes_nothing(plane, arc, zero):
    base = START + "G0 X0 Y0 Z0\n" + plane + "\n"
    want = _motions(load_program(base + arc + " F600\n", IRB))[-1]
    prog = load_program(base + arc + " " + zero + " F600\n", IRB)
    assert prog.ok, prog.faults
    got = _motions(prog)[-1]
    assert got.centre == pytest.approx(want.centre) and got.sweep == pytest.approx(want.sweep)


def test_a_nonzero_off_plane_word_is_refused():
    line = "G17 G2 X10 Y0 I5 J0 K0.5 F600"
    f = _only_fault(START + "G0 X0 Y0 Z0\n" + line + "\n")
    assert (f.code, f.line, f.column) == (ErrorCode.ARC_OFFSET_OUT_OF_PLANE, 4, line.index("K") + 1)
    # K0 alone is no centre: the arc still needs its in-plane offsets
    f = _only_fault(START + "G2 X10 Y0 K0 F600\n")
    assert f.code is ErrorCode.ARC_OFFSETS_MISSING


# ----- G53 -------------------------------------------------------------------------------------------

def test_g53_moves_to_base_frame_coordinates_for_one_line():
    text = START + "G10 L2 P1 X7 Y-3 Z2\nG92 X1\nG53 G0 X400 Y20 Z300\nG1 X0 F600\n"
    for origin in (None, (300.0, 50.0, 150.0)):
        machine = machine_for(IRB, origin)
        prog = load_program(text, IRB, machine)
        assert prog.ok, prog.faults
        g53, after = _motions(prog)[-2:]
        assert g53.end == pytest.approx((0.400, 0.020, 0.300))        # the base frame, whatever the offsets
        # the next line is in work coordinates again: X0 is where X0 is without the G53 line
        ref = _motions(load_program(text.replace("G53 G0 X400 Y20 Z300\n", ""), IRB, machine))[-1]
        assert after.end[0] == pytest.approx(ref.end[0]) and after.end[1:] == pytest.approx(g53.end[1:])


def test_g53_uses_the_active_g0_or_g1_and_keeps_orientation_words_absolute():
    prog = load_program(START + "G1 F600\nG53 X400 Y0 Z300 C30\n", IRB)
    assert prog.ok
    m = _motions(prog)[-1]
    assert m.kind.value == "linear" and m.end == pytest.approx((0.4, 0.0, 0.3))


@pytest.mark.parametrize("text,why", [
    ("G0 X0 Y0\nG2 X10 Y0 I5 F600\nG53 X400 Y0", "G2 is active"),
    ("G91\nG53 G0 X400", "G91"),
    ("G80\nG53 X400", "G80 is active"),
])
def test_g53_is_refused_with_arcs_and_incremental_mode(text, why):
    f = _only_fault(START + text + "\n")
    last = text.split("\n")[-1]
    assert (f.code, f.line, f.column) == (ErrorCode.BAD_G53, 2 + text.count("\n") + 1, last.index("G53") + 1)
    assert why in f.message


@pytest.mark.parametrize("text,letter,why", [
    ("G0 G53 Z0", "Z", "mounting plane"),                 # LinuxCNC's and Fusion's retract to the machine's top
    ("G20\nG53 G0 Z-0.5", "Z", "-12.7 mm"),               # inches converted before the rule
    ("G53 G0 X0 Y0", "X", "own axis"),                    # a CNC's home corner
    ("G1 F600\nG53 Y0 X0", "X", "own axis"),
])
def test_g53_machine_home_idioms_are_refused_not_read_as_base_frame(text, letter, why):
    """``G53 G0 Z0`` means "up to the machine's home height" on a CNC; as base-frame coordinates it
    would put the tool on the robot's mounting plane: refused (38) at the axis word, never run."""
    f = _only_fault(START + text + "\n")
    last = text.split("\n")[-1]
    assert (f.code, f.line, f.column) == (ErrorCode.BAD_G53, 2 + text.count("\n") + 1, last.index(letter) + 1)
    assert why in f.message


def test_g53_next_to_the_base_axis_or_above_the_mounting_plane_is_accepted():
    prog = load_program(START + "G53 G0 X0.5 Y0 Z300\nG53 G0 X400 Y0 Z0.1\n", IRB)
    assert prog.ok, prog.faults
    assert [m.end for m in _motions(prog)[-2:]] == [pytest.approx((0.0005, 0, 0.3)), pytest.approx((0.4, 0, 0.0001))]


# ----- M1, M17/M18/M84, grbl host commands ----------------------------------------------------------

def test_m1_pauses_only_with_the_optional_stop():
    text = START + "G1 X10 F600\nM1\nG1 X20\n"
    off = load_program(text, IRB)
    assert off.ok and not [b for b in off.blocks if getattr(b, "kind", None) is StopKind.PAUSE]
    (note,) = off.faults
    assert (note.code, note.line, note.column, note.severity) == (ErrorCode.OPTIONAL_STOP_SKIPPED, 4, 1, Severity.NOTE)
    on = load_program(text, IRB, machine_for(IRB, optional_stop=True))
    assert on.ok and not on.faults
    assert [b.line for b in on.blocks if getattr(b, "kind", None) is StopKind.PAUSE] == [4]
    # the pause brings the tool to rest there (as M0 does)
    speeds, _ = _block_entry_speeds("G1 X10 F600\nM1\nG1 X20\n", machine_for(IRB, optional_stop=True))
    assert speeds[-1] == 0.0 and _block_entry_speeds("G1 X10 F600\nM1\nG1 X20\n")[0][-1] > 0


def test_stepper_codes_are_one_folded_note():
    prog = load_program("M17\n" + START + "G1 X10 F600\nM18\nM84\n", IRB)
    assert prog.ok
    (note,) = prog.faults
    assert (note.code, note.line, note.severity) == (ErrorCode.NO_EFFECT, 1, Severity.NOTE)
    assert "and 2 more such lines, the last on line 6" in note.message


def test_m_codes_of_one_group_still_conflict():
    (f,) = parse_program("M84 M17\n").faults
    assert (f.code, f.column) == (ErrorCode.MODAL_GROUP_VIOLATION, 5) and "steppers" in f.message


@pytest.mark.parametrize("line,col", [("$H", 1), ("  $X", 3), ("$J=G91 X10 F100", 1), ("?", 1), (" ? ", 2),
                                      ("$$ (settings)", 1), ("(home) $H", 8)])
def test_grbl_host_command_lines_are_skipped_with_a_note(line, col):
    text = START + line + "\nG1 X10 F600\n"
    for src in (text, text.encode()):
        res = parse_program(src)
        (note,) = res.faults
        assert (note.code, note.line, note.column, note.severity) == (
            ErrorCode.HOST_COMMAND_SKIPPED, 3, col, Severity.NOTE)
        assert res.ok and [p.lineno for p in res.lines] == [1, 2, 4]
        prog = load_program(src, IRB)
        assert prog.ok and _motions(prog)[-1].line == 4


def test_dollar_and_question_mark_elsewhere_are_still_faults():
    for line, col in (("G1 X1 $H", 7), ("G0 X1 ?", 7), ("G0 ?X1", 4)):
        (f,) = parse_program(line + "\n").faults
        assert (f.code, f.column) == (ErrorCode.UNEXPECTED_CHARACTER, col), f


def test_a_grbl_program_is_read_by_the_fast_path_and_folds_its_notes():
    from armtwin.controllers.gcode import parser as P
    text = "$H\n$X\n" + START + "".join(f"G1 X{i % 50} Y{i % 7} F900\n" for i in range(500)) + "?\n"
    raw = P.split_lines(text)
    notes: list = []
    assert P._scan_clean(text, raw, 1, notes) is not None and [n.line for n in notes] == [1, 2, len(raw)]
    (note,) = parse_program(text).faults
    assert note.line == 1 and f"the last on line {len(raw)}" in note.message


def test_check_and_run_take_optional_stop(tmp_path, capsys):
    prog = tmp_path / "m1.ngc"
    prog.write_text(START + "G1 X10 F600\nM1\nG1 X20\nM84\n")
    assert main(["check", str(prog), "--robot", "irb120"]) == 0
    out = capsys.readouterr().out
    assert "line 4, column 1: note 62" in out and "line 6, column 1: note 61" in out and "2 note(s)" in out
    assert main(["check", str(prog), "--robot", "irb120", "--optional-stop"]) == 0
    out = capsys.readouterr().out
    assert "note 62" not in out and "1 note(s)" in out
    assert main(["check", str(prog), "--robot", "irb120", "--strict"]) == 0     # notes never count
    assert main(["run", str(prog), "--robot", "irb120", "--optional-stop"]) == 0
    assert "pause (M0, or M1 with --optional-stop) at line(s) 4" in capsys.readouterr().out
    assert main(["run", str(prog), "--robot", "irb120"]) == 0
    assert "pause" not in capsys.readouterr().out


# ----- the arc-end rule (issue 17.4): LinuxCNC's documented rule, inch and mm ------------------------

def _arc_end(r: float, d: float, units: str = "G21") -> str:
    """A quarter arc from X0 Y0 around the centre (r, 0) whose end is ``d`` farther out than the start."""
    return f"{units} G90 G0 X0 Y0 Z0\nG3 X{r:.6f} Y{r + d:.6f} I{r:.6f} J0 F6\n"


@pytest.mark.parametrize("units,r,d,ok", [
    ("G21", 1.0, 0.004, True), ("G21", 1.0, 0.006, False),          # 0.005 mm (and 0.1 % of 1 mm)
    ("G21", 20.0, 0.019, True), ("G21", 20.0, 0.021, False),        # 0.1 % of 20 mm beyond 0.005 mm
    ("G21", 1000.0, 0.49, True), ("G21", 1000.0, 0.51, False),      # 0.5 mm however large the radius
    ("G20", 0.2, 0.0004, True), ("G20", 0.2, 0.0006, False),        # 0.0005 inch (0.0127 mm)
    ("G20", 60.0, 0.049, True), ("G20", 60.0, 0.051, False),        # 0.05 inch (0.1 % of 60 inch is 0.06)
])
def test_the_arc_end_rule_is_linuxcncs(units, r, d, ok):
    prog = load_program(_arc_end(r, d, units), IRB)
    if ok:
        assert prog.ok, prog.faults
        (arc,) = [m for m in _motions(prog) if m.kind.value == "arc"]
        scale = 25.4e-3 if units == "G20" else 1e-3
        assert arc.radius_end - arc.radius_start == pytest.approx(d * scale, rel=1e-3)   # a spiral to the end
    else:
        (f,) = prog.faults
        assert (f.code, f.line, f.column) == (ErrorCode.ARC_RADIUS_MISMATCH, 2, prog_line_col(_arc_end(r, d, units)))
        assert ("inch" if units == "G20" else "mm") in f.message and "from the circle" in f.message


def prog_line_col(text: str) -> int:
    return text.split("\n")[1].index("I") + 1


def test_a_grbl_arc_slightly_off_its_circle_is_accepted_and_the_next_arcs_start_at_its_end():
    """grbl_SO2_helloworld: an arc ends 0.0023 mm off a 1.63 mm circle; the 20 arcs after it are
    programmed from its programmed end and must start there."""
    lines = ["G21 G90 G0 X0 Y0 Z0", "G2 X3.2623 Y0 I1.63 J0 F600"]
    x = 3.2623
    for k in range(20):
        lines.append(f"G{2 + k % 2} X{x + 2:.4f} Y0 I1 J0")
        x += 2
    prog = load_program("\n".join(lines) + "\n", IRB)
    assert prog.ok, prog.faults
    arcs = [m for m in _motions(prog) if m.kind.value == "arc"]
    assert len(arcs) == 21
    origin = np.array(machine_for(IRB).origin)
    assert np.subtract(arcs[0].end, origin) * 1000 == pytest.approx([3.2623, 0, 0], abs=1e-9)
    for a, b in zip(arcs, arcs[1:]):
        assert b.start == a.end and b.radius_start == pytest.approx(b.radius_end)   # on their circles
    assert arcs[0].radius_end - arcs[0].radius_start == pytest.approx(0.0023e-3, abs=1e-12)


def test_an_arc_ending_0_9_mm_off_a_1_m_circle_is_refused():
    prog = load_program("G21 G90 G0 X0 Y0 Z0\nG3 X10.009 Y-0.85 I0 J1000 F600\n", IRB)
    (f,) = prog.faults
    assert (f.code, f.line, f.column) == (ErrorCode.ARC_RADIUS_MISMATCH, 2, 19)
    assert "0.9 mm from the circle" in f.message and "at most 0.5 mm" in f.message


# ----- refused lines (issue 17.4): every fault of a line, each root cause once, units everywhere -------

def test_a_bad_word_does_not_lose_the_feed_rate_of_its_line():
    """`F16 S3500 M3` used to lose F16 (S and M3 were unsupported), and each of the 96 moves after it was a
    "no feed rate" finding; the same with words still unsupported."""
    text = "G21 G90\nG0 X0 Y0 Z10\nF16 E3500 M98\n" + "".join(f"G1 X{i % 10} Y{i % 7}\n" for i in range(96))
    prog = load_program(text, IRB)
    assert [(f.line, f.column, f.code) for f in prog.faults] == [
        (3, 5, ErrorCode.UNSUPPORTED_WORD), (3, 11, ErrorCode.UNSUPPORTED_M_CODE)]


def test_every_word_fault_of_a_line_is_reported_at_its_column():
    res = parse_program("D1 M98 G41 O1\nG0 X1 E2 X3 G41\n")
    assert [(f.line, f.column, f.code) for f in res.faults] == [
        (1, 1, ErrorCode.UNSUPPORTED_WORD), (1, 4, ErrorCode.UNSUPPORTED_M_CODE),
        (1, 8, ErrorCode.UNSUPPORTED_G_CODE), (1, 12, ErrorCode.UNSUPPORTED_WORD),
        (2, 7, ErrorCode.UNSUPPORTED_WORD), (2, 10, ErrorCode.REPEATED_WORD), (2, 13, ErrorCode.UNSUPPORTED_G_CODE)]
    # a character that is not G-code ends the reading of the line (after the word faults before it)
    (a, b) = parse_program("G0 E1 X1 @ D\n").faults
    assert (a.column, a.code, b.column, b.code) == (4, ErrorCode.UNSUPPORTED_WORD, 10, ErrorCode.UNEXPECTED_CHARACTER)


def test_a_parse_refused_line_is_also_checked_for_its_other_faults():
    prog = load_program("G21 G90\nG0 X0 Y0 Z10\nG1 X10 E5\n", IRB)
    assert [(f.line, f.column, f.code) for f in prog.faults] == [
        (3, 8, ErrorCode.UNSUPPORTED_WORD), (3, 1, ErrorCode.UNDEFINED_FEED_RATE)]
    # a word left without its consumer by the dropped one is not a second fault
    assert [f.code for f in load_program("G21 G90\nG0 X0 Y0 Z10\nG1 X10 F100 E1 Q2\n", IRB).faults] == [
        ErrorCode.UNSUPPORTED_WORD]


def test_no_feed_rate_is_reported_once_for_every_move_it_concerns():
    prog = load_program("G21 G90\nG0 X0 Y0 Z10\n" + "G1 X5\nG1 X10\nG2 X20 Y0 I5 J0\nG1 Y5\n", IRB)
    (f,) = prog.faults
    assert (f.line, f.code) == (3, ErrorCode.UNDEFINED_FEED_RATE)
    assert "3 later moves without a feed rate (the last on line 6) not reported again" in f.message
    assert "(mm/min)" in f.message
    (f,) = load_program("G20 G90\nG1 X1\n", IRB).faults
    assert "(inch/min)" in f.message


def test_a_refused_move_still_ends_where_it_was_programmed():
    """The next arcs and incremental moves start from the refused line's end, so they are not
    reported as faults of their own."""
    text = ("G21 G90 G0 X0 Y0 Z0\nG3 X10.009 Y-0.85 I0 J1000 F600\n"   # refused: 0.9 mm off its circle
            "G2 X20.009 Y-0.85 I5 J0\nG91 G1 X1\n")
    prog = load_program(text, IRB)
    assert [(f.line, f.code) for f in prog.faults] == [(2, ErrorCode.ARC_RADIUS_MISMATCH)]
    arc, line = _motions(prog)[-2:]
    origin = np.array(machine_for(IRB).origin)
    assert np.subtract(arc.start, origin) * 1000 == pytest.approx([10.009, -0.85, 0.0])
    assert np.subtract(line.end, origin) * 1000 == pytest.approx([21.009, -0.85, 0.0])
    assert line.feed == pytest.approx(600 / 60000)                 # F of the refused line


def test_a_refused_absurd_target_does_not_move_the_tool():
    prog = load_program("G21 G90 G0 X0 Y0 Z0\nG0 X900000\nG91 G0 X10\n", IRB)
    assert [(f.line, f.code) for f in prog.faults] == [(2, ErrorCode.TARGET_OUT_OF_RANGE)]
    origin = np.array(machine_for(IRB).origin)
    assert np.subtract(_motions(prog)[-1].end, origin) * 1000 == pytest.approx([10, 0, 0])


def test_a_line_that_cannot_be_read_keeps_nothing():
    # X1.2.3: the F after it cannot be trusted either; the next move has no feed rate
    prog = load_program("G21 G90\nG1 X1.2.3 F100\nG1 Y5\n", IRB)
    assert [(f.line, f.code) for f in prog.faults] == [(2, ErrorCode.BAD_NUMBER), (3, ErrorCode.UNDEFINED_FEED_RATE)]
    # a repeated word: the letter is dropped, the rest is kept
    prog = load_program("G21 G90\nG1 X1 X2 F100\nG1 Y5\n", IRB)
    assert [(f.line, f.code) for f in prog.faults] == [(2, ErrorCode.REPEATED_WORD)]


# ----- F0 (grbl's and LinuxCNC's rule) ---------------------------------------------------------------

def test_f0_on_a_line_without_a_feed_move_is_accepted_and_leaves_no_feed_rate():
    """FreeCAD's posts write ``G0 F0.000000 Z6`` on rapids: accepted (grbl and LinuxCNC check F
    only when a feed move needs it); the next feed move gives its own F and runs at it."""
    prog = load_program(START + "G0 F0.000000 Z6\nG1 X10 F300\nF0\nG0 X5\nG1 X20 F120\n", IRB)
    assert prog.ok, prog.faults
    feeds = [m.feed for m in _motions(prog) if m.kind.value == "linear"]
    assert feeds == [pytest.approx(300 / 60000), pytest.approx(120 / 60000)]


@pytest.mark.parametrize("text,code,line,col", [
    ("G0 F0 Z6\nG1 X10", ErrorCode.UNDEFINED_FEED_RATE, 4, 1),     # F0 took the feed rate away
    ("G1 F200 X1\nF0\nX2", ErrorCode.UNDEFINED_FEED_RATE, 5, 1),   # even one given before
    ("G1 X10 F0", ErrorCode.BAD_FEED_RATE, 3, 8),                    # on the feed move itself
    ("G0 X0 Y0\nG2 I5 F0", ErrorCode.BAD_FEED_RATE, 4, 7),           # a full circle is a feed move
    ("G0 X1 F-1", ErrorCode.BAD_FEED_RATE, 3, 7),                    # negative: never a feed rate
])
def test_f0_is_refused_where_a_feed_move_needs_it(text, code, line, col):
    f = _only_fault(START + text + "\n")
    assert (f.code, f.line, f.column) == (code, line, col)


@pytest.mark.parametrize("text,unit", [
    ("G20\nG1 X1 F0", "inch/min"), ("G21\nG1 X1 F-3", "mm/min"),
    ("G20 G0 X0 Y0\nG2 X1 Y0 R0.1 F5", "inch"), ("G21 G0 X0 Y0\nG2 X10 Y0 R1 F5", "mm"),
    ("G20 G0 X0 Y0 Z0\nG3 X0.4 Y0.1 I0.2 J0 F5", "inch"), ("G20\nG64 P-1", "inch"),
    ("G20 G0 X0 Y0\nG2 X0.00005 Y-0.4 I39370 J0 F5", "inch"),
])
def test_numbers_in_messages_carry_their_unit(text, unit):
    (f,) = load_program(text + "\n", IRB).faults
    assert f" {unit}" in f.message, f


def test_every_word_local_fault_of_a_line_is_reported():
    scara = robots.get("scara")
    prog = load_program("G21 G90\nG1 X1 F0 A5 B3 I5 R2\nG1 X2\nG1 X3\n", scara)
    assert [(f.line, f.column, f.code) for f in prog.faults] == [
        (2, 7, ErrorCode.BAD_FEED_RATE), (2, 10, ErrorCode.ORIENTATION_NOT_SUPPORTED),
        (2, 13, ErrorCode.ORIENTATION_NOT_SUPPORTED), (2, 16, ErrorCode.UNUSED_WORD), (2, 19, ErrorCode.UNUSED_WORD)]
    # the moves left without a feed rate by F0 are its consequence: counted on it, not reported again
    assert "2 later moves without a feed rate (the last on line 4)" in prog.faults[0].message
    # a fault that is not about one word stops there (its cause may be the dropped word)
    (f,) = load_program("G21 G90 G0 X0 Y0\nG2 X10 Y0 I3 J0 F100\n", IRB).faults
    assert f.code is ErrorCode.ARC_RADIUS_MISMATCH


# ----- canned cycles G81 G82 G83 (issue 17.3: a drilling move pattern on a robot) -------------------

def _path(text: str, machine=M):
    """(line, kind or 'dwell', end in work mm rounded) of every block of a clean program."""
    prog = load_program(text, IRB, machine)
    assert prog.ok, prog.faults
    o = np.array(machine.origin)
    out = []
    for b in prog.blocks:
        if isinstance(b, Motion):
            out.append((b.line, b.kind.value, tuple(np.round((np.array(b.end) - o) * 1000, 3))))
        elif hasattr(b, "seconds"):
            out.append((b.line, "dwell", b.seconds))
    return out


def test_g81_drills_each_hole_and_returns_as_g98_and_g99_say():
    got = _path("G21 G90 G0 X0 Y0 Z20\nG98 G81 X10 Y5 Z-3 R2 F300\nX20\nG99 X30\nG80\nG0 Z20\n")
    assert got == [
        (1, "rapid", (0, 0, 20)),
        (2, "rapid", (10, 5, 20)), (2, "rapid", (10, 5, 2)), (2, "linear", (10, 5, -3)), (2, "rapid", (10, 5, 20)),
        (3, "rapid", (20, 5, 20)), (3, "rapid", (20, 5, 2)), (3, "linear", (20, 5, -3)), (3, "rapid", (20, 5, 20)),
        (4, "rapid", (30, 5, 20)), (4, "rapid", (30, 5, 2)), (4, "linear", (30, 5, -3)), (4, "rapid", (30, 5, 2)),
        (6, "rapid", (30, 5, 20))]


def test_g82_dwells_at_the_bottom_and_g83_pecks():
    got = _path("G21 G90 G0 X0 Y0 Z5\nG99 G82 X10 Z-3 R2 P0.5 F300\nG83 X20 Z-10 Q4\n")
    assert got[1:6] == [(2, "rapid", (10, 0, 5)), (2, "rapid", (10, 0, 2)), (2, "linear", (10, 0, -3)),
                        (2, "dwell", 0.5), (2, "rapid", (10, 0, 2))]
    pecks = [g for g in got if g[0] == 3]
    assert [p[2][2] for p in pecks if p[1] == "linear"] == [-2, -6, -10]     # R2, Q4 down to Z-10
    # over the hole at R (the G82 left the tool at R: no move down), out to R and back to 0.254 mm above each peck
    assert [p[2][2] for p in pecks if p[1] == "rapid"] == [2, 2, -1.746, 2, -5.746, 2]
    assert not [p for p in pecks if p[1] == "dwell"]                          # P belongs to G82


def test_canned_cycle_values_are_in_program_units_and_work_coordinates():
    a = _path("G21 G90 G0 X0 Y0 Z10\nG10 L2 P1 Z5\nG99 G81 X1 Z-2 R1 F100\n")
    assert a[-2] == (3, "linear", (1, 0, 3))                   # Z-2 in G54 (offset 5 mm)
    b = _path("G20 G90 G0 X0 Y0 Z1\nG99 G81 X0.5 Z-0.1 R0.05 F4\n")
    assert b[-2] == (2, "linear", (12.7, 0, -2.54)) and b[-1] == (2, "rapid", (12.7, 0, 1.27))


@pytest.mark.parametrize("text,at,why", [
    ("G81 X1 Y1 Z-2 F100", "G81", "needs R"),
    ("G81 X1 Y1 R2 F100", "G81", "needs Z"),
    ("G81 X1 Z3 R2 F100", "Z3", "above R"),
    ("G18 G81 X1 Z-2 R2 F100", "G81", "G17"),
    ("G91 G81 X1 Z-2 R2 F100", "G81", "G90"),
    ("G81 X1 Z-2 R2 L3 F100", "L3", "L"),
    ("G83 X1 Z-2 R2 F100", "G83", "needs Q"),
    ("G83 X1 Z-2 R2 Q0 F100", "Q0", "> 0"),
    ("G83 X1 Z-50 R2 Q0.01 F100", "Q0.01", "pecks"),
    ("G82 X1 Z-2 R2 P-1 F100", "P-1", "dwell"),
    ("G81 X1 Z-2 R2 F100\nG1 X0\nG83 X2", "G83", "needs Q"),      # R and Z are sticky, Q was never given
])
def test_bad_canned_cycles_are_refused(text, at, why):
    col = text.split("\n")[-1].index(at) + 1
    f = _only_fault("G21 G90 G0 X0 Y0 Z5\n" + text + "\n")
    assert (f.code, f.line, f.column) == (ErrorCode.BAD_CANNED_CYCLE, 2 + text.count("\n"), col), f
    assert why in f.message


def test_canned_cycles_need_a_feed_and_r_is_used_by_them_only():
    f = _only_fault("G21 G90 G0 X0 Y0 Z5\nG81 X1 Z-2 R2\n")
    assert (f.code, f.column) == (ErrorCode.UNDEFINED_FEED_RATE, 1)
    f = _only_fault("G21 G90 G0 X0 Y0 Z5\nG1 X1 R2 F100\n")
    assert (f.code, f.column) == (ErrorCode.UNUSED_WORD, 7)
