"""Closed-form IK of an RRPR SCARA, pure Python/numpy.

Geometry from ``spec.geometry``: l1, l2 (arm lengths, m) and z0 (flange height at J3 = 0, m).
J3 moves the quill down: flange z = z0 - q3. The tool roll (angle of the tool x axis in the
base xy plane) is q1 + q2 + q4. Only the position and the tool roll are taken from a target;
the tool z axis is assumed to point down.

Branches (seen from above, arm 1 pointing away from you):
    ``right``: q2 >= 0 — arm 2 turns counter-clockwise, so the elbow sits to the right of the
        line from J1 to the flange ("righty" arm, the Unity work's "elbow up");
    ``left``: q2 < 0 ("lefty", "elbow down").
J4 is returned as the 2*pi equivalent nearest ``q_near[3]`` (the caller keeps it inside its
range). A stretched arm (q2 = 0) gives one solution.
"""

from __future__ import annotations

import math

import numpy as np

from .ik_choice import Choice, fit
from .ik_spherical import _wrap, _wrap_np

__all__ = ["ScaraSolver"]

_REACH_TOL = 1e-12
_TWO_PI = 2.0 * math.pi


class ScaraSolver:
    """Analytic IK of the SCARA (see the module docstring).

    Args:
        geometry: mapping with l1, l2, z0 (metres).
        offsets: unused (the SCARA's joints have no offsets); kept for a uniform signature.
    """

    family = "scara"
    lists_equivalents = False  # J4 is given once, nearest q_near (not every equivalent)
    labels: tuple[str, ...] = ("right", "left")
    arm_mask = 0b1

    def __init__(self, geometry, offsets=None) -> None:
        self.l1 = float(geometry["l1"])
        self.l2 = float(geometry["l2"])
        self.z0 = float(geometry["z0"])
        self.reach_out = self.l1 + self.l2
        self.reach_in = abs(self.l1 - self.l2)

    def solve(self, t: list, qn: list) -> tuple[list, float]:
        """Both elbow branches of one target.

        Args:
            t: the 16 entries of the (4, 4) target, row-major, metres.
            qn: (4,) joint vector; J4 is unwrapped toward ``qn[3]``.

        Returns:
            (candidates, distance): list of ``(q list (4,), code)`` (rad, m), and the
            horizontal distance (m) outside the reachable annulus (0 when reachable).
        """
        x, y = t[3], t[7]
        roll = math.atan2(t[4], t[0])
        r = math.hypot(x, y)
        if r > self.reach_out + _REACH_TOL:
            return [], r - self.reach_out
        if r < self.reach_in - _REACH_TOL:
            return [], self.reach_in - r
        l1, l2 = self.l1, self.l2
        D = (r * r - l1 * l1 - l2 * l2) / (2.0 * l1 * l2)
        D = min(max(D, -1.0), 1.0)
        b = math.acos(D)
        g = math.atan2(y, x)
        q3 = self.z0 - t[11]
        q4n = qn[3]
        out = []
        for code, q2 in (((0, b), (1, -b)) if 0.0 < b < math.pi else ((0, b),)):
            q1 = _wrap(g - math.atan2(l2 * math.sin(q2), l1 + l2 * math.cos(q2)))
            q2 = _wrap(q2)
            q4 = roll - q1 - q2
            q4 += _TWO_PI * round((q4n - q4) / _TWO_PI)
            out.append(([q1, q2, q3, q4], code))
        return out, 0.0

    def choose(self, t: list, qn: list, choice: Choice):
        """The solution :func:`.ik_choice.pick` takes from :meth:`solve` (two branches: nothing to skip).

        Args:
            t: the 16 entries of the (4, 4) target, row-major, metres.
            qn: (4,) reference joints, rad / m.
            choice: ranges, weights, wide joints and branch filter.

        Returns:
            (q list (4,) with wide joints fitted, code), or None when no solution qualifies.
        """
        cands, _ = self.solve(t, qn)
        r0, r1, r2, r3 = qn
        l0, l1, l2, l3 = choice.lo
        h0, h1, h2, h3 = choice.hi
        w0, w1, w2, w3 = choice.w
        u0, u1, u2, u3 = choice.wide
        mask, want = choice.mask, choice.want
        pi = math.pi
        best, bcode, bcost = None, -1, math.inf
        # a wide joint goes through fit() unless fit() would return it unchanged
        for (q1, q2, q3, q4), code in cands:
            if (code ^ want) & mask:
                continue
            if u0 and not (-pi <= r0 - q1 <= pi and l0 <= q1 <= h0):
                q1 = fit(q1, r0, l0, h0)
            if u1 and not (-pi <= r1 - q2 <= pi and l1 <= q2 <= h1):
                q2 = fit(q2, r1, l1, h1)
            if u2 and not (-pi <= r2 - q3 <= pi and l2 <= q3 <= h2):
                q3 = fit(q3, r2, l2, h2)
            if u3 and not (-pi <= r3 - q4 <= pi and l3 <= q4 <= h3):
                q4 = fit(q4, r3, l3, h3)
            if q1 < l0 or q1 > h0 or q2 < l1 or q2 > h1 or q3 < l2 or q3 > h2 or q4 < l3 or q4 > h3:
                continue
            cost = w0 * abs(q1 - r0)
            cost += w1 * abs(q2 - r1)
            cost += w2 * abs(q3 - r2)
            cost += w3 * abs(q4 - r3)
            if cost < bcost:
                best, bcode, bcost = [q1, q2, q3, q4], code, cost
        return None if best is None else (best, bcode)

    def solve_batch(self, T: np.ndarray, qn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Both branches for N targets, vectorised: J (4, N, 2) joint-major (NaN where none), distance (N,)."""
        N = len(T)
        x, y = T[:, 0, 3], T[:, 1, 3]
        roll = np.arctan2(T[:, 1, 0], T[:, 0, 0])
        r = np.hypot(x, y)
        distance = np.maximum(np.maximum(r - self.reach_out, self.reach_in - r), 0.0)
        distance[distance <= _REACH_TOL] = 0.0
        l1, l2 = self.l1, self.l2
        b = np.arccos(np.clip((r * r - l1 * l1 - l2 * l2) / (2.0 * l1 * l2), -1.0, 1.0))
        q2 = np.stack([b, -b], axis=1)                                    # (N, 2)
        q1 = _wrap_np(np.arctan2(y, x)[:, None] - np.arctan2(l2 * np.sin(q2), l1 + l2 * np.cos(q2)))
        q2 = _wrap_np(q2)
        q4 = roll[:, None] - q1 - q2
        q4 += _TWO_PI * np.round((qn[:, 3, None] - q4) / _TWO_PI)
        Q = np.empty((N, 2, 4))
        Q[..., 0], Q[..., 1], Q[..., 3] = q1, q2, q4
        Q[..., 2] = (self.z0 - T[:, 2, 3])[:, None]
        Q[distance > 0] = np.nan
        Q[(b <= 0.0) | (b >= math.pi), 1] = np.nan
        return np.ascontiguousarray(np.moveaxis(Q, 2, 0)), distance

    def branch_code(self, q) -> int:
        """0 (``right``) for q2 >= 0, 1 (``left``) otherwise."""
        return 0 if _wrap(q[1]) >= 0.0 else 1
