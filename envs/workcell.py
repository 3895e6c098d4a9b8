"""A workcell's bodies in a simulated :class:`~armtwin.envs.sim.World`.

:func:`place_cell` adds every body of a :class:`~armtwin.robots.workcell.Cell` to a world, drawn
and colliding: static, or movable when it has a mass (a workpiece a gripper can carry); :func:`mount_of` is where a robot stands in it. Given the
robot, the end effector's links (:func:`~armtwin.robots.workcell.end_effector_links`) do not
make physical contacts with **work** bodies: the tool's touch on the work is ideal (a pen
drawing on the table, whose ink :class:`~armtwin.envs.marking.SurfaceMarker` draws), while
every other link and every obstacle collide as in a real cell. The collision preflight
(:mod:`armtwin.envs.collision`) refuses a program in which the tool presses into the work
deeper than the cell's ``touch``.

Only the :class:`World` facade is used here (no PyBullet). Units: metres, world frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..robots.workcell import BodyRole, Cell, CellBody, ShapeKind, end_effector_links
from .sim import SimRobot, World

__all__ = ["PlacedCell", "place_cell", "body_shapes", "mount_of"]


@dataclass(frozen=True)
class PlacedCell:
    """A cell in a world: ``bodies`` maps each body's name to its world body id."""

    cell: Cell
    bodies: dict[str, int]

    @property
    def static_work(self) -> list[int]:
        """The ids of the fixed work bodies (the table): what a tool touches ideally."""
        return [self.bodies[b.name] for b in self.cell.bodies if b.role is BodyRole.WORK and b.mass == 0]


def body_shapes(body: CellBody) -> list[tuple[str, tuple, np.ndarray]]:
    """The :meth:`World.add_shapes` description of a cell body (one shape in its own frame)."""
    if body.shape is ShapeKind.MESH:
        return [("mesh", (str(body.mesh), body.scale), np.eye(4))]
    return [(body.shape.value, body.size, np.eye(4))]


def mount_of(cell: Cell) -> tuple[np.ndarray, np.ndarray]:
    """(position (3,), rotation (3, 3)) of the robot's mounting face in the world: the arguments
    ``position`` and ``orientation`` of :meth:`World.add_robot`."""
    return cell.mount[:3, 3].copy(), cell.mount[:3, :3].copy()


def place_cell(world: World, cell: Cell, robot: SimRobot | None = None) -> PlacedCell:
    """Add ``cell``'s bodies to ``world`` (static, drawn, colliding); with ``robot``, its end
    effector's links make no contacts with the work bodies (see the module docstring).

    Raises:
        SimulationError: PyBullet refused a body (an unreadable mesh file).
    """
    ids: dict[str, int] = {}
    for body in cell.bodies:
        ids[body.name] = world.add_shapes(body_shapes(body), body.pose, color=body.color, mass=body.mass,
                                          friction=body.friction, free=body.mass > 0)
    if robot is not None:
        ee = [robot.link_index[name] for name in end_effector_links(robot.spec) if name in robot.link_index]
        ee += [robot.link_index[name] for name in ("tool", "tcp") if name in robot.link_index]
        for body in cell.bodies:
            if body.role is BodyRole.WORK:
                for link in ee:
                    world.set_collision(robot.body, link, ids[body.name], -1, False)
    return PlacedCell(cell, ids)
