"""Preflight: parse + interpret + plan + IK along the path, with findings per program line.

Checks, without running physics:

* every fault of the parser and the interpreter (numbered codes 1–49);
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

IK uses the vectorised :func:`~armtwin.controllers.ik.solve_batch` (every branch of every
sample at once) and follows the start branch through the samples in numpy; only branch
changes are handled one by one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ik import branch_labels, branch_of, solve_batch
from ..kinematics import chain_of
from .config import MachineConfig, machine_for
from .errors import MAX_FAULTS, ErrorCode, Fault, Severity
from .interpreter import MotionKind, Program, load_program
from .planner import PathSamples, Plan, plan, retime

__all__ = ["PreflightReport", "PathTrack", "preflight", "preflight_program", "track_path", "jacobian_batch",
           "MAX_JOINT_STEP"]

#: largest revolute joint change between two neighbouring IK samples that still counts as continuous, rad
MAX_JOINT_STEP = 0.35


@dataclass(frozen=True)
class PathTrack:
    """Joint path along samples with branch continuity.

    Attributes:
        q: (K, n) joints, rad / m (NaN where no continuous solution).
        code: (K,) 0 where fine, else the ErrorCode number of the problem at that sample.
        reason: (K,) object array of messages ("" where fine).
        branch: the start configuration label.
    """

    q: np.ndarray
    code: np.ndarray
    reason: np.ndarray
    branch: str


def _arm_part(label: str) -> str:
    parts = label.split("/")
    return "/".join(parts[:2]) if len(parts) >= 3 else label


def track_path(spec, T: np.ndarray, q_start, *, max_step: float = MAX_JOINT_STEP) -> PathTrack:
    """Follow the start configuration of ``q_start`` through the poses ``T`` (K, 4, 4).

    Unlike :func:`~armtwin.controllers.ik.solve_path` this does not stop at the first
    problem: after a stretch without a solution it picks up again at the next reachable
    sample (nearest to the last good joints), so that every faulty stretch is reported.
    """
    q_start = np.asarray(q_start, dtype=float)
    K, n = len(T), spec.dof
    b = solve_batch(spec, T, q_start)
    labels = branch_labels(spec)
    start_label = branch_of(spec, q_start)
    cand = [k for k, lab in enumerate(labels) if _arm_part(lab) == _arm_part(start_label)]
    Q = b.solutions[:, cand, :].copy()                       # (K, C, n)
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
    prev_all = np.concatenate([np.broadcast_to(q_start, (1, C, n)), Q[:-1]], axis=0)
    step = np.where(rev, np.abs(Q - prev_all), 0.0).max(axis=2)          # (K, C) step on the same track
    cont = finite & (step <= max_step)
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
    for i in np.flatnonzero(out):
        ex = np.where(q[i] > hi, q[i] - hi, np.where(q[i] < lo, q[i] - lo, 0.0))
        j = int(np.argmax(np.abs(ex)))
        unit = "mm" if spec.prismatic[j] else "deg"
        val = spec.to_display(q[i])[j]
        lim = spec.to_display(hi if ex[j] > 0 else lo)[j]
        code[i] = int(ErrorCode.JOINT_LIMIT)
        reason[i] = f"J{j + 1} would reach {val:.1f} {unit}, beyond its limit {lim:.1f} {unit}"
    return PathTrack(q, code, reason, start_label)


def _failure(b, i, cand, finite, d, labels, start_label) -> tuple[int, str]:
    if not np.isnan(b.solutions[i]).all(axis=1).all():
        if not finite[i].any():
            others = [labels[k] for k in range(len(labels)) if not np.isnan(b.solutions[i, k, 0])]
            return int(ErrorCode.CONFIGURATION_FLIP), (f"reachable only in another configuration "
                                                       f"({', '.join(others[:2])}), not in {start_label}")
        return int(ErrorCode.CONFIGURATION_FLIP), (f"the joints would jump by {math.degrees(float(np.min(d))):.0f}° "
                                                   f"(configuration change or singularity)")
    dist = float(b.distance[i]) if b.distance is not None else 0.0
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
    if spec.dof == 4:
        J = J[:, [0, 1, 2, 5], :]
    return np.linalg.svd(J, compute_uv=False)[:, -1]


@dataclass(frozen=True)
class PreflightReport:
    """Everything the preflight found.

    Attributes:
        robot: robot id.
        program: the interpreted program.
        plan: the timed plan (None when the program has parse/semantic faults or no motion).
        samples: the geometric samples checked (None as above).
        q: (K, n) joint path at the samples, rad / m (NaN where it fails).
        joint_speed: (K, n) joint speeds on the interval ending at each sample, rad/s / m/s.
        faults: every finding (all codes), in line order.
        lines_with_motion: number of program lines that move the robot.
        truncated: the fault cap was reached.
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
        return [f for f in self.faults if strict or f.severity is Severity.ERROR]

    def clean(self, strict: bool = False) -> bool:
        return not self.errors(strict)

    @property
    def ok(self) -> bool:
        return self.clean()

    @property
    def duration(self) -> float:
        return self.plan.duration if self.plan is not None else 0.0


def preflight(text, spec, machine: MachineConfig | None = None, *, max_faults: int = MAX_FAULTS,
              singularity: bool = True) -> PreflightReport:
    """Check a program text (str, bytes or lines) for ``spec``. Never raises on content."""
    machine = machine or machine_for(spec)
    return preflight_program(load_program(text, spec, machine, max_faults=max_faults), spec, machine,
                             max_faults=max_faults, singularity=singularity)


def preflight_program(prog: Program, spec, machine: MachineConfig, *, max_faults: int = MAX_FAULTS,
                      singularity: bool = True) -> PreflightReport:
    """Preflight of an interpreted program (see the module docstring)."""
    if prog.faults:
        return PreflightReport(spec.name, prog, None, None, None, None, prog.faults, truncated=prog.truncated,
                               machine=machine)
    pl = plan(prog.blocks, machine)
    if pl.segment_count == 0:
        return PreflightReport(spec.name, prog, pl, None, None, None, (), machine=machine)
    gs = pl.geometric_samples(machine.sample_spacing)
    track = track_path(spec, gs.poses(), prog.q_start)
    q = track.q
    # the first sample is the start point itself: judge it against q_start
    vmax = spec.max_velocity
    B = len(pl.motions)
    is_rapid = np.array([m.kind is MotionKind.RAPID for m in pl.motions])
    seg_blk = gs.block[1:]
    scale = np.ones(B)
    qd = None
    for _ in range(machine.max_rapid_slowdown_passes + 1):
        dt = np.diff(gs.t)
        dq = np.abs(np.diff(q, axis=0))
        with np.errstate(invalid="ignore", divide="ignore"):
            qd = np.where(dt[:, None] > 1e-9, dq / np.maximum(dt, 1e-12)[:, None], 0.0)
        ratio = np.nan_to_num(qd / vmax, nan=0.0).max(axis=1)
        worst = np.zeros(B)
        np.maximum.at(worst, seg_blk, ratio)
        slow = is_rapid & (worst > 1.0)
        if not slow.any():
            break
        scale[slow] *= 0.97 / worst[slow]
        pl = retime(pl, scale)
        t = pl.t_start[gs.segment] + pl._t_of_s(gs.segment, gs.s - pl.s_start[gs.segment])
        gs = PathSamples(t, gs.s, gs.position, gs.rotation, gs.speed, gs.segment, gs.block, gs.line)
    faults: list[Fault] = []
    seen: set[tuple[int, int]] = set()

    def add(code: ErrorCode, line: int, msg: str, sev: Severity = Severity.ERROR) -> None:
        key = (int(code), int(line))
        if key not in seen and len(faults) < max_faults:
            seen.add(key)
            faults.append(Fault(code, int(line), 0, msg, sev))

    for i in np.flatnonzero(track.code):
        add(ErrorCode(int(track.code[i])), gs.line[i], f"{track.reason[i]} at "
            f"({', '.join(f'{v * 1000:.1f}' for v in gs.position[i])}) mm")
    # joint speeds (feed moves; rapids were slowed)
    ratio_j = np.nan_to_num(qd / vmax, nan=0.0)
    over = np.flatnonzero(ratio_j.max(axis=1) > 1.0 + 1e-6)
    for i in over:
        blk = seg_blk[i]
        if is_rapid[blk]:
            continue
        j = int(np.argmax(ratio_j[i]))
        unit = "mm/s" if spec.prismatic[j] else "deg/s"
        disp = spec.to_display(qd[i])[j]
        lim = spec.to_display(vmax)[j]
        add(ErrorCode.JOINT_SPEED, gs.line[i + 1], f"J{j + 1} would need {disp:.0f} {unit} (limit {lim:.0f} {unit}) "
            f"at F{pl.motions[blk].feed * 60000:.0f}")
    if singularity:
        ok = ~np.isnan(q[:, 0])
        # candidates: the samples where the joints move most per tool motion, and every block end
        ds = np.diff(gs.s)
        with np.errstate(invalid="ignore", divide="ignore"):
            amp = np.where(ds > 1e-9, np.nan_to_num(np.abs(np.diff(q, axis=0))).max(axis=1) / ds, 0.0)
        cand = np.flatnonzero(amp > 4.0 / spec.reach) + 1
        ends = np.flatnonzero(np.diff(gs.block) != 0)
        cand = np.unique(np.concatenate([cand, ends, [0, len(q) - 1]]))
        cand = cand[ok[cand]]
        if len(cand) > 50000:
            cand = cand[np.argsort(-amp[np.maximum(cand - 1, 0)])[:50000]]
        if len(cand):
            sig = singularity_measure(spec, q[cand])
            for i, sv in zip(cand[sig < machine.singularity_margin], sig[sig < machine.singularity_margin]):
                add(ErrorCode.NEAR_SINGULARITY, gs.line[i], f"singularity measure {sv:.3f} < {machine.singularity_margin:g} "
                    f"at ({', '.join(f'{v * 1000:.1f}' for v in gs.position[i])}) mm", Severity.WARNING)
    faults.sort(key=lambda f: (f.line, int(f.code)))
    moving = len(np.unique(pl.lines))
    return PreflightReport(spec.name, prog, pl, gs, q, qd, tuple(faults), moving, len(faults) >= max_faults, machine)
