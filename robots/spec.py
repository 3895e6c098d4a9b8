"""Frozen data classes that describe a robot, and builders from DH tables.

A robot is data: links (mass, shape, colour), joints (origin, axis, type, limits),
the reporting base frame, the flange (``tool0``) frame, named poses and the typed
geometry that the closed-form IK uses (:mod:`armtwin.controllers.ik.geometry`). The URDF files under
``robots/urdf/`` are generated from these specs (``python -m armtwin.robots.urdfgen``)
so that the analytic FK and the physics model cannot drift apart.

Units: metres, radians, kilograms, seconds; N·m for revolute efforts, N for prismatic.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping, TypeVar, get_args

import numpy as np

# ToolOrientation belongs to the IK geometry (the family fixes it); robots re-export it as data
from ..controllers.ik.geometry import IKGeometry, KinematicFamily, ToolOrientation
from ..controllers.transforms import matrix_to_rpy, rot_x, rot_z, rpy_to_matrix, transform
from .shapes import Shell

_T = TypeVar("_T")

URDF_DIR = Path(__file__).resolve().parent / "urdf"


class JointType(enum.Enum):
    """Kind of a moving joint."""

    REVOLUTE = "revolute"
    PRISMATIC = "prismatic"


@dataclass(frozen=True)
class Origin:
    """A fixed transform as URDF writes it: translation xyz (m) then rotation rpy (rad)."""

    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @staticmethod
    def from_matrix(t: np.ndarray) -> "Origin":
        """Origin of a (4, 4) transform; tiny round-off is snapped to zero."""
        xyz = tuple(float(v) if abs(v) > 1e-15 else 0.0 for v in t[:3, 3])
        rpy = tuple(float(v) if abs(v) > 1e-15 else 0.0 for v in matrix_to_rpy(t[:3, :3]))
        return Origin(xyz, rpy)  # type: ignore[arg-type]

    @property
    def matrix(self) -> np.ndarray:
        """(4, 4) homogeneous transform."""
        return transform(rpy_to_matrix(self.rpy), self.xyz)


@dataclass(frozen=True)
class Inertial:
    """Mass distribution of a link in its own (armtwin URDF) frame; the mass is :attr:`LinkSpec.mass`.

    Attributes:
        com: centre of mass, m, in the link frame.
        inertia: inertia tensor about the centre of mass in the link axes, kg·m², as URDF writes it:
            (ixx, ixy, ixz, iyy, iyz, izz); None: derived from the link's drawing shapes at uniform
            density (for a link whose published value is a placeholder; ``source`` says so).
        source: where the numbers come from (repository, file, link, transform) or how they were
            derived; written into the URDF next to them.

    Raises:
        ValueError: a non-finite value, or an inertia tensor that is not physically valid (not
            positive definite, or principal moments against the triangle inequality).
    """

    com: tuple[float, float, float]
    inertia: tuple[float, float, float, float, float, float] | None
    source: str

    def __post_init__(self) -> None:
        com = tuple(float(v) for v in self.com)
        if len(com) != 3 or not all(np.isfinite(com)):
            raise ValueError(f"Inertial.com must be three finite numbers (m), got {self.com}")
        object.__setattr__(self, "com", com)
        if self.inertia is not None:
            i6 = tuple(float(v) for v in self.inertia)
            if len(i6) != 6 or not all(np.isfinite(i6)):
                raise ValueError(f"Inertial.inertia must be six finite numbers (kg·m²), got {self.inertia}")
            object.__setattr__(self, "inertia", i6)
            check_inertia(self.tensor, self.source)

    @property
    def tensor(self) -> np.ndarray:
        """(3, 3) inertia tensor about the centre of mass, kg·m² (raises for a derived one)."""
        if self.inertia is None:
            raise ValueError(f"this inertia is derived from the drawing shapes ({self.source})")
        return inertia_matrix(self.inertia)


def inertia_matrix(i6) -> np.ndarray:
    """(3, 3) symmetric tensor of URDF's (ixx, ixy, ixz, iyy, iyz, izz), kg·m²."""
    xx, xy, xz, yy, yz, zz = (float(v) for v in i6)
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])


def inertia_tuple(m: np.ndarray) -> tuple[float, float, float, float, float, float]:
    """URDF's (ixx, ixy, ixz, iyy, iyz, izz) of a (3, 3) tensor (symmetrised), kg·m²."""
    m = 0.5 * (np.asarray(m, dtype=float) + np.asarray(m, dtype=float).T)
    return (float(m[0, 0]), float(m[0, 1]), float(m[0, 2]), float(m[1, 1]), float(m[1, 2]), float(m[2, 2]))


def check_inertia(m: np.ndarray, what: str = "") -> None:
    """ValueError unless ``m`` (3, 3) is a rigid body's inertia: symmetric, positive definite and
    its principal moments obey the triangle inequality (to 10⁻⁹ of the largest)."""
    m = np.asarray(m, dtype=float)
    where = f" ({what})" if what else ""
    if m.shape != (3, 3) or not np.allclose(m, m.T, rtol=0, atol=1e-15 + 1e-12 * np.abs(m).max()):
        raise ValueError(f"inertia tensor must be a symmetric 3x3 matrix{where}")
    a, b, c = np.linalg.eigvalsh(m)
    if a <= 0:
        raise ValueError(f"inertia tensor is not positive definite (principal moments {a:.3g}, {b:.3g}, {c:.3g}){where}")
    if a + b < c * (1 - 1e-9):
        raise ValueError(f"inertia tensor breaks the triangle inequality ({a:.3g} + {b:.3g} < {c:.3g}){where}")


@dataclass(frozen=True)
class LinkSpec:
    """One rigid link.

    Attributes:
        name: URDF link name.
        mass: kg.
        radius: m, radius of the primitive shapes that draw the link.
        color: RGBA, 0..1.
        path: points (m, link frame) that the link's body runs through, drawn as
            cylinders between consecutive points; empty: from the origin to the
            next joint's origin.
        housing: length (m) of the motor housing drawn along the joint axis at the
            link origin; 0 for none.
        accent: RGBA of the housing (default: ``color``).
        inertial: centre of mass and inertia in the link frame (a maker's published data,
            :mod:`armtwin.robots.reference`); None: both derived from the drawing shapes at
            uniform density (a plausible choice, not a fact).
        visual: the shells people see (:mod:`armtwin.robots.shapes`, in the root frame at the
            zero pose), written as meshes by :mod:`armtwin.robots.meshgen`; empty: the link is
            drawn with its primitives. Mass, inertia and collision never depend on them.
    """

    name: str
    mass: float
    radius: float
    color: tuple[float, float, float, float]
    path: tuple[tuple[float, float, float], ...] = ()
    housing: float = 0.0
    accent: tuple[float, float, float, float] | None = None
    inertial: Inertial | None = None
    visual: tuple[Shell, ...] = ()


@dataclass(frozen=True)
class JointSpec:
    """One moving joint between ``links[i]`` (parent) and ``links[i + 1]`` (child).

    Attributes:
        name: URDF joint name (``joint_1`` …).
        type: revolute or prismatic.
        origin: child link frame in the parent link frame at q = 0.
        axis: unit axis in the child frame.
        lower, upper: position limits, rad (revolute) or m (prismatic).
        velocity: max speed, rad/s or m/s.
        effort: max torque N·m (revolute) or force N (prismatic).
    """

    name: str
    type: JointType
    origin: Origin
    axis: tuple[float, float, float]
    lower: float
    upper: float
    velocity: float
    effort: float


@dataclass(frozen=True)
class DriveGains:
    """Joint drive data per robot (used by the hinge and articulation joint models).

    The per-joint tuples have one entry per joint. Override them per run with
    ``dataclasses.replace(spec.drive, stiffness=...)``.

    Attributes:
        stiffness: hinge model's explicit spring, N·m/rad (N/m for prismatic joints).
        damping: hinge model's explicit damper, N·m·s/rad (N·s/m).
        friction: Coulomb friction in the joint, N·m (N); modelled in the hinge model
            (an implicit velocity-zero motor limited to this force, PyBullet's way to
            model joint friction). The articulation drive's single motor row is the
            position drive, so there friction is not modelled separately.
        joint_damping: viscous damping in the joint itself, N·m·s/rad (N·s/m); applied
            by the engine in both dynamic models.
        position_gain: articulation model's implicit drive, PyBullet ``positionGain``
            (dimensionless: the fraction of the position error the drive removes per
            physics step; 0 < gain <= 1).
        velocity_gain: articulation model's implicit drive, PyBullet ``velocityGain``
            (dimensionless: the fraction of the velocity error removed per step).
        gravity_compensation: hinge model only: add the engine's gravity (and payload)
            torque at the measured joint positions to the spring torque (before the
            effort clamp). Off by default: the hinge model is the plain Unity-style spring.
        effort: force limits of the drives, N·m (N), one per joint, or None for the robot's
            rated efforts (``JointSpec.effort``, the URDF's). Both dynamic models clamp to them:
            the hinge spring's torque and the articulation drive's ``force``.
    """

    stiffness: tuple[float, ...]
    damping: tuple[float, ...]
    friction: tuple[float, ...]
    joint_damping: tuple[float, ...]
    position_gain: float = 0.3
    velocity_gain: float = 1.0
    gravity_compensation: bool = False
    effort: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        n = len(self.stiffness)
        if self.effort is not None:
            v = np.asarray(self.effort, dtype=float)
            if v.shape != (n,) or not np.all(np.isfinite(v) & (v > 0)):
                raise ValueError(f"DriveGains.effort needs {n} finite values > 0 (N·m / N), got {self.effort}")
        for name in ("damping", "friction", "joint_damping"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"DriveGains.{name} has {len(getattr(self, name))} values, stiffness has {n}")
        for name in ("stiffness", "damping", "friction", "joint_damping"):
            v = np.asarray(getattr(self, name), dtype=float)
            if not np.all(np.isfinite(v) & (v >= 0)):
                raise ValueError(f"DriveGains.{name} must be finite and >= 0, got {getattr(self, name)}")
        if not (0.0 < self.position_gain <= 2.0):
            raise ValueError(f"DriveGains.position_gain must be in (0, 2], got {self.position_gain}")
        if not (0.0 <= self.velocity_gain <= 2.0):
            raise ValueError(f"DriveGains.velocity_gain must be in [0, 2], got {self.velocity_gain}")


@dataclass(frozen=True)
class WorkCell:
    """How the robot runs G-code: where programs are placed and how fast the tool moves.

    Read by :func:`armtwin.controllers.gcode.machine_for`; a new robot brings its own values
    here instead of an entry in a table in the G-code code.

    Attributes:
        origin: default work origin (program X0 Y0 Z0 under G54 without offsets), m, in the
            robot's reporting base frame (``report_frame``); the work axes are parallel to the
            base axes. Chosen so that the example programs fit the workspace with the tool down.
        rapid_speed: tool speed of G0 moves, m/s (the preflight lowers it per move where a
            joint would exceed its speed limit).
        acceleration: tangential (and, on arcs, centripetal) tool acceleration limit, m/s².
    """

    origin: tuple[float, float, float]
    rapid_speed: float
    acceleration: float

    def __post_init__(self) -> None:
        o = tuple(float(v) for v in self.origin)
        if len(o) != 3 or not all(np.isfinite(o)):
            raise ValueError(f"WorkCell.origin must be three finite numbers (m), got {self.origin}")
        object.__setattr__(self, "origin", o)
        for name in ("rapid_speed", "acceleration"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
                raise ValueError(f"WorkCell.{name} must be a positive number, got {v!r}")


@dataclass(frozen=True)
class RobotSpec:
    """A robot as data. See the module docstring for units.

    Attributes:
        name: registry id (``scara``, ``irb120``, ``aubo_i5``).
        title: human name.
        maker: manufacturer (or "armtwin" for a generic model).
        reference: where the data come from.
        links: base link first, then one per joint; the flange ``tool0`` is added.
        joints: the moving joints in chain order.
        tool: flange (``tool0``) frame in the last link's frame.
        report_frame: the frame poses are reported in, in the root (mount) link's frame.
        payload: rated payload, kg.
        reach: horizontal reach of the wrist/tool, m.
        named_poses: name -> joint vector (rad / m).
        geometry: the closed-form IK's typed geometry (metres / radians); its type is the
            robot's kinematic family (:attr:`family`) and fixes :attr:`tool_orientation`.
        dh: the DH table as published (for documentation), or None.
        drive: default drive gains for the dynamic joint models.
        notes: free text.
        workcell: G-code work cell data (default work origin, rapid speed, tool
            acceleration), or None for a robot that cannot run G-code yet.
    """

    name: str
    title: str
    maker: str
    reference: str
    links: tuple[LinkSpec, ...]
    joints: tuple[JointSpec, ...]
    tool: Origin
    report_frame: Origin
    payload: float
    reach: float
    named_poses: Mapping[str, tuple[float, ...]]
    geometry: IKGeometry
    drive: DriveGains
    dh: Mapping[str, tuple[float, ...]] | None = None
    notes: str = ""
    workcell: WorkCell | None = None
    # values derived from this (frozen) spec, built once each: see derived()
    _derived: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.links) != len(self.joints) + 1:
            raise ValueError(f"{self.name}: need one link more than joints")
        n = len(self.joints)
        for pose, q in self.named_poses.items():
            if len(q) != n:
                raise ValueError(f"{self.name}: named pose {pose!r} has {len(q)} values, expected {n}")
        object.__setattr__(self, "named_poses", MappingProxyType(dict(self.named_poses)))
        if not isinstance(self.geometry, get_args(IKGeometry)):
            raise TypeError(f"{self.name}: geometry must be one of "
                            f"{', '.join(c.__name__ for c in get_args(IKGeometry))}, got {type(self.geometry).__name__}")
        if self.dh is not None:
            object.__setattr__(self, "dh", MappingProxyType(dict(self.dh)))

    def derived(self, build: Callable[[RobotSpec], _T]) -> _T:
        """A value derived from this spec, built by ``build(self)`` on first use and kept with it.

        For per-robot data that costs time to prepare and never changes, since the spec is
        frozen: the kinematic chain (:func:`armtwin.controllers.kinematics.chain_of`), the
        prepared IK (:func:`armtwin.controllers.ik.robot_ik`). ``build`` itself is the key, so
        two modules cannot collide. A spec made with ``dataclasses.replace`` starts empty.
        """
        cache = self._derived
        try:
            return cache[build]
        except KeyError:
            value = cache[build] = build(self)
            return value

    # ----- derived views -------------------------------------------------------------
    @property
    def family(self) -> KinematicFamily:
        """The closed-form IK family (from the type of :attr:`geometry`)."""
        return self.geometry.family

    @property
    def tool_orientation(self) -> ToolOrientation:
        """Which tool orientations the arm reaches (from the type of :attr:`geometry`)."""
        return self.geometry.tool_orientation

    @property
    def roll_only(self) -> bool:
        """True when only the tool roll about base z is free (:attr:`ToolOrientation.ROLL`)."""
        return self.geometry.tool_orientation is ToolOrientation.ROLL

    @property
    def dof(self) -> int:
        """Number of moving joints."""
        return len(self.joints)

    @property
    def urdf_path(self) -> Path:
        """Path of the generated URDF file."""
        return URDF_DIR / f"{self.name}.urdf"

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def joint_types(self) -> tuple[JointType, ...]:
        return tuple(j.type for j in self.joints)

    @property
    def prismatic(self) -> np.ndarray:
        """(n,) bool: which joints are prismatic."""
        return np.array([j.type is JointType.PRISMATIC for j in self.joints])

    @property
    def lower(self) -> np.ndarray:
        """(n,) lower position limits, rad / m."""
        return np.array([j.lower for j in self.joints])

    @property
    def upper(self) -> np.ndarray:
        """(n,) upper position limits, rad / m."""
        return np.array([j.upper for j in self.joints])

    @property
    def max_velocity(self) -> np.ndarray:
        """(n,) speed limits, rad/s / m/s."""
        return np.array([j.velocity for j in self.joints])

    @property
    def max_effort(self) -> np.ndarray:
        """(n,) effort limits, N·m / N."""
        return np.array([j.effort for j in self.joints])

    def pose(self, name: str) -> np.ndarray:
        """Named joint vector (rad / m)."""
        try:
            return np.array(self.named_poses[name], dtype=float)
        except KeyError:
            raise KeyError(f"{self.name} has no pose {name!r}; known: {', '.join(self.named_poses)}") from None

    @property
    def home(self) -> np.ndarray:
        return self.pose("home")

    def within_limits(self, q, tol: float = 1e-9) -> np.ndarray:
        """Bool per joint vector: all joints inside their ranges (batch-aware)."""
        q = np.asarray(q, dtype=float)
        return np.all((q >= self.lower - tol) & (q <= self.upper + tol), axis=-1)

    # Units at the edge: joints shown to people in degrees, prismatic ones in mm.
    def to_display(self, q) -> np.ndarray:
        """Joint values in display units (deg, mm for prismatic joints)."""
        q = np.asarray(q, dtype=float)
        return np.where(self.prismatic, q * 1000.0, np.degrees(q))

    def from_display(self, v) -> np.ndarray:
        """Joint values from display units (deg, mm for prismatic joints) to SI."""
        v = np.asarray(v, dtype=float)
        return np.where(self.prismatic, v / 1000.0, np.radians(v))

    def display_units(self) -> tuple[str, ...]:
        return tuple("mm" if p else "deg" for p in self.prismatic)


# ----- builders ------------------------------------------------------------------------

def dh_standard_origins(a, alpha, d, offset) -> tuple[list[Origin], Origin]:
    """Joint origins and flange frame of a standard (distal) DH table.

    Link i's URDF frame is placed at DH frame i-1 turned by theta_offset_i about z,
    so that the URDF joint rotates about its own z and q = 0 gives theta = offset.

    Args:
        a, d: metres; alpha, offset: radians; one entry per joint.

    Returns:
        (origins, tool): joint origins in the parent link frame, and the flange frame
        (DH frame n) in the last link frame.
    """
    origins = []
    prev = np.eye(4)
    for i in range(len(a)):
        t = prev @ transform(rot_z(offset[i]))
        origins.append(Origin.from_matrix(t))
        prev = transform(None, (0, 0, d[i])) @ transform(None, (a[i], 0, 0)) @ transform(rot_x(alpha[i]))
    return origins, Origin.from_matrix(prev)


def dh_modified_origins(a, alpha, d, offset) -> tuple[list[Origin], Origin]:
    """Joint origins of a modified (Craig, proximal) DH table; the flange is DH frame n.

    ``a[i]``, ``alpha[i]`` are a_{i-1}, alpha_{i-1} as tables usually list them.
    """
    origins = []
    for i in range(len(a)):
        t = transform(rot_x(alpha[i])) @ transform(None, (a[i], 0, 0)) @ transform(None, (0, 0, d[i])) @ transform(rot_z(offset[i]))
        origins.append(Origin.from_matrix(t))
    return origins, Origin()


def revolute_joints(origins, lower_deg, upper_deg, speed_deg_s, effort_nm) -> list[JointSpec]:
    """Revolute joints about their z axes from per-joint tables in degrees."""
    return [
        JointSpec(f"joint_{i + 1}", JointType.REVOLUTE, o, (0.0, 0.0, 1.0), float(np.radians(lo)),
                  float(np.radians(hi)), float(np.radians(v)), float(e))
        for i, (o, lo, hi, v, e) in enumerate(zip(origins, lower_deg, upper_deg, speed_deg_s, effort_nm))
    ]
