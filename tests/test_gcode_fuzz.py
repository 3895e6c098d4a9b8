"""A seeded fuzz of the G-code text surface (issue 15): programs built from the real vocabulary
(and its near misses), then mutated byte by byte, must never crash or hang the parser, the
interpreter or the preflight; the parser's fast path and its checking path agree; and LF, CR LF
and CR line ends (mixed too) never change what a program means.

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
      "91", "92", "92.1", "94", "00", "01", "02", "28.1", "38.2", "41", "53", "93", "1.5", "43", "43.1"]
_M = ["0", "2", "30", "00", "3", "6", "1", "99", "4", "5", "7", "8", "9", "62", "63", "64", "65", "300", "66"]
_NUM = st.one_of(
    st.integers(-300, 300).map(str),
    st.floats(-300, 300, allow_nan=False).map(lambda v: f"{v:.3f}"),
    st.sampled_from([".5", "5.", "-0", "+3", "0.0001", "999999", "1000001", "99999999999", "1.2.3", "--1", "1e3",
                     "", ".", "-", "0x10", "1,5"]),
)
_WORD = st.one_of(
    st.builds(lambda g: "G" + g, st.sampled_from(_G)),
    st.builds(lambda m: "M" + m, st.sampled_from(_M)),
    st.builds(lambda L, sp, v: L + sp + v, st.sampled_from(list("XYZABCIJKRFPLXYZXYZF" + "STEQH")),
              st.sampled_from(["", "", " ", "\t"]), _NUM),
)
_COMMENT = st.sampled_from(["", "", "", " (a comment)", " ; note", "(", " (nested (x))", " )", "(G1 X5)"])
_LINE = st.one_of(
    st.builds(lambda n, ws, c, low: (n + " ".join(ws) + c).lower() if low else n + " ".join(ws) + c,
              st.sampled_from(["", "", "", "N10 ", "N99999 ", "N1.5 "]), st.lists(_WORD, max_size=6), _COMMENT,
              st.booleans()),
    st.sampled_from(["", "%", " % ", "G21 G90 G17", "G0 X0 Y0 Z10", "G1 Z0 F600", "G2 X10 Y0 I5 J0",
                     "G3 X0 Y0 R5", "G4 P0.2", "G91 G1 X5", "G90", "G28 G91 Z0", "M30", "M0", "T1 M6", "G43 H1",
                     "M3 S9000 M8", "M62 P1", "M5 M9", "G43.1 Z50", "G49", "T2", "M6", "M4 S300"]),
)
_PROGRAM = st.lists(_LINE, max_size=40)
_BYTES = ["\r", "\n", "\r\n", "\x00", "\x1c", "(", ")", ";", "%", "#", "@", "é", "\u201c", "\ufeff", " ", "\t",
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
    with _no_hang():
        for src in (text, text.encode("utf-8", "surrogatepass")):
            res = parse_program(src)
            _check_faults(src, res.faults, res.line_count)
            prog = load_program(src, spec)
            _check_faults(src, prog.faults, prog.line_count)
            assert not (prog.ok and res.faults)        # a parse fault always makes the program faulty
        for line in P.split_lines(text)[:10]:
            try:
                parse_line(line, 3)
            except GcodeError as exc:
                assert exc.line == 3 and 0 <= exc.column <= len(line) + 1


@fuzz(300)
@given(_PROGRAM, _EDITS)
def test_fast_path_equals_checking_path(lines, edits):
    assert_fast_path_agrees(P.normalise_line_ends(_mutate("\n".join(lines), edits)))


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
    want = parse_program(lf)
    want_prog = _key(interpret(want, IRB))
    for src in (mixed, mixed.encode()):
        got = parse_program(src)
        assert [tuple(pl) for pl in got.lines] == [tuple(pl) for pl in want.lines]
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
    with _no_hang():
        rep = preflight(text, spec)
    _check_faults(text, [f for f in rep.faults if f.line], rep.program.line_count)
    assert rep.clean() == (not rep.errors())
