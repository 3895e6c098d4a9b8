"""A robot's IK, prepared once: its solver, branch labels, ranges, weights and travel rule.

:func:`robot_ik` returns the :class:`RobotIK` of a spec, built on first use and kept with the
spec (:meth:`~armtwin.robots.RobotSpec.derived`): the solver family is picked from the type of
``spec.geometry`` (:func:`solver_for`), told the joint ranges, and checked against the forward
kinematics (a geometry that does not fit the robot's chain fails here, loudly) and against the
reference travel rule.
"""
# mypy: disallow-untyped-defs, check-untyped-defs

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..kinematics import chain_of, fk
from ..transforms import rotation_angle
from .angles import TWO_PI, turn_near
from .geometry import IKGeometry, OffsetWristGeometry, ScaraGeometry, SphericalWristGeometry
from .offset_wrist import OffsetWristSolver
from .scara import ScaraSolver
from .solver import Singularity, Solver
from .spherical_wrist import SphericalWristSolver
from .travel import Candidate, TravelRule

if TYPE_CHECKING:   # the robots package builds on this one; the spec is only a type here
    from ...robots.spec import RobotSpec

__all__ = [
    "DEFAULT_ARM_WEIGHT",
    "DEFAULT_WRIST_WEIGHT",
    "LIMIT_TOL",
    "RobotIK",
    "default_weights",
    "robot_ik",
    "solver_for",
]

DEFAULT_ARM_WEIGHT = 1.0     # travel weight of J1–J3 (per rad, or per m for a prismatic joint)
DEFAULT_WRIST_WEIGHT = 0.25  # travel weight of J4 and beyond
# Slack on the joint limits (rad / m): a value this close beyond a limit counts as inside (the same
# tolerance as RobotSpec.within_limits and the command runner). It is not widened to the ~1e-8 rad
# by which a stretched elbow or a nearly free wrist joint is determined from a float pose, and
# joints are not clamped onto a limit: clamping a joint by 1e-8 rad moves the flange by ~1e-8 m
# and breaks the 1e-9 m / 1e-9 rad accuracy. The solvers are made accurate there instead: where
# the pose cannot tell, they keep q_near's value (.angles.elbow_angle, .angles.kept_angle).
LIMIT_TOL = 1e-9


def solver_for(geometry: IKGeometry) -> Solver:
    """The closed-form solver of a geometry's family (a new object, without joint ranges)."""
    if isinstance(geometry, SphericalWristGeometry):
        return SphericalWristSolver(geometry)
    if isinstance(geometry, OffsetWristGeometry):
        return OffsetWristSolver(geometry)
    if isinstance(geometry, ScaraGeometry):
        return ScaraSolver(geometry)
    raise TypeError(f"no closed-form IK for a {type(geometry).__name__}; expected one of the "
                    "geometry classes of armtwin.controllers.ik.geometry")


def default_weights(spec: RobotSpec) -> np.ndarray:
    """(n,) default travel weights: :data:`DEFAULT_ARM_WEIGHT` for J1–J3, :data:`DEFAULT_WRIST_WEIGHT` after."""
    w = np.full(spec.dof, DEFAULT_WRIST_WEIGHT)
    w[:3] = DEFAULT_ARM_WEIGHT
    return w


def robot_ik(spec: RobotSpec) -> RobotIK:
    """The prepared IK of a robot (built once per spec, then kept with it)."""
    return spec.derived(RobotIK)


class RobotIK:
    """Everything the IK entry points need per robot, prepared once (:func:`robot_ik`).

    Attributes:
        spec: the robot.
        n: number of joints.
        solver: the family's :class:`~.solver.Solver`, told the joint ranges.
        labels: branch labels, indexed by branch code.
        rule: the default :class:`~.travel.TravelRule` (default weights, any branch).
        weights: (n,) default travel weights.
        lower, upper: (n,) joint limits, rad / m; ``lower_t``, ``upper_t`` with :data:`LIMIT_TOL`.
        prismatic: (n,) which joints are prismatic.
        home: (n,) the home pose, the default ``q_near``.
        unwrap: revolute joints whose range is wider than (-π, π] (their 2π equivalents matter).

    Raises:
        ValueError: when the solver does not reproduce the robot's forward kinematics.
        TypeError: for a geometry without a closed-form family.
    """

    def __init__(self, spec: RobotSpec) -> None:
        self.spec = spec
        self.n = spec.dof
        self.solver: Solver = solver_for(spec.geometry)
        self.labels: tuple[str, ...] = tuple(self.solver.labels)
        self.labels_none = np.array(self.labels + ("",))   # batch branch names; "" (index B) where none
        self.solved_reason = tuple(f"solved on branch {lab}" for lab in self.labels)
        self.arm_mask: int = self.solver.arm_mask
        self.sing_info: Mapping[int, Singularity] = self.solver.singularities
        self.merged_table = np.array([self.merged(f) for f in range(2 * max(self.sing_info, default=1))])
        self.lower: list[float] = spec.lower.tolist()
        self.upper: list[float] = spec.upper.tolist()
        self.lower_t: list[float] = (spec.lower - LIMIT_TOL).tolist()   # limits with the tolerance
        self.upper_t: list[float] = (spec.upper + LIMIT_TOL).tolist()
        self.prismatic: list[bool] = spec.prismatic.tolist()
        self.home: list[float] = spec.home.tolist()
        self.solver.set_limits(self.lower, self.upper, LIMIT_TOL)
        self.weights: list[float] = default_weights(spec).tolist()
        self.unwrap = tuple(j for j in range(self.n) if not self.prismatic[j]
                            and (self.lower[j] < -math.pi - 1e-12 or self.upper[j] > math.pi + 1e-12))
        # (joint, lower, upper) of those joints, limits with tolerance
        self.wide = tuple((j, self.lower_t[j], self.upper_t[j]) for j in self.unwrap)
        self.is_wide = tuple(j in self.unwrap for j in range(self.n))
        self.rule = self.rule_for(self.weights)
        self._check(spec)

    def rule_for(self, weights: Sequence[float]) -> TravelRule:
        """The travel rule with these weights (any branch)."""
        return TravelRule(tuple(self.lower_t), tuple(self.upper_t), tuple(weights), self.is_wide)

    def fit_wide(self, cands: list[Candidate], qn: Sequence[float]) -> list[Candidate]:
        """Move wide-range joints of every candidate (in place) to the turn the rule takes; returns ``cands``."""
        for q, _code in cands:
            for j, lj, uj in self.wide:
                q[j] = turn_near(q[j], qn[j], lj, uj)
        return cands

    def candidates(self, t: list[float], qn: list[float]) -> list[Candidate]:
        """Every solution of pose ``t`` as ``(q list, code)``, wide joints fitted toward ``qn``."""
        return self.fit_wide(self.solver.solve(t, qn)[0], qn)

    def _check(self, spec: RobotSpec) -> None:
        """Make sure the solver reproduces the robot's FK (a spec of another layout fails here) and
        that its fused ``choose`` agrees with the reference rule :meth:`.TravelRule.pick`."""
        chain = chain_of(spec)
        rng = np.random.default_rng(12345)
        family = spec.family.value
        for q in [spec.home] + list(rng.uniform(spec.lower, spec.upper, (3, spec.dof)) * 0.8):
            T = fk(chain, q)
            t, qn = T.ravel().tolist(), q.tolist()
            cands, _ = self.solver.solve(t, qn)
            if not any(np.abs(T2[:3, 3] - T[:3, 3]).max() < 1e-8 and rotation_angle(T2[:3, :3], T[:3, :3]) < 1e-8
                       for T2 in (fk(chain, np.array(qq)) for qq, _code in cands)):
                raise ValueError(f"{spec.name}: the {family} IK does not reproduce the FK; "
                                 "the geometry or DH table does not fit this solver")
            got = self.solver.choose(t, qn, self.rule)
            if (got and got[:2]) != self.rule.pick(cands, qn):
                raise RuntimeError(f"{spec.name}: the {family} solver's choose() disagrees with "
                                   "TravelRule.pick() (a bug in the solver)")

    def within(self, q: Sequence[float]) -> bool:
        """All joints inside their ranges, with :data:`LIMIT_TOL`."""
        for v, lo, up in zip(q, self.lower_t, self.upper_t):
            if v < lo or v > up:
                return False
        return True

    def equivalents(self, q: list[float]) -> list[list[float]]:
        """``q`` and its 2π equivalents in wide-range joints that fit the ranges."""
        out = [q]
        for j in self.unwrap:
            more = []
            for base in out:
                for k in (-2, -1, 1, 2):
                    v = base[j] + k * TWO_PI
                    if self.lower_t[j] <= v <= self.upper_t[j]:
                        qq = list(base)
                        qq[j] = v
                        more.append(qq)
            out += more
        return out

    def violation(self, q: Sequence[float]) -> tuple[float, int, float]:
        """(total excess, worst joint index, its signed excess) of a joint vector outside its ranges."""
        total, worst, wv = 0.0, -1, 0.0
        for j in range(self.n):
            ex = q[j] - self.upper[j] if q[j] > self.upper[j] else (q[j] - self.lower[j] if q[j] < self.lower[j] else 0.0)
            total += abs(ex)
            if abs(ex) > abs(wv):
                worst, wv = j, ex
        return total, worst, wv

    def singular_reason(self, flags: int, q: Sequence[float],
                        q_near: Sequence[float] | None = None) -> tuple[tuple[int, ...], str]:
        """(free joints, "; "-joined description) of singularity ``flags`` for the joints ``q``.

        A free joint is "kept at" its value when it has ``q_near``'s (or no ``q_near`` is given),
        else "set to" it: the nearest value at which the rest of the arm reaches (AUBO-i5 J6).
        """
        free, text = [], []
        for bit, (j, _merge, what) in self.sing_info.items():
            if flags & bit:
                if j is None:
                    text.append(what)
                    continue
                free.append(j)
                d = 0.0 if q_near is None else q[j] - q_near[j]
                if not self.prismatic[j]:
                    d = math.remainder(d, 2.0 * math.pi)
                if q_near is None or abs(d) <= 1e-9:
                    text.append(f"{what}: J{j + 1} kept at {self.fmt_joint(j, q[j])}")
                else:
                    text.append(f"{what}: J{j + 1} set to {self.fmt_joint(j, q[j])}, the nearest value "
                                f"to {self.fmt_joint(j, q_near[j])} at which the arm reaches")
        return tuple(sorted(free)), "; ".join(text)

    def merged(self, flags: int) -> int:
        """Code bits whose branches coincide at a singularity with these flags."""
        bits = 0
        for bit, (_j, merge, _what) in self.sing_info.items():
            if flags & bit:
                bits |= merge
        return bits

    def fmt_joint(self, j: int, value: float) -> str:
        """A joint value for people: degrees, or mm for a prismatic joint."""
        return f"{value * 1000:.1f} mm" if self.prismatic[j] else f"{math.degrees(value):.1f}°"
