"""Closed-form IK of a 6R arm with a UR-like offset wrist (AUBO-i5 layout), pure Python/numpy.

Kinematic family: modified (Craig) DH with alpha_{i-1} = (0, -90, 180, 180, -90, 90) deg,
a_{i-1} = (0, 0, a2, a3, 0, 0), d = (d1, d2, 0, 0, d5, d6); ``theta_i = q_i + offset_i``.
Geometry and offsets from ``spec.geometry``, a :class:`.geometry.OffsetWristGeometry` (metres,
radians). J2, J3, J4 are parallel; the arm plane sits d2 beside the J1 axis.

Method (as for UR arms): the J5 centre ``p5 = p - d6 * z_tool`` must lie d2 beside the J1 axis,
which gives two J1 (front / back); the J4 axis is then known (it is J2's), so
``cos theta5 = z_tool . y1`` (no flip / flip) and J6 follows from the tool x, y axes. Knowing
J5 and J6 places the J4 origin, and J2, J3 come from a planar two-link problem (elbow up / down);
J4 closes the planar angle sum.

Branch labels ``"<shoulder>/<elbow>/<wrist>"``:
    shoulder: ``front`` when the J5 centre lies on the side the arm faces at q1 = 0 (ahead of
        the J1 axis), ``back`` when J1 turns half a turn away and the arm reaches over.
    elbow: ``up`` when the elbow (J3) lies above the line from J2 to the J4 origin.
    wrist: ``noflip`` for theta5 >= 0, ``flip`` for theta5 < 0.

Near the edge of the workspace some branches have no real solution: only the real ones are
returned. At theta5 = 0 (J6 axis parallel to J2..J4) the pose fixes only the sum of J6 and the
planar angle of J2..J4: J6 is free, and it moves the J4 origin on a circle of radius d5 about the
J5 centre. J6 keeps its ``q_near`` value where J2..J4 then have a solution inside the joint ranges
(:meth:`OffsetWristSolver.set_limits`), else it takes the value nearest ``q_near``'s where they
have one (:meth:`OffsetWristSolver._free_j6`, in closed form); a pose from the FK of an in-range
joint vector is always solved in range. Near theta5 = 0 J6 is only known to ~1e-16 / |sin theta5|
rad from a float pose, and it keeps its ``q_near`` value whenever that reproduces the pose as well
as the float pose itself (:func:`.angles.kept_angle`).
"""
# mypy: disallow-untyped-defs, check-untyped-defs

from __future__ import annotations

import math
from collections.abc import Sequence
from types import MappingProxyType
from typing import NamedTuple, overload

import numpy as np

from .angles import (
    ELBOW_SNAP,
    KEEP_TOL,
    elbow_angle,
    elbow_angle_np,
    kept_angle,
    kept_angle_np,
    turn_near,
    wrap,
    wrap_np,
)
from .geometry import OffsetWristGeometry
from .solver import SING_ELBOW, SING_SHOULDER, SING_WRIST, AllBranches, BranchSolver, Chosen, Singularity
from .travel import Candidate, TravelRule

__all__ = ["OffsetWristSolver"]

_SING = 1e-10
# Metres of slack at the edge of the elbow's reach. Near theta5 = 0 the J5 axis (hence the J4
# origin) is only known to ~1e-16 / sin(theta5) rad, so a stretched arm can miss by ~1e-10 m.
_REACH_TOL = 1e-9


class _Limits(NamedTuple):
    """Joint ranges as :meth:`OffsetWristSolver.set_limits` keeps them (rad)."""

    lo: tuple[float, ...]     # lower limits
    hi: tuple[float, ...]     # upper limits
    lo_t: tuple[float, ...]   # lower limits minus the slack
    hi_t: tuple[float, ...]   # upper limits plus the slack
    narrow6: bool             # J6's range lies within (-pi, pi]


class OffsetWristSolver(BranchSolver):
    """Analytic IK for the AUBO-i5 kinematic family (see the module docstring).

    :meth:`solve` gives only the real branches, and as distance the smallest one by which a
    branch misses its reachable set (0 if any solves). :meth:`choose` computes the branches in
    the same order and skips a shoulder (J1) or shoulder and wrist (J1, J5, J6) whose partial
    weighted travel already reaches the best total so far, or whose joints are out of range,
    before the elbow is solved.

    Args:
        geometry: lengths (m) and DH offsets (rad).
    """

    arm_mask = 0b110
    singularities: MappingProxyType[int, Singularity] = MappingProxyType({
        SING_WRIST: Singularity(5, 1, "wrist singular (J5 = 0°, J6 axis parallel to J2–J4)"),
        SING_ELBOW: Singularity(None, 2, "arm stretched or folded (one elbow solution)"),
        SING_SHOULDER: Singularity(None, 6, "J5 centre d2 from the J1 axis (one J1 solution)"),
    })

    def __init__(self, geometry: OffsetWristGeometry) -> None:
        self.geometry = geometry
        g = geometry
        self.d1, self.d2, self.a2, self.a3, self.d5, self.d6 = g.d1, g.d2, g.a2, g.a3, g.d5, g.d6
        self.off: tuple[float, ...] = g.offsets
        self.reach_out = self.a2 + self.a3
        self.reach_in = abs(self.a2 - self.a3)
        # Code bit s = 0 is the J1 root with the J5 centre on the +x1 side. The arm's forward
        # direction at q1 = 0 is x1 turned by -offset1, so with a 180 deg offset it is "back".
        names = ("front", "back") if math.cos(self.off[0]) >= 0.0 else ("back", "front")
        self.labels: tuple[str, ...] = tuple(
            f"{s}/{e}/{w}" for s in names for e in ("up", "down") for w in ("noflip", "flip"))
        self.limits: _Limits | None = None   # see set_limits()

    def set_limits(self, lower: Sequence[float], upper: Sequence[float], tol: float) -> None:
        """Joint ranges (6,) rad, and the slack beyond them that still counts as inside.

        Only the free J6 at the wrist singularity uses them (:meth:`_free_j6`): it is placed
        where J2-J4 have an in-range solution. Without ranges it is placed where they reach.
        """
        lo = tuple(float(v) for v in lower)
        hi = tuple(float(v) for v in upper)
        lo_t = tuple(v - tol for v in lo)
        hi_t = tuple(v + tol for v in hi)
        # J6 within (-pi, pi]: a segment of the circle (travel is not taken across +-pi);
        # else (wider than a turn) a whole turn centred on q_near's J6
        narrow6 = lo[5] >= -math.pi - 1e-12 and hi[5] <= math.pi + 1e-12
        self.limits = _Limits(lo, hi, lo_t, hi_t, narrow6)

    @overload
    def _branches(self, t: list[float], qn: list[float], ch: None) -> AllBranches: ...
    @overload
    def _branches(self, t: list[float], qn: list[float], ch: TravelRule) -> Chosen | None: ...

    def _branches(self, t: list[float], qn: list[float], ch: TravelRule | None) -> AllBranches | Chosen | None:
        """:meth:`solve` (``ch`` None) and :meth:`choose` in one body, so both compute the same floats."""
        nx, ox, ax, px, ny, oy, ay, py, nz, oz, az, pz = t[:12]
        d1, d2, d5, d6, a2, a3 = self.d1, self.d2, self.d5, self.d6, self.a2, self.a3
        off0, off1, off2, off3, off4, off5 = self.off
        pi, tau = math.pi, 2.0 * math.pi
        atan2, cos, sin, hypot, fmod = math.atan2, math.cos, math.sin, math.hypot, math.fmod
        p5x, p5y, p5z = px - d6 * ax, py - d6 * ay, pz - d6 * az
        rho = hypot(p5x, p5y)
        if rho < d2 - _REACH_TOL:
            return ([], d2 - rho, []) if ch is None else None
        psi = atan2(p5y, p5x)
        # sin(asn) = d2 / rho near 1 (shoulder singularity: the two J1 roots meet) is treated like
        # a stretched elbow (elbow_angle): q_near's root is kept where the pose cannot tell
        x = d2 / rho
        asn = 0.5 * pi if x >= 1.0 - ELBOW_SNAP else math.asin(min(x, 1.0))
        if x >= 0.5:   # q_near's asn: theta1 = psi - asn (front root) or psi - pi + asn (back root)
            d = psi - (qn[0] + off0)
            for a0 in (wrap(d), wrap(pi - d)):
                if 0.0 <= a0 <= 0.5 * pi and -ELBOW_SNAP <= math.sin(a0) - x <= ELBOW_SNAP:
                    asn = a0
                    break
        b_near = abs(wrap(qn[2] + off2))
        shoulders: tuple[tuple[int, float], ...] = ((0, psi - asn), (1, psi - pi + asn)) if asn < 0.5 * pi else ((0, psi - asn),)
        fpose = 0 if asn < 0.5 * pi else SING_SHOULDER   # singularity flags (see .solver)
        reach_out, reach_in = self.reach_out, self.reach_in
        out: list[Candidate] = []
        flags: list[int] = []
        miss = math.inf
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
        for s, th1 in shoulders:
            q1 = th1 - off0
            if not -pi < q1 <= pi:   # wrap() inline
                q1 = fmod(q1 + pi, tau)
                q1 = (q1 + tau if q1 <= 0.0 else q1) - pi
            if ch is not None:
                if u0:
                    q1 = turn_near(q1, r0, l0, h0)
                if q1 < l0 or q1 > h0 or (4 * s ^ want) & mask & 4:
                    continue
                cost1 = w0 * abs(q1 - r0)
                if cost1 >= bcost:
                    continue
            c1, s1 = cos(th1), sin(th1)
            c5 = -s1 * ax + c1 * ay
            s5a = hypot(az, c1 * ax + s1 * ay)   # |y1 x z_tool|: exact near theta5 = 0
            u = -s1 * nx + c1 * ny
            v = -s1 * ox + c1 * oy
            for w, sg in (((0, 1.0),) if s5a <= _SING else ((0, 1.0), (1, -1.0))):
                s5 = sg * s5a
                th5 = atan2(s5, c5)
                # u = -s5 c6, v = s5 s6; J6 (nearly) free: q_near's
                th6 = atan2(sg * v, -sg * u) if s5a > _SING else 0.0
                t6 = qn[5] + off5   # kept_angle(), its common case inline
                if s5a <= _SING:    # J6 free: q_near's, or the nearest value with J2-J4 in reach and range
                    f6, m6 = self._free_j6(t, c1, s1, c5, s5, qn[5], b_near)
                    if f6 is None:
                        miss = min(miss, m6)
                        continue
                    th6 = f6
                elif s5a * abs(th6 - t6) <= KEEP_TOL:
                    th6 = t6
                elif not -pi <= th6 - t6 <= pi:
                    kept = kept_angle(s5a, th6, t6)
                    if kept is not None:
                        th6 = kept
                # c6, s6 of the angle, not -u / s5, v / s5: near theta5 = 0 those carry the
                # pose's rounding / s5 and are no longer a unit vector (metres of error in p4)
                c6, s6 = cos(th6), sin(th6)
                q5 = th5 - off4
                if not -pi < q5 <= pi:   # wrap() inline
                    q5 = fmod(q5 + pi, tau)
                    q5 = (q5 + tau if q5 <= 0.0 else q5) - pi
                q6 = th6 - off5
                if not -pi < q6 <= pi:   # wrap() inline
                    q6 = fmod(q6 + pi, tau)
                    q6 = (q6 + tau if q6 <= 0.0 else q6) - pi
                if ch is not None:
                    if u4:
                        q5 = turn_near(q5, r4, l4, h4)
                    if u5:
                        q6 = turn_near(q6, r5, l5, h5)
                    if q5 < l4 or q5 > h4 or q6 < l5 or q6 > h5 or (w ^ want) & mask & 1:
                        continue
                    cost5 = w4 * abs(q5 - r4)
                    cost6 = w5 * abs(q6 - r5)
                    if (cost1 + cost5) + cost6 >= bcost:   # <= the full sum: all terms >= 0
                        continue
                k, m = c5 * c6, c5 * s6
                x4x, x4y, x4z = k * nx - m * ox + s5 * ax, k * ny - m * oy + s5 * ay, k * nz - m * oz + s5 * az
                p4x = p5x - d5 * (s6 * nx + c6 * ox)
                p4y = p5y - d5 * (s6 * ny + c6 * oy)
                p4z = p5z - d5 * (s6 * nz + c6 * oz)
                X = c1 * p4x + s1 * p4y
                Z = p4z - d1
                r = hypot(X, Z)
                if r > reach_out + _REACH_TOL:
                    miss = min(miss, r - reach_out)
                    continue
                if r < reach_in - _REACH_TOL:
                    miss = min(miss, reach_in - r)
                    continue
                D = (r * r - a2 * a2 - a3 * a3) / (2.0 * a2 * a3)
                b, D = elbow_angle(D, b_near)
                delta = atan2(a3 * sin(b), a2 + a3 * D)   # theta3 = +b; sin b, exact near b = 0 (not sqrt(1 - D^2))
                gam = atan2(Z, X)
                ang4 = atan2(x4z, c1 * x4x + s1 * x4y)
                # elbow "up": theta3 < 0 in front, > 0 at the back
                up = -b if s == 0 else b
                for e, th3 in (((0, up), (1, -up)) if 0.0 < b < pi else ((0 if s == 0 else 1, up),)):
                    al2 = gam - delta if th3 >= 0.0 else gam + delta
                    # inline wraps into (-pi, pi]: each value lies within (-3 pi, 3 pi] here
                    q2 = -al2 - off1
                    q2 = q2 - tau if q2 > pi else (q2 + tau if q2 <= -pi else q2)
                    q3 = th3 - off2
                    q3 = q3 - tau if q3 > pi else (q3 + tau if q3 <= -pi else q3)
                    q4 = th3 + al2 - ang4 - off3
                    if not -pi < q4 <= pi:   # wrap() inline
                        q4 = fmod(q4 + pi, tau)
                        q4 = (q4 + tau if q4 <= 0.0 else q4) - pi
                    code = 4 * s + 2 * e + w
                    if ch is None:
                        out.append(([q1, q2, q3, q4, q5, q6], code))
                        flags.append(fpose | (0 if s5a > _SING else SING_WRIST) | (0 if 0.0 < b < pi else SING_ELBOW))
                        continue
                    if (2 * e ^ want) & mask & 2:
                        continue
                    if u1:
                        q2 = turn_near(q2, r1, l1, h1)
                    if u2:
                        q3 = turn_near(q3, r2, l2, h2)
                    if u3:
                        q4 = turn_near(q4, r3, l3, h3)
                    if q2 < l1 or q2 > h1 or q3 < l2 or q3 > h2 or q4 < l3 or q4 > h3:
                        continue
                    cost = cost1 + w1 * abs(q2 - r1)
                    cost += w2 * abs(q3 - r2)
                    cost += w3 * abs(q4 - r3)
                    cost += cost5
                    cost += cost6
                    if cost < bcost:
                        best, bcode, bcost = [q1, q2, q3, q4, q5, q6], code, cost
                        bflags = fpose | (0 if s5a > _SING else SING_WRIST) | (0 if 0.0 < b < pi else SING_ELBOW)
        if ch is None:
            return out, (0.0 if out else miss), flags
        return None if best is None else (best, bcode, bflags)

    def _free_j6(self, t: list[float], c1: float, s1: float, c5: float, s5: float, r5: float, b_near: float) -> tuple[float | None, float]:
        """theta6 at the wrist singularity (theta5 = 0 or pi), where the pose fixes only the sum of J6
        and the planar angle of J2-J4, on the shoulder with angle theta1 (``c1``, ``s1``).

        J6 moves the J4 origin on a circle of radius d5 about the J5 centre, in the arm plane.
        q_near's J6 (``r5``, rad) is kept where J2-J4 then have an in-range solution (either
        elbow); else J6 takes the value nearest ``r5`` where they have one. That set is closed
        and bounded by values where the J4 origin is at the edge of the elbow's reach or one of
        J2, J3, J4, J6 sits on a limit; each is the intersection of two circles in the arm plane,
        so all are computed in closed form and the nearest one that qualifies wins. Without an
        in-range solution anywhere, q_near's J6 if J2-J4 reach with it (the out-of-range solution
        is reported), else the nearest value where they reach.

        The J2-J4 formulas are those of :meth:`_branches` (same floats).

        Returns:
            (theta6 rad, 0.0), or (None, m) when J2-J4 reach with no J6: m is the distance (m) by
            which the J4 origin misses the elbow's reach at best.
        """
        nx, ox, ax, px, ny, oy, ay, py, nz, oz, az, pz = t[:12]
        d1, d5, d6, a2, a3 = self.d1, self.d5, self.d6, self.a2, self.a3
        off1, off2, off3, off5 = self.off[1], self.off[2], self.off[3], self.off[5]
        pi, tau = math.pi, 2.0 * math.pi
        atan2, cos, sin, hypot = math.atan2, math.cos, math.sin, math.hypot
        reach_out, reach_in = self.reach_out, self.reach_in
        p5x, p5y, p5z = px - d6 * ax, py - d6 * ay, pz - d6 * az
        lim = self.limits
        lo_t, hi_t = (lim.lo_t, lim.hi_t) if lim is not None else ((), ())

        def arms(th6: float) -> list[tuple[float, float, float]]:
            """[(q2, q3, q4)] per elbow with J6 at th6 (no elbow: []), as _branches computes them."""
            c6, s6 = cos(th6), sin(th6)
            k, m = c5 * c6, c5 * s6
            x4x, x4y, x4z = k * nx - m * ox + s5 * ax, k * ny - m * oy + s5 * ay, k * nz - m * oz + s5 * az
            p4x = p5x - d5 * (s6 * nx + c6 * ox)
            p4y = p5y - d5 * (s6 * ny + c6 * oy)
            p4z = p5z - d5 * (s6 * nz + c6 * oz)
            X = c1 * p4x + s1 * p4y
            Z = p4z - d1
            r = hypot(X, Z)
            if r > reach_out + _REACH_TOL or r < reach_in - _REACH_TOL:
                return []
            b, D = elbow_angle((r * r - a2 * a2 - a3 * a3) / (2.0 * a2 * a3), b_near)
            delta = atan2(a3 * sin(b), a2 + a3 * D)
            gam = atan2(Z, X)
            ang4 = atan2(x4z, c1 * x4x + s1 * x4y)
            out: list[tuple[float, float, float]] = []
            for th3 in ((b, -b) if 0.0 < b < pi else (b,)):
                al2 = gam - delta if th3 >= 0.0 else gam + delta
                out.append((wrap(-al2 - off1), wrap(th3 - off2), wrap(th3 + al2 - ang4 - off3)))
            return out

        def inside(v: float, j: int) -> bool:   # some 2 pi equivalent of v within joint j's range (with the slack)
            lo, hi = lo_t[j], hi_t[j]
            return v + tau * math.ceil((lo - v) / tau) <= hi

        # J6 as the value x of the joint (theta6 = x + off5) on a segment around r5 where travel
        # is |x - r5|: J6's own range when it lies within (-pi, pi], else a turn centred on r5
        if lim is not None and lim.narrow6:
            lo6, hi6 = max(lim.lo_t[5], -pi), min(lim.hi_t[5], pi)

            def as_x(th6: float) -> float:
                return wrap(th6 - off5)
        else:
            lo6, hi6 = r5 - pi, r5 + pi

            def as_x(th6: float) -> float:
                return r5 + wrap(th6 - off5 - r5)

        def good(x: float) -> bool:    # J2-J4 (one elbow at least) and J6 in range
            if not lo6 <= x <= hi6 or (lim is not None and not lim.narrow6 and not inside(x, 5)):
                return False
            return any(inside(q2, 1) and inside(q3, 2) and inside(q4, 3) for q2, q3, q4 in arms(x + off5))

        t6 = r5 + off5
        if lim is None:
            if arms(t6):
                return t6, 0.0
        elif good(r5):
            return t6, 0.0
        # in the arm plane (X from the J1 axis along the arm, Z up from J2): P the J5 centre, the
        # J4 origin P - d5 u(mu) with mu = mu0 - kap * theta6, the J4 x axis at mu - dl
        nX, nZ = c1 * nx + s1 * ny, nz
        oX, oZ = c1 * ox + s1 * oy, oz
        PX, PZ = c1 * p5x + s1 * p5y, p5z - d1
        kap = 1.0 if nX * oZ - nZ * oX >= 0.0 else -1.0
        mu0 = atan2(oZ, oX)
        dl = mu0 - atan2(c5 * nZ, c5 * nX)
        mus: list[float] = []

        def circles(cx: float, cz: float, rc: float, rp: float, shift: float = 0.0) -> None:
            """mu where a point on the circle (c, rc) is rp from P (P - point along mu + shift)."""
            ex, ez = PX - cx, PZ - cz
            dd = hypot(ex, ez)
            if dd <= 0.0 or rc <= 0.0 or rp <= 0.0:
                return
            h2 = rc * rc - ((rc * rc - rp * rp + dd * dd) / (2.0 * dd)) ** 2
            if h2 < 0.0:   # apart or nested; tangent to float precision: one point
                if max(dd - rc - rp, abs(rc - rp) - dd) > 1e-12:
                    return
                h2 = 0.0
            aa = (rc * rc - rp * rp + dd * dd) / (2.0 * dd)
            h = math.sqrt(h2)
            ux, uz = ex / dd, ez / dd
            for sgn in (1.0, -1.0):
                qx, qz = cx + aa * ux - sgn * h * uz, cz + aa * uz + sgn * h * ux
                mus.append(atan2(PZ - qz, PX - qx) - shift)

        circles(0.0, 0.0, reach_out, d5)             # J4 origin at the edge of the reach
        circles(0.0, 0.0, reach_in, d5)
        xs = [as_x(kap * (mu0 - mu)) for mu in mus]
        if lim is not None:
            lo, hi = lim.lo, lim.hi
            mus.clear()
            for L in (lo[1], hi[1]):                 # J2 on a limit: the J3 origin is known
                al2 = -(L + off1)
                circles(a2 * cos(al2), a2 * sin(al2), a3, d5)
            for L in (lo[2], hi[2]):                 # J3 on a limit: |J4 origin| is known
                circles(0.0, 0.0, math.sqrt(max(a2 * a2 + a3 * a3 + 2.0 * a2 * a3 * cos(L + off2), 0.0)), d5)
            for L in (lo[3], hi[3]):                 # J4 on a limit: J3 origin to P is rigid
                c = L + off3 - dl
                wx, wz = d5 + a3 * cos(c), a3 * sin(c)
                circles(0.0, 0.0, a2, hypot(wx, wz), atan2(wz, wx))
            cand = xs + [as_x(kap * (mu0 - mu)) for mu in mus]
            if lim.narrow6:
                cand += [max(lo[5], -pi), min(hi[5], pi)]   # J6 on a limit
            cand.sort(key=lambda x: abs(x - r5))
            for x in cand:
                if good(x):
                    return x + off5, 0.0
            if arms(t6):   # no in-range solution anywhere: q_near's J6, as without the ranges
                return t6, 0.0
            # nearest where J2-J4 reach, on the turn around r5
            xs = [r5 + wrap(x - r5) for x in xs]
        xs.sort(key=lambda x: abs(x - r5))
        for x in xs:
            if arms(x + off5):
                return x + off5, 0.0
        R = hypot(PX, PZ)
        return None, max(abs(R - d5) - reach_out, reach_in - R - d5, 0.0)

    def solve_batch(self, T: np.ndarray, qn: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All 8 branches for N poses, vectorised.

        Args:
            T: (N, 4, 4) targets, metres.
            qn: (N, 6) joint vectors for the free joint at the wrist singularity, rad.

        Returns:
            (J, distance, flags): J (6, N, 8) joint-major solutions, rad, NaN for branches
            without a real solution (last axis indexed by branch code); (N,) smallest miss
            distance (m), 0 where any branch solves; (N, 8) int singularity flags (``SING_*``
            bits) per branch.
        """
        N = len(T)
        d1, d2, d5, d6, a2, a3, off = self.d1, self.d2, self.d5, self.d6, self.a2, self.a3, self.off
        n, o, a, p = T[:, :3, 0], T[:, :3, 1], T[:, :3, 2], T[:, :3, 3]
        p5 = p - d6 * a
        rho = np.hypot(p5[:, 0], p5[:, 1])
        psi = np.arctan2(p5[:, 1], p5[:, 0])
        with np.errstate(divide="ignore", invalid="ignore"):
            x = d2 / rho
            asn = np.where(x >= 1.0 - ELBOW_SNAP, 0.5 * math.pi, np.arcsin(np.minimum(x, 1.0)))
            d = psi - (qn[:, 0] + off[0])
            for a0 in (wrap_np(math.pi - d), wrap_np(d)):   # the first match wins, as in the loop above
                keep = (x >= 0.5) & (a0 >= 0.0) & (a0 <= 0.5 * math.pi) & (np.abs(np.sin(a0) - x) <= ELBOW_SNAP)
                asn = np.where(keep, a0, asn)
        th1 = np.stack([psi - asn, psi - math.pi + asn], axis=1)          # (N, 2)
        c1, s1 = np.cos(th1), np.sin(th1)
        def ex(v: np.ndarray, i: int) -> np.ndarray:  # (N, 1) column of a (N, 3) array
            return v[:, i, None]

        c5 = -s1 * ex(a, 0) + c1 * ex(a, 1)
        s5a = np.hypot(ex(a, 2), c1 * ex(a, 0) + s1 * ex(a, 1))
        u = -s1 * ex(n, 0) + c1 * ex(n, 1)
        v = -s1 * ex(o, 0) + c1 * ex(o, 1)
        sing = s5a <= _SING                                                # (N, 2)
        sg = np.array([1.0, -1.0])
        s5 = s5a[..., None] * sg                                           # (N, 2, 2) axes s, w
        c5w = np.broadcast_to(c5[..., None], s5.shape)
        th5 = np.arctan2(s5, c5w)
        th6 = np.arctan2(sg * v[..., None], -sg * u[..., None])
        ref6 = (qn[:, 5] + off[5])[:, None, None]
        keep6, kept6 = kept_angle_np(s5a[..., None], th6, ref6)
        th6 = np.where(sing[..., None], ref6, np.where(keep6, kept6, th6))
        c6, s6 = np.cos(th6), np.sin(th6)
        k, m = c5w * c6, c5w * s6
        def e3(v: np.ndarray, i: int) -> np.ndarray:  # (N, 1, 1) column of a (N, 3) array
            return v[:, i, None, None]

        x4x = k * e3(n, 0) - m * e3(o, 0) + s5 * e3(a, 0)
        x4y = k * e3(n, 1) - m * e3(o, 1) + s5 * e3(a, 1)
        x4z = k * e3(n, 2) - m * e3(o, 2) + s5 * e3(a, 2)
        p4x = e3(p5, 0) - d5 * (s6 * e3(n, 0) + c6 * e3(o, 0))
        p4y = e3(p5, 1) - d5 * (s6 * e3(n, 1) + c6 * e3(o, 1))
        p4z = e3(p5, 2) - d5 * (s6 * e3(n, 2) + c6 * e3(o, 2))
        c1e, s1e = c1[..., None], s1[..., None]
        X = c1e * p4x + s1e * p4y
        Z = p4z - d1
        r = np.hypot(X, Z)
        miss = np.maximum(np.maximum(r - self.reach_out, self.reach_in - r), 0.0)   # (N, 2, 2)
        miss[miss <= _REACH_TOL] = 0.0
        b, _ = elbow_angle_np((r * r - a2 * a2 - a3 * a3) / (2.0 * a2 * a3),
                              np.abs(wrap_np(qn[:, 2] + off[2]))[:, None, None])
        gam = np.arctan2(Z, X)
        ang4 = np.arctan2(x4z, c1e * x4x + s1e * x4y)
        # theta3 per (s, e, w): "up" is -b in front, +b at the back. The planar angle
        # atan2(a3 sin theta3, a2 + a3 cos theta3) is odd in theta3 (sin, atan2 are odd and cos
        # even, exactly), so it is computed for +b only.
        dl = np.arctan2(a3 * np.sin(b), a2 + a3 * np.cos(b))              # (N, s, w)
        sgn = np.array([[-1.0, 1.0], [1.0, -1.0]])[None, :, :, None]      # (1, s, e, 1): sign of theta3
        th3 = sgn * b[:, :, None, :]                                      # (N, s, e, w)
        al2 = gam[:, :, None, :] - sgn * dl[:, :, None, :]
        # J (6, N, s, e, w): the last three axes are the code bits, so J.reshape(6, N, 8) is by code
        J: np.ndarray = np.empty((6, N, 2, 2, 2))
        J[0] = (th1 - off[0])[:, :, None, None]
        J[1] = -al2 - off[1]
        J[2] = th3 - off[2]
        J[3] = th3 + al2 - ang4[:, :, None, :] - off[3]
        J[4] = (th5 - off[4])[:, :, None, :]
        J[5] = (th6 - off[5])[:, :, None, :]
        J = wrap_np(J)
        # drop what the single-pose path does not produce: unreal branches and duplicates
        folded = (b <= 0.0) | (b >= math.pi)                              # (N, s, w)
        bad = np.zeros((N, 2, 2, 2), dtype=bool)
        bad |= (miss > 0)[:, :, None, :]
        bad[..., 1] |= sing[:, :, None]
        bad[:, 0, 1] |= folded[:, 0]
        bad[:, 1, 0] |= folded[:, 1]
        bad |= (rho < d2 - _REACH_TOL)[:, None, None, None]
        bad[:, 1] |= (asn >= 0.5 * math.pi)[:, None, None]
        J = J.reshape(6, N, 8)
        J[:, bad.reshape(N, 8)] = np.nan
        distance = np.where(rho < d2 - _REACH_TOL, d2 - rho, 0.0)
        none = np.all(np.isnan(J[0]), axis=1) & (distance == 0)
        mm = miss.reshape(N, 4).min(axis=1) if N else np.zeros(0)
        distance = np.where(none, mm, distance)
        flags = ((asn >= 0.5 * math.pi) * SING_SHOULDER)[:, None, None, None] \
            | (sing * SING_WRIST)[:, :, None, None] | (folded * SING_ELBOW)[:, :, None, :]
        flags = np.broadcast_to(flags, (N, 2, 2, 2)).reshape(N, 8)
        rows = np.flatnonzero(sing.any(axis=1)) if N else np.zeros(0, dtype=np.intp)
        if len(rows):
            # wrist singular (J6 free): where it goes depends on the reach and ranges of J2-J4
            # (_free_j6), a search done per pose; these (rare) rows are solved one by one
            flags = flags.copy()
            for i in rows.tolist():
                cands, dist, fl = self._branches(T[i].ravel().tolist(), qn[i].tolist(), None)
                J[:, i] = np.nan
                flags[i] = 0
                for (q, code), f in zip(cands, fl):
                    J[:, i, code] = q
                    flags[i, code] = f
                distance[i] = dist
        return J, distance, flags

    def branch_code(self, q: Sequence[float]) -> int:
        """Branch code (index into :attr:`labels`) of a joint vector (6,) rad."""
        off = self.off
        al2 = -(q[1] + off[1])
        th3 = wrap(q[2] + off[2])
        al3 = al2 + th3
        al4 = al3 - (q[3] + off[3])
        x5 = self.a2 * math.cos(al2) + self.a3 * math.cos(al3) + self.d5 * math.sin(al4)
        s = 0 if x5 >= 0.0 else 1
        e = 0 if (th3 <= 0.0) == (s == 0) else 1
        w = 0 if wrap(q[4] + off[4]) >= 0.0 else 1
        return 4 * s + 2 * e + w
