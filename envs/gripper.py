"""A vacuum gripper in the physics world: switched on, it holds the workpiece its cup touches.

:class:`VacuumGripper` watches a robot's tool (a :class:`~armtwin.controllers.tools.Tool` of kind
VACUUM on the flange) and the movable bodies of its cell. Call :meth:`VacuumGripper.update` once
per control step with whether the suction is on (in ``armtwin run`` the program's M3/M5,
through :class:`~armtwin.envs.workpieces.RunWorkpieces`): when it is switched on with a workpiece within :attr:`reach` of the
cup, the piece is fixed to the tool where it is (:meth:`World.attach`, a constraint that pulls
with at most :attr:`max_force`); switched off, it is let go and falls or rests where the physics
puts it. A piece that the constraint cannot keep — too heavy, moved too fast — slips: when it
has moved more than :attr:`slip` from where it was gripped, the gripper lets go and reports a
DROP. In the kinematic joint model the grip is ideal (the arm has no forces to feel a load
with): the piece is carried exactly with the tool and never drops; in the hinge and articulation
models its mass acts on the arm through the constraint. Every change is a :class:`GripEvent` for the run report and the log.

Only the :class:`~armtwin.envs.sim.World` facade is used (no PyBullet). Units: m, N, s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..controllers.choices import Choice
from ..controllers.tools import ToolKind
from .sim import JointMode, SimRobot, World

__all__ = ["GripKind", "GripEvent", "VacuumGripper", "GRIP_REACH"]

#: a cup switched on grips a workpiece at most this far from it, m
GRIP_REACH = 0.002


class GripKind(Choice):
    """What happened to a workpiece."""

    __label__ = "grip event"

    GRIP = "grip"          # suction on, a piece at the cup: held
    RELEASE = "release"    # suction off: let go
    DROP = "drop"          # the piece slipped off (too heavy or too fast for the cup)


@dataclass(frozen=True)
class GripEvent:
    """One change of what the gripper holds.

    Attributes:
        kind: :class:`GripKind`.
        part: the workpiece's name.
        time: world time, s.
        pose: (4, 4) the piece's pose in the world then, m.
    """

    kind: GripKind
    part: str
    time: float
    pose: np.ndarray


class VacuumGripper:
    """Suction on a robot's vacuum tool (see the module docstring).

    Args:
        world: the world.
        robot: a robot carrying a VACUUM tool (``World.add_robot(tool=...)``).
        parts: the movable workpieces by name: their body ids (e.g. the movable bodies of
            :func:`~armtwin.envs.workcell.place_cell`).
        reach: the cup grips a piece at most this far from it, m.
        max_force: the most the suction pulls with, N (a 30 mm cup at −0.6 bar: about 40 N).
        slip: a held piece that moved this far from where it was gripped has dropped, m.

    Raises:
        ValueError: the robot's tool is not a vacuum gripper, or a setting is out of range.
    """

    def __init__(self, world: World, robot: SimRobot, parts: dict[str, int], *, reach: float = GRIP_REACH,
                 max_force: float = 40.0, slip: float = 0.005) -> None:
        if robot.tool is None or robot.tool.kind is not ToolKind.VACUUM:
            raise ValueError("a vacuum gripper needs a robot with a vacuum tool on its flange")
        for name, v, lo, hi in (("reach", reach, 0.0, 0.05), ("max_force", max_force, 0.0, 1e4),
                                ("slip", slip, 1e-4, 0.1)):
            if not (np.isfinite(v) and lo <= v <= hi):
                raise ValueError(f"{name} must be {lo:g} to {hi:g}, got {v!r}")
        self.world, self.robot, self.parts = world, robot, dict(parts)
        self.reach, self.max_force, self.slip = reach, max_force, slip
        self._cup = robot.link_index.get("tool", robot.tcp_link)
        self._on = False
        self._held: str | None = None
        self._constraint = -1
        self._grip_rel: np.ndarray | None = None      # the piece in the TCP frame when gripped
        self.events: list[GripEvent] = []

    @property
    def held(self) -> str | None:
        """The name of the piece held now, or None."""
        return self._held

    def _tcp_world(self) -> np.ndarray:
        return self.robot.world_T_report @ self.robot.tcp_pose()

    def update(self, on: bool) -> GripEvent | None:
        """One control step with the suction ``on`` or off; returns the change it made, if any.

        Switching on grips the nearest piece within :attr:`reach` (nothing there: it stays on and
        grips nothing — a real cup does not grip later either until switched again)."""
        event = None
        if self._held is not None and self.robot.mode is JointMode.KINEMATIC and self._grip_rel is not None:
            self.world.set_body_pose(self.parts[self._held], self._tcp_world() @ self._grip_rel, still=True)
        if on and not self._on:
            event = self._grip()
        elif not on and self._on and self._held is not None:
            event = self._let_go(GripKind.RELEASE)
        elif on and self._held is not None and self._slipped():
            event = self._let_go(GripKind.DROP)
        self._on = bool(on)
        if event is not None:
            self.events.append(event)
        return event

    def _grip(self) -> GripEvent | None:
        best, dist = None, self.reach
        for name, body in self.parts.items():
            d = self.world.distance(self.robot.body, body, self.reach + 1e-3, link_a=self._cup)
            if d <= dist:
                best, dist = name, d
        if best is None:
            return None
        body = self.parts[best]
        if self.robot.mode is not JointMode.KINEMATIC:
            self._constraint = self.world.attach(self.robot, self._cup, body, self.max_force)
        self._held = best
        pose = self.world.body_pose(body)
        self._grip_rel = np.linalg.inv(self._tcp_world()) @ pose
        return GripEvent(GripKind.GRIP, best, self.world.time, pose)

    def _slipped(self) -> bool:
        assert self._held is not None and self._grip_rel is not None
        now = np.linalg.inv(self._tcp_world()) @ self.world.body_pose(self.parts[self._held])
        return float(np.linalg.norm(now[:3, 3] - self._grip_rel[:3, 3])) > self.slip

    def _let_go(self, kind: GripKind) -> GripEvent:
        assert self._held is not None
        if self._constraint >= 0:
            self.world.detach(self._constraint)
        name, self._held, self._constraint, self._grip_rel = self._held, None, -1, None
        return GripEvent(kind, name, self.world.time, self.world.body_pose(self.parts[name]))
