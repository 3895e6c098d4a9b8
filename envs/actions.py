"""Action interfaces of the Gymnasium environments: a normalised action -> joint targets.

Both interfaces keep a *reference* — the last commanded joints (and, for Cartesian
control, the tool pose they reach) — and move it by the action each control step, like a
teach pendant's jog keys. A task may instead hand in its own reference (a path point and
its IK joints, for residual control); the action is then added to that. The joint
targets they return go to :meth:`armtwin.envs.sim.SimRobot.command`, the command path
the G-code runner uses too.

Every step is limited to the joints' speed limits (|Δq| ≤ v_max · dt); when that limit
cuts a Cartesian step short, the held tool position becomes the one the limited joints
reach (so the reference never runs ahead of the arm). Units: m, rad, s.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..controllers.choices import Choice
from ..controllers.kinematics import chain_of, fk_batch
from ..robots import RobotSpec

__all__ = ["ControlMode", "JointDeltaControl", "CartesianDeltaControl", "IKFunction"]

#: ``(T (4, 4), q_near (n,)) -> q (n,) or None`` — the IK used by Cartesian control
IKFunction = Callable[[np.ndarray, np.ndarray], "np.ndarray | None"]


class ControlMode(Choice):
    """What an action moves: the joints, or the tool in the base frame (through IK)."""

    __label__ = "control mode"

    JOINT = "joint"
    CARTESIAN = "cartesian"



def _rotvec_matrix(w: np.ndarray) -> np.ndarray:
    """Rotation matrix (3, 3) of a rotation vector (3,) rad (Rodrigues)."""
    th = float(np.sqrt(w @ w))
    if th < 1e-12:
        return np.eye(3)
    k = w / th
    K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + np.sin(th) * K + (1.0 - np.cos(th)) * (K @ K)


class JointDeltaControl:
    """Action = joint position deltas, one per joint, in [-1, 1].

    Args:
        spec: the robot.
        dt: control period, s.
        joint_step: rad per step at action 1 for revolute joints.
        linear_step: m per step at action 1 for prismatic joints.
    """

    def __init__(self, spec: RobotSpec, dt: float, *, joint_step: float = 0.05, linear_step: float = 0.01) -> None:
        if joint_step <= 0 or linear_step <= 0:
            raise ValueError("joint_step and linear_step must be > 0")
        self.spec = spec
        self.size = spec.dof
        self.scale = np.where(spec.prismatic, linear_step, joint_step)
        self._max_dq = spec.max_velocity * dt
        self.q_ref = spec.home.copy()

    def reset(self, q: np.ndarray) -> None:
        """Hold joints ``q`` (n,)."""
        self.q_ref = np.array(q, dtype=float)

    def __call__(self, action: np.ndarray, reference: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, bool]:
        """Joint targets (n,) for a normalised action (n,); the bool is always False (no IK)."""
        base = self.q_ref if reference is None else reference[1]
        q = np.clip(base + action * self.scale, self.spec.lower, self.spec.upper)
        q = self.q_ref + np.clip(q - self.q_ref, -self._max_dq, self._max_dq)
        self.q_ref = q
        return q, False


class CartesianDeltaControl:
    """Action = tool displacement in the base frame (and rotation), in [-1, 1].

    Action layout: ``[dx, dy, dz]``; with ``orientation`` the SCARA adds ``[droll]`` (about
    base z) and the 6-axis arms add a rotation vector ``[rx, ry, rz]`` (base frame).
    Without orientation the tool keeps the orientation it had at the reset.

    When the IK finds no solution for the new pose (out of reach, out of range), the
    joints stay where they are and the call reports the failure.

    Args:
        spec: the robot.
        dt: control period, s.
        ik: IK function ``(T, q_near) -> q or None``.
        orientation: the action rotates the tool too.
        tool_step: m per step at action 1.
        rot_step: rad per step at action 1.
        box: (low (3,), high (3,)) m: targets are clipped into this box (reporting frame).
    """

    def __init__(self, spec: RobotSpec, dt: float, ik: IKFunction, *, orientation: bool = False,
                 tool_step: float = 0.04, rot_step: float = 0.2,
                 box: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        if tool_step <= 0 or rot_step <= 0:
            raise ValueError("tool_step and rot_step must be > 0")
        self.spec = spec
        self.ik = ik
        self.orientation = bool(orientation)
        self.scara = spec.roll_only
        self.size = 3 + ((1 if self.scara else 3) if self.orientation else 0)
        self.tool_step, self.rot_step = float(tool_step), float(rot_step)
        self.box = box
        self._max_dq = spec.max_velocity * dt
        self._chain = chain_of(spec)
        self.reset(spec.home)

    def reset(self, q: np.ndarray) -> None:
        """Hold joints ``q`` (n,) and the tool pose they reach."""
        self.clipped = False  # the last step was limited by the joint speeds
        self.q_ref = np.array(q, dtype=float)
        self.T_ref = fk_batch(self._chain, self.q_ref[None])[0]

    def target(self, action: np.ndarray, base: np.ndarray) -> np.ndarray:
        """The tool pose (4, 4) the action asks for, starting from pose ``base``."""
        T = base.copy()
        T[:3, 3] += action[:3] * self.tool_step
        if self.box is not None:
            T[:3, 3] = np.clip(T[:3, 3], self.box[0], self.box[1])
        if self.orientation:
            w = np.array([0.0, 0.0, action[3]]) if self.scara else action[3:6]
            T[:3, :3] = _rotvec_matrix(w * self.rot_step) @ T[:3, :3]
        return T

    def __call__(self, action: np.ndarray, reference: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, bool]:
        """Joint targets (n,) for a normalised action; the bool is True when the IK failed."""
        if reference is None:
            T = self.target(action, self.T_ref)
            q_near = self.q_ref
        else:
            T = self.target(action, reference[0])
            q_near = reference[1]
        q = self.ik(T, q_near)
        if q is None:
            return self.q_ref, True
        dq = q - self.q_ref
        limited = np.clip(dq, -self._max_dq, self._max_dq)
        self.q_ref = self.q_ref + limited
        self.clipped = bool(np.any(limited != dq))
        if reference is None:
            if self.clipped:  # the joints could not get there in one step: hold where they go
                T[:3, 3] = fk_batch(self._chain, self.q_ref[None])[0][:3, 3]
            self.T_ref = T  # the orientation stays the one asked for; the IK pulls it back
        return self.q_ref.copy(), False
