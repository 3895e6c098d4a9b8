"""A cell's workpieces during a program run: the vacuum cup the program switches, and where they end.

:class:`RunWorkpieces` is the piece of ``armtwin run`` that acts on objects. Given the world, the
robot, the cell placed in it and the program's output timeline, it makes a
:class:`~armtwin.envs.gripper.VacuumGripper` over the cell's movable bodies when the robot
carries a vacuum tool (``T4 M6`` in the built-in table, or ``--tool 4``) — or a
:class:`~armtwin.envs.gripper.ParallelGripper` whose jaws close on them for a gripper tool (T5;
the robot is then loaded without drawn jaws: :func:`simulated_jaws`) — and each control step
(:meth:`RunWorkpieces.update`) switches the suction as the program's tool output says: M3/M4 on,
M5 off (:meth:`~armtwin.controllers.gcode.outputs.OutputTimeline.grips`: the mounted tool's
kind grips and its output is on). Every grip, release and drop is a :class:`PieceEvent` with the
program line that switched the suction; at the end :meth:`RunWorkpieces.ends` gives each
workpiece's pose and, when the cell gives it a ``target``, how far from it the piece ended.

Without a vacuum tool or without movable bodies it only reports where the pieces are (they
fall and rest under the physics, or are pushed by the arm in the dynamic joint models).

Only the :class:`~armtwin.envs.sim.World` facade is used (no PyBullet). Units: SI inside; the
reports (:meth:`PieceEvent.to_dict`, :meth:`PieceEnd.to_dict`) are in mm and degrees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..controllers.gcode.outputs import OutputTimeline
from ..controllers.tools import ToolKind
from ..controllers.transforms import matrix_to_rpy, rotation_angle
from .gripper import GripEvent, GripKind, ParallelGripper, VacuumGripper
from .sim import SimRobot, World
from .workcell import PlacedCell

__all__ = ["PieceEvent", "PieceEnd", "RunWorkpieces", "simulated_jaws"]


def simulated_jaws(tool) -> bool:
    """A run in a cell moves this tool's jaws as bodies of their own (a gripper): load the robot
    with ``jaws=False``."""
    return tool is not None and tool.kind is ToolKind.GRIPPER


def _pose_mm_deg(T: np.ndarray) -> tuple[list[float], list[float]]:
    """(xyz mm, rpy deg) of a pose, rounded for reports."""
    return ([round(float(v) * 1000.0, 3) for v in T[:3, 3]],
            [round(float(v), 3) for v in np.degrees(matrix_to_rpy(T[:3, :3]))])


@dataclass(frozen=True)
class PieceEvent:
    """A :class:`~armtwin.envs.gripper.GripEvent` in a run, with the program line behind it.

    Attributes:
        event: the gripper's event (kind, piece, world time s, world pose m).
        line: the program line that switched the suction (a drop: the line running then).
        time: the program time of the control step, s (the log's ``time_s``; the world's clock
            has run one step further).
    """

    event: GripEvent
    line: int
    time: float

    def to_dict(self) -> dict:
        """The event for ``--json``: kind, line, piece, time s, pose (xyz mm, rpy deg)."""
        xyz, rpy = _pose_mm_deg(self.event.pose)
        return {"kind": self.event.kind.value, "line": self.line, "piece": self.event.part,
                "time": round(self.time, 4), "xyz_mm": xyz, "rpy_deg": rpy}

    def text(self) -> str:
        """One report line."""
        xyz, rpy = _pose_mm_deg(self.event.pose)
        return (f"{self.event.kind.value.upper()} {self.event.part} at line {self.line}, t = {self.time:.3f} s: "
                f"at ({', '.join(f'{v:.1f}' for v in xyz)}) mm, rpy ({', '.join(f'{v:.1f}' for v in rpy)})°")


@dataclass(frozen=True)
class PieceEnd:
    """Where a workpiece ended.

    Attributes:
        piece: its name.
        pose: (4, 4) its pose in the world, m.
        target: (4, 4) the cell's target for it, or None.
    """

    piece: str
    pose: np.ndarray
    target: np.ndarray | None = None

    @property
    def offset_mm(self) -> float:
        """Distance from the target, mm (NaN without a target)."""
        if self.target is None:
            return math.nan
        return float(np.linalg.norm(self.pose[:3, 3] - self.target[:3, 3])) * 1000.0

    @property
    def angle_deg(self) -> float:
        """The rotation from the target's orientation to the piece's, deg (NaN without a target)."""
        if self.target is None:
            return math.nan
        return math.degrees(float(rotation_angle(self.target[:3, :3], self.pose[:3, :3])))

    def to_dict(self) -> dict:
        """For ``--json``: piece, xyz mm, rpy deg, and with a target its offset mm and angle deg."""
        xyz, rpy = _pose_mm_deg(self.pose)
        out: dict = {"piece": self.piece, "xyz_mm": xyz, "rpy_deg": rpy}
        if self.target is not None:
            txyz, trpy = _pose_mm_deg(self.target)
            out.update(target_xyz_mm=txyz, target_rpy_deg=trpy, offset_mm=round(self.offset_mm, 3),
                       angle_deg=round(self.angle_deg, 3))
        return out

    def text(self) -> str:
        """One report line."""
        xyz, rpy = _pose_mm_deg(self.pose)
        where = (f"{self.piece} ended at ({', '.join(f'{v:.1f}' for v in xyz)}) mm, "
                 f"rpy ({', '.join(f'{v:.1f}' for v in rpy)})°")
        if self.target is None:
            return where
        return where + f": {self.offset_mm:.2f} mm and {self.angle_deg:.2f}° from its target"


class RunWorkpieces:
    """The movable bodies of a placed cell during a run (see the module docstring).

    Args:
        world: the run's world.
        robot: the robot (its ``tool`` decides whether there is a gripper).
        placed: the cell in the world (:func:`~armtwin.envs.workcell.place_cell`).
        outputs: the program's output timeline, or None (no outputs: the suction stays off).
    """

    def __init__(self, world: World, robot: SimRobot, placed: PlacedCell, outputs: OutputTimeline | None) -> None:
        self.world, self.outputs = world, outputs
        movable = [b for b in placed.cell.bodies if b.mass > 0]
        self.parts = {b.name: placed.bodies[b.name] for b in movable}
        self.targets = {b.name: b.target for b in movable}
        kind = robot.tool.kind if robot.tool is not None else ToolKind.NONE
        self.gripper: VacuumGripper | ParallelGripper | None = None
        if kind is ToolKind.VACUUM and self.parts and outputs:
            self.gripper = VacuumGripper(world, robot, self.parts)
        elif kind is ToolKind.GRIPPER and outputs:      # its jaws move (open/close) with or without pieces
            self.gripper = ParallelGripper(world, robot, self.parts, ideal=placed.static_work)
        self.events: list[PieceEvent] = []

    @property
    def held(self) -> str:
        """The name of the piece held now, "" for none (the run log's ``held`` column)."""
        return (self.gripper.held or "") if self.gripper is not None else ""

    def update(self, t: float, line: int) -> PieceEvent | None:
        """One control step at ``t`` s (after the world's step), ``line`` the program line running:
        switch the suction as the program's output says; returns the event it caused, if any."""
        if self.gripper is None or self.outputs is None:
            return None
        i = max(int(self.outputs.index_at(t)), 0)
        event = self.gripper.update(self.outputs.grips(t))
        if event is None:
            return None
        out = PieceEvent(event, line if event.kind is GripKind.DROP else int(self.outputs.lines[i]) or line, t)
        self.events.append(out)
        return out

    def ends(self) -> tuple[PieceEnd, ...]:
        """Every workpiece's pose now, with its target."""
        return tuple(PieceEnd(name, self.world.body_pose(body), self.targets[name])
                     for name, body in self.parts.items())
