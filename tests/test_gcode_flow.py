"""O-words (issue 17.3, LinuxCNC's): subroutines, conditions and loops expanded into the executed lines,
each under its own line number; every misuse a fault with its code, line and column; bounded."""

from __future__ import annotations

import csv
import time

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode import ErrorCode, interpret, load_program, parse_program
from armtwin.controllers.gcode import flow as F
from armtwin.controllers.gcode import parser as P
from armtwin.controllers.gcode.blocks import Motion
from armtwin.scripts.cli import main

IRB = robots.get("irb120")
HEAD = "G21 G90 G0 X0 Y0 Z10\nF600\n"


def _moves(text: str, spec=IRB) -> list[tuple[int, tuple[float, float, float]]]:
    """(line, end in work mm) of every move of a clean program."""
    prog = load_program(text, spec)
    assert prog.ok, [str(f) for f in prog.faults]
    origin = np.array(spec.workcell.origin) * 1000.0
    return [(b.line, tuple(np.round(np.asarray(b.end) * 1000.0 - origin, 6))) for b in prog.blocks
            if isinstance(b, Motion)]


def _xs(text: str) -> list[tuple[int, float]]:
    """(line, X in mm) of the moves after the first (the approach of HEAD)."""
    return [(ln, end[0]) for ln, end in _moves(HEAD + text)[1:]]


def _faults(text: str) -> list[tuple[int, int, ErrorCode]]:
    prog = load_program(text, IRB)
    return [(f.line, f.column, f.code) for f in prog.faults]


# ----- accepted: the executed motion -------------------------------------------------------------

def test_sub_and_call_pass_arguments_into_local_parameters():
    text = ("o100 sub\n"                       # 3
            "  G1 X[#1] Y[#2]\n"               # 4
            "  #1 = 99 #<mine> = 5\n"          # 5
            "o100 endsub\n"                    # 6
            "#1 = 7 #2 = 8 #3 = 9\n"           # 7
            "o100 call [10] [20]\n"            # 8
            "o100 call [30]\n"                 # 9: #2 keeps the caller's value (LinuxCNC: #N+1..#30 as in the caller)
            "G1 X#1 Y#2 Z#3\n")                # 10: #1..#30 restored after the calls
    assert [(ln, e[:2]) for ln, e in _moves(HEAD + text)[1:]] == [(4, (10.0, 20.0)), (4, (30.0, 8.0)), (10, (7.0, 8.0))]
    # a local named parameter of the sub is gone after it returns
    f = _faults(HEAD + text + "G1 X#<mine>\n")
    assert f == [(11, 5, ErrorCode.BAD_PARAMETER)]


def test_named_parameters_are_local_to_their_call_and_globals_are_shared():
    text = ("o<set> sub\n#<_g> = [#1 * 2]\n#<loc> = 1\no<set> endsub\n"
            "#<loc> = 50\no<set> call [4]\nG1 X#<_g> Y#<loc>\n")
    assert [e[:2] for _, e in _moves(HEAD + text)[1:]] == [(8.0, 50.0)]
    # the caller's local parameters are not visible inside the sub
    bad = "o<r> sub\nG1 X#<loc>\no<r> endsub\n#<loc> = 1\no<r> call\n"
    assert _faults(HEAD + bad) == [(4, 5, ErrorCode.BAD_PARAMETER)]


def test_if_elseif_else_takes_one_branch():
    text = ("o1 if [#1 GT 5]\nG1 X1\no1 elseif [#1 GT 2]\nG1 X2\no1 elseif [#1 GT 1]\nG1 X3\n"
            "o1 else\nG1 X4\no1 endif\nG1 X9\n")
    for value, want in ((6, [(5, 1.0)]), (3, [(7, 2.0)]), (1.5, [(9, 3.0)]), (0, [(11, 4.0)])):
        assert _xs(f"#1 = {value}\n" + text) == want + [(13, 9.0)], value
    # an if without else whose condition is false runs nothing
    assert _xs("o2 if [0]\nG1 X5\no2 endif\nG1 X6\n") == [(6, 6.0)]


def test_while_loop_runs_each_line_under_its_own_number():
    text = "#1 = 0\no101 while [#1 LT 4]\nG1 X[#1 * 10 + 5]\n#1 = [#1 + 1]\no101 endwhile\nG1 X99\n"
    assert _xs(text) == [(5, 5.0), (5, 15.0), (5, 25.0), (5, 35.0), (8, 99.0)]
    assert _xs("o1 while [0]\nG1 X5\no1 endwhile\nG1 X6\n") == [(6, 6.0)]      # tested first: never runs


def test_do_while_runs_once_at_least_and_repeat_counts():
    assert _xs("#1 = 10\no1 do\nG1 X#1\n#1 = [#1 + 1]\no1 while [#1 LT 3]\n") == [(5, 10.0)]
    assert _xs("#1 = 1\no1 do\nG1 X#1\n#1 = [#1 + 1]\no1 while [#1 LT 4]\n") == [(5, 1.0), (5, 2.0), (5, 3.0)]
    assert _xs("G91\no7 repeat [3]\nG1 X2\no7 endrepeat\nG90 G1 X0\n") == [(5, 2.0), (5, 4.0), (5, 6.0), (7, 0.0)]
    assert _xs("o7 repeat [0]\nG1 X2\no7 endrepeat\nG1 X3\n") == [(6, 3.0)]


def test_break_and_continue():
    text = ("#1 = 0\no1 while [#1 LT 10]\n#1 = [#1 + 1]\n"
            "o2 if [#1 EQ 2]\no1 continue\no2 endif\n"
            "o3 if [#1 EQ 4]\no1 break\no3 endif\n"
            "G1 X#1\no1 endwhile\nG1 X50\n")
    assert _xs(text) == [(12, 1.0), (12, 3.0), (14, 50.0)]
    # continue in a do loop tests its condition
    do = "#1 = 0\no1 do\n#1 = [#1 + 1]\no2 if [#1 LT 3]\no1 continue\no2 endif\nG1 X#1\no1 while [#1 LT 5]\n"
    assert _xs(do) == [(9, 3.0), (9, 4.0), (9, 5.0)]


def test_return_values_recursion_and_indirect_calls():
    text = ("o10 sub\no11 if [#1 LE 0]\no10 return [100]\no11 endif\nG1 X#1\no10 call [#1 - 1]\n"
            "o10 endsub [#1]\n"
            "o10 call [3]\nG1 Y#<_value> Z#<_value_returned>\n"
            "#5 = 10\no[#5] call [0]\nG1 Y#<_value>\n"
            "#<which> = 10\no#<which> call [0.5]\nG1 Z#<_value>\n")
    moves = _moves(HEAD + text)[1:]
    assert [(ln, e[0]) for ln, e in moves[:3]] == [(7, 3.0), (7, 2.0), (7, 1.0)]   # recursion 4 deep
    assert moves[3][0] == 11 and moves[3][1][1:] == (3.0, 1.0)      # endsub [#1] of the outermost call
    assert [(ln, e) for ln, e in moves[4:]] == [(14, (1.0, 100.0, 1.0)), (7, (0.5, 100.0, 1.0)),  # return [100]
                                                (17, (0.5, 100.0, 0.5))]


def test_named_labels_comments_and_n_words_on_o_lines():
    text = ("N10 O<Drill Hole> SUB (peck once)\nG1 Z[#1]\nG1 Z5\no<drillhole> endsub ; done\n"
            "o<drill hole> call [-2]\n(o1 in a comment is text)\n")
    assert [(ln, e[2]) for ln, e in _moves(HEAD + text)[1:]] == [(4, -2.0), (5, 5.0)]


def test_m2_ends_the_expansion_and_the_lines_of_a_loop_keep_their_faults_once():
    assert _xs("o1 repeat [3]\nG1 X1\nM2\no1 endrepeat\n") == [(4, 1.0)]
    res = parse_program(HEAD + "o1 repeat [3]\nG1 X1 E5\no1 endrepeat\n")
    assert [(f.line, f.column, f.code) for f in res.faults] == [(4, 7, ErrorCode.UNSUPPORTED_WORD)]
    # a fault of a line that depends on the pass is reported at its first pass, once
    text = "#1 = 2\no1 while [#1 GE 0]\nG1 X[10 / #1]\n#1 = [#1 - 1]\no1 endwhile\n"
    assert _faults(HEAD + text) == [(5, 9, ErrorCode.MATH_ERROR)]


def test_a_line_never_executed_still_has_its_syntax_checked():
    assert _faults(HEAD + "o1 if [0]\nG1 X1 @\no1 endif\n") == [(4, 7, ErrorCode.UNEXPECTED_CHARACTER)]
    assert _faults(HEAD + "o1 sub\nG7\no1 endsub\n") == [(4, 1, ErrorCode.UNSUPPORTED_G_CODE)]


# ----- refused: code, line, column ----------------------------------------------------------------

#: (program, line, column, code): every O-word fault (the flow band 50-59 and the caps)
FLOW_FAULTS = [
    ("o1 foo\n", 1, 4, ErrorCode.BAD_O_WORD),
    ("o1\n", 1, 1, ErrorCode.BAD_O_WORD),
    ("o1.5 sub\n", 1, 1, ErrorCode.BAD_O_WORD),
    ("o<a!> sub\n", 1, 2, ErrorCode.BAD_O_WORD),
    ("o1 if\no1 endif\n", 1, 4, ErrorCode.BAD_O_WORD),
    ("o1 sub [2]\no1 endsub\n", 1, 8, ErrorCode.BAD_O_WORD),
    ("o1 if [1] G0 X1\no1 endif\n", 1, 11, ErrorCode.BAD_O_WORD),
    ("o[1] if [1]\no1 endif\n", 1, 2, ErrorCode.BAD_O_WORD),
    ("o1 repeat [1] [2]\no1 endrepeat\n", 1, 15, ErrorCode.BAD_O_WORD),
    ("o1 repeat [-1]\no1 endrepeat\n", 1, 11, ErrorCode.BAD_O_WORD),
    ("o1 repeat [1.5]\no1 endrepeat\n", 1, 11, ErrorCode.BAD_O_WORD),
    ("G0 X1\no1 if [1]\nG0 X2\n", 2, 1, ErrorCode.BLOCK_NOT_CLOSED),
    ("o1 sub\nG0 X1\n", 1, 1, ErrorCode.BLOCK_NOT_CLOSED),
    ("o1 do\nG0 X1\n", 1, 1, ErrorCode.BLOCK_NOT_CLOSED),
    ("o1 repeat [2]\nG0 X1\n", 1, 1, ErrorCode.BLOCK_NOT_CLOSED),
    ("o1 while [0]\nG0 X1\n", 1, 1, ErrorCode.BLOCK_NOT_CLOSED),
    ("G0 X1\no2 endif\n", 2, 1, ErrorCode.BLOCK_MISMATCH),
    ("o1 else\n", 1, 1, ErrorCode.BLOCK_MISMATCH),
    ("o1 if [1]\no1 else\n o1 elseif [1]\no1 endif\n", 3, 2, ErrorCode.BLOCK_MISMATCH),
    ("o1 if [1]\no1 endif\no1 if [0]\no1 endif\n", 3, 1, ErrorCode.BLOCK_MISMATCH),
    ("o1 while [0]\no1 endrepeat\no1 endwhile\n", 2, 1, ErrorCode.BLOCK_MISMATCH),
    ("o9 call\n", 1, 1, ErrorCode.UNKNOWN_SUBROUTINE),
    ("G0 X1\no1 call\no1 sub\nG0 X2\no1 endsub\n", 2, 1, ErrorCode.UNKNOWN_SUBROUTINE),
    ("#1 = 3\no[#1] call\n", 2, 1, ErrorCode.UNKNOWN_SUBROUTINE),
    ("o1 sub\no2 sub\no2 endsub\no1 endsub\n", 2, 1, ErrorCode.BAD_SUBROUTINE),
    ("o1 sub\no1 endsub\no1 sub\no1 endsub\n", 3, 1, ErrorCode.BAD_SUBROUTINE),
    ("o1 if [1]\no2 sub\no2 endsub\no1 endif\n", 2, 1, ErrorCode.BAD_SUBROUTINE),
    ("G0 X1\no1 break\n", 2, 1, ErrorCode.BREAK_OUTSIDE_LOOP),
    ("o1 repeat [2]\no1 continue\no1 endrepeat\n", 2, 1, ErrorCode.BREAK_OUTSIDE_LOOP),
    ("o1 while [0]\no2 break\no1 endwhile\n", 2, 1, ErrorCode.BREAK_OUTSIDE_LOOP),
    ("o1 return\n", 1, 1, ErrorCode.RETURN_OUTSIDE_SUB),
    ("o1 endsub\n", 1, 1, ErrorCode.RETURN_OUTSIDE_SUB),
    ("o1 sub\no2 return\no1 endsub\n", 2, 1, ErrorCode.RETURN_OUTSIDE_SUB),
    ("o1 sub\no1 endsub\no1 call" + " [1]" * 31 + "\n", 3, 9 + 4 * 30, ErrorCode.TOO_MANY_ARGUMENTS),
    ("o1 while [1]\nG0 X1\no1 endwhile\n", 1, 1, ErrorCode.LOOP_LIMIT),
    ("o1 do\nG0 X1\no1 while [1]\n", 1, 1, ErrorCode.LOOP_LIMIT),
    ("o1 repeat [10001]\nG0 X1\no1 endrepeat\n", 1, 11, ErrorCode.LOOP_LIMIT),
    ("o1 sub\no1 call\no1 endsub\no1 call\n", 2, 1, ErrorCode.CALL_TOO_DEEP),
    ("o1 if [1/0]\no1 endif\n", 1, 9, ErrorCode.MATH_ERROR),
    ("o1 sub\no1 endsub\no1 call [#<nope>]\n", 3, 10, ErrorCode.BAD_PARAMETER),
]


@pytest.mark.parametrize("text,line,col,code", FLOW_FAULTS)
def test_every_misuse_has_its_code_line_and_column(text, line, col, code):
    for prog in (load_program(text, IRB), interpret(parse_program(text), IRB)):
        errors = [(f.line, f.column, f.code) for f in prog.faults if f.severity.value == "error"]
        assert errors and errors[0] == (line, col, code), [str(f) for f in prog.faults]
        assert not prog.ok
    res = parse_program(text)
    assert not res.ok and all("\n" not in str(f) for f in res.faults)


def test_every_flow_code_is_tested():
    assert {c for _, _, _, c in FLOW_FAULTS} >= {c for c in ErrorCode if 50 <= c < 60}


def test_a_block_fault_keeps_the_whole_program_from_running_and_names_both_ends():
    prog = load_program(HEAD + "o1 if [1]\nG1 X5\no2 endif\n", IRB)
    got = [(f.line, f.code) for f in prog.faults]
    assert got == [(3, ErrorCode.BLOCK_NOT_CLOSED), (5, ErrorCode.BLOCK_MISMATCH)]
    assert not prog.blocks
    assert "o1 if (line 3)" in str(prog.faults[1])


def test_the_caps_bound_time_and_are_faults(monkeypatch):
    t0 = time.perf_counter()
    f = _faults(HEAD + "o1 while [1]\no2 while [1]\nG1 X1\no2 endwhile\no1 endwhile\n")
    assert f[0] == (4, 1, ErrorCode.LOOP_LIMIT) and time.perf_counter() - t0 < 30
    # nested loops within the iteration cap still stop at the executed-lines cap (fault 105)
    monkeypatch.setattr(F, "MAX_EXECUTED_LINES", 5000)
    text = HEAD + "o1 repeat [100]\no2 repeat [100]\n#1 = [#1 + 1]\no2 endrepeat\no1 endrepeat\nG1 X1\n"
    f = _faults(text)
    assert [c for _, _, c in f] == [ErrorCode.PROGRAM_TOO_LONG] and f[0][0] in range(3, 8)


def test_the_fast_path_and_the_checking_path_expand_alike():
    text = HEAD + ("o100 sub\nG1 X[#1] (c)\nN5 G1 Y2\no100 endsub\n#1 = 0\no1 while [#1 LT 3]\no100 call [#1]\n"
                   "#1 = [#1 + 1]\no1 endwhile\n%\nM2\n")
    raw = P.split_lines(text)
    fast = list(F.expand_chunks(raw, P.LINE_READER))
    slow = list(F.expand_chunks(raw, P.LINE_READER, fast=False))
    assert [tuple(c.lines) for c in fast] == [tuple(c.lines) for c in slow]
    assert len([pl for c in fast for pl in c.lines]) == 2 + 2 * 3 + 1


def test_pieces_whole_and_line_ends_give_the_same_program(monkeypatch):
    text = HEAD + "o1 repeat [3]\nG91 G1 X1\no1 endrepeat\nG90\no2 if [1]\nG1 Y3\no2 endif\n"
    want = [(b.line, tuple(b.end)) for b in load_program(text, IRB).blocks]
    monkeypatch.setattr(P, "CHUNK_BYTES", 7)
    for src in (text, text.replace("\n", "\r\n"), text.replace("\n", "\r").encode()):
        assert [(b.line, tuple(b.end)) for b in load_program(src, IRB).blocks] == want
        assert [(b.line, tuple(b.end)) for b in interpret(parse_program(src), IRB).blocks] == want


def test_an_o_word_that_does_not_start_its_line_is_refused():
    assert _faults("G0 X1 o1 sub\n")[0] == (1, 7, ErrorCode.UNSUPPORTED_WORD)


# ----- the CLI --------------------------------------------------------------------------------------

def test_check_reports_a_runaway_loop_with_its_line(tmp_path, capsys):
    p = tmp_path / "loop.ngc"
    p.write_text(HEAD + "#1 = 0\no1 while [#1 LT 5]\nG1 X1\no1 endwhile\n")
    assert main(["check", str(p), "--robot", "irb120"]) == 1
    out = capsys.readouterr().out
    assert "line 4, column 1: error 58 (loop_limit)" in out


def test_run_logs_the_lines_of_a_loop_under_their_own_numbers(tmp_path, capsys):
    p = tmp_path / "square.ngc"
    p.write_text("G21 G90 G0 X0 Y0 Z10\nF3000\n#<side> = 20\no<edge> sub\n  G91 G1 X[#1] Y[#2]\n  G90\n"
                 "o<edge> endsub\no1 repeat [2]\n  o<edge> call [#<side>] [0]\n  o<edge> call [0] [#<side>]\n"
                 "  #<side> = [-#<side>]\no1 endrepeat\nG0 Z20\n")
    assert main(["check", str(p), "--robot", "irb120"]) == 0
    log = tmp_path / "sq.csv"
    assert main(["run", str(p), "--robot", "irb120", "--log", str(log)]) == 0
    capsys.readouterr()
    rows = list(csv.reader(log.open()))
    lines = [int(r[1]) for r in rows[1:]]
    assert set(lines) == {1, 5, 13}
    # the four moves of line 5 come back to the start: the square is closed
    x, y = (np.array([float(r[k]) for r in rows[1:]]) for k in (2, 3))
    on5 = np.array(lines) == 5
    assert np.ptp(x[on5]) == pytest.approx(20.0, abs=0.01) and np.ptp(y[on5]) == pytest.approx(20.0, abs=0.01)
    first, last = np.flatnonzero(on5)[[0, -1]]
    assert np.hypot(x[first] - x[last], y[first] - y[last]) < 0.05
