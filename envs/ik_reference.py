"""PyBullet's numerical IK as a reference solver for ``armtwin bench ik``.

This is the one module besides :mod:`armtwin.envs.sim` that imports :mod:`pybullet`, on
purpose: the benchmark compares armtwin's closed-form IK with
``pybullet.calculateInverseKinematics`` on the same URDF, and that call works on a bare
kinematic body that the simulator facade has no reason to expose (no world, no drives, no
stepping). Nothing else in armtwin may use this module to solve IK; use
:mod:`armtwin.controllers.ik`.

Each call opens its own DIRECT client (never the global connection), loads the robot's URDF
with a fixed base, solves every pose seeded from the same joint vector (the home pose by
default; the joints are reset to it before each pose — passing it as ``currentPositions``
instead converges far worse in PyBullet 3.2), and disconnects.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pybullet

from ..controllers.transforms import matrix_to_quat

__all__ = ["PyBulletIKSettings", "pybullet_ik"]


@dataclass(frozen=True)
class PyBulletIKSettings:
    """Settings of ``pybullet.calculateInverseKinematics`` (damped least squares, IK_DLS).

    Attributes:
        max_iterations: ``maxNumIterations`` per call.
        residual_threshold: ``residualThreshold`` (m) at which PyBullet stops iterating.
        damping: ``jointDamping`` for every joint (dimensionless DLS damping).
        null_space: pass the joint limits, ranges and the seed as rest pose (PyBullet's
            null-space variant, which keeps joints inside their ranges).
        restarts: extra calls per pose, each seeded from the previous answer (0: one call).
        The defaults are the best of a small sweep on the IRB120 (``armtwin bench ik`` prints
        them with the results).
    """

    max_iterations: int = 1000
    residual_threshold: float = 1e-7
    damping: float = 1e-4
    null_space: bool = False
    restarts: int = 0


def _tool_link(client: int, body: int, name: str) -> int:
    for j in range(pybullet.getNumJoints(body, physicsClientId=client)):
        info = pybullet.getJointInfo(body, j, physicsClientId=client)
        if info[12].decode() == name:
            return j
    raise ValueError(f"link {name!r} not found in the URDF")


def pybullet_ik(spec, T, q_seed=None, settings: PyBulletIKSettings = PyBulletIKSettings(),
                link: str = "tool0") -> tuple[np.ndarray, float]:
    """Solve N poses with ``pybullet.calculateInverseKinematics``.

    Args:
        spec: the robot (its generated URDF is loaded).
        T: (N, 4, 4) flange poses in the robot's reporting base frame, metres.
        q_seed: (n,) joints every pose starts from, rad / m; default the home pose.
        settings: solver settings.
        link: the target link of the URDF.

    Returns:
        (Q, seconds): (N, n) answers (rad / m; not checked — verify them with the FK) and the
        wall time spent seeding and inside ``calculateInverseKinematics`` (s).
    """
    T = np.asarray(T, dtype=float).reshape(-1, 4, 4)
    seed = (spec.home if q_seed is None else np.asarray(q_seed, dtype=float)).tolist()
    T_root = spec.report_frame.matrix @ T                   # reporting frame -> URDF root
    pos = T_root[:, :3, 3].tolist()
    quat = matrix_to_quat(T_root[:, :3, :3]).tolist()
    client = pybullet.connect(pybullet.DIRECT)
    try:
        body = pybullet.loadURDF(str(spec.urdf_path), useFixedBase=True, physicsClientId=client)
        tool = _tool_link(client, body, link)
        n = spec.dof
        damping = [settings.damping] * n
        extra = {}
        if settings.null_space:
            extra = {"lowerLimits": spec.lower.tolist(), "upperLimits": spec.upper.tolist(),
                     "jointRanges": (spec.upper - spec.lower).tolist(), "restPoses": seed}
        movable = [j for j in range(pybullet.getNumJoints(body, physicsClientId=client))
                   if pybullet.getJointInfo(body, j, physicsClientId=client)[2] != pybullet.JOINT_FIXED]
        out = np.empty((len(T), n))
        ik, reset = pybullet.calculateInverseKinematics, pybullet.resetJointState
        its, thr = settings.max_iterations, settings.residual_threshold
        spent = 0.0
        for i in range(len(T)):
            t0 = time.perf_counter()
            cur = seed
            for _ in range(settings.restarts + 1):
                for j, v in zip(movable, cur):
                    reset(body, j, v, physicsClientId=client)
                cur = ik(body, tool, pos[i], quat[i], jointDamping=damping,
                         maxNumIterations=its, residualThreshold=thr, physicsClientId=client, **extra)
            spent += time.perf_counter() - t0
            out[i] = cur[:n]
        return out, spent
    finally:
        pybullet.disconnect(physicsClientId=client)
