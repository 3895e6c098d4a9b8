"""The hinge model's drive, measured and designed on the engine's own mass matrix.

The hinge model (:class:`~armtwin.envs.config.JointMode.HINGE`) applies an explicit spring–damper
``tau = K e + D ė`` per joint. Two numbers decide whether it is usable:

* **stability** of the explicit step: semi-implicit Euler on ``M q̈ = −K e − D ė`` is stable while
  ``eig(M⁻¹(h²K + 2h(D + d))) < 4`` at physics step h (d: the joint's own viscous damping); the
  robots' drives are designed to 2 (half the limit) at the design step 1/240 s;
* **damping**: joint i's damping ratio ``ζ_i = (D_i + d_i) / (2 √(K_i M_ii))`` is smallest at the
  pose where its inertia ``M_ii`` is largest. A lightly damped spring rings: a policy's command
  steps (each up to ``v_max·dt``) excite the ringing, whose peak speed is about
  ``v_max·dt·ω_n / (2ζ)``; above 10 × ``v_max`` the stability guard (rightly) stops the episode.
  So ``ζ >= dt·ω_n / 20`` at the heaviest pose keeps any policy inside the guard.

:func:`design_hinge_gains` keeps the shape of a drive's stiffnesses and finds the largest scale for
which the stability margin holds with the damping set to ``zeta_min`` at every joint's heaviest
pose; :func:`hinge_report` measures a drive; ``python -m armtwin.envs.drives ROBOT`` prints both
(robot data are re-derived with it when masses or inertias change). Mass matrices come from
PyBullet through :class:`~armtwin.envs.sim.World` (this module does not import PyBullet itself).

Units: N·m/rad, N·m·s/rad (N/m, N·s/m for prismatic joints), kg·m², s.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

import numpy as np

from ..robots import RobotSpec
from ..robots.spec import DriveGains

__all__ = ["DESIGN_STEP", "STABILITY_MARGIN", "ZETA_MIN", "mass_matrices", "HingeReport", "hinge_report",
           "design_hinge_gains"]

#: s, the physics step the robots' hinge drives are designed for
DESIGN_STEP = 1.0 / 240.0
#: the designed largest eigenvalue of M⁻¹(h²K + 2hD): half the explicit-Euler limit 4
STABILITY_MARGIN = 2.0
#: the smallest damping ratio at a joint's heaviest pose (see the module docstring)
ZETA_MIN = 0.2
#: share of the total damping that is the joint's own viscous damping (the rest is the drive's D)
JOINT_DAMPING_SHARE = 0.1


#: (id(spec), n, seed) -> (spec, matrices); the spec is kept so that its id stays its own
_CACHE: dict[tuple[int, int, int], tuple[RobotSpec, np.ndarray]] = {}


def mass_matrices(spec: RobotSpec, n: int = 400, seed: int = 0) -> np.ndarray:
    """Joint-space inertia matrices (n, dof, dof) at ``n`` seeded random poses inside the joint ranges
    (the engine's model, no payload; cached per robot spec object, read-only)."""
    from .config import JointMode
    from .sim import World

    key = (id(spec), int(n), int(seed))
    if key not in _CACHE:
        rng = np.random.default_rng(seed)
        with World(ground=False) as w:
            r = w.add_robot(spec, JointMode.KINEMATIC)
            M = np.array([r.mass_matrix(rng.uniform(spec.lower, spec.upper)) for _ in range(int(n))])
        M.setflags(write=False)
        _CACHE[key] = (spec, M)
    return _CACHE[key][1]


def _worst_eig(Minv: np.ndarray, h: float, K: np.ndarray, Dt: np.ndarray) -> float:
    A = h * h * K + 2.0 * h * Dt
    return float(np.max(np.linalg.eigvals(Minv * A[None, None, :]).real))


@dataclass(frozen=True)
class HingeReport:
    """How a hinge drive behaves over a robot's poses.

    Attributes:
        step: the physics step the report is for, s.
        worst_eig: max over the poses of eig(M⁻¹(h²K + 2h(D + d))) (stable below 4).
        zeta_min: (dof,) each joint's damping ratio at its heaviest pose.
        zeta_max: (dof,) ... at its lightest pose.
        omega_max: (dof,) each joint's natural frequency at its lightest pose, rad/s.
    """

    step: float
    worst_eig: float
    zeta_min: np.ndarray
    zeta_max: np.ndarray
    omega_max: np.ndarray


def hinge_report(spec: RobotSpec, drive: DriveGains | None = None, step: float = DESIGN_STEP,
                 n: int = 400) -> HingeReport:
    """Measure ``drive`` (default the robot's) on ``n`` random poses at physics step ``step``."""
    d = drive or spec.drive
    M = mass_matrices(spec, n)
    diag = np.diagonal(M, axis1=1, axis2=2)
    K = np.asarray(d.stiffness, float)
    Dt = np.asarray(d.damping, float) + np.asarray(d.joint_damping, float)
    return HingeReport(step, _worst_eig(np.linalg.inv(M), step, K, Dt),
                       Dt / (2 * np.sqrt(K * diag.max(0))), Dt / (2 * np.sqrt(K * diag.min(0))),
                       np.sqrt(K / diag.min(0)))


def design_hinge_gains(spec: RobotSpec, *, step: float = DESIGN_STEP, zeta_min: float = ZETA_MIN,
                       margin: float = STABILITY_MARGIN, n: int = 400) -> DriveGains:
    """The stiffest drive with the shape of ``spec.drive``'s stiffness that is damped to ``zeta_min``
    at every joint's heaviest pose and keeps ``worst_eig <= margin`` at ``step``.

    K = s·K_robot with the largest s found by bisection; total damping 2·zeta_min·√(K·M_ii,max), of
    which :data:`JOINT_DAMPING_SHARE` is the joint's viscous damping. Friction, efforts and the
    articulation gains are kept.
    """
    if not (0 < zeta_min <= 2 and 0 < margin < 4 and step > 0):
        raise ValueError("zeta_min must be in (0, 2], margin in (0, 4) and step > 0")
    M = mass_matrices(spec, n)
    Minv = np.linalg.inv(M)
    i_max = np.diagonal(M, axis1=1, axis2=2).max(0)
    shape = np.asarray(spec.drive.stiffness, float)

    def gains(s: float) -> tuple[np.ndarray, np.ndarray]:
        K = s * shape
        return K, 2.0 * zeta_min * np.sqrt(K * i_max)

    lo, hi = 0.0, 1.0
    while _worst_eig(Minv, step, *gains(hi)) < margin:
        lo, hi = hi, 2.0 * hi
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _worst_eig(Minv, step, *gains(mid)) < margin else (lo, mid)
    K, Dt = gains(lo)
    jd = JOINT_DAMPING_SHARE * Dt
    return dataclasses.replace(spec.drive, stiffness=tuple(float(v) for v in K),
                               damping=tuple(float(v) for v in Dt - jd), joint_damping=tuple(float(v) for v in jd))


def _main() -> None:
    from .. import robots

    p = argparse.ArgumentParser(prog="python -m armtwin.envs.drives",
                                description="measure a robot's hinge drive and design one by the damping rule")
    p.add_argument("robot")
    p.add_argument("--zeta", type=float, default=ZETA_MIN, help=f"damping ratio at the heaviest pose (default {ZETA_MIN})")
    a = p.parse_args()
    spec = robots.get(a.robot)
    for name, drive in (("robot data", spec.drive), (f"design (zeta >= {a.zeta:g})", design_hinge_gains(spec, zeta_min=a.zeta))):
        r = hinge_report(spec, drive)
        print(f"{name}: worst eig {r.worst_eig:.2f} at h = {r.step:.5f} s")
        print(f"  stiffness     {np.array2string(np.array(drive.stiffness), precision=4)}")
        print(f"  damping       {np.array2string(np.array(drive.damping), precision=4)}")
        print(f"  joint_damping {np.array2string(np.array(drive.joint_damping), precision=4)}")
        print(f"  zeta at the heaviest pose {np.round(r.zeta_min, 3)}, at the lightest {np.round(r.zeta_max, 3)}")


if __name__ == "__main__":
    _main()
