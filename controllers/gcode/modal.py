"""The G-code vocabulary and the modal state, typed.

Every supported G and M code is a member of an enum whose value is its number (``MotionMode.LINEAR``
is G1, ``Plane.ZX`` is G18); each enum is one modal group (RS-274/NGC's groups, as grbl and
LinuxCNC use them). The parser's tables of supported codes (:data:`G_CODES`, :data:`M_CODES`) are
made from these enums, so **a new code is one enum member** (plus, when it does something, one
rule in :mod:`.rules`); a new modal group is one enum class added to :data:`G_GROUPS` or
:data:`M_GROUPS`.

:class:`ModalState` is the frozen modal state of a program (the active code of every group and
the feed rate); :class:`MachineState` adds where the tool is and the work offsets. A line that
passes its checks makes a new state; a faulty line changes nothing (grbl's rule).

Units: the position is in millimetres (X Y Z) and degrees (A B C) relative to the work origin,
the feed rate in mm/min — the units of the program's world, converted to SI when blocks leave
the interpreter.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .blocks import FLANGE

if TYPE_CHECKING:
    from .outputs import OutputState

__all__ = ["ModalGroup", "MotionMode", "Plane", "Units", "DistanceMode", "CoordSystem", "FeedMode", "CutterComp",
           "ToolLengthOffset", "NonModal", "ProgramStop", "ToolChange", "SpindleMode", "Coolant", "DigitalOutput",
           "PenServo", "G_GROUPS", "M_GROUPS", "G_CODES", "M_CODES",
           "ModalState", "MachineState", "AXES", "MM_PER_INCH"]

MM_PER_INCH = 25.4
#: the axis letters, in the order of :attr:`MachineState.position`
AXES = "XYZABC"


class ModalGroup(enum.Enum):
    """A modal group; its value is the key the parser files a line's code under (``ParsedLine.g``)."""

    NONMODAL = "nonmodal"        # group 0: G4 G10 G28 G92 G92.1
    MOTION = "motion"            # group 1: G0 G1 G2 G3 G80
    PLANE = "plane"              # group 2: G17 G18 G19
    DISTANCE = "distance"        # group 3: G90 G91
    FEED_MODE = "feedmode"       # group 5: G94
    UNITS = "units"              # group 6: G20 G21
    CUTTER = "cutter"            # group 7: G40
    LENGTH = "length"            # group 8: G43 G43.1 G49
    COORD = "coord"              # group 12: G54-G59
    STOP = "stop"                # M group 4: M0 M2 M30
    TOOL_CHANGE = "toolchange"   # M group 6: M6
    SPINDLE = "spindle"          # M group 7: M3 M4 M5 (the tool's output)
    COOLANT = "coolant"          # M group 8: M7 M8 M9 (auxiliary outputs)
    DIGITAL = "digital"          # M62-M65 (LinuxCNC's digital outputs)
    SERVO = "servo"              # M300 (servo pen, a dialect option)


class MotionMode(enum.Enum):
    """Group 1: how axis words move the tool."""

    RAPID = 0.0          # G0
    LINEAR = 1.0         # G1
    CW_ARC = 2.0         # G2
    CCW_ARC = 3.0        # G3
    CANCEL = 80.0        # G80: no motion mode (axis words are then a fault)

    @property
    def is_arc(self) -> bool:
        return self is MotionMode.CW_ARC or self is MotionMode.CCW_ARC


class Plane(enum.Enum):
    """Group 2: the arc plane."""

    XY = 17.0            # G17: I J
    ZX = 18.0            # G18: I K (the plane's first axis is Z)
    YZ = 19.0            # G19: J K

    @property
    def axes(self) -> tuple[int, int, int]:
        """(first in-plane axis, second in-plane axis, normal axis) as indices of X Y Z."""
        return _PLANE_AXES[self]

    @property
    def offset_letters(self) -> tuple[str, str]:
        """The centre-offset words of the plane, in the order of :attr:`axes` (G18: K, I)."""
        a0, a1, _ = self.axes
        return "IJK"[a0], "IJK"[a1]


_PLANE_AXES = {Plane.XY: (0, 1, 2), Plane.ZX: (2, 0, 1), Plane.YZ: (1, 2, 0)}


class DistanceMode(enum.Enum):
    """Group 3: how axis words are read."""

    ABSOLUTE = 90.0      # G90
    INCREMENTAL = 91.0   # G91


class FeedMode(enum.Enum):
    """Group 5: what F means."""

    UNITS_PER_MINUTE = 94.0   # G94 (the only one: G93 inverse time is not supported)


class Units(enum.Enum):
    """Group 6: program length units."""

    INCH = 20.0          # G20
    MM = 21.0            # G21

    @property
    def mm(self) -> float:
        """Millimetres per program unit."""
        return MM_PER_INCH if self is Units.INCH else 1.0


class CutterComp(enum.Enum):
    """Group 7: cutter radius compensation (accepted off only: CAM headers write it)."""

    OFF = 40.0           # G40


class ToolLengthOffset(enum.Enum):
    """Group 8: which point of the tool the program moves (docs/GCODE.md, "Tools").

    On a robot arm the mounted tool's TCP is the controlled point (M6 makes it so, as a robot
    controller does); G43 H names another table entry's TCP, G43.1 a length along the flange's z
    axis, and G49 makes the bare flange the controlled point.
    """

    TOOL = 43.0          # G43 [H n]: tool n's TCP (without H: the mounted tool's)
    DYNAMIC = 43.1       # G43.1 Z: a length of Z along the flange's z axis
    OFF = 49.0           # G49: the flange


class CoordSystem(enum.Enum):
    """Group 12: the work coordinate system."""

    G54 = 54.0
    G55 = 55.0
    G56 = 56.0
    G57 = 57.0
    G58 = 58.0
    G59 = 59.0

    @property
    def index(self) -> int:
        """0..5 (G10's P1..P6 is index + 1)."""
        return int(self.value) - 54


class NonModal(enum.Enum):
    """Group 0: codes that act on their own line only."""

    DWELL = 4.0                  # G4 P
    SET_OFFSET = 10.0            # G10 L2/L20 P
    HOME = 28.0                  # G28
    OFFSET = 92.0                # G92
    CANCEL_OFFSET = 92.1         # G92.1


class ProgramStop(enum.Enum):
    """M group 4: stopping."""

    PAUSE = 0.0          # M0
    END = 2.0            # M2
    END_REWIND = 30.0    # M30


class ToolChange(enum.Enum):
    """M group 6: tool change."""

    CHANGE = 6.0         # M6 [T n]: mount the selected tool (a stop: the arm rests)


class SpindleMode(enum.Enum):
    """M group 7: the mounted tool's output (spindle, laser, pen, vacuum, gripper)."""

    CW = 3.0             # M3 [S]: on (spindle clockwise, laser constant power, pen down, suction, close)
    CCW = 4.0            # M4 [S]: on (spindle counter-clockwise; laser: power scaled with speed, off in G0)
    OFF = 5.0            # M5: off


class Coolant(enum.Enum):
    """M group 8: the auxiliary outputs (air, extraction)."""

    MIST = 7.0           # M7: auxiliary output 1 (mist, air assist)
    FLOOD = 8.0          # M8: auxiliary output 2 (flood, extraction)
    OFF = 9.0            # M9: both off


class DigitalOutput(enum.Enum):
    """LinuxCNC's digital outputs (P n): with the next motion, or at once."""

    ON_SYNC = 62.0       # M62 P: on when the next move starts
    OFF_SYNC = 63.0      # M63 P: off when the next move starts
    ON = 64.0            # M64 P: on now
    OFF = 65.0           # M65 P: off now


class PenServo(enum.Enum):
    """M300 S: a servo pen (Inkscape's pen-plotter writers), a dialect option."""

    SET = 300.0          # M300 S: S below the threshold puts the pen down, else up


#: the modal groups of G codes and their codes
G_GROUPS: dict[ModalGroup, type[enum.Enum]] = {
    ModalGroup.NONMODAL: NonModal, ModalGroup.MOTION: MotionMode, ModalGroup.PLANE: Plane,
    ModalGroup.DISTANCE: DistanceMode, ModalGroup.FEED_MODE: FeedMode, ModalGroup.UNITS: Units,
    ModalGroup.CUTTER: CutterComp, ModalGroup.LENGTH: ToolLengthOffset, ModalGroup.COORD: CoordSystem,
}
#: the modal groups of M codes and their codes
M_GROUPS: dict[ModalGroup, type[enum.Enum]] = {
    ModalGroup.STOP: ProgramStop, ModalGroup.TOOL_CHANGE: ToolChange, ModalGroup.SPINDLE: SpindleMode,
    ModalGroup.COOLANT: Coolant, ModalGroup.DIGITAL: DigitalOutput, ModalGroup.SERVO: PenServo,
}

#: G number -> its group's key (what the parser checks a line against: one code per group)
G_CODES: dict[float, str] = {m.value: grp.value for grp, codes in G_GROUPS.items() for m in codes}
#: M number -> its group's key
M_CODES: dict[float, str] = {m.value: grp.value for grp, codes in M_GROUPS.items() for m in codes}


@dataclass(frozen=True, slots=True)
class ModalState:
    """The active code of every modal group, and the feed rate.

    Attributes:
        motion: group 1 (:attr:`MotionMode.CANCEL` after G80).
        plane: group 2.
        distance: group 3.
        feed_mode: group 5.
        units: group 6.
        cutter: group 7.
        tool_length: group 8 (G43: the mounted tool's TCP is the controlled point; with T0 the flange).
        coord: group 12.
        feed: the feed rate, mm/min (converted from inch/min under G20), or None before the first F.
    """

    motion: MotionMode = MotionMode.RAPID
    plane: Plane = Plane.XY
    distance: DistanceMode = DistanceMode.ABSOLUTE
    feed_mode: FeedMode = FeedMode.UNITS_PER_MINUTE
    units: Units = Units.MM
    cutter: CutterComp = CutterComp.OFF
    tool_length: ToolLengthOffset = ToolLengthOffset.TOOL
    coord: CoordSystem = CoordSystem.G54
    feed: float | None = None


def _zeros() -> tuple[float, ...]:
    return (0.0,) * len(AXES)


@dataclass(frozen=True, slots=True, eq=False)
class MachineState:
    """The interpreter's whole state between two lines.

    Attributes:
        modal: the modal state.
        position: (6,) where the tool is, X Y Z in mm and A B C in degrees, machine coordinates
            relative to the work origin (base = origin + position).
        rotation: (3, 3) the tool orientation the last move left (the same object as long as it
            does not turn: the planner keys on identity).
        offsets: six (6,) work offsets, G54..G59 (G10), mm / deg.
        g92: (6,) the G92 offset, mm / deg.
        ended: line of the M2/M30 that ended the program, or 0.
        tool: the mounted tool's number (M6).
        selected: the tool the last T word selected (M6 mounts it).
        tcp: (4, 4) the controlled point in the flange frame, m (the identity: the flange). The
            ``position`` and ``rotation`` are the controlled point's.
        outputs: the tool and I/O outputs (:class:`~.outputs.OutputState`; None: all off).
    """

    modal: ModalState
    position: tuple[float, ...]
    rotation: np.ndarray
    offsets: tuple[tuple[float, ...], ...] = field(default_factory=lambda: (_zeros(),) * len(CoordSystem))
    g92: tuple[float, ...] = field(default_factory=_zeros)
    ended: int = 0
    tool: int = 0
    selected: int = 0
    tcp: np.ndarray = field(default_factory=lambda: FLANGE)
    outputs: "OutputState | None" = None

    def program_position(self) -> tuple[float, ...]:
        """(6,) the position in program coordinates of the active system (mm, deg)."""
        cs = self.offsets[self.modal.coord.index]
        return tuple(p - c - o for p, c, o in zip(self.position, cs, self.g92))
