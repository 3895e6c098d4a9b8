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
range and lists the other equivalents that fit its ±360° range as solutions). A stretched arm (q2 = 0) gives one solution; near it q2 is only known to ~1e-8 rad from
a float pose, and ``q_near``'s q2 is kept where it reproduces the reach to float precision
(:func:`.ik_spherical.elbow_angle`).
"""

from __future__ import annotations

import math
from types import MappingProxyType

import numpy as np

from .ik_choice import SING_ELBOW, Choice, pick
from .ik_spherical import _wrap, _wrap_np, elbow_angle, elbow_angle_np

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
    labels: tuple[str, ...] = ("right", "left")
    arm_mask = 0b1
    # singularity flag -> (joint kept from q_near or None, code bits whose branches merge, description)
    singularities = MappingProxyType({SING_ELBOW: (None, 1, "arm stretched (one elbow solution)")})

    def __init__(self, geometry, offsets=None) -> None:
        self.l1 = float(geometry["l1"])
        self.l2 = float(geometry["l2"])
        self.z0 = float(geometry["z0"])
        self.reach_out = self.l1 + self.l2
        self.reach_in = abs(self.l1 - self.l2)

    def solve(self, t: list, qn: list) -> tuple[list, float]:
        """Both elbow branches of one target: :meth:`solve_flags` without the flags."""
        out, dist, _ = self.solve_flags(t, qn)
        return out, dist

    def solve_flags(self, t: list, qn: list) -> tuple[list, float, list]:
        """Both elbow branches of one target.

        Args:
            t: the 16 entries of the (4, 4) target, row-major, metres.
            qn: (4,) joint vector; J4 is unwrapped toward ``qn[3]``.

        Returns:
            (candidates, distance, flags): list of ``(q list (4,), code)`` (rad, m), the
            horizontal distance (m) outside the reachable annulus (0 when reachable), and per
            candidate its singularity flags (``SING_ELBOW`` for a stretched arm, else 0).
        """
        x, y = t[3], t[7]
        roll = math.atan2(t[4], t[0])
        r = math.hypot(x, y)
        if r > self.reach_out + _REACH_TOL:
            return [], r - self.reach_out, []
        if r < self.reach_in - _REACH_TOL:
            return [], self.reach_in - r, []
        l1, l2 = self.l1, self.l2
        D = (r * r - l1 * l1 - l2 * l2) / (2.0 * l1 * l2)
        b, D = elbow_angle(D, abs(_wrap(qn[1])))
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
        return out, 0.0, [0 if 0.0 < b < math.pi else SING_ELBOW] * len(out)

    def choose(self, t: list, qn: list, choice: Choice):
        """The solution :func:`.ik_choice.pick` takes from :meth:`solve` (two branches: nothing to skip).

        Args:
            t: the 16 entries of the (4, 4) target, row-major, metres.
            qn: (4,) reference joints, rad / m.
            choice: ranges, weights, wide joints and branch filter.

        Returns:
            (q list (4,) with wide joints fitted, code, singularity flags), or None when no
            solution qualifies.
        """
        out, _, flags = self.solve_flags(t, qn)
        got = pick(choice, out, qn)
        return None if got is None else (got[0], got[1], flags[0])

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
        b, _ = elbow_angle_np((r * r - l1 * l1 - l2 * l2) / (2.0 * l1 * l2), np.abs(_wrap_np(qn[:, 1])))
        q2 = np.stack([b, -b], axis=1)                                    # (N, 2)
        q1 = _wrap_np(np.arctan2(y, x)[:, None] - np.arctan2(l2 * np.sin(q2), l1 + l2 * np.cos(q2)))
        q2 = _wrap_np(q2)
        q4 = roll[:, None] - q1 - q2
        q4 += _TWO_PI * np.round((qn[:, 3, None] - q4) / _TWO_PI)
        Q = np.empty((N, 2, 4))
        Q[..., 0], Q[..., 1], Q[..., 3] = q1, q2, q4
        Q[..., 2] = (self.z0 - T[:, 2, 3])[:, None]
        Q[distance > 0] = np.nan
        folded = (b <= 0.0) | (b >= math.pi)
        Q[folded, 1] = np.nan
        flags = np.repeat((folded * SING_ELBOW)[:, None], 2, axis=1)
        return np.ascontiguousarray(np.moveaxis(Q, 2, 0)), distance, flags

    def branch_code(self, q) -> int:
        """0 (``right``) for q2 >= 0, 1 (``left``) otherwise."""
        return 0 if _wrap(q[1]) >= 0.0 else 1
