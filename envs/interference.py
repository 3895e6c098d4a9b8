"""Collision-aware IK: a workcell's collision check as the IK's solution filter.

The IK (:mod:`armtwin.controllers.ik`) knows joint ranges and branches, not bodies: it takes a
solution filter (:data:`~armtwin.controllers.ik.Reject`, a callable on a joint vector) and skips
the solutions it refuses. :class:`CollisionFilter` is that filter made of a
:class:`~armtwin.envs.collision.CollisionModel` — the very links, cell bodies and
allowed-collision matrix of ``armtwin check --cell`` — so ``controllers/`` stays free of
PyBullet and a solution is "in collision" by exactly the preflight's rule: a link and a body
(or two links the matrix does not allow) overlapping by more than
:data:`~armtwin.envs.collision.CONTACT_EPS`, the end effector pressing into a work body deeper
than the cell's ``touch``.

Each joint vector is checked once (:meth:`CollisionFilter.interference` keeps the answers), so
the IK's choice, the ``--all`` listing and a caller asking again cost one check per solution.
Units: m, rad inside; :meth:`Interference.describe` in mm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..controllers.choices import Choice
from .collision import TOOL_LINK, CollisionModel

if TYPE_CHECKING:
    from ..controllers.ik import IKResult

__all__ = ["CollisionFilter", "Interference", "PairKind", "MAX_REMEMBERED"]

#: joint vectors a filter keeps its answers for; past that it starts afresh (a pendant dragged for hours)
MAX_REMEMBERED = 4096


class PairKind(Choice):
    """What touches what.

    SELF: two links of the robot (a tool counts as a link here: the tool into the arm).
    BODY: a link of the robot and a cell body.
    TOOL: the tool on the flange and a cell body.
    """

    __label__ = "pair kind"

    SELF = "self"
    BODY = "body"
    TOOL = "tool"


@dataclass(frozen=True)
class Interference:
    """One pair in contact at one joint vector.

    Attributes:
        link: the robot's link (URDF name; ``tool`` for a tool on the flange).
        other: the cell body's name, or the other link for a self-collision.
        kind: which kind of pair.
        depth: how deep they overlap, m.
    """

    link: str
    other: str
    kind: PairKind
    depth: float

    def describe(self) -> str:
        """``link_3 touches table 2.1 mm deep`` / ``link_1 touches link link_5 0.4 mm deep``."""
        link = "link " if self.kind is PairKind.SELF else ""
        return f"{self.link} touches {link}{self.other} {self.depth * 1000:.1f} mm deep"

    def to_dict(self) -> dict:
        return {"link": self.link, "other": self.other, "kind": self.kind.value, "depth_mm": self.depth * 1000}


class CollisionFilter:
    """A :data:`~armtwin.controllers.ik.Reject` filter that refuses joint vectors in collision.

    Called with a joint vector (n,) (rad / m), it returns None when nothing touches, else one line
    naming every pair that does (``"link_3 touches table 2.1 mm deep; ..."``): the IK puts it into
    :attr:`~armtwin.controllers.ik.IKSolution.rejected` and its reason.

    Args:
        model: the robot in its cell (the caller owns it and closes it).
    """

    def __init__(self, model: CollisionModel) -> None:
        self.model = model
        self._seen: dict[tuple[float, ...], tuple[Interference, ...]] = {}

    def interference(self, q: np.ndarray) -> tuple[Interference, ...]:
        """Every pair in contact at ``q`` (n,), in the model's pair order (empty: collision-free)."""
        key = tuple(np.asarray(q, dtype=float).tolist())
        got = self._seen.get(key)
        if got is None:
            if len(self._seen) >= MAX_REMEMBERED:
                self._seen.clear()
            model = self.model
            found = []
            for p, depth in model.touching(np.array(key)):
                link, other = model.pair_names(p)
                if model.pairs[p].self_pair:
                    kind = PairKind.SELF
                else:
                    kind = PairKind.TOOL if link == TOOL_LINK else PairKind.BODY
                found.append(Interference(link, other, kind, depth))
            got = self._seen[key] = tuple(found)
        return got

    def __call__(self, q: np.ndarray) -> str | None:
        found = self.interference(q)
        return "; ".join(c.describe() for c in found) if found else None

    @staticmethod
    def refusal(result: IKResult) -> str:
        """The reason of a REJECTED result in this filter's words: every solution inside the joint
        ranges "is in collision" (the IK says "was rejected", about any filter), the nearest's pairs."""
        return result.reason.replace(" was rejected ", " is in collision ", 1)

    def skipped(self, plain: IKResult) -> tuple[str, tuple[Interference, ...]] | None:
        """What a filtered choice skipped: given the IK's choice *without* this filter (same pose,
        ``q_near`` and options), its branch and pairs in contact when it is in collision — the
        nearest solution, which the filtered choice passed over — else None."""
        if plain.best is None or plain.best_branch is None:
            return None
        found = self.interference(plain.best)
        return (plain.best_branch, found) if found else None
