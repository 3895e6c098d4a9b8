"""Closed-form IK of a 6R arm with a spherical wrist (ABB IRB120 layout), pure Python/numpy.

Kinematic family: standard DH with alpha = (-90, 0, -90, 90, -90, 0) deg, a = (0, a2, a3, 0, 0, 0),
d = (d1, 0, 0, d4, 0, d6); the joint angle of DH row i is ``theta_i = q_i + offset_i`` (offsets
from the robot's published table). Geometry comes from ``spec.geometry`` (d1, a2, a3, d4, d6,
metres) and the offsets from ``spec.dh["offset_deg"]``.

Method (Pieper): the wrist centre ``w = p - d6 * z_tool`` fixes J1 (front / back), then J2, J3
from a planar two-link problem in the J1 plane (elbow up / down, with the elbow offset a3 folded
into ``L3 = hypot(a3, d4)``), then the wrist ``R36 = R03^T R`` gives J4, J5, J6 (no flip / flip).

Branch labels ``"<shoulder>/<elbow>/<wrist>"``:
    shoulder: ``front`` when the wrist centre lies on the +x1 side of J1 (in front of the
        base column), ``back`` when J1 is turned half a turn away and the arm reaches over.
    elbow: ``up`` when the elbow lies above the line from the J2 axis to the wrist centre.
    wrist: ``noflip`` for theta5 >= 0, ``flip`` for theta5 < 0.

Singularities keep the current (``q_near``) value of the free joint: wrist centre on the J1 axis
(J1 free), theta5 = 0 (J4 free; J6 takes the rest). A stretched or folded arm gives one elbow
solution instead of two. Nothing returns NaN for a reachable pose.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["SphericalWristSolver"]

_TWO_PI = 2.0 * math.pi
_SING = 1e-10       # |sin theta5| / wrist-centre radius (m) below which a joint is free
_REACH_TOL = 1e-12  # metres of slack when clamping a stretched / folded elbow


def _wrap(a: float) -> float:
    """Angle wrapped into (-pi, pi]."""
    if -math.pi < a <= math.pi:
        return a
    a = math.fmod(a + math.pi, _TWO_PI)
    if a <= 0.0:
        a += _TWO_PI
    return a - math.pi


def _wrap_np(a: np.ndarray) -> np.ndarray:
    """Angles wrapped into (-pi, pi] (vectorised, like :func:`_wrap`)."""
    return math.pi - (math.pi - a) % _TWO_PI


def _wrap3(a: np.ndarray) -> np.ndarray:
    """Angles within (-3 pi, 3 pi] wrapped into (-pi, pi] (vectorised, cheaper than :func:`_wrap_np`)."""
    a = np.where(a > math.pi, a - _TWO_PI, a)
    return np.where(a <= -math.pi, a + _TWO_PI, a)


class SphericalWristSolver:
    """Analytic IK for the IRB120 kinematic family (see the module docstring).

    Args:
        geometry: mapping with d1, a2, a3, d4, d6 (metres).
        offsets: (6,) DH theta offsets, rad.
    """

    family = "spherical_wrist"
    lists_equivalents = True  # J6 equivalents inside its range are listed as solutions
    labels: tuple[str, ...] = tuple(
        f"{s}/{e}/{w}" for s in ("front", "back") for e in ("up", "down") for w in ("noflip", "flip"))
    arm_mask = 0b110  # code bits that describe the arm (shoulder, elbow), not the wrist

    def __init__(self, geometry, offsets) -> None:
        self.d1 = float(geometry["d1"])
        self.a2 = float(geometry["a2"])
        self.a3 = float(geometry["a3"])
        self.d4 = float(geometry["d4"])
        self.d6 = float(geometry["d6"])
        self.off = tuple(float(o) for o in offsets)
        self.L3 = math.hypot(self.a3, self.d4)
        self.phi = math.atan2(self.d4, self.a3)
        self.reach_out = self.a2 + self.L3
        self.reach_in = abs(self.a2 - self.L3)

    # ----- single pose ---------------------------------------------------------------
    def solve(self, t: list, qn: list) -> tuple[list, float]:
        """All IK branches of one pose.

        Args:
            t: the 16 entries of the (4, 4) target, row-major, metres.
            qn: (6,) joint vector used for the free joints at singularities, rad.

        Returns:
            (candidates, distance): list of ``(q list (6,) rad wrapped to (-pi, pi], code)``
            with ``code`` an index into :attr:`labels`, and the distance (m) by which the wrist
            centre lies outside the reachable shell (0 when reachable).
        """
        nx, _, ax, px, ny, _, ay, py, nz, _, az, pz = t[:12]   # the tool y axis is not needed
        d6 = self.d6
        wx, wy, wz = px - d6 * ax, py - d6 * ay, pz - d6 * az
        off0, off1, off2, off3, off4, off5 = self.off
        pi, tau = math.pi, _TWO_PI
        atan2, cos, sin = math.atan2, math.cos, math.sin
        rho = math.hypot(wx, wy)
        th1f = atan2(wy, wx) if rho > _SING else qn[0] + off0
        y1 = self.d1 - wz
        a2, L3, phi = self.a2, self.L3, self.phi
        dist = math.hypot(rho, y1)
        if dist > self.reach_out + _REACH_TOL:
            return [], dist - self.reach_out
        if dist < self.reach_in - _REACH_TOL:
            return [], self.reach_in - dist
        D = (rho * rho + y1 * y1 - a2 * a2 - L3 * L3) / (2.0 * a2 * L3)
        D = min(max(D, -1.0), 1.0)
        b = math.acos(D)
        two = 0.0 < b < pi
        # theta2 = gamma -/+ delta for beta = +/-b
        delta = atan2(L3 * sin(b), a2 + L3 * D)
        out = []
        for s in (0, 1):
            th1 = th1f if s == 0 else th1f + pi
            c1, s1 = cos(th1), sin(th1)
            x1 = c1 * wx + s1 * wy
            gamma = atan2(y1, x1)
            q1 = th1 - off0
            q1 = q1 - tau if q1 > pi else (q1 + tau if q1 <= -pi else q1)
            # frame-3 axes dotted with the tool axes need c1, s1 and theta2 + theta3
            xn = c1 * nx + s1 * ny
            xa = c1 * ax + s1 * ay
            r21 = s1 * nx - c1 * ny
            r23 = s1 * ax - c1 * ay
            for beta in ((b, -b) if two else (b,)):
                if beta >= 0.0:
                    th2 = gamma - delta
                    e = s
                else:
                    th2 = gamma + delta
                    e = 1 - s
                th3 = beta - phi
                t23 = th2 + th3
                c23, s23 = cos(t23), sin(t23)
                # R36 = R03^T R
                r11 = c23 * xn - s23 * nz
                r13 = c23 * xa - s23 * az
                r31 = -s23 * xn - c23 * nz
                r33 = -s23 * xa - c23 * az
                s5a = math.hypot(r13, r23)
                q2 = th2 - off1
                q2 = q2 - tau if q2 > pi else (q2 + tau if q2 <= -pi else q2)
                q3 = th3 - off2
                q3 = q3 - tau if q3 > pi else (q3 + tau if q3 <= -pi else q3)
                th5 = atan2(s5a, r33)
                if s5a <= _SING:
                    th4 = qn[3] + off3
                    c4, s4 = cos(th4), sin(th4)
                    th6 = atan2(-s4 * r11 + c4 * r21, cos(th5) * (c4 * r11 + s4 * r21) + s5a * r31)
                else:
                    th4 = atan2(-r23, -r13)
                    # c4 = -r13 / s5, s4 = -r23 / s5, c5 = r33; both arguments scaled by s5 > 0
                    th6 = atan2(r23 * r11 - r13 * r21, s5a * s5a * r31 - r33 * (r13 * r11 + r23 * r21))
                q4 = th4 - off3
                q4 = q4 - tau if q4 > pi else (q4 + tau if q4 <= -pi else q4)
                q5 = th5 - off4
                q5 = q5 - tau if q5 > pi else (q5 + tau if q5 <= -pi else q5)
                q6 = th6 - off5
                q6 = q6 - tau if q6 > pi else (q6 + tau if q6 <= -pi else q6)
                code = 4 * s + 2 * e
                out.append(([q1, q2, q3, q4, q5, q6], code))
                if s5a > _SING:
                    # the flipped wrist: theta4 + pi, -theta5, theta6 + pi
                    q4 = q4 - pi if q4 > 0.0 else q4 + pi
                    q5 = -th5 - off4
                    q5 = q5 - tau if q5 > pi else (q5 + tau if q5 <= -pi else q5)
                    q6 = q6 - pi if q6 > 0.0 else q6 + pi
                    out.append(([q1, q2, q3, q4, q5, q6], code + 1))
        return out, 0.0

    # ----- batch ---------------------------------------------------------------------
    def solve_batch(self, T: np.ndarray, qn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """All 8 branches for N poses, vectorised over poses and branches.

        Same solutions as :meth:`solve`, with the trigonometry of the second shoulder, elbow and
        wrist branches replaced by their closed-form relations (theta2 = gamma -/+ delta,
        flipped wrist = (theta4 + pi, -theta5, theta6 + pi)).

        Args:
            T: (N, 4, 4) targets, metres.
            qn: (N, 6) joint vectors for the free joints at singularities, rad.

        Returns:
            (J, distance): J (6, N, 8) joint-major solutions, rad, NaN for branches without a
            solution (last axis indexed by branch code), and (N,) distance (m) outside the
            reachable shell.
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
        D = np.minimum(np.maximum((dist * dist - (a2 * a2 + L3 * L3)) / (2.0 * a2 * L3), -1.0), 1.0)
        b = np.arccos(D)
        delta = np.arctan2(L3 * np.sqrt(1.0 - D * D), a2 + L3 * D)
        # front shoulder: theta1 = atan2(wy, wx); back: + pi (cos, sin negated, x1 = -rho)
        sing1 = rho <= _SING
        with np.errstate(invalid="ignore", divide="ignore"):
            c1, s1 = wx / rho, wy / rho
        th1 = np.arctan2(wy, wx)
        if sing1.any():
            th1[sing1] = qn[sing1, 0] + off0
            c1[sing1], s1[sing1] = np.cos(th1[sing1]), np.sin(th1[sing1])
        q1f = th1 - off0
        q1f = _wrap3(q1f)
        q1b = np.where(q1f > 0.0, q1f - pi, q1f + pi)
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
        if sing5.any():                                    # J4 free: keep q_near's
            i = np.nonzero(sing5)
            t4 = np.broadcast_to((qn[:, 3] + off3)[:, None, None], sing5.shape)[i]
            c4, s4, c5 = np.cos(t4), np.sin(t4), np.cos(th5[i])
            th4[i] = t4
            th6[i] = np.arctan2(-s4 * r11[i] + c4 * r21[i], c5 * (c4 * r11[i] + s4 * r21[i]) + s5a[i] * r31[i])
        J = np.empty((6, N, 2, 2, 2))
        J[0, :, 0] = q1f[:, None, None]
        J[0, :, 1] = q1b[:, None, None]
        J[1] = _wrap3(th2 - off1)[..., None]
        J[2] = _wrap3(th3 - off2)[..., None]
        q4 = _wrap3(th4 - off3)
        J[3, ..., 0] = q4
        J[3, ..., 1] = np.where(q4 > 0.0, q4 - pi, q4 + pi)
        J[4, ..., 0] = _wrap3(th5 - off4)
        J[4, ..., 1] = _wrap3(-th5 - off4)
        q6 = _wrap3(th6 - off5)
        J[5, ..., 0] = q6
        J[5, ..., 1] = np.where(q6 > 0.0, q6 - pi, q6 + pi)
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
        return J, distance

    # ----- labels ----------------------------------------------------------------------
    def branch_code(self, q) -> int:
        """Branch code (index into :attr:`labels`) of a joint vector (6,) rad."""
        off = self.off
        th2 = q[1] + off[1]
        beta = _wrap(q[2] + off[2] + self.phi)
        x1 = self.a2 * math.cos(th2) + self.L3 * math.cos(th2 + beta)
        s = 0 if x1 >= 0.0 else 1
        e = 0 if (beta >= 0.0) == (s == 0) else 1
        w = 0 if _wrap(q[4] + off[4]) >= 0.0 else 1
        return 4 * s + 2 * e + w
