"""The weighted shortest-travel rule that picks one IK solution (pure Python).

:class:`TravelRule` carries what the choice needs besides the candidates and ``q_near``: joint
ranges (with their tolerance), travel weights, which joints are wider than a turn, and an
optional branch filter. The solvers apply it in ``choose`` while they compute the branches,
skipping the rest of a branch as soon as its partial travel cannot win; :meth:`TravelRule.pick`
is the same rule applied to a finished candidate list (the reference the fused solvers are
checked against), and :meth:`TravelRule.ranked` orders every qualifying candidate by it (what a
solution filter walks through, see :func:`~armtwin.controllers.ik.solve`).

The rule, everywhere: each joint wider than a turn is first moved to its 2π equivalent nearest
``q_near`` and kept inside its range (:func:`.angles.turn_near`); among the candidates inside
every range (and on the wanted branch) the one with the smallest ``sum_j w_j * |q_j - q_near_j|``,
summed in joint order, wins; ties go to the first candidate in the solver's order.

Skipping is exact: every travel term is >= 0 and rounded addition of non-negative numbers is
monotone, so no partial sum (nor a sum of a subset of the terms, added in joint order) exceeds
the total, and a branch whose partial sum already reaches the best total cannot win.
"""
# mypy: disallow-untyped-defs, check-untyped-defs

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from .angles import turn_near

__all__ = ["Candidate", "TravelRule"]

#: one IK solution as the solvers produce it: (joint list (n,) rad / m, branch code)
Candidate = tuple[list[float], int]


@dataclass(frozen=True, slots=True)
class TravelRule:
    """Parameters of the weighted shortest-travel choice, built once per robot (and per set of
    weights or branch filter).

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

    def with_branch(self, want: int, mask: int) -> TravelRule:
        """The same rule restricted to codes with ``code & mask == want & mask``."""
        return replace(self, want=want & mask, mask=mask)

    def travel(self, qn: Sequence[float], j: int, vals: Sequence[float], cost: float) -> tuple[list[float], float] | None:
        """Joints ``j, j+1, ...`` of a candidate as the rule takes them.

        Wide joints are moved to their turn nearest ``qn`` (:func:`.angles.turn_near`), every
        value is checked against its range, and the weighted travel of these joints is added to
        ``cost`` in joint order (the rounding :meth:`pick` and the solvers' partial sums rely on).

        Args:
            qn: (n,) reference joints, rad / m.
            j: index of the first joint in ``vals``.
            vals: the values of joints ``j, j+1, ...``, rad / m.
            cost: travel of joints ``0 .. j-1`` so far.

        Returns:
            (fitted values list, cost with their travel added), or None when a joint is out of range.
        """
        lo, hi, w, wide = self.lo, self.hi, self.w, self.wide
        out = []
        for k, v in enumerate(vals, j):
            if wide[k]:
                v = turn_near(v, qn[k], lo[k], hi[k])
            if v < lo[k] or v > hi[k]:
                return None
            out.append(v)
        for k, v in enumerate(out, j):
            cost += w[k] * abs(v - qn[k])
        return out, cost

    def pick(self, cands: Sequence[Candidate], qn: Sequence[float]) -> Candidate | None:
        """Apply the rule to a finished candidate list (``q`` of each is not changed).

        Returns:
            (q list with wide joints fitted, code) of the chosen candidate, or None.
        """
        best, bcode, bcost = None, -1, math.inf
        want, mask = self.want, self.mask
        for q, code in cands:
            if (code & mask) != want:
                continue
            got = self.travel(qn, 0, q, 0.0)
            if got is not None and got[1] < bcost:
                best, bcode, bcost = got[0], code, got[1]
        return None if best is None else (best, bcode)

    def ranked(self, cands: Sequence[Candidate], qn: Sequence[float]) -> list[tuple[float, int]]:
        """Every candidate the rule accepts as it is (in range, on the wanted branch), best first.

        Unlike :meth:`pick`, wide joints are not moved to their nearest turn: pass every turn that
        should be considered (:meth:`~armtwin.controllers.ik.RobotIK.equivalents`).

        Args:
            cands: ``(q list, code)`` pairs.
            qn: (n,) reference joints, rad / m.

        Returns:
            ``(travel, index into cands)`` sorted by travel (summed in joint order, as
            :meth:`travel` does), ties in candidate order.
        """
        lo, hi, w = self.lo, self.hi, self.w
        want, mask = self.want, self.mask
        out = []
        for i, (q, code) in enumerate(cands):
            if (code & mask) != want or any(v < a or v > b for v, a, b in zip(q, lo, hi)):
                continue
            cost = 0.0
            for k, v in enumerate(q):
                cost += w[k] * abs(v - qn[k])
            out.append((cost, i))
        out.sort(key=lambda r: r[0])
        return out
