"""Typed kinematic geometry of each closed-form IK family (frozen dataclasses, metres and radians).

A robot's data module builds one of these and the :class:`~armtwin.robots.RobotSpec` carries it
as ``spec.geometry``; the IK picks its solver from the geometry's type. A misspelt or missing
parameter fails when the object is built (``TypeError``), a non-finite or impossible value with
a ``ValueError`` naming the field; a geometry that does not fit the robot's chain fails when its
solver is first built (the solver is checked against the forward kinematics).

The geometry also answers what the family implies for everyone else: :attr:`family` (which
solver) and :attr:`tool_orientation` (which tool orientations the arm reaches), read through
``spec.family`` and ``spec.tool_orientation`` / ``spec.roll_only``.

* :class:`SphericalWristGeometry` — 6R arm with a spherical wrist, standard DH (ABB IRB120);
* :class:`OffsetWristGeometry` — 6R arm with a UR-like offset wrist, modified DH (AUBO-i5);
* :class:`ScaraGeometry` — RRPR SCARA (the 600 mm SCARA).
"""
# mypy: disallow-untyped-defs, check-untyped-defs

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, fields
from typing import ClassVar, Union

__all__ = [
    "IKGeometry",
    "KinematicFamily",
    "OffsetWristGeometry",
    "ScaraGeometry",
    "SphericalWristGeometry",
    "ToolOrientation",
]


class ToolOrientation(enum.Enum):
    """Which tool orientations a robot can reach.

    FULL: any orientation (6-axis arms). ROLL: the tool points down and only its roll about
    the base z axis is free (SCARA); tools, IK inputs and goals then carry one angle.
    """

    FULL = "full"
    ROLL = "roll"


class KinematicFamily(enum.Enum):
    """The closed-form IK family of a robot (``spec.family``)."""

    SPHERICAL_WRIST = "spherical_wrist"
    OFFSET_WRIST = "offset_wrist"
    SCARA = "scara"


def _check(geometry: object, positive: tuple[str, ...] = ()) -> None:
    """Every float field finite (``positive``: also > 0), ``offsets`` six finite angles."""
    name = type(geometry).__name__
    for f in fields(geometry):  # type: ignore[arg-type]
        v = getattr(geometry, f.name)
        if f.name == "offsets":
            if len(v) != 6 or not all(isinstance(o, (int, float)) and math.isfinite(o) for o in v):
                raise ValueError(f"{name}.offsets must be 6 finite DH theta offsets (rad), got {v!r}")
            object.__setattr__(geometry, "offsets", tuple(float(o) for o in v))
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{name}.{f.name} must be a finite length in metres, got {v!r}")
        if f.name in positive and not v > 0.0:
            raise ValueError(f"{name}.{f.name} must be > 0 m, got {v!r}")
        object.__setattr__(geometry, f.name, float(v))


@dataclass(frozen=True)
class SphericalWristGeometry:
    """6R arm with a spherical wrist (IRB120 layout), standard DH.

    alpha = (-90, 0, -90, 90, -90, 0) deg, a = (0, a2, a3, 0, 0, 0), d = (d1, 0, 0, d4, 0, d6);
    DH row i turns by ``theta_i = q_i + offsets[i]``.

    Attributes:
        d1: base to the J2 axis, m.
        a2: upper arm (J2 to J3 axis), m.
        a3: elbow offset, m.
        d4: forearm (J3 axis to the wrist centre), m.
        d6: wrist centre to the flange, m.
        offsets: (6,) DH theta offsets, rad.
    """

    family: ClassVar[KinematicFamily] = KinematicFamily.SPHERICAL_WRIST
    tool_orientation: ClassVar[ToolOrientation] = ToolOrientation.FULL

    d1: float
    a2: float
    a3: float
    d4: float
    d6: float
    offsets: tuple[float, ...]

    def __post_init__(self) -> None:
        _check(self, positive=("a2",))
        if math.hypot(self.a3, self.d4) <= 0.0:
            raise ValueError("SphericalWristGeometry: a3 and d4 cannot both be 0 (no forearm)")


@dataclass(frozen=True)
class OffsetWristGeometry:
    """6R arm with a UR-like offset wrist (AUBO-i5 layout), modified (Craig) DH.

    alpha_{i-1} = (0, -90, 180, 180, -90, 90) deg, a_{i-1} = (0, 0, a2, a3, 0, 0),
    d = (d1, d2, 0, 0, d5, d6); ``theta_i = q_i + offsets[i]``. J2, J3, J4 are parallel; the arm
    plane sits d2 beside the J1 axis.

    Attributes:
        d1: base frame to the J2 axis, m.
        d2: shoulder offset (arm plane beside the J1 axis), m.
        a2: upper arm, m.
        a3: forearm, m.
        d5: J4 axis to the J5 centre, m.
        d6: J5 centre to the flange, m.
        offsets: (6,) DH theta offsets, rad.
    """

    family: ClassVar[KinematicFamily] = KinematicFamily.OFFSET_WRIST
    tool_orientation: ClassVar[ToolOrientation] = ToolOrientation.FULL

    d1: float
    d2: float
    a2: float
    a3: float
    d5: float
    d6: float
    offsets: tuple[float, ...]

    def __post_init__(self) -> None:
        _check(self, positive=("a2", "a3"))


@dataclass(frozen=True)
class ScaraGeometry:
    """RRPR SCARA: J1, J2 and J4 about z, J3 moves the quill down (flange z = z0 - q3).

    Attributes:
        l1: arm 1 (J1 to J2 axis), m.
        l2: arm 2 (J2 to the J4 axis), m.
        z0: flange height at J3 = 0 in the base frame, m.
    """

    family: ClassVar[KinematicFamily] = KinematicFamily.SCARA
    tool_orientation: ClassVar[ToolOrientation] = ToolOrientation.ROLL

    l1: float
    l2: float
    z0: float

    def __post_init__(self) -> None:
        _check(self, positive=("l1", "l2"))


#: the geometry a :class:`~armtwin.robots.RobotSpec` carries
IKGeometry = Union[SphericalWristGeometry, OffsetWristGeometry, ScaraGeometry]
