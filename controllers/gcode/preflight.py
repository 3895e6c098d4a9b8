"""Preflight: parse + interpret + plan + IK along the path, with findings per program line.

The stages: the program (parser and interpreter faults), the plan, IK along its geometric
samples (:func:`track_path`), rapids slowed to the joints' limits; then the check passes
(:data:`PASSES`, each a :class:`CheckPass` naming the codes it reports) read that path and add
their findings. Checks, without running physics:

* every fault of the parser and the interpreter (numbered codes 1–49); the lines that
  passed are still planned and checked below (a refused line runs nothing and leaves only its
  valid modal words and its move's end), so one pass reports every fault of a file;
* IK along the densely sampled path (points at most ``sample_spacing`` apart, all chord
  ends included) with branch continuity: the arm keeps the configuration it starts in
  (shoulder/elbow; the SCARA's elbow), the wrist may change branch only where that is
  continuous, wide-range joints are unwrapped along the path — UNREACHABLE (100),
  JOINT_LIMIT (101), CONFIGURATION_FLIP (104);
* joint speeds along the timed path against each joint's limit — JOINT_SPEED (102) for
  feed moves; rapids (G0) are slowed down per move instead, until every joint keeps its limit;
* closeness to a singularity — NEAR_SINGULARITY (103, a warning): the smallest singular
  value of the scaled Jacobian (translation rows divided by the reach) below
  ``singularity_margin``, evaluated where the joints move fastest relative to the tool.
* the planned program time against ``max_program_time`` — PROGRAM_TOO_LONG (105);
* a program without any motion — NO_MOTION (106, an error on line 0: there is nothing to run);
* more findings than ``max_faults``: the first ``max_faults - 1`` in line order and
  TOO_MANY_FAULTS (119) at the line of the first one not shown.

IK uses the vectorised :func:`~armtwin.controllers.ik.solve_batch` (every branch of every
sample at once) and follows the start branch through the samples in numpy; only branch
changes are handled one by one. Memory: the poses are made, solved and compared
:data:`IK_CHUNK` samples at a time (no (K, 4, 4) poses or (K, branches, joints) differences of
the whole path), and the joint speeds are computed in place, so a check needs a few hundred
bytes per path point (see :data:`~.config.MAX_PATH_SAMPLES`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any, Callable, NamedTuple

import numpy as np

from ..ik import branch_labels, branch_of, solve_batch
from ..kinematics import chain_of
from .config import MachineConfig, machine_for
from .errors import MAX_FAULTS, ErrorCode, Fault, Severity, cap_faults
from .interpreter import MotionKind, Program, load_program
from .intent import with_intent_warnings
from .planner import PathSamples, Plan, plan, retime

__all__ = ["PreflightReport", "PathTrack", "CheckPass", "PASSES", "preflight", "preflight_program", "track_path",
           "jacobian_batch", "MAX_JOINT_STEP", "Progress", "PathCheck", "Findings"]

#: largest revolute joint change between two neighbouring IK samples that still counts as continuous, rad
MAX_JOINT_STEP = 0.35
#: IK samples solved per batch (bounds the solver's temporary arrays; progress is reported per batch)
IK_CHUNK = 50_000

#: progress callback: (stage name, fraction 0..1 of that stage)
Progress = Callable[[str, float], None]


class _Batch(NamedTuple):
    solutions: np.ndarray     # (K, C, n) the solutions of the candidate branches
    found: np.ndarray         # (K, B) bool: every branch, has a solution
    distance: np.ndarray      # (K,) m out of reach


@dataclass(frozen=True)
class PathTrack:
    """Joint path along samples with branch continuity.

    Attributes:
        q: (K, n) joints, rad / m (NaN where no continuous solution).
        code: (K,) 0 where fine, else the ErrorCode number of the problem at that sample.
        reason: (K,) object array of messages ("" where fine).
        branch: the start configuration label.
        distance: (K,) m by which each pose is out of reach (0 where reachable).
    """

    q: np.ndarray
    code: np.ndarray
    reason: np.ndarray
    branch: str
    distance: np.ndarray | None = None


def _arm_part(label: str) -> str:
    parts = label.split("/")
    return "/".join(parts[:2]) if len(parts) >= 3 else label


def _poses(T, a: int, b: int) -> np.ndarray:
    """(b - a, 4, 4) poses ``a … b - 1`` of ``T``: an array of poses or a :class:`PathSamples` (made per chunk)."""
    return T.poses(a, b) if isinstance(T, PathSamples) else T[a:b]


def _solve_all(spec, T, q_start: np.ndarray, cand: list[int], progress: Progress | None) -> _Batch:
    """IK of the poses ``T`` (K, 4, 4), or of a :class:`PathSamples`' poses, in batches of
    :data:`IK_CHUNK`, keeping the branches ``cand``; the results are written into arrays made
    once (no list of chunks to concatenate: the peak stays near the result's size)."""
    K = len(T)
    n = spec.dof
    sols = np.empty((K, len(cand), n))
    found = None
    dist = np.empty(K)
    for a in range(0, K, IK_CHUNK):
        if progress is not None and K > IK_CHUNK:
            progress("IK", a / K)
        b = solve_batch(spec, _poses(T, a, min(a + IK_CHUNK, K)), q_start)
        if found is None:
            found = np.empty((K, b.solutions.shape[1]), dtype=bool)
        sols[a:a + IK_CHUNK] = b.solutions[:, cand, :]
        np.logical_not(np.isnan(b.solutions[..., 0]), out=found[a:a + IK_CHUNK])
        dist[a:a + IK_CHUNK] = np.asarray(b.distance, dtype=float)
        del b
    if found is None:
        found = np.zeros((0, len(branch_labels(spec))), dtype=bool)
    return _Batch(sols, found, dist)


def track_path(spec, T, q_start, *, max_step: float = MAX_JOINT_STEP,
               progress: Progress | None = None) -> PathTrack:
    """Follow the start configuration of ``q_start`` through the poses ``T`` (K, 4, 4).

    ``T`` may also be a :class:`~.planner.PathSamples`: its poses are then made one IK batch
    at a time (a (K, 4, 4) array of a long program would be large).

    Unlike :func:`~armtwin.controllers.ik.solve_path` this does not stop at the first
    problem: after a stretch without a solution it picks up again at the next reachable
    sample (nearest to the last good joints), so that every faulty stretch is reported.
    ``progress`` (optional) is called with ("IK", fraction) between IK batches.
    """
    q_start = np.asarray(q_start, dtype=float)
    K, n = len(T), spec.dof
    labels = branch_labels(spec)
    start_label = branch_of(spec, q_start)
    cand = [k for k, lab in enumerate(labels) if _arm_part(lab) == _arm_part(start_label)]
    b = _solve_all(spec, T, q_start, cand, progress)
    Q = b.solutions                                          # (K, C, n)
    C = len(cand)
    lo, hi = spec.lower, spec.upper
    wide = [j for j in range(n) if not spec.prismatic[j] and (lo[j] < -math.pi - 1e-9 or hi[j] > math.pi + 1e-9)]
    rev = ~spec.prismatic
    for j in wide:  # unwrap along the path from the start value
        for c in range(C):
            col = np.concatenate(([q_start[j]], Q[:, c, j]))
            good = ~np.isnan(col)
            col[good] = np.unwrap(col[good])
            Q[:, c, j] = col[1:]
    finite = ~np.isnan(Q[..., 0])                            # (K, C)
    cont = np.empty((K, C), dtype=bool)                      # step on the same track within max_step
    revj = np.flatnonzero(rev)
    for c0 in range(0, K, IK_CHUNK):                         # in chunks: no (K, C, n) temporaries
        c1 = min(c0 + IK_CHUNK, K)
        here = Q[c0:c1][..., revj]
        before = np.concatenate([np.broadcast_to(q_start[revj], (1, C, len(revj))), Q[:c1 - 1][..., revj]]) \
            if c0 == 0 else Q[c0 - 1:c1 - 1][..., revj]
        moved = np.abs(np.subtract(here, before, out=here), out=here)
        step = moved.max(axis=2) if len(revj) else np.zeros((c1 - c0, C))
        cont[c0:c1] = finite[c0:c1] & (step <= max_step)
    q = np.full((K, n), np.nan)
    code = np.zeros(K, dtype=np.int64)
    reason = np.full(K, "", dtype=object)
    bad_idx = [np.flatnonzero(~cont[:, c]) for c in range(C)]
    prev = q_start
    # first track: nearest to the start
    i = 0
    cur = -1
    while i < K:
        if cur < 0:
            d = np.where(finite[i], np.where(rev, np.abs(Q[i] - prev), 0.0).max(axis=1), np.inf)
            c = int(np.argmin(d))
            if not np.isfinite(d[c]) or d[c] > max_step:
                code[i], reason[i] = _failure(b, i, cand, finite, d, labels, start_label)
                i += 1
                continue
            cur = c
            q[i] = Q[i, cur]
            prev = q[i]
            i += 1
            continue
        bi = bad_idx[cur]
        k = int(np.searchsorted(bi, i))
        stop = int(bi[k]) if k < len(bi) else K
        q[i:stop] = Q[i:stop, cur]
        if stop >= K:
            break
        prev = q[stop - 1] if stop > 0 else q_start
        i = stop
        # try to switch to another track continuously
        d = np.where(finite[i], np.where(rev, np.abs(Q[i] - prev), 0.0).max(axis=1), np.inf)
        c = int(np.argmin(d))
        if np.isfinite(d[c]) and d[c] <= max_step:
            cur = c
            q[i] = Q[i, cur]
            prev = q[i]
            i += 1
            continue
        code[i], reason[i] = _failure(b, i, cand, finite, d, labels, start_label)
        cur = -1
        i += 1
    # joint ranges on the followed path
    okq = ~np.isnan(q[:, 0])
    out = okq & ~np.all((q >= lo - 1e-9) & (q <= hi + 1e-9), axis=1)
    for i in map(int, np.flatnonzero(out)):
        ex = np.where(q[i] > hi, q[i] - hi, np.where(q[i] < lo, q[i] - lo, 0.0))
        j = int(np.argmax(np.abs(ex)))
        unit = "mm" if spec.prismatic[j] else "deg"
        val = spec.to_display(q[i])[j]
        lim = spec.to_display(hi if ex[j] > 0 else lo)[j]
        code[i] = int(ErrorCode.JOINT_LIMIT)
        reason[i] = f"J{j + 1} would reach {val:.1f} {unit}, beyond its limit {lim:.1f} {unit}"
    return PathTrack(q, code, reason, start_label, b.distance)


def _failure(b, i, cand, finite, d, labels, start_label) -> tuple[int, str]:
    if b.found[i].any():
        if not finite[i].any():
            others = [labels[k] for k in range(len(labels)) if b.found[i, k]]
            return int(ErrorCode.CONFIGURATION_FLIP), (f"reachable only in another configuration "
                                                       f"({', '.join(others[:2])}), not in {start_label}")
        return int(ErrorCode.CONFIGURATION_FLIP), (f"the joints would jump by {math.degrees(float(np.min(d))):.0f}° "
                                                   f"(configuration change or singularity)")
    dist = float(b.distance[i])
    return int(ErrorCode.UNREACHABLE), (f"out of reach by {dist * 1000:.1f} mm" if dist > 0
                                        else "no IK solution (orientation or position cannot be reached)")


def jacobian_batch(spec, Q: np.ndarray) -> np.ndarray:
    """(K, 6, n) geometric Jacobians of the flange (linear rows first), base frame."""
    ch = chain_of(spec)
    K, n = Q.shape
    t = np.broadcast_to(ch.base, (K, 4, 4)).copy()
    z = np.empty((K, n, 3))
    o = np.empty((K, n, 3))
    k = ch.axes
    for i in range(n):
        t = t @ ch.origins[i]
        ax = t[:, :3, :3] @ k[i]
        z[:, i] = ax
        o[:, i] = t[:, :3, 3]
        qi = Q[:, i]
        m = np.zeros((K, 4, 4))
        m[:, 3, 3] = 1.0
        if ch.prismatic[i]:
            m[:, :3, :3] = np.eye(3)
            m[:, :3, 3] = qi[:, None] * k[i]
        else:
            Kx = np.array([[0, -k[i][2], k[i][1]], [k[i][2], 0, -k[i][0]], [-k[i][1], k[i][0], 0]])
            s, c = np.sin(qi)[:, None, None], np.cos(qi)[:, None, None]
            m[:, :3, :3] = np.eye(3) + s * Kx + (1 - c) * (Kx @ Kx)
        t = t @ m
    pe = (t @ ch.tool)[:, :3, 3]
    J = np.zeros((K, 6, n))
    for i in range(n):
        if ch.prismatic[i]:
            J[:, :3, i] = z[:, i]
        else:
            J[:, :3, i] = np.cross(z[:, i], pe - o[:, i])
            J[:, 3:, i] = z[:, i]
    return J


def singularity_measure(spec, Q: np.ndarray) -> np.ndarray:
    """(K,) smallest singular value of the Jacobian with translation rows divided by the reach.

    For the SCARA only the rows the arm controls are used (x, y, z, rotation about z).
    """
    if len(Q) == 0:
        return np.zeros(0)
    J = jacobian_batch(spec, Q)
    J[:, :3] /= spec.reach
    if spec.roll_only:  # task space: position and the roll about z
        J = J[:, [0, 1, 2, 5], :]
    return np.linalg.svd(J, compute_uv=False)[:, -1]


@dataclass(frozen=True)
class PreflightReport:
    """Everything the preflight found.

    Attributes:
        robot: robot id.
        program: the interpreted program.
        plan: the timed plan of the lines that passed the parser and the interpreter (faulty
            lines are skipped, as grbl skips them); None only when the fault cap was reached.
        samples: the geometric samples checked (None when nothing moves or as above).
        q: (K, n) joint path at the samples, rad / m (NaN where it fails).
        joint_speed: (K, n) joint speeds on the interval ending at each sample, rad/s / m/s.
        faults: every finding (all codes), in line order.
        lines_with_motion: number of program lines that move the robot.
        truncated: there were more findings than the cap: the faults end with a TOO_MANY_FAULTS (119) notice.
        machine: the settings used.
    """

    robot: str
    program: Program
    plan: Plan | None
    samples: PathSamples | None
    q: np.ndarray | None
    joint_speed: np.ndarray | None
    faults: tuple[Fault, ...]
    lines_with_motion: int = 0
    truncated: bool = False
    machine: MachineConfig | None = None

    def errors(self, strict: bool = False) -> list[Fault]:
        """Faults that make the program faulty (with ``strict`` also warnings)."""
        return [f for f in self.faults if f.severity is Severity.ERROR or (strict and f.severity is Severity.WARNING)]

    def clean(self, strict: bool = False) -> bool:
        return not self.errors(strict)

    @property
    def ok(self) -> bool:
        return self.clean()

    @property
    def duration(self) -> float:
        return self.plan.duration if self.plan is not None else 0.0


def preflight(text, spec, machine: MachineConfig | None = None, *, max_faults: int = MAX_FAULTS,
              singularity: bool = True, progress: Progress | None = None,
              passes: Sequence[CheckPass] = ()) -> PreflightReport:
    """Check a program text (str, bytes or lines) for ``spec``. Never raises on content.

    Args:
        text: the program.
        spec: the robot.
        machine: settings; default :func:`machine_for` ``(spec)``.
        max_faults: cap on the faults collected.
        singularity: also look for closeness to singularities (warnings).
        progress: called now and then with (stage, fraction of the stage); stages "parse",
            "interpret", "plan", "IK", "limits".
        passes: more checks run after :data:`PASSES` on the same path — e.g. the collision
            check of a workcell (:func:`armtwin.envs.collision.collision_pass`), which needs a
            physics engine this package does not import.
    """
    machine = machine or machine_for(spec)
    if progress is not None:
        progress("parse", 0.0)
    prog = load_program(text, spec, machine, max_faults=max_faults, progress=progress)
    rep = preflight_program(prog, spec, machine, max_faults=max_faults, singularity=singularity, progress=progress,
                            passes=passes)
    return with_intent_warnings(rep, text, max_faults)   # the dialect warnings of .intent (they read the text)


def _mm(p) -> str:
    return "(" + ", ".join(f"{v * 1000:.1f}" for v in p) + ") mm"


class _Findings:
    """The preflight's findings as the passes add them: one per (code, line); of one code at most
    ``max_faults + 1`` (each pass finds its kind in line order: more could never be shown)."""

    def __init__(self, faults: list[Fault], max_faults: int) -> None:
        self.faults = faults
        self._max = max_faults
        self._seen: set[tuple[int, int]] = set()
        self._per_code: dict[int, int] = {}

    def add(self, code: ErrorCode, line: int, msg: str, sev: Severity = Severity.ERROR) -> None:
        key = (int(code), int(line))
        if key not in self._seen and self._per_code.get(key[0], 0) <= self._max:
            self._seen.add(key)
            self._per_code[key[0]] = self._per_code.get(key[0], 0) + 1
            self.faults.append(Fault(code, int(line), 0, msg, sev))


@dataclass(frozen=True, eq=False)
class _PathCheck:
    """What the check passes read: the plan retimed for the joints, its IK samples and joint path.

    Attributes:
        spec, machine: the robot and the settings.
        program: the interpreted program.
        plan: the plan (rapids slowed where a joint could not follow).
        samples: the geometric samples (K) with their times on that plan.
        track: the joint path along the samples (branch continuity).
        step: (K - 1, n) |joint change| between neighbouring samples, rad / m.
        qd: (K - 1, n) joint speed on the interval ending at each sample, rad/s / m/s.
        ratio: (K - 1,) largest joint speed / limit on each interval.
    """

    spec: Any
    machine: MachineConfig
    program: Program
    plan: Plan
    samples: PathSamples
    track: PathTrack
    step: np.ndarray
    qd: np.ndarray
    ratio: np.ndarray

    @property
    def is_rapid(self) -> np.ndarray:
        """(B,) each motion block is a rapid (G0)."""
        return np.array([m.kind is MotionKind.RAPID for m in self.plan.motions])


@dataclass(frozen=True)
class CheckPass:
    """One check of the preflight over the planned path.

    Attributes:
        name: what it checks.
        run: ``(path, findings)``: adds its findings.
        faults: the codes it may report.
    """

    name: str
    run: Callable[[_PathCheck, _Findings], None]
    faults: tuple[ErrorCode, ...]


def _slow_rapids(pl: Plan, gs: PathSamples, q: np.ndarray, spec, machine: MachineConfig):
    """Retime rapids (G0) until every joint keeps its speed limit, as a robot controller does
    (at most ``machine.max_rapid_slowdown_passes`` rounds).

    Returns:
        (plan, samples with their new times, |dq| (K - 1, n), qd (K - 1, n), ratio (K - 1,)).
    """
    vmax = spec.max_velocity
    B = len(pl.motions)
    is_rapid = np.array([m.kind is MotionKind.RAPID for m in pl.motions])
    seg_blk = gs.block[1:]
    scale = np.ones(B)
    dq = np.diff(q, axis=0)
    np.abs(dq, out=dq)
    qd = np.empty_like(dq)
    ratio = np.empty(len(dq))
    for _ in range(machine.max_rapid_slowdown_passes + 1):
        dt = np.diff(gs.t)
        with np.errstate(invalid="ignore", divide="ignore"):
            np.divide(dq, np.maximum(dt, 1e-12)[:, None], out=qd)
        qd[dt <= 1e-9] = 0.0
        del dt
        for c0 in range(0, len(qd), IK_CHUNK):      # speed / limit per sample, in chunks (no (K, n) temporaries)
            r = qd[c0:c0 + IK_CHUNK] / vmax
            ratio[c0:c0 + IK_CHUNK] = np.nan_to_num(r, nan=0.0, copy=False).max(axis=1)
        worst = np.zeros(B)
        np.maximum.at(worst, seg_blk, ratio)
        slow = is_rapid & (worst > 1.0)
        if not slow.any():
            break
        scale[slow] *= 0.97 / worst[slow]
        pl = retime(pl, scale)
        t = pl.times_at(gs.segment, gs.s)
        gs = PathSamples(t, gs.s, gs.position, gs.rotation, gs.speed, gs.segment, gs.block, gs.line,
                         gs.flange_of_block)
    return pl, gs, dq, qd, ratio


#: what a :class:`CheckPass` reads and writes: the public names of the passes' two arguments (a
#: pass defined outside this module, e.g. the workcell's collision check, is typed with them)
PathCheck = _PathCheck
Findings = _Findings


def _pass_ik(path: _PathCheck, findings: _Findings) -> None:
    """Reach, joint ranges and branch continuity along the path (100, 101, 104)."""
    track, gs = path.track, path.samples
    unreachable: dict[int, list[int]] = {}      # line -> [first failing sample, worst sample]
    dist = track.distance if track.distance is not None else np.zeros(len(track.q))
    for i in map(int, np.flatnonzero(track.code)):
        code, ln = ErrorCode(int(track.code[i])), int(gs.line[i])
        if code is ErrorCode.UNREACHABLE:
            u = unreachable.setdefault(ln, [i, i])
            if dist[i] > dist[u[1]]:
                u[1] = i
            continue
        findings.add(code, ln, f"{track.reason[i]} at {_mm(gs.position[i])}")
    if unreachable:
        _report_unreachable(path.spec, path.plan, gs, dist, unreachable, path.program.q_start, findings.add)


def _pass_joint_speed(path: _PathCheck, findings: _Findings) -> None:
    """Joint speeds of feed moves (G1-G3) within the limits (102); rapids were slowed instead."""
    spec, pl, gs, qd = path.spec, path.plan, path.samples, path.qd
    vmax = spec.max_velocity
    seg_blk = gs.block[1:]
    is_rapid = path.is_rapid
    for i in np.flatnonzero(path.ratio > 1.0 + 1e-6):
        blk = seg_blk[i]
        if is_rapid[blk]:
            continue
        j = int(np.argmax(np.nan_to_num(qd[i] / vmax, nan=0.0)))
        unit = "mm/s" if spec.prismatic[j] else "deg/s"
        disp = spec.to_display(qd[i])[j]
        lim = spec.to_display(vmax)[j]
        findings.add(ErrorCode.JOINT_SPEED, gs.line[i + 1], f"J{j + 1} would need {disp:.0f} {unit} (limit "
                     f"{lim:.0f} {unit}) at a feed of {pl.motions[blk].feed * 60000:.0f} mm/min")


def _pass_program_time(path: _PathCheck, findings: _Findings) -> None:
    """The planned time within ``machine.max_program_time`` (105)."""
    pl, limit = path.plan, path.machine.max_program_time
    if pl.duration > limit:
        findings.add(ErrorCode.PROGRAM_TOO_LONG, _line_passing(pl, limit), f"the program would take "
                     f"{pl.duration:.1f} s ({pl.duration / 3600:.1f} h), over the {limit:g} s maximum; "
                     f"it passes the maximum on this line")


def _pass_singularity(path: _PathCheck, findings: _Findings) -> None:
    """Closeness to a singularity (103, a warning): the scaled Jacobian's smallest singular value,
    where the joints move fastest relative to the tool and at every block end."""
    spec, gs, q, dq = path.spec, path.samples, path.track.q, path.step
    margin = path.machine.singularity_margin
    ok = ~np.isnan(q[:, 0])
    ds = np.diff(gs.s)
    step = np.empty(len(dq))
    for c0 in range(0, len(dq), IK_CHUNK):
        step[c0:c0 + IK_CHUNK] = np.nan_to_num(dq[c0:c0 + IK_CHUNK]).max(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        amp = np.where(ds > 1e-9, step / ds, 0.0)
    del step
    cand = np.flatnonzero(amp > 4.0 / spec.reach) + 1
    ends = np.flatnonzero(np.diff(gs.block) != 0)
    cand = np.unique(np.concatenate([cand, ends, [0, len(q) - 1]]))
    cand = cand[ok[cand]]
    if len(cand) > 50000:
        cand = np.sort(cand[np.argsort(-amp[np.maximum(cand - 1, 0)])[:50000]])
    if len(cand):
        sig = singularity_measure(spec, q[cand])
        for i, sv in zip(cand[sig < margin], sig[sig < margin]):
            findings.add(ErrorCode.NEAR_SINGULARITY, gs.line[i], f"singularity measure {sv:.3f} < {margin:g} (scaled Jacobian, no unit) "
                         f"at {_mm(gs.position[i])}", Severity.WARNING)


#: the singularity pass (warnings; ``preflight(singularity=False)`` leaves it out)
SINGULARITY_PASS = CheckPass("singularities", _pass_singularity, (ErrorCode.NEAR_SINGULARITY,))
#: the checks of the planned path, in order
PASSES: tuple[CheckPass, ...] = (
    CheckPass("IK along the path", _pass_ik,
              (ErrorCode.UNREACHABLE, ErrorCode.JOINT_LIMIT, ErrorCode.CONFIGURATION_FLIP)),
    CheckPass("joint speeds", _pass_joint_speed, (ErrorCode.JOINT_SPEED,)),
    CheckPass("program time", _pass_program_time, (ErrorCode.PROGRAM_TOO_LONG,)),
    SINGULARITY_PASS,
)


def preflight_program(prog: Program, spec, machine: MachineConfig, *, max_faults: int = MAX_FAULTS,
                      singularity: bool = True, progress: Progress | None = None,
                      passes: Sequence[CheckPass] = ()) -> PreflightReport:
    """Preflight of an interpreted program (see the module docstring).

    The parser's and the interpreter's faults come first; the lines that passed are then planned
    (rapids slowed to the joints' limits), solved with IK along the path, and checked by the
    :data:`PASSES` (the singularity pass only with ``singularity``) and then ``passes``, so that one
    pass over the file reports every fault, up to ``max_faults`` (a refused line runs nothing; its
    valid modal words and its move's end stand for the lines after it).
    """
    faults: list[Fault] = list(prog.faults)
    if prog.truncated:   # more faults than the cap from the parser and the interpreter alone (ends with 119)
        shown, _ = cap_faults(faults, max_faults)
        return PreflightReport(spec.name, prog, None, None, None, None, tuple(shown), truncated=True,
                               machine=machine)
    if progress is not None:
        progress("plan", 0.0)
    pl = plan(prog.blocks, machine)
    if pl.segment_count == 0:
        if not any(f.severity is Severity.ERROR for f in faults):
            faults.append(Fault(ErrorCode.NO_MOTION, 0, 0, "nothing in the program moves the robot, so there "
                                "is nothing to run"))
        return PreflightReport(spec.name, prog, pl, None, None, None, tuple(faults), machine=machine)
    gs = pl.geometric_samples(machine.sample_spacing)
    track = track_path(spec, gs, prog.q_start, progress=progress)
    if progress is not None:
        progress("limits", 0.0)
    pl, gs, dq, qd, ratio = _slow_rapids(pl, gs, track.q, spec, machine)
    path = _PathCheck(spec, machine, prog, pl, gs, track, dq, qd, ratio)
    findings = _Findings(faults, max_faults)
    for check in (*PASSES, *passes):
        if singularity or check is not SINGULARITY_PASS:
            check.run(path, findings)
    faults.sort(key=lambda f: (f.line, int(f.code)))
    shown, truncated = cap_faults(faults, max_faults)
    moving = len(np.unique(pl.lines[pl.block]))   # lines with a chord (zero-length moves do not count)
    if progress is not None:
        progress("limits", 1.0)
    return PreflightReport(spec.name, prog, pl, gs, track.q, qd, tuple(shown), moving, truncated, machine)


def _report_unreachable(spec, pl: Plan, gs: PathSamples, dist: np.ndarray, lines: dict[int, list[int]],
                        q_start: np.ndarray, add) -> None:
    """One UNREACHABLE fault per line: how far the line's target is out of reach, where the path leaves."""
    # the target of a line: the end of its last motion block
    last_block = {}
    for b, ln in enumerate(pl.lines):
        last_block[int(ln)] = b
    order = sorted(lines)
    T = np.zeros((len(order), 4, 4))
    for r, ln in enumerate(order):
        m = pl.motions[last_block[ln]]
        T[r, :3, :3] = m.rot_end
        T[r, :3, 3] = m.end
        T[r, 3, 3] = 1.0
    flange = T if pl.flange_of_block is None else T @ pl.flange_of_block[[last_block[ln] for ln in order]]
    d_target = np.asarray(solve_batch(spec, flange, q_start).distance, dtype=float)
    for r, ln in enumerate(order):
        first, worst = lines[ln]
        target = T[r, :3, 3]
        at = gs.position[first]
        leaves = "" if np.linalg.norm(at - target) < 1e-6 else f"; the path leaves the workspace at {_mm(at)}"
        if d_target[r] > 0:
            msg = f"the target {_mm(target)} is out of reach by {d_target[r] * 1000:.1f} mm{leaves}"
        elif dist[worst] > 0:
            msg = (f"the path passes out of reach by up to {dist[worst] * 1000:.1f} mm, first at {_mm(at)} "
                   f"(the target {_mm(target)} itself is reachable)")
        else:
            msg = f"no IK solution (orientation or position cannot be reached) at {_mm(at)}"
        add(ErrorCode.UNREACHABLE, ln, msg)


def _line_passing(pl: Plan, limit: float) -> int:
    """Program line at which the planned time first exceeds ``limit`` (s): a move or a dwell."""
    _, h1, hline = pl.hold_intervals()
    ends = np.concatenate([pl.t_end, h1])
    lines = np.concatenate([pl.lines[pl.block], hline])
    over = np.flatnonzero(ends > limit)
    if not len(over):
        return int(lines[np.argmax(ends)]) if len(ends) else 0
    return int(lines[over[np.argmin(ends[over])]])
