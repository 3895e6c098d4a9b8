"""Rigid-body dynamics of a serial arm: inverse dynamics, gravity torques, joint-space inertia.

Pure numpy (no PyBullet), vectorised over a batch of N states: the recursive Newton–Euler
algorithm (RNEA) in the root (mounting) frame, looping over the n joints once outward
(velocities and accelerations) and once inward (forces and moments). Gravity enters as an
upward acceleration of the root, so one pass gives ``τ = M(q) q̈ + C(q, q̇) q̇ + g(q)``.
It is checked against PyBullet's ``calculateInverseDynamics`` in the tests; it runs a whole
program's control samples at once (``armtwin torque``) and, with a few calls per pose, gives
``M(q)`` for the drive-gain rule.

Friction, joint damping and motor (rotor) inertia are not part of this model: they belong to
the drives.

Shapes: ``q``, ``qd``, ``qdd`` are (n,) or (N, n) in rad, rad/s, rad/s² (m, m/s, m/s² for
prismatic joints); torques come back in the same shape, N·m (N).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kinematics import Chain, link_frames_batch

__all__ = ["RigidBodies", "inverse_dynamics", "gravity_torque", "mass_matrix", "sphere_inertia", "GRAVITY",
           "PAYLOAD_DENSITY"]

#: standard gravity in the root (mounting) frame, z up, m/s²
GRAVITY = (0.0, 0.0, -9.81)
#: density of a payload modelled as a solid sphere at the flange (aluminium), kg/m³
PAYLOAD_DENSITY = 2700.0


def sphere_inertia(mass: float, density: float = PAYLOAD_DENSITY) -> float:
    """Moment of inertia (kg·m²) about its centre of a solid sphere of ``mass`` kg and ``density`` kg/m³."""
    if mass <= 0:
        return 0.0
    r = (3.0 * mass / (4.0 * np.pi * density)) ** (1.0 / 3.0)
    return 0.4 * mass * r * r


@dataclass(frozen=True, eq=False)
class RigidBodies:
    """The moving links of a serial arm as rigid bodies.

    Attributes:
        chain: the kinematic chain (:class:`~armtwin.controllers.kinematics.Chain`); its ``base``
            and ``tool`` are not used here, the root frame is the mounting frame.
        mass: (n,) mass of the link each joint moves, kg.
        com: (n, 3) its centre of mass in its link frame, m.
        inertia: (n, 3, 3) its inertia about the centre of mass, link axes, kg·m².
        gravity: (3,) gravity in the root frame, m/s².
    """

    chain: Chain
    mass: np.ndarray
    com: np.ndarray
    inertia: np.ndarray
    gravity: np.ndarray

    def __post_init__(self) -> None:
        n = self.chain.dof
        for name, shape in (("mass", (n,)), ("com", (n, 3)), ("inertia", (n, 3, 3)), ("gravity", (3,))):
            v = np.array(getattr(self, name), dtype=float)
            if v.shape != shape or not np.all(np.isfinite(v)):
                raise ValueError(f"RigidBodies.{name} needs shape {shape} of finite numbers, got {v.shape}")
            v.setflags(write=False)
            object.__setattr__(self, name, v)
        if np.any(self.mass < 0):
            raise ValueError(f"RigidBodies.mass must be >= 0 kg, got {self.mass}")

    @property
    def dof(self) -> int:
        return self.chain.dof

    def with_load(self, mass: float, com=(0.0, 0.0, 0.0), inertia=None) -> "RigidBodies":
        """These bodies with a rigid load fixed to the flange, lumped into the last link.

        Args:
            mass: kg (>= 0).
            com: the load's centre of mass in the flange frame, m.
            inertia: (3, 3) its inertia about its centre of mass, flange axes, kg·m² (default 0: a point).
        """
        if not (np.isfinite(mass) and mass >= 0):
            raise ValueError(f"load mass must be >= 0 kg, got {mass}")
        if mass == 0:
            return self
        tool = self.chain.tool
        c = tool[:3, :3] @ np.asarray(com, dtype=float) + tool[:3, 3]      # in the last link frame
        i_load = np.zeros((3, 3)) if inertia is None else tool[:3, :3] @ np.asarray(inertia, float) @ tool[:3, :3].T
        m0, c0, i0 = self.mass[-1], self.com[-1], self.inertia[-1]
        m = m0 + mass
        cm = (m0 * c0 + mass * c) / m
        i_new = _shifted(i0, m0, c0 - cm) + _shifted(i_load, mass, c - cm)
        masses, coms, inertias = self.mass.copy(), self.com.copy(), self.inertia.copy()
        masses[-1], coms[-1], inertias[-1] = m, cm, i_new
        return RigidBodies(self.chain, masses, coms, inertias, self.gravity)


def _shifted(inertia: np.ndarray, mass: float, d: np.ndarray) -> np.ndarray:
    """Parallel-axis theorem: ``inertia`` about a point ``d`` (m) away from the centre of mass."""
    return inertia + mass * (float(d @ d) * np.eye(3) - np.outer(d, d))


def _batch(v, n: int, what: str) -> np.ndarray:
    v = np.asarray(v, dtype=float)
    out = np.atleast_2d(v)
    if out.ndim != 2 or out.shape[1] != n:
        raise ValueError(f"{what} needs {n} values per row, got shape {v.shape}")
    return out


def inverse_dynamics(bodies: RigidBodies, q, qd=None, qdd=None, *, gravity: bool = True) -> np.ndarray:
    """Joint torques (forces) that give the accelerations ``qdd`` at the state (``q``, ``qd``).

    Args:
        bodies: the arm.
        q, qd, qdd: (n,) or (N, n); ``qd``, ``qdd`` default to zero.
        gravity: include gravity (False: only the motion's own torques).

    Returns:
        (n,) or (N, n) torques, N·m (N for prismatic joints), the shape of ``q``.
    """
    n = bodies.dof
    Q = _batch(q, n, "q")
    QD = np.zeros_like(Q) if qd is None else _batch(qd, n, "qd")
    QDD = np.zeros_like(Q) if qdd is None else _batch(qdd, n, "qdd")
    if not (QD.shape == QDD.shape == Q.shape):
        raise ValueError(f"q, qd and qdd need the same shape, got {Q.shape}, {QD.shape}, {QDD.shape}")
    N = len(Q)
    ch = bodies.chain
    T = link_frames_batch(ch, Q)
    R, p = T[..., :3, :3], T[..., :3, 3]                                   # (N, n, 3, 3), (N, n, 3)
    z = np.einsum("nkij,kj->nki", R, ch.axes)                              # (N, n, 3) joint axes
    c = p + np.einsum("nkij,kj->nki", R, bodies.com)                       # (N, n, 3) centres of mass
    Iw = R @ bodies.inertia[None] @ np.swapaxes(R, -1, -2)                 # (N, n, 3, 3) world axes
    w = np.zeros((N, 3))
    dw = np.zeros((N, 3))
    a = np.broadcast_to(-bodies.gravity if gravity else np.zeros(3), (N, 3)).copy()
    prev = np.zeros((N, 3))
    F = np.empty((N, n, 3))
    M = np.empty((N, n, 3))
    for i in range(n):
        r = p[:, i] - prev
        a = a + np.cross(dw, r) + np.cross(w, np.cross(w, r))
        zi = z[:, i]
        if ch.prismatic[i]:
            a = a + 2.0 * np.cross(w, zi * QD[:, i, None]) + zi * QDD[:, i, None]
        else:
            dw = dw + zi * QDD[:, i, None] + np.cross(w, zi * QD[:, i, None])
            w = w + zi * QD[:, i, None]
        rc = c[:, i] - p[:, i]
        ac = a + np.cross(dw, rc) + np.cross(w, np.cross(w, rc))
        F[:, i] = bodies.mass[i] * ac
        Iw_i = Iw[:, i]
        M[:, i] = (Iw_i @ dw[..., None])[..., 0] + np.cross(w, (Iw_i @ w[..., None])[..., 0])
        prev = p[:, i]
    tau = np.empty((N, n))
    f = np.zeros((N, 3))
    m = np.zeros((N, 3))
    nxt = np.zeros((N, 3))
    for i in range(n - 1, -1, -1):
        if i < n - 1:
            m = m + np.cross(nxt - p[:, i], f)                             # child's force acts at its frame origin
        m = m + M[:, i] + np.cross(c[:, i] - p[:, i], F[:, i])
        f = f + F[:, i]
        tau[:, i] = np.einsum("nj,nj->n", z[:, i], f if ch.prismatic[i] else m)
        nxt = p[:, i]
    return tau.reshape(np.shape(q)) if np.ndim(q) == 1 else tau


def gravity_torque(bodies: RigidBodies, q) -> np.ndarray:
    """Joint torques (N·m / N) that hold the arm still at ``q`` ((n,) or (N, n))."""
    return inverse_dynamics(bodies, q)


def mass_matrix(bodies: RigidBodies, q) -> np.ndarray:
    """Joint-space inertia matrix M(q): (n, n) for (n,) ``q``, (N, n, n) for (N, n); kg·m² (kg for prismatic rows)."""
    n = bodies.dof
    Q = _batch(q, n, "q")
    out = np.empty((len(Q), n, n))
    zero = np.zeros_like(Q)
    for j in range(n):
        e = np.zeros_like(Q)
        e[:, j] = 1.0
        out[:, :, j] = inverse_dynamics(bodies, Q, zero, e, gravity=False)
    return out[0] if np.ndim(q) == 1 else out
