"""Closed-form IK of an RRPR SCARA, pure Python/numpy.

Geometry from ``spec.geometry``, a :class:`.geometry.ScaraGeometry`: l1, l2 (arm lengths, m) and
z0 (flange height at J3 = 0, m). J3 moves the quill down: flange z = z0 - q3. The tool roll
(angle of the tool x axis in the base xy plane) is q1 + q2 + q4. Only the position and the tool
roll are taken from a target; the tool z axis is assumed to point down.

Branches (seen from above, arm 1 pointing away from you):
    ``right``: q2 >= 0 — arm 2 turns counter-clockwise, so the elbow sits to the right of the
        line from J1 to the flange ("righty" arm, the Unity work's "elbow up");
    ``left``: q2 < 0 ("lefty", "elbow down").
J4 is returned as the 2*pi equivalent nearest ``q_near[3]`` (the caller keeps it inside its
range and lists the other equivalents that fit its ±360° range as solutions). A stretched arm
(q2 = 0) gives one solution; near it q2 is only known to ~1e-8 rad from a float pose, and
``q_near``'s q2 is kept where it reproduces the reach to float precision
(:func:`.angles.elbow_angle`).
"""
# mypy: disallow-untyped-defs, check-untyped-defs

from __future__ import annotations

import math
from collections.abc import Sequence
from types import MappingProxyType
from typing import overload

import numpy as np

from .angles import TWO_PI, elbow_angle, elbow_angle_np, wrap, wrap_np
from .geometry import ScaraGeometry
from .solver import SING_ELBOW, AllBranches, BranchSolver, Chosen, Singularity
from .travel import Candidate, TravelRule

__all__ = ["ScaraSolver"]

_REACH_TOL = 1e-12


class ScaraSolver(BranchSolver):
    """Analytic IK of the SCARA (see the module docstring). Two branches: :meth:`choose` applies
    ``rule.pick`` to both (there is nothing to skip).

    Args:
        geometry: arm lengths and flange height, m.
    """

    labels: tuple[str, ...] = ("right", "left")
    arm_mask = 0b1
    singularities: MappingProxyType[int, Singularity] = MappingProxyType(
        {SING_ELBOW: Singularity(None, 1, "arm stretched (one elbow solution)")})

    def __init__(self, geometry: ScaraGeometry) -> None:
        self.geometry = geometry
        self.l1, self.l2, self.z0 = geometry.l1, geometry.l2, geometry.z0
        self.reach_out = self.l1 + self.l2
        self.reach_in = abs(self.l1 - self.l2)

    @overload
    def _branches(self, t: list[float], qn: list[float], ch: None) -> AllBranches: ...
    @overload
    def _branches(self, t: list[float], qn: list[float], ch: TravelRule) -> Chosen | None: ...

    def _branches(self, t: list[float], qn: list[float], ch: TravelRule | None) -> AllBranches | Chosen | None:
        """Both elbow branches of one target (``ch`` None), or the one ``ch.pick`` takes.

        J4 is unwrapped toward ``qn[3]``; the distance is the horizontal one (m) outside the
        reachable annulus; the flags are ``SING_ELBOW`` for a stretched arm, else 0.
        """
        x, y = t[3], t[7]
        roll = math.atan2(t[4], t[0])
        r = math.hypot(x, y)
        if r > self.reach_out + _REACH_TOL:
            return ([], r - self.reach_out, []) if ch is None else None
        if r < self.reach_in - _REACH_TOL:
            return ([], self.reach_in - r, []) if ch is None else None
        l1, l2 = self.l1, self.l2
        D = (r * r - l1 * l1 - l2 * l2) / (2.0 * l1 * l2)
        b, D = elbow_angle(D, abs(wrap(qn[1])))
        g = math.atan2(y, x)
        q3 = self.z0 - t[11]
        q4n = qn[3]
        out: list[Candidate] = []
        for code, q2 in (((0, b), (1, -b)) if 0.0 < b < math.pi else ((0, b),)):
            q1 = wrap(g - math.atan2(l2 * math.sin(q2), l1 + l2 * math.cos(q2)))
            q2 = wrap(q2)
            q4 = roll - q1 - q2
            q4 += TWO_PI * round((q4n - q4) / TWO_PI)
            out.append(([q1, q2, q3, q4], code))
        flag = 0 if 0.0 < b < math.pi else SING_ELBOW
        if ch is None:
            return out, 0.0, [flag] * len(out)
        got = ch.pick(out, qn)
        return None if got is None else (got[0], got[1], flag)

    def solve_batch(self, T: np.ndarray, qn: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Both branches for N targets, vectorised: J (4, N, 2) joint-major (NaN where none), distance (N,),
        and (N, 2) int singularity flags (``SING_ELBOW`` for a stretched arm)."""
        N = len(T)
        x, y = T[:, 0, 3], T[:, 1, 3]
        roll = np.arctan2(T[:, 1, 0], T[:, 0, 0])
        r = np.hypot(x, y)
        distance = np.maximum(np.maximum(r - self.reach_out, self.reach_in - r), 0.0)
        distance[distance <= _REACH_TOL] = 0.0
        l1, l2 = self.l1, self.l2
        b, _ = elbow_angle_np((r * r - l1 * l1 - l2 * l2) / (2.0 * l1 * l2), np.abs(wrap_np(qn[:, 1])))
        q2 = np.stack([b, -b], axis=1)                                    # (N, 2)
        q1 = wrap_np(np.arctan2(y, x)[:, None] - np.arctan2(l2 * np.sin(q2), l1 + l2 * np.cos(q2)))
        q2 = wrap_np(q2)
        q4 = roll[:, None] - q1 - q2
        q4 += TWO_PI * np.round((qn[:, 3, None] - q4) / TWO_PI)
        Q = np.empty((N, 2, 4))
        Q[..., 0], Q[..., 1], Q[..., 3] = q1, q2, q4
        Q[..., 2] = (self.z0 - T[:, 2, 3])[:, None]
        Q[distance > 0] = np.nan
        folded = (b <= 0.0) | (b >= math.pi)
        Q[folded, 1] = np.nan
        flags = np.repeat((folded * SING_ELBOW)[:, None], 2, axis=1)
        return np.ascontiguousarray(np.moveaxis(Q, 2, 0)), distance, flags

    def branch_code(self, q: Sequence[float]) -> int:
        """0 (``right``) for q2 >= 0, 1 (``left``) otherwise."""
        return 0 if wrap(q[1]) >= 0.0 else 1
