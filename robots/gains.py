"""The rule that sizes the hinge model's explicit spring–damper gains from a robot's inertia.

The hinge joint model (``JointMode.HINGE``) applies ``τ = K e + D ė`` computed explicitly at every
physics step ``h``; semi-implicit Euler on ``M q̈ = −K e − (D + d) ė`` (``d``: the engine's
viscous joint damping) is stable while the eigenvalues of ``M(q)⁻¹ (h² K + 2 h (D + d))`` stay
below 4. The defaults in the robot files are designed, not tuned by hand:

1. Per joint, with ``I_min`` the smallest joint inertia over the joint ranges without payload
   (the effective inertia ``1 / (M⁻¹)_ii``, or the diagonal ``M_ii`` — :class:`InertiaMeasure`)
   and ``I_max`` the largest diagonal ``M_ii`` with the rated payload:
   ``h² K + 2 h c = 2 I_min`` (``c = D + d``, the total damping) with damping ratio
   ``c / (2 √(K I_max)) = ζ`` (0.1), so the heaviest pose still rings down; ``d = c / 10``.
2. All gains are scaled by one factor so that the largest eigenvalue over :data:`POSES` random
   poses is :data:`TARGET` (2: half the explicit-Euler limit; the coupled J2–J3 mode buzzes at the
   Nyquist rate above that).
3. Rounded to two significant digits.

Pure numpy (:mod:`armtwin.controllers.dynamics`). ``python -m armtwin.robots.gains`` prints the
gains of every robot next to the ones in its file.
"""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass

import numpy as np

from ..controllers.dynamics import mass_matrix
from .bodies import rigid_bodies
from .spec import DriveGains, RobotSpec

__all__ = ["InertiaMeasure", "GainRule", "design_hinge_gains", "stability_eigenvalue", "rule_for", "RULES", "TARGET",
           "POSES"]

#: the largest eigenvalue of M⁻¹(h²K + 2h(D + d)) the defaults are scaled to (stability limit: 4)
TARGET = 2.0
#: random poses the inertia range and the scaling are taken over
POSES = 400


class InertiaMeasure(enum.Enum):
    """How a joint's smallest inertia is measured."""

    EFFECTIVE = "effective"   # 1 / (M⁻¹)_ii: the inertia the joint feels with the others free
    DIAGONAL = "diagonal"     # M_ii: with the others held


@dataclass(frozen=True)
class GainRule:
    """The design data of one robot's hinge gains.

    Attributes:
        h: physics step the gains are designed for, s.
        damping_ratio: ζ at the heaviest pose (rated payload): one value, or one per joint.
        joint_damping_share: part of the total damping that is the engine's joint damping.
        i_min: how the smallest inertia is measured.
        seed: random poses' seed.
    """

    h: float = 1.0 / 240.0
    damping_ratio: float | tuple[float, ...] = 0.1
    joint_damping_share: float = 0.1
    i_min: InertiaMeasure = InertiaMeasure.EFFECTIVE
    seed: int = 0


def _round2(v: np.ndarray) -> tuple[float, ...]:
    """Two significant digits."""
    out = []
    for x in np.asarray(v, dtype=float):
        if x == 0:
            out.append(0.0)
            continue
        e = int(np.floor(np.log10(abs(x)))) - 1
        out.append(float(round(x / 10.0 ** e) * 10.0 ** e) if e >= 0 else float(round(x, -e)))
    return tuple(out)


def stability_eigenvalue(spec: RobotSpec, drive: DriveGains, Q: np.ndarray, h: float, payload: float = 0.0) -> np.ndarray:
    """(N,) the largest real eigenvalue of ``M(q)⁻¹ (h² K + 2 h (D + d))`` at each pose of ``Q`` (N, n)."""
    A = np.diag(h * h * np.asarray(drive.stiffness) + 2 * h * (np.asarray(drive.damping) + np.asarray(drive.joint_damping)))
    M = mass_matrix(rigid_bodies(spec, payload=payload), Q)
    return np.array([np.max(np.linalg.eigvals(np.linalg.solve(m, A)).real) for m in M])


def design_hinge_gains(spec: RobotSpec, rule: GainRule = GainRule()) -> DriveGains:
    """The hinge gains of ``spec`` by the rule of the module docstring; other drive data kept."""
    rng = np.random.default_rng(rule.seed)
    Q = rng.uniform(spec.lower, spec.upper, (POSES, spec.dof))
    M0 = mass_matrix(rigid_bodies(spec), Q)
    M1 = mass_matrix(rigid_bodies(spec, payload=spec.payload), Q)
    if rule.i_min is InertiaMeasure.EFFECTIVE:
        i_min = (1.0 / np.einsum("kii->ki", np.linalg.inv(M0))).min(axis=0)
    else:
        i_min = np.einsum("kii->ki", M0).min(axis=0)
    i_max = np.einsum("kii->ki", M1).max(axis=0)
    h, z = rule.h, np.broadcast_to(np.asarray(rule.damping_ratio, dtype=float), (spec.dof,))
    # h² s² + 4 ζ h √I_max s − 2 I_min = 0 with s = √K, c = 2 ζ √(K I_max)
    b = 4 * z * h * np.sqrt(i_max)
    s = (-b + np.sqrt(b * b + 8 * h * h * i_min)) / (2 * h * h)
    K = s * s
    c = 2 * z * np.sqrt(K * i_max)
    trial = DriveGains(tuple(K), tuple(c * (1 - rule.joint_damping_share)), spec.drive.friction,
                       tuple(c * rule.joint_damping_share), spec.drive.position_gain, spec.drive.velocity_gain,
                       spec.drive.gravity_compensation, spec.drive.effort)
    scale = TARGET / float(stability_eigenvalue(spec, trial, Q, h).max())
    return DriveGains(_round2(K * scale), _round2(c * (1 - rule.joint_damping_share) * scale), spec.drive.friction,
                      _round2(c * rule.joint_damping_share * scale), spec.drive.position_gain, spec.drive.velocity_gain,
                      spec.drive.gravity_compensation, spec.drive.effort)


#: per robot, the rule its data file's gains follow (default: :class:`GainRule`). The AUBO-i5's
#: wrist (J4–J6, 13.5 N·m, axes J2 ∥ J3 ∥ J4) is whipped by the reaction of the big joints when
#: commands reverse fast; at ζ = 0.1 its J4 rang up to the stability guard in 20 of 20 random-action
#: Reach episodes (Cartesian control, 1/240 s; also at 1/960 s, so it is not the explicit step):
#: ζ = 0.3 on the wrist joints (measured: 96 of 100 episodes end without the guard, 50 of 50 with
#: joint control).
RULES = {"aubo_i5": GainRule(damping_ratio=(0.1, 0.1, 0.1, 0.3, 0.3, 0.3))}


def rule_for(name: str) -> GainRule:
    """The gain rule of robot ``name``."""
    return RULES.get(name, GainRule())


def main(argv: list[str] | None = None) -> int:
    """Print every robot's designed hinge gains and the ones in its data file."""
    from . import get, names
    for name in names():
        spec = get(name)
        rule = rule_for(name)
        d = design_hinge_gains(spec, rule)
        print(f"{name} ({rule.i_min.value} I_min, damping ratio {rule.damping_ratio}):")
        for field in ("stiffness", "damping", "joint_damping"):
            print(f"  {field:14s} designed {getattr(d, field)}\n  {'':14s} in file  {getattr(spec.drive, field)}")
    return 0



if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
