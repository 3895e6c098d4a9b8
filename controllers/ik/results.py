"""What the IK entry points return: :class:`IKResult` (one pose), :class:`BatchIKResult`,
:class:`PathIKResult`, the outcome :class:`IKStatus`, and the solution filter type :data:`Reject`."""
# mypy: disallow-untyped-defs, check-untyped-defs

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Union

import numpy as np

from .travel import Candidate

if TYPE_CHECKING:
    from .model import RobotIK

__all__ = ["BatchIKResult", "IKResult", "IKSolution", "IKStatus", "PathIKResult", "Reject", "rejection"]

#: A solution filter: called with a candidate joint vector ((n,) array, rad / m; a copy), it
#: returns False, None or "" to accept it, True or a reason (one line for people, e.g.
#: ``"link_3 touches the table by 2.1 mm"``) to reject it. See :func:`~armtwin.controllers.ik.solve`.
Reject = Callable[[np.ndarray], Union[bool, str, None]]

_REJECTED = "rejected by the solution filter"


def rejection(reject: Reject, q: list[float]) -> str:
    """Why ``reject`` refuses the joint vector ``q`` (rad / m), or "" when it accepts it."""
    got = reject(np.array(q))
    if isinstance(got, str):
        return got
    return _REJECTED if got else ""


class IKStatus(enum.Enum):
    """Outcome of an IK request.

    SOLVED: a solution inside the joint ranges (and accepted by the solution filter) was chosen.
    UNREACHABLE: no solution (the pose is out of reach by :attr:`IKResult.distance`), or, with
        ``stay_on_branch``, none on the requested branch.
    OUT_OF_RANGE: solutions exist, but none inside the joint ranges (the reason names the joint).
    SINGULAR: with ``stay_on_branch`` only: the pose is singular and ``q_near``'s branch merges
        there with another branch (wrist flip / no flip at q5 = 0, elbow up / down of a stretched
        or folded arm, the AUBO's two shoulders when its J5 centre is d2 from the J1 axis), so
        it has no solution of its own; the reason names the singularity and the branches that
        exist. ``best`` is None, ``ok`` False.
    REJECTED: solutions inside the joint ranges exist, but the solution filter (``reject``)
        refused every one; the reason gives the filter's reason for the nearest.

    A reachable singular pose with an in-range solution is SOLVED, with
    :attr:`IKResult.singular` set (consumers that check ``ok`` keep working).
    """

    SOLVED = "solved"
    UNREACHABLE = "unreachable"
    OUT_OF_RANGE = "out_of_range"
    SINGULAR = "singular"
    REJECTED = "rejected"


@dataclass(frozen=True, eq=False)
class IKSolution:
    """One closed-form solution.

    Attributes:
        q: (n,) joint vector, rad (m for prismatic joints).
        branch: branch label, e.g. ``"front/up/noflip"`` or ``"right"``.
        within_limits: all joints inside their ranges.
        rejected: why the solution filter refused it; "" when it accepted it or none was given.
    """

    q: np.ndarray
    branch: str
    within_limits: bool
    rejected: str = ""


@dataclass(frozen=True, eq=False)
class IKResult:
    """Result of :func:`~armtwin.controllers.ik.solve`.

    Attributes:
        status: the outcome.
        best: (n,) chosen joint vector (rad / m), or None unless SOLVED.
        best_branch: branch label of ``best``, or None.
        reason: one line for people (distances in mm, angles in degrees).
        distance: metres by which the target is out of reach (0 when reachable).
        singular: the chosen solution lies on a singularity, exactly to the float precision of
            the pose (the solvers' 1e-10 threshold on |sin theta5| and on the wrist centre's
            distance to the J1 axis, m): wrist aligned (theta5 = 0), wrist centre on the J1 axis
            (IRB120), arm stretched or folded (one elbow solution), AUBO shoulder (one J1 root).
            Also True for the SINGULAR status. The reason names the singularity.
        free_joints: 0-based indices of the joints the pose does not determine, whose value was
            kept from ``q_near`` (the joints coupled to them take the rest): IRB120 J4 at the
            wrist singularity (J4 + J6 fixed) and J1 on the J1 axis, AUBO-i5 J6 at the wrist
            singularity. Empty when not singular, and for a stretched / folded arm or the
            AUBO's shoulder singularity (a branch is lost there, no joint is free).
        solutions: every closed-form solution (inside the ranges or not), built on first access;
            with a solution filter each carries its verdict (:attr:`IKSolution.rejected`).
    """

    status: IKStatus
    best: np.ndarray | None
    best_branch: str | None
    reason: str
    distance: float = 0.0
    singular: bool = False
    free_joints: tuple[int, ...] = ()
    _raw: list[Candidate] | None = field(default=None, repr=False)   # (q list, code) per solution; None: solve again
    _ctx: RobotIK | None = field(default=None, repr=False)           # the robot's prepared IK
    _src: tuple[list[float], list[float]] | None = field(default=None, repr=False)   # (pose list, q_near list) when _raw is None
    _reject: Reject | None = field(default=None, repr=False)         # the solution filter, if any

    @property
    def ok(self) -> bool:
        """True when a solution was chosen (status SOLVED)."""
        return self.status is IKStatus.SOLVED

    @cached_property
    def solutions(self) -> tuple[IKSolution, ...]:
        """All solutions, best first, then in branch order; 2π equivalents that fit the range included."""
        ctx = self._ctx
        if ctx is None:
            return ()
        raw = self._raw if self._raw is not None else ctx.candidates(*self._src) if self._src is not None else []
        best = None if self.best is None else self.best.tolist()   # lists compare faster than arrays
        reject = self._reject
        first: list[IKSolution] = []
        rest: list[IKSolution] = []
        for q, code in raw:
            for qq in ctx.equivalents(q):
                s = IKSolution(np.array(qq), ctx.labels[code], ctx.within(qq)) if reject is None else \
                    IKSolution(np.array(qq), ctx.labels[code], ctx.within(qq), rejection(reject, qq))
                (first if qq == best else rest).append(s)
        return tuple(first + rest)


@dataclass(frozen=True, eq=False)
class BatchIKResult:
    """Result of :func:`~armtwin.controllers.ik.solve_batch` for N poses.

    Attributes:
        q: (N, n) chosen joint vectors (rad / m), NaN rows where not SOLVED.
        ok: (N,) bool, SOLVED.
        status: (N,) object array of :class:`IKStatus`.
        branch: (N,) str, branch label of the chosen solution ("" where none).
        distance: (N,) metres out of reach (0 when reachable).
        solutions: (N, B, n) every branch's solution (rad / m; NaN where a branch has no real
            solution), indexed like :func:`~armtwin.controllers.ik.branch_labels`; wide-range
            joints are taken nearest ``q_near`` and inside the range.
        within: (N, B) bool, that branch's solution is inside the ranges.
        singular: (N,) bool, as :attr:`IKResult.singular` (the chosen solution, or the
            SINGULAR status, is at a singularity).
    """

    q: np.ndarray
    ok: np.ndarray
    status: np.ndarray
    branch: np.ndarray
    distance: np.ndarray
    solutions: np.ndarray = field(repr=False)
    within: np.ndarray = field(repr=False)
    singular: np.ndarray = field(repr=False)


@dataclass(frozen=True, eq=False)
class PathIKResult:
    """Result of :func:`~armtwin.controllers.ik.solve_path` for N samples.

    Attributes:
        q: (N, n) joint vectors (rad / m), continuous along the path; NaN from the first failure on.
        ok: (N,) bool per sample (False from the first failure on).
        first_failure: index of the first sample that cannot be followed, or None.
        reason: why it failed ("" when the whole path is fine).
        branch: the arm configuration label kept along the path (the start's).
    """

    q: np.ndarray
    ok: np.ndarray
    first_failure: int | None
    reason: str
    branch: str

    @property
    def all_ok(self) -> bool:
        """True when every sample was followed."""
        return self.first_failure is None
