"""The meaning of one G-code line: small check rules, then apply (grbl's ``gc_execute_line`` split).

``Interpreter.execute(line) = apply(check(line, state))``:

* :func:`check` runs the rules that concern the line, in RS-274/NGC's order, against the state
  (:class:`~.modal.MachineState`) without changing it, and returns the line's checked meaning
  (:class:`LineEffect`) — or raises the line's first fault (:class:`~.errors.GcodeError`, at the
  column of the word at fault). Each rule lists the fault codes it may raise
  (:attr:`Rule.faults`; raising another is a programming error, caught at once).
* :func:`apply` turns a checked line into the next state and the blocks it makes.

The tables :data:`LINE_RULES`, :data:`NONMODAL_RULES`, :data:`MOTION_RULES` and
:data:`STOP_RULES` are keyed by the code enums of :mod:`.modal`: a new G or M code is one enum
member there and one :class:`Rule` here.

Units: the state and the rules work in millimetres and degrees of the machine coordinates
(relative to the work origin); blocks leave in metres of the robot base frame.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from .blocks import FLANGE, Block, Dwell, Junction, Motion, MotionKind, Stop, StopKind
from .config import MAX_TARGET_DISTANCE, MachineConfig
from .errors import ErrorCode, Fault, GcodeError
from .modal import (AXES, ArcDistanceMode, CoordSystem, CutterComp, DistanceMode, FeedMode, MachineState, ModalState,
                    MotionMode, NonModal, PathControl, Plane, ProgramStop, ReturnMode, StepperPower, ToolLengthOffset,
                    Units)
from .parser import ParsedLine, word_columns
from .tool_rules import TOOLING_FAULTS, ToolEffect, apply_tooling, check_tooling, controlled_point, touches_tooling

__all__ = ["Context", "LineEffect", "ArcGeometry", "Rule", "check", "apply", "LINE_RULES", "NONMODAL_RULES",
           "MOTION_RULES", "STOP_RULES", "STEPPER_RULES", "TOOLING_RULE", "UNUSED_WORDS_RULE", "declared_faults",
           "ARC_ABS_TOL_MM", "ARC_REL_TOL", "ARC_END_MAX", "ARC_END_MIN", "arc_end_off_circle", "recover",
           "ZERO_LENGTH_MM", "ZERO_ANGLE"]

#: R-format arcs: how far (mm) R may fall short of half the chord before the arc is a fault (round-off)
ARC_ABS_TOL_MM = 0.002
#: the end of a centre-format arc, LinuxCNC's documented rule (g-code.adoc, "Center Format Arcs"): a
#: fault when the end's distance to the centre differs from the start's by more than ARC_END_MAX, or
#: by more than ARC_END_MIN and ARC_REL_TOL of the radius; in the line's units (inch under G20, mm)
ARC_END_MAX = {Units.INCH: 0.05, Units.MM: 0.5}
ARC_END_MIN = {Units.INCH: 0.0005, Units.MM: 0.005}
ARC_REL_TOL = 0.001
#: a move shorter than this (mm) and turning the tool less than ZERO_ANGLE (rad) is no motion
ZERO_LENGTH_MM = 1e-9
ZERO_ANGLE = 1e-9
_AXES_SET = frozenset(AXES)
_IJK_SET = frozenset("IJK")

# the parser's numbers -> the code enums (plain dict lookups: the hot path)
_MOTION = {m.value: m for m in MotionMode}
_PLANE = {m.value: m for m in Plane}
_UNITS = {m.value: m for m in Units}
_DISTANCE = {m.value: m for m in DistanceMode}
_COORD = {m.value: m for m in CoordSystem}
_FEED_MODE = {m.value: m for m in FeedMode}
_CUTTER = {m.value: m for m in CutterComp}
_LENGTH = {m.value: m for m in ToolLengthOffset}
_NONMODAL = {m.value: m for m in NonModal}
_STOP = {m.value: m for m in ProgramStop}
_STEPPERS = {m.value: m for m in StepperPower}
_ARC_DISTANCE = {m.value: m for m in ArcDistanceMode}
_PATH = {m.value: m for m in PathControl}
_RETURN = {m.value: m for m in ReturnMode}
#: path control mode -> how the moves programmed under it end
_JUNCTION = {PathControl.BLEND: Junction.BLEND, PathControl.EXACT_PATH: Junction.EXACT_PATH,
             PathControl.EXACT_STOP: Junction.EXACT_STOP}
#: codes of group 0 that take the axis words of their line (G10, G28, G92)
_TAKES_AXES = frozenset({NonModal.SET_OFFSET, NonModal.HOME, NonModal.OFFSET})
_WHY_UNUSED = {"I": "I/J/K belong to G2/G3 arcs", "J": "I/J/K belong to G2/G3 arcs", "K": "I/J/K belong to G2/G3 arcs",
               "R": "R belongs to G2/G3 arcs", "P": "P belongs to G4, G10, G64 or M62-M65", "L": "L belongs to G10",
               "Q": "Q belongs to G64", "H": "H belongs to G43"}


@dataclass(frozen=True)
class Context:
    """What the rules need to know about the robot and the machine (fixed for a program).

    Attributes:
        robot: the robot's name (for messages).
        tilt: A and B (tool tilts) are allowed (False: the SCARA, which takes C only).
        origin_mm: (3,) the work origin in the base frame, mm.
        home: (6,) machine coordinates of the home pose (G28), mm / deg.
        machine: the machine settings.
        orientation: A B C (deg) -> (3, 3) tool orientation (cached by the interpreter).
        home_flange: (4, 4) the flange pose at home, m, base frame (G28 sends the flange there,
            whatever the controlled point); None: ``home`` is the flange's.
    """

    robot: str
    tilt: bool
    origin_mm: tuple[float, float, float]
    home: tuple[float, ...]
    machine: MachineConfig
    orientation: Callable[[tuple[float, float, float]], np.ndarray]
    home_flange: np.ndarray | None = None


class ArcGeometry(NamedTuple):
    """A checked arc, in machine coordinates.

    Attributes:
        axes: (first, second, normal) axis indices of its plane.
        ci, cj: the centre relative to the start, in-plane, mm.
        sweep: signed angle about the plane normal, rad (negative clockwise).
        r0, r1: radius at the start and at the end, mm.
    """

    axes: tuple[int, int, int]
    ci: float
    cj: float
    sweep: float
    r0: float
    r1: float


class LineEffect:
    """The checked meaning of one line (made by :func:`check`, read by :func:`apply`).

    Attributes:
        line: the parsed line.
        modal: the modal state after the line (its group codes and F applied).
        units: mm per program unit on this line.
        nonmodal: its group-0 code, or None.
        motion: the motion mode that moves the tool on this line, or None (no motion).
        target: (6,) where the motion goes, machine coordinates (mm, deg), or None.
        arc: the arc's geometry when the motion is an arc.
        via: G28's intermediate point (its axis words), or None.
        dwell: G4's time, s, or None.
        stop: the M code of the stop group, or None.
        used: the value words a command consumed (the others are fault 25).
        tooling: the line's tools and outputs (:class:`~.tool_rules.ToolEffect`), or None.
        notes: (code, message, column) of the line's notes (severity NOTE: reported, not faults).
        cycle: a canned cycle's (R, Z, dwell s, peck Q or None, the Z it ends at), machine mm.
    """

    __slots__ = ("line", "modal", "units", "nonmodal", "motion", "target", "arc", "via", "dwell", "stop", "used",
                 "tooling", "notes", "cycle")

    def __init__(self, line: ParsedLine, modal: ModalState, units: float, nonmodal: NonModal | None,
                 stop: ProgramStop | None) -> None:
        self.line = line
        self.modal = modal
        self.units = units
        self.nonmodal = nonmodal
        self.stop = stop
        self.motion: MotionMode | None = None
        self.target: list[float] | None = None
        self.arc: ArcGeometry | None = None
        self.via: list[float] | None = None
        self.dwell: float | None = None
        self.used: set[str] = {"F"}
        self.tooling: ToolEffect | None = None
        self.notes: list[tuple[ErrorCode, str, int]] = []
        self.cycle: tuple[float, float, float, float | None, float] | None = None


class Fail:
    """Raises the GcodeError of a line at the word at fault; the column is looked up only then.

    ``letter`` (and ``value`` for G and M words, of which a line may hold several: the G1 of
    ``G21 G1 X10``, not the G21) names the word; no letter: the whole line. :attr:`allowed` is the
    running rule's declared faults: raising another is a programming error (RuntimeError).
    """

    __slots__ = ("line", "allowed")

    def __init__(self, line: ParsedLine) -> None:
        self.line = line
        self.allowed: tuple[ErrorCode, ...] = ()

    def __call__(self, code: ErrorCode, msg: str, letter: str = "", value: float | None = None) -> None:
        if code not in self.allowed:
            raise RuntimeError(f"a G-code rule raised fault {int(code)}, which it does not declare ({self.allowed})")
        raise GcodeError(code, msg, self.line.lineno, self.line.column_of(letter, value) if letter else 0)

    def first_of(self, letters: str) -> str:
        """The first of ``letters`` that stands on the line, in the line's order (e.g. the axis word
        that makes a line with a modal motion code move)."""
        return next(L for _, L, _ in word_columns(self.line.text) if L in letters)


CheckFn = Callable[[ParsedLine, MachineState, LineEffect, Context, Fail], None]
ApplyFn = Callable[["_Applier", LineEffect], None]


@dataclass(frozen=True)
class Rule:
    """One rule of the line: its check (may fail), its effect (on a checked line), its faults.

    Attributes:
        name: what it is about (for people and tests).
        check: ``(line, state, effect, context, fail)``: checks the line against the state and
            records its meaning in ``effect``; raises only the codes in :attr:`faults`.
        apply: ``(applier, effect)``: the rule's effect on the state and the blocks, or None.
        faults: every fault code the check may raise.
    """

    name: str
    check: CheckFn | None
    apply: ApplyFn | None = None
    faults: tuple[ErrorCode, ...] = field(default=())


# ----- geometry (machine coordinates, mm) ------------------------------------------------------

def _target(line: ParsedLine, state: MachineState, eff: LineEffect) -> list[float]:
    """(6,) where the axis words of the line point, in the line's distance mode, units and system."""
    w, pos, units = line.words, state.position, eff.units
    cs = state.offsets[eff.modal.coord.index]
    g92 = state.g92
    absolute = eff.modal.distance is DistanceMode.ABSOLUTE
    t = list(pos)
    for k in range(6):
        L = AXES[k]
        if L in w:
            v = w[L] * units if k < 3 else w[L]
            t[k] = v + cs[k] + g92[k] if absolute else pos[k] + v
    return t


def _check_reach(t: list[float], ctx: Context, fail: Fail) -> None:
    o = ctx.origin_mm
    d = math.hypot(t[0] + o[0], t[1] + o[1], t[2] + o[2])   # no overflow (inf at worst)
    if not d <= MAX_TARGET_DISTANCE * 1000.0:
        fail(ErrorCode.TARGET_OUT_OF_RANGE, f"the target is {d / 1000:.6g} m from the robot base "
             f"(at most {MAX_TARGET_DISTANCE:g} m)")


def _arc_reach(pos, target, axes, ci: float, cj: float, sweep: float, radius: float, origin_mm) -> float:
    """Largest distance (mm) of the arc from the robot base (helix included; ``radius``: the larger one).

    On a circle the distance from a point grows with the angle from that point's direction, so
    the farthest point of the arc is the one opposite the base if the arc passes it, else an end.
    """
    a0, a1, an = axes
    o = origin_mm
    c0, c1 = pos[a0] + ci, pos[a1] + cj            # centre, in-plane, machine coordinates
    b0, b1 = -o[a0] - c0, -o[a1] - c1              # the base seen from the centre
    rho = math.hypot(b0, b1)
    away = math.atan2(-b1, -b0)                    # direction of the point opposite the base
    start = math.atan2(-cj, -ci)
    u = ((away - start) * (1.0 if sweep >= 0 else -1.0)) % (2.0 * math.pi)
    if u <= abs(sweep) or rho == 0.0:
        d_in = rho + radius
    else:
        d_in = max(math.hypot(pos[a0] + o[a0], pos[a1] + o[a1]), math.hypot(target[a0] + o[a0], target[a1] + o[a1]))
    d_n = max(abs(pos[an] + o[an]), abs(target[an] + o[an]))
    return math.hypot(d_in, d_n)


# ----- the rules of every line -------------------------------------------------------------------

def _check_feed(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context, fail: Fail) -> None:
    """F: a feed rate > 0, in the line's units per minute (kept in mm/min).

    ``F0`` on a line that makes no feed move (``G0 F0 Z6``, ``F0`` alone: FreeCAD's posts write
    it on every rapid) is accepted, as grbl and LinuxCNC accept it: it leaves the feed rate
    undefined, so a later G1-G3 without a new F is fault 20. On a feed move it is fault 21."""
    w = line.words
    if "F" in w:
        f = w["F"]
        if f < 0 or (f == 0 and _feed_move(line, eff)):
            fail(ErrorCode.BAD_FEED_RATE, f"F{f:.12g}: the feed rate must be > 0 "
                 f"{_unit(eff.units)}/min", "F")


def _feed_move(line: ParsedLine, eff: LineEffect) -> bool:
    """Whether the line moves at the feed rate: a motion mode other than G0 (and G80) with axis
    or arc-centre words that no G10/G28/G92 takes."""
    motion = eff.modal.motion
    if motion is MotionMode.RAPID or motion is MotionMode.CANCEL:
        return False
    if eff.nonmodal is not None and eff.nonmodal is not NonModal.BASE_FRAME:
        return False
    w = line.words
    return not (_AXES_SET.isdisjoint(w) and _IJK_SET.isdisjoint(w) and "R" not in w)


def _check_orientation_words(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context,
                             fail: Fail) -> None:
    """A and B (tool tilts) only on robots that can tilt the tool."""
    if not ctx.tilt:
        w = line.words
        for L in "AB":
            if L in w:
                fail(ErrorCode.ORIENTATION_NOT_SUPPORTED, f"{L}{w[L]:.12g}: the {ctx.robot} takes only C "
                     f"(tool roll)", L)


def _check_path_control(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context, fail: Fail) -> None:
    """G64 P (blending tolerance, program units) and Q (naive CAM tolerance: accepted, armtwin
    never merges moves); P belongs to G4 or G10 when one of them is on the line. P0 is G64 alone."""
    if line.g.get("path") != PathControl.BLEND.value:
        return
    w = line.words
    if "P" in w and eff.nonmodal not in (NonModal.DWELL, NonModal.SET_OFFSET):
        p = w["P"]
        if p < 0:
            fail(ErrorCode.BAD_BLEND_TOLERANCE, f"P{p:.12g}: a blending tolerance of {p:.12g} {_unit(eff.units)} "
                 f"cannot be negative", "P")
        if p > 0:
            eff.modal = replace(eff.modal, blend_tolerance=p * eff.units)
        eff.used.add("P")
    if "Q" in w:
        if w["Q"] < 0:
            fail(ErrorCode.BAD_BLEND_TOLERANCE, f"Q{w['Q']:.12g}: a tolerance of {w['Q']:.12g} {_unit(eff.units)} "
                 f"cannot be negative", "Q")
        eff.used.add("Q")


def _unit(units: float) -> str:
    """The length unit of a line with ``units`` mm per program unit."""
    return "inch" if units != 1.0 else "mm"


# ----- group 0 -----------------------------------------------------------------------------------

def _check_dwell(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context, fail: Fail) -> None:
    """G4 P: a dwell of P seconds, 0 to ``machine.max_dwell``."""
    w = line.words
    if "P" not in w:
        fail(ErrorCode.DWELL_TIME_MISSING, "G4 needs P (seconds)", "G", NonModal.DWELL.value)
    p = w["P"]
    if p < 0:
        fail(ErrorCode.BAD_DWELL_TIME, f"P{p:.12g}: a dwell time cannot be negative", "P")
    ms = ctx.machine.dwell_ms        # the --dwell-ms dialect option: P in milliseconds
    seconds = p / 1000.0 if ms else p
    if seconds > ctx.machine.max_dwell:
        fail(ErrorCode.DWELL_TOO_LONG, f"P{p:.12g}: a dwell of {seconds:.12g} s is longer than "
             f"the {ctx.machine.max_dwell:g} s maximum (P is in {'milliseconds' if ms else 'seconds'})", "P")
    eff.dwell = seconds
    eff.used.add("P")


def _apply_dwell(ap: _Applier, eff: LineEffect) -> None:
    ap.out.append(Dwell(eff.line.lineno, float(eff.dwell)))   # type: ignore[arg-type]


def _check_axis_owner(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context, fail: Fail) -> None:
    """G10, G28 and G92 take their line's axis words: no explicit motion code may share them."""
    g = line.g
    if "motion" in g and g["motion"] != MotionMode.CANCEL.value and not _AXES_SET.isdisjoint(line.words):
        fail(ErrorCode.AXIS_COMMAND_CONFLICT, f"G{g['motion']:g}: G{g['nonmodal']:g} on this line takes the axis "
             f"words; a motion code cannot share them", "G", g["motion"])
    eff.used.update(AXES)


def _check_set_offset(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context, fail: Fail) -> None:
    """G10 L2/L20 P0..P6: set a work offset (L2: given; L20: the current position reads the values)."""
    _check_axis_owner(line, state, eff, ctx, fail)
    w = line.words
    L, P = w.get("L"), w.get("P")
    if L not in (2.0, 20.0):
        fail(ErrorCode.BAD_G10, "G10 needs L2 or L20 (and P0..P6)" if L is None
             else f"L{L:.12g}: G10 takes L2 or L20", "G" if L is None else "L", NonModal.SET_OFFSET.value if L is None else L)
    if P is None or P != int(P) or not 0 <= P <= 6:
        fail(ErrorCode.BAD_G10, "G10 needs P0..P6 (the coordinate system)" if P is None
             else f"P{P:.12g}: G10 takes P0 (active system) to P6", "G" if P is None else "P",
             NonModal.SET_OFFSET.value if P is None else None)
    eff.used.update("LP")


def _apply_set_offset(ap: _Applier, eff: LineEffect) -> None:
    w, units = eff.line.words, eff.units
    idx = eff.modal.coord.index if w["P"] == 0 else int(w["P"]) - 1
    off = list(ap.offsets[idx])
    for k in range(6):
        L = AXES[k]
        if L in w:
            v = w[L] * units if k < 3 else w[L]
            off[k] = v if w["L"] == 2.0 else ap.pos[k] - ap.g92[k] - v
    ap.offsets[idx] = tuple(off)


def _check_offset(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context, fail: Fail) -> None:
    """G92: the current position reads the given values (at least one axis word)."""
    _check_axis_owner(line, state, eff, ctx, fail)
    if _AXES_SET.isdisjoint(line.words):
        fail(ErrorCode.AXIS_WORDS_MISSING, "G92 needs at least one axis word", "G", NonModal.OFFSET.value)


def _apply_offset(ap: _Applier, eff: LineEffect) -> None:
    w, units = eff.line.words, eff.units
    cs = ap.offsets[eff.modal.coord.index]
    g92 = list(ap.g92)
    for k in range(6):
        L = AXES[k]
        if L in w:
            v = w[L] * units if k < 3 else w[L]
            g92[k] = ap.pos[k] - cs[k] - v
    ap.g92 = tuple(g92)


def _apply_cancel_offset(ap: _Applier, eff: LineEffect) -> None:
    ap.g92 = (0.0,) * 6


def _check_home(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context, fail: Fail) -> None:
    """G28: home; with axis words through the point they give, and then only the named axes home."""
    _check_axis_owner(line, state, eff, ctx, fail)
    if not _AXES_SET.isdisjoint(line.words):
        eff.via = _target(line, state, eff)
        _check_reach(eff.via, ctx, fail)


def _apply_home(ap: _Applier, eff: LineEffect) -> None:
    home = ap.home()
    if eff.via is not None:   # through the point, then home on the named axes only (grbl, LinuxCNC)
        ap.line_to(MotionKind.RAPID, eff.via, 0.0)
        w = eff.line.words
        home = [home[k] if AXES[k] in w else eff.via[k] for k in range(6)]
    ap.line_to(MotionKind.RAPID, home, 0.0)


def _check_base_frame(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context, fail: Fail) -> None:
    """G53: the axis words of this line are base-frame coordinates (mm from the robot base; A B C
    without work offsets), for a straight move (G0/G1) in absolute mode (LinuxCNC's rules)."""
    w = line.words
    if _AXES_SET.isdisjoint(w):
        return
    motion = eff.modal.motion
    if motion is not MotionMode.RAPID and motion is not MotionMode.LINEAR:
        fail(ErrorCode.BAD_G53, f"G53 moves in a straight line: G{motion.value:g} is active (use G0 or G1)",
             "G", NonModal.BASE_FRAME.value)
    if eff.modal.distance is DistanceMode.INCREMENTAL:
        fail(ErrorCode.BAD_G53, "G53 takes absolute base-frame coordinates: G91 (incremental) is active",
             "G", NonModal.BASE_FRAME.value)
    t = list(state.position)
    o, units = ctx.origin_mm, eff.units
    for k in range(6):
        L = AXES[k]
        if L in w:
            t[k] = w[L] * units - o[k] if k < 3 else w[L]
    _check_machine_home_idiom(w, [t[k] + o[k] for k in range(3)], eff, fail)
    eff.target = t


def _check_machine_home_idiom(w: dict[str, float], base_mm: list[float], eff: LineEffect, fail: Fail) -> None:
    """A G53 target where the robot itself stands: at or below its mounting plane (base z <= 0) or
    on its base's vertical axis (x = y = 0). CAM programs write ``G53 G0 Z0`` and ``G53 G0 X0 Y0``
    to go to a CNC machine's home (the top of Z travel, the home corner); read as base-frame
    coordinates they would drive the tool into the robot's mounting plane or its own column, so
    they are refused rather than misread (G28 is the robot's home)."""
    if "Z" in w and base_mm[2] <= 0.0:
        fail(ErrorCode.BAD_G53, f"G53 Z{w['Z']:.12g}: base-frame z {base_mm[2]:.12g} mm is at or below the robot's "
             f"mounting plane (CAM programs write G53 Z0 for a CNC machine's home height; on an arm "
             f"write G28 G91 Z0 for that)", "Z")
    if ("X" in w or "Y" in w) and abs(base_mm[0]) < 1e-6 and abs(base_mm[1]) < 1e-6:
        L = "X" if "X" in w else "Y"
        fail(ErrorCode.BAD_G53, f"G53 {L}{w[L]:.12g}: base-frame x 0, y 0 is the robot's own axis, not a place "
             f"for the tool (CAM programs write G53 X0 Y0 for a CNC machine's home corner; on an arm write G28 "
             f"for that)", L)


# ----- group 1: motion ----------------------------------------------------------------------------

def _check_motion(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context, fail: Fail) -> None:
    """The move of a line: a motion mode is active, the target is within reach of reason, a feed
    is defined for G1-G3; arcs also by :func:`_check_arc`."""
    _checked_target(line, state, eff, ctx, fail)


def _checked_target(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context, fail: Fail) -> list[float]:
    """:func:`_check_motion`'s checks; returns the target (6,) mm / deg."""
    w = line.words
    motion = eff.modal.motion
    if motion is MotionMode.CANCEL:
        L = fail.first_of(AXES)
        fail(ErrorCode.NO_MOTION_MODE, f"{L}{w[L]:.12g}: axis words but no motion mode is active (after G80)", L)
    eff.used.update(AXES)
    eff.motion = motion
    if eff.target is not None:      # set by G53 (base-frame coordinates)
        target = eff.target
    else:
        target = _target(line, state, eff) if not _AXES_SET.isdisjoint(w) else list(state.position)
    eff.target = target
    _check_reach(target, ctx, fail)
    if motion is not MotionMode.RAPID and eff.modal.feed is None:
        if "motion" in line.g:
            fail(ErrorCode.UNDEFINED_FEED_RATE, f"G{motion.value:g} without a feed rate: give F "
                 f"({_unit(eff.units)}/min)", "G",
                 motion.value)
        L = fail.first_of("XYZABCIJK")     # the word that makes this line move
        fail(ErrorCode.UNDEFINED_FEED_RATE, f"{L}{w[L]:.12g}: a G{motion.value:g} move (modal) without a feed rate: "
             f"give F ({_unit(eff.units)}/min)", L)
    return target


def arc_end_off_circle(r0: float, r1: float, units: Units) -> bool:
    """Whether an arc whose start is ``r0`` and end ``r1`` from the centre (in ``units``) breaks
    LinuxCNC's rule (:data:`ARC_END_MAX`, :data:`ARC_END_MIN`, :data:`ARC_REL_TOL`)."""
    d = abs(r1 - r0)
    return d > ARC_END_MAX[units] or (d > ARC_END_MIN[units] and d > ARC_REL_TOL * r0)


def _check_arc(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context, fail: Fail) -> None:
    """G2/G3: centre offsets in the plane (I J K) or a radius R, the end on the circle, the whole
    arc within reach of reason."""
    target = _checked_target(line, state, eff, ctx, fail)
    eff.used.update("IJKR")
    w, units, motion = line.words, eff.units, eff.modal.motion
    plane = eff.modal.plane
    a0, a1, an = plane.axes
    in_plane = plane.offset_letters
    pos = state.position
    for L in "IJK":
        if L in w and L not in in_plane and w[L] != 0.0:    # K0 on a G17 arc (FreeCAD's grbl post): no meaning
            fail(ErrorCode.ARC_OFFSET_OUT_OF_PLANE, f"{L}{w[L]:.12g} is not an offset of the G{plane.value:g} plane "
                 f"(use {in_plane[0]} and {in_plane[1]}; a zero {L} is accepted)", L)
    offs = [L for L in "IJK" if L in w and L in in_plane]
    x = target[a0] - pos[a0]
    y = target[a1] - pos[a1]
    if "R" in w:
        if offs:
            fail(ErrorCode.ARC_R_AND_OFFSETS, f"R{w['R']:.12g}: give either R or I/J/K, not both", "R")
        r = w["R"] * units
        d2 = x * x + y * y
        if d2 < 1e-18:
            fail(ErrorCode.ARC_R_FULL_CIRCLE, f"R{w['R']:.12g}: an R arc must end somewhere else than it starts",
                 "R")
        h2 = 4.0 * r * r - d2
        if h2 < 0:
            if math.sqrt(d2) - 2 * abs(r) > ARC_ABS_TOL_MM:
                fail(ErrorCode.ARC_RADIUS_TOO_SMALL, f"R{w['R']:.12g} is less than half the distance "
                     f"({math.sqrt(d2) / 2 / units:g} {_unit(units)}) between start and end", "R")
            h2 = 0.0
        h = -math.sqrt(h2) / math.sqrt(d2)
        if motion is MotionMode.CCW_ARC:
            h = -h
        if r < 0:
            h = -h  # R < 0: the long way round (more than 180°)
        ci = 0.5 * (x - y * h)
        cj = 0.5 * (y + x * h)
    else:
        if not offs:
            need = f"{in_plane[0]}/{in_plane[1]} or R"
            if line.g.get("motion") == motion.value:
                fail(ErrorCode.ARC_OFFSETS_MISSING, f"G{motion.value:g} needs {need}", "G", motion.value)
            L = fail.first_of(AXES)     # a modal arc: the word that makes this line move
            fail(ErrorCode.ARC_OFFSETS_MISSING, f"{L}{w[L]:.12g}: a G{motion.value:g} arc (modal) needs {need}", L)
        if eff.modal.arc_distance is ArcDistanceMode.ABSOLUTE:   # G90.1: the centre's program coordinates
            if len(offs) < 2:
                L = offs[0]
                fail(ErrorCode.ARC_OFFSETS_MISSING, f"{L}{w[L]:.12g}: under G90.1 (absolute arc centre) give both "
                     f"{in_plane[0]} and {in_plane[1]}", L)
            cs = state.offsets[eff.modal.coord.index]
            g92 = state.g92
            ci = w[in_plane[0]] * units + cs[a0] + g92[a0] - pos[a0]
            cj = w[in_plane[1]] * units + cs[a1] + g92[a1] - pos[a1]
        else:
            ci = w.get(in_plane[0], 0.0) * units
            cj = w.get(in_plane[1], 0.0) * units
    r0 = math.hypot(ci, cj)
    if r0 < 1e-9:
        L = offs[0] if offs else "R"
        fail(ErrorCode.ARC_RADIUS_TOO_SMALL, f"{L}{w[L]:.12g}: the arc radius is zero", L)
    ex, ey = x - ci, y - cj
    r1 = math.hypot(ex, ey)
    u = eff.modal.units
    if "R" not in w and arc_end_off_circle(r0 / units, r1 / units, u):
        un = _unit(units)
        fail(ErrorCode.ARC_RADIUS_MISMATCH, f"{offs[0]}{w[offs[0]]:.12g}: the end point is {abs(r1 - r0) / units:.4g} {un} "
             f"from the circle (radius {r0 / units:.6g} {un} at the start, {r1 / units:.6g} {un} at the end; "
             f"at most {ARC_END_MAX[u]:g} {un}, or {ARC_END_MIN[u]:g} {un} and {ARC_REL_TOL:.1%} of the radius)",
             offs[0])
    # sweep: from the start vector (-ci, -cj) to the end vector (ex, ey)
    sx, sy = -ci, -cj
    ang = math.atan2(sx * ey - sy * ex, sx * ex + sy * ey)
    if motion is MotionMode.CW_ARC:
        if ang >= -1e-12:
            ang -= 2.0 * math.pi
    elif ang <= 1e-12:
        ang += 2.0 * math.pi
    if r1 < 1e-9:
        r1 = r0
    reach = _arc_reach(pos, target, (a0, a1, an), ci, cj, ang, max(r0, r1), ctx.origin_mm)
    if not reach <= MAX_TARGET_DISTANCE * 1000.0:
        L = offs[0] if offs else "R"
        fail(ErrorCode.TARGET_OUT_OF_RANGE, f"{L}{w[L]:.12g}: the arc (radius {max(r0, r1) / units:.6g} {_unit(units)}) reaches "
             f"{reach / 1000:.6g} m from the robot base (at most {MAX_TARGET_DISTANCE:g} m): check the "
             + ("radius R" if "R" in w else "centre offsets " + "/".join(in_plane)), L)
    eff.arc = ArcGeometry((a0, a1, an), ci, cj, ang, r0, r1)


def _apply_line(ap: _Applier, eff: LineEffect) -> None:
    kind = MotionKind.RAPID if eff.motion is MotionMode.RAPID else MotionKind.LINEAR
    ap.line_to(kind, eff.target, (eff.modal.feed or 0.0) / 60000.0)   # type: ignore[arg-type]


def _apply_arc(ap: _Applier, eff: LineEffect) -> None:
    ap.arc_to(eff.target, (eff.modal.feed or 0.0) / 60000.0, eff.arc)   # type: ignore[arg-type]


# ----- canned cycles (G81 G82 G83) -----------------------------------------------------------------

#: G83: the tool goes back down to this far (mm) above the depth of the last peck (LinuxCNC's 0.010 inch)
PECK_CLEARANCE_MM = 0.254
#: the most pecks of one hole (a tiny Q would make one line a million moves)
MAX_PECKS = 1000


def _check_cycle(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context, fail: Fail) -> None:
    """G81/G82/G83 at the line's X Y: a drilling pattern along Z, from R down to Z and out again
    (G98: to the Z before the cycle if above R; G99: to R). R, Z, P and Q stay from the earlier
    cycles when not given (LinuxCNC's sticky values). G17 and G90 only; no L repeats."""
    w, m = line.words, eff.modal
    motion = m.motion
    code = f"G{motion.value:g}"
    at = ("G", motion.value) if line.g.get("motion") == motion.value else (fail.first_of(AXES + "RPQ"), None)
    if m.plane is not Plane.XY:
        fail(ErrorCode.BAD_CANNED_CYCLE, f"{code} drills along Z: it needs the XY plane (G17; G{m.plane.value:g} is "
             f"active)", *at)
    if m.distance is DistanceMode.INCREMENTAL:
        fail(ErrorCode.BAD_CANNED_CYCLE, f"{code}: canned cycles need absolute coordinates here (G90; G91 is active)",
             *at)
    if "L" in w:
        fail(ErrorCode.BAD_CANNED_CYCLE, f"L{w['L']:.12g}: repeated canned cycles (L) are not supported", "L")
    if m.feed is None:
        fail(ErrorCode.UNDEFINED_FEED_RATE, f"{code} without a feed rate: give F ({_unit(eff.units)}/min)", *at)
    units, un = eff.units, _unit(eff.units)
    z_off = state.offsets[m.coord.index][2] + state.g92[2]
    r0, z0, p0, q0 = m.cycle or (None, None, None, None)
    r = w["R"] * units + z_off if "R" in w else r0
    z = w["Z"] * units + z_off if "Z" in w else z0
    if r is None:
        fail(ErrorCode.BAD_CANNED_CYCLE, f"{code} needs R (the retract plane, {un})", *at)
        return
    if z is None:
        fail(ErrorCode.BAD_CANNED_CYCLE, f"{code} needs Z (the bottom of the hole, {un})", *at)
        return
    if z > r:
        fail(ErrorCode.BAD_CANNED_CYCLE, f"the bottom Z {(z - z_off) / units:.6g} {un} is above R "
             f"{(r - z_off) / units:.6g} {un}: a hole goes down from R to Z", "Z" if "Z" in w else "R")
    p, q = p0, q0
    if motion is MotionMode.DRILL_DWELL:
        if "P" in w:
            p = w["P"]
            if not 0 <= p <= ctx.machine.max_dwell:
                fail(ErrorCode.BAD_CANNED_CYCLE, f"P{p:.12g}: the dwell at the bottom is 0 to "
                     f"{ctx.machine.max_dwell:g} s", "P")
        eff.used.add("P")
    if motion is MotionMode.PECK:
        if "Q" in w:
            q = w["Q"] * units
            if not q > 0:
                fail(ErrorCode.BAD_CANNED_CYCLE, f"Q{w['Q']:.12g}: the peck depth must be > 0 {un}", "Q")
        if q is None:
            fail(ErrorCode.BAD_CANNED_CYCLE, f"{code} needs Q (the peck depth, {un})", *at)
            return
        if (r - z) / q > MAX_PECKS:
            fail(ErrorCode.BAD_CANNED_CYCLE, f"Q{q / units:.6g}: {(r - z) / q:.0f} pecks for one hole "
                 f"(at most {MAX_PECKS}): the peck depth is in {un}", "Q" if "Q" in w else at[0])
        eff.used.add("Q")
    eff.used.update(AXES)
    eff.used.add("R")
    eff.motion = motion
    xy = line._replace(words={k: v for k, v in w.items() if k != "Z"})
    t = _target(xy, state, eff)
    z_end = max(state.position[2], r) if m.return_mode is ReturnMode.INITIAL else r
    t[2] = z_end
    for point in (t, [t[0], t[1], z]):
        _check_reach(point, ctx, fail)
    eff.target = t
    eff.modal = replace(m, cycle=(r, z, p, q))
    eff.cycle = (r, z, (p or 0.0) if motion is MotionMode.DRILL_DWELL else 0.0,   # P is sticky, used by G82 only
                 q if motion is MotionMode.PECK else None, z_end)


def _apply_cycle(ap: _Applier, eff: LineEffect) -> None:
    """The moves of a canned cycle: up to R if below it, rapid over the hole, rapid down to R,
    feed to Z (G83: in pecks, out to R and back to just above the last depth between them), the
    G82 dwell, rapid out."""
    if eff.cycle is None or eff.target is None:     # set together by _check_cycle
        return
    r, z, p, q, z_end = eff.cycle
    t = eff.target
    feed = (eff.modal.feed or 0.0) / 60000.0
    rapid, linear = MotionKind.RAPID, MotionKind.LINEAR
    at = list(ap.pos)
    if at[2] < r:
        ap.line_to(rapid, [at[0], at[1], r, *at[3:]], 0.0)
    over = [t[0], t[1], max(ap.pos[2], r), *t[3:]]
    ap.line_to(rapid, over, 0.0)
    ap.line_to(rapid, [t[0], t[1], r, *t[3:]], 0.0)
    if q is None:
        ap.line_to(linear, [t[0], t[1], z, *t[3:]], feed)
    else:
        depth = r
        while depth > z:
            if depth < r:   # back down to just above the last peck
                ap.line_to(rapid, [t[0], t[1], min(r, depth + PECK_CLEARANCE_MM), *t[3:]], 0.0)
            depth = max(depth - q, z)
            ap.line_to(linear, [t[0], t[1], depth, *t[3:]], feed)
            if depth > z:
                ap.line_to(rapid, [t[0], t[1], r, *t[3:]], 0.0)
    if p > 0:
        ap.out.append(Dwell(ap.line, float(p)))
    ap.line_to(rapid, [t[0], t[1], z_end, *t[3:]], 0.0)


# ----- the stop group (M) -------------------------------------------------------------------------

def _apply_pause(ap: _Applier, eff: LineEffect) -> None:
    ap.out.append(Stop(eff.line.lineno, StopKind.PAUSE))


def _check_optional_stop(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context, fail: Fail) -> None:
    """M1: a pause only with the optional stop switched on; else a note."""
    if not ctx.machine.optional_stop:
        eff.notes.append((ErrorCode.OPTIONAL_STOP_SKIPPED, "M1 (optional stop) does nothing: the optional "
                          "stop is off (--optional-stop turns it on)", line.column_of("M", line.m["stop"])))


def _apply_optional_pause(ap: _Applier, eff: LineEffect) -> None:
    if ap.ctx.machine.optional_stop:
        ap.out.append(Stop(eff.line.lineno, StopKind.PAUSE))


def _check_stepper_power(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context, fail: Fail) -> None:
    """M17/M18/M84 (stepper motor power, 3-D printer firmware): nothing to do on an arm; a note."""
    m = line.m["steppers"]
    eff.notes.append((ErrorCode.NO_EFFECT, f"M{m:g} (stepper motor power) has no effect on a robot arm",
                      line.column_of("M", m)))


def _apply_end(ap: _Applier, eff: LineEffect) -> None:
    ap.out.append(Stop(eff.line.lineno, StopKind.END))
    ap.ended = eff.line.lineno


# ----- the last check of every line -----------------------------------------------------------------

def _check_unused(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context, fail: Fail) -> None:
    """Every word must be consumed by a command (grbl's rule): nothing is silently dropped."""
    w = line.words
    if not eff.used.issuperset(w):
        L = next(L for L in w if L not in eff.used)
        fail(ErrorCode.UNUSED_WORD, f"{L}{w[L]:.12g} is not used: {_WHY_UNUSED.get(L, 'no command takes it')}", L)


#: rules every line passes first, in order (F, then the orientation words)
LINE_RULES: tuple[Rule, ...] = (
    Rule("feed rate", _check_feed, faults=(ErrorCode.BAD_FEED_RATE,)),
    Rule("orientation words", _check_orientation_words, faults=(ErrorCode.ORIENTATION_NOT_SUPPORTED,)),
    Rule("path control (G64 P Q)", _check_path_control, faults=(ErrorCode.BAD_BLEND_TOLERANCE,)),
)
#: group 0, by code
NONMODAL_RULES: dict[NonModal, Rule] = {
    NonModal.DWELL: Rule("G4 dwell", _check_dwell, _apply_dwell,
                         (ErrorCode.DWELL_TIME_MISSING, ErrorCode.BAD_DWELL_TIME, ErrorCode.DWELL_TOO_LONG)),
    NonModal.SET_OFFSET: Rule("G10 work offset", _check_set_offset, _apply_set_offset,
                              (ErrorCode.AXIS_COMMAND_CONFLICT, ErrorCode.BAD_G10)),
    NonModal.HOME: Rule("G28 home", _check_home, _apply_home,
                        (ErrorCode.AXIS_COMMAND_CONFLICT, ErrorCode.TARGET_OUT_OF_RANGE)),
    NonModal.OFFSET: Rule("G92 offset", _check_offset, _apply_offset,
                          (ErrorCode.AXIS_COMMAND_CONFLICT, ErrorCode.AXIS_WORDS_MISSING)),
    NonModal.CANCEL_OFFSET: Rule("G92.1 cancel offset", None, _apply_cancel_offset),
    NonModal.BASE_FRAME: Rule("G53 base-frame coordinates", _check_base_frame, None, (ErrorCode.BAD_G53,)),
}
_MOVE_FAULTS = (ErrorCode.NO_MOTION_MODE, ErrorCode.TARGET_OUT_OF_RANGE, ErrorCode.UNDEFINED_FEED_RATE)
_ARC_FAULTS = _MOVE_FAULTS + (ErrorCode.ARC_OFFSETS_MISSING, ErrorCode.ARC_R_AND_OFFSETS,
                              ErrorCode.ARC_OFFSET_OUT_OF_PLANE, ErrorCode.ARC_RADIUS_MISMATCH,
                              ErrorCode.ARC_RADIUS_TOO_SMALL, ErrorCode.ARC_R_FULL_CIRCLE)
_CYCLE_FAULTS = (ErrorCode.BAD_CANNED_CYCLE, ErrorCode.UNDEFINED_FEED_RATE, ErrorCode.TARGET_OUT_OF_RANGE)
#: group 1, by the mode that moves the tool on a line with axis words (or a full-circle arc)
MOTION_RULES: dict[MotionMode, Rule] = {
    MotionMode.RAPID: Rule("G0 rapid", _check_motion, _apply_line, _MOVE_FAULTS),
    MotionMode.LINEAR: Rule("G1 line", _check_motion, _apply_line, _MOVE_FAULTS),
    MotionMode.CW_ARC: Rule("G2 arc", _check_arc, _apply_arc, _ARC_FAULTS),
    MotionMode.CCW_ARC: Rule("G3 arc", _check_arc, _apply_arc, _ARC_FAULTS),
    MotionMode.CANCEL: Rule("G80 no motion", _check_motion, None, _MOVE_FAULTS),
    MotionMode.DRILL: Rule("G81 drilling cycle", _check_cycle, _apply_cycle, _CYCLE_FAULTS),
    MotionMode.DRILL_DWELL: Rule("G82 drilling cycle with dwell", _check_cycle, _apply_cycle, _CYCLE_FAULTS),
    MotionMode.PECK: Rule("G83 peck drilling cycle", _check_cycle, _apply_cycle, _CYCLE_FAULTS),
}
#: the stop group, by code
STOP_RULES: dict[ProgramStop, Rule] = {
    ProgramStop.PAUSE: Rule("M0 pause", None, _apply_pause),
    ProgramStop.OPTIONAL_PAUSE: Rule("M1 optional pause", _check_optional_stop, _apply_optional_pause),
    ProgramStop.END: Rule("M2 end", None, _apply_end),
    ProgramStop.END_REWIND: Rule("M30 end", None, _apply_end),
}
#: M17/M18/M84, by code (notes only)
STEPPER_RULES: dict[StepperPower, Rule] = {m: Rule(f"M{m.value:g} stepper power", _check_stepper_power)
                                           for m in StepperPower}
#: tools and outputs (S T M6 M3-M5 M7-M9 M62-M65 M300 G43 G43.1 G49), after F and before group 0
TOOLING_RULE = Rule("tools and outputs", check_tooling, apply_tooling, TOOLING_FAULTS)
UNUSED_WORDS_RULE = Rule("unused words", _check_unused, faults=(ErrorCode.UNUSED_WORD,))


def declared_faults() -> set[ErrorCode]:
    """Every fault code some rule of the line may raise."""
    rules = [*LINE_RULES, TOOLING_RULE, *NONMODAL_RULES.values(), *MOTION_RULES.values(), *STOP_RULES.values(),
             *STEPPER_RULES.values(), UNUSED_WORDS_RULE]
    return {c for r in rules for c in r.faults}


def _modal_of(line: ParsedLine, m: ModalState) -> tuple[ModalState, float]:
    """The modal state after the line's group codes and F (no faults: the parser checked the codes),
    and the line's mm per program unit."""
    g, w = line.g, line.words
    if not g and "F" not in w:
        return m, m.units.mm
    units = _UNITS[g["units"]] if "units" in g else m.units
    feed = (w["F"] * units.mm if w["F"] > 0 else None) if "F" in w else m.feed     # F0: no feed rate
    path = _PATH[g["path"]] if "path" in g else m.path
    return ModalState(
        _MOTION[g["motion"]] if "motion" in g else m.motion,
        _PLANE[g["plane"]] if "plane" in g else m.plane,
        _DISTANCE[g["distance"]] if "distance" in g else m.distance,
        _FEED_MODE[g["feedmode"]] if "feedmode" in g else m.feed_mode,
        units,
        _CUTTER[g["cutter"]] if "cutter" in g else m.cutter,
        _LENGTH[g["length"]] if "length" in g else m.tool_length,
        _COORD[g["coord"]] if "coord" in g else m.coord,
        feed,
        _ARC_DISTANCE[g["arcdistance"]] if "arcdistance" in g else m.arc_distance,
        path,
        None if "path" in g else m.blend_tolerance,
        _RETURN[g["return"]] if "return" in g else m.return_mode,
        m.cycle), units.mm


def check(line: ParsedLine, state: MachineState, ctx: Context) -> LineEffect:
    """Check one line against the state without changing it (RS-274/NGC's order: F, orientation
    words, group 0, motion, unused words).

    Returns:
        The line's checked meaning, for :func:`apply`.

    Raises:
        GcodeError: the line's first fault, at the column of the word at fault.
    """
    g = line.g
    modal, units = _modal_of(line, state.modal)
    nonmodal = _NONMODAL[g["nonmodal"]] if "nonmodal" in g else None
    stop = _STOP[line.m["stop"]] if "stop" in line.m else None
    eff = LineEffect(line, modal, units, nonmodal, stop)
    fail = Fail(line)
    for rule in LINE_RULES:
        fail.allowed = rule.faults
        rule.check(line, state, eff, ctx, fail)   # type: ignore[misc]
    if touches_tooling(line):
        fail.allowed = TOOLING_FAULTS
        check_tooling(line, state, eff, ctx, fail)
    if nonmodal is not None:
        rule = NONMODAL_RULES[nonmodal]
        if rule.check is not None:
            fail.allowed = rule.faults
            rule.check(line, state, eff, ctx, fail)
    w = line.words
    has_axes = not _AXES_SET.isdisjoint(w) and g.get("length") != 43.1    # G43.1 takes them
    if has_axes and nonmodal not in _TAKES_AXES or (modal.motion.is_arc and not has_axes
                                                     and not _IJK_SET.isdisjoint(w)):   # a full circle
        rule = MOTION_RULES[eff.modal.motion]
        fail.allowed = rule.faults
        rule.check(line, state, eff, ctx, fail)   # type: ignore[misc]
    if "stop" in line.m or "steppers" in line.m:
        rule = STOP_RULES[stop] if stop is not None else STEPPER_RULES[_STEPPERS[line.m["steppers"]]]
        if rule.check is not None:
            fail.allowed = rule.faults
            rule.check(line, state, eff, ctx, fail)
    fail.allowed = UNUSED_WORDS_RULE.faults
    _check_unused(line, state, eff, ctx, fail)
    return eff


class _Applier:
    """The working copy of the state while a checked line is applied; makes the blocks."""

    __slots__ = ("ctx", "line", "pos", "rot", "offsets", "g92", "ended", "out", "points", "tool", "selected", "tcp",
                 "outputs", "junction", "tolerance")

    def __init__(self, state: MachineState, ctx: Context, line: int, modal: ModalState | None = None) -> None:
        self.ctx = ctx
        self.line = line
        self.pos: list[float] = list(state.position)
        self.rot = state.rotation
        self.offsets = list(state.offsets)
        self.g92 = state.g92
        self.ended = state.ended
        self.out: list[Block] = []
        self.points = 0
        self.tool, self.selected, self.tcp, self.outputs = state.tool, state.selected, state.tcp, state.outputs
        m = modal or state.modal      # how the moves of the line end (G61, G61.1, G64 P)
        self.junction = _JUNCTION[m.path]
        tol = m.blend_tolerance
        self.tolerance = tol * 0.001 if tol is not None and m.path is PathControl.BLEND else None

    def flange(self) -> np.ndarray:
        """(4, 4) the flange pose of the current position, m, base frame."""
        P = np.eye(4)
        P[:3, :3] = self.rot
        P[:3, 3] = self._m(self.pos)
        return P @ _inverse(self.tcp)

    def set_tcp(self, tcp: np.ndarray) -> None:
        """Make ``tcp`` (4, 4, flange frame) the controlled point; the arm does not move."""
        new = controlled_point(self.flange(), tcp, self.ctx)
        if np.array_equal(tcp[:3, :3], self.tcp[:3, :3]):
            new[3:] = self.pos[3:]      # the orientation is unchanged: keep its words and its matrix
        else:
            self.rot = self.ctx.orientation((new[3], new[4], new[5]))
        self.pos = new
        self.tcp = tcp

    def home(self) -> list[float]:
        """(6,) the controlled point's machine coordinates when the flange is at home (G28), mm / deg."""
        if self.ctx.home_flange is None or self.tcp is FLANGE:
            return list(self.ctx.home)
        return controlled_point(self.ctx.home_flange, self.tcp, self.ctx)

    def _m(self, p) -> tuple[float, float, float]:
        o = self.ctx.origin_mm
        return ((p[0] + o[0]) / 1000.0, (p[1] + o[1]) / 1000.0, (p[2] + o[2]) / 1000.0)

    def _samples(self, length: float, angle: float) -> int:
        """IK samples of a move ``length`` m long turning the tool by ``angle`` rad (upper estimate)."""
        m = self.ctx.machine
        return 1 + math.ceil((length + m.rotation_scale * angle) / m.sample_spacing)

    def line_to(self, kind: MotionKind, target: list[float], feed: float) -> None:
        """A straight move to ``target`` (6,) mm / deg at ``feed`` m/s (0: rapid)."""
        pos = self.pos
        if target == pos:
            return
        rot0 = self.rot
        turn = target[3:] != pos[3:]
        rot1 = self.ctx.orientation((target[3], target[4], target[5])) if turn else rot0
        length = math.hypot(target[0] - pos[0], target[1] - pos[1], target[2] - pos[2])   # mm
        angle = _angle_between(rot0, rot1) if turn else 0.0
        self.pos = target
        if length <= ZERO_LENGTH_MM and angle <= ZERO_ANGLE:
            return   # no motion (e.g. G0 B0 where B is already 0 up to round-off): the tool keeps its pose
        self.out.append(Motion(self.line, kind, self._m(pos), self._m(target), rot0, rot1, feed, tcp=self.tcp,
                               junction=self.junction, tolerance=self.tolerance))
        self.rot = rot1
        self.points += 1 + self._samples(length * 0.001, angle)

    def arc_to(self, target: list[float], feed: float, arc: ArcGeometry) -> None:
        """An arc (helix) of geometry ``arc`` to ``target`` (6,) mm / deg at ``feed`` m/s."""
        pos = self.pos
        a0, a1, an = arc.axes
        c = list(pos[:3])
        c[a0] += arc.ci
        c[a1] += arc.cj
        rot0 = self.rot
        turn = target[3:] != pos[3:]
        rot1 = self.ctx.orientation((target[3], target[4], target[5])) if turn else rot0
        self.out.append(Motion(self.line, MotionKind.ARC, self._m(pos), self._m(target), rot0, rot1, feed,
                               centre=self._m(c), plane=arc.axes, sweep=arc.sweep, radius_start=arc.r0 * 0.001,
                               radius_end=arc.r1 * 0.001, tcp=self.tcp, junction=self.junction,
                               tolerance=self.tolerance))
        self.pos = target
        self.rot = rot1
        # chords as the planner makes them (planner.plan), and the IK samples along the helix
        r = max(arc.r0, arc.r1) * 0.001
        tol = self.ctx.machine.arc_tolerance
        dth = min(2.0 * math.acos(max(-1.0, 1.0 - tol / r)) if tol < r else math.pi / 2, math.pi / 2)
        chords = max(1, math.ceil(abs(arc.sweep) / dth - 1e-9))
        length = math.hypot(abs(arc.sweep) * r, (target[an] - pos[an]) * 0.001)
        self.points += chords + self._samples(length, _angle_between(rot0, rot1) if turn else 0.0)


def _inverse(T: np.ndarray) -> np.ndarray:
    """Inverse of a rigid transform (4, 4)."""
    out = np.eye(4)
    out[:3, :3] = T[:3, :3].T
    out[:3, 3] = -T[:3, :3].T @ T[:3, 3]
    return out


def _angle_between(r0: np.ndarray, r1: np.ndarray) -> float:
    """Rotation angle (rad) from orientation ``r0`` to ``r1`` (accurate for small angles too)."""
    return 2.0 * math.asin(min(1.0, float(np.linalg.norm(r1 - r0)) / (2.0 * math.sqrt(2.0))))


def apply(eff: LineEffect, state: MachineState, ctx: Context) -> tuple[MachineState, list[Block], int]:
    """Apply a checked line (RS-274/NGC's order of execution: F and the modal codes, dwell, G10/G28/G92,
    motion, stop).

    Returns:
        (the next state, the blocks the line makes, the interpolation points they need: arc
        chords and preflight IK samples, see :attr:`MachineConfig.max_path_samples`).
    """
    ap = _Applier(state, ctx, eff.line.lineno, eff.modal)
    if eff.tooling is not None:
        apply_tooling(ap, eff)
    if eff.nonmodal is not None:
        fn = NONMODAL_RULES[eff.nonmodal].apply
        if fn is not None:
            fn(ap, eff)
    if eff.target is not None and eff.motion is not None:
        fn = MOTION_RULES[eff.motion].apply
        if fn is not None:
            fn(ap, eff)
    if eff.stop is not None:
        fn = STOP_RULES[eff.stop].apply
        if fn is not None:
            fn(ap, eff)
    if (eff.tooling is None and ap.pos == list(state.position) and ap.rot is state.rotation and ap.g92 is state.g92
            and ap.ended == state.ended and ap.offsets == list(state.offsets)):
        new = state if eff.modal is state.modal else MachineState(eff.modal, state.position, state.rotation,
                                                                  state.offsets, state.g92, state.ended, state.tool,
                                                                  state.selected, state.tcp, state.outputs)
    else:
        new = MachineState(eff.modal, tuple(ap.pos), ap.rot, tuple(ap.offsets), ap.g92, ap.ended, ap.tool,
                           ap.selected, ap.tcp, ap.outputs)
    return new, ap.out, ap.points


#: faults after which a refused line does not move the tool (its target is absurd or not a move)
_STAYS = frozenset({ErrorCode.TARGET_OUT_OF_RANGE, ErrorCode.NO_MOTION_MODE, ErrorCode.BAD_G53,
                    ErrorCode.AXIS_COMMAND_CONFLICT})


def recover(line: ParsedLine, state: MachineState, ctx: Context, fault: Fault | None = None) -> MachineState:
    """The state after a refused line, for reading the lines after it (nothing of it runs).

    A refused line keeps its valid modal words — the group codes, F when it is > 0, G64's P — and,
    when it is a move whose end is known (its axis words; not after ``fault`` TARGET_OUT_OF_RANGE,
    NO_MOTION_MODE, BAD_G53 or AXIS_COMMAND_CONFLICT), the tool is taken to be at its end. So one
    bad word (``F16 S3500 M3``, an arc slightly off its circle) does not make every later move
    faulty ("no feed rate", arcs starting from the wrong point): each root cause is reported
    once. G10, G28 and G92 of a refused line do nothing; A and B are dropped on the SCARA.

    Args:
        line: the refused line (for a parse fault: its valid words).
        fault: its first fault, or None (parse faults).
    """
    w = dict(line.words)
    if "F" in w and not w["F"] > 0:
        del w["F"]
    if not ctx.tilt:
        w.pop("A", None)
        w.pop("B", None)
    lite = line._replace(words=w)
    modal, units = _modal_of(lite, state.modal)
    g = line.g
    nonmodal = _NONMODAL.get(g["nonmodal"]) if "nonmodal" in g else None
    if (g.get("path") == PathControl.BLEND.value and w.get("P", 0.0) > 0
            and nonmodal not in (NonModal.DWELL, NonModal.SET_OFFSET)):
        modal = replace(modal, blend_tolerance=w["P"] * units)
    position, rotation = state.position, state.rotation
    moves = (not _AXES_SET.isdisjoint(w) and (nonmodal is None or nonmodal is NonModal.BASE_FRAME)
             and modal.motion is not MotionMode.CANCEL and (fault is None or fault.code not in _STAYS))
    if moves:
        if nonmodal is NonModal.BASE_FRAME:
            t = list(state.position)
            for k in range(6):
                if AXES[k] in w:
                    t[k] = w[AXES[k]] * units - ctx.origin_mm[k] if k < 3 else w[AXES[k]]
        else:
            t = _target(lite, state, LineEffect(lite, modal, units, None, None))
        o = ctx.origin_mm
        if math.hypot(t[0] + o[0], t[1] + o[1], t[2] + o[2]) <= MAX_TARGET_DISTANCE * 1000.0:
            if t[3:] != list(position[3:]):
                rotation = ctx.orientation((t[3], t[4], t[5]))
            position = tuple(t)
    if modal is state.modal and position is state.position:
        return state
    return replace(state, modal=modal, position=position, rotation=rotation)
