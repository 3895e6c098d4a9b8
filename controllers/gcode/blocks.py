"""What the interpreter hands the planner: motion, dwell and stop blocks in SI units of the base frame."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Union

import numpy as np

__all__ = ["MotionKind", "StopKind", "Junction", "Motion", "Dwell", "Stop", "Block"]


class MotionKind(enum.Enum):
    """The kind of a programmed move."""

    RAPID = "rapid"      # G0
    LINEAR = "linear"    # G1
    ARC = "arc"          # G2 / G3


class StopKind(enum.Enum):
    """The kind of a programmed stop."""

    PAUSE = "pause"      # M0: the run pauses (the simulation continues at once)
    END = "end"          # M2 / M30


class Junction(enum.Enum):
    """How a move ends and joins the next one (the path control mode it was programmed under)."""

    BLEND = "blend"            # G64: corners taken at speed (junction deviation, or the move's tolerance)
    EXACT_PATH = "exact path"  # G61: the tool stops at a corner; collinear moves join at speed
    EXACT_STOP = "exact stop"  # G61.1: the tool stops at the end of the move


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
        junction: how the move joins the next (G61, G61.1, G64).
        tolerance: with BLEND, the junction deviation at the move's end, m (G64 P); None: the
            machine's ``junction_deviation``.
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
    junction: Junction = Junction.BLEND
    tolerance: float | None = None


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


#: a block of a program, in order
Block = Union[Motion, Dwell, Stop]
