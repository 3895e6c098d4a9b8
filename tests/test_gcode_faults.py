"""Where a fault points (issue 15.18): every fault of a line points at the word it names, not at
the first word with that letter; the class is closed by a property over random lines."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from armtwin import robots
from armtwin.controllers.gcode import ErrorCode, GcodeError, load_program, parse_line
from armtwin.controllers.gcode.parser import word_columns

IRB = robots.get("irb120")
SCARA = robots.get("scara")

#: how the column of each line fault is read: at the word the message names, or at a character
WORD = {ErrorCode.NUMBER_OUT_OF_RANGE, ErrorCode.UNSUPPORTED_WORD, ErrorCode.UNSUPPORTED_G_CODE,
        ErrorCode.UNSUPPORTED_M_CODE, ErrorCode.REPEATED_WORD, ErrorCode.MODAL_GROUP_VIOLATION,
        ErrorCode.BAD_LINE_NUMBER} | {c for c in ErrorCode if 20 <= c < 100}
CHARACTER = {ErrorCode.LINE_TOO_LONG, ErrorCode.NON_ASCII, ErrorCode.UNEXPECTED_CHARACTER, ErrorCode.UNCLOSED_COMMENT,
             ErrorCode.NESTED_COMMENT, ErrorCode.UNMATCHED_PAREN, ErrorCode.MISSING_VALUE, ErrorCode.BAD_NUMBER,
             ErrorCode.EXPONENT_NOT_ALLOWED}
#: word faults that may be about the line as a whole (column 0): a target (not an arc) beyond 10 m
WHOLE_LINE = {ErrorCode.TARGET_OUT_OF_RANGE}

_NAMED = re.compile(r"(?<![A-Za-z])([A-Z])([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))")


def test_every_line_fault_has_a_location_rule():
    """A new fault code must say how its column is read (this table) before it can pass."""
    assert WORD | CHARACTER == {c for c in ErrorCode if c < 100} and not WORD & CHARACTER


def _assert_points_at_what_it_names(text: str, code: ErrorCode, column: int, message: str) -> None:
    if code in CHARACTER:
        assert 1 <= column <= len(text) + 1, (text, code, column)
        if code is ErrorCode.MISSING_VALUE:     # the letter without a number
            assert text[column - 1].upper() in message, (text, column, message)
        return
    if column == 0:
        assert code in WHOLE_LINE, (text, code, message)
        return
    at = {c: (L, float(num)) for c, L, num in word_columns(text)}
    assert column in at, f"{text!r}: column {column} is not the start of a word ({code.slug}: {message})"
    named = {(L, float(num)) for L, num in _NAMED.findall(message)}
    assert at[column] in named, (f"{text!r}: column {column} is {at[column]}, but the message names "
                                 f"{sorted(named)}: {message}")


def _line_faults(prefix: str, line: str, spec=IRB):
    """(text, code, column, message) of the faults on the last line of ``prefix + line``."""
    prog = load_program(prefix + line + "\n", spec)
    last = prefix.count("\n") + 1
    return [(line, f.code, f.column, f.message) for f in prog.faults if f.line == last]


# ----- the issue's examples ---------------------------------------------------------------------

@pytest.mark.parametrize("prefix,line,code,col", [
    ("", "G21 G1 X10", ErrorCode.UNDEFINED_FEED_RATE, 5),                 # 20: the G1, not the G21
    ("G0 X0 Y0 Z0\n", "G21 G92 G1 X1 F100", ErrorCode.AXIS_COMMAND_CONFLICT, 9),   # 22: the motion code
    ("", "G21 G92", ErrorCode.AXIS_WORDS_MISSING, 5),                     # 23
    ("", "G21 G2 X10 F100", ErrorCode.ARC_OFFSETS_MISSING, 5),            # 26
    ("", "G21 G4", ErrorCode.DWELL_TIME_MISSING, 5),                      # 32
    ("", "G90 G10 P1 X0", ErrorCode.BAD_G10, 5),                          # 34 without L: the G10
    ("", "G90 G10 L2 P9 X0", ErrorCode.BAD_G10, 12),                      # 34: the P
    ("G21 G1\n", "Y0 X5", ErrorCode.UNDEFINED_FEED_RATE, 1),             # modal G1: the word that moves
    ("G21 G2\n", "F100 X5", ErrorCode.ARC_OFFSETS_MISSING, 6),           # modal G2: the same
])
def test_semantic_faults_point_at_the_g_word_at_fault(prefix, line, code, col):
    faults = _line_faults(prefix, line)
    assert [(c, column) for _, c, column, _ in faults] == [(code, col)], faults
    _assert_points_at_what_it_names(*faults[0])


def test_a_second_n_word_is_named_where_it_stands_issue_reproduction():
    """``N1 G0 X1 N1`` reported column 1 (the first N) with "a line number is a whole number"."""
    with pytest.raises(GcodeError) as e:
        parse_line("N1 G0 X1 N1")
    assert (e.value.code, e.value.column) == (ErrorCode.BAD_LINE_NUMBER, 10)
    assert e.value.fault.message == "N1: the N word must come first"
    with pytest.raises(GcodeError) as e:
        parse_line("N1.5 G0")
    assert e.value.column == 1 and "whole number" in e.value.fault.message


@pytest.mark.parametrize("line,col", [("G0 X1 X1", 7), ("G0 G0 X1", 4), ("M2 M2", 4), ("G1 G21 G20 X1", 8),
                                      ("X1 E2 E3", 4), ("G28.1 G38.2", 1), ("G0 G38.2", 4)])
def test_repeated_and_unsupported_words_point_at_the_one_at_fault(line, col):
    with pytest.raises(GcodeError) as e:
        parse_line(line)
    assert e.value.column == col, str(e.value)
    _assert_points_at_what_it_names(line, e.value.code, e.value.column, e.value.fault.message)


# ----- closing the class: any fault of any line ---------------------------------------------------

#: lines that raise every line fault (code 1-49), in various states
_SEEDS = [
    "G1 X1", "G1 X1 F0", "G1 G92 X1 F100", "G92", "G80 X1", "G0 X1 I5", "G1 X1 P2 F100", "G2 X10 F100",
    "G2 X10 R5 I5 F100", "G17 G2 X10 K5 F100", "G91 G2 X10 Y0 I3 J0 F100", "G91 G2 X10 R2 F100",
    "G91 G2 X0 R5 F100", "G4", "G4 P-1", "G10 L3 P1 X0", "G10 P1 X0", "G10 L2 X0", "G10 L20 P7 X0", "G0 X900000",
    "G4 P3600.5", "G2 I999999 J0 F100", "G2 X10 R-999999 F100", "G2 I0 J0 F100", "G1 A10 F100", "G0 B5",
    "G2 I1 F100", "G19 G3 J0 K-9999 X5 F100", "G0 X2000000", "E1000", "G38.2 X1", "M98", "T77 M6", "M3 S-5", "M62",
    "M300 S30", "G0 X1 X2", "G0 G1 X1",
    "M2 M30", "G1 N10 X1", "N1.5 G1", "N1 G0 X1 N1", "G0 X1e5", "G0 X", "G0 X1.2.3", "G0 12", "G0 (abc", "G0 X1 )",
    "(a (b) c)", "G0 X1 # Y2", "G28 G1 X1 F100", "G2 X1 Y1 R0.1 F100", "G3 X5 Y0 J3 F100",
]
#: words mixed into the seeds (harmless on their own, so the word at fault is rarely the first)
_EXTRA = ["G21", "G90", "G91", "G17", "G18", "G54", "G94", "G40", "G49", "F600", "G20", "X3", "Z-2", "P1", "L2",
          "M0", "G0", "G1", "G2", "I2", "R4", "C90", "N7"]
#: modal states the line is read in
_PREFIXES = ["", "G21 G90 G0 X0 Y0 Z0\n", "G80\n", "G1 X0 F100\nG2 I5 J0\n", "G20 G91\n", "G18 F100\n"]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(_SEEDS), st.lists(st.tuples(st.integers(0, 20), st.sampled_from(_EXTRA)), max_size=4),
       st.sampled_from(_PREFIXES), st.booleans(), st.sampled_from([" ", "  ", "\t", ""]), st.booleans())
@example("G21 G1 X10", [], "", False, " ", False)
@example("N1 G0 X1 N1", [], "", False, " ", False)
def test_every_line_fault_points_at_the_word_its_message_names(seed, extras, prefix, lower, sep, scara):
    words = seed.split()
    for pos, w in extras:
        words.insert(pos % (len(words) + 1), w)
    line = sep.join(words) if sep else " ".join(words)
    if lower:
        line = line.lower()
    for text, code, column, message in _line_faults(prefix, line, SCARA if scara else IRB):
        _assert_points_at_what_it_names(text, code, column, message)
    try:
        parse_line(line)
    except GcodeError as exc:
        _assert_points_at_what_it_names(line, exc.code, exc.column, exc.fault.message)
