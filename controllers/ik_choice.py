"""The weighted shortest-travel choice shared by the closed-form IK solvers (pure Python).

:class:`Choice` carries what the choice needs besides the candidates and ``q_near``: joint
ranges (with their tolerance), travel weights, which joints are wider than a turn, and an
optional branch filter. The solvers use it in ``choose`` to pick one solution while they
compute the branches, skipping the rest of a branch as soon as its partial travel cannot win;
:func:`pick` is the same rule applied to a finished candidate list.

The rule, everywhere: each joint wider than a turn is first moved to its 2π equivalent nearest
``q_near`` and kept inside its range (:func:`fit`); among the candidates inside every range
(and on the wanted branch) the one with the smallest ``sum_j w_j * |q_j - q_near_j|``, summed
in joint order, wins; ties go to the first candidate in the solver's order.

:func:`travel` is the rule for some consecutive joints of one candidate (what :func:`pick`
applies to whole candidates), and :class:`BranchSolver` the base of the 6R solvers, whose
``solve`` and ``choose`` run one body.

Skipping is exact: every travel term is >= 0 and rounded addition of non-negative numbers is
monotone, so no partial sum (nor a sum of a subset of the terms, added in joint order) exceeds
the total, and a branch whose partial sum already reaches the best total cannot win.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

__all__ = ["SING_ELBOW", "SING_J1_AXIS", "SING_SHOULDER", "SING_WRIST", "BranchSolver", "Choice", "fit", "pick", "travel"]

_TWO_PI = 2.0 * math.pi
_PI = math.pi

# Singularity flags of a solution (bits of an int), as the solvers detect them: exactly singular
# to the float precision of a pose (the solvers' 1e-10 threshold), not merely close.
SING_J1_AXIS = 1   # wrist centre on the J1 axis (IRB120): J1 free, kept at q_near's value
SING_WRIST = 2     # wrist aligned, theta5 = 0: IRB120 J4 free (J6 takes the rest), AUBO J6 free
SING_ELBOW = 4     # arm stretched or folded: one elbow solution instead of two (no free joint)
SING_SHOULDER = 8  # AUBO J5 centre exactly d2 from the J1 axis: the two J1 roots meet (no free joint)


def fit(v: float, r: float, lo: float, hi: float) -> float:
    """2π equivalent of ``v`` nearest ``r``, moved by a turn when that keeps it inside [lo, hi] (rad)."""
    d = r - v
    if d > _PI or d < -_PI:
        v += _TWO_PI * round(d / _TWO_PI)
    if v > hi:
        if v - _TWO_PI >= lo:
            v -= _TWO_PI
    elif v < lo and v + _TWO_PI <= hi:
        v += _TWO_PI
    return v


@dataclass(frozen=True, slots=True)
class Choice:
    """Parameters of the choice, built once per robot (and per set of weights or branch filter).

    Attributes:
        lo: (n,) lower limits minus the tolerance, rad / m.
        hi: (n,) upper limits plus the tolerance, rad / m.
        w: (n,) travel weights (>= 0, finite), per rad / per m.
        wide: (n,) revolute joint whose range is wider than (-π, π].
        want: code bits a candidate must have on ``mask`` (``code & mask == want``).
        mask: code bits that are filtered; 0 accepts every branch.
    """

    lo: tuple[float, ...]
    hi: tuple[float, ...]
    w: tuple[float, ...]
    wide: tuple[bool, ...]
    want: int = 0
    mask: int = 0

    def with_branch(self, want: int, mask: int) -> Choice:
        """The same choice restricted to codes with ``code & mask == want & mask``."""
        return replace(self, want=want & mask, mask=mask)


def travel(choice: Choice, qn: list, j: int, vals, cost: float):
    """Joints ``j, j+1, ...`` of a candidate as the choice takes them.

    Wide joints are fitted (:func:`fit`), every value is checked against its range, and the
    weighted travel of these joints is added to ``cost`` in joint order (the rounding
    :func:`pick` and the solvers' partial sums rely on).

    Args:
        choice: ranges, weights and wide joints.
        qn: (n,) reference joints, rad / m.
        j: index of the first joint in ``vals``.
        vals: the values of joints ``j, j+1, ...``, rad / m.
        cost: travel of joints ``0 .. j-1`` so far.

    Returns:
        (fitted values list, cost with their travel added), or None when a joint is out of range.
    """
    lo, hi, w, wide = choice.lo, choice.hi, choice.w, choice.wide
    out = []
    for k, v in enumerate(vals, j):
        if wide[k]:
            v = fit(v, qn[k], lo[k], hi[k])
        if v < lo[k] or v > hi[k]:
            return None
        out.append(v)
    for k, v in enumerate(out, j):
        cost += w[k] * abs(v - qn[k])
    return out, cost


def pick(choice: Choice, cands: list, qn: list):
    """Apply the choice to a finished candidate list (``(q list, code)`` pairs; q is not changed).

    Returns:
        (q list with wide joints fitted, code) of the chosen candidate, or None.
    """
    best, bcode, bcost = None, -1, math.inf
    want, mask = choice.want, choice.mask
    for q, code in cands:
        if (code & mask) != want:
            continue
        got = travel(choice, qn, 0, q, 0.0)
        if got is not None and got[1] < bcost:
            best, bcode, bcost = got[0], code, got[1]
    return None if best is None else (best, bcode)

class BranchSolver:
    """Base of the 6R solvers: :meth:`solve` and :meth:`choose` run one body, ``_branches``.

    A subclass defines ``_branches(t, qn, choice)``: with ``choice`` None it returns every
    candidate and a distance, otherwise the candidate :func:`pick` would take from them (or
    None), computed in the same order and with the same floats. With a choice, travel is summed
    joint by joint (wide joints through :func:`fit` first), and a branch is dropped as soon as a
    joint is out of range, it is not on the wanted branch, or its partial sum reaches the best
    total so far; which partial sums a family checks is said in its class docstring.
    """

    geometry_keys: tuple[str, ...] = ()   # lengths (m) read from ``spec.geometry`` into attributes

    def __init__(self, geometry, offsets) -> None:
        """Read the family's lengths (:attr:`geometry_keys`, metres) and the (n,) DH offsets (rad)."""
        for key in self.geometry_keys:
            setattr(self, key, float(geometry[key]))
        self.off = tuple(float(o) for o in offsets)

    def solve(self, t: list, qn: list) -> tuple[list, float]:
        """Every (real) IK branch of one pose: :meth:`solve_flags` without the flags."""
        out, dist, _ = self._branches(t, qn, None)
        return out, dist

    def solve_flags(self, t: list, qn: list) -> tuple[list, float, list]:
        """Every (real) IK branch of one pose, with the singularity flags of each.

        Args:
            t: the 16 entries of the (4, 4) target, row-major, metres.
            qn: (n,) joint vector, rad; the value of a free joint at a singularity.

        Returns:
            (candidates, distance): list of ``(q list (n,) rad wrapped to (-pi, pi], code)``
            with ``code`` an index into ``labels``, the distance (m) by which the target
            misses the reachable set (0 when a branch solves), and per candidate its
            singularity flags (``SING_*`` bits, 0 for a regular solution).
        """
        return self._branches(t, qn, None)

    def choose(self, t: list, qn: list, choice: Choice):
        """The solution :func:`pick` would take from :meth:`solve`, without building the others.

        Args:
            t: the 16 entries of the (4, 4) target, row-major, metres.
            qn: (n,) reference joints, rad.
            choice: ranges, weights, wide joints and branch filter.

        Returns:
            (q list (n,) rad with wide joints fitted, code, singularity flags), or None when no
            solution qualifies (out of reach, out of range or not on the wanted branch: ask
            :meth:`solve` why). ``(q, code)`` is what :func:`pick` gives.
        """
        return self._branches(t, qn, choice)

    def _branches(self, t: list, qn: list, choice: Choice | None):   # pragma: no cover - abstract
        raise NotImplementedError
