"""What the interpreter hands the planner: motion, dwell, stop and output blocks in SI units of the base frame.

A motion moves the **controlled point** (the active tool's TCP, :attr:`Motion.tcp`); the flange
pose that puts it there is ``pose · tcp⁻¹`` (what IK solves for).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

import numpy as np

if TYPE_CHECKING:
    from .outputs import OutputState

__all__ = ["MotionKind", "StopKind", "Motion", "Dwell", "Stop", "OutputChange", "Block", "FLANGE"]

#: the controlled point of the bare flange (T0, or G49): the identity, read-only
FLANGE = np.eye(4)
FLANGE.flags.writeable = False


class MotionKind(enum.Enum):
    """The kind of a programmed move."""

    RAPID = "rapid"      # G0
    LINEAR = "linear"    # G1
    ARC = "arc"          # G2 / G3


class StopKind(enum.Enum):
    """The kind of a programmed stop."""

    PAUSE = "pause"      # M0: the run pauses (the simulation continues at once)
    END = "end"          # M2 / M30
    TOOL_CHANGE = "tool change"   # M6: the arm rests while the tool is changed (the simulation continues at once)


@dataclass(frozen=True, eq=False)
class Motion:
    """One programmed move of the controlled point (the active tool's TCP), base frame.

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
        tcp: (4, 4) the controlled point in the flange frame (m): the mounted tool's TCP, another
            table entry's (G43 H), a length (G43.1) or the flange itself (:data:`FLANGE`, G49 / T0).
    """

    line: int
    kind: MotionKind
    start: tuple[float, float, float]
    end: tuple[float, float, float]
    rot_start: np.ndarray
    rot_end: np.ndarray
    feed: float
    centre: tuple[float, float, float] | None = None
    plane: tuple[int, int, int] = (0, 1, 2)
    sweep: float = 0.0
    radius_start: float = 0.0
    radius_end: float = 0.0
    tcp: np.ndarray = field(default_factory=lambda: FLANGE)


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


@dataclass(frozen=True)
class OutputChange:
    """A line's change of the tool and I/O outputs (M3-M5 S, M6, M7-M9, M62-M65, M300).

    It takes effect where the path is when the line is reached (the end of the previous move,
    after the dwells before it); with ``sync`` (M62/M63) when the next move starts.

    Attributes:
        line: 1-based program line.
        outputs: the tool output, S, tool and auxiliary outputs after the line
            (:class:`~.outputs.OutputState`; its digital outputs are not used: see ``digital``).
            Ignored when ``sync``.
        digital: (output number, on) switches of digital outputs, in order.
        sync: only ``digital`` changes, when the next move starts (M62/M63).
    """

    line: int
    outputs: "OutputState"
    digital: tuple[tuple[int, bool], ...] = ()
    sync: bool = False


#: a block of a program, in order
Block = Union[Motion, Dwell, Stop, OutputChange]
