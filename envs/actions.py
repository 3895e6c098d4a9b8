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

The work is done for N robots at once (:class:`JointDeltaBatch`, :class:`CartesianDeltaBatch`:
arrays (N, ...), batch IK and FK), which is what the batched vector env steps;
:class:`JointDeltaControl` and :class:`CartesianDeltaControl` are the same code for one robot.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..controllers.choices import Choice
from ..controllers.tcp import TcpKinematics
from ..robots import RobotSpec

__all__ = ["ControlMode", "JointDeltaControl", "CartesianDeltaControl", "JointDeltaBatch", "CartesianDeltaBatch",
           "IKFunction", "BatchIKFunction"]

#: ``(T (4, 4), q_near (n,)) -> q (n,) or None`` — the IK used by Cartesian control of one robot
IKFunction = Callable[[np.ndarray, np.ndarray], "np.ndarray | None"]
#: ``(T (N, 4, 4), q_near (N, n)) -> (Q (N, n), ok (N,))`` — the IK used by Cartesian control of N robots
BatchIKFunction = Callable[[np.ndarray, np.ndarray], "tuple[np.ndarray, np.ndarray]"]


class ControlMode(Choice):
    """What an action moves: the joints, or the tool in the base frame (through IK)."""

    __label__ = "control mode"

    JOINT = "joint"
    CARTESIAN = "cartesian"



def _rotvec_matrices(w: np.ndarray) -> np.ndarray:
    """Rotation matrices (N, 3, 3) of rotation vectors (N, 3) rad (Rodrigues)."""
    th = np.sqrt(np.sum(w * w, axis=1))
    k = w / np.where(th > 1e-12, th, 1.0)[:, None]
    K = np.zeros((len(w), 3, 3))
    K[:, 0, 1], K[:, 0, 2], K[:, 1, 2] = -k[:, 2], k[:, 1], -k[:, 0]
    K[:, 1, 0], K[:, 2, 0], K[:, 2, 1] = k[:, 2], -k[:, 1], k[:, 0]
    s, c = np.sin(th)[:, None, None], (1.0 - np.cos(th))[:, None, None]
    return np.eye(3) + s * K + c * (K @ K)


class JointDeltaBatch:
    """Action = joint position deltas, one per joint, in [-1, 1], for N robots of one kind.

    Args:
        spec: the robot.
        dt: control period, s.
        num: N.
        joint_step: rad per step at action 1 for revolute joints.
        linear_step: m per step at action 1 for prismatic joints.
    """

    def __init__(self, spec: RobotSpec, dt: float, num: int = 1, *, joint_step: float = 0.05,
                 linear_step: float = 0.01) -> None:
        if joint_step <= 0 or linear_step <= 0:
            raise ValueError("joint_step and linear_step must be > 0")
        self.spec = spec
        self.num = int(num)
        self.size = spec.dof
        self.scale = np.where(spec.prismatic, linear_step, joint_step)
        self._max_dq = spec.max_velocity * dt
        self._q = np.tile(spec.home, (self.num, 1))
        self._clipped = np.zeros(self.num, dtype=bool)

    def reset(self, q: np.ndarray, mask: np.ndarray | None = None) -> None:
        """Hold joints ``q`` (N, n) — only rows where ``mask`` (N,) is True, when given."""
        q = np.asarray(q, dtype=float)
        if mask is None:
            self._q = q.copy()
        else:
            self._q[mask] = q[mask]

    def __call__(self, action: np.ndarray, reference: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Joint targets (N, n) for normalised actions (N, n); (N,) bools: no IK, never failed."""
        base = self._q if reference is None else reference[1]
        q = np.clip(base + action * self.scale, self.spec.lower, self.spec.upper)
        dq = q - self._q
        limited = np.clip(dq, -self._max_dq, self._max_dq)
        self._clipped = np.any(limited != dq, axis=1)
        self._q = self._q + limited
        return self._q.copy(), np.zeros(self.num, dtype=bool)

    @property
    def q_ref(self) -> np.ndarray:
        """The held joints (N, n)."""
        return self._q

    @property
    def clipped(self) -> np.ndarray:
        """(N,) the last step was limited by the joint speeds."""
        return self._clipped


class CartesianDeltaBatch:
    """Action = tool displacement in the base frame (and rotation), in [-1, 1], for N robots of one kind.

    Action layout: ``[dx, dy, dz]``; with ``orientation`` the SCARA adds ``[droll]`` (about
    base z) and the 6-axis arms add a rotation vector ``[rx, ry, rz]`` (base frame).
    Without orientation the tool keeps the orientation it had at the reset.

    Where the IK finds no solution for the new pose (out of reach, out of range), that robot's
    joints stay where they are and the call reports the failure for it.

    The tool poses are those of the controlled point: the TCP of ``kinematics``' tool (the
    flange without one); ``ik`` must take poses of that same point.

    Args:
        spec: the robot.
        dt: control period, s.
        ik: batch IK ``(T (N, 4, 4), q_near (N, n)) -> (Q (N, n), ok (N,))``.
        num: N.
        orientation: the action rotates the tool too.
        tool_step: m per step at action 1.
        rot_step: rad per step at action 1.
        box: (low (3,), high (3,)) m: targets are clipped into this box (reporting frame).
        kinematics: FK of the controlled point (default: the flange of ``spec``).
    """

    def __init__(self, spec: RobotSpec, dt: float, ik: BatchIKFunction, num: int = 1, *, orientation: bool = False,
                 tool_step: float = 0.04, rot_step: float = 0.2,
                 box: tuple[np.ndarray, np.ndarray] | None = None, kinematics: TcpKinematics | None = None) -> None:
        if tool_step <= 0 or rot_step <= 0:
            raise ValueError("tool_step and rot_step must be > 0")
        self.spec = spec
        self.ik = ik
        self.num = int(num)
        self.orientation = bool(orientation)
        self.scara = spec.roll_only
        self.size = 3 + ((1 if self.scara else 3) if self.orientation else 0)
        self.tool_step, self.rot_step = float(tool_step), float(rot_step)
        self.box = box
        self._max_dq = spec.max_velocity * dt
        self._fk = (kinematics or TcpKinematics(spec)).fk_batch
        self.reset(np.tile(spec.home, (self.num, 1)))

    def reset(self, q: np.ndarray, mask: np.ndarray | None = None) -> None:
        """Hold joints ``q`` (N, n) and the tool poses they reach — only rows where ``mask`` is True."""
        q = np.asarray(q, dtype=float)
        if mask is None:
            self._clipped = np.zeros(self.num, dtype=bool)  # the last step was limited by the joint speeds
            self._q = q.copy()
            self._T = self._fk(self._q)
        else:
            self._clipped[mask] = False
            self._q[mask] = q[mask]
            self._T[mask] = self._fk(q[mask])

    def targets(self, action: np.ndarray, base: np.ndarray) -> np.ndarray:
        """The tool poses (N, 4, 4) the actions (N, k) ask for, starting from poses ``base`` (N, 4, 4)."""
        T = base.copy()
        T[:, :3, 3] += action[:, :3] * self.tool_step
        if self.box is not None:
            T[:, :3, 3] = np.minimum(np.maximum(T[:, :3, 3], self.box[0]), self.box[1])
        if self.orientation:
            w = np.c_[np.zeros((len(action), 2)), action[:, 3]] if self.scara else action[:, 3:6]
            T[:, :3, :3] = _rotvec_matrices(w * self.rot_step) @ T[:, :3, :3]
        return T

    def __call__(self, action: np.ndarray, reference: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Joint targets (N, n) for normalised actions (N, k); (N,) bools: True where the IK failed."""
        if reference is None:
            T = self.targets(action, self._T)
            q_near = self._q
        else:
            T = self.targets(action, reference[0])
            q_near = reference[1]
        q, ok = self.ik(T, q_near)
        every = bool(ok.all())
        dq = q - self._q if every else np.where(ok[:, None], q - self._q, 0.0)
        # plain ufuncs: np.clip's wrapper costs more than the work at these sizes
        limited = np.minimum(np.maximum(dq, -self._max_dq), self._max_dq)
        self._q = self._q + limited
        self._clipped = (limited != dq).any(1)
        if reference is None:
            if self._clipped.any():  # the joints could not get there in one step: hold where they go
                T[self._clipped, :3, 3] = self._fk(self._q[self._clipped])[:, :3, 3]
            # the orientation stays the one asked for (the IK pulls it back); failed rows keep their pose
            self._T = T if every else np.where(ok[:, None, None], T, self._T)
        return self._q.copy(), ~ok

    @property
    def q_ref(self) -> np.ndarray:
        """The held joints (N, n)."""
        return self._q

    @property
    def T_ref(self) -> np.ndarray:
        """The held tool poses (N, 4, 4)."""
        return self._T

    @property
    def clipped(self) -> np.ndarray:
        """(N,) the last step was limited by the joint speeds."""
        return self._clipped


class JointDeltaControl(JointDeltaBatch):
    """:class:`JointDeltaBatch` for one robot: actions (n,), joints (n,); ``q_ref`` (n,).

    Args:
        spec: the robot.
        dt: control period, s.
        joint_step: rad per step at action 1 for revolute joints.
        linear_step: m per step at action 1 for prismatic joints.
    """

    def __init__(self, spec: RobotSpec, dt: float, *, joint_step: float = 0.05, linear_step: float = 0.01) -> None:
        super().__init__(spec, dt, 1, joint_step=joint_step, linear_step=linear_step)

    def reset(self, q: np.ndarray, mask: np.ndarray | None = None) -> None:
        """Hold joints ``q`` (n,)."""
        super().reset(np.asarray(q, dtype=float).reshape(1, -1))

    def __call__(self, action: np.ndarray, reference: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, bool]:
        """Joint targets (n,) for a normalised action (n,); the bool is always False (no IK)."""
        ref = None if reference is None else (reference[0][None], reference[1][None])
        q, _ = super().__call__(np.asarray(action, dtype=float)[None], ref)
        return q[0], False

    @property
    def q_ref(self) -> np.ndarray:
        """The held joints (n,)."""
        return self._q[0]

    @property
    def clipped(self) -> bool:
        """The last step was limited by the joint speeds."""
        return bool(self._clipped[0])


class CartesianDeltaControl(CartesianDeltaBatch):
    """:class:`CartesianDeltaBatch` for one robot: actions (k,), joints (n,); ``q_ref`` (n,),
    ``T_ref`` (4, 4), ``clipped`` bool.

    Args:
        spec: the robot.
        dt: control period, s.
        ik: IK function ``(T, q_near) -> q or None``.
        orientation: the action rotates the tool too.
        tool_step: m per step at action 1.
        rot_step: rad per step at action 1.
        box: (low (3,), high (3,)) m: targets are clipped into this box (reporting frame).
        kinematics: FK of the controlled point (default: the flange of ``spec``).
    """

    def __init__(self, spec: RobotSpec, dt: float, ik: IKFunction, *, orientation: bool = False,
                 tool_step: float = 0.04, rot_step: float = 0.2,
                 box: tuple[np.ndarray, np.ndarray] | None = None, kinematics: TcpKinematics | None = None) -> None:
        def one(T: np.ndarray, q_near: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            q = ik(T[0], q_near[0])
            return (q_near, np.zeros(1, dtype=bool)) if q is None else (np.asarray(q, dtype=float)[None], np.ones(1, dtype=bool))

        super().__init__(spec, dt, one, 1, orientation=orientation, tool_step=tool_step, rot_step=rot_step, box=box,
                         kinematics=kinematics)

    def reset(self, q: np.ndarray, mask: np.ndarray | None = None) -> None:
        """Hold joints ``q`` (n,) and the tool pose they reach."""
        super().reset(np.asarray(q, dtype=float).reshape(1, -1))

    def target(self, action: np.ndarray, base: np.ndarray) -> np.ndarray:
        """The tool pose (4, 4) the action (k,) asks for, starting from pose ``base`` (4, 4)."""
        return self.targets(np.asarray(action, dtype=float)[None], np.asarray(base)[None])[0]

    def __call__(self, action: np.ndarray, reference: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, bool]:
        """Joint targets (n,) for a normalised action (k,); the bool is True when the IK failed."""
        ref = None if reference is None else (reference[0][None], reference[1][None])
        q, failed = super().__call__(np.asarray(action, dtype=float)[None], ref)
        return q[0], bool(failed[0])

    @property
    def q_ref(self) -> np.ndarray:
        """The held joints (n,)."""
        return self._q[0]

    @property
    def T_ref(self) -> np.ndarray:
        """The held tool pose (4, 4)."""
        return self._T[0]

    @property
    def clipped(self) -> bool:
        """The last step was limited by the joint speeds."""
        return bool(self._clipped[0])
