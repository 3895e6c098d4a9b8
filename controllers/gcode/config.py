"""Machine settings for G-code: work origin, speeds, accelerations, tolerances.

The G-code "machine" of a robot arm is its flange moving in the robot's base frame. Program
coordinates are placed in that frame by the **work origin** (a translation; the work axes are
parallel to the base axes): base = origin + work-offset (G54–G59, G92) + program coordinate.
The per-robot values (default work origin, rapid speed, tool acceleration) are data of the
robot (:class:`~armtwin.robots.spec.WorkCell`, ``RobotSpec.workcell``); this module holds no
table of robots. ``--origin X Y Z`` (mm) moves the origin.

Units: metres, seconds, radians inside; every field says its unit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..tools import ToolTable, default_tools

__all__ = ["MachineConfig", "machine_for", "MAX_TARGET_DISTANCE", "MAX_PATH_SAMPLES"]

#: targets (and arc points, and the work origin) farther than this from the robot base are
#: absurd for an arm, m
MAX_TARGET_DISTANCE = 10.0
#: default cap on the interpolation points of one program (arc chords + preflight IK samples +
#: one per block). A check needs at most about 380 bytes per point at its peak (planning, IK,
#: limits; measured: chords ~250 B, IK samples ~330 B, 0.01 mm G1 lines ~370 B per point), so
#: 2,000,000 points keep the worst program under about 0.75 GB (1 GB with a 200 MB file read in).
#: The 100,000-line ``armtwin bench gcode`` program needs about 1.23 million.
MAX_PATH_SAMPLES = 2_000_000


@dataclass(frozen=True)
class MachineConfig:
    """How G-code maps onto a robot and how motion is timed.

    Attributes:
        origin: work origin (program X0 Y0 Z0 under G54 with no offsets) in the base frame, m.
        rapid_speed: tool speed of G0 moves, m/s (lowered per move where a joint would exceed
            its speed limit).
        acceleration: tangential tool acceleration limit, m/s² (also the limit for the
            centripetal acceleration on arcs).
        junction_deviation: grbl's junction deviation, m: how far the tool may (virtually) cut
            a corner; sets the speed at which a corner is taken.
        arc_tolerance: largest distance between an arc and its chords, m.
        control_period: time between two commanded samples of the trajectory, s.
        sample_spacing: largest tool travel between two IK samples of the preflight, m.
        rotation_scale: distance that one radian of tool rotation counts as when timing moves
            that turn the tool, m/rad (grbl counts a degree of a rotary axis like a millimetre:
            0.180/π ≈ 0.0573 m/rad).
        singularity_margin: the preflight warns where the scaled Jacobian's smallest singular
            value falls below this (dimensionless; 1 is far from singular).
        max_rapid_slowdown_passes: rounds of re-timing G0 moves that were too fast for a joint.
        max_dwell: longest accepted G4 dwell, s (longer: fault 37).
        max_program_time: longest accepted planned program time (moves and dwells), s
            (longer: fault 105). Bounds what a run can be asked to simulate and log.
        max_path_samples: most interpolation points of a program: arc chords plus preflight
            IK samples (``sample_spacing`` apart), counted per move as the program is read
            (more: fault 105 at the line that passes it, and nothing after it is planned).
            Bounds the memory of planning and checking whatever the input (see
            :data:`MAX_PATH_SAMPLES`).
        optional_stop: the optional stop switch: M1 pauses like M0 when on, does nothing (a note)
            when off (``--optional-stop``).
        tools: the tool table (``--tools FILE``; default the built-in
            :func:`~armtwin.controllers.tools.default_tools`).
        tool: the tool mounted when the program starts (its TCP is the controlled point until
            an M6 or G43/G49 says otherwise); 0: the bare flange.
        pen_servo: the M300 S (servo pen) dialect option.
        dwell_ms: the ``--dwell-ms`` dialect option: G4 P is in milliseconds (Inkscape-style
            writers), not seconds.
        long_dwell: a G4 dwell longer than this is a warning naming its line, s (LONG_DWELL, 107:
            usually P meant in milliseconds and read as seconds).
    """

    origin: tuple[float, float, float]
    rapid_speed: float = 0.5
    acceleration: float = 2.0
    junction_deviation: float = 1.0e-5
    arc_tolerance: float = 5.0e-6
    control_period: float = 0.004
    sample_spacing: float = 0.005
    rotation_scale: float = 0.180 / math.pi
    singularity_margin: float = 0.02
    max_rapid_slowdown_passes: int = 4
    max_dwell: float = 3600.0
    max_program_time: float = 86400.0
    max_path_samples: int = MAX_PATH_SAMPLES
    optional_stop: bool = False
    tools: ToolTable = field(default_factory=default_tools, compare=False)
    tool: int = 0
    pen_servo: bool = False
    dwell_ms: bool = False
    long_dwell: float = 10.0

    def __post_init__(self) -> None:
        o = tuple(float(v) for v in self.origin)
        if len(o) != 3 or not all(math.isfinite(v) for v in o):
            raise ValueError(f"origin must be three finite numbers (m), got {self.origin}")
        d = math.hypot(*o)
        if not d <= MAX_TARGET_DISTANCE:
            raise ValueError(f"origin ({', '.join(f'{v:g}' for v in o)}) m is {d:.6g} m from the robot base; "
                             f"at most {MAX_TARGET_DISTANCE:g} m")
        object.__setattr__(self, "origin", o)
        if not isinstance(self.tools, ToolTable):
            raise ValueError(f"tools must be a ToolTable, got {type(self.tools).__name__}")
        if isinstance(self.tool, bool) or not isinstance(self.tool, (int, np.integer)) or self.tool not in self.tools:
            raise ValueError(f"tool {self.tool!r} is not in the tool table ({self.tools.source}: "
                             f"T{', T'.join(str(n) for n in self.tools)})")
        n = self.max_path_samples
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"max_path_samples must be a positive whole number, got {n!r}")
        for name in ("rapid_speed", "acceleration", "junction_deviation", "arc_tolerance", "control_period",
                     "sample_spacing", "rotation_scale", "singularity_margin", "max_dwell", "max_program_time",
                     "long_dwell"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive number, got {v!r}")

    @property
    def start_tool(self):
        """The :class:`~armtwin.controllers.tools.Tool` mounted at the start."""
        return self.tools[int(self.tool)]

    @property
    def origin_array(self) -> np.ndarray:
        """(3,) origin, m."""
        return np.array(self.origin)

    def with_origin_mm(self, xyz_mm) -> "MachineConfig":
        """A copy with the work origin at ``xyz_mm`` (3 numbers, mm, base frame)."""
        v = [float(a) for a in xyz_mm]
        if len(v) != 3 or not all(math.isfinite(a) for a in v):
            raise ValueError(f"origin needs three finite numbers (mm), got {xyz_mm}")
        d = math.hypot(*v)
        if not d <= MAX_TARGET_DISTANCE * 1000.0:
            raise ValueError(f"origin ({', '.join(f'{a:g}' for a in v)}) mm is {d:.6g} mm from the robot base; "
                             f"at most {MAX_TARGET_DISTANCE * 1000:g} mm")
        return replace(self, origin=(v[0] / 1000.0, v[1] / 1000.0, v[2] / 1000.0))


def machine_for(spec, origin_mm=None, **overrides) -> MachineConfig:
    """The default :class:`MachineConfig` of a robot, from its ``spec.workcell`` data.

    Args:
        spec: the robot (a :class:`~armtwin.robots.spec.RobotSpec` with a ``workcell``).
        origin_mm: work origin, (3,) mm in the robot's reporting base frame; default
            ``spec.workcell.origin``.
        **overrides: any other :class:`MachineConfig` field (e.g. ``rapid_speed`` in m/s).

    Raises:
        ValueError: the robot has no work cell data, or a value is invalid.
    """
    cell = getattr(spec, "workcell", None)
    if cell is None:
        raise ValueError(f"robot {spec.name!r} has no G-code work cell data (RobotSpec.workcell: "
                         f"default work origin, rapid speed, acceleration)")
    kw = {"rapid_speed": cell.rapid_speed, "acceleration": cell.acceleration}
    kw.update(overrides)
    machine = MachineConfig(origin=cell.origin, **kw)
    return machine if origin_mm is None else machine.with_origin_mm(origin_mm)
