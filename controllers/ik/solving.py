"""The IK entry points: :func:`solve` (one pose), :func:`solve_batch` (N poses, vectorised) and
:func:`solve_path` (a sampled path with branch continuity), and the pose helpers.

See the package docstring (:mod:`armtwin.controllers.ik`) for the rules they share.
"""
# mypy: disallow-untyped-defs, check-untyped-defs

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..transforms import quat_to_matrix, rpy_to_matrix, transform
from .angles import TWO_PI
from .model import RobotIK, robot_ik
from .results import BatchIKResult, IKResult, IKSolution, IKStatus, PathIKResult, Reject, rejection
from .solver import Chosen
from .travel import Candidate, TravelRule

if TYPE_CHECKING:   # the robots package builds on this one; the spec is only a type here
    from ...robots.spec import RobotSpec

__all__ = [
    "DEFAULT_MAX_STEP",
    "branch_labels",
    "branch_of",
    "pose_from_quat",
    "pose_from_rpy",
    "solve",
    "solve_batch",
    "solve_path",
]

DEFAULT_MAX_STEP = 0.5       # rad, largest revolute joint step between path samples


# ----- public helpers ---------------------------------------------------------------------

def branch_labels(spec: RobotSpec) -> tuple[str, ...]:
    """Branch labels of a robot, in the order of :attr:`BatchIKResult.solutions`."""
    return robot_ik(spec).labels


def branch_of(spec: RobotSpec, q: Sequence[float] | np.ndarray) -> str:
    """Branch label of a joint vector (n,) rad / m (the label IK gives the solution ``q``)."""
    ctx = robot_ik(spec)
    return ctx.labels[ctx.solver.branch_code(_joint_list(q, ctx.n, "q"))]


def pose_from_quat(position: Sequence[float] | np.ndarray, quat_xyzw: Sequence[float] | np.ndarray) -> np.ndarray:
    """(4, 4) pose from a position (3,) m and a quaternion (x, y, z, w) (normalised here)."""
    return transform(quat_to_matrix(np.asarray(quat_xyzw, dtype=float).reshape(4)), np.asarray(position, dtype=float).reshape(3))


def pose_from_rpy(position: Sequence[float] | np.ndarray, rpy: Sequence[float] | np.ndarray) -> np.ndarray:
    """(4, 4) pose from a position (3,) m and URDF roll-pitch-yaw (3,) rad: R = Rz(y) Ry(p) Rx(r)."""
    return transform(rpy_to_matrix(np.asarray(rpy, dtype=float).reshape(3)), np.asarray(position, dtype=float).reshape(3))


# ----- input checks -----------------------------------------------------------------------

def _pose_list(T: np.ndarray | Sequence[Sequence[float]]) -> list[float]:
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


def _joint_list(q: Sequence[float] | np.ndarray, n: int, what: str) -> list[float]:
    """(n,) joint values as a list of floats; ValueError naming ``what`` for a wrong shape or NaN."""
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


def _weights_list(weights: Sequence[float] | np.ndarray, n: int) -> list[float]:
    w = _joint_list(weights, n, "weights")
    if any(v < 0 for v in w):
        raise ValueError("weights must be >= 0")
    return w


# ----- single pose ------------------------------------------------------------------------

def _failure(ctx: RobotIK, cands: list[Candidate], dist: float, want: int | None, mask: int,
             what: str = "the current branch", flags: list[int] | None = None) -> tuple[IKStatus, str, float]:
    """Status, reason and distance when no candidate was chosen (``flags``: per candidate, SING_* bits)."""
    raw = [(q, code, ctx.within(q)) for q, code in cands]
    if not raw:
        return IKStatus.UNREACHABLE, f"target is out of reach by {dist * 1000:.1f} mm", dist
    pool = raw if want is None else [r for r in raw if (r[1] & mask) == want]
    if want is not None and not pool:   # (pool is raw when no branch is wanted)
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


def _accepted(ctx: RobotIK, t: list[float], qn: list[float], rule: TravelRule, reject: Reject,
              got: Chosen, why: str) -> tuple[Chosen | None, int, str]:
    """The solution the rule takes among those ``reject`` accepts, after it refused ``got`` (the
    rule's own pick) for ``why``.

    Every solution is a candidate, with every 2π equivalent of its wide joints that fits the
    ranges; they are tried in the rule's order (:meth:`.TravelRule.ranked`) until one is accepted.

    Returns:
        (the accepted solution or None, how many solutions nearer than it were refused, the
        refusal of the nearest as "<branch>: <reason>").
    """
    cands, _, flags = ctx.solver.solve_flags(t, qn)
    ctx.fit_wide(cands, qn)
    pool: list[Candidate] = []
    pflags: list[int] = []
    for (q, code), f in zip(cands, flags):
        for qq in ctx.equivalents(q):
            pool.append((qq, code))
            pflags.append(f)
    refused = 0
    for _, i in rule.ranked(pool, qn):
        q, code = pool[i]
        w = why if q == got[0] else rejection(reject, q)
        if not w:
            return (q, code, pflags[i]), refused, f"{ctx.labels[got[1]]}: {why}"
        refused += 1
    return None, refused, f"{ctx.labels[got[1]]}: {why}"


def solve(spec: RobotSpec, T: np.ndarray | Sequence[Sequence[float]], q_near: Sequence[float] | np.ndarray | None = None,
          *, weights: Sequence[float] | np.ndarray | None = None, stay_on_branch: bool = False,
          reject: Reject | None = None) -> IKResult:
    """Closed-form IK of one pose, with the weighted shortest-travel choice.

    Args:
        spec: the robot (:func:`armtwin.robots.get`).
        T: (4, 4) flange pose in the robot's reporting base frame, metres.
        q_near: (n,) current joints (rad / m); the reference for the choice, for 2π unwrapping
            and for the free joint at singularities. Default: the robot's home pose.
        weights: (n,) travel weights (>= 0); default :func:`default_weights`.
        stay_on_branch: only accept solutions on ``q_near``'s branch (arm and wrist).
        reject: a solution filter (:data:`Reject`): called with a candidate joint vector, it
            returns a reason (or True) to refuse it. The choice then takes the nearest solution
            (by the same rule, 2π equivalents included) that the filter accepts; it is asked
            about the rule's pick first, and about the next ones only when it refuses that, so
            an accepting filter costs one call. :attr:`IKResult.solutions` carries its verdict
            on every solution. This is the seam for checks the IK itself does not know, such as
            collisions.

    Returns:
        An :class:`IKResult`; never raises for unreachable or out-of-range targets. At a
        singularity the result is SOLVED with ``singular`` True, ``free_joints`` the joints
        kept from ``q_near``, and the reason naming the singularity (with ``stay_on_branch``:
        SINGULAR when ``q_near``'s branch merges with another one there). REJECTED when the
        filter refuses every in-range solution.

    Raises:
        ValueError: for a malformed pose, joint vector or weights.
    """
    ctx = spec.derived(RobotIK)
    t = _pose_list(T)
    qn = ctx.home if q_near is None else _joint_list(q_near, ctx.n, "q_near")
    rule = ctx.rule if weights is None else ctx.rule_for(_weights_list(weights, ctx.n))
    want = None
    if stay_on_branch:
        want = ctx.solver.branch_code(qn)
        rule = rule.with_branch(want, 0xFF)
    got = ctx.solver.choose(t, qn, rule)
    if reject is not None and got is not None:
        why = rejection(reject, got[0])
        if why:
            return _solve_refused(ctx, t, qn, rule, reject, got, why, want)
    if got is None:   # not the hot path: every solution, to say why
        cands, dist, flags = ctx.solver.solve_flags(t, qn)
        ctx.fit_wide(cands, qn)
        what = "the current branch" if want is None else f"the current branch {ctx.labels[want]}"
        status, reason, distance = _failure(ctx, cands, dist, want, 0xFF, what, flags)
        free: tuple[int, ...] = ()
        if status is IKStatus.SINGULAR:
            free = tuple(sorted({j for q, f in zip(cands, flags) for j in ctx.singular_reason(f, q[0])[0]}))
        return _result(status, None, None, reason, distance, cands, ctx, None, status is IKStatus.SINGULAR, free, reject)
    best, code, flags1 = got
    # the other solutions are solved again only if someone asks for them
    if flags1:
        free, why = ctx.singular_reason(flags1, best, qn)
        return _result(_SOLVED, np.array(best), ctx.labels[code], f"{ctx.solved_reason[code]}; singular: {why}",
                       0.0, None, ctx, (t, qn), True, free, reject)
    return _result(_SOLVED, np.array(best), ctx.labels[code], ctx.solved_reason[code], 0.0, None, ctx, (t, qn), False, (), reject)


def _solve_refused(ctx: RobotIK, t: list[float], qn: list[float], rule: TravelRule, reject: Reject,
                   got: Chosen, why: str, want: int | None) -> IKResult:
    """:func:`solve` when the filter refused the rule's pick ``got``."""
    acc, refused, nearest = _accepted(ctx, t, qn, rule, reject, got, why)
    if acc is None:
        on = "" if want is None else f" on the current branch {ctx.labels[want]}"
        reason = (f"every solution inside the joint ranges{on} was rejected ({refused} in all); "
                  f"the nearest, {nearest}")
        return _result(IKStatus.REJECTED, None, None, reason, 0.0, None, ctx, (t, qn), False, (), reject)
    best, code, flags = acc
    reason = f"{ctx.solved_reason[code]} ({refused} nearer solution{'s' if refused > 1 else ''} rejected, the nearest {nearest})"
    if flags:
        free, sing = ctx.singular_reason(flags, best, qn)
        return _result(_SOLVED, np.array(best), ctx.labels[code], f"{reason}; singular: {sing}",
                       0.0, None, ctx, (t, qn), True, free, reject)
    return _result(_SOLVED, np.array(best), ctx.labels[code], reason, 0.0, None, ctx, (t, qn), False, (), reject)


_SOLVED = IKStatus.SOLVED
_new = object.__new__


def _result(status: IKStatus, best: np.ndarray | None, branch: str | None, reason: str, distance: float,
            raw: list[Candidate] | None, ctx: RobotIK, src: tuple[list[float], list[float]] | None,
            singular: bool = False, free: tuple[int, ...] = (), reject: Reject | None = None) -> IKResult:
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
    d["_reject"] = reject
    return r


# ----- batch ------------------------------------------------------------------------------

_STATUS_TABLE = np.array([IKStatus.SOLVED, IKStatus.OUT_OF_RANGE, IKStatus.UNREACHABLE, IKStatus.SINGULAR,
                          IKStatus.REJECTED], dtype=object)


def solve_batch(spec: RobotSpec, T: np.ndarray, q_near: Sequence[float] | np.ndarray | None = None, *,
                weights: Sequence[float] | np.ndarray | None = None, stay_on_branch: bool = False,
                reject: Reject | None = None) -> BatchIKResult:
    """Closed-form IK of N poses, vectorised over poses and branches.

    Same solutions and choice rule as :func:`solve` (each pose independently; use
    :func:`solve_path` for continuity along a path).

    Args:
        spec: the robot.
        T: (N, 4, 4) flange poses, metres.
        q_near: (n,) or (N, n) reference joints, rad / m; default home.
        weights: (n,) travel weights; default :func:`default_weights`.
        stay_on_branch: only accept solutions on the branch of each row's ``q_near``.
        reject: a solution filter, as in :func:`solve`: asked about each row's pick; a row whose
            pick it refuses is chosen as :func:`solve` chooses it (status REJECTED when it
            refuses every in-range solution). :attr:`BatchIKResult.solutions` is not filtered.

    Returns:
        A :class:`BatchIKResult`.

    Raises:
        ValueError: for malformed input (shapes, NaN).
    """
    ctx = robot_ik(spec)
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
    J, distance, flags = ctx.solver.solve_batch(T, QN)                 # (n, N, B) joint-major, (N,), (N, B)
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
            v += TWO_PI * np.round((r - v) / TWO_PI)
            v -= TWO_PI * ((v > up) & (v - TWO_PI >= lo))
            v += TWO_PI * ((v < lo) & (v + TWO_PI <= up))
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
    chosen_flags = flags[rows, k]
    refused = np.zeros(N, dtype=bool)
    if reject is not None:
        rule = ctx.rule_for(w)
        for i in np.flatnonzero(ok).tolist():
            qi = q[i].tolist()
            why = rejection(reject, qi)
            if not why:
                continue
            rule_i = rule.with_branch(int(codes[i]), 0xFF) if stay_on_branch else rule
            acc, _, _ = _accepted(ctx, T[i].ravel().tolist(), QN[i].tolist(), rule_i, reject,
                                  (qi, int(k[i]), int(chosen_flags[i])), why)
            if acc is None:
                ok[i], refused[i] = False, True
                q[i] = np.nan
            else:
                q[i], k[i], chosen_flags[i] = acc
    singular = ok & (chosen_flags != 0)
    if stay_on_branch:
        # no real solution on the branch: SINGULAR where it merges with a real one here (as in solve())
        merged = ctx.merged_table[flags]                                                      # (N, B)
        b_idx = np.arange(B)[None, :]
        merge = real & (flags != 0) & (((b_idx ^ codes[:, None]) & 0xFF & ~merged) == 0)
        merge = merge.any(axis=1) & ~real[rows, codes]
        singular |= merge
        real_on = real[rows, codes]
        code = np.where(ok, 0, np.where(refused, 4, np.where(real_on, 1, np.where(merge, 3, 2))))
    else:
        code = np.where(ok, 0, np.where(refused, 4, np.where(real.any(axis=1), 1, 2)))   # no real solution: UNREACHABLE
    branch = ctx.labels_none[np.where(ok, k, B)]                    # labels plus "" at index B
    return BatchIKResult(q, ok, _STATUS_TABLE[code], branch, distance, J.transpose(1, 2, 0), within, singular)


# ----- path -------------------------------------------------------------------------------

def solve_path(spec: RobotSpec, T: np.ndarray, q_start: Sequence[float] | np.ndarray, *,
               weights: Sequence[float] | np.ndarray | None = None, max_step: float | None = DEFAULT_MAX_STEP,
               reject: Reject | None = None) -> PathIKResult:
    """IK along a densely sampled path with branch continuity.

    Each sample is solved from the previous solution: the arm configuration (shoulder and
    elbow branch; the SCARA's elbow) of ``q_start`` is kept, the wrist may change branch only
    continuously, wide-range joints are unwrapped toward the previous sample, and the weighted
    nearest in-range solution is taken. The first sample that is unreachable, out of range,
    only reachable in another configuration, refused by ``reject``, or needs a revolute joint
    step larger than ``max_step`` ends the path.

    Args:
        spec: the robot.
        T: (N, 4, 4) flange poses along the path, metres.
        q_start: (n,) joints before the first sample, rad / m (its branch is kept).
        weights: (n,) travel weights; default :func:`default_weights`.
        max_step: largest allowed revolute joint change between consecutive samples (and from
            ``q_start`` to sample 0), rad; None disables the check.
        reject: a solution filter, as in :func:`solve`: at each sample the nearest accepted
            solution in the start configuration is taken, so the path keeps its branch among
            the solutions the filter accepts (the wrist only where that stays within
            ``max_step``); the first sample where the start configuration has none ends the
            path with the filter's reason for the nearest. With a workcell's collision filter
            (:class:`armtwin.envs.interference.CollisionFilter`, a callable: this package does not
            import it) that is branch continuity among collision-free solutions.

    Returns:
        A :class:`PathIKResult`.
    """
    ctx = robot_ik(spec)
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
    rule = ctx.rule_for(w).with_branch(want, mask)
    N = len(T)
    out = np.full((N, n), np.nan)
    ok = np.zeros(N, dtype=bool)
    for i in range(N):
        t = _pose_list(T[i])
        got = ctx.solver.choose(t, prev, rule)
        if reject is not None and got is not None:
            why = rejection(reject, got[0])
            if why:
                got, _, nearest = _accepted(ctx, t, prev, rule, reject, got, why)
                if got is None:
                    return PathIKResult(out, ok, i, (f"sample {i}: every solution in the start configuration {label} "
                                                     f"inside the joint ranges was rejected; the nearest, {nearest}"), label)
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
