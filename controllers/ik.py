"""Closed-form inverse kinematics for every armtwin robot (pure Python/numpy, no PyBullet).

>>> from armtwin import robots
>>> from armtwin.controllers.ik import pose_from_rpy, solve
>>> spec = robots.get("irb120")
>>> r = solve(spec, pose_from_rpy((0.374, 0.0, 0.630), (0.0, 1.5707963267948966, 0.0)))
>>> r.ok, r.best_branch
(True, 'front/up/noflip')

Three entry points share one solver per robot:

* :func:`solve` — one pose, the choice over every closed-form branch (control loops; plain
  Python scalars, 10–25 µs on the IRB120). The solver skips a branch as soon as its partial
  travel cannot win (:mod:`.ik_choice`), and :attr:`IKResult.solutions` is only built when
  it is read.
* :func:`solve_batch` — N poses at once, vectorised over poses and branches (whole programs).
* :func:`solve_path` — a densely sampled path, keeping the arm configuration (shoulder and
  elbow branch) and unwrapping joints toward the previous sample; reports the first sample
  that cannot be followed.

Families (chosen from the keys of ``spec.geometry``; each solver is checked once against
:func:`~armtwin.controllers.kinematics.fk`, and its fused choice against
:func:`.ik_choice.pick`, when it is built):

==================  ====================================  =====================================
geometry keys       solver                                branches
==================  ====================================  =====================================
d1 a2 a3 d4 d6      :mod:`.ik_spherical` (IRB120)         8: front/back × up/down × noflip/flip
d1 d2 a2 a3 d5 d6   :mod:`.ik_offset_wrist` (AUBO-i5)     up to 8, only the real ones
l1 l2 z0            :mod:`.ik_scara` (SCARA)              2: right/left
==================  ====================================  =====================================

Joints whose range is wider than a turn (IRB120 J6 ±400°, SCARA J4 ±360°) take the 2π
equivalent nearest ``q_near``; :attr:`IKResult.solutions` also lists the other equivalents
that fit the range, so every in-range joint vector of the pose is among them exactly.

Singular poses are reported, not hidden: :attr:`IKResult.singular` and
:attr:`IKResult.free_joints` say that the chosen solution sits on a singularity and which
joints kept their ``q_near`` value because the pose does not determine them, and the reason
names the singularity. The status stays SOLVED (a singular pose is reached exactly);
:attr:`IKStatus.SINGULAR` is the outcome of ``stay_on_branch`` when ``q_near``'s branch merges
with another one at the singularity and so does not exist there.

Where a float pose does not determine a joint (singularities) the solvers keep ``q_near``'s
value, so ``solve(spec, fk(q), q)`` gives ``q`` back: the free joint at a singularity (IRB120 J1
on the J1 axis and J4 at theta5 = 0, AUBO J6 at theta5 = 0 unless J2–J4 have no in-range
solution with it: then the value nearest ``q_near``'s where they have one); a nearly free wrist
joint where keeping it changes the pose by at most 1e-12 (:func:`.ik_spherical.kept_angle`); a stretched or
folded elbow (and the AUBO's shoulder angle near its singularity), known only to ~1e-8 rad,
where ``q_near``'s elbow reproduces the reach to float precision, else exactly stretched /
folded (:func:`.ik_spherical.elbow_angle`). Every solution reproduces the pose to 1e-9 m and
1e-9 rad. A joint within :data:`LIMIT_TOL` (1e-9 rad / m) beyond a limit counts as inside, as
in ``RobotSpec.within_limits``.

Choice rule: among the solutions inside the joint ranges the one with the smallest weighted
travel ``sum_i w_i * |q_i - q_near_i|`` (rad, m) wins; the default weights
(:func:`default_weights`) are 1 for J1–J3 and 0.25 for the wrist joints. ``stay_on_branch``
keeps the branch label of ``q_near``.

Orientation input: a (4, 4) transform (metres) in the robot's reporting base frame for the
flange ``tool0``; :func:`pose_from_quat` builds one from a position and a quaternion
(x, y, z, w), :func:`pose_from_rpy` from URDF roll-pitch-yaw (fixed axes X, then Y, then Z:
``R = Rz(yaw) Ry(pitch) Rx(roll)``, radians). For the SCARA only the position and the tool
roll (the angle of the tool x axis in the base xy plane) are used.

Normal outcomes are results (:class:`IKStatus`); invalid input (wrong shapes, NaN, a matrix
that is not a rotation) raises ``ValueError``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .ik_choice import Choice, fit, pick
from .ik_offset_wrist import OffsetWristSolver
from .ik_scara import ScaraSolver
from .ik_spherical import SphericalWristSolver
from .kinematics import chain_of, fk
from .transforms import quat_to_matrix, rotation_angle, rpy_to_matrix, transform

__all__ = [
    "DEFAULT_ARM_WEIGHT",
    "DEFAULT_MAX_STEP",
    "DEFAULT_WRIST_WEIGHT",
    "LIMIT_TOL",
    "BatchIKResult",
    "IKResult",
    "IKSolution",
    "IKStatus",
    "PathIKResult",
    "branch_labels",
    "branch_of",
    "default_weights",
    "pose_from_quat",
    "pose_from_rpy",
    "solve",
    "solve_batch",
    "solve_path",
]

DEFAULT_ARM_WEIGHT = 1.0     # travel weight of J1–J3 (per rad, or per m for a prismatic joint)
DEFAULT_WRIST_WEIGHT = 0.25  # travel weight of J4 and beyond
DEFAULT_MAX_STEP = 0.5       # rad, largest revolute joint step between path samples
# Slack on the joint limits (rad / m): a value this close beyond a limit counts as inside (the same
# tolerance as RobotSpec.within_limits and the command runner). It is not widened to the ~1e-8 rad
# by which a stretched elbow or a nearly free wrist joint is determined from a float pose, and
# joints are not clamped onto a limit: clamping a joint by 1e-8 rad moves the flange by ~1e-8 m
# and breaks the 1e-9 m / 1e-9 rad accuracy. The solvers are made accurate there instead: where
# the pose cannot tell, they keep q_near's value (.ik_spherical.elbow_angle, .kept_angle).
LIMIT_TOL = 1e-9
_TWO_PI = 2.0 * math.pi


class IKStatus(enum.Enum):
    """Outcome of an IK request.

    SOLVED: a solution inside the joint ranges was chosen.
    UNREACHABLE: no solution (the pose is out of reach by :attr:`IKResult.distance`), or, with
        ``stay_on_branch``, none on the requested branch.
    OUT_OF_RANGE: solutions exist, but none inside the joint ranges (the reason names the joint).
    SINGULAR: with ``stay_on_branch`` only: the pose is singular and ``q_near``'s branch merges
        there with another branch (wrist flip / no flip at q5 = 0, elbow up / down of a stretched
        or folded arm, the AUBO's two shoulders when its J5 centre is d2 from the J1 axis), so
        it has no solution of its own; the reason names the singularity and the branches that
        exist. ``best`` is None, ``ok`` False.

    A reachable singular pose with an in-range solution is SOLVED, with
    :attr:`IKResult.singular` set (consumers that check ``ok`` keep working).
    """

    SOLVED = "solved"
    UNREACHABLE = "unreachable"
    OUT_OF_RANGE = "out_of_range"
    SINGULAR = "singular"


@dataclass(frozen=True, eq=False)
class IKSolution:
    """One closed-form solution.

    Attributes:
        q: (n,) joint vector, rad (m for prismatic joints).
        branch: branch label, e.g. ``"front/up/noflip"`` or ``"right"``.
        within_limits: all joints inside their ranges.
    """

    q: np.ndarray
    branch: str
    within_limits: bool


@dataclass(frozen=True, eq=False)
class IKResult:
    """Result of :func:`solve`.

    Attributes:
        status: the outcome.
        best: (n,) chosen joint vector (rad / m), or None unless SOLVED.
        best_branch: branch label of ``best``, or None.
        reason: one line for people (distances in mm, angles in degrees).
        distance: metres by which the target is out of reach (0 when reachable).
        singular: the chosen solution lies on a singularity, exactly to the float precision of
            the pose (the solvers' 1e-10 threshold on |sin theta5| and on the wrist centre's
            distance to the J1 axis, m): wrist aligned (theta5 = 0), wrist centre on the J1 axis
            (IRB120), arm stretched or folded (one elbow solution), AUBO shoulder (one J1 root).
            Also True for the SINGULAR status. The reason names the singularity.
        free_joints: 0-based indices of the joints the pose does not determine, whose value was
            kept from ``q_near`` (the joints coupled to them take the rest): IRB120 J4 at the
            wrist singularity (J4 + J6 fixed) and J1 on the J1 axis, AUBO-i5 J6 at the wrist
            singularity. Empty when not singular, and for a stretched / folded arm or the
            AUBO's shoulder singularity (a branch is lost there, no joint is free).
        solutions: every closed-form solution (inside the ranges or not), built on first access.
    """

    status: IKStatus
    best: np.ndarray | None
    best_branch: str | None
    reason: str
    distance: float = 0.0
    singular: bool = False
    free_joints: tuple[int, ...] = ()
    _raw: Sequence | None = field(default=(), repr=False)   # (q list, code) per solution; None: solve again
    _ctx: object = field(default=None, repr=False)          # the robot's solver context
    _src: tuple = field(default=(), repr=False)             # (pose list, q_near list) when _raw is None

    @property
    def ok(self) -> bool:
        """True when a solution was chosen (status SOLVED)."""
        return self.status is IKStatus.SOLVED

    @cached_property
    def solutions(self) -> tuple[IKSolution, ...]:
        """All solutions, best first, then in branch order; 2π equivalents that fit the range included."""
        ctx = self._ctx
        raw = self._raw if self._raw is not None else ctx.candidates(*self._src)
        best = None if self.best is None else self.best.tolist()   # lists compare faster than arrays
        first, rest = [], []
        for q, code in raw:
            for qq in ctx.equivalents(q):
                (first if qq == best else rest).append(IKSolution(np.array(qq), ctx.labels[code], ctx.within(qq)))
        return tuple(first + rest)


@dataclass(frozen=True, eq=False)
class BatchIKResult:
    """Result of :func:`solve_batch` for N poses.

    Attributes:
        q: (N, n) chosen joint vectors (rad / m), NaN rows where not SOLVED.
        ok: (N,) bool, SOLVED.
        status: (N,) object array of :class:`IKStatus`.
        branch: (N,) str, branch label of the chosen solution ("" where none).
        distance: (N,) metres out of reach (0 when reachable).
        solutions: (N, B, n) every branch's solution (rad / m; NaN where a branch has no real
            solution), indexed like :func:`branch_labels`; wide-range joints are taken nearest
            ``q_near`` and inside the range.
        within: (N, B) bool, that branch's solution is inside the ranges.
        singular: (N,) bool, as :attr:`IKResult.singular` (the chosen solution, or the
            SINGULAR status, is at a singularity).
    """

    q: np.ndarray
    ok: np.ndarray
    status: np.ndarray
    branch: np.ndarray
    distance: np.ndarray
    solutions: np.ndarray = field(repr=False)
    within: np.ndarray = field(repr=False)
    singular: np.ndarray = field(default=None, repr=False)


@dataclass(frozen=True, eq=False)
class PathIKResult:
    """Result of :func:`solve_path` for N samples.

    Attributes:
        q: (N, n) joint vectors (rad / m), continuous along the path; NaN from the first failure on.
        ok: (N,) bool per sample (False from the first failure on).
        first_failure: index of the first sample that cannot be followed, or None.
        reason: why it failed ("" when the whole path is fine).
        branch: the arm configuration label kept along the path (the start's).
    """

    q: np.ndarray
    ok: np.ndarray
    first_failure: int | None
    reason: str
    branch: str

    @property
    def all_ok(self) -> bool:
        return self.first_failure is None


# ----- per-robot context ------------------------------------------------------------------

_FAMILIES = (
    (frozenset(("d1", "a2", "a3", "d4", "d6")), SphericalWristSolver),
    (frozenset(("d1", "d2", "a2", "a3", "d5", "d6")), OffsetWristSolver),
    (frozenset(("l1", "l2", "z0")), ScaraSolver),
)


class _Context:
    """Everything :func:`solve` needs per robot, prepared once (cached on the spec)."""

    def __init__(self, spec) -> None:
        keys = frozenset(spec.geometry)
        for fam_keys, cls in _FAMILIES:
            if fam_keys <= keys:
                break
        else:
            raise ValueError(f"{spec.name}: no closed-form IK for geometry keys {sorted(keys)}")
        offsets = np.radians(spec.dh["offset_deg"]) if spec.dh is not None and "offset_deg" in spec.dh else np.zeros(spec.dof)
        self.spec = spec
        self.n = spec.dof
        self.solver = cls(spec.geometry, offsets)
        self.labels: tuple[str, ...] = tuple(self.solver.labels)
        self.labels_none = np.array(self.labels + ("",))   # batch branch names; "" (index B) where none
        self.solved_reason = tuple(f"solved on branch {lab}" for lab in self.labels)
        self.arm_mask: int = self.solver.arm_mask
        # per singularity flag: (joint kept from q_near or None, code bits whose branches merge, text)
        self.sing_info = self.solver.singularities
        self.merged_table = np.array([self.merged(f) for f in range(2 * max(self.sing_info, default=1))])
        self.lower = spec.lower.tolist()
        self.upper = spec.upper.tolist()
        self.lower_t = (spec.lower - LIMIT_TOL).tolist()   # limits with the tolerance
        self.upper_t = (spec.upper + LIMIT_TOL).tolist()
        self.prismatic = spec.prismatic.tolist()
        self.home = spec.home.tolist()
        if hasattr(self.solver, "set_limits"):   # AUBO: its free J6 is placed where J2–J4 fit the ranges
            self.solver.set_limits(self.lower, self.upper, LIMIT_TOL)
        self.weights = default_weights(spec).tolist()
        # revolute joints whose range is not inside (-pi, pi]: their 2*pi equivalents matter
        self.unwrap = tuple(j for j in range(self.n) if not self.prismatic[j]
                            and (self.lower[j] < -math.pi - 1e-12 or self.upper[j] > math.pi + 1e-12))
        # (joint, lower, upper) of those joints, limits with tolerance
        self.wide = tuple((j, self.lower_t[j], self.upper_t[j]) for j in self.unwrap)
        self.is_wide = tuple(j in self.unwrap for j in range(self.n))
        self.choice = self.choice_for(self.weights)   # the default choice (default weights, any branch)
        self._check(spec)

    def choice_for(self, weights: list) -> Choice:
        """The choice with these travel weights (any branch)."""
        return Choice(tuple(self.lower_t), tuple(self.upper_t), tuple(weights), self.is_wide)

    def fit_wide(self, cands: list, qn: list) -> list:
        """Move wide-range joints of every candidate (in place) as the choice does; returns ``cands``."""
        for q, _code in cands:
            for j, lj, uj in self.wide:
                q[j] = fit(q[j], qn[j], lj, uj)
        return cands

    def candidates(self, t: list, qn: list) -> list:
        """Every solution of pose ``t`` as ``(q list, code)``, wide joints fitted toward ``qn``."""
        return self.fit_wide(self.solver.solve(t, qn)[0], qn)

    def _check(self, spec) -> None:
        """Make sure the solver reproduces the robot's FK (a spec of another layout fails here) and
        that its fused ``choose`` agrees with the reference rule :func:`.ik_choice.pick`."""
        chain = chain_of(spec)
        rng = np.random.default_rng(12345)
        for q in [spec.home] + list(rng.uniform(spec.lower, spec.upper, (3, spec.dof)) * 0.8):
            T = fk(chain, q)
            cands, _ = self.solver.solve(T.ravel().tolist(), q.tolist())
            good = False
            for qq, _code in cands:
                T2 = fk(chain, np.array(qq))
                if np.abs(T2[:3, 3] - T[:3, 3]).max() < 1e-8 and (
                        self.solver.family == "scara" or rotation_angle(T2[:3, :3], T[:3, :3]) < 1e-8):
                    good = True
                    break
            if not good:
                raise ValueError(f"{spec.name}: the {self.solver.family} IK does not reproduce the FK; "
                                 "the geometry or DH table does not fit this solver")
            # the solver's fused choice must pick what the reference rule picks from every branch
            t, qn = T.ravel().tolist(), q.tolist()
            got = self.solver.choose(t, qn, self.choice)
            if (got and got[:2]) != pick(self.choice, cands, qn):
                raise RuntimeError(f"{spec.name}: the {self.solver.family} solver's choose() disagrees with "
                                   "ik_choice.pick() (a bug in the solver)")

    def within(self, q) -> bool:
        for v, lo, up in zip(q, self.lower_t, self.upper_t):   # limits with the tolerance
            if v < lo or v > up:
                return False
        return True

    def equivalents(self, q: list) -> list[list]:
        """``q`` and its 2π equivalents in wide-range joints that fit the ranges."""
        out = [q]
        for j in self.unwrap:
            more = []
            for base in out:
                for k in (-2, -1, 1, 2):
                    v = base[j] + k * _TWO_PI
                    if self.lower_t[j] <= v <= self.upper_t[j]:
                        qq = list(base)
                        qq[j] = v
                        more.append(qq)
            out += more
        return out

    def violation(self, q) -> tuple[float, int, float]:
        """(total excess, worst joint index, its signed excess) of a joint vector outside its ranges."""
        total, worst, wv = 0.0, -1, 0.0
        for j in range(self.n):
            ex = q[j] - self.upper[j] if q[j] > self.upper[j] else (q[j] - self.lower[j] if q[j] < self.lower[j] else 0.0)
            total += abs(ex)
            if abs(ex) > abs(wv):
                worst, wv = j, ex
        return total, worst, wv

    def singular_reason(self, flags: int, q, q_near=None) -> tuple[tuple[int, ...], str]:
        """(free joints, "; "-joined description) of singularity ``flags`` for the joints ``q``.

        A free joint is "kept at" its value when it has ``q_near``'s (or no ``q_near`` is given),
        else "set to" it: the nearest value at which the rest of the arm reaches (AUBO-i5 J6).
        """
        free, text = [], []
        for bit, (j, _merge, what) in self.sing_info.items():
            if flags & bit:
                if j is None:
                    text.append(what)
                else:
                    free.append(j)
                    d = 0.0 if q_near is None else q[j] - q_near[j]
                    if not self.prismatic[j]:
                        d = math.remainder(d, 2.0 * math.pi)
                    if abs(d) <= 1e-9:
                        text.append(f"{what}: J{j + 1} kept at {self.fmt_joint(j, q[j])}")
                    else:
                        text.append(f"{what}: J{j + 1} set to {self.fmt_joint(j, q[j])}, the nearest value "
                                    f"to {self.fmt_joint(j, q_near[j])} at which the arm reaches")
        return tuple(sorted(free)), "; ".join(text)

    def merged(self, flags: int) -> int:
        """Code bits whose branches coincide at a singularity with these flags."""
        bits = 0
        for bit, (_j, merge, _what) in self.sing_info.items():
            if flags & bit:
                bits |= merge
        return bits

    def fmt_joint(self, j: int, value: float) -> str:
        return f"{value * 1000:.1f} mm" if self.prismatic[j] else f"{math.degrees(value):.1f}°"


def _context(spec) -> _Context:
    ctx = spec._cache.get("ik")
    if ctx is None:
        ctx = _Context(spec)
        spec._cache["ik"] = ctx
    return ctx


# ----- public helpers ---------------------------------------------------------------------

def default_weights(spec) -> np.ndarray:
    """(n,) default travel weights: :data:`DEFAULT_ARM_WEIGHT` for J1–J3, :data:`DEFAULT_WRIST_WEIGHT` after."""
    w = np.full(spec.dof, DEFAULT_WRIST_WEIGHT)
    w[:3] = DEFAULT_ARM_WEIGHT
    return w


def branch_labels(spec) -> tuple[str, ...]:
    """Branch labels of a robot, in the order of :attr:`BatchIKResult.solutions`."""
    return _context(spec).labels


def branch_of(spec, q) -> str:
    """Branch label of a joint vector (n,) rad / m (the label IK gives the solution ``q``)."""
    ctx = _context(spec)
    return ctx.labels[ctx.solver.branch_code(_joint_list(q, ctx.n, "q"))]


def pose_from_quat(position, quat_xyzw) -> np.ndarray:
    """(4, 4) pose from a position (3,) m and a quaternion (x, y, z, w) (normalised here)."""
    return transform(quat_to_matrix(np.asarray(quat_xyzw, dtype=float).reshape(4)), np.asarray(position, dtype=float).reshape(3))


def pose_from_rpy(position, rpy) -> np.ndarray:
    """(4, 4) pose from a position (3,) m and URDF roll-pitch-yaw (3,) rad: R = Rz(y) Ry(p) Rx(r)."""
    return transform(rpy_to_matrix(np.asarray(rpy, dtype=float).reshape(3)), np.asarray(position, dtype=float).reshape(3))


# ----- input checks -----------------------------------------------------------------------

def _pose_list(T) -> list:
    """The 16 entries of a (4, 4) pose as floats, after checking it is a rigid transform."""
    if type(T) is np.ndarray and T.shape == (4, 4):
        t = T.ravel().tolist()
    else:
        a = np.asarray(T, dtype=float)
        if a.shape != (4, 4):
            raise ValueError(f"IK target must be a (4, 4) transform, got shape {a.shape}")
        t = a.ravel().tolist()
    r00, r01, r02, p0, r10, r11, r12, p1, r20, r21, r22, p2, _, _, _, _ = t
    if not math.isfinite(r00 + r01 + r02 + p0 + r10 + r11 + r12 + p1 + r20 + r21 + r22 + p2):
        raise ValueError("IK target contains NaN or infinite values")
    # columns of unit length and mutually orthogonal, to 1e-6 (chained comparisons: fewer calls than abs())
    if not (-1e-6 <= r00 * r00 + r10 * r10 + r20 * r20 - 1.0 <= 1e-6
            and -1e-6 <= r01 * r01 + r11 * r11 + r21 * r21 - 1.0 <= 1e-6
            and -1e-6 <= r02 * r02 + r12 * r12 + r22 * r22 - 1.0 <= 1e-6
            and -1e-6 <= r00 * r01 + r10 * r11 + r20 * r21 <= 1e-6
            and -1e-6 <= r00 * r02 + r10 * r12 + r20 * r22 <= 1e-6
            and -1e-6 <= r01 * r02 + r11 * r12 + r21 * r22 <= 1e-6):
        raise ValueError("IK target rotation is not orthonormal (tolerance 1e-6)")
    return t


def _joint_list(q, n: int, what: str) -> list:
    if isinstance(q, np.ndarray) and q.shape == (n,):
        out = q.tolist()
    else:
        a = np.asarray(q, dtype=float)
        if a.shape != (n,):
            raise ValueError(f"{what} must have {n} joint values, got shape {a.shape}")
        out = a.tolist()
    if not math.isfinite(sum(out)):
        raise ValueError(f"{what} contains NaN or infinite values")
    return out


def _weights_list(weights, n: int) -> list:
    w = _joint_list(weights, n, "weights")
    if any(v < 0 for v in w):
        raise ValueError("weights must be >= 0")
    return w


# ----- single pose ------------------------------------------------------------------------

def _failure(ctx: _Context, cands: list, dist: float, want: int | None, mask: int,
             what: str = "the current branch", flags: list | None = None) -> tuple[IKStatus, str, float]:
    """Status, reason and distance when no candidate was chosen (``flags``: per candidate, SING_* bits)."""
    raw = [(q, code, ctx.within(q)) for q, code in cands]
    if not raw:
        return IKStatus.UNREACHABLE, f"target is out of reach by {dist * 1000:.1f} mm", dist
    pool = raw if want is None else [r for r in raw if (r[1] & mask) == want]
    if not pool:
        have = ", ".join(sorted({ctx.labels[c] for _, c, _ in raw}))
        for (q, code, _), f in zip(raw, flags or ()):
            # the wanted branch differs from this solution's only in bits that merge here
            if f and ((code ^ want) & mask & ~ctx.merged(f)) == 0:
                _, why = ctx.singular_reason(f, q)
                return IKStatus.SINGULAR, (f"singular pose ({why}): {what} merges with {ctx.labels[code]} "
                                           f"here (solutions on: {have})"), 0.0
        return IKStatus.UNREACHABLE, f"no solution on {what} (reachable on: {have})", 0.0
    q, code, _ = min(pool, key=lambda r: ctx.violation(r[0])[0])
    _, j, ex = ctx.violation(q)
    lim = ctx.upper[j] if ex > 0 else ctx.lower[j]
    side = "above its upper" if ex > 0 else "below its lower"
    reason = (f"no solution inside the joint ranges: nearest is the {ctx.labels[code]} solution with J{j + 1} = "
              f"{ctx.fmt_joint(j, q[j])}, {ctx.fmt_joint(j, abs(ex))} {side} limit {ctx.fmt_joint(j, lim)}")
    if want is not None:
        other = sorted({ctx.labels[c] for _, c, ok in raw if ok and (c & mask) != want})
        if other:
            reason += f" (in range on other branches: {', '.join(other)})"
    return IKStatus.OUT_OF_RANGE, reason, 0.0


def solve(spec, T, q_near=None, *, weights=None, stay_on_branch: bool = False) -> IKResult:
    """Closed-form IK of one pose, with the weighted shortest-travel choice.

    Args:
        spec: the robot (:func:`armtwin.robots.get`).
        T: (4, 4) flange pose in the robot's reporting base frame, metres.
        q_near: (n,) current joints (rad / m); the reference for the choice, for 2π unwrapping
            and for the free joint at singularities. Default: the robot's home pose.
        weights: (n,) travel weights (>= 0); default :func:`default_weights`.
        stay_on_branch: only accept solutions on ``q_near``'s branch (arm and wrist).

    Returns:
        An :class:`IKResult`; never raises for unreachable or out-of-range targets. At a
        singularity the result is SOLVED with ``singular`` True, ``free_joints`` the joints
        kept from ``q_near``, and the reason naming the singularity (with ``stay_on_branch``:
        SINGULAR when ``q_near``'s branch merges with another one there).

    Raises:
        ValueError: for a malformed pose, joint vector or weights.
    """
    ctx = spec._cache.get("ik") or _context(spec)
    t = _pose_list(T)
    qn = ctx.home if q_near is None else _joint_list(q_near, ctx.n, "q_near")
    choice = ctx.choice if weights is None else ctx.choice_for(_weights_list(weights, ctx.n))
    want = None
    if stay_on_branch:
        want = ctx.solver.branch_code(qn)
        choice = choice.with_branch(want, 0xFF)
    got = ctx.solver.choose(t, qn, choice)
    if got is None:   # not the hot path: every solution, to say why
        cands, dist, flags = ctx.solver.solve_flags(t, qn)
        ctx.fit_wide(cands, qn)
        what = "the current branch" if want is None else f"the current branch {ctx.labels[want]}"
        status, reason, distance = _failure(ctx, cands, dist, want, 0xFF, what, flags)
        free = ()
        if status is IKStatus.SINGULAR:
            free = tuple(sorted({j for q, f in zip(cands, flags) for j in ctx.singular_reason(f, q[0])[0]}))
        return _result(status, None, None, reason, distance, cands, ctx, (), status is IKStatus.SINGULAR, free)
    best, code, flags = got
    # the other solutions are solved again only if someone asks for them
    if flags:
        free, why = ctx.singular_reason(flags, best, qn)
        return _result(_SOLVED, np.array(best), ctx.labels[code], f"{ctx.solved_reason[code]}; singular: {why}",
                       0.0, None, ctx, (t, qn), True, free)
    return _result(_SOLVED, np.array(best), ctx.labels[code], ctx.solved_reason[code], 0.0, None, ctx, (t, qn))


_SOLVED = IKStatus.SOLVED
_new = object.__new__


def _result(status, best, branch, reason, distance, raw, ctx, src, singular=False, free=()) -> IKResult:
    """IKResult without the frozen-dataclass __init__ (this is the control-loop hot path)."""
    r = _new(IKResult)
    d = r.__dict__
    d["status"] = status
    d["best"] = best
    d["best_branch"] = branch
    d["reason"] = reason
    d["distance"] = distance
    d["singular"] = singular
    d["free_joints"] = free
    d["_raw"] = raw
    d["_ctx"] = ctx
    d["_src"] = src
    return r


# ----- batch ------------------------------------------------------------------------------

_STATUS_TABLE = np.array([IKStatus.SOLVED, IKStatus.OUT_OF_RANGE, IKStatus.UNREACHABLE, IKStatus.SINGULAR], dtype=object)


def solve_batch(spec, T, q_near=None, *, weights=None, stay_on_branch: bool = False) -> BatchIKResult:
    """Closed-form IK of N poses, vectorised over poses and branches.

    Same solutions and choice rule as :func:`solve` (each pose independently; use
    :func:`solve_path` for continuity along a path).

    Args:
        spec: the robot.
        T: (N, 4, 4) flange poses, metres.
        q_near: (n,) or (N, n) reference joints, rad / m; default home.
        weights: (n,) travel weights; default :func:`default_weights`.
        stay_on_branch: only accept solutions on the branch of each row's ``q_near``.

    Returns:
        A :class:`BatchIKResult`.

    Raises:
        ValueError: for malformed input (shapes, NaN).
    """
    ctx = _context(spec)
    n = ctx.n
    T = np.asarray(T, dtype=float)
    if T.ndim != 3 or T.shape[1:] != (4, 4):
        raise ValueError(f"solve_batch needs (N, 4, 4) poses, got shape {T.shape}")
    N = len(T)
    if N and not (math.isfinite(T[:, :3].min()) and math.isfinite(T[:, :3].max())):   # NaN propagates
        raise ValueError("IK targets contain NaN or infinite values")
    if q_near is None:
        QN = np.broadcast_to(np.asarray(ctx.home), (N, n))
    else:
        QN = np.asarray(q_near, dtype=float)
        if QN.shape == (n,):
            QN = np.broadcast_to(QN, (N, n))
        elif QN.shape != (N, n):
            raise ValueError(f"q_near must be ({n},) or ({N}, {n}), got {QN.shape}")
        if not np.all(np.isfinite(QN)):
            raise ValueError("q_near contains NaN or infinite values")
    w = ctx.weights if weights is None else _weights_list(weights, n)
    J, distance, flags = ctx.solver.solve_batch(T, QN)                 # (n, N, B) joint-major, (N, B)
    B = J.shape[2]
    within = np.ones((N, B), dtype=bool)
    cost = np.zeros((N, B))
    tmp = np.empty((N, B))              # scratch, so the loop allocates nothing per joint
    tmpb = np.empty((N, B), dtype=bool)
    for j in range(n):
        v = J[j]
        r = QN[:, j, None]
        lo, up = ctx.lower_t[j], ctx.upper_t[j]
        if j in ctx.unwrap:   # 2*pi equivalent nearest q_near, kept inside the range
            v += _TWO_PI * np.round((r - v) / _TWO_PI)
            v -= _TWO_PI * ((v > up) & (v - _TWO_PI >= lo))
            v += _TWO_PI * ((v < lo) & (v + _TWO_PI <= up))
        within &= np.greater_equal(v, lo, out=tmpb)                       # NaN -> False
        within &= np.less_equal(v, up, out=tmpb)
        if w[j]:
            np.subtract(v, r, out=tmp)
            np.abs(tmp, out=tmp)
            tmp *= w[j]
            cost += tmp
    np.copyto(cost, np.inf, where=np.logical_not(within, out=tmpb))
    rows = np.arange(N)
    if stay_on_branch:
        codes = np.array([ctx.solver.branch_code(r) for r in QN.tolist()]) if q_near is not None \
            else np.full(N, ctx.solver.branch_code(ctx.home))
        cost[np.arange(B)[None, :] != codes[:, None]] = np.inf
    k = np.argmin(cost, axis=1)
    ok = cost[rows, k] < np.inf
    q = J.reshape(n, N * B).take(rows * B + k, axis=1).T            # J[:, rows, k].T, a cheaper gather
    q[~ok] = np.nan
    real = ~np.isnan(J[0])
    singular = ok & (flags[rows, k] != 0)
    if stay_on_branch:
        # no real solution on the branch: SINGULAR where it merges with a real one here (as in solve())
        merged = ctx.merged_table[flags]                                                      # (N, B)
        b_idx = np.arange(B)[None, :]
        merge = real & (flags != 0) & (((b_idx ^ codes[:, None]) & 0xFF & ~merged) == 0)
        merge = merge.any(axis=1) & ~real[rows, codes]
        singular |= merge
        real = real[rows, codes]
        code = np.where(ok, 0, np.where(real, 1, np.where(merge, 3, 2)))
    else:
        code = np.where(ok, 0, np.where(real.any(axis=1), 1, 2))   # no real solution: UNREACHABLE
    branch = ctx.labels_none[np.where(ok, k, B)]                    # labels plus "" at index B
    return BatchIKResult(q, ok, _STATUS_TABLE[code], branch, distance, J.transpose(1, 2, 0), within, singular)


# ----- path -------------------------------------------------------------------------------

def solve_path(spec, T, q_start, *, weights=None, max_step: float | None = DEFAULT_MAX_STEP) -> PathIKResult:
    """IK along a densely sampled path with branch continuity.

    Each sample is solved from the previous solution: the arm configuration (shoulder and
    elbow branch; the SCARA's elbow) of ``q_start`` is kept, the wrist may change branch only
    continuously, wide-range joints are unwrapped toward the previous sample, and the weighted
    nearest in-range solution is taken. The first sample that is unreachable, out of range,
    only reachable in another configuration, or needs a revolute joint step larger than
    ``max_step`` ends the path.

    Args:
        spec: the robot.
        T: (N, 4, 4) flange poses along the path, metres.
        q_start: (n,) joints before the first sample, rad / m (its branch is kept).
        weights: (n,) travel weights; default :func:`default_weights`.
        max_step: largest allowed revolute joint change between consecutive samples (and from
            ``q_start`` to sample 0), rad; None disables the check.

    Returns:
        A :class:`PathIKResult`.
    """
    ctx = _context(spec)
    n = ctx.n
    T = np.asarray(T, dtype=float)
    if T.ndim != 3 or T.shape[1:] != (4, 4):
        raise ValueError(f"solve_path needs (N, 4, 4) poses, got shape {T.shape}")
    prev = _joint_list(q_start, n, "q_start")
    w = ctx.weights if weights is None else _weights_list(weights, n)
    if max_step is not None and not max_step > 0:
        raise ValueError(f"max_step must be > 0 rad or None, got {max_step}")
    mask = ctx.arm_mask
    start_code = ctx.solver.branch_code(prev)
    want = start_code & mask
    label = ctx.labels[start_code]
    choice = ctx.choice_for(w).with_branch(want, mask)
    N = len(T)
    out = np.full((N, n), np.nan)
    ok = np.zeros(N, dtype=bool)
    for i in range(N):
        t = _pose_list(T[i])
        got = ctx.solver.choose(t, prev, choice)
        if got is None:
            cands, dist, flags = ctx.solver.solve_flags(t, prev)
            ctx.fit_wide(cands, prev)
            _, why, _ = _failure(ctx, cands, dist, want, mask, f"the start configuration {label}", flags)
            return PathIKResult(out, ok, i, f"sample {i}: {why}", label)
        best = got[0]
        if max_step is not None:
            for j in range(n):
                if not ctx.prismatic[j] and abs(best[j] - prev[j]) > max_step:
                    where = "from q_start" if i == 0 else f"from sample {i - 1}"
                    return PathIKResult(out, ok, i, (
                        f"sample {i}: J{j + 1} would jump by {math.degrees(abs(best[j] - prev[j])):.1f}° {where} "
                        f"(limit {math.degrees(max_step):.1f}°): singularity or too coarse sampling"), label)
        out[i] = best
        ok[i] = True
        prev = best
    return PathIKResult(out, ok, None, "", label)
