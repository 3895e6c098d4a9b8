"""The joint-model comparison experiment (``armtwin compare``).

The same timed joint trajectory is run through each :class:`~armtwin.envs.sim.JointMode`
(one fresh :class:`~armtwin.envs.sim.World` per run, all through
:meth:`SimRobot.command`), and the tracking is measured: joint and flange errors,
overshoot, settling, torques, mechanical work and wall-clock speed. Two sweeps repeat
the run over the payload (0 … rated) and over the time step (doubling, then bisecting
to the largest step the stability guard accepts).

Motions (:data:`MOTIONS`), built per robot from its ``home`` pose (tool pointing down):

* ``pick-place`` — start above a pick point A (J1 rotated −50° from home, 10 % nearer),
  vertical approach 100 mm down and back up (straight lines via numerical IK, quintic
  timing), a fast joint-space swing to above B (J1 +50°, 10 % farther; the duration
  makes the fastest joint reach 80 % of its speed limit), the same vertical approach at
  B, the swing back and a final hold.
* ``swing`` — only the fast swings A ↔ B with holds.
* ``slow`` — one slow joint-space move from home (every joint by up to 20°, 4 s) and a hold.

Units: SI inside (rad, m, s, N·m, J); reports in degrees (mm for prismatic joints) and mm.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..controllers.ik import solve
from ..controllers.kinematics import chain_of, fk, fk_batch
from ..controllers.transforms import rot_z
from ..robots import RobotSpec
from .sim import JointMode, PhysicsConfig, World

__all__ = ["MOTIONS", "Trajectory", "RunResult", "Metrics", "build_motion", "run_motion", "metrics",
           "payload_sweep", "dt_sweep", "DtSearch", "SETTLE_BAND_DEG", "joint_error", "flange_error_mm",
           "DYNAMIC_MODES"]

#: the motions :func:`build_motion` knows
MOTIONS = ("pick-place", "swing", "slow")
#: a joint counts as settled when it stays within this band of its final value, deg (mm prismatic)
SETTLE_BAND_DEG = 0.1
#: largest time step the dt search tries, s
DT_CAP = 0.1


# ----- trajectories ---------------------------------------------------------------------
def _quintic(tau: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """s, ds/dtau, d2s/dtau2 of the rest-to-rest quintic 10τ³ − 15τ⁴ + 6τ⁵, τ in [0, 1]."""
    t = np.clip(tau, 0.0, 1.0)
    return (10 * t**3 - 15 * t**4 + 6 * t**5, 30 * t**2 - 60 * t**3 + 30 * t**4, 60 * t - 180 * t**2 + 120 * t**3)


@dataclass(frozen=True)
class _Segment:
    """One piece of a trajectory: a joint path q(s), s in [0, 1], timed by a quintic."""

    t0: float  # s
    duration: float  # s
    q_grid: np.ndarray  # (m, n) joint values on a uniform s grid (m >= 2)
    kind: str  # "move", "approach" or "hold"

    def eval(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tau = (t - self.t0) / self.duration
        s, sd, sdd = _quintic(tau)
        sd, sdd = sd / self.duration, sdd / self.duration**2
        m = len(self.q_grid)
        grid = np.linspace(0.0, 1.0, m)
        dq = np.gradient(self.q_grid, grid, axis=0)
        ddq = np.gradient(dq, grid, axis=0) if m > 2 else np.zeros_like(dq)
        interp = lambda a: np.stack([np.interp(s, grid, a[:, j]) for j in range(a.shape[1])], axis=-1)  # noqa: E731
        q, q_s, q_ss = interp(self.q_grid), interp(dq), interp(ddq)
        return q, q_s * sd[:, None], q_ss * (sd**2)[:, None] + q_s * sdd[:, None]


@dataclass(frozen=True)
class Trajectory:
    """A timed joint trajectory made of rest-to-rest segments.

    Attributes:
        name: motion name.
        segments: the pieces in time order.
    """

    name: str
    segments: tuple[_Segment, ...]

    @property
    def duration(self) -> float:
        """Total time, s."""
        last = self.segments[-1]
        return last.t0 + last.duration

    @property
    def q0(self) -> np.ndarray:
        """Start joints (n,)."""
        return self.segments[0].q_grid[0].copy()

    def sample(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Reference positions, velocities, accelerations (N, n) at times ``t`` (N,) s."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        n = self.segments[0].q_grid.shape[1]
        q, qd, qdd = (np.zeros((len(t), n)) for _ in range(3))
        for i, seg in enumerate(self.segments):
            last = i == len(self.segments) - 1
            sel = (t >= seg.t0) & ((t < seg.t0 + seg.duration) | last)
            if np.any(sel):
                q[sel], qd[sel], qdd[sel] = seg.eval(t[sel])
        return q, qd, qdd

    def stops(self) -> list[tuple[float, float, np.ndarray, np.ndarray]]:
        """(t_start, t_end, q_target, q_before_move) of every hold that follows a motion."""
        out = []
        for prev, seg in zip(self.segments, self.segments[1:]):
            if seg.kind == "hold" and prev.kind != "hold":
                out.append((seg.t0, seg.t0 + seg.duration, seg.q_grid[0], prev.q_grid[0]))
        return out


def _ik(spec: RobotSpec, Tt: np.ndarray, q_near: np.ndarray, what: str) -> np.ndarray:
    """Joints for the pose ``Tt`` on ``q_near``'s branch (armtwin's closed-form IK); ValueError naming ``what``."""
    r = solve(spec, Tt, q_near, stay_on_branch=True)
    if not r.ok:
        raise ValueError(f"{spec.name}: {what}: {r.reason}")
    return r.best


def _swing_time(spec: RobotSpec, qa: np.ndarray, qb: np.ndarray, speed_fraction: float = 0.8) -> float:
    """Quintic duration (s) that makes the fastest joint peak at ``speed_fraction`` of its limit."""
    return float(np.max(1.875 * np.abs(qb - qa) / (speed_fraction * spec.max_velocity)))


def _station(spec: RobotSpec, yaw_deg: float, radius_scale: float) -> np.ndarray:
    """Joints above a station: home rotated about base z by ``yaw_deg``, radius scaled."""
    chain = chain_of(spec)
    T = fk(chain, spec.home)
    p = T[:3, 3].copy()
    p[:2] *= radius_scale
    Rz = rot_z(np.radians(yaw_deg))
    Tt = np.eye(4)
    Tt[:3, :3] = Rz @ T[:3, :3]
    Tt[:3, 3] = Rz @ p
    seed = spec.home.copy()
    seed[0] += np.radians(yaw_deg)
    return _ik(spec, Tt, seed, f"station at {yaw_deg:g} deg")


def _vertical(spec: RobotSpec, q_top: np.ndarray, depth: float, samples: int = 41) -> np.ndarray:
    """(samples, n) joints along a straight vertical line from ``q_top`` down by ``depth`` m."""
    chain = chain_of(spec)
    T = fk(chain, q_top)
    out, q = [q_top.copy()], q_top.copy()
    for s in np.linspace(0, 1, samples)[1:]:
        Tt = T.copy()
        Tt[2, 3] -= s * depth
        q = _ik(spec, Tt, q, f"vertical approach {s * depth * 1000:.0f} mm below the station")
        out.append(q)
    return np.array(out)


def build_motion(spec: RobotSpec, name: str = "pick-place") -> Trajectory:
    """The named motion (:data:`MOTIONS`) for ``spec``; see the module docstring."""
    if name not in MOTIONS:
        raise ValueError(f"unknown motion {name!r}; choose one of: {', '.join(MOTIONS)}")
    segs: list[_Segment] = []

    def add(kind: str, q_grid, duration: float) -> None:
        t0 = segs[-1].t0 + segs[-1].duration if segs else 0.0
        segs.append(_Segment(t0, float(duration), np.atleast_2d(np.asarray(q_grid, dtype=float)), kind))

    def hold(q, duration: float) -> None:
        add("hold", np.vstack([q, q]), duration)

    if name == "slow":
        span = np.minimum(np.radians(20.0), 0.25 * (spec.upper - spec.lower))
        q1 = np.clip(spec.home + span * np.where(np.arange(spec.dof) % 2 == 0, 1.0, -1.0), spec.lower, spec.upper)
        hold(spec.home, 0.25)
        add("move", np.vstack([spec.home, q1]), 4.0)
        hold(q1, 1.0)
        return Trajectory(name, tuple(segs))

    qa, qb = _station(spec, -50.0, 0.9), _station(spec, 50.0, 1.1)
    t_swing = _swing_time(spec, qa, qb)
    if name == "swing":
        hold(qa, 0.25)
        add("move", np.vstack([qa, qb]), t_swing)
        hold(qb, 0.5)
        add("move", np.vstack([qb, qa]), t_swing)
        hold(qa, 1.0)
        return Trajectory(name, tuple(segs))

    depth, t_vert, dwell = 0.10, 0.6, 0.3
    down_a, down_b = _vertical(spec, qa, depth), _vertical(spec, qb, depth)
    hold(qa, 0.25)
    add("approach", down_a, t_vert)
    hold(down_a[-1], dwell)
    add("approach", down_a[::-1], t_vert)
    add("move", np.vstack([qa, qb]), t_swing)
    add("approach", down_b, t_vert)
    hold(down_b[-1], dwell)
    add("approach", down_b[::-1], t_vert)
    add("move", np.vstack([qb, qa]), t_swing)
    hold(qa, 1.0)
    return Trajectory(name, tuple(segs))


# ----- running ----------------------------------------------------------------------------
@dataclass(frozen=True)
class RunResult:
    """One run of a trajectory in one joint model. Arrays are per control step.

    Attributes:
        mode: the joint model.
        dt: control step, s.
        payload: kg at the flange.
        t: (N,) times, s (after each step).
        q_ref, qd_ref: (N, n) reference positions/velocities at ``t``.
        q, qd, tau: (N, n) measured positions, velocities, drive torques (KINEMATIC: the
            inverse-dynamics torque the motion needs).
        steps_per_s: control steps per wall-clock second (command + step + read).
        stable: the stability guard never tripped.
        message: the guard's message, or "".
    """

    mode: JointMode
    dt: float
    payload: float
    t: np.ndarray
    q_ref: np.ndarray
    qd_ref: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    steps_per_s: float
    stable: bool
    message: str = ""


def run_motion(spec: RobotSpec, traj: Trajectory, mode: JointMode, *, dt: float = 1.0 / 240.0,
               substeps: int = 1, payload: float = 0.0, drive=None) -> RunResult:
    """Run ``traj`` through a fresh world in ``mode`` and record it.

    The command at step k is the reference at the end of that step, t = (k + 1)·dt, with
    its velocity. A run stops early when the stability guard trips.
    """
    n_steps = int(np.ceil(traj.duration / dt - 1e-9))
    t = dt * np.arange(1, n_steps + 1)
    q_ref, qd_ref, qdd_ref = traj.sample(t)
    Q, QD, TAU = (np.full((n_steps, spec.dof), np.nan) for _ in range(3))
    with World(PhysicsConfig(dt=dt, substeps=substeps), ground=False) as world:
        robot = world.add_robot(spec, mode, q0=traj.q0, drive=drive, payload=payload)
        t0 = time.perf_counter()
        k = 0
        for k in range(n_steps):
            robot.command(q_ref[k], qd_ref[k])
            world.step()
            s = robot.state()
            Q[k], QD[k], TAU[k] = s.q, s.qd, s.tau
            if not robot.stable:
                break
        wall = time.perf_counter() - t0
        stable, msg = robot.stable, robot.instability.message if robot.instability else ""
        if mode is JointMode.KINEMATIC:
            TAU = np.array([robot.inverse_dynamics(a, b, c) for a, b, c in zip(q_ref, qd_ref, qdd_ref)])
    m = k + 1
    return RunResult(mode, dt, payload, t[:m], q_ref[:m], qd_ref[:m], Q[:m], QD[:m], TAU[:m],
                     m / max(wall, 1e-9), stable, msg)


# ----- metrics ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Metrics:
    """Tracking metrics of one run (display units).

    Attributes:
        rms_joint_err, max_joint_err: joint error over all joints and steps, deg (mm prismatic).
        rms_flange_err_mm, max_flange_err_mm: flange position error, mm.
        final_err: largest joint error at the end of the final hold, deg (mm).
        overshoot: largest excursion past a stop target in the direction of the move, deg (mm).
        settling_s: time after the final stop of the reference until every joint stays within
            :data:`SETTLE_BAND_DEG` of its final value, s (NaN: not settled within the hold).
        peak_tau, rms_tau: largest |torque| and RMS torque over joints and steps, N·m (N).
        energy_j: mechanical work of the drives, ∫ Σ |τ·q̇| dt, J.
        steps_per_s: wall-clock control steps per second.
        stable: the stability guard never tripped.
    """

    mode: str
    dt: float
    payload: float
    rms_joint_err: float
    max_joint_err: float
    rms_flange_err_mm: float
    max_flange_err_mm: float
    final_err: float
    overshoot: float
    settling_s: float
    peak_tau: float
    rms_tau: float
    energy_j: float
    steps_per_s: float
    stable: bool
    message: str = ""

    def row(self) -> dict:
        """Plain dict (for CSV / JSON), with ``settled_stable`` (:func:`stable_run`) after ``stable``."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["settled_stable"] = stable_run(self)
        return d


def _display_scale(spec: RobotSpec) -> np.ndarray:
    return np.where(spec.prismatic, 1000.0, 180.0 / np.pi)


def joint_error(spec: RobotSpec, r: RunResult) -> np.ndarray:
    """(N, n) measured minus reference joints, deg (mm prismatic)."""
    return (r.q - r.q_ref) * _display_scale(spec)


def flange_error_mm(spec: RobotSpec, r: RunResult) -> np.ndarray:
    """(N,) distance between the measured and the reference flange position, mm."""
    chain = chain_of(spec)
    ok = np.all(np.isfinite(r.q), axis=1)
    out = np.full(len(r.t), np.nan)
    if np.any(ok):
        P = fk_batch(chain, r.q[ok])[:, :3, 3]
        P0 = fk_batch(chain, r.q_ref[ok])[:, :3, 3]
        out[ok] = 1000.0 * np.linalg.norm(P - P0, axis=1)
    return out


def metrics(spec: RobotSpec, traj: Trajectory, r: RunResult) -> Metrics:
    """The :class:`Metrics` of a run."""
    e = joint_error(spec, r)
    fe = flange_error_mm(spec, r)
    scale = _display_scale(spec)
    overshoot, settling, final = 0.0, float("nan"), float("nan")
    if r.stable:
        for ts, te, q_tgt, q_from in traj.stops():
            sel = (r.t >= ts - 1e-9) & (r.t <= te + 1e-9)
            if np.any(sel):
                d = np.sign(q_tgt - q_from) * (np.abs(q_tgt - q_from) > 1e-9)
                past = (r.q[sel] - q_tgt) * d * scale
                overshoot = max(overshoot, float(np.max(past, initial=0.0)))
        ts, te, q_tgt, _ = traj.stops()[-1]
        sel = r.t >= ts - 1e-9
        qs = r.q[sel] * scale
        final = float(np.max(np.abs(e[-1])))
        off = np.max(np.abs(qs - qs[-1]), axis=1) > SETTLE_BAND_DEG
        if not off[-len(off) // 4:].any():  # settled before the last quarter of the hold
            last_off = np.nonzero(off)[0]
            settling = 0.0 if len(last_off) == 0 else float(r.t[sel][last_off[-1]] - ts + r.dt)
    power = np.abs(np.sum(r.tau * r.qd_ref if r.mode is JointMode.KINEMATIC else r.tau * r.qd, axis=1))
    rms = lambda a: float(np.sqrt(np.nanmean(np.square(a)))) if np.size(a) else float("nan")  # noqa: E731
    return Metrics(
        mode=r.mode.value, dt=r.dt, payload=r.payload,
        rms_joint_err=rms(e), max_joint_err=float(np.nanmax(np.abs(e))),
        rms_flange_err_mm=rms(fe), max_flange_err_mm=float(np.nanmax(fe)),
        final_err=final, overshoot=overshoot, settling_s=settling,
        peak_tau=float(np.nanmax(np.abs(r.tau))), rms_tau=rms(r.tau),
        energy_j=float(np.nansum(power) * r.dt), steps_per_s=r.steps_per_s,
        stable=r.stable, message=r.message)


# ----- sweeps -----------------------------------------------------------------------------
DYNAMIC_MODES = (JointMode.HINGE, JointMode.ARTICULATION)


def payload_sweep(spec: RobotSpec, traj: Trajectory, payloads: Sequence[float], *, dt: float = 1.0 / 240.0,
                  modes: Sequence[JointMode] = DYNAMIC_MODES, drive=None,
                  progress: Callable[[str], None] | None = None) -> list[Metrics]:
    """Metrics of ``traj`` for every payload (kg) and mode."""
    out = []
    for m in payloads:
        for mode in modes:
            if progress:
                progress(f"payload {m:g} kg, {mode.value}")
            out.append(metrics(spec, traj, run_motion(spec, traj, mode, dt=dt, payload=m, drive=drive)))
    return out


def stable_run(m: "Metrics") -> bool:
    """A run counts as stable when the stability guard did not stop it and the joints settled
    after the motion (finite ``settling_s``).

    The second condition catches what the guard cannot see: an explicit spring just beyond its
    step limit can fall into a limit cycle at the effort limit — bounded, no NaN, no runaway
    speed — pumping hundreds of joules into the arm and never coming to rest (measured on the
    IRB120 hinge model at 9.9 ms: peak torque at the 120 N·m limit, 2,967 J of work for a motion
    that needs 11 J, 22 mm flange error).
    """
    return bool(m.stable) and bool(np.isfinite(m.settling_s))


@dataclass(frozen=True)
class DtSearch:
    """Result of the time-step search for one mode.

    Attributes:
        mode: the joint model.
        largest_stable_dt: the largest dt (s) found stable (NaN if even the start failed
            down to 1/16 of it).
        capped: the search stopped at :data:`DT_CAP` without an instability.
        first_unstable_dt: the smallest dt (s) found unstable (NaN if none).
        tried: metrics of every dt tried, in the order tried.
    """

    mode: JointMode
    largest_stable_dt: float
    capped: bool
    first_unstable_dt: float
    tried: tuple[Metrics, ...] = field(default_factory=tuple)


def dt_sweep(spec: RobotSpec, traj: Trajectory, mode: JointMode, *, dt0: float = 1.0 / 240.0,
             payload: float = 0.0, bisections: int = 4, cap: float = DT_CAP, drive=None,
             progress: Callable[[str], None] | None = None) -> DtSearch:
    """Largest stable time step for ``mode``: double ``dt0`` until the guard trips, then bisect.

    Bisection is geometric (in log dt), so ``bisections`` = 4 pins the limit to within
    2^(1/16) ≈ 4 %. A step counts as stable by :func:`stable_run`: the guard did not stop the
    run and the joints settle after the motion.
    """
    tried: list[Metrics] = []

    def ok(dt: float) -> bool:
        if progress:
            progress(f"dt {dt * 1000:.2f} ms, {mode.value}")
        m = metrics(spec, traj, run_motion(spec, traj, mode, dt=dt, payload=payload, drive=drive))
        tried.append(m)
        return stable_run(m)

    lo, hi = float("nan"), float("nan")
    dt = dt0
    if ok(dt):
        lo = dt
        while lo < cap:
            dt = min(2 * lo, cap)
            if ok(dt):
                lo = dt
            else:
                hi = dt
                break
    else:
        hi = dt
        for _ in range(4):
            dt = dt / 2
            if ok(dt):
                lo = dt
                break
            hi = dt
    if np.isfinite(lo) and np.isfinite(hi):
        for _ in range(bisections):
            mid = float(np.sqrt(lo * hi))
            if ok(mid):
                lo = mid
            else:
                hi = mid
    capped = np.isfinite(lo) and not np.isfinite(hi)
    return DtSearch(mode, lo, bool(capped), hi, tuple(tried))
