"""Closed-form IK of a 6R arm with a spherical wrist (ABB IRB120 layout), pure Python/numpy.

Kinematic family: standard DH with alpha = (-90, 0, -90, 90, -90, 0) deg, a = (0, a2, a3, 0, 0, 0),
d = (d1, 0, 0, d4, 0, d6); the joint angle of DH row i is ``theta_i = q_i + offset_i`` (offsets
from the robot's published table). Geometry and offsets come from ``spec.geometry``, a
:class:`.geometry.SphericalWristGeometry` (metres, radians).

Method (Pieper): the wrist centre ``w = p - d6 * z_tool`` fixes J1 (front / back), then J2, J3
from a planar two-link problem in the J1 plane (elbow up / down, with the elbow offset a3 folded
into ``L3 = hypot(a3, d4)``), then the wrist ``R36 = R03^T R`` gives J4, J5, J6 (no flip / flip).

Branch labels ``"<shoulder>/<elbow>/<wrist>"``:
    shoulder: ``front`` when the wrist centre lies on the +x1 side of J1 (in front of the
        base column), ``back`` when J1 is turned half a turn away and the arm reaches over.
    elbow: ``up`` when the elbow lies above the line from the J2 axis to the wrist centre.
    wrist: ``noflip`` for theta5 >= 0, ``flip`` for theta5 < 0.

Singularities keep the current (``q_near``) value of the free joint: wrist centre on the J1 axis
(J1 free), theta5 = 0 (J4 free; J6 takes the rest). Near theta5 = 0 (or pi) J4 is only known to
~1e-16 / |sin theta5| rad from a float pose; there J4 also keeps its ``q_near`` value whenever
that reproduces the pose as well as the float pose itself (:func:`.angles.kept_angle`), so a wrist
that is almost straight does not drift off ``q_near`` (or across a joint limit) by rounding
noise. A stretched or folded arm gives one elbow solution instead of two. Nothing returns NaN
for a reachable pose. Each solution carries singularity flags (``.solver.SING_*``: J1 axis,
wrist at |sin theta5| <= 1e-10, one elbow) from values the solver computes anyway.
"""
# mypy: disallow-untyped-defs, check-untyped-defs

from __future__ import annotations

import math
from collections.abc import Sequence
from types import MappingProxyType
from typing import overload

import numpy as np

from .angles import (
    KEEP_TOL,
    TWO_PI,
    elbow_angle,
    elbow_angle_np,
    flip_half_turn,
    kept_angle,
    kept_angle_np,
    turn_near,
    wrap,
    wrap_inplace,
    wrap_np,
)
from .geometry import SphericalWristGeometry
from .solver import SING_ELBOW, SING_J1_AXIS, SING_WRIST, AllBranches, BranchSolver, Chosen, Singularity
from .travel import Candidate, TravelRule

__all__ = ["SphericalWristSolver"]

_SING = 1e-10       # |sin theta5| / wrist-centre radius (m) below which a joint is free
_REACH_TOL = 1e-12  # metres of slack when clamping a stretched / folded elbow


class SphericalWristSolver(BranchSolver):
    """Analytic IK for the IRB120 kinematic family (see the module docstring).

    :meth:`solve` gives wrapped joints, ``code`` indexes :attr:`labels`, and the distance is
    how far the wrist centre lies outside the reachable shell. :meth:`choose` computes the
    branches in the same order and skips a shoulder or arm branch whose partial weighted
    travel (J1, or J1–J3) already reaches the best total so far, or whose arm joints are out of
    range, before its wrist is solved.

    Args:
        geometry: lengths (m) and DH offsets (rad).
    """

    labels: tuple[str, ...] = tuple(
        f"{s}/{e}/{w}" for s in ("front", "back") for e in ("up", "down") for w in ("noflip", "flip"))
    arm_mask = 0b110  # code bits that describe the arm (shoulder, elbow), not the wrist
    singularities: MappingProxyType[int, Singularity] = MappingProxyType({
        SING_J1_AXIS: Singularity(0, 0, "wrist centre on the J1 axis"),
        SING_WRIST: Singularity(3, 1, "wrist singular (J5 = 0°, only J4 + J6 fixed)"),
        SING_ELBOW: Singularity(None, 2, "arm stretched or folded (one elbow solution)"),
    })

    def __init__(self, geometry: SphericalWristGeometry) -> None:
        self.geometry = geometry
        self.d1, self.a2, self.a3, self.d4, self.d6 = geometry.d1, geometry.a2, geometry.a3, geometry.d4, geometry.d6
        self.off: tuple[float, ...] = geometry.offsets
        self.L3 = math.hypot(self.a3, self.d4)
        self.phi = math.atan2(self.d4, self.a3)
        self.reach_out = self.a2 + self.L3
        self.reach_in = abs(self.a2 - self.L3)

    # ----- single pose ---------------------------------------------------------------
    @overload
    def _branches(self, t: list[float], qn: list[float], ch: None) -> AllBranches: ...
    @overload
    def _branches(self, t: list[float], qn: list[float], ch: TravelRule) -> Chosen | None: ...

    def _branches(self, t: list[float], qn: list[float], ch: TravelRule | None) -> AllBranches | Chosen | None:
        """:meth:`solve` (``ch`` None) and :meth:`choose` in one body, so both compute the same floats."""
        nx, _, ax, px, ny, _, ay, py, nz, _, az, pz = t[:12]   # the tool y axis is not needed
        d6 = self.d6
        wx, wy, wz = px - d6 * ax, py - d6 * ay, pz - d6 * az
        off0, off1, off2, off3, off4, off5 = self.off
        pi, tau = math.pi, TWO_PI
        atan2, cos, sin, hypot = math.atan2, math.cos, math.sin, math.hypot
        sing = _SING
        rho = hypot(wx, wy)
        th1f = atan2(wy, wx) if rho > sing else qn[0] + off0
        fpose = 0 if rho > sing else SING_J1_AXIS   # singularity flags of the pose (see .solver)
        y1 = self.d1 - wz
        a2, L3, phi = self.a2, self.L3, self.phi
        dist = hypot(rho, y1)
        if dist > self.reach_out + _REACH_TOL:
            return ([], dist - self.reach_out, []) if ch is None else None
        if dist < self.reach_in - _REACH_TOL:
            return ([], self.reach_in - dist, []) if ch is None else None
        D = (rho * rho + y1 * y1 - a2 * a2 - L3 * L3) / (2.0 * a2 * L3)
        b, D = elbow_angle(D, abs(wrap(qn[2] + off2 + phi)))
        # beta = +b: theta2 = gamma - delta, e = s; beta = -b: theta2 = gamma + delta, e = 1 - s;
        # theta3 = beta - phi. Per elbow: (theta3, q3, +/-delta, e xor s)
        delta = atan2(L3 * sin(b), a2 + L3 * D)
        th3 = b - phi
        q3 = th3 - off2
        q3 = q3 - tau if q3 > pi else (q3 + tau if q3 <= -pi else q3)
        elbows: tuple[tuple[float, float, float, int], ...]
        if 0.0 < b < pi:
            th3m = -b - phi
            q3m = th3m - off2
            q3m = q3m - tau if q3m > pi else (q3m + tau if q3m <= -pi else q3m)
            elbows = ((th3, q3, -delta, 0), (th3m, q3m, delta, 1))
        else:
            elbows = ((th3, q3, -delta, 0),)
            fpose |= SING_ELBOW
        out: list[Candidate] = []
        flags: list[int] = []
        # with a rule (see BranchSolver): travel summed joint by joint, branches dropped early
        if ch is not None:
            best: list[float] | None = None
            bcode, bcost, bflags = -1, math.inf, 0
            r0, r1, r2, r3, r4, r5 = qn
            l0, l1, l2, l3, l4, l5 = ch.lo
            h0, h1, h2, h3, h4, h5 = ch.hi
            w0, w1, w2, w3, w4, w5 = ch.w
            u0, u1, u2, u3, u4, u5 = ch.wide
            mask, want = ch.mask, ch.want
        for s in (0, 1):
            th1 = th1f if s == 0 else th1f + pi
            q1 = th1 - off0
            q1 = q1 - tau if q1 > pi else (q1 + tau if q1 <= -pi else q1)
            if ch is not None:
                if u0:
                    q1 = turn_near(q1, r0, l0, h0)
                if q1 < l0 or q1 > h0 or (4 * s ^ want) & mask & 4:
                    continue
                cost1 = w0 * abs(q1 - r0)
                if cost1 >= bcost:
                    continue
            c1, s1 = cos(th1), sin(th1)
            x1 = c1 * wx + s1 * wy
            gamma = atan2(y1, x1)
            # frame-3 axes dotted with the tool axes need c1, s1 and theta2 + theta3
            xn = c1 * nx + s1 * ny
            xa = c1 * ax + s1 * ay
            r21 = s1 * nx - c1 * ny
            r23 = s1 * ax - c1 * ay
            for th3, q3, dd, ef in elbows:
                th2 = gamma + dd      # gamma + (-delta) == gamma - delta exactly
                e = s ^ ef
                q2 = th2 - off1
                q2 = q2 - tau if q2 > pi else (q2 + tau if q2 <= -pi else q2)
                if ch is not None:
                    if u1:
                        q2 = turn_near(q2, r1, l1, h1)
                    if u2:
                        q3 = turn_near(q3, r2, l2, h2)
                    if q2 < l1 or q2 > h1 or q3 < l2 or q3 > h2 or (2 * e ^ want) & mask & 2:
                        continue
                    cost3 = cost1 + w1 * abs(q2 - r1)
                    cost3 += w2 * abs(q3 - r2)
                    if cost3 >= bcost:
                        continue
                t23 = th2 + th3
                c23, s23 = cos(t23), sin(t23)
                # R36 = R03^T R
                r11 = c23 * xn - s23 * nz
                r13 = c23 * xa - s23 * az
                r31 = -s23 * xn - c23 * nz
                r33 = -s23 * xa - c23 * az
                s5a = hypot(r13, r23)
                th5 = atan2(s5a, r33)
                # J4 free (or nearly: kept_angle(), its common case inline): q_near's, or that + pi
                # (whose flipped wrist has q_near's J4)
                t4 = qn[3] + off3
                keep = s5a <= sing
                if not keep:
                    th4 = atan2(-r23, -r13)
                    d = th4 - t4
                    if s5a * abs(d) <= KEEP_TOL:
                        keep = True
                    elif not -0.5 * pi <= d <= 0.5 * pi:
                        k4 = kept_angle(s5a, th4, t4, pi)
                        if k4 is not None:
                            t4, keep = k4, True
                if keep:
                    th4 = t4
                    c4, s4 = cos(th4), sin(th4)
                    th6 = atan2(-s4 * r11 + c4 * r21, cos(th5) * (c4 * r11 + s4 * r21) + s5a * r31)
                else:
                    # c4 = -r13 / s5, s4 = -r23 / s5, c5 = r33; both arguments scaled by s5 > 0
                    th6 = atan2(r23 * r11 - r13 * r21, s5a * s5a * r31 - r33 * (r13 * r11 + r23 * r21))
                q4 = th4 - off3
                q4 = q4 - tau if q4 > pi else (q4 + tau if q4 <= -pi else q4)
                q5 = th5 - off4
                q5 = q5 - tau if q5 > pi else (q5 + tau if q5 <= -pi else q5)
                q6 = th6 - off5
                q6 = q6 - tau if q6 > pi else (q6 + tau if q6 <= -pi else q6)
                code = 4 * s + 2 * e
                wrists: tuple[tuple[int, float, float, float], ...]
                if s5a > sing:
                    # the flipped wrist: theta4 + pi, -theta5, theta6 + pi
                    f5 = -th5 - off4
                    wrists = ((0, q4, q5, q6), (1, q4 - pi if q4 > 0.0 else q4 + pi,
                                                f5 - tau if f5 > pi else (f5 + tau if f5 <= -pi else f5),
                                                q6 - pi if q6 > 0.0 else q6 + pi))
                else:
                    wrists = ((0, q4, q5, q6),)
                if ch is None:
                    f = fpose if s5a > sing else fpose | SING_WRIST
                    for w, v4, v5, v6 in wrists:
                        out.append(([q1, q2, q3, v4, v5, v6], code + w))
                        flags.append(f)
                    continue
                for w, v4, v5, v6 in wrists:
                    if (w ^ want) & mask & 1:
                        continue
                    if u3:
                        v4 = turn_near(v4, r3, l3, h3)
                    if u4:
                        v5 = turn_near(v5, r4, l4, h4)
                    if u5:
                        v6 = turn_near(v6, r5, l5, h5)
                    if v4 < l3 or v4 > h3 or v5 < l4 or v5 > h4 or v6 < l5 or v6 > h5:
                        continue
                    cost = cost3 + w3 * abs(v4 - r3)
                    cost += w4 * abs(v5 - r4)
                    cost += w5 * abs(v6 - r5)
                    if cost < bcost:
                        best, bcode, bcost = [q1, q2, q3, v4, v5, v6], code + w, cost
                        bflags = fpose if s5a > sing else fpose | SING_WRIST
        if ch is None:
            return out, 0.0, flags
        return None if best is None else (best, bcode, bflags)

    # ----- batch ---------------------------------------------------------------------
    def solve_batch(self, T: np.ndarray, qn: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All 8 branches for N poses, vectorised over poses and branches.

        Same solutions as :meth:`solve`, with the trigonometry of the second shoulder, elbow and
        wrist branches replaced by their closed-form relations (theta2 = gamma -/+ delta,
        flipped wrist = (theta4 + pi, -theta5, theta6 + pi)).

        Args:
            T: (N, 4, 4) targets, metres.
            qn: (N, 6) joint vectors for the free joints at singularities, rad.

        Returns:
            (J, distance, flags): J (6, N, 8) joint-major solutions, rad, NaN for branches
            without a solution (last axis indexed by branch code), (N,) distance (m) outside the
            reachable shell, and (N, 8) int singularity flags (``SING_*`` bits) per branch.
        """
        N = len(T)
        off0, off1, off2, off3, off4, off5 = self.off
        pi = math.pi
        a2, L3 = self.a2, self.L3
        nx, ny, nz = T[:, 0, 0], T[:, 1, 0], T[:, 2, 0]
        ax, ay, az = T[:, 0, 2], T[:, 1, 2], T[:, 2, 2]
        wx = T[:, 0, 3] - self.d6 * ax
        wy = T[:, 1, 3] - self.d6 * ay
        y1 = self.d1 - (T[:, 2, 3] - self.d6 * az)
        rho = np.sqrt(wx * wx + wy * wy)
        dist = np.sqrt(rho * rho + y1 * y1)
        distance = np.maximum(np.maximum(dist - self.reach_out, self.reach_in - dist), 0.0)
        distance[distance <= _REACH_TOL] = 0.0
        b, D = elbow_angle_np((dist * dist - (a2 * a2 + L3 * L3)) / (2.0 * a2 * L3),
                              np.abs(wrap_np(qn[:, 2] + off2 + self.phi)))
        delta = np.arctan2(L3 * np.sin(b), a2 + L3 * D)
        # front shoulder: theta1 = atan2(wy, wx); back: + pi (cos, sin negated, x1 = -rho)
        sing1 = rho <= _SING
        with np.errstate(invalid="ignore", divide="ignore"):
            c1, s1 = wx / rho, wy / rho
        th1 = np.arctan2(wy, wx)
        if sing1.any():
            th1[sing1] = qn[sing1, 0] + off0
            c1[sing1], s1[sing1] = np.cos(th1[sing1]), np.sin(th1[sing1])
        q1f = wrap_inplace(th1 - off0)
        q1b = flip_half_turn(q1f)
        gf = np.arctan2(y1, rho)
        gb = np.arctan2(y1, -rho)
        # (N, 2, 2) over (shoulder, elbow code): up/down is beta = +b / -b in front, -b / +b at the back
        th2 = np.empty((N, 2, 2))
        th2[:, 0, 0] = gf - delta
        th2[:, 0, 1] = gf + delta
        th2[:, 1, 0] = gb + delta
        th2[:, 1, 1] = gb - delta
        th3 = np.empty((N, 2, 2))
        th3[:, 0, 0] = th3[:, 1, 1] = b - self.phi
        th3[:, 0, 1] = th3[:, 1, 0] = -b - self.phi
        t23 = th2 + th3
        c23, s23 = np.cos(t23), np.sin(t23)
        sgn = np.array([1.0, -1.0])[None, :, None]       # back shoulder negates c1, s1
        xn = ((c1 * nx + s1 * ny)[:, None, None]) * sgn
        xa = ((c1 * ax + s1 * ay)[:, None, None]) * sgn
        r21 = ((s1 * nx - c1 * ny)[:, None, None]) * sgn
        r23 = ((s1 * ax - c1 * ay)[:, None, None]) * sgn
        nz3, az3 = nz[:, None, None], az[:, None, None]
        r11 = c23 * xn - s23 * nz3
        r13 = c23 * xa - s23 * az3
        r31 = -s23 * xn - c23 * nz3
        r33 = -s23 * xa - c23 * az3
        s5a = np.sqrt(r13 * r13 + r23 * r23)
        th5 = np.arctan2(s5a, r33)
        th4 = np.arctan2(-r23, -r13)
        # theta6 with c4 = -r13/s5, s4 = -r23/s5, c5 = r33, s5 = s5a, scaled by s5 > 0
        th6 = np.arctan2(r23 * r11 - r13 * r21, s5a * s5a * r31 - r33 * (r13 * r11 + r23 * r21))
        sing5 = s5a <= _SING
        ref4 = (qn[:, 3] + off3)[:, None, None]
        keep4, kept4 = kept_angle_np(s5a, th4, ref4, pi)
        kept4 = np.where(sing5, ref4, kept4)
        keep4 |= sing5
        if keep4.any():                                    # J4 (nearly) free: keep q_near's
            i = np.nonzero(keep4)
            t4 = kept4[i]
            c4, s4, c5 = np.cos(t4), np.sin(t4), np.cos(th5[i])
            r21i = np.broadcast_to(r21, keep4.shape)[i]        # r21 is (N, 2, 1): the same for both elbows
            th4[i] = t4
            th6[i] = np.arctan2(-s4 * r11[i] + c4 * r21i, c5 * (c4 * r11[i] + s4 * r21i) + s5a[i] * r31[i])
        J: np.ndarray = np.empty((6, N, 2, 2, 2))
        J[0, :, 0] = q1f[:, None, None]
        J[0, :, 1] = q1b[:, None, None]
        J[1] = wrap_inplace(th2 - off1)[..., None]
        J[2] = wrap_inplace(th3 - off2)[..., None]
        q4 = wrap_inplace(th4 - off3)
        J[3, ..., 0] = q4
        J[3, ..., 1] = flip_half_turn(q4)
        J[4, ..., 0] = wrap_inplace(th5 - off4)
        J[4, ..., 1] = wrap_inplace(-th5 - off4)
        q6 = wrap_inplace(th6 - off5)
        J[5, ..., 0] = q6
        J[5, ..., 1] = flip_half_turn(q6)
        J = J.reshape(6, N, 8)
        # drop what solve() does not produce: unreachable poses and duplicates at singularities
        folded = (b <= 0.0) | (b >= pi)                    # one elbow: beta = +b (code 0 front, 1 back)
        out = distance > 0
        if sing5.any() or folded.any() or out.any():
            bad = np.zeros((N, 2, 2, 2), dtype=bool)
            bad[..., 1] = sing5
            bad[:, 0, 1] |= folded[:, None]
            bad[:, 1, 0] |= folded[:, None]
            bad |= out[:, None, None, None]
            J[:, bad.reshape(N, 8)] = np.nan
        flags = np.broadcast_to((sing1 * SING_J1_AXIS | folded * SING_ELBOW)[:, None, None, None]
                                | (sing5 * SING_WRIST)[..., None], (N, 2, 2, 2)).reshape(N, 8)
        return J, distance, flags

    # ----- labels ----------------------------------------------------------------------
    def branch_code(self, q: Sequence[float]) -> int:
        """Branch code (index into :attr:`labels`) of a joint vector (6,) rad."""
        off = self.off
        th2 = q[1] + off[1]
        beta = wrap(q[2] + off[2] + self.phi)
        x1 = self.a2 * math.cos(th2) + self.L3 * math.cos(th2 + beta)
        s = 0 if x1 >= 0.0 else 1
        e = 0 if (beta >= 0.0) == (s == 0) else 1
        w = 0 if wrap(q[4] + off[4]) >= 0.0 else 1
        return 4 * s + 2 * e + w
