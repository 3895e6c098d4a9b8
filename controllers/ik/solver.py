"""What every closed-form IK family provides: the :class:`Solver` protocol, and its common base.

A solver works on plain Python lists for one pose (a control loop's hot path: no numpy
overhead per call) and on arrays for a batch. Targets are the 16 entries of a (4, 4) flange
pose, row-major, metres; joint vectors are (n,) lists, rad / m. Each solution carries a branch
``code``, an index into :attr:`Solver.labels`, and singularity flags (``SING_*`` bits).

:class:`BranchSolver` implements :meth:`~Solver.solve`, :meth:`~Solver.solve_flags` and
:meth:`~Solver.choose` over one body per family, ``_branches``, so that listing every solution
and choosing one compute the same floats; a family adds its geometry, ``_branches``,
``solve_batch`` and ``branch_code``, and overrides :meth:`~Solver.set_limits` if its answers
depend on the joint ranges.
"""
# mypy: disallow-untyped-defs, check-untyped-defs

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol, overload

import numpy as np

from .travel import Candidate, TravelRule

__all__ = [
    "SING_ELBOW",
    "SING_J1_AXIS",
    "SING_SHOULDER",
    "SING_WRIST",
    "AllBranches",
    "BranchSolver",
    "Candidate",
    "Chosen",
    "Singularity",
    "Solver",
]

# Singularity flags of a solution (bits of an int), as the solvers detect them: exactly singular
# to the float precision of a pose (the solvers' 1e-10 threshold), not merely close.
SING_J1_AXIS = 1   # wrist centre on the J1 axis (IRB120): J1 free, kept at q_near's value
SING_WRIST = 2     # wrist aligned, theta5 = 0: IRB120 J4 free (J6 takes the rest), AUBO J6 free
SING_ELBOW = 4     # arm stretched or folded: one elbow solution instead of two (no free joint)
SING_SHOULDER = 8  # AUBO J5 centre exactly d2 from the J1 axis: the two J1 roots meet (no free joint)

#: every real branch of one pose: (candidates, distance m out of reach (0 when one solves), flags per candidate)
AllBranches = tuple[list[Candidate], float, list[int]]
#: the chosen solution: (q list (n,) rad / m with wide joints fitted, branch code, singularity flags)
Chosen = tuple[list[float], int, int]


class Singularity(NamedTuple):
    """What one singularity flag means for a family.

    Attributes:
        free_joint: 0-based index of the joint the pose does not determine there (kept from
            ``q_near``), or None when no joint is free (a branch is lost instead).
        merged: branch-code bits whose branches coincide there.
        text: a description for people.
    """

    free_joint: int | None
    merged: int
    text: str


class Solver(Protocol):
    """A closed-form IK family, as :class:`~armtwin.controllers.ik.RobotIK` uses it.

    Attributes:
        labels: branch names, indexed by branch code (e.g. ``"front/up/noflip"``, ``"right"``).
        arm_mask: code bits that describe the arm (shoulder, elbow), not the wrist: the bits
            :func:`~armtwin.controllers.ik.solve_path` keeps along a path.
        singularities: flag bit -> :class:`Singularity`, for every ``SING_*`` flag it sets.
    """

    @property
    def labels(self) -> tuple[str, ...]: ...
    @property
    def arm_mask(self) -> int: ...
    @property
    def singularities(self) -> Mapping[int, Singularity]: ...

    def set_limits(self, lower: Sequence[float], upper: Sequence[float], tol: float) -> None:
        """Joint ranges (n,) rad / m and the slack beyond them that still counts as inside.

        Called once, when the robot's IK is prepared. A family whose answers depend on the
        ranges uses them (the AUBO-i5 places its free J6 at the wrist singularity where J2–J4
        fit their ranges); the others ignore them.
        """

    def solve(self, t: list[float], qn: list[float]) -> tuple[list[Candidate], float]:
        """Every real branch of one pose: :meth:`solve_flags` without the flags."""

    def solve_flags(self, t: list[float], qn: list[float]) -> AllBranches:
        """Every real branch of one pose, with the singularity flags of each.

        Args:
            t: the 16 entries of the (4, 4) target, row-major, metres.
            qn: (n,) reference joints, rad / m: the value of a free joint at a singularity,
                and the turn of wide joints.

        Returns:
            (candidates, distance, flags): ``(q list (n,), code)`` per real branch (revolute
            joints wrapped to (-pi, pi], except a joint the family unwraps toward ``qn``), the
            distance (m) by which the target misses the reachable set (0 when a branch
            solves), and per candidate its ``SING_*`` flags (0 for a regular solution).
        """

    def choose(self, t: list[float], qn: list[float], rule: TravelRule) -> Chosen | None:
        """The solution ``rule.pick`` would take from :meth:`solve`, without building the others.

        Returns:
            (q list with wide joints fitted, code, singularity flags), or None when no solution
            qualifies (out of reach, out of range or not on the wanted branch: ask
            :meth:`solve_flags` why).
        """

    def solve_batch(self, T: np.ndarray, qn: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every branch of N poses, vectorised; the same solutions as :meth:`solve_flags`.

        Args:
            T: (N, 4, 4) targets, metres.
            qn: (N, n) reference joints, rad / m.

        Returns:
            (J, distance, flags): J (n, N, B) joint-major solutions (rad / m; NaN for a
            branch without a real solution; last axis indexed by branch code), (N,) distance
            (m) out of reach (0 where a branch solves), and (N, B) int ``SING_*`` flags.
        """

    def branch_code(self, q: Sequence[float]) -> int:
        """Branch code (index into :attr:`labels`) of a joint vector (n,) rad / m."""


class BranchSolver:
    """Base of the families: :meth:`solve`, :meth:`solve_flags` and :meth:`choose` run one body.

    A subclass defines ``_branches(t, qn, rule)``: with ``rule`` None it returns every
    candidate, the distance and the flags (:data:`AllBranches`), otherwise the candidate
    ``rule.pick`` would take from them (:data:`Chosen`, or None), computed in the same order
    and with the same floats. With a rule, travel is summed joint by joint (wide joints moved
    to their nearest turn first), and a branch is dropped as soon as a joint is out of range,
    it is not on the wanted branch, or its partial sum reaches the best total so far; which
    partial sums a family checks is said in its class docstring.
    """

    def set_limits(self, lower: Sequence[float], upper: Sequence[float], tol: float) -> None:
        """See :meth:`Solver.set_limits`; the ranges are not needed here."""

    def solve(self, t: list[float], qn: list[float]) -> tuple[list[Candidate], float]:
        """Every real branch of one pose: :meth:`solve_flags` without the flags."""
        out, dist, _ = self._branches(t, qn, None)
        return out, dist

    def solve_flags(self, t: list[float], qn: list[float]) -> AllBranches:
        """Every real branch of one pose, with the singularity flags of each (:meth:`Solver.solve_flags`)."""
        return self._branches(t, qn, None)

    def choose(self, t: list[float], qn: list[float], rule: TravelRule) -> Chosen | None:
        """The solution ``rule.pick`` would take, without building the others (:meth:`Solver.choose`)."""
        return self._branches(t, qn, rule)

    @overload
    def _branches(self, t: list[float], qn: list[float], ch: None) -> AllBranches: ...
    @overload
    def _branches(self, t: list[float], qn: list[float], ch: TravelRule) -> Chosen | None: ...

    def _branches(self, t: list[float], qn: list[float], ch: TravelRule | None) -> AllBranches | Chosen | None:
        raise NotImplementedError   # pragma: no cover - every family defines it
