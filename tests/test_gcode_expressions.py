"""Parameters and expressions (issue 17.3, LinuxCNC's): values, precedence, functions, settings made
after their line, and every fault with its code, line and column."""

from __future__ import annotations

import math

import pytest

from armtwin import robots
from armtwin.controllers.gcode import ErrorCode, GcodeError, load_program, parse_line, parse_program
from armtwin.controllers.gcode import parser as P
from armtwin.controllers.gcode.blocks import Motion

IRB = robots.get("irb120")


def _x(expr: str, setup: str = "") -> float:
    """The value of X``expr`` after the lines ``setup``."""
    res = parse_program(setup + f"G0 X{expr}\n")
    assert res.ok, res.faults
    return res.lines[-1].words["X"]


@pytest.mark.parametrize("expr,want", [
    ("[1 + 2 * 3]", 7), ("[[1 + 2] * 3]", 9), ("[10 - 4 - 3]", 3), ("[2 ** 3 ** 2]", 64), ("[-2 ** 2]", 4),
    ("[8 / 2 / 2]", 2), ("[7 MOD 3]", 1), ("[-7 MOD 3]", 2), ("[7.5 mod -2]", -0.5),
    ("[1 EQ 1.00001]", 1), ("[1 NE 1.01]", 1), ("[2 GT 1]", 1), ("[2 GE 3]", 0), ("[1 LT 2 AND 2 GT 3]", 0),
    ("[0 OR 3]", 1), ("[1 XOR 1]", 0), ("[1 + 1 EQ 2]", 1),
    ("[SIN[30]]", 0.5), ("[COS[60]]", 0.5), ("[TAN[45]]", 1), ("[ASIN[1]]", 90), ("[ACOS[0]]", 90),
    ("[ATAN[1]/[1]]", 45), ("[ATAN[1]/[-1]]", 135), ("[SQRT[2] ** 2]", 2), ("[ABS[-3.5]]", 3.5),
    ("[EXP[LN[5]]]", 5), ("[FIX[-1.5]]", -2), ("[FUP[1.2]]", 2), ("[ROUND[2.5]]", 3), ("[ROUND[-2.5]]", -3),
    ("-[2]", -2), ("[- -3]", 3), ("[sin[30]]", 0.5), ("[ 1+2 ]", 3),
])
def test_expression_values(expr, want):
    assert _x(expr) == pytest.approx(want, abs=1e-12)


def test_parameters_numbered_named_indirect():
    setup = "#1 = 3\n#<Depth Of Cut> = [#1 * 2]\n#<_g> = 7\n#3 = 1\n#[#3 + 1] = 9\n"
    assert _x("#1", setup) == 3
    assert _x("#<depthofcut>", setup) == 6           # case and spaces do not count
    assert _x("#<_G>", setup) == 7
    assert _x("#2", setup) == 9                      # set through #[#3 + 1]
    assert _x("##3", setup) == 3                     # #[#3] = #1
    assert _x("#77", setup) == 0                     # an unset numbered parameter reads 0 (LinuxCNC)
    assert _x("-#1", setup) == -3
    assert _x("[EXISTS[#<_g>] + EXISTS[#<nope>]]", setup) == 1


def test_settings_take_effect_after_their_line():
    res = parse_program("#1 = 1\n#1 = 2 #2 = [#1 * 10] G0 X#1 Y#2\nG0 X#1 Y#2\n")
    assert [pl.words for pl in res.lines] == [{"X": 1, "Y": 0}, {"X": 2, "Y": 10}]   # #2 was unset: 0
    # a refused line sets nothing
    res = parse_program("#1 = 1\n#1 = 5 G0 X[1/0]\nG0 X#1\n")
    assert res.lines[-1].words == {"X": 1}


def test_a_parametric_program_means_the_same_as_its_plain_text():
    param = ("#<r> = 5\n#<feed> = 600\nG21 G90 G0 X0 Y0 Z10\nG1 Z0 F#<feed>\n"
             "G2 X[2 * #<r>] Y0 I#<r> J0\nG1 X[2 * #<r>] Y[#<r> / 2]\nG0 Z[#<r> + 5]\n")
    plain = "G21 G90 G0 X0 Y0 Z10\nG1 Z0 F600\nG2 X10 Y0 I5 J0\nG1 X10 Y2.5\nG0 Z10\n"
    a, b = load_program(param, IRB), load_program(plain, IRB)
    assert a.ok and b.ok
    ma = [m for m in a.blocks if isinstance(m, Motion)]
    mb = [m for m in b.blocks if isinstance(m, Motion)]
    assert [(m.start, m.end, m.kind, m.feed, m.sweep) for m in ma] == [(m.start, m.end, m.kind, m.feed, m.sweep)
                                                                     for m in mb]


def test_parameters_carry_across_the_pieces_of_a_long_file(monkeypatch):
    text = "#<x> = 0\n" + "#<x> = [#<x> + 1]\nG0 X#<x> Y0 Z10\n" * 300
    whole = load_program(text, IRB)
    monkeypatch.setattr(P, "CHUNK_BYTES", 64)
    pieces = load_program(text, IRB)
    assert whole.ok and pieces.ok and len(whole.blocks) == 300
    assert [m.end for m in whole.blocks] == [m.end for m in pieces.blocks]
    assert whole.blocks[-1].end[0] == pytest.approx(IRB.workcell.origin[0] + 0.300)


@pytest.mark.parametrize("line,code,col", [
    ("G0 X[1+2", ErrorCode.BAD_EXPRESSION, 5),
    ("G0 X[1 2]", ErrorCode.BAD_EXPRESSION, 8),
    ("G0 X[1 +]", ErrorCode.BAD_EXPRESSION, 9),
    ("G0 X[FOO[1]]", ErrorCode.BAD_EXPRESSION, 6),
    ("G0 X[SIN 30]", ErrorCode.BAD_EXPRESSION, 6),
    ("G0 X[ATAN[1]]", ErrorCode.BAD_EXPRESSION, 6),
    ("G0 X[AND 1]", ErrorCode.BAD_EXPRESSION, 6),
    ("G0 X1]", ErrorCode.UNEXPECTED_CHARACTER, 6),            # no [ or #: a stray character
    ("G0 X[1]]", ErrorCode.BAD_EXPRESSION, 8),
    ("#1", ErrorCode.BAD_EXPRESSION, 3),
    ("#1 =", ErrorCode.BAD_EXPRESSION, 5),
    ("G0 X" + "[" * 40 + "1" + "]" * 40, ErrorCode.BAD_EXPRESSION, 5 + 32),
    ("G0 X#<nope>", ErrorCode.BAD_PARAMETER, 5),
    ("G0 X#1.5", ErrorCode.BAD_PARAMETER, 5),
    ("G0 X#0", ErrorCode.BAD_PARAMETER, 5),
    ("#5220 = 1", ErrorCode.BAD_PARAMETER, 1),
    ("G0 X#5420", ErrorCode.BAD_PARAMETER, 5),
    ("#<a b!> = 1", ErrorCode.BAD_PARAMETER, 1),
    ("#<a = 1", ErrorCode.BAD_PARAMETER, 1),
    ("G0 X#", ErrorCode.BAD_PARAMETER, 5),
    ("G0 X[1/0]", ErrorCode.MATH_ERROR, 7),
    ("G0 X[1 MOD 0]", ErrorCode.MATH_ERROR, 8),
    ("G0 X[SQRT[-1]]", ErrorCode.MATH_ERROR, 6),
    ("G0 X[LN[0]]", ErrorCode.MATH_ERROR, 6),
    ("G0 X[ACOS[2]]", ErrorCode.MATH_ERROR, 6),
    ("G0 X[-8 ** 0.5]", ErrorCode.MATH_ERROR, 9),
    ("G0 X[10 ** 400]", ErrorCode.MATH_ERROR, 9),
    ("G0 X[EXP[1000]]", ErrorCode.MATH_ERROR, 6),
    ("G0 X[1e3]", ErrorCode.EXPONENT_NOT_ALLOWED, 7),
    ("G0 X[1] (open", ErrorCode.UNCLOSED_COMMENT, 9),
    ("G0 X[1] @", ErrorCode.UNEXPECTED_CHARACTER, 9),
    ("G0 X[2000000]", ErrorCode.NUMBER_OUT_OF_RANGE, 4),
    ("G0 X[1] E[2]", ErrorCode.UNSUPPORTED_WORD, 9),
    ("G0 X[1] X2", ErrorCode.REPEATED_WORD, 9),
])
def test_expression_faults_have_their_code_and_column(line, code, col):
    with pytest.raises(GcodeError) as e:
        parse_line(line, 4)
    assert (e.value.code, e.value.line, e.value.column) == (code, 4, col), str(e.value)
    assert "\n" not in str(e.value)


def test_a_word_given_by_an_expression_is_named_as_written():
    (f,) = parse_program("#1 = 2\nG0 X#1 E[#1 * 100]\n").faults
    assert (f.line, f.column, f.code) == (2, 8, ErrorCode.UNSUPPORTED_WORD)
    assert f.message.startswith("E[#1 * 100] (= E200)")
    # and a supported one takes its value
    assert parse_program("#1 = 2\nM3 S[#1 * 100]\n").lines[-1].words == {"S": 200}
    # semantic faults point at the word too
    (f,) = load_program("#1 = 0\nG21 G1 X1 F#1\n", IRB).faults
    assert (f.line, f.column, f.code) == (2, 11, ErrorCode.BAD_FEED_RATE)


def test_comments_with_brackets_and_hashes_are_comments():
    res = parse_program("G0 X1 (tool #3 [6 mm])\nG0 X2 ; #<not> [a parameter]\n")
    assert res.ok and [pl.words for pl in res.lines] == [{"X": 1}, {"X": 2}]


def test_the_trigonometry_is_in_degrees_as_linuxcncs():
    assert _x("[ATAN[0]/[-1]]") == pytest.approx(180.0)
    assert _x("[COS[#1]]", "#1 = 180\n") == pytest.approx(-1.0)
    assert math.isclose(_x("[SQRT[3] / 2]"), _x("[SIN[60]]"))
