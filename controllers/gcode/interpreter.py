"""The modal state machine: parsed lines -> motion blocks in SI metres of the robot base frame.

Follows grbl's ``gc_execute_line``: every check of a line runs first, against a copy of the
state; only a line without faults changes the modal state (a faulty line changes nothing and,
in a whole-file run, is skipped so that later lines are still checked).

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
import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable, Iterable, Union

import numpy as np

from ..kinematics import chain_of, fk
from ..transforms import matrix_to_rpy, rot_x, rpy_to_matrix
from .config import MAX_TARGET_DISTANCE, MachineConfig, machine_for
from .errors import MAX_FAULTS, ErrorCode, Fault, GcodeError, cap_faults
from .parser import ParseChunk, ParsedLine, ParseResult, count_lines, parse_chunks, parse_program, word_columns

__all__ = ["MotionKind", "Motion", "Dwell", "Stop", "StopKind", "Block", "Program", "Interpreter",
           "interpret", "load_program", "orientation_matrix", "ARC_ABS_TOL_MM", "ARC_REL_TOL"]

MM_PER_INCH = 25.4
#: arc end-radius check: absolute (mm) and relative tolerance (both must be exceeded)
ARC_ABS_TOL_MM = 0.002
ARC_REL_TOL = 0.001
#: a move shorter than this (mm) and turning the tool less than ZERO_ANGLE (rad) is no motion
ZERO_LENGTH_MM = 1e-9
ZERO_ANGLE = 1e-9
_AXES = "XYZABC"
_AXES_SET = frozenset(_AXES)
_IJK_SET = frozenset("IJK")
_R_DOWN = rot_x(math.pi)
# plane -> (first axis, second axis, normal axis) indices, and the offset letters in order
_PLANES = {17.0: (0, 1, 2), 18.0: (2, 0, 1), 19.0: (1, 2, 0)}
_OFFSET_LETTER = "IJK"


class MotionKind(enum.Enum):
    RAPID = "rapid"      # G0
    LINEAR = "linear"    # G1
    ARC = "arc"          # G2 / G3


class StopKind(enum.Enum):
    PAUSE = "pause"      # M0: the run pauses (the simulation continues at once)
    END = "end"          # M2 / M30


@dataclass(frozen=True, eq=False)
class Motion:
    """One programmed move of the flange, base frame.

    Attributes:
        line: 1-based line number in the file.
        kind: rapid, linear or arc.
        start, end: positions (x, y, z), m.
        rot_start, rot_end: (3, 3) flange orientations (the same object when unchanged).
        feed: programmed tool speed, m/s (0.0 for rapids: the planner uses the robot's rapid speed).
        centre: (x, y, z) arc centre at the start (in the plane of the start point), m; None for lines.
        plane: (a0, a1, normal) axis indices of the arc plane (G17: 0, 1, 2).
        sweep: signed arc angle about the plane normal, rad (negative clockwise, G2).
        radius_start, radius_end: arc radius at the start and the end, m (they differ slightly
            when the end was within tolerance of the circle: the arc becomes a spiral).
    """

    line: int
    kind: MotionKind
    start: tuple
    end: tuple
    rot_start: np.ndarray
    rot_end: np.ndarray
    feed: float
    centre: tuple | None = None
    plane: tuple[int, int, int] = (0, 1, 2)
    sweep: float = 0.0
    radius_start: float = 0.0
    radius_end: float = 0.0


@dataclass(frozen=True)
class Dwell:
    """G4: stand still for ``seconds`` (s) after the previous move has stopped."""

    line: int
    seconds: float


@dataclass(frozen=True)
class Stop:
    """M0 (pause) or M2/M30 (end of program)."""

    line: int
    kind: StopKind


Block = Union[Motion, Dwell, Stop]


@dataclass(frozen=True)
class Program:
    """An interpreted program.

    Attributes:
        blocks: motion, dwell and stop blocks in order.
        faults: parse and interpretation faults, in line order (one per faulty line); with more
            than the cap, the first ones and a TOO_MANY_FAULTS (119) notice.
        line_count: lines in the file.
        truncated: there were more faults than the cap (the faults end with the 119 notice).
        start: (3,) flange position where the program starts (the robot's home), m.
        rot_start: (3, 3) flange orientation at the start.
        q_start: (n,) joints at the start, rad / m.
        ended_at: line of the M2/M30 that ended the program, or 0.
    """

    blocks: tuple
    faults: tuple[Fault, ...]
    line_count: int
    truncated: bool
    start: np.ndarray
    rot_start: np.ndarray
    q_start: np.ndarray
    ended_at: int = 0

    @property
    def ok(self) -> bool:
        return not self.faults


def orientation_matrix(a_deg: float, b_deg: float, c_deg: float) -> np.ndarray:
    """(3, 3) flange orientation of the words A, B, C (deg): Rz(C) Ry(B) Rx(A) Rx(180°)."""
    return rpy_to_matrix(np.radians([a_deg, b_deg, c_deg])) @ _R_DOWN


def abc_of(rotation: np.ndarray) -> tuple[float, float, float]:
    """A, B, C (deg) of a flange orientation (inverse of :func:`orientation_matrix`)."""
    a, b, c = np.degrees(matrix_to_rpy(np.asarray(rotation) @ _R_DOWN.T))
    return float(a), float(b), float(c)


class _Fail:
    """Raises the GcodeError of a line (the column is looked up only when a fault happens).

    The fault points at the word at fault: ``letter`` (and ``value`` for G and M words, of which
    a line may hold several: the G1 of ``G21 G1 X10``, not the G21); no letter: the whole line.
    """

    __slots__ = ("line",)

    def __init__(self, line: ParsedLine) -> None:
        self.line = line

    def __call__(self, code: ErrorCode, msg: str, letter: str = "", value: float | None = None) -> None:
        raise GcodeError(code, msg, self.line.lineno, self.line.column_of(letter, value) if letter else 0)

    def first_of(self, letters: str) -> str:
        """The first of ``letters`` that stands on the line, in the line's order (e.g. the axis word
        that makes a line with a modal motion code move)."""
        return next(L for _, L, _ in word_columns(self.line.text) if L in letters)


class Interpreter:
    """The modal state of one program run; feed it parsed lines with :meth:`execute`.

    Args:
        spec: the robot (its home pose is where the program starts; its joint count tells
            whether A and B are allowed).
        machine: work origin and timing settings; default :func:`machine_for` ``(spec)``.
        q_start: joints where the program starts (default ``spec.home``), rad / m.
    """

    def __init__(self, spec, machine: MachineConfig | None = None, q_start=None) -> None:
        self.spec = spec
        self.machine = machine or machine_for(spec)
        self.q_start = np.array(spec.home if q_start is None else q_start, dtype=float)
        T = fk(chain_of(spec), self.q_start)
        self._origin_mm = [v * 1000.0 for v in self.machine.origin]
        self._tilt = not spec.roll_only  # A and B (tool tilts) allowed
        abc = abc_of(T[:3, :3]) if self._tilt else (0.0, 0.0, float(np.degrees(math.atan2(T[1, 0], T[0, 0]))))
        home = [T[0, 3] * 1000 - self._origin_mm[0], T[1, 3] * 1000 - self._origin_mm[1],
                T[2, 3] * 1000 - self._origin_mm[2], *abc]
        self.home: tuple[float, ...] = tuple(home)  # machine coords of the G28 position (mm, deg)
        self.start_position = T[:3, 3].copy()
        self.start_rotation = orientation_matrix(*abc)
        # --- modal state (machine coordinates relative to the work origin: mm, deg) ---
        self.pos: list[float] = list(home)
        self.motion: float | None = 0.0
        self.plane = 17.0
        self.units = 1.0              # mm per program unit
        self.absolute = True
        self.coord = 1                # 1..6 = G54..G59
        self.offsets = [[0.0] * 6 for _ in range(7)]  # index 1..6
        self.g92 = [0.0] * 6
        self.feed: float | None = None  # mm/min
        self.ended = 0
        self._rot_cache: dict[tuple, np.ndarray] = {tuple(abc): self.start_rotation}
        self._rot = self.start_rotation
        #: interpolation points of the lines read so far (an upper estimate of the planner's
        #: arc chords plus the preflight's IK samples, one per block and one per line): bounds the
        #: memory and the time of a check (:attr:`MachineConfig.max_path_samples`, checked by
        #: :func:`interpret`)
        self.points = 0

    # ----- helpers ------------------------------------------------------------------------
    def _m(self, p) -> tuple[float, float, float]:
        o = self._origin_mm
        return ((p[0] + o[0]) / 1000.0, (p[1] + o[1]) / 1000.0, (p[2] + o[2]) / 1000.0)

    def _rotation(self, p) -> np.ndarray:
        key = (p[3], p[4], p[5])
        r = self._rot_cache.get(key)
        if r is None:
            if len(self._rot_cache) > 4096:
                self._rot_cache.clear()
            r = orientation_matrix(*key)
            self._rot_cache[key] = r
        return r

    def program_position(self) -> tuple[float, ...]:
        """Current position in program coordinates of the active system (mm, deg)."""
        cs = self.offsets[self.coord]
        return tuple(self.pos[k] - cs[k] - self.g92[k] for k in range(6))

    # ----- one line ------------------------------------------------------------------------
    def execute(self, line: ParsedLine) -> list:
        """Check one parsed line against the modal state, then apply it.

        Returns:
            The blocks the line produces (possibly none).

        Raises:
            GcodeError: the line's first fault; the state is then unchanged.
        """
        if self.ended:
            return []
        g, w, ln = line.g, line.words, line.lineno

        fail = _Fail(line)

        # ---------------- checks (no state change) ----------------
        units = (MM_PER_INCH if g["units"] == 20.0 else 1.0) if "units" in g else self.units
        feed = self.feed
        if "F" in w:
            if not w["F"] > 0:
                fail(ErrorCode.BAD_FEED_RATE, f"F{w['F']:.12g}: the feed rate must be > 0", "F")
            feed = w["F"] * units
        if not self._tilt:
            for L in "AB":
                if L in w:
                    fail(ErrorCode.ORIENTATION_NOT_SUPPORTED, f"{L}{w[L]:.12g}: the {self.spec.name} takes only C "
                         f"(tool roll)", L)
        nonmodal = g.get("nonmodal")
        motion = g.get("motion", self.motion)
        if motion == 80.0:
            motion = None
        plane = g.get("plane", self.plane)
        absolute = (g["distance"] == 90.0) if "distance" in g else self.absolute
        coord = int(g["coord"]) - 53 if "coord" in g else self.coord
        has_axes = not _AXES_SET.isdisjoint(w)
        allowed = {"F"}
        dwell = None
        if nonmodal == 4.0:
            if "P" not in w:
                fail(ErrorCode.DWELL_TIME_MISSING, "G4 needs P (seconds)", "G", 4.0)
            if w["P"] < 0:
                fail(ErrorCode.BAD_DWELL_TIME, f"P{w['P']:.12g}: a dwell time cannot be negative", "P")
            if w["P"] > self.machine.max_dwell:
                fail(ErrorCode.DWELL_TOO_LONG, f"P{w['P']:.12g}: a dwell of {w['P']:.12g} s is longer than "
                     f"the {self.machine.max_dwell:g} s maximum (P is in seconds)", "P")
            dwell = w["P"]
            allowed.add("P")
        elif nonmodal in (10.0, 28.0, 92.0):
            if "motion" in g and has_axes and g["motion"] != 80.0:
                fail(ErrorCode.AXIS_COMMAND_CONFLICT, f"G{g['motion']:g}: G{nonmodal:g} on this line takes the axis "
                     f"words; a motion code cannot share them", "G", g["motion"])
            allowed.update(_AXES)
            if nonmodal == 10.0:
                L, P = w.get("L"), w.get("P")
                if L not in (2.0, 20.0):
                    fail(ErrorCode.BAD_G10, "G10 needs L2 or L20 (and P0..P6)" if L is None
                         else f"L{L:.12g}: G10 takes L2 or L20", "G" if L is None else "L", 10.0 if L is None else L)
                if P is None or P != int(P) or not 0 <= P <= 6:
                    fail(ErrorCode.BAD_G10, "G10 needs P0..P6 (the coordinate system)" if P is None
                         else f"P{P:.12g}: G10 takes P0 (active system) to P6", "G" if P is None else "P",
                         10.0 if P is None else None)
                allowed.update("LP")
            elif nonmodal == 92.0 and not has_axes:
                fail(ErrorCode.AXIS_WORDS_MISSING, "G92 needs at least one axis word", "G", 92.0)

        cs = self.offsets[coord]
        g92 = self.g92
        pos = self.pos

        def target_of() -> list[float]:
            t = list(pos)
            for k in range(6):
                L = _AXES[k]
                if L in w:
                    v = w[L] * units if k < 3 else w[L]
                    t[k] = v + cs[k] + g92[k] if absolute else pos[k] + v
            return t

        moving = has_axes and nonmodal not in (10.0, 28.0, 92.0)
        arc_full = motion in (2.0, 3.0) and not has_axes and not _IJK_SET.isdisjoint(w)
        blocks_geom = None
        target = None
        if moving or arc_full:
            if motion is None:
                L = fail.first_of(_AXES)
                fail(ErrorCode.NO_MOTION_MODE, f"{L}{w[L]:.12g}: axis words but no motion mode is active (after G80)", L)
            allowed.update(_AXES)
            target = target_of() if moving else list(pos)
            self._check_target(target, fail)
            if motion != 0.0 and feed is None:
                if "motion" in g:
                    fail(ErrorCode.UNDEFINED_FEED_RATE, f"G{motion:g} without a feed rate: give F (mm/min)", "G", motion)
                L = fail.first_of("XYZABCIJK")     # the word that makes this line move
                fail(ErrorCode.UNDEFINED_FEED_RATE, f"{L}{w[L]:.12g}: a G{motion:g} move (modal) without a feed rate: "
                     f"give F (mm/min)", L)
            if motion in (2.0, 3.0):
                allowed.update("IJKR")
                blocks_geom = self._arc_geometry(g, w, pos, target, plane, motion, units, fail)
        if not allowed.issuperset(w):
            L = next(L for L in w if L not in allowed)
            why = {"I": "I/J/K belong to G2/G3 arcs", "J": "I/J/K belong to G2/G3 arcs",
                   "K": "I/J/K belong to G2/G3 arcs", "R": "R belongs to G2/G3 arcs",
                   "P": "P belongs to G4 or G10", "L": "L belongs to G10"}.get(L, "no command takes it")
            fail(ErrorCode.UNUSED_WORD, f"{L}{w[L]:.12g} is not used: {why}", L)
        g28_mid = None
        if nonmodal == 28.0:
            g28_mid = target_of() if has_axes else None
            if g28_mid is not None:
                self._check_target(g28_mid, fail)

        # ---------------- apply ----------------
        out: list = []
        self.units = units
        if feed is not None:
            self.feed = feed
        if dwell is not None:
            out.append(Dwell(ln, float(dwell)))
        self.plane = plane
        self.coord = coord
        self.absolute = absolute
        if nonmodal == 10.0:
            idx = coord if w["P"] == 0 else int(w["P"])
            off = self.offsets[idx]
            for k in range(6):
                L = _AXES[k]
                if L in w:
                    v = w[L] * units if k < 3 else w[L]
                    off[k] = v if w["L"] == 2.0 else pos[k] - g92[k] - v
        elif nonmodal == 92.0:
            for k in range(6):
                L = _AXES[k]
                if L in w:
                    v = w[L] * units if k < 3 else w[L]
                    g92[k] = pos[k] - cs[k] - v
        elif nonmodal == 92.1:
            self.g92 = [0.0] * 6
        elif nonmodal == 28.0:
            home = list(self.home)
            if g28_mid is not None:   # through the point, then home on the named axes only (grbl, LinuxCNC)
                self._line_to(out, ln, MotionKind.RAPID, g28_mid, 0.0)
                home = [home[k] if _AXES[k] in w else g28_mid[k] for k in range(6)]
            self._line_to(out, ln, MotionKind.RAPID, home, 0.0)
        if "motion" in g:
            self.motion = motion
        if target is not None:
            f = (feed or 0.0) / 60000.0  # mm/min -> m/s
            if motion in (0.0, 1.0):
                self._line_to(out, ln, MotionKind.RAPID if motion == 0.0 else MotionKind.LINEAR, target, f)
            else:
                self._arc_to(out, ln, target, f, *blocks_geom)
        if line.m is not None:
            if line.m == 0.0:
                out.append(Stop(ln, StopKind.PAUSE))
            else:
                out.append(Stop(ln, StopKind.END))
                self.ended = ln
        self.points += 1 + len(out)     # one per line read and one per block (see _interpret_chunks)
        return out

    # ----- geometry -------------------------------------------------------------------------
    def _check_target(self, t, fail) -> None:
        o = self._origin_mm
        d = math.hypot(t[0] + o[0], t[1] + o[1], t[2] + o[2])   # no overflow (inf at worst)
        if not d <= MAX_TARGET_DISTANCE * 1000.0:
            fail(ErrorCode.TARGET_OUT_OF_RANGE, f"the target is {d / 1000:.6g} m from the robot base "
                 f"(at most {MAX_TARGET_DISTANCE:g} m)")

    def _arc_reach(self, pos, target, plane, ci, cj, sweep, radius) -> float:
        """Largest distance (mm) of the arc from the robot base (helix included; ``radius``: the larger one).

        On a circle the distance from a point grows with the angle from that point's direction, so
        the farthest point of the arc is the one opposite the base if the arc passes it, else an end.
        """
        a0, a1, an = plane
        o = self._origin_mm
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

    def _arc_geometry(self, g, w, pos, target, plane, motion, units, fail):
        a0, a1, an = _PLANES[plane]
        in_plane = (_OFFSET_LETTER[a0], _OFFSET_LETTER[a1])
        offs = [L for L in "IJK" if L in w]
        for L in offs:
            if L not in in_plane:
                fail(ErrorCode.ARC_OFFSET_OUT_OF_PLANE, f"{L}{w[L]:.12g} is not an offset of the G{plane:g} plane "
                     f"(use {in_plane[0]} and {in_plane[1]})", L)
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
                         f"({math.sqrt(d2) / 2 / units:g}) between start and end", "R")
                h2 = 0.0
            h = -math.sqrt(h2) / math.sqrt(d2)
            if motion == 3.0:
                h = -h
            if r < 0:
                h = -h  # R < 0: the long way round (more than 180°)
            ci = 0.5 * (x - y * h)
            cj = 0.5 * (y + x * h)
        else:
            if not offs:
                need = f"{in_plane[0]}/{in_plane[1]} or R"
                if g.get("motion") == motion:
                    fail(ErrorCode.ARC_OFFSETS_MISSING, f"G{motion:g} needs {need}", "G", motion)
                L = fail.first_of(_AXES)     # a modal arc: the word that makes this line move
                fail(ErrorCode.ARC_OFFSETS_MISSING, f"{L}{w[L]:.12g}: a G{motion:g} arc (modal) needs {need}", L)
            ci = w.get(in_plane[0], 0.0) * units
            cj = w.get(in_plane[1], 0.0) * units
        r0 = math.hypot(ci, cj)
        if r0 < 1e-9:
            L = offs[0] if offs else "R"
            fail(ErrorCode.ARC_RADIUS_TOO_SMALL, f"{L}{w[L]:.12g}: the arc radius is zero", L)
        ex, ey = x - ci, y - cj
        r1 = math.hypot(ex, ey)
        if "R" not in w and abs(r1 - r0) > ARC_ABS_TOL_MM and abs(r1 - r0) > ARC_REL_TOL * r0:
            fail(ErrorCode.ARC_RADIUS_MISMATCH, f"{offs[0]}{w[offs[0]]:.12g}: the end point is {abs(r1 - r0) / units:.4g} from the circle "
                 f"(radius {r0 / units:.4g} at the start, {r1 / units:.4g} at the end)", offs[0])
        # sweep: from the start vector (-ci, -cj) to the end vector (ex, ey)
        sx, sy = -ci, -cj
        ang = math.atan2(sx * ey - sy * ex, sx * ex + sy * ey)
        if motion == 2.0:
            if ang >= -1e-12:
                ang -= 2.0 * math.pi
        elif ang <= 1e-12:
            ang += 2.0 * math.pi
        if r1 < 1e-9:
            r1 = r0
        reach = self._arc_reach(pos, target, (a0, a1, an), ci, cj, ang, max(r0, r1))
        if not reach <= MAX_TARGET_DISTANCE * 1000.0:
            L = offs[0] if offs else "R"
            fail(ErrorCode.TARGET_OUT_OF_RANGE, f"{L}{w[L]:.12g}: the arc (radius {max(r0, r1) / units:.6g}) reaches {reach / 1000:.6g} m "
                 f"from the robot base (at most {MAX_TARGET_DISTANCE:g} m): check the "
                 + ("radius R" if "R" in w else "centre offsets " + "/".join(in_plane)), offs[0] if offs else "R")
        return (a0, a1, an), ci, cj, ang, r0, r1

    def _line_to(self, out: list, ln: int, kind: MotionKind, target: list[float], feed: float) -> None:
        pos = self.pos
        if target == pos:
            return
        rot0 = self._rot
        turn = target[3:] != pos[3:]
        rot1 = self._rotation(target) if turn else rot0
        length = math.hypot(target[0] - pos[0], target[1] - pos[1], target[2] - pos[2])   # mm
        angle = _angle_between(rot0, rot1) if turn else 0.0
        self.pos = target
        if length <= ZERO_LENGTH_MM and angle <= ZERO_ANGLE:
            return   # no motion (e.g. G0 B0 where B is already 0 up to round-off): the tool keeps its pose
        out.append(Motion(ln, kind, self._m(pos), self._m(target), rot0, rot1, feed))
        self._rot = rot1
        self.points += 1 + self._samples(length * 0.001, angle)

    def _samples(self, length: float, angle: float) -> int:
        """IK samples of a move ``length`` m long turning the tool by ``angle`` rad (upper estimate)."""
        m = self.machine
        return 1 + math.ceil((length + m.rotation_scale * angle) / m.sample_spacing)

    def _arc_to(self, out: list, ln: int, target, feed, plane, ci, cj, sweep, r0, r1) -> None:
        pos = self.pos
        a0, a1, an = plane
        c = list(pos[:3])
        c[a0] += ci
        c[a1] += cj
        rot0 = self._rot
        turn = target[3:] != pos[3:]
        rot1 = self._rotation(target) if turn else rot0
        out.append(Motion(ln, MotionKind.ARC, self._m(pos), self._m(target), rot0, rot1, feed,
                          centre=self._m(c), plane=plane, sweep=sweep, radius_start=r0 * 0.001,
                          radius_end=r1 * 0.001))
        self.pos = target
        self._rot = rot1
        # chords as the planner makes them (planner.plan), and the IK samples along the helix
        r = max(r0, r1) * 0.001
        tol = self.machine.arc_tolerance
        dth = min(2.0 * math.acos(max(-1.0, 1.0 - tol / r)) if tol < r else math.pi / 2, math.pi / 2)
        chords = max(1, math.ceil(abs(sweep) / dth - 1e-9))
        length = math.hypot(abs(sweep) * r, (target[an] - pos[an]) * 0.001)
        self.points += chords + self._samples(length, _angle_between(rot0, rot1) if turn else 0.0)


def _angle_between(r0: np.ndarray, r1: np.ndarray) -> float:
    """Rotation angle (rad) from orientation ``r0`` to ``r1`` (accurate for small angles too)."""
    return 2.0 * math.asin(min(1.0, float(np.linalg.norm(r1 - r0)) / (2.0 * math.sqrt(2.0))))


#: lines interpreted between two progress reports
PROGRESS_LINES = 25_000


def interpret(lines: ParseResult | Iterable[ParsedLine], spec, machine: MachineConfig | None = None, *,
              q_start=None, max_faults: int = MAX_FAULTS,
              progress: Callable[[str, float], None] | None = None) -> Program:
    """Run the interpreter over parsed lines, collecting faults instead of raising.

    A faulty line is skipped without changing the state (grbl's rule), and the next lines are
    still checked; parse faults already in a :class:`ParseResult` are merged in line order.
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
    if isinstance(lines, ParseResult):   # the parser's own faults, without its cap notice
        parse_faults = [f for f in lines.faults if f.code is not ErrorCode.TOO_MANY_FAULTS] + list(lines.overflow)
        parse_faults.sort(key=lambda f: f.line)
        src, count = lines.lines, lines.line_count
    else:
        parse_faults, src, count = [], lines, 0
    if not isinstance(src, Sequence):  # parse_program's Lines is one (made line by line as it is read)
        src = list(src)
    return _interpret_chunks([ParseChunk(src, tuple(parse_faults))], count, spec, machine, q_start, max_faults,
                             progress)


def _interpret_chunks(chunks: Iterable[ParseChunk], count: int, spec, machine, q_start, max_faults: int,
                      progress: Callable[[str, float], None] | None) -> Program:
    """:func:`interpret` over the pieces of a program (one, or :func:`~.parser.parse_chunks`'
    pieces, each dropped when it is done); ``count``: the program's line count."""
    it = Interpreter(spec, machine, q_start)
    max_faults = max(1, int(max_faults))
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
    for src, chunk_faults in chunks:
        parse_faults.extend(chunk_faults)
        parse_lines.extend(f.line for f in chunk_faults)
        total = len(src)
        step = total if progress is None else PROGRESS_LINES
        for a in range(0, total, max(step, 1)):
            if progress is not None:
                progress("interpret", src[a].lineno / count if count else a / total)
            for pl in src[a:a + step]:
                try:
                    new = execute(pl)
                except GcodeError as exc:
                    sem.append(exc.fault)
                else:
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
        src = pl = None      # let the piece go before the next one is parsed
        if stop:
            break
    if it.ended:   # M2/M30: the later lines are not executed, but their parse faults are reported
        for _, chunk_faults in chunks:
            parse_faults.extend(chunk_faults)
    if full:       # the piece read last may hold parse faults after the line that passed the cap
        cap_line = sem[-1].line
        parse_faults = [f for f in parse_faults if f.line <= cap_line]
    faults = parse_faults + sem
    if sem and parse_faults:
        faults.sort(key=lambda f: f.line)
    faults, truncated = cap_faults(faults, max_faults)
    return Program(tuple(blocks), tuple(faults), count, truncated, it.start_position, it.start_rotation,
                   it.q_start, it.ended)


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
