"""Grippers in the physics world: a vacuum cup that holds the workpiece it touches when switched
on, and a parallel gripper whose fingers close on a workpiece and hold it by friction.

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

:class:`ParallelGripper` works a GRIPPER tool's two jaws as bodies of their own (the robot is
loaded without drawn jaws, ``World.add_robot(..., jaws=False)``): fixed to the tool by a stiff
constraint, each jaw slides on a prismatic joint along the flange's x axis, driven by a motor
that pushes with at most :attr:`ParallelGripper.force`. Switched on (M3, or the tool's digital
output) they close; when both touch the same workpiece it is gripped — held only by the jaws'
friction in the hinge and articulation models (its weight and inertia act on the arm; a piece too
heavy for the grip force slides out: a DROP), carried ideally with the tool in the kinematic one.
Switched off they open and let go.

Only the :class:`~armtwin.envs.sim.World` facade is used (no PyBullet). Units: m, N, s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..controllers.choices import Choice
from ..controllers.tools import ToolKind
from .sim import JointMode, SimRobot, World

__all__ = ["GripKind", "GripEvent", "VacuumGripper", "ParallelGripper", "GRIP_REACH"]

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


class _Gripper:
    """What both grippers share: the pieces, what is held and where it was gripped, the ideal carry
    of the kinematic model, the events, and the order of a step's decision (:meth:`_switch`)."""

    def __init__(self, world: World, robot: SimRobot, parts: dict[str, int], slip: float) -> None:
        self.world, self.robot, self.parts, self.slip = world, robot, dict(parts), slip
        self._on = False
        self._held: str | None = None
        self._grip_rel: np.ndarray | None = None      # the piece in the TCP frame when gripped
        self.events: list[GripEvent] = []

    @property
    def held(self) -> str | None:
        """The name of the piece held now, or None."""
        return self._held

    def _tcp_world(self) -> np.ndarray:
        return self.robot.world_T_report @ self.robot.tcp_pose()

    def _carry(self) -> None:
        """The kinematic model's ideal grip: the held piece is put where the tool carries it."""
        if self._held is not None and self.robot.mode is JointMode.KINEMATIC and self._grip_rel is not None:
            self.world.set_body_pose(self.parts[self._held], self._tcp_world() @ self._grip_rel, still=True)

    def _moved(self) -> bool:
        """The held piece moved more than :attr:`slip` from where it was gripped, in the TCP frame."""
        assert self._held is not None and self._grip_rel is not None
        now = np.linalg.inv(self._tcp_world()) @ self.world.body_pose(self.parts[self._held])
        return float(np.linalg.norm(now[:3, 3] - self._grip_rel[:3, 3])) > self.slip

    def _switch(self, on: bool, may_grip: bool) -> GripEvent | None:
        """The step's change: let go when switched off, grip (when ``may_grip``) when on and empty,
        drop what slipped; recorded in :attr:`events`."""
        event = None
        if not on and self._held is not None:
            event = self._let_go(GripKind.RELEASE)
        elif on and self._held is None and may_grip:
            event = self._grip()
        elif on and self._held is not None and self._slipped():
            event = self._let_go(GripKind.DROP)
        self._on = bool(on)
        if event is not None:
            self.events.append(event)
        return event

    def _grip(self) -> GripEvent | None:
        raise NotImplementedError

    def _slipped(self) -> bool:
        raise NotImplementedError

    def _let_go(self, kind: GripKind) -> GripEvent:
        raise NotImplementedError


class VacuumGripper(_Gripper):
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
        super().__init__(world, robot, parts, slip)
        self.reach, self.max_force = reach, max_force
        self._cup = robot.link_index.get("tool", robot.tcp_link)
        self._constraint = -1

    def update(self, on: bool) -> GripEvent | None:
        """One control step with the suction ``on`` or off; returns the change it made, if any.

        Switching on grips the nearest piece within :attr:`reach` (nothing there: it stays on and
        grips nothing — a real cup does not grip later either until switched again)."""
        self._carry()
        return self._switch(on, may_grip=not self._on)

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
        return self._moved()

    def _let_go(self, kind: GripKind) -> GripEvent:
        assert self._held is not None
        if self._constraint >= 0:
            self.world.detach(self._constraint)
        name, self._held, self._constraint, self._grip_rel = self._held, None, -1, None
        return GripEvent(kind, name, self.world.time, self.world.body_pose(self.parts[name]))


class ParallelGripper(_Gripper):
    """Two jaws that close on a workpiece and hold it by friction (see the module docstring).

    Args:
        world: the world.
        robot: a robot carrying a GRIPPER tool, loaded without drawn jaws (``jaws=False``).
        parts: the movable workpieces by name: their body ids.
        force: what each jaw's drive pushes with, N (a small pneumatic gripper: 20–100 N).
        speed: how fast each jaw moves, m/s.
        friction: the jaws' Coulomb friction coefficient (rubber pads: about 1).
        slip: a held piece that moved this far from where it was gripped has dropped, m.
        ideal: bodies the jaws make no contacts with (the static work bodies: the table is
            touched ideally, as the tool touches it).

    Raises:
        ValueError: the robot's tool is not a gripper, or a setting is out of range.
    """

    #: the jaws' mass in all, kg (part of the tool's mass in reality; added here)
    JAW_MASS = 0.06
    #: the constraint holding the jaws on the tool, N: stiff against any grip the drive makes
    MOUNT_FORCE = 5000.0

    def __init__(self, world: World, robot: SimRobot, parts: dict[str, int], *, force: float = 40.0,
                 speed: float = 0.05, friction: float = 1.0, slip: float = 0.005, ideal=()) -> None:
        from ..robots.tooling import JAW_THICK, jaw_boxes
        if robot.tool is None or robot.tool.kind is not ToolKind.GRIPPER:
            raise ValueError("a parallel gripper needs a robot with a gripper tool on its flange")
        for name, v, lo, hi in (("force", force, 0.1, 1e4), ("speed", speed, 1e-3, 1.0),
                                ("friction", friction, 0.0, 10.0), ("slip", slip, 1e-4, 0.1)):
            if not (np.isfinite(v) and lo <= v <= hi):
                raise ValueError(f"{name} must be {lo:g} to {hi:g}, got {v!r}")
        super().__init__(world, robot, parts, slip)
        self.force, self.speed = force, speed
        self._tool = robot.link_index.get("tool", robot.tool_link)
        fingers = []
        for centre, size in jaw_boxes(robot.tool):
            inward = -float(np.sign(centre[0]))
            fingers.append((centre, size, (inward, 0.0, 0.0)))
        #: how far each jaw travels from open to closed, m (its inner face reaches the axis)
        self.travel = abs(fingers[0][0][0]) - JAW_THICK / 2 - 5e-4
        self.body = world.add_fingers(self._tool_world(), fingers, mass=self.JAW_MASS, friction=friction,
                                      color=(0.55, 0.56, 0.58, 1.0), travel=self.travel)
        for link in range(-1, world.link_count(robot.body)):       # the jaws ride on the tool: no contacts
            for j in range(-1, len(fingers)):
                world.set_collision(robot.body, link, self.body, j, False)
        for other in ideal:
            for j in range(-1, len(fingers)):
                world.set_collision(self.body, j, int(other), -1, False)
        # the dynamic models carry the jaws by a stiff constraint (their weight and the piece's act
        # on the arm); the kinematic one puts them on the tool every step, as it does the robot
        self._mount = -1 if robot.mode is JointMode.KINEMATIC else world.attach(robot, self._tool, self.body,
                                                                              self.MOUNT_FORCE)
        self._target = 0.0         # the jaws' commanded position (0: open), m
        self._untouched: int | None = None     # a piece let go in the kinematic model, not yet collided with
        self._open = self.opening              # the gap between the open jaws, m
        world.drive_fingers(self.body, [0.0, 0.0], force)

    def reset(self, parts: dict[str, int]) -> None:
        """Start again (a new episode): the jaws open on the tool where the robot stands now, holding
        nothing, over the workpieces ``parts`` (no events)."""
        self._held, self._grip_rel, self._untouched, self._on = None, None, None, False
        self.parts = dict(parts)
        for body in self.parts.values():        # (a new body may reuse a removed one's id, and its filters)
            for j in (0, 1):
                self.world.set_collision(self.body, j, body, -1, True)
        self.world.reset_fingers(self.body, self._tool_world())
        self._target = 0.0
        self.world.drive_fingers(self.body, [0.0, 0.0], self.force)

    @property
    def opening(self) -> float:
        """The gap between the jaws' inner faces now, m."""
        from ..robots.tooling import JAW_THICK, jaw_offset
        assert self.robot.tool is not None
        return float(2 * (jaw_offset(self.robot.tool) - JAW_THICK / 2) - self.world.finger_positions(self.body).sum())

    def _tool_world(self) -> np.ndarray:
        """(4, 4) the tool link's frame (the flange's) in the world: where the jaws' base stands."""
        return self.robot.world_T_report @ self.robot.tcp_pose() @ np.linalg.inv(self.robot.tool.tcp)   # type: ignore[union-attr]

    def update(self, on: bool) -> GripEvent | None:
        """One control step with the gripper ``on`` (closing) or off (opening); returns the change
        it made, if any. A piece is gripped once both jaws touch it."""
        if self._mount < 0:
            self.world.set_body_pose(self.body, self._tool_world(), still=True)
        self._carry()
        if self._untouched is not None and (on or (self._target == 0.0 and self.opening > self._open - 1e-4)):
            self._ideal(self._untouched, False)
            self._untouched = None
        goal = self.travel if on else 0.0          # the jaws' target moves towards it at the jaw speed
        if self._target != goal:
            step = self.speed * self.world.physics.dt
            self._target = min(goal, self._target + step) if goal > self._target else max(goal, self._target - step)
            self.world.drive_fingers(self.body, [self._target, self._target], self.force)
        return self._switch(on, may_grip=True)

    def _grip(self) -> GripEvent | None:
        for name, body in self.parts.items():
            if self.world.in_contact(self.body, body, 0) and self.world.in_contact(self.body, body, 1):
                self._held = name
                pose = self.world.body_pose(body)
                self._grip_rel = np.linalg.inv(self._tcp_world()) @ pose
                if self.robot.mode is JointMode.KINEMATIC:      # the ideal grip: no forces on the piece
                    self._ideal(body, True)
                return GripEvent(GripKind.GRIP, name, self.world.time, pose)
        return None

    def _ideal(self, body: int, held: bool) -> None:
        """The kinematic model's ideal grip: the jaws stop where they touch the piece and make no
        contacts with it while it is carried (so they push nothing when they let go)."""
        if held:
            self._target = float(self.world.finger_positions(self.body).mean())
            self.world.drive_fingers(self.body, [self._target, self._target], self.force)
        for j in (0, 1):
            self.world.set_collision(self.body, j, body, -1, not held)

    def _slipped(self) -> bool:
        assert self._held is not None
        if self.robot.mode is JointMode.KINEMATIC:
            return False            # the ideal grip
        body = self.parts[self._held]
        return self._moved() or not (self.world.in_contact(self.body, body, 0) or self.world.in_contact(self.body, body, 1))

    def _let_go(self, kind: GripKind) -> GripEvent:
        assert self._held is not None
        name, self._held, self._grip_rel = self._held, None, None
        if self.robot.mode is JointMode.KINEMATIC:
            self._untouched = self.parts[name]       # it collides with the jaws again once they are open
        return GripEvent(kind, name, self.world.time, self.world.body_pose(self.parts[name]))
