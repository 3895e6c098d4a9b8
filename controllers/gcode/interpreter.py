"""The modal interpreter: parsed lines -> motion blocks in SI metres of the robot base frame.

Follows grbl's ``gc_execute_line``: every check of a line runs first, against the state (a
frozen :class:`~.modal.MachineState`); only a line without faults makes a new state. A faulty
line changes nothing and, in a whole-file run, is skipped so that later lines are still checked.
``Interpreter.execute(line) = apply(check(line, state))``: the rules, each listing the faults it
may raise, are in :mod:`.rules`; the vocabulary (one enum per modal group) in :mod:`.modal`.

Order of execution inside a line (RS-274/NGC): F, G4 dwell, plane, units, coordinate system,
distance mode, G10/G28/G92/G92.1, motion, M0/M2/M30.

Frames and units: the interpreter keeps the machine position in millimetres (XYZ) and degrees
(ABC) relative to the work origin; blocks leave it in metres of the base frame. Tool
orientation: ``R = Rz(C) · Ry(B) · Rx(A) · Rx(180°)`` — A, B, C are rotations about the base
X, Y, Z axes applied to "tool pointing straight down with its x axis along base +x". The SCARA
takes C only (its tool roll: the angle of the tool x axis in the base xy plane).
The program starts where the robot stands (its ``home`` pose); A/B/C start at the home
orientation.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ..kinematics import chain_of, fk
from ..transforms import matrix_to_rpy, rot_x, rpy_to_matrix
from .blocks import FLANGE, Block, Dwell, Motion, MotionKind, OutputChange, Stop, StopKind
from .config import MachineConfig, machine_for
from .errors import MAX_FAULTS, ErrorCode, Fault, GcodeError, Severity, cap_faults, fold_notes
from .modal import MachineState, ModalState
from .outputs import OutputState
from .parser import ParseChunk, ParsedLine, ParseResult, count_lines, parse_chunks, parse_program, word_columns
from .rules import ARC_ABS_TOL_MM, ARC_END_MAX, ARC_END_MIN, ARC_REL_TOL, Context, apply, check, recover
from .tool_rules import controlled_point

__all__ = ["MotionKind", "Motion", "Dwell", "Stop", "StopKind", "OutputChange", "Block", "Program", "Interpreter",
           "interpret", "load_program", "orientation_matrix", "abc_of", "ARC_ABS_TOL_MM", "ARC_REL_TOL",
           "ARC_END_MAX", "ARC_END_MIN"]

_R_DOWN = rot_x(math.pi)
#: orientations kept by one interpreter (A B C -> matrix); cleared when full
_ROTATION_CACHE = 4096


@dataclass(frozen=True)
class Program:
    """An interpreted program.

    Attributes:
        blocks: motion, dwell and stop blocks in order.
        faults: parse and interpretation faults, in line order (every fault of a line); with more
            than the cap, the first ones and a TOO_MANY_FAULTS (119) notice. Notes (severity
            NOTE: a skipped ``$H`` line, M84, M1 without the optional stop) are among them, one per
            code (later ones folded into the first), and do not make the program faulty.
        line_count: lines in the file.
        truncated: there were more faults than the cap (the faults end with the 119 notice).
        start: (3,) position of the controlled point (the start tool's TCP) where the program
            starts (the robot's home), m.
        rot_start: (3, 3) its orientation at the start.
        q_start: (n,) joints at the start, rad / m.
        ended_at: line of the M2/M30 that ended the program, or 0.
    """

    blocks: tuple[Block, ...]
    faults: tuple[Fault, ...]
    line_count: int
    truncated: bool
    start: np.ndarray
    rot_start: np.ndarray
    q_start: np.ndarray
    ended_at: int = 0

    @property
    def ok(self) -> bool:
        """No errors (notes do not count)."""
        return not any(f.severity is Severity.ERROR for f in self.faults)


def orientation_matrix(a_deg: float, b_deg: float, c_deg: float) -> np.ndarray:
    """(3, 3) flange orientation of the words A, B, C (deg): Rz(C) Ry(B) Rx(A) Rx(180°)."""
    return rpy_to_matrix(np.radians([a_deg, b_deg, c_deg])) @ _R_DOWN


def abc_of(rotation: np.ndarray) -> tuple[float, float, float]:
    """A, B, C (deg) of a flange orientation (inverse of :func:`orientation_matrix`)."""
    a, b, c = np.degrees(matrix_to_rpy(np.asarray(rotation) @ _R_DOWN.T))
    return float(a), float(b), float(c)


class Interpreter:
    """One program run: feed it parsed lines with :meth:`execute`.

    Args:
        spec: the robot (its home pose is where the program starts; its joint count tells
            whether A and B are allowed).
        machine: work origin and timing settings; default :func:`machine_for` ``(spec)``.
        q_start: joints where the program starts (default ``spec.home``), rad / m.

    Attributes:
        state: the modal state and position after the last line that passed
            (:class:`~.modal.MachineState`).
        points: interpolation points of the lines read so far (an upper estimate of the
            planner's arc chords plus the preflight's IK samples, one per block and one per
            line): bounds the memory and the time of a check
            (:attr:`MachineConfig.max_path_samples`, checked by :func:`interpret`).
    """

    def __init__(self, spec, machine: MachineConfig | None = None, q_start=None) -> None:
        self.spec = spec
        self.machine = machine or machine_for(spec)
        self.q_start = np.array(spec.home if q_start is None else q_start, dtype=float)
        T = fk(chain_of(spec), self.q_start)
        origin = tuple(v * 1000.0 for v in self.machine.origin)
        tilt = not spec.roll_only  # A and B (tool tilts) allowed
        abc = abc_of(T[:3, :3]) if tilt else (0.0, 0.0, float(np.degrees(math.atan2(T[1, 0], T[0, 0]))))
        home: tuple[float, ...] = (T[0, 3] * 1000 - origin[0], T[1, 3] * 1000 - origin[1],
                                   T[2, 3] * 1000 - origin[2], *abc)
        flange = np.eye(4)
        flange[:3, :3] = orientation_matrix(*abc)
        flange[:3, 3] = T[:3, 3]
        self._rot_cache: dict[tuple[float, float, float], np.ndarray] = {abc: flange[:3, :3].copy()}
        self.context = Context(spec.name, tilt, (origin[0], origin[1], origin[2]), home, self.machine,
                               self._orientation, flange)
        tool = self.machine.start_tool
        tcp = tool.tcp if tool.number else FLANGE
        if tcp is not FLANGE:     # the program moves the start tool's TCP (the flange stands at home)
            home = tuple(controlled_point(flange, tcp, self.context))
            self.context = replace(self.context, home=home)
        self.home = home  # machine coords of the G28 position of the controlled point (mm, deg)
        self.start_rotation = self._orientation((home[3], home[4], home[5]))
        self.start_position = np.array([(home[k] + origin[k]) / 1000.0 for k in range(3)])
        self.state = MachineState(ModalState(), home, self.start_rotation, tool=tool.number, selected=tool.number,
                                  tcp=tcp, outputs=OutputState(tool.number))
        self.points = 0
        self.notes: list[Fault] = []   # the notes of the lines executed (severity NOTE)

    def _orientation(self, abc: tuple[float, float, float]) -> np.ndarray:
        r = self._rot_cache.get(abc)
        if r is None:
            if len(self._rot_cache) > _ROTATION_CACHE:
                self._rot_cache.clear()
            r = orientation_matrix(*abc)
            self._rot_cache[abc] = r
        return r

    @property
    def ended(self) -> int:
        """Line of the M2/M30 that ended the program, or 0."""
        return self.state.ended

    def program_position(self) -> tuple[float, ...]:
        """Current position in program coordinates of the active system (mm, deg)."""
        return self.state.program_position()

    def execute(self, line: ParsedLine) -> list[Block]:
        """Check one parsed line against the state, then apply it: ``apply(check(line, state))``.

        Returns:
            The blocks the line produces (possibly none; none after M2/M30).

        Raises:
            GcodeError: the line's first fault; the state is then unchanged.
        """
        state = self.state
        if state.ended:
            return []
        eff = check(line, state, self.context)
        self.state, blocks, points = apply(eff, state, self.context)
        self.points += points + 1 + len(blocks)     # one per line read and one per block
        if eff.notes:
            self.notes.extend(Fault(code, line.lineno, col, msg, Severity.NOTE) for code, msg, col in eff.notes)
        return blocks

    def refuse(self, line: ParsedLine, fault: Fault | None = None) -> None:
        """Take a refused line's valid modal words and, for a move, its end (:func:`~.rules.recover`):
        nothing of it runs, but the lines after it are read as the program means them."""
        if not self.state.ended:
            self.state = recover(line, self.state, self.context, fault)

    def check_refused(self, line: ParsedLine) -> None:
        """The valid words of a line the parser refused (an unsupported word or M code dropped):
        checked as a line of their own (raising the first fault), their state kept, no blocks."""
        state = self.state
        if not state.ended:
            self.state = apply(check(line, state, self.context), state, self.context)[0]


#: lines interpreted between two progress reports
PROGRESS_LINES = 25_000


def interpret(lines: ParseResult | Iterable[ParsedLine], spec, machine: MachineConfig | None = None, *,
              q_start=None, max_faults: int = MAX_FAULTS,
              progress: Callable[[str, float], None] | None = None) -> Program:
    """Run the interpreter over parsed lines, collecting faults instead of raising.

    A faulty line makes no block; its valid modal words and the end of its move are kept for the
    lines after it (:func:`~.rules.recover`: each root cause reported once), and the next lines
    are still checked; parse faults already in a :class:`ParseResult` are merged in line order.
    With more than ``max_faults`` faults the program's faults end with a TOO_MANY_FAULTS (119)
    notice at the line of the first fault not shown (:func:`~.errors.cap_faults`).

    Memory and time are bounded whatever the input: when the lines read need more interpolation
    points than ``machine.max_path_samples`` (arc chords and IK samples, one per block and one per
    line, :attr:`Interpreter.points`), the line that passes the limit gets a PROGRAM_TOO_LONG
    (105) fault and reading stops there: no later line is parsed, interpreted or planned.

    Args:
        progress: called with ("interpret", fraction) every :data:`PROGRESS_LINES` lines.

    Returns:
        The :class:`Program`.
    """
    src: Sequence[ParsedLine]
    if isinstance(lines, ParseResult):   # the parser's own faults, without its cap notice
        parse_faults = [f for f in lines.faults if f.code is not ErrorCode.TOO_MANY_FAULTS] + list(lines.overflow)
        parse_faults.sort(key=lambda f: f.line)
        if lines.chunks:     # a program with O-words: its executed pieces
            return _interpret_chunks(lines.chunks, lines.line_count, spec, machine, q_start, max_faults, progress)
        return _interpret_chunks([ParseChunk(lines.lines, tuple(parse_faults), lines.refused)], lines.line_count, spec,
                                 machine, q_start, max_faults, progress)
    # parse_program's Lines is a Sequence (made line by line as it is read)
    src = lines if isinstance(lines, Sequence) else list(lines)
    return _interpret_chunks([ParseChunk(src, ())], 0, spec, machine, q_start, max_faults, progress)


def _interpret_chunks(chunks: Iterable[ParseChunk], count: int, spec, machine, q_start, max_faults: int,
                      progress: Callable[[str, float], None] | None) -> Program:
    """:func:`interpret` over the pieces of a program (one, or :func:`~.parser.parse_chunks`'
    pieces, each dropped when it is done); ``count``: the program's line count."""
    it = Interpreter(spec, machine, q_start)
    max_faults = max(1, int(max_faults))
    notes: list[Fault] = []          # the parser's notes (they never count towards the cap)
    parse_faults: list[Fault] = []
    parse_lines: list[int] = []
    sem: list[Fault] = []
    blocks: list = []
    extend = blocks.extend
    execute = it.execute
    max_points = it.machine.max_path_samples
    full = False          # the point limit was passed: blocks are dropped from there on
    stop = False
    chunks = iter(chunks)
    feed_first: list[int] = []       # index in sem of the root of "no feed rate": the first one, or a bad F before it
    feed_more: list[int] = []        # the lines of the others (one root cause: reported once)
    seen: set = set()                # (line, column, code) of the faults reported: a line run again in an
    #                                  O-word loop or call reports each of its faults once

    def report(f: Fault) -> None:
        key = (f.line, f.column, f.code)
        if key in seen and f.code is not ErrorCode.UNDEFINED_FEED_RATE:
            return
        seen.add(key)
        if f.code is ErrorCode.UNDEFINED_FEED_RATE:
            if feed_first:
                feed_more.append(f.line)
                return
            feed_first.append(len(sem))
        elif f.code is ErrorCode.BAD_FEED_RATE and not feed_first and it.state.modal.feed is None:
            feed_first.append(len(sem))     # F0 before any feed rate: the moves after it have none
        sem.append(f)

    for chunk in chunks:
        src = chunk.lines
        chunk_faults = _split_notes(chunk.faults, notes)
        for f in chunk_faults:
            key = (f.line, f.column, f.code)
            if key not in seen:
                seen.add(key)
                parse_faults.append(f)
                if parse_lines and f.line < parse_lines[-1]:     # out of line order (O-word flow)
                    bisect.insort(parse_lines, f.line)
                else:
                    parse_lines.append(f.line)
        refused: dict[int, set[ErrorCode]] = {}
        if chunk.refused:      # the parser's refused lines, in line order among the others
            refused = {pl.lineno: set() for pl in chunk.refused}
            for f in chunk_faults:
                if f.line in refused:
                    refused[f.line].add(f.code)
            src = list(heapq.merge(src, chunk.refused, key=lambda pl: pl.lineno))
        total = len(src)
        step = total if progress is None else PROGRESS_LINES
        for a in range(0, total, max(step, 1)):
            if progress is not None:
                progress("interpret", src[a].lineno / count if count else a / total)
            for pl in src[a:a + step]:
                if refused and pl.lineno in refused:
                    _take_refused(it, pl, refused[pl.lineno], report)
                    new = None
                else:
                    try:
                        new = execute(pl)
                    except GcodeError as exc:
                        report(exc.fault)
                        for f in _further_faults(it, pl, exc.fault):
                            report(f)
                        it.refuse(pl, exc.fault)
                        new = None
                if new is not None:
                    if it.points <= max_points:
                        extend(new)
                    else:   # the cap bounds the time of a check too: nothing after this line is read
                        full = stop = True
                        sem.append(Fault(ErrorCode.PROGRAM_TOO_LONG, pl.lineno, 0,
                                         f"the path needs more than {max_points:,} interpolation points (arc chords, "
                                         f"IK samples {it.machine.sample_spacing * 1000:g} mm apart, one per line and "
                                         f"block) by this line; the program is read, planned and checked only up to "
                                         f"the line before"))
                        break
                if sem and sem[-1].line == pl.lineno:
                    # enough faults at or before this line: the later ones would not be reported
                    if len(sem) + bisect.bisect_right(parse_lines, pl.lineno) > max_faults:
                        stop = True
                        break
                if it.ended:
                    stop = True
                    break
            if stop:
                break
        src = ()             # let the piece go before the next one is parsed
        if stop:
            break
    if it.ended:   # M2/M30: the later lines are not executed, but their parse faults are reported
        for chunk in chunks:
            parse_faults.extend(f for f in _split_notes(chunk.faults, notes) if (f.line, f.column, f.code) not in seen)
    notes.extend(it.notes)
    if feed_more:
        f = sem[feed_first[0]]
        n = len(feed_more)
        sem[feed_first[0]] = replace(f, message=f"{f.message}; {n} later move{'s' if n > 1 else ''} without a feed "
                                                f"rate (the last on line {feed_more[-1]}) not reported again: F is "
                                                f"modal, one F at or before this line sets it for them")
    if full:       # the piece read last may hold parse faults after the line that passed the cap
        cap_line = sem[-1].line
        parse_faults = [f for f in parse_faults if f.line <= cap_line]
        notes = [f for f in notes if f.line <= cap_line]
    faults = parse_faults + sem
    faults.sort(key=lambda f: f.line)      # stable: in line order, and as found within a line
    if notes:
        faults = fold_notes(sorted(faults + notes, key=lambda f: f.line))
    faults, truncated = cap_faults(faults, max_faults)
    return Program(tuple(blocks), tuple(faults), count, truncated, it.start_position, it.start_rotation,
                   it.q_start, it.ended)


#: faults of one word that say nothing about the line's other words: the line is checked again
#: without that word, for its other faults of this kind (every fault of a line is reported)
_WORD_LOCAL = frozenset({ErrorCode.BAD_FEED_RATE, ErrorCode.ORIENTATION_NOT_SUPPORTED, ErrorCode.UNUSED_WORD,
                         ErrorCode.BAD_BLEND_TOLERANCE})


def _further_faults(it: Interpreter, line: ParsedLine, fault: Fault) -> list[Fault]:
    """The line's other word-local faults after ``fault`` (``G1 X1 F0 I5``: F0, then I5): the
    word at fault is left out and the line checked again, as long as the faults are word-local."""
    out: list[Fault] = []
    words = dict(line.words)
    cols = {col: L for col, L, _ in word_columns(line.text)}
    while fault.code in _WORD_LOCAL and len(out) < len(line.words):
        letter = cols.get(fault.column)
        if letter is None or letter not in words:
            break
        if letter == "F":
            words["F"] = 1.0       # a valid F in its place: a bad F is not also a missing one
        else:
            del words[letter]
        try:
            check(line._replace(words=dict(words)), it.state, it.context)
        except GcodeError as exc:
            fault = exc.fault
            if fault.code not in _WORD_LOCAL:
                break
            out.append(fault)
            continue
        break
    return out


#: parse faults after which the rest of a refused line is still checked as a line of its own (a
#: dropped value word or M code does not change how the other words read)
_CHECK_AFTER = frozenset({ErrorCode.UNSUPPORTED_WORD, ErrorCode.UNSUPPORTED_M_CODE})


def _take_refused(it: Interpreter, line: ParsedLine, codes: set[ErrorCode], report: Callable[[Fault], None]) -> None:
    """A line the parser refused (``line``: its valid words; ``codes``: its parse faults): after an
    unsupported word or M code alone its other words are checked too (every fault of the line is
    reported; a word left unused by the dropped one is not a second fault) and kept; otherwise
    only its modal words and the end of its move (:meth:`Interpreter.refuse`)."""
    if codes <= _CHECK_AFTER:
        try:
            it.check_refused(line)
            return
        except GcodeError as exc:
            if exc.code is not ErrorCode.UNUSED_WORD:
                report(exc.fault)
            it.refuse(line, exc.fault)
            return
    it.refuse(line)


def _split_notes(faults, notes: list[Fault]):
    """The faults that are not notes; the notes are appended to ``notes``."""
    if not any(f.severity is Severity.NOTE for f in faults):
        return faults
    notes.extend(f for f in faults if f.severity is Severity.NOTE)
    return [f for f in faults if f.severity is not Severity.NOTE]


def load_program(text, spec, machine: MachineConfig | None = None, *, q_start=None,
                 max_faults: int = MAX_FAULTS, progress: Callable[[str, float], None] | None = None) -> Program:
    """Parse and interpret a program text (str, bytes or lines). Never raises on content.

    A text (str or bytes) is parsed and interpreted a piece at a time
    (:func:`~.parser.parse_chunks`): the parsed lines of a long file never exist all at once, so
    memory grows only with what the program makes (blocks, bounded by
    ``machine.max_path_samples``), not with the file. The result is the same as
    ``interpret(parse_program(text))``.

    ``progress`` (optional) is called with (stage, fraction): "interpret".
    """
    if isinstance(text, (str, bytes, bytearray, memoryview)):
        return _interpret_chunks(parse_chunks(text, max_faults=max_faults), count_lines(text), spec, machine,
                                 q_start, max_faults, progress)
    return interpret(parse_program(text, max_faults=max_faults), spec, machine, q_start=q_start,
                     max_faults=max_faults, progress=progress)
