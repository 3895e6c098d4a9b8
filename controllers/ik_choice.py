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

Skipping is exact: every travel term is >= 0 and rounded addition of non-negative numbers is
monotone, so no partial sum (nor a sum of a subset of the terms, added in joint order) exceeds
the total, and a branch whose partial sum already reaches the best total cannot win.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

__all__ = ["Choice", "fit", "pick"]

_TWO_PI = 2.0 * math.pi
_PI = math.pi


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


def pick(choice: Choice, cands: list, qn: list):
    """Apply the choice to a finished candidate list (``(q list, code)`` pairs; q is not changed).

    Returns:
        (q list with wide joints fitted, code) of the chosen candidate, or None.
    """
    best, bcode, bcost = None, -1, math.inf
    want, mask = choice.want, choice.mask
    rows = tuple(zip(choice.lo, choice.hi, choice.w, choice.wide, qn))
    for q, code in cands:
        if (code & mask) != want:
            continue
        cost = 0.0
        fitted = []
        for v, (lo, hi, wj, wide, r) in zip(q, rows):
            if wide:
                v = fit(v, r, lo, hi)
            if v < lo or v > hi:
                break
            cost += wj * abs(v - r)
            fitted.append(v)
        else:
            if cost < bcost:
                best, bcode, bcost = fitted, code, cost
    return None if best is None else (best, bcode)
