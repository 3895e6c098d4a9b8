"""A seeded fuzz of the G-code text surface (issue 15): programs built from the real vocabulary
(and its near misses), then mutated byte by byte, must never crash or hang the parser, the
interpreter or the preflight; the parser's fast path and its checking path agree; and LF, CR LF
and CR line ends (mixed too) never change what a program means. The vocabulary holds O-words
(lines, and well-formed blocks that run loops and calls and reach the caps).

The runs are derandomised (the same examples every time, so CI is reproducible); the ones that
solve IK along the path are marked slow.
"""

from __future__ import annotations

import contextlib
import signal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gcode_helpers import assert_fast_path_agrees

from armtwin import robots
from armtwin.controllers.gcode import GcodeError, interpret, load_program, parse_line, parse_program
from armtwin.controllers.gcode import flow as F
from armtwin.controllers.gcode import parser as P
from armtwin.controllers.gcode.preflight import preflight

IRB = robots.get("irb120")
SCARA = robots.get("scara")
AUBO = robots.get("aubo_i5")
def fuzz(examples: int) -> settings:
    """Derandomised settings: the same ``examples`` examples on every run."""
    return settings(derandomize=True, deadline=None, max_examples=examples,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# ----- programs made of the real vocabulary and its near misses ------------------------------------

_G = ["0", "1", "2", "3", "4", "10", "17", "18", "19", "20", "21", "28", "40", "49", "54", "55", "59", "80", "90",
      "91", "92", "92.1", "94", "00", "01", "02", "28.1", "38.2", "41", "53", "93", "1.5", "43", "43.1",
      "61", "61.1", "64", "90.1", "91.1", "61.2", "64.1", "81", "82", "83", "84", "98", "99"]   # issue 17's words
_M = ["0", "2", "30", "00", "3", "6", "1", "99", "4", "5", "7", "8", "9", "62", "63", "64", "65", "300", "66",
      "01", "17", "18", "84", "85"]
_NUM = st.one_of(
    st.integers(-300, 300).map(str),
    st.floats(-300, 300, allow_nan=False).map(lambda v: f"{v:.3f}"),
    st.sampled_from([".5", "5.", "-0", "+3", "0.0001", "999999", "1000001", "99999999999", "1.2.3", "--1", "1e3",
                     "", ".", "-", "0x10", "1,5",
                     "#1", "#<a>", "-#1", "##1", "[1+2]", "[#1*2", "[SIN[30]]", "[1/0]", "[ATAN[1]/[2]]", "#5400"]),
)
_WORD = st.one_of(
    st.builds(lambda g: "G" + g, st.sampled_from(_G)),
    st.builds(lambda m: "M" + m, st.sampled_from(_M)),
    st.builds(lambda L, sp, v: L + sp + v, st.sampled_from(list("XYZABCIJKRFPLQXYZXYZF" + "STEQHO")),
              st.sampled_from(["", "", " ", "\t"]), _NUM),
)
_COMMENT = st.sampled_from(["", "", "", " (a comment)", " ; note", "(", " (nested (x))", " )", "(G1 X5)",
                            " (Fr\u00e4ser \u00d8 3 mm)", " ; caf\u00e9", " (" + "long " * 80 + ")"])
_O_LINES = ["o1 sub", "o1 endsub", "o1 call [2] [#1]", "o1 return [5]", "O<Sub> SUB", "o<sub> endsub", "o<sub> call",
            "o2 if [#1 GT 1]", "o2 elseif [#1 LT 0]", "o2 else", "o2 endif", "o3 while [#1 LT 5]", "o3 endwhile",
            "#1 = [#1 + 1]", "o4 do", "o4 while [#1 LT 3]", "o5 repeat [3]", "o5 endrepeat", "o3 break", "o4 continue",
            "o[#1] call", "o#<sub> call", "o6 repeat [#1]", "o9 foo", "o1", "N5 o2 if [1] (c)", "o2 if [1] G0 X1",
            "o3 while [1]", "o1 call" + " [1]" * 31, "o7 if [1/0]", "G1 X[#1] Y#2 F600", "o1 call [#<_value>]"]
#: well-formed blocks (several lines each): programs that run their loops and calls, and reach the caps
_O_BLOCKS = ["o10 sub\nG1 X[#1] Y[#2] F600\no10 endsub\no10 call [3] [4]",
             "#1 = 0\no11 while [#1 LT 3]\nG1 X#1 F600\n#1 = [#1 + 1]\no11 endwhile",
             "o12 repeat [2]\nG91 G1 X1 F600\nG90\no12 endrepeat",
             "o13 if [#1 GT 2]\nG0 Z5\no13 elseif [#1 GT 1]\nG0 Z7\no13 else\nG0 Z6\no13 endif",
             "#1 = 0\no14 do\n#1 = [#1 + 1]\no15 if [#1 EQ 2]\no14 continue\no15 endif\no16 if [#1 EQ 3]\no14 break"
             "\no16 endif\nG1 Y#1 F900\no14 while [#1 LT 4]",
             "o17 while [1]\nG0 X1\no17 endwhile", "o18 sub\no18 call\no18 endsub\no18 call",
             "o<p> sub\n#<d> = [#1 * 2]\nG1 Z[-#<d>] F300\nG0 Z5\no<p> return [#<d>]\no<p> endsub\no<p> call [1]"]
_LINE = st.one_of(
    st.builds(lambda n, ws, c, low: (n + " ".join(ws) + c).lower() if low else n + " ".join(ws) + c,
              st.sampled_from(["", "", "", "N10 ", "N99999 ", "N1.5 "]), st.lists(_WORD, max_size=6), _COMMENT,
              st.booleans()),
    st.sampled_from(["", "%", " % ", "G21 G90 G17", "G0 X0 Y0 Z10", "G1 Z0 F600", "G2 X10 Y0 I5 J0",
                     "G3 X0 Y0 R5", "G4 P0.2", "G91 G1 X5", "G90", "G28 G91 Z0", "M30", "M0", "T1 M6", "G43 H1",
                     "M3 S9000 M8", "M62 P1", "M5 M9", "G43.1 Z50", "G49", "T2", "M6", "M4 S300",
                     "$H", " $X", "$J=G91 X10 F100", "?", " ? ", "$$ (settings)", "G64 P0.05 Q0.01", "G61", "G61.1",
                     "G17 G2 X10 Y0 I5 J0 K0", "G90.1 G2 X10 Y0 I5 J0", "G91.1", "G53 G0 X400 Y0 Z300", "M1",
                     "M84", "M17", "G18 G2 X10 Z0 I5 K0 J0",
                     "#1 = 5", "#<a> = [#1 * 2]", "G0 X#1 Y#<a>", "#5400 = 1", "#2 = [#2 + 1] G1 X#2 F600",
                     "G0 X[#<a> / [#1 - 5]]", "#<_g>=[EXISTS[#<a>]]", "M3 S[#1 * 1000]",
                     "G98 G81 X5 Y5 Z-2 R2 F300", "G99 G82 X8 Z-1 R1 P0.2", "G83 X10 Z-5 R1 Q2", "X12 Y3", "G80"]),
    st.sampled_from(_O_LINES), st.sampled_from(_O_BLOCKS), st.sampled_from(_O_BLOCKS),   # O-words
)
_PROGRAM = st.lists(_LINE, max_size=40)
_BYTES = ["\r", "\n", "\r\n", "\x00", "\x1c", "(", ")", ";", "%", "#", "@", "[", "]", "<", "=", "$", "é", "\u201c", "\ufeff", " ", "\t",
          "G", "X", "9", ".", "-", "e", "N", "M2"]
_EDITS = st.lists(st.tuples(st.integers(0, 100_000), st.sampled_from(["insert", "delete", "replace"]),
                            st.sampled_from(_BYTES)), max_size=8)
_ENDS = ["\n", "\r\n", "\r"]


def _mutate(text: str, edits) -> str:
    for pos, op, s in edits:
        pos %= len(text) + 1
        if op == "insert":
            text = text[:pos] + s + text[pos:]
        elif op == "delete":
            text = text[:pos] + text[pos + len(s):]
        else:
            text = text[:pos] + s + text[pos + len(s):]
    return text


@contextlib.contextmanager
def _small_flow_caps():
    """O-word loops capped at 50 passes and 20,000 executed lines: the caps' faults are reached in
    milliseconds (the defaults make a runaway loop take seconds; tests/test_gcode_flow.py covers them)."""
    old = F.MAX_LOOP_ITERATIONS, F.MAX_EXECUTED_LINES
    F.MAX_LOOP_ITERATIONS, F.MAX_EXECUTED_LINES = 50, 20_000
    try:
        yield
    finally:
        F.MAX_LOOP_ITERATIONS, F.MAX_EXECUTED_LINES = old


@contextlib.contextmanager
def _no_hang(seconds: int = 60):
    """Fail (instead of hanging CI) when one example runs away; far beyond any normal example."""
    def alarm(*_a):
        raise AssertionError(f"no result within {seconds} s: the input made the code hang")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _check_faults(text: str | bytes, faults, line_count: int) -> None:
    raw = P.split_lines(text)
    assert line_count == len(raw) == P.count_lines(text)
    assert [f.line for f in faults] == sorted(f.line for f in faults)
    for f in faults:
        assert 0 <= f.line <= line_count
        if f.line:
            assert 0 <= f.column <= len(raw[f.line - 1]) + 1, (f, raw[f.line - 1])
        assert str(f) and f.code.description


def _key(prog):
    import numpy as np
    blocks = [tuple((k, v.tobytes() if isinstance(v, np.ndarray) else v) for k, v in vars(b).items())
              for b in prog.blocks]
    return blocks, [str(f) for f in prog.faults], prog.line_count, prog.truncated, prog.ended_at


# ----- the properties ---------------------------------------------------------------------------

@fuzz(300)
@given(_PROGRAM, _EDITS, st.sampled_from(_ENDS), st.sampled_from([IRB, SCARA, AUBO]))
def test_random_and_mutated_programs_never_crash_or_hang(lines, edits, end, spec):
    text = _mutate(end.join(lines), edits)
    with _no_hang(), _small_flow_caps():
        for src in (text, text.encode("utf-8", "surrogatepass")):
            res = parse_program(src)
            _check_faults(src, res.faults, res.line_count)
            prog = load_program(src, spec)
            _check_faults(src, prog.faults, prog.line_count)
            assert not (prog.ok and not res.ok)        # a parse fault always makes the program faulty
        for line in P.split_lines(text)[:10]:
            try:
                parse_line(line, 3)
            except GcodeError as exc:
                assert exc.line == 3 and 0 <= exc.column <= len(line) + 1


@fuzz(300)
@given(_PROGRAM, _EDITS)
def test_fast_path_equals_checking_path(lines, edits):
    with _small_flow_caps():
        assert_fast_path_agrees(P.normalise_line_ends(_mutate("\n".join(lines), edits)))


_FLOW_PROGRAM = st.lists(st.sampled_from(_O_BLOCKS), unique=True, min_size=1, max_size=6).flatmap(
    lambda blocks: st.permutations(blocks + ["G21 G90 G0 X0 Y0 Z10", "#1 = 2", "G1 X5 F600", "G2 X10 Y0 I2.5 J0", "M30"]))


@fuzz(200)
@given(_FLOW_PROGRAM, st.lists(st.tuples(st.integers(0, 100_000), st.sampled_from(["insert", "delete", "replace"]),
                                         st.sampled_from(_BYTES + ["o", "[", "]"])), max_size=2))
def test_programs_with_o_words_run_their_flow_and_never_crash_or_hang(parts, edits):
    """Well-formed blocks in any order (calls before and after their subs, the caps reached), a
    few bytes changed: faults in line order with valid columns, every block under a line of the
    file, both parser paths alike, whole and in pieces alike."""
    text = _mutate("\n".join(parts), edits)
    with _no_hang(), _small_flow_caps():
        res = parse_program(text)
        _check_faults(text, res.faults, res.line_count)
        prog = load_program(text, IRB)
        _check_faults(text, prog.faults, prog.line_count)
        assert _key(prog) == _key(interpret(res, IRB))
        assert all(1 <= b.line <= prog.line_count for b in prog.blocks)
        assert_fast_path_agrees(P.normalise_line_ends(text))


@fuzz(200)
@given(_PROGRAM, st.lists(st.sampled_from(_ENDS), min_size=1), st.booleans(), st.sampled_from([1, 5, 64, 1 << 18]))
def test_line_ends_never_change_what_a_program_means(lines, ends, final_end, chunk):
    """Any mix of LF, CR LF and CR gives the program of the LF text: lines, faults, blocks — whole
    or read in pieces of any size (a piece never ends between CR and LF)."""
    lines = [ln.replace("\r", "").replace("\n", "") for ln in lines]
    lf = "\n".join(lines) + ("\n" if final_end and lines else "")
    endings = [ends[i % len(ends)] for i in range(len(lines))]
    for i in range(len(lines) - 1):    # a CR then an empty line's LF would read as one CR LF end: write CR LF
        if endings[i] == "\r" and not lines[i + 1] and endings[i + 1].startswith("\n"):
            endings[i] = "\r\n"
    if lines and not final_end:
        endings[-1] = ""
    mixed = "".join(ln + e for ln, e in zip(lines, endings))
    with _small_flow_caps():
        _same_for_any_line_end(lines, lf, mixed, chunk)


def _same_for_any_line_end(lines, lf: str, mixed: str, chunk: int) -> None:
    want = parse_program(lf)
    want_prog = _key(interpret(want, IRB))
    for src in (mixed, mixed.encode()):
        got = parse_program(src)
        # bytes are read one character per byte (byte columns): a line with a non-ASCII comment keeps its bytes
        assert [tuple(pl)[:5] for pl in got.lines] == [tuple(pl)[:5] for pl in want.lines]
        assert [pl.text for pl in got.lines if pl.text.isascii()] == [pl.text for pl in want.lines if pl.text.isascii()]
        assert [str(f) for f in got.faults] == [str(f) for f in want.faults] and got.line_count == want.line_count
        old = P.CHUNK_BYTES
        P.CHUNK_BYTES = chunk
        try:
            assert _key(load_program(src, IRB)) == want_prog
        finally:
            P.CHUNK_BYTES = old


@pytest.mark.slow
@fuzz(400)
@given(_PROGRAM, _EDITS, st.sampled_from(_ENDS), st.sampled_from([IRB, SCARA, AUBO]))
def test_random_programs_through_the_whole_preflight(lines, edits, end, spec):
    """Planning, IK along the path and the limit checks: findings, never an exception or a hang."""
    text = _mutate(end.join(["G21 G90 G0 X0 Y0 Z10"] + lines), edits)
    with _no_hang(), _small_flow_caps():
        rep = preflight(text, spec)
    _check_faults(text, [f for f in rep.faults if f.line], rep.program.line_count)
    assert rep.clean() == (not rep.errors())
