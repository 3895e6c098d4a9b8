"""G-code parser and interpreter faults: round trips, every error code, the gcodeparser cases, fuzzing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from armtwin import robots
from armtwin.controllers.gcode import ErrorCode, GcodeError, Severity, load_program, parse_line, parse_program
from armtwin.controllers.gcode.parser import MAX_LINE_LENGTH, parse_chunks
from armtwin.controllers.gcode.preflight import preflight

ROOT = Path(__file__).resolve().parents[1]
IRB = robots.get("irb120")
SCARA = robots.get("scara")


# ----- syntax ------------------------------------------------------------------------------

def test_words_comments_case_and_line_numbers():
    p = parse_line("n10 g1 (move) x1.5 Y-.5 z+3. f1200 ; tail", 4)
    assert p.lineno == 4 and p.n == 10
    assert p.g == {"motion": 1.0}
    assert p.words == {"X": 1.5, "Y": -0.5, "Z": 3.0, "F": 1200.0}
    assert parse_line("G1X1Y2").words == {"X": 1.0, "Y": 2.0}
    assert parse_line("X 1").words == {"X": 1.0}        # space between letter and number
    for empty in ("", "   ", "(only a comment)", "; x", "%"):
        assert parse_line(empty) is None


def test_a_clean_file_gives_lines_that_behave_as_a_sequence_of_parsed_lines():
    from armtwin.controllers.gcode.parser import Lines, ParsedLine
    text = "N5 G1 X1 Y2 F600\n(c)\ng0 z3\nM30\n"
    lines = parse_program(text).lines
    assert isinstance(lines, Lines) and len(lines) == 3
    slow = parse_program(text + "G1 X1 @\n").lines           # the checking path: a tuple of ParsedLine
    assert lines == slow[:3] and list(lines) == list(slow[:3])
    assert isinstance(lines[0], ParsedLine) and lines[0].n == 5 and lines[0].words == {"X": 1.0, "Y": 2.0, "F": 600.0}
    assert lines[-1].m == {"stop": 30.0} and lines[-1].lineno == 4 and lines[1].text == "g0 z3"
    assert isinstance(lines[1:], Lines) and [p.lineno for p in lines[1:]] == [3, 4]
    assert lines == slow and lines != slow[:2] and lines != "not lines"   # the faulty line is left out


def test_percent_stands_alone_on_its_line():
    res = parse_program("%\nG1 X1 %\n% G0 X0\n%\x1c\n \t%\r\n")
    assert [(f.line, f.column) for f in res.faults] == [(2, 7), (3, 1), (4, 1)]
    assert all("must stand alone" in f.message for f in res.faults)


@pytest.mark.parametrize("text", [
    "G0 X1 Y2 Z3", "N5 G1 X-1.25 F600", "G2 X10 Y0 I5 J0", "G17 G21 G90 G54", "G92.1", "G4 P0.5",
    "M30", "G10 L2 P1 X1 Y2 Z3", "G3 X1 Y1 R-2.5 C90", "G0 A10 B-5 C30",
])
def test_round_trip(text):
    p = parse_line(text, 3)
    again = parse_line(p.format(), 3)
    assert (again.n, again.g, again.m, again.words) == (p.n, p.g, p.m, p.words)


def test_gcodeparser_cases_are_handled():
    # gcodeparser turns 1e999 into two words, drops words after @, reads G28.1 as G28 and
    # "G0 (note) X1" as a G0 without coordinates.
    with pytest.raises(GcodeError) as e:
        parse_line("G0 X1e999")
    assert e.value.code is ErrorCode.EXPONENT_NOT_ALLOWED and e.value.column == 6
    with pytest.raises(GcodeError) as e:
        parse_line("G1 X1 @ Y2")
    assert e.value.code is ErrorCode.UNEXPECTED_CHARACTER and e.value.column == 7
    with pytest.raises(GcodeError) as e:
        parse_line("G28.1")
    assert e.value.code is ErrorCode.UNSUPPORTED_G_CODE
    assert parse_line("G28").g == {"nonmodal": 28.0}
    assert parse_line("G0 (note) X1").words == {"X": 1.0}


PARSE_FAULTS = [
    ("X1" + " " * (MAX_LINE_LENGTH - 2) + "Y1 (" + "a" * 300 + ")", ErrorCode.LINE_TOO_LONG, MAX_LINE_LENGTH + 1),
    ("G1 X1 caf\u00e9", ErrorCode.NON_ASCII, 10),
    ("G0 X1 @ Y2", ErrorCode.UNEXPECTED_CHARACTER, 7),
    ("G0 X1 # Y2", ErrorCode.BAD_PARAMETER, 7),
    ("G0 X[1+2", ErrorCode.BAD_EXPRESSION, 5),
    ("G0 X[2 ** ]", ErrorCode.BAD_EXPRESSION, 11),
    ("#1 G0", ErrorCode.BAD_EXPRESSION, 4),
    ("G0 X#<depth>", ErrorCode.BAD_PARAMETER, 5),
    ("#5221 = 1", ErrorCode.BAD_PARAMETER, 1),
    ("G0 X[1/0]", ErrorCode.MATH_ERROR, 7),
    ("G0 X[LN[0]]", ErrorCode.MATH_ERROR, 6),
    ("G0 X1\x00", ErrorCode.UNEXPECTED_CHARACTER, 6),
    ("G0 X1\x1cY2", ErrorCode.UNEXPECTED_CHARACTER, 6),   # ASCII FS: white space to Python, not to G-code
    ("G0 (abc", ErrorCode.UNCLOSED_COMMENT, 4),
    ("(a (b) c)", ErrorCode.NESTED_COMMENT, 4),
    ("G0 X1 )", ErrorCode.UNMATCHED_PAREN, 7),
    ("G0 X", ErrorCode.MISSING_VALUE, 4),
    ("G0 X1.2.3", ErrorCode.BAD_NUMBER, 8),
    ("G0 X--1", ErrorCode.BAD_NUMBER, 4),
    ("G0 12", ErrorCode.BAD_NUMBER, 4),
    ("G0 X1e999", ErrorCode.EXPONENT_NOT_ALLOWED, 6),
    ("G0 X2000000", ErrorCode.NUMBER_OUT_OF_RANGE, 4),
    ("G0 X" + "9" * 250, ErrorCode.NUMBER_OUT_OF_RANGE, 4),
    ("E1000", ErrorCode.UNSUPPORTED_WORD, 1),
    ("G38.2 X1", ErrorCode.UNSUPPORTED_G_CODE, 1),
    ("M98", ErrorCode.UNSUPPORTED_M_CODE, 1),
    ("G0 X1 X2", ErrorCode.REPEATED_WORD, 7),
    ("G0 G1 X1", ErrorCode.MODAL_GROUP_VIOLATION, 4),
    ("M2 M30", ErrorCode.MODAL_GROUP_VIOLATION, 4),
    ("G1 N10 X1", ErrorCode.BAD_LINE_NUMBER, 4),
    ("N1.5 G1", ErrorCode.BAD_LINE_NUMBER, 1),
]


@pytest.mark.parametrize("text,code,col", PARSE_FAULTS)
def test_parse_faults(text, code, col):
    with pytest.raises(GcodeError) as e:
        parse_line(text, 7)
    assert e.value.code is code, str(e.value)
    assert (e.value.line, e.value.column) == (7, col)
    assert e.value.description and str(int(code)) in str(e.value)


SEMANTIC_FAULTS = [
    (IRB, "G1 X1", ErrorCode.UNDEFINED_FEED_RATE),
    (IRB, "G1 X1 F0", ErrorCode.BAD_FEED_RATE),
    (IRB, "G1 G92 X1 F100", ErrorCode.AXIS_COMMAND_CONFLICT),
    (IRB, "G92", ErrorCode.AXIS_WORDS_MISSING),
    (IRB, "G80\nX1", ErrorCode.NO_MOTION_MODE),
    (IRB, "G0 X1 I5", ErrorCode.UNUSED_WORD),
    (IRB, "G1 X1 P2 F100", ErrorCode.UNUSED_WORD),
    (IRB, "G2 X10 F100", ErrorCode.ARC_OFFSETS_MISSING),
    (IRB, "G2 X10 R5 I5 F100", ErrorCode.ARC_R_AND_OFFSETS),
    (IRB, "G17 G2 X10 K5 F100", ErrorCode.ARC_OFFSET_OUT_OF_PLANE),
    (IRB, "G91 G2 X10 Y0 I3 J0 F100", ErrorCode.ARC_RADIUS_MISMATCH),
    (IRB, "G91 G2 X10 R2 F100", ErrorCode.ARC_RADIUS_TOO_SMALL),
    (IRB, "G91 G2 X0 R5 F100", ErrorCode.ARC_R_FULL_CIRCLE),
    (IRB, "G4", ErrorCode.DWELL_TIME_MISSING),
    (IRB, "G4 P-1", ErrorCode.BAD_DWELL_TIME),
    (IRB, "G10 L3 P1 X0", ErrorCode.BAD_G10),
    (SCARA, "G0 A10", ErrorCode.ORIENTATION_NOT_SUPPORTED),
    (IRB, "G0 X900000", ErrorCode.TARGET_OUT_OF_RANGE),
    (IRB, "G4 P3600.5", ErrorCode.DWELL_TOO_LONG),
    (IRB, "G0 X0 Y0\nG2 X10 Y0 I5 F100\nG53 X300 Y0", ErrorCode.BAD_G53),
    (IRB, "G91 G53 G0 X300", ErrorCode.BAD_G53),
    (IRB, "G64 P-0.1", ErrorCode.BAD_BLEND_TOLERANCE),
    (IRB, "G64 P0.1 Q-1", ErrorCode.BAD_BLEND_TOLERANCE),
    (IRB, "G81 X1 Y1 Z-2 F100", ErrorCode.BAD_CANNED_CYCLE),
    # notes: reported, the program stays clean
    (IRB, "$H", ErrorCode.HOST_COMMAND_SKIPPED),
    (IRB, "M84", ErrorCode.NO_EFFECT),
    (IRB, "M1", ErrorCode.OPTIONAL_STOP_SKIPPED),
    (IRB, "T77 M6", ErrorCode.UNKNOWN_TOOL),
    (IRB, "M3 S-5", ErrorCode.BAD_SPINDLE_SPEED),
    (IRB, "M62", ErrorCode.BAD_OUTPUT_NUMBER),
    (IRB, "M300 S30", ErrorCode.DIALECT_OPTION_OFF),
]
NOTES = {ErrorCode.HOST_COMMAND_SKIPPED, ErrorCode.NO_EFFECT, ErrorCode.OPTIONAL_STOP_SKIPPED}


@pytest.mark.parametrize("spec,text,code", SEMANTIC_FAULTS)
def test_semantic_faults(spec, text, code):
    prog = load_program("G21 G90\n" + text + "\n", spec)
    assert [f.code for f in prog.faults] == [code], prog.faults
    assert prog.faults[0].line == 2 + text.count("\n")
    assert prog.ok is (code in NOTES)
    assert (prog.faults[0].severity is Severity.NOTE) is (code in NOTES)


PREFLIGHT_FAULTS = [
    (IRB, "G0 X500", ErrorCode.UNREACHABLE),
    (SCARA, "G1 Z-50 F100", ErrorCode.JOINT_LIMIT),
    (IRB, "G1 C0 F100000", ErrorCode.JOINT_SPEED),
    (IRB, "G0 X-330 Y0 Z0", ErrorCode.NEAR_SINGULARITY),
    (IRB, "G0 X-350 Y-1 Z100\nG1 X-350 Y1 F600", ErrorCode.CONFIGURATION_FLIP),
    # 10 mm at 0.001 mm/min: 600,000 s, over the 86,400 s maximum
    (IRB, "G1 X10 F0.001", ErrorCode.PROGRAM_TOO_LONG),
    (IRB, "(no motion)\nG4 P1", ErrorCode.NO_MOTION),
    (IRB, "G0 X1\nG4 P150", ErrorCode.LONG_DWELL),
    (IRB, "G92 X0 Y0 Z0\nG0 X1", ErrorCode.WORK_ZERO_AT_START),
    (IRB, "G90\nG0 X1", ErrorCode.UNITS_NOT_GIVEN),
]

WARNINGS = {ErrorCode.NEAR_SINGULARITY, ErrorCode.LONG_DWELL, ErrorCode.WORK_ZERO_AT_START, ErrorCode.UNITS_NOT_GIVEN}


@pytest.mark.parametrize("spec,text,code", PREFLIGHT_FAULTS)
def test_preflight_findings(spec, text, code):
    rep = preflight(text + "\n", spec)
    found = {f.code: f for f in rep.faults}
    assert code in found, [str(f) for f in rep.faults]
    f = found[code]
    assert f.line >= 1 if code is not ErrorCode.NO_MOTION else f.line == 0   # no motion: the whole program
    assert f.severity is (Severity.WARNING if code in WARNINGS else Severity.ERROR)
    if code not in WARNINGS:
        assert not rep.clean()
    if code is ErrorCode.NO_MOTION:   # an error: `armtwin run` has nothing to run, so `check` must not call it clean
        assert not rep.clean() and not rep.clean(strict=True)


def test_every_code_is_tested_and_documented():
    tested = {c for _, c, _ in PARSE_FAULTS} | {c for _, _, c in SEMANTIC_FAULTS} | {c for _, _, c in PREFLIGHT_FAULTS}
    tested.add(ErrorCode.TOO_MANY_FAULTS)  # see test_fault_cap
    tested |= {ErrorCode.COLLISION, ErrorCode.SELF_COLLISION, ErrorCode.NEAR_MISS}   # see tests/test_collision.py
    tested |= {c for c in ErrorCode if 50 <= c < 60}     # O-words: see tests/test_gcode_flow.py (FLOW_FAULTS)
    tested.add(ErrorCode.BYTE_ORDER_MARK_SKIPPED)      # see test_a_utf8_byte_order_mark_at_the_start_is_skipped…
    assert set(ErrorCode) == tested
    doc = (ROOT / "docs" / "GCODE.md").read_text()
    for c in ErrorCode:
        assert re.search(rf"\| {int(c)} \| `{c.slug}` \|", doc), f"{c} missing from docs/GCODE.md"


def test_all_faults_of_a_file_in_one_pass_and_the_cap():
    text = "G0 X1\nG0 X1 X2\nE5\nG1 X2 F100\nG2 X3\nG0 @\n"
    res = parse_program(text)
    assert [(f.line, f.code) for f in res.faults] == [(2, ErrorCode.REPEATED_WORD), (3, ErrorCode.UNSUPPORTED_WORD),
                                                      (6, ErrorCode.UNEXPECTED_CHARACTER)]
    assert [p.lineno for p in res.lines] == [1, 4, 5]
    prog = load_program(text, IRB)
    assert [f.line for f in prog.faults] == [2, 3, 5, 6]  # line 5: arc without offsets, from the interpreter
    capped = parse_program("E1\n" * 50, max_faults=10)
    assert len(capped.faults) == 10 and capped.truncated


def test_fault_cap():
    rep = preflight("E1\n" * 200, IRB, max_faults=5)
    assert len(rep.faults) == 5 and rep.truncated
    assert ErrorCode.TOO_MANY_FAULTS.message


def test_a_refused_line_runs_nothing_but_keeps_its_modal_words_and_end():
    """Issue 17.4: one bad word must not make the later lines faulty. The refused line makes no block;
    its G91 and F and the end of its move stand for the lines after it (nothing runs anyway)."""
    prog = load_program("G21 G90 G1 X0 Y0 Z0 F600\nG91 F3000 X1 I5\nG1 X10\n", IRB)
    assert [f.code for f in prog.faults] == [ErrorCode.UNUSED_WORD]
    assert [b.line for b in prog.blocks] == [1, 3]
    last = prog.blocks[-1]
    assert last.start[0] == pytest.approx(0.350 + 0.001)       # the refused move's end
    assert last.end[0] == pytest.approx(0.350 + 0.011)         # G91 kept: X+10
    assert last.feed == pytest.approx(3000 / 60000)            # F kept


# ----- fuzzing -------------------------------------------------------------------------------

EXAMPLES = [p.read_text() for p in sorted((ROOT / "examples").glob("*.ngc"))]
alphabet = st.sampled_from(list("GMNXYZABCIJKRFPLgxyz0123456789.+- ()%;@#\t\r\n\x00e\u00e9"))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=alphabet, max_size=120))
def test_fuzz_parse_line_raises_only_gcode_errors(text):
    for line in text.split("\n"):
        try:
            parse_line(line)
        except GcodeError as exc:
            assert exc.line == 1 and 0 <= exc.column <= len(line) + 1


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(EXAMPLES), st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(
    ["", "X", "1e5", "@", "(", ")", "G2", "R-3", "\n", "G91", "I5", "F0", "M30", "G92 X0", "é", "999999999"])),
    max_size=6))
def test_fuzz_mutated_programs_never_raise(base, edits):
    text = base
    for pos, ins in edits:
        pos %= max(1, len(text))
        text = text[:pos] + ins + text[pos:]
    res = parse_program(text)
    prog = load_program(text, IRB)
    assert all(f.line >= 1 for f in res.faults + prog.faults)
    load_program(text.encode("latin-1", "replace"), SCARA)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("GMNXYZFIJRgxe0123456789.-+ ()%;\r\t\x0b\x0c\x1c")), max_size=30),
                max_size=8))
@example(["F()0"])            # a comment between a letter and its number: a letter without a value
@example(["G0 (note) X1"])    # a comment between words: clean
@example(["%\x1c"])           # a control character on a % line is a fault, not white space
def test_fast_path_agrees_with_the_checking_path(lines):
    from gcode_helpers import assert_fast_path_agrees

    from armtwin.controllers.gcode import parser as P
    assert_fast_path_agrees(P.normalise_line_ends("\n".join(lines)), 100)    # the scanners see LF line ends only


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(EXAMPLES), st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(
    ["A30", "B-40", "C720", "G18", "G20", "G28", "Z-80", "X300", "G2 I0.001 J0\n", "F1\n", "G91", "G10 L20 P0 X0\n"])),
    min_size=1, max_size=4), st.sampled_from(["scara", "irb120", "aubo_i5"]))
def test_fuzz_preflight_returns_findings_never_raises(base, edits, robot):
    text = base
    for pos, ins in edits:
        pos %= max(1, len(text))
        text = text[:pos] + ins + text[pos:]
    rep = preflight(text, robots.get(robot))
    assert all(f.line >= 1 for f in rep.faults)


def test_fast_path_takes_the_benchmark_program_and_leaves_the_collector_alone(monkeypatch):
    """The bench program's plain lines (comments, %, N words, arcs) are parsed by the fast path,
    identically to the checking path, and neither parsing nor interpreting touches the process-wide collector."""
    import gc

    from armtwin.controllers.gcode import parser as P
    from armtwin.scripts.bench_gcode import generate_program
    text = generate_program(3000)
    # the lines the fast path reads: all but the O-word and expression lines (the flow runs those)
    raw = ["" if line.lower().startswith("o") or "#" in line or "[" in line else line
           for line in P.split_lines(text)]
    assert sum(not line for line in raw) > sum(not line for line in P.split_lines(text)) + 10
    plain = "\n".join(raw)
    fast = P._scan_clean(plain, raw, 1, [], P.Parameters())
    slow, faults, _, _ = P._scan(plain, raw, 1, 100, params=P.Parameters())
    assert fast is not None and not faults and fast == slow and len(fast) > 2500

    def forbidden(*_a):
        raise AssertionError("library code must not switch the garbage collector")
    for name in ("disable", "enable", "freeze", "set_threshold"):
        monkeypatch.setattr(gc, name, forbidden)
    assert parse_program(text).ok
    assert load_program(text, IRB).ok
    assert not parse_program(text.replace("G1 Z0 F1500", "G1 Z0 F1500 @")).ok   # checking path too


# ----- audit: non-ASCII text is named as it is (UTF-8 character, or the byte) --------------------

@pytest.mark.parametrize("data,col,msg", [
    ("G1 X1 caf\u00e9\n".encode(), 10, "character U+00E9 (LATIN SMALL LETTER E WITH ACUTE) is not ASCII"),
    ("\u00f6 (x)\n".encode(), 1, "character U+00F6 (LATIN SMALL LETTER O WITH DIAERESIS) is not ASCII"),
    ("G0 X1 \u201cq\u201d\n".encode(), 7, "character U+201C (LEFT DOUBLE QUOTATION MARK)"),
    ("G0 X1 \U0001F600\n".encode(), 7, "character U+1F600 (GRINNING FACE)"),
    ("G0\u00a0X1\n".encode(), 3, "character U+00A0 (NO-BREAK SPACE)"),
    ("G0 X1 \u0085\n".encode(), 7, "character U+0085 (a control character)"),
    (b"G1 X1 caf\xe9\n", 10, "byte 0xE9 is not ASCII (and the line is not UTF-8 text)"),        # Latin-1
    (b"G1 X1 \xc3 (ok)\n", 7, "byte 0xC3 is not ASCII"),                                         # cut UTF-8
    (b"G1 X1 (unclosed \xc3\n", 17, "byte 0xC3 is not ASCII"),                # not inside a closed comment
    (b"\xff\xfeG\x001\x00", 1, "the file starts with a UTF-16 (little-endian) byte-order mark (bytes FF FE)"),
    (b"G0 X1\n\xef\xbb\xbfG1 X1\n", 1, "character U+FEFF (ZERO WIDTH NO-BREAK SPACE)"),         # not at the start
])
def test_non_ascii_faults_name_the_real_character_or_the_byte(data, col, msg):
    for text in (data, data.decode("utf-8", "surrogateescape")):
        for res in (parse_program(text), load_program(text, IRB)):
            (f,) = [f for f in res.faults if f.code is ErrorCode.NON_ASCII]
            if isinstance(text, str) and msg.startswith(("byte", "the file starts")):
                continue   # a str holds characters, not bytes (checked below)
            assert f.column == col and msg in f.message, f
            assert f.message.isascii()        # the message prints on any terminal


@pytest.mark.parametrize("data", [
    "G1 X1 F100 (caf\u00e9, Fr\u00e4ser \u00d8 3 mm)\n".encode(), "(\u201cquoted\u201d)\nG1 X1 F100\n".encode(),
    b"G1 X1 F100 (caf\xe9)\n", "G1 X1 F100 ; \u00fc\u00f1\u00ee\u00e7\u00f8d\u00e9 \U0001F600\n".encode(),
])
def test_non_ascii_inside_comments_is_accepted(data):
    """CAM tools write tool and operation names with accents into comments (issue 17)."""
    for text in (data, data.decode("utf-8", "surrogateescape")):
        res = parse_program(text)
        assert res.ok and not res.faults and [p.words for p in res.lines] == [{"X": 1.0, "F": 100.0}]
        assert load_program(text, IRB).ok


def test_long_comments_are_not_faults_but_long_code_is():
    """The limit is on the code of a line (LinuxCNC: 256 characters); comments may be any length."""
    long_comment = "G1 X1 F100 (" + "x" * 5000 + ") ; " + "y" * 3000
    res = parse_program(long_comment + "\n")
    assert res.ok and res.lines[0].words == {"X": 1.0, "F": 100.0}
    code = "G1 X1" + " " * (MAX_LINE_LENGTH - 5) + "Y2"
    (f,) = parse_program(code + "\n").faults
    assert (f.code, f.line, f.column) == (ErrorCode.LINE_TOO_LONG, 1, MAX_LINE_LENGTH + 1)
    assert f"{len(code)} characters" in f.message
    # 256 characters of code around a 52-character comment: accepted; one more: the column of the
    # 257th code character, counted past the comment
    at_limit = "G1 X1 (" + "c" * 50 + ")" + " " * 248 + "Y2"
    assert len(at_limit) - 52 == MAX_LINE_LENGTH and parse_program(at_limit + "\n").ok
    over = "G1 X1 (" + "c" * 50 + ")" + " " * 249 + "Y2"
    (f,) = parse_program(over + "\n").faults
    assert (f.code, f.column) == (ErrorCode.LINE_TOO_LONG, len(over)) and "257 characters" in f.message


@pytest.mark.parametrize("text", [b"\xef\xbb\xbfG21\nG1 X1 F100\n", "\ufeffG21\nG1 X1 F100\n",
                                  b"\xef\xbb\xbfo100 sub\no100 endsub\nG21\nG1 X1 F100\n"])
def test_a_utf8_byte_order_mark_at_the_start_is_skipped_with_a_note(text):
    """Windows editors write EF BB BF before UTF-8 text: the program after it is read as it is,
    the mark is note 63 (never a fault), on every reading path (whole text, pieces, O-words)."""
    bom = ErrorCode.BYTE_ORDER_MARK_SKIPPED
    res = parse_program(text)
    assert res.ok and [(f.code, f.line, f.column, f.severity) for f in res.faults] == [(bom, 1, 1, Severity.NOTE)]
    assert [pl.words for pl in res.lines][-1] == {"X": 1.0, "F": 100.0}
    prog = load_program(text, IRB)
    assert prog.ok and [f.code for f in prog.faults] == [bom]
    chunked = [f.code for c in parse_chunks(text, chunk_bytes=4) for f in c.faults]
    assert chunked == [bom]
    # the columns of line 1 are the ones an editor shows (the mark is invisible there)
    (f,) = [f for f in parse_program(b"\xef\xbb\xbfG1 X1 Q\n").faults if f.severity is Severity.ERROR]
    assert (f.code, f.line, f.column) == (ErrorCode.MISSING_VALUE, 1, 7)


@pytest.mark.parametrize("text,col,what", [("G1 @5 ^30 F100", 4, "'@' is LinuxCNC's polar distance"),
                                           ("G0 X1 ^45", 7, "'^' is LinuxCNC's polar angle")])
def test_polar_coordinates_are_refused_by_name(text, col, what):
    (f,) = parse_program(text + "\n").faults
    assert (f.code, f.line, f.column) == (ErrorCode.UNEXPECTED_CHARACTER, 1, col) and what in f.message


def test_a_byte_order_mark_elsewhere_or_utf16_is_still_a_fault():
    (f,) = parse_program(b"\xfe\xffG1 X1\n").faults
    assert f.code is ErrorCode.NON_ASCII and "UTF-16 (big-endian) byte-order mark" in f.message
    (f,) = parse_program("G21\n\ufeffG1 X1 F100\n").faults
    assert (f.code, f.line, f.column) == (ErrorCode.NON_ASCII, 2, 1)


def test_non_ascii_in_text_given_as_str():
    (f,) = parse_program("G1 X1\n\u00f6\n").faults
    assert (f.line, f.column) == (2, 1) and "U+00F6 (LATIN SMALL LETTER O WITH DIAERESIS)" in f.message
    with pytest.raises(GcodeError, match="U\\+00E9"):
        parse_line("G1 \u00e9")


# ----- audit: a long file is parsed a piece at a time, with the same result ---------------------

_JUNK = ["G1 X1 F100", "G1 X2", "G2 I1 J0", "X1e3", "@", "G28.1", "(unclosed", "\u00f6", "%", " % ", "G1 X1 X2",
         "N5 G0 X0", "G0 N5", "G1 F-1 X1", "M30", "G4 P-1", "\r", "", "; c", "x" * 300, "G1 Y1\r",
         "\u00ef\u00bb\u00bfG0 X1", "G0 X\x85", "G17 G18", "F", "G91 G1 X1 F600", "G90", "M0", "G4 P0.5"]


def _program_key(prog):
    import numpy as np
    blocks = [tuple((k, v.tobytes() if isinstance(v, np.ndarray) else v) for k, v in vars(b).items())
              for b in prog.blocks]
    return blocks, [str(f) for f in prog.faults], prog.line_count, prog.truncated, prog.ended_at


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(_JUNK), max_size=260), st.booleans(), st.sampled_from([1, 7, 64, 4096]),
       st.sampled_from([1, 3, 100]))
def test_streamed_load_gives_what_the_whole_file_parse_gives(lines, newline, chunk, max_faults):
    """``load_program`` parses a text in pieces (``parse_chunks``); faults (their cap and the 119
    notice, parse faults after an M30 included), blocks and line counts are the same as from
    ``interpret(parse_program(text))``, for str and for bytes."""
    from armtwin.controllers.gcode import interpret
    from armtwin.controllers.gcode import parser as P
    text = "\n".join(lines) + ("\n" if newline else "")
    for src in (text, text.encode("latin-1")):
        want = _program_key(interpret(parse_program(src, max_faults=max_faults), IRB, max_faults=max_faults))
        old = P.CHUNK_BYTES
        P.CHUNK_BYTES = chunk
        try:
            got = _program_key(load_program(src, IRB, max_faults=max_faults))
        finally:
            P.CHUNK_BYTES = old
        assert got == want
        assert P.count_lines(src) == len(P.split_lines(src))


def test_streamed_load_does_not_hold_every_parsed_line(monkeypatch):
    """Memory grows with what a program makes, not with its lines: 60,000 settings lines hold
    a piece's worth of parsed lines at a time (the whole file's would be ~25 MB)."""
    import tracemalloc

    from armtwin.controllers.gcode import parser as P
    monkeypatch.setattr(P, "CHUNK_BYTES", 16_384)
    data = b"G90 G21\n" * 60_000
    whole = parse_program(data)
    assert len(whole.lines) == 60_000
    del whole
    tracemalloc.start()
    try:
        prog = load_program(data, IRB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert prog.line_count == 60_000 and [f.code for f in prog.faults] == []
    assert peak < 6e6, f"{peak / 1e6:.1f} MB"


def test_a_huge_faulty_line_is_not_tokenised():
    """One 2 MB line: fault 1 at once, without a token per word (which took GBs for 200 MB)."""
    import tracemalloc
    data = b"G0 X1\n" + b"X1" * 1_000_000 + b"\nG0 X2\n"
    tracemalloc.start()
    try:
        res = parse_program(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(f.line, f.code) for f in res.faults] == [(2, ErrorCode.LINE_TOO_LONG)] and len(res.lines) == 2
    assert peak < 30e6, f"{peak / 1e6:.1f} MB"


# ----- issue 15.1: a lone CR ends a line, as LF and CR LF do ----------------------------------

_ENDINGS = {"LF": "\n", "CRLF": "\r\n", "CR": "\r"}


def _with_endings(text: str, end: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", end)


def _lines_key(res):
    return [tuple(pl) for pl in res.lines], [str(f) for f in res.faults], res.line_count


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.ngc")), ids=lambda p: p.name)
def test_every_example_means_the_same_with_lf_crlf_and_cr_line_ends(path):
    """Parsed lines (text included), faults, line counts and interpreted blocks are identical
    whatever the line ends, for str and bytes, whole and streamed in small pieces."""
    from armtwin.controllers.gcode import interpret
    from armtwin.controllers.gcode import parser as P
    spec = robots.get(path.name.split("_")[0] if not path.name.startswith("aubo") else "aubo_i5")
    base = path.read_text()
    want_lines = _lines_key(parse_program(_with_endings(base, "\n")))
    want_prog = _program_key(load_program(_with_endings(base, "\n"), spec))
    assert want_lines[2] == base.count("\n") and want_prog[0]
    for name, end in _ENDINGS.items():
        text = _with_endings(base, end)
        for src in (text, text.encode()):
            assert _lines_key(parse_program(src)) == want_lines, name
            assert P.count_lines(src) == want_lines[2], name
            assert _program_key(load_program(src, spec)) == want_prog, name
            assert _program_key(interpret(parse_program(src), spec)) == want_prog, name
            got = [pl for chunk in P.parse_chunks(src, chunk_bytes=37) for pl in chunk.lines]
            assert [tuple(pl) for pl in got] == want_lines[0], name


def test_cr_only_program_is_read_line_by_line_issue_reproduction():
    """``printf 'G90\\rG0 X5 Y0 Z0\\rG20\\r'`` was one line: X5 read as inches (x = 477 mm)."""
    prog = load_program(b"G90\rG0 X5 Y0 Z0\rG20\r", IRB)
    assert prog.ok and prog.line_count == 3
    assert [b.line for b in prog.blocks] == [2]
    assert prog.blocks[0].end[0] == pytest.approx(0.355)      # origin 350 mm + 5 mm, not 350 + 127
    rep = preflight(b"G90\rG0 X5 Y0 Z0\rG20\r", IRB)
    assert rep.clean() and rep.plan.p1[-1][0] == pytest.approx(0.355)


def test_cr_only_move_comes_before_the_dwell_issue_reproduction():
    """``G0 X10\\rG4 P1\\r`` dwelt before it moved (read as one line)."""
    from armtwin.controllers.gcode import Dwell, Motion
    prog = load_program("G0 X10\rG4 P1\r", IRB)
    assert prog.ok
    assert [(type(b), b.line) for b in prog.blocks] == [(Motion, 1), (Dwell, 2)]


@pytest.mark.parametrize("text,lines", [("G0 X1\r\nG0 X2\rG0 X3\n", 3), ("G0 X1\r\r\nG0 X2", 3), ("\r", 1),
                                        ("\r\n\r", 2), ("G0 X1\n\r", 2), ("G0 X1", 1)])
def test_mixed_line_ends_count_as_an_editor_shows_them(text, lines):
    from armtwin.controllers.gcode import parser as P
    res = parse_program(text)
    assert res.line_count == lines == P.count_lines(text) == P.count_lines(text.encode()) == len(P.split_lines(text))
    assert all("\r" not in pl.text for pl in res.lines)


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 8])
def test_streamed_pieces_never_split_a_crlf_pair(chunk):
    """A piece that ended between CR and LF would add an empty line and shift every line number."""
    from armtwin.controllers.gcode import parser as P
    text = "G0 X1\r\nG0 X2\r\n\r\nG0 X3\rG0 X4\r\n"
    want = [(pl.lineno, pl.text) for pl in parse_program(text).lines]
    assert want == [(1, "G0 X1"), (2, "G0 X2"), (4, "G0 X3"), (5, "G0 X4")]
    for src in (text, text.encode()):
        got = [(pl.lineno, pl.text) for c in P.parse_chunks(src, chunk_bytes=chunk) for pl in c.lines]
        assert got == want


def test_columns_of_faults_are_the_same_with_any_line_end():
    for end in _ENDINGS.values():
        res = parse_program(f"G0 X1{end}G1 X2 @{end}G0 X3 E1{end}")
        assert [(f.line, f.column, f.code) for f in res.faults] == [
            (2, 7, ErrorCode.UNEXPECTED_CHARACTER), (3, 7, ErrorCode.UNSUPPORTED_WORD)]


def test_parse_line_takes_one_line_end_and_refuses_a_break_inside():
    for end in ("", "\n", "\r\n", "\r"):
        assert parse_line("G0 X1" + end).words == {"X": 1.0}
    with pytest.raises(GcodeError) as e:
        parse_line("G0 X1\rG4 P1")
    assert e.value.column == 6
