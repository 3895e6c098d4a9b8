"""LinuxCNC's O-words: subroutines, conditions and loops, expanded into the lines a program executes.

A program that holds O-words (``o100 sub``, ``o<drill> call [5] [2]``, ``o1 if [#1 GT 0]``,
``o2 while [...]``, ``o3 do`` … ``o3 while [...]``, ``o4 repeat [10]``) is read here instead of line
by line: its O-word lines are checked and matched into blocks (statically, the whole file, so a
missing ``endif`` in a branch never taken is still found), then the program is **run** — conditions
and parameters evaluated as LinuxCNC does — into the sequence of lines it executes, each keeping its
own line number and text: the interpreter, the planner and the run's log see a line executed ten
times in a loop ten times, always under its own line number, and every fault names the line and
the column of the file.

LinuxCNC's rules (its manual, "O Codes"), followed here:

* a subroutine is ``o<label> sub`` … ``o<label> endsub`` at the top level of the file (bodies are
  not nested), defined once, and may only be called **after** its definition was read; ``call``
  passes up to 30 arguments ``[expr]`` into ``#1`` … ``#30`` of the call (``#N+1`` … ``#30`` keep
  the caller's values), which are restored on return; named parameters without a leading ``_``
  are local to the call (``#<_name>`` is global); ``return`` / ``endsub`` may give a value
  (``#<_value>``, ``#<_value_returned>``); calls nest at most 10 deep (recursion included).
* ``if`` / ``elseif`` / ``else`` / ``endif``; ``while`` / ``endwhile``; ``do`` / ``while``;
  ``repeat [n]`` / ``endrepeat``; ``break`` and ``continue`` leave or restart the ``while`` or ``do``
  loop of their label. A condition is true when its value is not 0.
* labels of control blocks are local to their subroutine (or the main program), subroutine labels
  global; a label opens one block per scope. An O-word's line holds nothing else (comments may).

Bounds, so that no program can hang a check or exhaust memory: a loop runs at most
:data:`MAX_LOOP_ITERATIONS` times in one go (fault 58), calls nest at most :data:`MAX_CALL_DEPTH`
(fault 59), and a program executes at most :data:`MAX_EXECUTED_LINES` lines (fault 105); each of
these ends the expansion at the line where it happens. A fault of an O-word itself (a condition
that cannot be computed, an unknown subroutine) ends it too: the program's flow is unknown from
there. A block fault (51–57) anywhere keeps the whole program from running: nothing is executed.

Faults: 50–59 (:class:`~.errors.ErrorCode`), and the parser's own on the other lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from itertools import compress
from typing import Any, NamedTuple

import numpy as np

from .errors import ErrorCode, Fault, Severity
from .expressions import ExpressionError, Parameters, evaluate

#: parsed lines as six columns: line numbers, N, G, M, words, text
Columns = tuple[list, list, list, list, list, list]

__all__ = ["has_o_words", "expand_chunks", "LineReader", "OLine", "read_o_line", "MAX_LOOP_ITERATIONS", "MAX_CALL_DEPTH",
           "MAX_ARGUMENTS", "MAX_EXECUTED_LINES", "KEYWORDS"]

#: a while or do loop runs at most this many times in one go; a repeat may ask for at most this many
MAX_LOOP_ITERATIONS = 10_000
#: deepest nesting of subroutine calls (LinuxCNC's limit)
MAX_CALL_DEPTH = 10
#: most arguments of one call (#1 … #30)
MAX_ARGUMENTS = 30
#: most lines a program executes (each executed line counts, O-words, comments and blank lines too)
MAX_EXECUTED_LINES = 500_000
#: M2 and M30: the program ends
_STOP_CODES = (2.0, 30.0)

#: the O-word keywords and what may follow them: "none", "one" [expr], "optional" [expr], "args"
KEYWORDS = {"sub": "none", "endsub": "optional", "return": "optional", "call": "args", "if": "one",
            "elseif": "one", "else": "none", "endif": "none", "while": "one", "endwhile": "none", "do": "none",
            "repeat": "one", "endrepeat": "none", "break": "none", "continue": "none"}

_COMMENT = r"\([^()\n\r]*\)"
# an O-word line: white space, comments, an optional N word, then O (matched at the start of a line)
_LINE_O = re.compile(rf"[ \t]*(?:{_COMMENT}[ \t]*)*(?:[Nn][ \t]*[-+0-9.]+[ \t]*(?:{_COMMENT}[ \t]*)*)?[Oo]")
_LINE_O_BYTES = re.compile(_LINE_O.pattern.encode())
# where an O-word may be: an O and its label (a number, <name>, [expr] or #param); one C-speed scan,
# so that a program without O-words costs almost nothing more to parse
_O_LABEL = re.compile(r"[Oo][ \t]*[0-9<\[#]")
_O_LABEL_BYTES = re.compile(_O_LABEL.pattern.encode())
# the same on one line with its comments blanked (columns kept)
_O_START = re.compile(r"[ \t]*(?:([Nn])[ \t]*([-+0-9.]+)[ \t]*)?[Oo]")
_COMMENTS = re.compile(r"\([^()\n]*\)|;[^\n]*")


def has_o_words(text) -> bool:
    """Whether a program text (str or bytes, any line ends) has a line that starts with an O-word
    and its label (``o100 sub``, ``O<x> call``; an O without a label is an ordinary bad word)."""
    cand: Any
    line_o: Any
    nl: Any
    cr: Any
    if isinstance(text, str):
        cand, line_o, nl, cr = _O_LABEL, _LINE_O, "\n", "\r"
    else:
        text = bytes(text) if isinstance(text, memoryview) else text
        cand, line_o, nl, cr = _O_LABEL_BYTES, _LINE_O_BYTES, b"\n", b"\r"
    for m in cand.finditer(text):
        at = m.start()
        start = max(text.rfind(nl, 0, at), text.rfind(cr, 0, at)) + 1
        got = line_o.match(text, start)
        if got is not None and got.end() - 1 == at:
            return True
    return False


def _masked(line: str) -> str:
    """``line`` with its closed comments (and a ``;`` comment) blanked, columns kept."""
    return _COMMENTS.sub(lambda mt: " " * len(mt.group()), line)


class OLine(NamedTuple):
    """One O-word line, read (not yet run).

    Attributes:
        lineno: 1-based line number.
        col: 1-based column of the O.
        label: ``"100"`` (a number, leading zeros dropped) or ``"<name>"`` (lower case, no spaces);
            None when it is indirect (``o[#1] call``, ``o#<sub> call``).
        indirect: (start, end) 0-based span of an indirect label, else None.
        keyword: lower case (:data:`KEYWORDS`).
        args: (start, end) 0-based spans of its ``[…]`` arguments.
        code: the line with its comments blanked (what the arguments are evaluated from).
    """

    lineno: int
    col: int
    label: str | None
    indirect: tuple[int, int] | None
    keyword: str
    args: tuple[tuple[int, int], ...]
    code: str

    @property
    def name(self) -> str:
        """How the line names itself in messages: ``o100 while``."""
        lab = self.label
        if lab is None:
            a, b = self.indirect or (0, 0)
            lab = self.code[a:b]
        return f"o{lab} {self.keyword}"


def _bracket_end(s: str, i: int) -> int:
    """Index just after the ``]`` that closes the ``[`` at ``s[i]``, or -1."""
    depth = 0
    for j in range(i, len(s)):
        c = s[j]
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return j + 1
    return -1


def _parameter_end(s: str, i: int) -> int:
    """Index just after the parameter reference starting with ``#`` at ``s[i]`` (static), or -1."""
    j = i + 1
    while j < len(s) and s[j] in " \t":
        j += 1
    if s[j:j + 1] == "<":
        k = s.find(">", j)
        return -1 if k < 0 else k + 1
    if s[j:j + 1] == "[":
        return _bracket_end(s, j)
    if s[j:j + 1] == "#":
        return _parameter_end(s, j)
    k = j
    while k < len(s) and s[k].isdigit():
        k += 1
    return k if k > j else -1


def read_o_line(line: str, lineno: int) -> tuple[OLine | None, list[Fault]]:
    """Read an O-word line (its syntax only). Returns the line (None when its keyword cannot be
    read: it then has no place in the program's blocks) and its faults."""
    s = _masked(line)
    m = _O_START.match(s)
    if m is None:        # pragma: no cover - only O-word lines come here
        return None, [Fault(ErrorCode.BAD_O_WORD, lineno, 0, "not an O-word line")]
    faults: list[Fault] = []
    if m.group(1):
        num = m.group(2)
        try:
            v = float(num)
        except ValueError:
            v = -1.0
        if v != int(v) or not 0 <= v <= 99999 or not num.replace(".", "").isdigit():
            faults.append(Fault(ErrorCode.BAD_LINE_NUMBER, lineno, m.start(1) + 1,
                                f"N{num}: a line number is a whole number 0..99999"))
    o_at = m.end() - 1
    col = o_at + 1
    i = m.end()
    n = len(s)
    while i < n and s[i] in " \t":
        i += 1
    label: str | None = None
    indirect: tuple[int, int] | None = None
    c = s[i:i + 1]
    if c == "<":
        k = s.find(">", i)
        name = "".join(s[i + 1:k].split()).lower() if k > 0 else ""
        if k < 0 or not name or not all(ch.isalnum() or ch in "_." for ch in name):
            return None, faults + [Fault(ErrorCode.BAD_O_WORD, lineno, i + 1, "o<...>: a label name is letters, "
                                         "digits, _ and . in < >")]
        label = f"<{name}>"
        i = k + 1
    elif c.isdigit():
        k = i
        while k < n and s[k].isdigit():
            k += 1
        if s[k:k + 1] == ".":
            return None, faults + [Fault(ErrorCode.BAD_O_WORD, lineno, col, f"O{s[i:k + 1]}...: an O-number is a "
                                         f"whole number")]
        label = str(int(s[i:k]))
        i = k
    elif c in ("[", "#"):
        k = _bracket_end(s, i) if c == "[" else _parameter_end(s, i)
        if k < 0:
            return None, faults + [Fault(ErrorCode.BAD_EXPRESSION, lineno, i + 1, "the indirect O-number is not "
                                         "closed on its line")]
        indirect = (i, k)
        i = k
    else:
        return None, faults + [Fault(ErrorCode.BAD_O_WORD, lineno, col, "O needs a label: a number (o100) or a "
                                     "name (o<name>), then a keyword (sub, call, if, while, ...)")]
    while i < n and s[i] in " \t":
        i += 1
    k = i
    while k < n and s[k].isalpha():
        k += 1
    keyword = s[i:k].lower()
    shown = f"o{label if label is not None else s[indirect[0]:indirect[1]]}"   # type: ignore[index]
    if keyword not in KEYWORDS:
        what = f"{s[i:k]!r} is not an O-word keyword" if keyword else "the keyword is missing"
        return None, faults + [Fault(ErrorCode.BAD_O_WORD, lineno, i + 1 if keyword else col,
                                     f"{shown}: {what} (sub endsub return call if elseif else endif while "
                                     f"endwhile do repeat endrepeat break continue)")]
    kcol = i + 1
    i = k
    args: list[tuple[int, int]] = []
    while True:
        while i < n and s[i] in " \t":
            i += 1
        if i >= n:
            break
        if s[i] == "[":
            e = _bracket_end(s, i)
            if e < 0:
                faults.append(Fault(ErrorCode.BAD_EXPRESSION, lineno, i + 1, "[ is not closed on its line"))
                break
            args.append((i, e))
            i = e
            continue
        j = i
        while j < n and s[j] not in " \t[":
            j += 1
        faults.append(Fault(ErrorCode.BAD_O_WORD, lineno, i + 1,
                            f"{s[i:j]!r} after {shown} {keyword}: an O-word's line holds nothing else"
                            + (" (arguments are [expressions])" if keyword in ("call", "return", "endsub", "if",
                                                                             "elseif", "while", "repeat") else "")))
        break
    kind = KEYWORDS[keyword]
    if indirect is not None and keyword != "call":
        faults.append(Fault(ErrorCode.BAD_O_WORD, lineno, indirect[0] + 1,
                            f"{shown} {keyword}: an indirect label is accepted on call only"))
    if kind == "none" and args:
        faults.append(Fault(ErrorCode.BAD_O_WORD, lineno, args[0][0] + 1, f"{shown} {keyword} takes no [argument]"))
    elif kind == "one" and len(args) != 1:
        at = args[1][0] + 1 if args else kcol
        what = "[count]" if keyword == "repeat" else "[condition]"
        faults.append(Fault(ErrorCode.BAD_O_WORD, lineno, at, f"{shown} {keyword} takes one {what}"
                            + ("" if args else ", e.g. " + (f"{shown} repeat [5]" if keyword == "repeat"
                                                            else f"{shown} {keyword} [#1 LT 10]"))))
    elif kind == "optional" and len(args) > 1:
        faults.append(Fault(ErrorCode.BAD_O_WORD, lineno, args[1][0] + 1, f"{shown} {keyword} takes at most one "
                            f"[value]"))
    elif kind == "args" and len(args) > MAX_ARGUMENTS:
        faults.append(Fault(ErrorCode.TOO_MANY_ARGUMENTS, lineno, args[MAX_ARGUMENTS][0] + 1,
                            f"{shown} call passes {len(args)} arguments: at most {MAX_ARGUMENTS} (#1 to "
                            f"#{MAX_ARGUMENTS})"))
    return OLine(lineno, col, label, indirect, keyword, tuple(args), s), faults


class _Open:
    """A block being matched: its kind, label, O-line index (0-based line) and, for if, its else."""

    __slots__ = ("kind", "label", "idx", "else_line")

    def __init__(self, kind: str, label: str, idx: int) -> None:
        self.kind, self.label, self.idx, self.else_line = kind, label, idx, 0


class Structure:
    """The blocks of a program's O-words, matched (0-based line indices throughout).

    Attributes:
        subs: label -> index of its ``sub`` line (the first definition).
        closer: opening line -> its closing line (sub → endsub, if → endif, while → endwhile,
            do → its while, repeat → endrepeat).
        opener: closing line -> its opening line.
        heads: if line -> its elseif / else lines and its endif, in order.
        endif_of: elseif / else line -> the endif of its if.
        loop_of: break / continue line -> the opening line of its loop.
        do_end: the ``while`` lines that close a ``do``.
        faults: block faults (51–57), in line order.
    """

    def __init__(self, olines: dict[int, OLine]) -> None:
        self.subs: dict[str, int] = {}
        self.closer: dict[int, int] = {}
        self.opener: dict[int, int] = {}
        self.heads: dict[int, list[int]] = {}
        self.endif_of: dict[int, int] = {}
        self.loop_of: dict[int, int] = {}
        self.do_end: set[int] = set()
        self.faults: list[Fault] = []
        self._olines = olines
        self._stack: list[_Open] = []
        self._labels: dict[int, dict[str, int]] = {}     # scope (its sub's line, -1: main) -> label -> line
        calls: list[OLine] = []
        for idx in sorted(olines):
            o = olines[idx]
            if o.label is None:
                continue              # an indirect call: its label is known when it runs
            getattr(self, "_" + o.keyword)(o, idx)
            if o.keyword == "call":
                calls.append(o)
        for b in self._stack:
            self._unclosed(b)
        for o in calls:
            if o.label not in self.subs:
                self.faults.append(Fault(ErrorCode.UNKNOWN_SUBROUTINE, o.lineno, o.col,
                                         f"{o.name}: there is no o{o.label} sub in this program (subroutine files are "
                                         f"not searched)"))
        self.faults.sort(key=lambda f: f.line)

    # ----- helpers ------------------------------------------------------------------------------
    def _fault(self, code: ErrorCode, o: OLine, msg: str) -> None:
        self.faults.append(Fault(code, o.lineno, o.col, f"{o.name}: {msg}"))

    def _where(self, b: _Open) -> str:
        return f"o{b.label} {self._olines[b.idx].keyword} (line {b.idx + 1})"

    def _unclosed(self, b: _Open) -> None:
        end = {"sub": "endsub", "if": "endif", "while": "endwhile", "do": "while [condition]",
               "repeat": "endrepeat"}[b.kind]
        o = self._olines[b.idx]
        self.faults.append(Fault(ErrorCode.BLOCK_NOT_CLOSED, o.lineno, o.col,
                                 f"{o.name} has no o{b.label} {end} to close it"))

    def _scope(self) -> int:
        for b in reversed(self._stack):
            if b.kind == "sub":
                return b.idx
        return -1

    def _find(self, kinds: tuple[str, ...], label: str) -> int:
        """Position in the stack of the innermost open block of one of ``kinds`` with ``label``, not
        looking past the innermost subroutine (unless a sub is looked for); -1 if none."""
        for pos in range(len(self._stack) - 1, -1, -1):
            b = self._stack[pos]
            if b.kind in kinds and b.label == label:
                return pos
            if b.kind == "sub":
                return -1
        return -1

    def _close_to(self, pos: int) -> _Open:
        """The block at ``pos``; the blocks opened after it are reported unclosed and dropped."""
        for b in self._stack[pos + 1:]:
            self._unclosed(b)
        del self._stack[pos + 1:]
        return self._stack[pos]

    def _mismatch(self, o: OLine, what: str) -> None:
        top = self._stack[-1] if self._stack else None
        inside = f"; the innermost open block is {self._where(top)}" if top is not None else ""
        self._fault(ErrorCode.BLOCK_MISMATCH, o, f"{what}{inside}")

    def _open(self, o: OLine, idx: int, kind: str) -> None:
        labels = self._labels.setdefault(self._scope(), {})
        first = labels.get(o.label)   # type: ignore[arg-type]
        if first is not None:
            where = "this subroutine" if self._scope() >= 0 else "the main program"
            self._fault(ErrorCode.BLOCK_MISMATCH, o, f"label o{o.label} already opens a block on line {first + 1} "
                        f"in {where}: use another label")
        else:
            labels[o.label] = idx      # type: ignore[index]
        self._stack.append(_Open(kind, o.label, idx))   # type: ignore[arg-type]

    def _close(self, o: OLine, idx: int, kind: str) -> int:
        """Close the innermost open ``kind`` block labelled like ``o``: its opening line, or -1."""
        pos = self._find((kind,), o.label)      # type: ignore[arg-type]
        if pos < 0:
            self._mismatch(o, f"there is no open o{o.label} {kind} to close")
            return -1
        b = self._close_to(pos)
        self._stack.pop()
        self.closer[b.idx] = idx
        self.opener[idx] = b.idx
        return b.idx

    # ----- one method per keyword -----------------------------------------------------------------
    def _sub(self, o: OLine, idx: int) -> None:
        if self._stack:
            self._fault(ErrorCode.BAD_SUBROUTINE, o, f"a subroutine is defined at the top level of the file, not "
                        f"inside {self._where(self._stack[-1])}")
        elif o.label in self.subs:
            self._fault(ErrorCode.BAD_SUBROUTINE, o, f"o{o.label} is already defined on line "
                        f"{self.subs[o.label] + 1}")    # type: ignore[index]
        else:
            self.subs[o.label] = idx    # type: ignore[index]
        self._stack.append(_Open("sub", o.label, idx))   # type: ignore[arg-type]

    def _endsub(self, o: OLine, idx: int) -> None:
        pos = self._find(("sub",), o.label)       # type: ignore[arg-type]
        if pos < 0:
            if self._scope() >= 0:
                self._mismatch(o, f"it does not close o{self._stack_sub().label} sub")
            else:
                self._fault(ErrorCode.RETURN_OUTSIDE_SUB, o, f"not inside the definition of o{o.label} sub")
            return
        self._close(o, idx, "sub")

    def _stack_sub(self) -> _Open:
        return next(b for b in reversed(self._stack) if b.kind == "sub")

    def _return(self, o: OLine, idx: int) -> None:
        if self._scope() < 0:
            self._fault(ErrorCode.RETURN_OUTSIDE_SUB, o, f"not inside the definition of o{o.label} sub")
        elif self._stack_sub().label != o.label:
            self._fault(ErrorCode.RETURN_OUTSIDE_SUB, o, f"inside o{self._stack_sub().label} sub: a return names "
                        f"its own subroutine")

    def _call(self, o: OLine, idx: int) -> None:
        pass

    def _if(self, o: OLine, idx: int) -> None:
        self._open(o, idx, "if")
        self.heads[idx] = []

    def _branch(self, o: OLine, idx: int) -> None:
        pos = self._find(("if",), o.label)    # type: ignore[arg-type]
        if pos < 0:
            self._mismatch(o, f"there is no open o{o.label} if")
            return
        b = self._close_to(pos)
        if b.else_line:
            self._fault(ErrorCode.BLOCK_MISMATCH, o, f"after o{o.label} else (line {b.else_line}): else comes last")
            return
        if o.keyword == "else":
            b.else_line = o.lineno
        self.heads[b.idx].append(idx)

    _elseif = _branch
    _else = _branch

    def _endif(self, o: OLine, idx: int) -> None:
        start = self._close(o, idx, "if")
        if start >= 0:
            for h in self.heads[start]:
                self.endif_of[h] = idx
            self.heads[start].append(idx)

    def _while(self, o: OLine, idx: int) -> None:
        pos = self._find(("do",), o.label)    # type: ignore[arg-type]
        if pos >= 0:                          # the end of a do loop
            self._close(o, idx, "do")
            self.do_end.add(idx)
        else:
            self._open(o, idx, "while")

    def _endwhile(self, o: OLine, idx: int) -> None:
        self._close(o, idx, "while")

    def _do(self, o: OLine, idx: int) -> None:
        self._open(o, idx, "do")

    def _repeat(self, o: OLine, idx: int) -> None:
        self._open(o, idx, "repeat")

    def _endrepeat(self, o: OLine, idx: int) -> None:
        self._close(o, idx, "repeat")

    def _break(self, o: OLine, idx: int) -> None:
        pos = self._find(("while", "do", "repeat"), o.label)   # type: ignore[arg-type]
        if pos < 0:
            self._fault(ErrorCode.BREAK_OUTSIDE_LOOP, o, f"not inside an o{o.label} while or do loop")
        elif self._stack[pos].kind == "repeat":
            self._fault(ErrorCode.BREAK_OUTSIDE_LOOP, o, f"o{o.label} is a repeat loop: {o.keyword} leaves or "
                        f"restarts while and do loops only (LinuxCNC's rule)")
        else:
            self.loop_of[idx] = self._stack[pos].idx

    _continue = _break


class _Frame(NamedTuple):
    """A subroutine call being run: where it returns to and the caller's parameters it hides."""

    ret: int                       # index of the line after the call
    numbered: dict                 # the caller's #1 … #30
    local: dict                    # the caller's local named parameters


class _Stop(Exception):
    """Ends the expansion (a cap, or a fault of an O-word: the flow is unknown from there)."""


class LineReader(NamedTuple):
    """What the expansion needs of the parser (:data:`~.parser.LINE_READER`): an explicit seam, so
    that this module reads the other lines exactly as the parser reads any line.

    Attributes:
        prechecked: (lines, from_bytes) -> {line number: fault or note} of the lines handled whole
            (grbl host commands, code too long, non-ASCII).
        plain: (lines, fast, from_bytes) -> (parsed lines as six columns — line numbers, N, G, M,
            words, text — refused lines, faults) of lines without O-words or parameters (the others
            blanked): one pass, the fast path first if ``fast``.
        expression: (line, line number, parameters, from_bytes) -> (parsed line or None, faults,
            refused line or None) of a line with parameters or expressions, its settings made.
        has_expression: (line) -> whether its code holds a parameter or an expression.
        chunk: (lines as six columns, faults, refused) -> a :class:`~.parser.ParseChunk`.
    """

    prechecked: Callable[[list[str], bool], dict]
    plain: Callable[[list[str], bool, bool], tuple[Columns, list, list]]
    expression: Callable[[str, int, Parameters, bool], tuple]
    has_expression: Callable[[str], bool]
    chunk: Callable[[Columns, tuple, tuple], object]


def expand_chunks(raw: list[str], reader: LineReader, *, from_bytes: bool = False, max_faults: int = 100,
                  fast: bool = True) -> Iterator:
    """The executed lines of a program with O-words, as :class:`~.parser.ParseChunk` pieces.

    Args:
        raw: the program's lines (LF, CR LF and CR already split; bytes decoded one per character).
        reader: how the parser reads the other lines (:data:`~.parser.LINE_READER`).
        from_bytes: the lines hold bytes (for the message of a non-ASCII fault).
        max_faults: stop once more than this many errors were found.
        fast: the lines without O-words or parameters are parsed by the parser's fast path
            (falling back to its checking path when they have a fault); False: by the checking
            path alone (the two give the same result, a property test checks it).

    Yields:
        ParseChunk pieces whose lines (and refused lines) are in executed order with increasing
        line numbers within each piece; the first piece also carries every fault found without
        running (O-word syntax and blocks, the other lines' syntax: also of lines never
        executed). A refused line's faults come again with each piece that executes it (the
        consumer reports each fault once).
    """
    return _Expansion(raw, reader, from_bytes, max_faults, fast).chunks()


class _Expansion:
    """One expansion of a program (see :func:`expand_chunks`)."""

    def __init__(self, raw: list[str], reader: LineReader, from_bytes: bool, max_faults: int, fast: bool) -> None:
        self.reader = reader
        self.raw = raw
        self.from_bytes = from_bytes
        self.max_faults = max(1, int(max_faults))
        pre = reader.prechecked(raw, from_bytes)
        self.olines: dict[int, OLine] = {}
        self.expr: set[int] = set()
        static: list[Fault] = []
        blanked = list(raw)
        for i, line in enumerate(raw):
            if i + 1 in pre:
                continue
            if "o" in line or "O" in line:
                code = _masked(line)
                if _O_START.match(code):
                    o, fs = read_o_line(line, i + 1)
                    static.extend(fs)
                    if o is not None:
                        self.olines[i] = o
                    blanked[i] = ""
                    continue
            if ("#" in line or "[" in line) and reader.has_expression(line):
                self.expr.add(i)
                blanked[i] = ""
        self.structure = Structure(self.olines)
        self.broken = any(f.severity is Severity.ERROR for f in static) or bool(self.structure.faults)
        static.extend(self.structure.faults)
        # the plain lines: one pass of the parser (its fast path first)
        # kept as the parser's columns: a parsed line is made only where the run looks at one (an
        # object per line would cost more than the parse itself); stretches are copied column-wise
        cols, refused, faults = reader.plain(blanked, fast, from_bytes)
        self.cols = cols
        self.pos = np.full(len(raw) + 1, -1, dtype=np.int64)     # raw index -> row in the columns
        self.pos[np.asarray(cols[0], dtype=np.int64) - 1] = np.arange(len(cols[0]))
        # rows of the lines before each raw index: the rows of raw[a:b] are rows_before[a]..rows_before[b]
        self.rows_before = np.concatenate(([0], np.cumsum(self.pos >= 0))).tolist()
        self.refused: dict[int, Any] = {pl.lineno - 1: pl for pl in refused}
        # stretches of plain lines run in bulk: from each line, the next one that needs a look of its
        # own (an O-word, an expression, a refused line, M2/M30)
        special = np.zeros(len(raw) + 1, dtype=bool)
        special[-1] = True
        for i in (*self.olines, *self.expr, *self.refused):
            special[i] = True
        for lineno, m in compress(zip(cols[0], cols[3]), cols[3]):     # the lines with M codes
            if m.get("stop") in _STOP_CODES:
                special[lineno - 1] = True
        idx = np.flatnonzero(special)
        self.next_special = idx[np.searchsorted(idx, np.arange(len(raw) + 1))]
        self.line_faults: dict[int, list[Fault]] = {}
        for f in faults:
            self.line_faults.setdefault(f.line - 1, []).append(f)
        static.extend(faults)
        static.sort(key=lambda f: f.line)
        self.seen = {(f.line, f.column, f.code) for f in static if f.severity is Severity.ERROR}
        # the run
        self.params = Parameters()
        self.params.named.update({"_value": 0.0, "_value_returned": 0.0})
        self.frames: list[_Frame] = []
        self.defined: set[str] = set()
        self.loops: dict[tuple[int, int], int] = {}
        self.count = 0
        self._lines: Columns = ([], [], [], [], [], [])
        self._refused: list = []
        self._faults: list[Fault] = static
        self._last = 0
        self._ready: list = []

    # ----- output ---------------------------------------------------------------------------------
    def _flush(self) -> None:
        if self._lines[0] or self._refused or self._faults:
            self._ready.append(self.reader.chunk(self._lines, tuple(self._faults), tuple(self._refused)))
        self._lines, self._refused, self._faults, self._last = ([], [], [], [], [], []), [], [], 0

    def _emit(self, lineno: int, pl, refused, faults) -> None:
        if lineno <= self._last:
            self._flush()
        self._last = lineno
        if pl is not None:
            for col, v in zip(self._lines, pl):
                col.append(v)
        if refused is not None:
            self._refused.append(refused)
        if faults:
            self._faults.extend(faults)
            for f in faults:
                if f.severity is Severity.ERROR:
                    self.seen.add((f.line, f.column, f.code))

    def _fail(self, o: OLine, code: ErrorCode, msg: str, col: int | None = None) -> _Stop:
        """A fault of an O-word that ends the expansion."""
        f = Fault(code, o.lineno, o.col if col is None else col, f"{o.name}: {msg}")
        self._emit(o.lineno, None, None, [f])
        return _Stop()

    def chunks(self) -> Iterator:
        if self.broken:           # the blocks do not match: nothing runs
            self._flush()
            yield from self._ready
            return
        try:
            for _ in self._run():
                yield from self._ready
                self._ready.clear()
        except _Stop:
            pass
        self._flush()
        yield from self._ready

    # ----- the run ----------------------------------------------------------------------------------
    def _run(self):
        n = len(self.raw)
        pc = 0
        olines, expr, refused = self.olines, self.expr, self.refused
        cols, pos, rows_before = self.cols, self.pos, self.rows_before
        next_special = self.next_special
        read_expression = self.reader.expression
        stop_codes = _STOP_CODES
        while pc < n:
            self.count += 1
            if self.count > MAX_EXECUTED_LINES:
                self._emit(pc + 1, None, None, [Fault(
                    ErrorCode.PROGRAM_TOO_LONG, pc + 1, 0,
                    f"the program executes more than {MAX_EXECUTED_LINES:,} lines by this line (O-word loops and "
                    f"calls); nothing after it is read")])
                return
            end = int(next_special[pc])
            if end - pc > 1:                  # plain (or empty) lines up to the next special one, at once
                end = min(end, pc + MAX_EXECUTED_LINES - self.count + 1)
                r0, r1 = rows_before[pc], rows_before[end]
                if r1 > r0:
                    if cols[0][r0] <= self._last:
                        self._flush()
                    for out, col in zip(self._lines, cols):
                        out.extend(col[r0:r1])
                    self._last = cols[0][r1 - 1]
                self.count += end - pc - 1
                pc = end
                if self._ready:
                    yield None
                continue
            o = olines.get(pc)
            if o is not None:
                pc = self._o_word(o, pc)
                if self._ready:
                    yield None
                continue
            pl = None
            if pc in expr:
                pl, faults, ref = read_expression(self.raw[pc], pc + 1, self.params, self.from_bytes)
                if faults or pl is not None:
                    self._emit(pc + 1, pl, ref, faults)
            else:
                r = int(pos[pc])
                if r >= 0:
                    pl = tuple(col[r] for col in cols)
                    self._emit(pc + 1, pl, None, None)
                elif pc in refused:
                    self._emit(pc + 1, None, refused[pc], self.line_faults.get(pc))
            if len(self.seen) > self.max_faults:
                return
            if pl is not None and pl[3].get("stop") in stop_codes:    # M2 / M30: the program ends here
                return
            if self._ready:
                yield None
            pc += 1

    def _value(self, o: OLine, span: tuple[int, int]) -> float:
        try:
            return evaluate(o.code, span[0], self.params)[0]
        except ExpressionError as exc:
            f = Fault(exc.code, o.lineno, exc.index + 1, exc.message)
            self._emit(o.lineno, None, None, [f])
            raise _Stop() from None

    def _iterate(self, start: int, fresh: bool) -> int:
        """The loop opened on line ``start`` begins a pass: the index of its first body line (fault 58
        when it would begin more than :data:`MAX_LOOP_ITERATIONS` passes in one go)."""
        key = (len(self.frames), start)
        k = 1 if fresh else self.loops.get(key, 0) + 1
        if k > MAX_LOOP_ITERATIONS:
            raise self._fail(self.olines[start], ErrorCode.LOOP_LIMIT,
                             f"the loop ran {MAX_LOOP_ITERATIONS:,} times (MAX_LOOP_ITERATIONS) and would run again: "
                             f"does its condition ever become false?")
        self.loops[key] = k
        return start + 1

    def _o_word(self, o: OLine, pc: int) -> int:
        """Run the O-word on line ``pc`` (0-based): the index of the next line to run."""
        kw = o.keyword
        st = self.structure
        if kw == "sub":
            self.defined.add(o.label)      # type: ignore[arg-type]
            return st.closer[pc] + 1
        if kw in ("endsub", "return"):
            value = self._value(o, o.args[0]) if o.args else None
            return self._return(o, value)
        if kw == "call":
            return self._call(o, pc)
        if kw == "if":
            if self._value(o, o.args[0]) != 0.0:
                return pc + 1
            for h in st.heads[pc]:
                head = self.olines[h]
                if head.keyword != "elseif" or self._value(head, head.args[0]) != 0.0:
                    return h + 1
            return pc + 1        # pragma: no cover - an if always has its endif here
        if kw in ("elseif", "else"):     # reached from the branch before it: that one ran
            return st.endif_of[pc] + 1
        if kw == "while":
            if pc in st.do_end:
                if self._value(o, o.args[0]) != 0.0:
                    return self._iterate(st.opener[pc], False)
                return pc + 1
            return self._while_test(o, pc, True)
        if kw == "endwhile":
            start = st.opener[pc]
            return self._while_test(self.olines[start], start, False)
        if kw == "do":
            return self._iterate(pc, True)
        if kw == "repeat":
            v = self._value(o, o.args[0])
            if v != int(v) or v < 0:
                raise self._fail(o, ErrorCode.BAD_O_WORD, f"the count is {v:g}: a whole number >= 0",
                                 o.args[0][0] + 1)
            if v > MAX_LOOP_ITERATIONS:
                raise self._fail(o, ErrorCode.LOOP_LIMIT, f"{v:,.0f} repetitions: at most {MAX_LOOP_ITERATIONS:,} "
                                 f"(MAX_LOOP_ITERATIONS)", o.args[0][0] + 1)
            if v == 0:
                return st.closer[pc] + 1
            self.loops[(len(self.frames), pc)] = int(v)
            return pc + 1
        if kw == "endrepeat":
            start = st.opener[pc]
            key = (len(self.frames), start)
            left = self.loops.get(key, 1) - 1
            self.loops[key] = left
            return start + 1 if left > 0 else pc + 1
        if kw == "break":
            return st.closer[st.loop_of[pc]] + 1
        if kw == "continue":
            return st.closer[st.loop_of[pc]]     # the loop's end runs: it counts and tests
        return pc + 1    # endif

    def _while_test(self, o: OLine, start: int, fresh: bool) -> int:
        if self._value(o, o.args[0]) != 0.0:
            return self._iterate(start, fresh)
        return self.structure.closer[start] + 1

    def _call(self, o: OLine, pc: int) -> int:
        label = o.label
        if label is None:                      # o[#1] call, o#<sub> call
            v = self._value(o, o.indirect)     # type: ignore[arg-type]
            if v != int(v) or v < 0:
                raise self._fail(o, ErrorCode.BAD_O_WORD, f"the indirect label is {v:g}: a whole number >= 0",
                                 o.indirect[0] + 1)   # type: ignore[index]
            label = str(int(v))
        start = self.structure.subs.get(label)
        if start is None:
            raise self._fail(o, ErrorCode.UNKNOWN_SUBROUTINE, f"there is no o{label} sub in this program "
                             f"(subroutine files are not searched)")
        if label not in self.defined:
            raise self._fail(o, ErrorCode.UNKNOWN_SUBROUTINE, f"o{label} sub is defined on line {start + 1}, which "
                             f"the program has not read yet: a subroutine may only be called after its definition "
                             f"(LinuxCNC's rule); move the definition before the call")
        if len(self.frames) >= MAX_CALL_DEPTH:
            raise self._fail(o, ErrorCode.CALL_TOO_DEEP, f"calls nested {MAX_CALL_DEPTH + 1} deep: at most "
                             f"{MAX_CALL_DEPTH} (LinuxCNC's limit); a recursion that never ends?")
        args = [self._value(o, span) for span in o.args]     # in the caller's parameters
        p = self.params
        numbered = {k: p.numbered[k] for k in range(1, MAX_ARGUMENTS + 1) if k in p.numbered}
        local = {k: v for k, v in p.named.items() if not k.startswith("_")}
        for name in local:
            del p.named[name]
        for number, v in enumerate(args, 1):
            p.numbered[number] = v
        p.named["_value_returned"] = 0.0
        self.frames.append(_Frame(pc + 1, numbered, local))
        return start + 1

    def _return(self, o: OLine, value: float | None) -> int:
        if not self.frames:      # pragma: no cover - the main program never enters a body
            raise self._fail(o, ErrorCode.RETURN_OUTSIDE_SUB, "not inside a call")
        f = self.frames.pop()
        p = self.params
        for k in range(1, MAX_ARGUMENTS + 1):
            p.numbered.pop(k, None)
        p.numbered.update(f.numbered)
        for name in [name for name in p.named if not name.startswith("_")]:
            del p.named[name]
        p.named.update(f.local)
        p.named["_value"] = 0.0 if value is None else value
        p.named["_value_returned"] = 0.0 if value is None else 1.0
        return f.ret
