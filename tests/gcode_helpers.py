"""Checks shared by the G-code tests."""

from __future__ import annotations

from armtwin.controllers.gcode import flow as F
from armtwin.controllers.gcode import parser as P


def assert_fast_path_agrees(text: str, max_faults: int = 10_000) -> None:
    """The parser's fast path gives the checking path's lines for a clean text and hands every
    other text over (it never takes a faulty one); ``text`` has LF line ends (as the scanners see).
    A program with O-words is expanded into the same executed lines and faults both ways."""
    if F.has_o_words(text):
        raw = P.split_lines(text)
        fast_chunks = list(F.expand_chunks(raw, P.LINE_READER, max_faults=max_faults))
        slow_chunks = list(F.expand_chunks(raw, P.LINE_READER, max_faults=max_faults, fast=False))
        assert [tuple(c.lines) for c in fast_chunks] == [tuple(c.lines) for c in slow_chunks]
        assert [tuple(c.refused) for c in fast_chunks] == [tuple(c.refused) for c in slow_chunks]
        assert (P.unique_faults(f for c in fast_chunks for f in c.faults)
                == P.unique_faults(f for c in slow_chunks for f in c.faults))
        for c in slow_chunks:      # each piece in increasing line order, every line as written
            assert [pl.lineno for pl in c.lines] == sorted({pl.lineno for pl in c.lines})
            assert all(pl.text == raw[pl.lineno - 1] for pl in c.lines)
        return
    raw = P.split_lines(text)
    notes: list = []
    fast = P._scan_clean(text, raw, 1, notes, P.Parameters())
    slow, faults, _, _ = P._scan(text, raw, 1, max_faults, params=P.Parameters())
    errors = [f for f in faults if f.severity.value == "error"]
    if fast is not None:     # the same lines, and the same notes (skipped grbl host command lines)
        assert not errors and fast == slow and notes == [f for f in faults if f.severity.value == "note"]
    else:
        assert errors     # the fast path takes every clean text
    assert [(pl.lineno, pl.text) for pl in slow] == [(pl.lineno, raw[pl.lineno - 1]) for pl in slow]
