"""A robot's moving links as rigid bodies for the pure-numpy dynamics (:mod:`armtwin.controllers.dynamics`).

The numbers are the ones the URDF is generated from (:func:`~armtwin.robots.urdfgen.link_inertial`),
and the flange carries what the simulator puts there — the flange frame's token mass
(:data:`~armtwin.robots.urdfgen.FLANGE_MASS`), a payload as a solid aluminium sphere on the flange
origin (:meth:`SimRobot.set_payload <armtwin.envs.sim.SimRobot.set_payload>`) and a tool's body
(:func:`~armtwin.robots.tooling.tool_inertial`) — so the torques equal PyBullet's inverse dynamics
of the same world (tested). Units: kg, m, kg·m².
"""

from __future__ import annotations

import numpy as np

from ..controllers.dynamics import GRAVITY, RigidBodies, sphere_inertia
from ..controllers.kinematics import chain_of
from ..controllers.tools import Tool, ToolKind
from .spec import RobotSpec
from .tooling import TCP_INERTIA, TCP_MASS, tool_inertial
from .urdfgen import FLANGE_INERTIA, FLANGE_MASS, link_inertial

__all__ = ["rigid_bodies", "flange_inertia"]


def flange_inertia(payload: float) -> float:
    """Inertia per axis (kg·m²) of the flange body carrying ``payload`` kg (a solid aluminium sphere)."""
    return max(sphere_inertia(payload), FLANGE_INERTIA)


def rigid_bodies(spec: RobotSpec, *, payload: float = 0.0, tool: Tool | None = None,
                 gravity=GRAVITY) -> RigidBodies:
    """``spec``'s moving links with the flange's loads.

    Args:
        spec: the robot.
        payload: kg on the flange origin (a solid aluminium sphere, as in the simulator).
        tool: a tool on the flange (its body's mass at its centre of mass, and the TCP frame's token
            mass), or None.
        gravity: (3,) m/s² in the mounting frame.

    Raises:
        ValueError: a negative or non-finite payload.
    """
    if not (np.isfinite(payload) and payload >= 0):
        raise ValueError(f"payload must be >= 0 kg, got {payload}")
    n = spec.dof
    com = np.empty((n, 3))
    inertia = np.empty((n, 3, 3))
    for i in range(n):
        com[i], inertia[i] = link_inertial(spec, i + 1)
    mass = np.array([link.mass for link in spec.links[1:]], dtype=float)
    bodies = RigidBodies(chain_of(spec), mass, com, inertia, np.asarray(gravity, dtype=float))
    bodies = bodies.with_load(FLANGE_MASS + payload, inertia=np.eye(3) * flange_inertia(payload))
    if tool is not None:
        if tool.kind is not ToolKind.NONE:
            m, c, i_tool = tool_inertial(tool)
            bodies = bodies.with_load(m, c, i_tool)
        bodies = bodies.with_load(TCP_MASS, tool.offset, np.eye(3) * TCP_INERTIA)
    return bodies
