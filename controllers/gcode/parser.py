"""A strict, fast RS-274/NGC line parser (syntax and per-line grouping only).

Per-line rules checked here (grbl's ``gc_execute_line`` steps 1–2): supported letters and
codes, one code per modal group, no repeated words, N first, number formats and ranges,
comments, line length, ASCII. Rules that depend on the modal state (feed defined, arc
geometry, unused words) are the interpreter's (:mod:`.interpreter`).

Two paths give the same result (a property test checks it):

* a fast path for files without faults: comments are cut out, one compiled regex checks
  that the whole text is only words and white space (C speed, no objects made), the numbers
  are taken by replacing the letters with spaces and splitting (C speed) and converted with
  one ``map(float, …)`` into an ``array``, the letters by ``str.translate``; the lines with the
  same letter sequence ("NGXYF") are then read together — their values gathered by numpy, their
  dicts made by one comprehension per sequence — so Python code runs per distinct sequence, not
  per word; the lines are stored column by column (:class:`Lines`). The large data are
  strings, arrays, lists and dicts of floats, none of which the cyclic garbage collector has to
  walk, so the parse stays fast without touching the process-wide collector (other threads are
  not affected). Any irregularity makes it hand
  over to
* the checking path: one regex pass tokenises each line into words, comments and anything
  else; anything else is a fault, located (line, column, specific message) by a slower
  diagnosis that runs only on faulty lines. Every faulty line of the file is reported.

Syntax accepted: words are a letter (any case) and a number ``[+-]digits[.digits]`` with
optional spaces between letter and number; comments ``( … )`` (not nested) and ``; …`` to
the end of the line, holding any characters (non-ASCII too) and of any length; an optional
leading ``N`` number; a line holding only ``%`` is a program delimiter; a line whose code
starts with ``$`` or is only ``?`` (grbl host commands: ``$H``, ``$X``, ``$J=…``) is skipped
with a note (:data:`~.errors.ErrorCode.HOST_COMMAND_SKIPPED`). The code of a line (without
its comments) may be :data:`MAX_LINE_LENGTH` characters long. Parameters (``#1 = 5``,
``#<name>``) and ``[…]`` expressions are LinuxCNC's (:mod:`.expressions`): a line holding them is
read into the plain line it means, in file order, by the checking path. No exponents or block
delete (/).
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from collections.abc import Callable
from functools import cache
from itertools import repeat
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Iterable, Iterator, NamedTuple, TypeVar, Union, cast

import numpy as np

from dataclasses import replace

from .errors import MAX_FAULTS, ErrorCode, Fault, GcodeError, Severity, cap_faults, fold_notes
from .expressions import ExpressionError, Parameters, apply_settings, expand_line, has_expression
from .expressions import word_columns as _expression_word_columns
from .flow import Columns, LineReader, expand_chunks, has_o_words
from .modal import G_CODES, M_CODES

__all__ = ["Lines", "ParsedLine", "ParseResult", "ParseChunk", "parse_line", "parse_program", "parse_chunks",
           "count_lines", "split_lines", "normalise_line_ends", "unique_faults", "LINE_READER", "MAX_LINE_LENGTH", "MAX_ABS_VALUE", "G_CODES", "M_CODES", "WORD_LETTERS",
           "CHUNK_BYTES"]

#: a program's text: characters, or bytes as read from a file (decoded one character per byte)
Text = Union[str, bytes, bytearray, memoryview]

_UTF8_BOM = b"\xef\xbb\xbf"

#: LinuxCNC's polar coordinate words (not supported: named in the fault, so the writer knows why)
_POLAR = {"@": "distance", "^": "angle"}


_T = TypeVar("_T")


def _skip_utf8_bom(text: _T) -> tuple[_T, Fault | None]:
    """``text`` without a UTF-8 byte-order mark at its start, and the note that says so (or None).

    Windows editors save "UTF-8" files with the mark; the text after it is the program, so the
    mark is skipped (columns of line 1 are then the ones an editor shows). A UTF-16 mark is not:
    such a file is not ASCII text at all (fault 2)."""
    out: object
    if isinstance(text, (bytes, bytearray, memoryview)):
        if bytes(text[:3]) != _UTF8_BOM:
            return text, None
        out = bytes(text[3:])
    elif isinstance(text, str) and text.startswith("\ufeff"):
        out = text[1:]
    else:
        return text, None
    return cast(_T, out), Fault(ErrorCode.BYTE_ORDER_MARK_SKIPPED, 1, 1,
                       "the file starts with a UTF-8 byte-order mark (bytes EF BB BF): skipped", Severity.NOTE)

#: Longest accepted code of a line, characters, comments not counted (LinuxCNC's limit).
MAX_LINE_LENGTH = 256
#: Largest accepted magnitude of any number.
MAX_ABS_VALUE = 1.0e6
#: Largest N word.
MAX_LINE_NUMBER = 99999
#: :func:`parse_chunks` parses this many bytes (characters) at a time, rounded up to a whole line:
#: the parser's memory then does not grow with the file (the parsed lines of one piece at a time)
CHUNK_BYTES = 1 << 18

#: Value words accepted (besides G, M, N).
WORD_LETTERS = frozenset("FXYZABCIJKRPLQSTH")

# One pass: a word | a ( ) comment | a ; comment | any other character (a fault).
# Leading white space is eaten by each alternative so that only faults (and line breaks) reach
# group 3; that includes the ASCII separators FS GS RS US, which Python's \s would take for space.
_TOKEN = re.compile(
    r"[ \t\r\f\v]*(?:([A-Za-z])[ \t]*([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))"
    r"|\([^()\n]*\)|;[^\n]*|([^ \t\r\f\v]))")
# fast path (clean files): comments out, then one check that the text is only words and white
# space (possessive quantifiers: linear time, no backtracking). The number is taken loosely
# here; float() then rejects exactly what the strict grammar rejects (no digit, a second point).
_COMMENTS = re.compile(r"\([^()\n]*\)|;[^\n]*")
_ONLY_WORDS = re.compile(r"(?:[A-Z][ \t]*+[-+]?+[0-9.]++|[ \t\r\f\v\n]++)*+")
_LETTERS_TO_SPACE = {c: " " for c in range(ord("A"), ord("Z") + 1)}        # leaves the numbers
_KEEP_LETTERS = {c: None for c in range(128) if not (chr(c) == "\n" or "A" <= chr(c) <= "Z")}   # leaves the letters
_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)")
_LETTERS_UP = {c: c.upper() for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"}


class ParsedLine(NamedTuple):
    """One non-empty line after parsing (immutable).

    Attributes:
        lineno: 1-based line number in the file.
        n: the N word, or None.
        g: modal group name -> G-code value (e.g. {"motion": 1.0, "units": 21.0}).
        m: modal group name -> M-code (e.g. {"spindle": 3.0, "coolant": 8.0}); one code per group.
        words: upper-case letter -> value for F X Y Z A B C I J K R P L S T H, in program units.
        text: the raw line (for locating later, semantic faults).
    """

    lineno: int
    n: int | None
    g: dict
    m: dict
    words: dict
    text: str

    def column_of(self, letter: str, value: float | None = None) -> int:
        """1-based column of the first word with ``letter`` (and, if given, the value ``value``,
        e.g. the G1 of ``G21 G1 X10``); 0 if there is none."""
        for col, L, num in word_columns(self.text):
            if L == letter and (value is None or float(num) == value):
                return col
        return 0

    def format(self) -> str:
        """Canonical G-code text of this line (round-trips through :func:`parse_line`)."""
        out = [] if self.n is None else [f"N{self.n}"]
        out += [f"G{_fmt(v)}" for v in self.g.values()]
        out += [f"M{_fmt(v)}" for v in self.m.values()]
        out += [f"{k}{_fmt(v)}" for k, v in self.words.items()]
        return " ".join(out)


class Lines(Sequence):
    """Parsed lines, stored column by column; its items are :class:`ParsedLine` (made on access).

    A file's lines are held in six lists instead of one tuple per line: the per-line dicts of
    floats are atoms to Python's cyclic garbage collector, so a 100,000-line parse leaves it
    nothing to walk (one object per line made it spend a third of the parse time).
    """

    __slots__ = ("_cols",)

    def __init__(self, cols: Columns) -> None:
        self._cols = cols  # lineno, n, g, m, words, text

    @classmethod
    def of(cls, lines: Iterable[ParsedLine]) -> "Lines":
        """``lines`` as a :class:`Lines` (itself if it is one)."""
        if isinstance(lines, Lines):
            return lines
        cols: Columns = ([], [], [], [], [], [])
        for pl in lines:
            for col, v in zip(cols, pl):
                col.append(v)
        return cls(cols)

    @property
    def columns(self) -> Columns:
        """The six columns: line numbers, N, G, M, words, text (the lists themselves: read only)."""
        return self._cols

    def __len__(self) -> int:
        return len(self._cols[0])

    def __getitem__(self, i):
        c = self._cols
        if isinstance(i, slice):
            return Lines((c[0][i], c[1][i], c[2][i], c[3][i], c[4][i], c[5][i]))
        return ParsedLine(c[0][i], c[1][i], c[2][i], c[3][i], c[4][i], c[5][i])

    def __iter__(self):
        return map(ParsedLine._make, zip(*self._cols))

    def __eq__(self, other) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def __repr__(self) -> str:
        return f"Lines({len(self)} lines)"


def _fmt(v: float) -> str:
    if v == int(v):
        return str(int(v))
    return repr(float(v))


@dataclass(frozen=True)
class ParseResult:
    """Outcome of :func:`parse_program`: the good lines and every fault found (up to a cap).

    Attributes:
        lines: parsed lines in file order (faulty and empty lines left out): a :class:`Lines`
            for a clean file or one with O-words, a tuple otherwise; either way a sequence of
            :class:`ParsedLine`.
        faults: faults in file order (and notes: severity NOTE, e.g. a skipped ``$H`` line); every
            word fault of a line, each at its column. When the file
            has more than the cap, the first ``max_faults - 1`` and a TOO_MANY_FAULTS (119)
            notice at the line of the first fault not shown (:func:`~.errors.cap_faults`).
        line_count: number of lines in the text.
        truncated: True if the cap stopped the collection of faults (``lines`` then ends at the
            line of the last fault collected).
        overflow: the faults collected but replaced by the notice (for the interpreter, which
            merges its own faults in line order and applies the cap again).
        refused: the lines refused for word faults only, made of their valid words (see
            :func:`_scan`): the interpreter keeps their modal meaning, nothing runs from them.
        chunks: for a program with O-words (:mod:`.flow`), its executed lines as pieces with
            increasing line numbers each (``lines`` and ``refused`` are their concatenation, in
            executed order: a line run in a loop is there once per pass); the interpreter reads
            these. Empty for other programs.
    """

    lines: Sequence[ParsedLine]
    faults: tuple[Fault, ...]
    line_count: int
    truncated: bool = False
    overflow: tuple[Fault, ...] = ()
    refused: tuple[ParsedLine, ...] = ()
    chunks: tuple["ParseChunk", ...] = ()

    @property
    def ok(self) -> bool:
        """No errors (notes do not count)."""
        return not any(f.severity is Severity.ERROR for f in self.faults)


def normalise_line_ends(text: str) -> str:
    """``text`` with every line end as LF: CR LF and a lone CR (classic Mac OS) end a line as LF does.

    Only the line ends change, so the columns of every line stay as they were.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def split_lines(text: Text) -> list[str]:
    """Lines of a program: split at LF, CR LF and a lone CR (all three end a line); bytes decoded
    as Latin-1 (one character per byte: the columns are byte columns; non-ASCII bytes are faults,
    see :func:`parse_program`). The lines are returned without their line ends.

    Other characters that Python's ``splitlines`` treats as breaks (FS, GS, RS, NEL, ...) stay
    inside their line so that line numbers match what editors show (and they are faults).
    """
    if not isinstance(text, str):
        text = bytes(text).decode("latin-1")
    lines = normalise_line_ends(text).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def parse_line(text: str, lineno: int = 1) -> ParsedLine | None:
    """Parse one line.

    Args:
        text: the line (one line end, LF, CR LF or CR, at its end is allowed).
        lineno: 1-based line number reported in faults.

    Returns:
        The parsed line, or None for a line without words (blank, comments only, ``%``).

    Raises:
        GcodeError: the first fault of the line (code, line, column, message).
    """
    if text[-2:] == "\r\n":
        text = text[:-2]
    elif text[-1:] in ("\r", "\n"):
        text = text[:-1]
    brk = min((i for i in (text.find("\r"), text.find("\n")) if i >= 0), default=-1)
    if brk >= 0:
        raise GcodeError(ErrorCode.UNEXPECTED_CHARACTER, "a line break (CR or LF) inside one line", lineno, brk + 1)
    lines, faults, _, _ = _scan(text, [text], lineno, 1, params=Parameters())
    faults = [f for f in faults if f.severity is Severity.ERROR]
    if faults:
        f = faults[0]
        raise GcodeError(f.code, f.message, f.line, f.column)
    return lines[0] if lines else None


def parse_program(text: Text | Iterable[str], *, max_faults: int = MAX_FAULTS) -> ParseResult:
    """Parse a whole program, collecting every fault instead of raising.

    A faulty line is rejected as a whole (as grbl and LinuxCNC do) and contributes every word
    fault it has (and the first character that is not G-code); its valid words are kept in
    ``refused`` for the interpreter. Every line of the file is examined until more than
    ``max_faults`` faults are found; notes (skipped ``$`` lines) are folded one per code.

    Args:
        text: program text (str or bytes), or an iterable of lines.
        max_faults: the most faults reported; with more, the result is ``truncated`` and its
            last fault is a TOO_MANY_FAULTS (119) notice at the line of the first fault not shown.

    Returns:
        The :class:`ParseResult`. Never raises on any content.

    Non-ASCII text is fault 2 at its first non-ASCII character. Bytes are read as UTF-8 where
    the line is valid UTF-8 (the fault names the character: ``U+00F6 (LATIN SMALL LETTER O
    WITH DIAERESIS)``), else the byte is named (``byte 0xF6``); a UTF-16 byte-order mark at the
    start of the file gets its own message. A UTF-8 byte-order mark there is skipped with a note
    (:data:`~.errors.ErrorCode.BYTE_ORDER_MARK_SKIPPED`).
    """
    text, mark = _skip_utf8_bom(text)
    res = _parse_text(text, max_faults)
    if mark is None:
        return res
    return replace(res, faults=tuple(fold_notes(sorted((mark, *res.faults), key=lambda f: f.line))))


def _parse_text(text: Text | Iterable[str], max_faults: int) -> ParseResult:
    """:func:`parse_program` after the byte-order mark."""
    from_bytes = isinstance(text, (bytes, bytearray, memoryview))
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("latin-1")
    elif not isinstance(text, str):
        text = "\n".join(str(s).rstrip("\n") for s in text)
    text = normalise_line_ends(text)
    raw = split_lines(text)
    if has_o_words(text):
        return _parse_flow(raw, from_bytes, max_faults)
    notes: list[Fault] = []
    params = Parameters()
    fast = _scan_clean(text, raw, 1, notes, params)
    if fast is not None:
        return ParseResult(fast, tuple(fold_notes(notes)), len(raw), False)
    cap = max(1, int(max_faults))
    refused: list[ParsedLine] = []
    lines, faults, count, _ = _scan(text, raw, 1, cap + 1, from_bytes, refused,   # one more: is anything cut, and where
                                    params)
    faults = fold_notes(faults)
    shown, truncated = cap_faults(faults, cap)
    kept = len(shown) - (1 if truncated and cap >= 2 else 0)     # real faults shown
    overflow = tuple(faults[kept:]) if truncated else ()
    return ParseResult(tuple(lines), tuple(shown), count, truncated, overflow, tuple(refused))


def _parse_flow(raw: list[str], from_bytes: bool, max_faults: int) -> ParseResult:
    """:func:`parse_program` of a program with O-words: its executed lines (:mod:`.flow`)."""
    cap = max(1, int(max_faults))
    chunks = tuple(expand_chunks(raw, LINE_READER, from_bytes=from_bytes, max_faults=cap))
    faults = fold_notes(unique_faults(f for c in chunks for f in c.faults))
    shown, truncated = cap_faults(faults, cap)
    kept = len(shown) - (1 if truncated and cap >= 2 else 0)
    overflow = tuple(faults[kept:]) if truncated else ()
    cols: Columns = ([], [], [], [], [], [])
    for c in chunks:         # the pieces' columns end to end (no object per line)
        for out, col in zip(cols, Lines.of(c.lines).columns):
            out.extend(col)
    return ParseResult(Lines(cols), tuple(shown), len(raw), truncated, overflow,
                       tuple(pl for c in chunks for pl in c.refused), chunks)


def unique_faults(faults: Iterable[Fault]) -> list[Fault]:
    """``faults`` with each (line, column, code) once (the first), in line order: a line run many
    times (O-word loops and calls) reports each of its faults once."""
    seen: set = set()
    out = []
    for f in faults:
        key = (f.line, f.column, f.code)
        if key not in seen:
            seen.add(key)
            out.append(f)
    out.sort(key=lambda f: f.line)
    return out


class ParseChunk(NamedTuple):
    """One piece of a program from :func:`parse_chunks`.

    Attributes:
        lines: the parsed lines of the piece (faulty and empty lines left out), file line numbers.
        faults: the faults found in the piece, in line order (every word fault; no 119 notice).
        refused: the lines of the piece refused for word faults only, made of their valid words.
    """

    lines: Sequence[ParsedLine]
    faults: tuple[Fault, ...]
    refused: tuple[ParsedLine, ...] = ()


def count_lines(text: Text) -> int:
    """Number of lines of a program text, as :func:`split_lines` counts them (without splitting):
    LF, CR LF and a lone CR each end one line."""
    if isinstance(text, str):
        ends = text.count("\n")
        crs = text.count("\r")
        if crs:
            ends += crs - text.count("\r\n")
        return ends + (1 if text and not text.endswith(("\n", "\r")) else 0)
    data = bytes(text) if isinstance(text, memoryview) else text
    ends = data.count(b"\n")
    crs = data.count(b"\r")
    if crs:
        ends += crs - data.count(b"\r\n")
    return ends + (1 if data and not data.endswith((b"\n", b"\r")) else 0)


def _piece_end(text: str | bytes | bytearray, start: int, n: int) -> int:
    """Index just after the first line end at or after ``start`` (a CR LF pair is never split), or ``n``."""
    if isinstance(text, str):
        i = text.find("\n", start)
        j = text.find("\r", start, i if i >= 0 else n)     # a CR before that LF (bounded search: no rescans)
        crlf = j >= 0 and text[j + 1:j + 2] == "\n"
    else:
        i = text.find(b"\n", start)
        j = text.find(b"\r", start, i if i >= 0 else n)
        crlf = j >= 0 and text[j + 1:j + 2] == b"\n"
    if j >= 0:
        return j + 2 if crlf else j + 1
    return i + 1 if i >= 0 else n


def parse_chunks(text: Text, *, max_faults: int = MAX_FAULTS,
                 chunk_bytes: int | None = None) -> Iterator[ParseChunk]:
    """Parse a program a piece at a time: the same lines and faults as :func:`parse_program`.

    The text is cut after a line end (LF, CR LF or CR; never between CR and LF) every ``chunk_bytes`` (default :data:`CHUNK_BYTES`) bytes (bytes are decoded piece by
    piece), so only one piece's parsed lines exist at a time if the consumer (the interpreter,
    :func:`~.interpreter.load_program`) drops them: memory does not grow with the file. As
    :func:`parse_program`, at most ``max_faults + 1`` faults are collected in all; the pieces
    end at the line of the last one.
    """
    from_bytes = isinstance(text, (bytes, bytearray, memoryview))
    text, mark = _skip_utf8_bom(text)
    if mark is not None:
        yield ParseChunk((), (mark,))
    if isinstance(text, memoryview):
        text = bytes(text)
    if has_o_words(text):        # control flow: the executed lines, from the whole text
        whole = text if isinstance(text, str) else bytes(text).decode("latin-1")
        yield from expand_chunks(split_lines(whole), LINE_READER, from_bytes=from_bytes, max_faults=max_faults)
        return
    n = len(text)
    out: ParseChunk | None
    chunk_bytes = max(1, int(CHUNK_BYTES if chunk_bytes is None else chunk_bytes))
    budget = max(1, int(max_faults)) + 1
    params = Parameters()          # the program's parameters, set line by line across the pieces
    pos, lineno = 0, 1
    while pos < n:
        end = n if n - pos <= chunk_bytes else _piece_end(text, pos + chunk_bytes - 1, n)
        cut = text[pos:end]
        piece = normalise_line_ends(cut if isinstance(cut, str) else bytes(cut).decode("latin-1"))
        del cut
        raw = split_lines(piece)
        pos = end
        count = len(raw)
        notes: list[Fault] = []
        clean = _scan_clean(piece, raw, lineno, notes, params)
        if clean is not None:
            out = ParseChunk(clean, tuple(notes))
            del clean
        else:
            refused: list[ParsedLine] = []
            lines, faults, _, _ = _scan(piece, raw, lineno, budget, from_bytes, refused, params)
            budget -= sum(f.severity is not Severity.NOTE for f in faults)
            out = ParseChunk(tuple(lines), tuple(faults), tuple(refused))
            del lines
        del piece, raw
        yield out
        out = None       # hold no piece while the consumer works on the next one
        if budget <= 0:
            return
        lineno += count


def _non_ascii(line: str, i: int, lineno: int, from_bytes: bool) -> str:
    """Message of fault 2 for the first non-ASCII character ``line[i]`` (everything before it is ASCII).

    ``from_bytes``: the line holds bytes decoded as Latin-1; it is read as UTF-8 if it is valid
    UTF-8 (then the character is named), else the byte is named.
    """
    if from_bytes:
        data = line.encode("latin-1")
        if lineno == 1 and i == 0:
            for mark, what in ((b"\xff\xfe", "a UTF-16 (little-endian)"), (b"\xfe\xff", "a UTF-16 (big-endian)")):
                if data.startswith(mark):
                    return (f"the file starts with {what} byte-order mark (bytes {mark.hex(' ').upper()}); "
                            f"G-code is ASCII: save the file as plain text without it")
        try:
            ch = data.decode("utf-8")[i]
        except UnicodeDecodeError:
            return f"byte 0x{data[i]:02X} is not ASCII (and the line is not UTF-8 text)"
    else:
        ch = line[i]
    name = unicodedata.name(ch, "") or ("a control character" if unicodedata.category(ch) == "Cc" else "")
    return f"character U+{ord(ch):04X}" + (f" ({name})" if name else "") + " is not ASCII"


def _masked(line: str) -> str:
    """``line`` with every closed comment replaced by spaces of its length (the columns stay)."""
    return _COMMENTS.sub(lambda mt: " " * len(mt.group()), line)


def _host_command(line: str, lineno: int) -> Fault | None:
    """The note for a grbl host command line (its code starts with ``$`` or is ``?``), else None."""
    code = _masked(line)
    stripped = code.strip(" \t\r\f\v")
    if not (stripped.startswith("$") or stripped == "?"):
        return None
    col = len(code) - len(code.lstrip(" \t\r\f\v")) + 1
    cmd = stripped if len(stripped) <= 24 else stripped[:21] + "..."
    if not cmd.isascii():
        cmd = cmd.encode("ascii", "backslashreplace").decode()
    return Fault(ErrorCode.HOST_COMMAND_SKIPPED, lineno, col,
                 f"{cmd!r} is a grbl host command, not G-code: the line is skipped", Severity.NOTE)


def _too_long(line: str, lineno: int) -> Fault | None:
    """LINE_TOO_LONG when the code of ``line`` (without closed comments) is over the limit, at the
    column of its first character too many."""
    if len(line) <= MAX_LINE_LENGTH:
        return None
    spans = [mt.span() for mt in _COMMENTS.finditer(line)]
    code = len(line) - sum(b - a for a, b in spans)
    if code <= MAX_LINE_LENGTH:
        return None
    count = i = 0
    for a, b in spans + [(len(line), len(line))]:
        if count + (a - i) > MAX_LINE_LENGTH:
            col = i + (MAX_LINE_LENGTH - count) + 1
            break
        count += a - i
        i = b
    return Fault(ErrorCode.LINE_TOO_LONG, lineno, col, f"the code of the line (without comments) has {code} "
                 f"characters, the limit is {MAX_LINE_LENGTH}")


def _prechecked(text: str, raw: list[str], first_lineno: int, from_bytes: bool = False) -> dict[int, Fault]:
    """Whole lines handled before tokenising (rare; fast when absent): grbl host commands (a note),
    code too long, non-ASCII outside comments."""
    bad: dict[int, Fault] = {}
    if "$" in text or "?" in text:
        for i, line in enumerate(raw):
            if "$" in line or "?" in line:
                note = _host_command(line, i + first_lineno)
                if note is not None:
                    bad[i + first_lineno] = note
    if not text.isascii():
        for i, line in enumerate(raw):
            if not line.isascii() and i + first_lineno not in bad:
                code = _masked(line)
                col = next((k for k, ch in enumerate(code) if ord(ch) > 127), -1) + 1
                if col:
                    bad[i + first_lineno] = Fault(ErrorCode.NON_ASCII, i + first_lineno, col,
                                                  _non_ascii(line, col - 1, i + first_lineno, from_bytes))
    if raw and max(map(len, raw)) > MAX_LINE_LENGTH:
        for i, line in enumerate(raw):
            if len(line) > MAX_LINE_LENGTH and i + first_lineno not in bad:
                f = _too_long(line, i + first_lineno)
                if f is not None:
                    bad[i + first_lineno] = f
    return bad


def _without_percent_lines(t: str, raw: list[str]) -> str | None:
    """Comment-free text ``t`` with its ``%`` delimiter lines blanked, or None if a ``%`` stands
    anywhere else (``raw``: the original lines, to check that a ``%`` line holds nothing else)."""
    lineno = pos = 0
    i = t.find("%")
    while i >= 0:
        lineno += t.count("\n", pos, i)
        pos = i
        if raw[lineno].strip(" \t\r\f\v") != "%":
            return None
        i = t.find("%", i + 1)
    return t.replace("%", " ")


def _scan_clean(text: str, raw: list[str], first_lineno: int = 1, notes: list[Fault] | None = None,
                params: Parameters | None = None) -> Lines | None:
    """Fast path for a file without faults: C-level checking and splitting, one short Python loop per word.

    Returns None as soon as anything is unusual (a fault, a stray ``%`` or parenthesis, ...);
    :func:`_scan` then handles the file and locates every fault. Both paths give the same
    lines for a clean file (checked by the tests). ``notes``: a list that receives the notes of
    the grbl host command lines (``$H``) it skips; without it such a file is handed over too.
    ``params``: the program's parameters; the lines with parameters or expressions are read with
    them (without, such a file is handed over). When the file is handed over, ``params`` is as it was.
    """
    if params is None:
        return _scan_clean_lines(text, raw, first_lineno, notes, None)
    saved = (dict(params.numbered), dict(params.named))
    out = _scan_clean_lines(text, raw, first_lineno, notes, params)
    if out is None:          # the checking path reads the file again from the same parameters
        params.numbered, params.named = saved
    return out


def _line_plan(letters: str) -> tuple | None:
    """Where the words of a line whose word letters are ``letters`` stand (one value each, in order):
    (N first, positions of the G words, of the M words, of the other words, their letters), or None
    if such a line is not clean (N not first, an unsupported letter, a value letter twice)."""
    gpos, mpos, wpos = [], [], []
    for j, L in enumerate(letters):
        if L in WORD_LETTERS:
            wpos.append(j)
        elif L == "G":
            gpos.append(j)
        elif L == "M":
            mpos.append(j)
        elif not (L == "N" and j == 0):
            return None
    wletters = "".join(letters[j] for j in wpos)
    if len(set(wletters)) != len(wletters):
        return None
    return letters[0] == "N", gpos, mpos, wpos, wletters


def _code_dicts(vals: np.ndarray, at: np.ndarray, positions: list[int], codes: dict[float, str]) -> list[dict] | None:
    """{group: code} of each line of one letter sequence (its values start at ``at``; its G or M
    words at ``positions``), or None if a code is unknown or two share a group."""
    if not positions:
        return [{} for _ in range(len(at))]
    seen: list[np.ndarray] = []
    cols: list[list] = []
    for j in positions:
        x = vals[at + j]
        uniq, inv = np.unique(x, return_inverse=True)
        got = [codes.get(u) for u in uniq.tolist()]
        if None in got:
            return None
        names = cast("list[str]", got)
        ids = np.array([_GROUP_IDS.setdefault(nm, len(_GROUP_IDS)) for nm in names], dtype=np.int64)[inv]
        if any((other == ids).any() for other in seen):
            return None          # two codes of one modal group on a line
        seen.append(ids)
        cols += [np.array(names, dtype=object)[inv].tolist(), x.tolist()]
    return _dicts(cols)


@cache
def _dict_maker(k: int) -> Callable[[list], list[dict]]:
    """A function making one dict of ``k`` items per row from 2·k columns (key, value, key, value, …).
    A comprehension with a dict display: twice as fast as ``map(dict, …)`` for a line's short dicts
    (made from fixed text, ``k`` an int)."""
    names = ", ".join(f"k{i}, v{i}" for i in range(k))
    items = ", ".join(f"k{i}: v{i}" for i in range(k))
    return eval(f"lambda cols: [{{{items}}} for {names} in zip(*cols)]")   # noqa: S307


def _dicts(cols: list) -> list[dict]:
    """One dict per row from the columns key, value, key, value, … (a key column may be a ``repeat``)."""
    return _dict_maker(len(cols) // 2)(cols)


#: a number for each modal group's key, to compare the groups of a line's codes in arrays
_GROUP_IDS: dict[str, int] = {}


def _columns_by_sequence(letters: list[str], vals: np.ndarray, raw: list[str], first_lineno: int,
                         ready: dict[int, ParsedLine | None]) -> Columns | None:
    """The parsed lines (as :class:`Lines` columns) from each line's word letters and all the values
    in order, or None if a line is not clean. The lines of one letter sequence ("NGXYF") are read
    together: their values gathered by numpy, their dicts made by ``map``/``zip`` in C — Python
    code runs per distinct sequence, not per line or word. ``ready``: the lines read elsewhere
    (line number -> parsed line, None for nothing), their letters blank here."""
    count = len(letters)
    lens = np.fromiter(map(len, letters), dtype=np.int64, count=count)
    if int(lens.sum()) != len(vals):
        return None
    starts = np.cumsum(lens) - lens
    first_of: dict[str, int] = {}
    seq = np.fromiter(map(first_of.setdefault, letters, range(count)), dtype=np.int64, count=count)
    order = np.argsort(seq, kind="stable")
    rows_parts: list[np.ndarray] = []
    n_col: list = []
    g_col: list = []
    m_col: list = []
    w_col: list = []
    for rows in np.split(order, np.flatnonzero(np.diff(seq[order])) + 1):
        pattern = letters[int(rows[0])]
        if not pattern:
            continue
        plan = _line_plan(pattern)
        if plan is None:
            return None
        has_n, gpos, mpos, wpos, wletters = plan
        at = starts[rows]
        if has_n:
            nv = vals[at]
            if ((nv != np.trunc(nv)) | (nv < 0) | (nv > MAX_LINE_NUMBER)).any():
                return None
            n_col += nv.astype(np.int64).tolist()
        else:
            n_col += [None] * len(rows)
        g = _code_dicts(vals, at, gpos, G_CODES)
        m = _code_dicts(vals, at, mpos, M_CODES)
        if g is None or m is None:
            return None
        g_col += g
        m_col += m
        if wpos:
            w_col += _dicts([c for L, j in zip(wletters, wpos) for c in (repeat(L), vals[at + j].tolist())])
        else:
            w_col += [{} for _ in range(len(rows))]
        rows_parts.append(rows)
    got = [(lineno - first_lineno, pl) for lineno, pl in ready.items() if pl is not None]
    if got:
        rows_parts.append(np.array([r for r, _ in got], dtype=np.int64))
        n_col += [pl.n for _, pl in got]
        g_col += [pl.g for _, pl in got]
        m_col += [pl.m for _, pl in got]
        w_col += [pl.words for _, pl in got]
    if not rows_parts:
        return [], [], [], [], [], []
    rows_all = np.concatenate(rows_parts)
    perm_arr = np.argsort(rows_all, kind="stable")
    rows_arr = rows_all[perm_arr]
    perm, rows_sorted = perm_arr.tolist(), rows_arr.tolist()
    texts = list(map(raw.__getitem__, rows_sorted))
    if got:      # a line read elsewhere keeps its own text (as written)
        own = {r: pl.text for r, pl in got}
        texts = [own.get(r, t) for r, t in zip(rows_sorted, texts)]
    return ((rows_arr + first_lineno).tolist(), list(map(n_col.__getitem__, perm)),
            list(map(g_col.__getitem__, perm)), list(map(m_col.__getitem__, perm)),
            list(map(w_col.__getitem__, perm)), texts)


def _scan_clean_lines(text: str, raw: list[str], first_lineno: int, notes: list[Fault] | None,
                      params: Parameters | None) -> Lines | None:
    """:func:`_scan_clean`'s work (it may change ``params`` before it gives up)."""
    # a comment becomes "\v": white space between words, but not allowed between a letter and its
    # number (as in the checking path, where "F()0" is a letter without a value)
    t = _COMMENTS.sub("\v", text) if "(" in text or ";" in text else text
    if not t.isascii():
        return None
    if raw and max(map(len, raw)) > MAX_LINE_LENGTH and any(
            len(_COMMENTS.sub("\v", line)) > MAX_LINE_LENGTH for line in raw if len(line) > MAX_LINE_LENGTH):
        return None   # a long line whose comments do not make it short (the checking path measures exactly)
    if "$" in t or "?" in t:
        if notes is None:
            return None
        tl = t.split("\n")
        for i, code in enumerate(tl):
            if "$" in code or "?" in code:
                note = _host_command(raw[i], i + first_lineno)
                if note is None:
                    return None      # a $ or ? elsewhere: a fault
                notes.append(note)
                tl[i] = ""
        t = "\n".join(tl)
    ready: dict[int, ParsedLine | None] = {}     # lines with parameters or expressions, read
    if "#" in t or "[" in t:
        if params is None:
            return None
        tl = t.split("\n")
        for i, code in enumerate(tl):
            if "#" in code or "[" in code:
                got, faults, _ = _read_expression_line(raw[i], i + first_lineno, params, False)
                if faults:
                    return None
                ready[i + first_lineno] = got
                tl[i] = ""
        t = "\n".join(tl)
    if "%" in t:
        blanked = _without_percent_lines(t, raw)
        if blanked is None:
            return None
        t = blanked
    t = t.upper()
    if _ONLY_WORDS.fullmatch(t) is None:
        return None  # junk, a stray parenthesis, a letter without a number, ... (lower case was upper-cased)
    # every number follows its letter, so the numbers in order are the words' values in order
    try:
        vals = array("d", map(float, t.translate(_LETTERS_TO_SPACE).split()))
    except ValueError:
        return None
    values = np.frombuffer(vals, dtype=np.float64)
    if values.size and float(np.abs(values).max()) > MAX_ABS_VALUE:
        return None
    cols = _columns_by_sequence(t.translate(_KEEP_LETTERS).split("\n"), values, raw, first_lineno, ready)
    if cols is None:
        return None
    return Lines(cols)


#: word faults after which the rest of the line is still read: the word is dropped, the others are
#: kept for the refused line (:func:`_scan`'s ``refused``)
_DROPPABLE = frozenset({ErrorCode.UNSUPPORTED_WORD, ErrorCode.UNSUPPORTED_G_CODE, ErrorCode.UNSUPPORTED_M_CODE,
                        ErrorCode.REPEATED_WORD, ErrorCode.MODAL_GROUP_VIOLATION, ErrorCode.BAD_LINE_NUMBER})


def _scan(text: str, raw: list[str], first_lineno: int, max_faults: int, from_bytes: bool = False,
          refused: list[ParsedLine] | None = None, params: Parameters | None = None):
    """The tokeniser and per-line checker over a whole text: one regex pass, one Python loop.

    Every word fault of a line is reported (each at its column); a character that is not G-code
    ends the reading of its line (what follows it cannot be read reliably).

    Args:
        refused: a list that receives, for each line refused only for word faults (unsupported
            words and codes, repeated words, two codes of a group, a bad N), the line made of its
            valid words (a repeated letter and a contradicted group dropped): the interpreter
            keeps their modal meaning so that one bad word does not make later lines faulty.
        params: the program's parameters: lines with parameters or expressions are read into
            plain lines with them (and set them); None: such lines are not expected.

    Returns:
        (lines, faults, line_count, truncated): the faults in line order, with the notes of the
        lines read (which do not count towards ``max_faults``).
    """
    prechecked = _prechecked(text, raw, first_lineno, from_bytes)
    notes = {k: f for k, f in prechecked.items() if f.severity is Severity.NOTE}
    bad = {k: [f] for k, f in prechecked.items() if k not in notes}
    ready: dict[int, ParsedLine] = {}      # lines with expressions, read into plain lines
    ready_refused: dict[int, ParsedLine] = {}
    if params is not None and ("#" in text or "[" in text):
        for i, line in enumerate(raw):
            ln = i + first_lineno
            if ("#" in line or "[" in line) and ln not in bad and ln not in notes and has_expression(_masked(line)):
                got, its_faults, its_refused = _read_expression_line(line, ln, params, from_bytes)
                if its_faults:
                    bad[ln] = its_faults
                    if its_refused is not None:
                        ready_refused[ln] = its_refused
                elif got is not None:
                    ready[ln] = got
                else:
                    ready[ln] = None      # type: ignore[assignment]   # settings only
    if bad or notes or ready:   # those lines are done: do not tokenise them (a huge line would make millions of tokens)
        text = "\n".join("" if i + first_lineno in bad or i + first_lineno in notes or i + first_lineno in ready
                         else line for i, line in enumerate(raw))
    out: list[ParsedLine] = []
    faults: list[Fault] = []
    append = out.append
    up = _LETTERS_UP
    g_codes, m_codes, letters = G_CODES, M_CODES, WORD_LETTERS
    lo, hi = -MAX_ABS_VALUE, MAX_ABS_VALUE
    lineno = first_lineno
    skip = lineno in bad
    if skip:
        faults.extend(bad[lineno])
        if refused is not None and lineno in ready_refused:
            refused.append(ready_refused[lineno])
    elif ready and ready.get(lineno) is not None:
        append(ready[lineno])
    n = None
    g: dict = {}
    m: dict = {}
    words: dict = {}
    first = True
    faulty = False       # the line has a word fault (it is refused; its other words are still read)
    salvage = True       # its valid words can stand for it (only word faults, see _DROPPABLE)
    dropped: set = set()  # letters and group keys left out of the refused line
    wordno = 0           # words of the current line so far (the one at fault is located by its index)
    fault = None
    new = tuple.__new__
    PL = ParsedLine
    for letter, num, other in _TOKEN.findall(text):
        if letter:
            if skip:
                continue
            wordno += 1
            L = up[letter]
            v = float(num)  # the token pattern admits only digits, one point and a sign
            if not lo <= v <= hi:  # also catches inf from over-long digit strings
                fault = (ErrorCode.NUMBER_OUT_OF_RANGE, L, num)
            elif L == "G":
                grp = g_codes.get(v)
                if grp is None:
                    fault = (ErrorCode.UNSUPPORTED_G_CODE, L, num)
                elif grp in g:
                    fault = (ErrorCode.MODAL_GROUP_VIOLATION, L, num)
                    dropped.add(grp)
                else:
                    g[grp] = v
            elif L in letters:
                if L in words:
                    fault = (ErrorCode.REPEATED_WORD, L, num)
                    dropped.add(L)
                else:
                    words[L] = v
            elif L == "M":
                grp = m_codes.get(v)
                if grp is None:
                    fault = (ErrorCode.UNSUPPORTED_M_CODE, L, num)
                elif grp in m:
                    fault = (ErrorCode.MODAL_GROUP_VIOLATION, L, num)
                    dropped.add(grp)
                else:
                    m[grp] = v
            elif L == "N":
                if not first or v != int(v) or v < 0 or v > MAX_LINE_NUMBER:
                    fault = (ErrorCode.BAD_LINE_NUMBER, L, num)
                else:
                    n = int(v)
            else:
                fault = (ErrorCode.UNSUPPORTED_WORD, L, num)
            first = False
            if fault is not None:
                wf = _locate(raw[lineno - first_lineno], lineno, *fault, wordno)
                faults.append(wf)
                fault = None
                faulty = True
                if wf.code not in _DROPPABLE:   # a number out of range, an exponent: the words around it are suspect
                    salvage = False
        elif other == "\n":
            if not first:
                if not skip and not faulty:
                    append(new(PL, (lineno, n, g, m, words, raw[lineno - first_lineno])))
                elif refused is not None and salvage and not skip:
                    _refused_line(refused, lineno, n, g, m, words, dropped, raw[lineno - first_lineno])
                n = None
                g = {}
                m = {}
                words = {}
                first = True
                wordno = 0
            faulty, salvage = False, True
            if dropped:
                dropped = set()
            if len(faults) >= max_faults:
                return out, _with_notes(faults, notes, lineno), len(raw), lineno - first_lineno + 1 < len(raw)
            lineno += 1
            skip = lineno in bad
            if skip:
                faults.extend(bad[lineno])
                if refused is not None and lineno in ready_refused:
                    refused.append(ready_refused[lineno])
            elif ready and ready.get(lineno) is not None:
                append(ready[lineno])
        elif other and not skip:
            f = _diagnose(raw[lineno - first_lineno], lineno)
            if f is not None:
                faults.append(f)
                skip = True
    if not skip and not first:
        if not faulty:
            append(ParsedLine(lineno, n, g, m, words, raw[lineno - first_lineno]))
        elif refused is not None and salvage:
            _refused_line(refused, lineno, n, g, m, words, dropped, raw[lineno - first_lineno])
    return out, _with_notes(faults[:max_faults], notes, lineno), len(raw), len(faults) > max_faults


def _read_expression_line(line: str, lineno: int, params: Parameters, from_bytes: bool):
    """A line with parameters or expressions: (its plain parsed line or None, its faults, the line
    of its valid words when it is refused for word faults). The settings of a line without
    faults are made; the columns of faults are the line's own."""
    try:
        plain, cols, sets = expand_line(line, params)
    except ExpressionError as exc:
        return None, [Fault(exc.code, lineno, exc.index + 1, exc.message)], None
    refused: list[ParsedLine] = []
    lines, faults, _, _ = _scan(plain, [plain], lineno, 1 << 20, from_bytes, refused)
    if faults:
        plain_words = plain.split(" ")
        starts = {c: k for k, c in enumerate(_word_starts(plain))}
        out = []
        for f in faults:
            k = starts.get(f.column - 1)
            if k is None:
                out.append(f)
                continue
            a, b = cols[k]
            written, word = line[a:b].strip(), plain_words[k]
            msg = f.message
            if written.upper().replace(" ", "") != word and msg.startswith(word):   # name it as written
                msg = f"{written} (= {word}){msg[len(word):]}"
            out.append(replace(f, column=a + 1, message=msg))
        return None, out, refused[0]._replace(text=line) if refused else None
    apply_settings(params, sets)
    return (lines[0]._replace(text=line) if lines else None), [], None


def _plain_lines(raw: list[str], fast: bool, from_bytes: bool) -> tuple[Columns, list[ParsedLine],
                                                                     list[Fault]]:
    """The lines of ``raw`` (lines with O-words or parameters blanked) in one pass: (parsed lines as
    :attr:`Lines.columns`, refused lines, faults and notes in line order); the fast path first when ``fast``."""
    text = "\n".join(raw)
    if fast:
        notes: list[Fault] = []
        lines = _scan_clean(text, raw, 1, notes, None)
        if lines is not None:
            return lines.columns, [], notes
    refused: list[ParsedLine] = []
    got, faults, _, _ = _scan(text, raw, 1, 1 << 40, from_bytes, refused, None)
    return Lines.of(got).columns, refused, faults


#: how :mod:`.flow` reads the lines of a program with O-words: as this module reads any line
LINE_READER = LineReader(
    prechecked=lambda raw, from_bytes: _prechecked("\n".join(raw), raw, 1, from_bytes),
    plain=_plain_lines,
    expression=lambda line, lineno, params, from_bytes: _read_expression_line(line, lineno, params, from_bytes),
    has_expression=lambda line: has_expression(_masked(line)),
    chunk=lambda cols, faults, refused: ParseChunk(Lines(cols), faults, refused),
)


def _word_starts(plain: str) -> list[int]:
    """0-based start of each word of a plain line made by :func:`~.expressions.expand_line` (one
    space between words)."""
    out, i = [], 0
    for w in plain.split(" "):
        out.append(i)
        i += len(w) + 1
    return out


def _refused_line(refused: list[ParsedLine], lineno: int, n, g: dict, m: dict, words: dict, dropped: set,
                  text: str) -> None:
    """Append the line of the valid words of a refused line (if it has any)."""
    if dropped:
        g = {k: v for k, v in g.items() if k not in dropped}
        m = {k: v for k, v in m.items() if k not in dropped}
        words = {k: v for k, v in words.items() if k not in dropped}
    if g or words or m:
        refused.append(ParsedLine(lineno, n, g, m, words, text))


def _with_notes(faults: list[Fault], notes: dict[int, Fault], last: int) -> list[Fault]:
    """``faults`` and the notes of the lines up to ``last``, in line order."""
    if not notes:
        return faults
    return sorted(faults + [f for k, f in notes.items() if k <= last], key=lambda f: f.line)


# ----- fault location (slow path, faulty lines only) -------------------------------------

def word_columns(text: str) -> list[tuple[int, str, str]]:
    """(1-based column, upper-case letter, number text) of every word of a line, in order (for a
    word whose value is a parameter or an expression the number text is ``nan``)."""
    if "#" in text or "[" in text:
        return _expression_word_columns(text)
    return [(mt.start(1) + 1, mt.group(1).upper(), mt.group(2)) for mt in _TOKEN.finditer(text) if mt.group(1)]


def _locate(text: str, lineno: int, code: ErrorCode, letter: str, num: str, wordno: int) -> Fault:
    """The fault ``code`` of the ``wordno``-th word (1-based; ``letter`` ``num``) of the line ``text``.

    Every message starts with the word at fault as written (e.g. ``N1: …``), and the column is
    that word's, so the two always agree.
    """
    words = word_columns(text)
    col = words[wordno - 1][0] if 0 < wordno <= len(words) else 0
    word = f"{letter}{num}"
    if code is ErrorCode.NUMBER_OUT_OF_RANGE:
        msg = f"{word}: the value is beyond ±{MAX_ABS_VALUE:,.0f} (in any unit: mm, inch, degrees, s)"
    elif code in (ErrorCode.UNSUPPORTED_G_CODE, ErrorCode.UNSUPPORTED_M_CODE):
        msg = f"{word} is not supported"
    elif code is ErrorCode.REPEATED_WORD:
        msg = f"{word}: {letter} appears twice on this line"
    elif code is ErrorCode.MODAL_GROUP_VIOLATION:
        grp = (G_CODES if letter == "G" else M_CODES).get(float(num))
        msg = f"{word} is a second code of the {grp} group on this line"
    elif code is ErrorCode.BAD_LINE_NUMBER:
        msg = (f"{word}: the N word must come first" if wordno > 1
               else f"{word}: a line number is a whole number 0..{MAX_LINE_NUMBER}")
    else:  # UNSUPPORTED_WORD
        i = col - 1
        if i > 0 and text[i] in "eE" and (text[i - 1].isdigit() or text[i - 1] == "."):
            j = i - 1
            while j > 0 and (text[j - 1].isdigit() or text[j - 1] in ".+-"):
                j -= 1
            return Fault(ErrorCode.EXPONENT_NOT_ALLOWED, lineno, col,
                         f"{text[j:i] + text[i] + num!r}: exponents are not G-code")
        msg = f"{word}: {letter} words are not supported"
    return Fault(code, lineno, col, msg)


def _diagnose(text: str, lineno: int) -> Fault | None:
    """The fault for the first character that is neither a word, a comment nor space.

    Returns None for a line holding only ``%`` (a program delimiter).
    """
    for mt in _TOKEN.finditer(text):
        junk = mt.group(3)
        if not junk:
            continue
        i = mt.start(3)
        col = i + 1
        if junk == "(":
            close = text.find(")", i + 1)
            if close < 0:
                return Fault(ErrorCode.UNCLOSED_COMMENT, lineno, col, "( without a closing )")
            return Fault(ErrorCode.NESTED_COMMENT, lineno, text.find("(", i + 1) + 1, "( inside a comment")
        if junk == ")":
            return Fault(ErrorCode.UNMATCHED_PAREN, lineno, col, ") without an opening (")
        if junk == "%":
            if text.strip(" \t\r\f\v") == "%":   # the white space of _TOKEN, not str.strip()'s
                return None
            return Fault(ErrorCode.UNEXPECTED_CHARACTER, lineno, col,
                         "'%' (the program delimiter) must stand alone on its line")
        if junk.isalpha():
            rest = text[i + 1:].lstrip(" \t")
            if rest[:1] in ("+", "-", ".") or rest[:1].isdigit():
                return Fault(ErrorCode.BAD_NUMBER, lineno, col, f"{junk.upper()}{rest.split()[0]}: not a number")
            return Fault(ErrorCode.MISSING_VALUE, lineno, col, f"{junk.upper()} has no value")
        if junk.isdigit() or junk in "+-.":
            prev = text[:i].rstrip(" \t")
            nm = _NUMBER.match(text, i)
            if nm and text[nm.end():nm.end() + 1] in ("e", "E"):
                em = re.match(r"[eE][-+]?[0-9]*", text[nm.end():])
                ex = em.group(0) if em else text[nm.end()]
                return Fault(ErrorCode.EXPONENT_NOT_ALLOWED, lineno, nm.end() + 1,
                             f"{nm.group(0) + ex!r}: exponents are not G-code (and the number has no letter)")
            if prev and (prev[-1].isdigit() or prev[-1] in ".+-"):
                return Fault(ErrorCode.BAD_NUMBER, lineno, col,
                             "malformed number (a second sign or decimal point, or a space inside a number)")
            return Fault(ErrorCode.BAD_NUMBER, lineno, col, f"number {nm.group(0) if nm else junk!r} has no letter")
        if ord(junk) < 32 or ord(junk) == 127:
            return Fault(ErrorCode.UNEXPECTED_CHARACTER, lineno, col, f"control character 0x{ord(junk):02X}")
        if junk in _POLAR:
            return Fault(ErrorCode.UNEXPECTED_CHARACTER, lineno, col,
                         f"{junk!r} is LinuxCNC's polar {_POLAR[junk]}: polar coordinates are not supported "
                         f"(give X and Y)")
        return Fault(ErrorCode.UNEXPECTED_CHARACTER, lineno, col, f"{junk!r} is not G-code")
    return Fault(ErrorCode.UNEXPECTED_CHARACTER, lineno, 0, "unexpected character")  # pragma: no cover
