"""The hinge joint model's gains fitted to a run: ``armtwin fit RUN.csv --model hinge --robot R``.

The hinge model (``JointMode.HINGE``) drives each joint with an explicit spring–damper,
``τ = K (q_cmd − q) + D (q̇_cmd − q̇)`` (and the engine's joint damping ``d``), computed at every
physics step. Its default gains come from a rule (:mod:`armtwin.robots.gains`): per joint from the
joint's smallest and largest inertia and one damping ratio, then all scaled by one factor so that
the largest eigenvalue of ``M(q)⁻¹ (h² K + 2 h (D + d))`` over random poses is 2 (half the
explicit-Euler limit of 4) at the design step ``h``. A rule is not a fit: one factor for all
joints leaves stiffness unused on the joints that are not in the critical mode, and one damping
ratio fits no joint exactly.

:func:`fit_hinge` fits ``K`` and the damping (``D`` and ``d`` together, their split kept) per
joint so that the hinge model, commanded as the run was (the log's commanded joints, velocities
from their differences), follows a *target*: what the run's joints did (``measured``, e.g. a run
of the articulation model, whose implicit drive is effectively rigid) or the commanded trajectory
itself (``commanded``: the reference). The simulation is PyBullet's own hinge model
(:class:`~armtwin.envs.sim.SimRobot`), one world reused; the optimiser is SciPy's
``least_squares``; every candidate is projected back onto the rule's stability margin (scaled
down until the largest eigenvalue over the rule's poses is at most 2 at the rule's design step),
so the fitted gains are as stable as the rule's wherever the rule's are. The first
``fit_fraction`` of the log (at most ``max_fit_seconds``) is fitted; the whole log is then run with
the rule's and with the fitted gains and the tracking errors reported, on the fitted part and
on the rest. A fit that does not beat the rule on the fitted part returns the rule's gains.

Units: rad, m, s, N·m inside; the run log's deg and mm at the edge.
"""

from __future__ import annotations

import csv
import math
import time
from dataclasses import dataclass, replace

import numpy as np

from ..controllers.choices import Choice
from ..robots.spec import DriveGains, RobotSpec

__all__ = ["RunTrace", "HingeFitReport", "read_run_log", "fit_hinge", "Target", "project_to_margin",
           "write_hinge_gains", "read_hinge_gains"]

#: the keys of a hinge gains file, one value per joint each
GAIN_KEYS = ("stiffness", "damping", "joint_damping")


class Target(Choice):
    """What the fitted hinge model should follow."""

    __label__ = "hinge fit target"

    MEASURED = "measured"      # the joints the run's model reached (e.g. the articulation model)
    COMMANDED = "commanded"    # the commanded trajectory: the reference


@dataclass(frozen=True)
class RunTrace:
    """The joints of an ``armtwin run --log`` log.

    Attributes:
        t: (K,) times, s (a fixed control period).
        q_cmd: (K, n) commanded joints, rad / m.
        q: (K, n) the joints the run's model reached, rad / m.
    """

    t: np.ndarray
    q_cmd: np.ndarray
    q: np.ndarray

    @property
    def period(self) -> float:
        return float(np.median(np.diff(self.t)))


def read_run_log(path, spec: RobotSpec) -> RunTrace:
    """Read a run log (``armtwin run --log``: ``time_s, line, …, j1_cmd … jn_cmd, j1 … jn``) of ``spec``.

    Raises:
        OSError: the file cannot be read.
        ValueError: not a run log of this robot (its joint columns), fewer than 20 rows, a value
            that is not a number, or times that do not advance at a fixed period.
    """
    n = spec.dof
    want = [f"j{i + 1}_cmd" for i in range(n)] + [f"j{i + 1}" for i in range(n)]
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    if not rows or rows[0][:1] != ["time_s"]:
        raise ValueError(f"{path}: not a run log (`armtwin run --log`: the header starts with time_s)")
    head = rows[0]
    missing = [c for c in want if c not in head]
    if missing or any(c.startswith(f"j{n + 1}") for c in head):
        joints = sum(1 for c in head if c.endswith("_cmd") and c.startswith("j"))
        raise ValueError(f"{path}: a run log of a robot with {joints} joints; {spec.name} has {n}")
    cols = [head.index("time_s")] + [head.index(c) for c in want]
    try:
        data = np.array([[float(r[c]) for c in cols] for r in rows[1:] if r], dtype=float)
    except (ValueError, IndexError):
        raise ValueError(f"{path}: a row with a missing or non-numeric value") from None
    if len(data) < 20 or not np.all(np.isfinite(data)):
        raise ValueError(f"{path}: needs at least 20 finite rows, has {len(data)}")
    dt = np.diff(data[:, 0])
    if len(dt) > 2 and 0 < dt[-1] < 0.99 * np.median(dt):
        # a run's last sample is at the program's end, off the control grid (ControlTrajectory): dropped
        data, dt = data[:-1], dt[:-1]
    t = data[:, 0]
    if not (np.all(dt > 0) and np.ptp(dt) <= 0.01 * np.median(dt) + 2e-4):
        raise ValueError(f"{path}: the times do not advance at a fixed control period")
    scale = np.where(spec.prismatic, 1e-3, math.pi / 180.0)    # mm, deg -> m, rad
    return RunTrace(t, data[:, 1:1 + n] * scale, data[:, 1 + n:] * scale)


@dataclass(frozen=True)
class HingeFitReport:
    """The result of :func:`fit_hinge`.

    Attributes:
        rule: the gains of the rule (the robot's data file).
        fitted: the fitted gains (the rule's when the fit did not beat them).
        target: what was followed.
        split_time: fitted before this time, checked after, s.
        rms_rule, rms_fit: (n,) per joint RMS tracking error on the fitted part, deg (mm prismatic).
        rms_rule_held, rms_fit_held: the same after ``split_time`` (NaN when nothing is left).
        max_rule_held, max_fit_held: largest error after ``split_time`` over all joints.
        eigen_rule, eigen_fit: largest stability eigenvalue over the rule's poses at its design step.
        seconds: wall time of the fit, s.
        simulations: hinge runs simulated.
        improved: the fitted gains beat the rule on the fitted part.
    """

    rule: DriveGains
    fitted: DriveGains
    target: Target
    split_time: float
    rms_rule: np.ndarray
    rms_fit: np.ndarray
    rms_rule_held: np.ndarray
    rms_fit_held: np.ndarray
    max_rule_held: float
    max_fit_held: float
    eigen_rule: float
    eigen_fit: float
    seconds: float
    simulations: int
    improved: bool


class _Margin:
    """The rule's stability check, precomputed: ``M(q)⁻¹`` at the rule's poses, its design step."""

    def __init__(self, spec: RobotSpec) -> None:
        from ..controllers.dynamics import mass_matrix
        from ..robots.bodies import rigid_bodies
        from ..robots.gains import POSES, TARGET, rule_for
        rule = rule_for(spec.name)
        rng = np.random.default_rng(rule.seed)
        Q = rng.uniform(spec.lower, spec.upper, (POSES, spec.dof))
        self.minv = np.linalg.inv(mass_matrix(rigid_bodies(spec), Q))
        self.h, self.target = rule.h, TARGET

    def eigenvalue(self, drive: DriveGains) -> float:
        h = self.h
        a = h * h * np.asarray(drive.stiffness) + 2 * h * (np.asarray(drive.damping) + np.asarray(drive.joint_damping))
        return float(np.linalg.eigvals(self.minv * a[None, None, :]).real.max())


def project_to_margin(drive: DriveGains, margin: _Margin) -> DriveGains:
    """``drive`` with its stiffness and damping scaled down (one factor) until the largest stability
    eigenvalue is at most the rule's target; unchanged when it already is (the eigenvalue is linear
    in the gains)."""
    lam = margin.eigenvalue(drive)
    if lam <= margin.target:
        return drive
    s = margin.target / lam
    return replace(drive, stiffness=tuple(float(v) * s for v in drive.stiffness),
                   damping=tuple(float(v) * s for v in drive.damping),
                   joint_damping=tuple(float(v) * s for v in drive.joint_damping))


def _gains(rule: DriveGains, z: np.ndarray, margin: _Margin) -> DriveGains:
    n = len(rule.stiffness)
    k, c = np.exp(z[:n]), np.exp(z[n:])
    d = replace(rule, stiffness=tuple(float(v) for v in np.asarray(rule.stiffness) * k),
                damping=tuple(float(v) for v in np.asarray(rule.damping) * c),
                joint_damping=tuple(float(v) for v in np.asarray(rule.joint_damping) * c))
    return project_to_margin(d, margin)


class _HingeSim:
    """One world with the robot in the hinge model, rerun from the log's start for each gain set."""

    def __init__(self, spec: RobotSpec, trace: RunTrace, physics_step: float) -> None:
        from .sim import JointMode, PhysicsConfig, World
        period = trace.period
        self.world = World(PhysicsConfig(dt=period, substeps=max(1, int(math.ceil(period / physics_step - 1e-9)))))
        self.robot = self.world.add_robot(spec, JointMode.HINGE, q0=trace.q[0])
        self.trace = trace
        self.qd_cmd = np.gradient(trace.q_cmd, trace.t, axis=0)
        self.count = 0

    def run(self, drive: DriveGains, until: int) -> np.ndarray | None:
        """(until, n) the joints after each of the first ``until`` commands; None when unstable."""
        r, tr = self.robot, self.trace
        r.set_drive(drive)
        r.reset(tr.q[0])
        out = np.empty((until, tr.q.shape[1]))
        self.count += 1
        for k in range(until):
            r.command(tr.q_cmd[k], self.qd_cmd[k])
            self.world.step(1)
            out[k] = r.q
            if not r.stable:
                return None
        return out

    def close(self) -> None:
        self.world.close()


def fit_hinge(spec: RobotSpec, trace: RunTrace, *, target: Target | str = Target.MEASURED, fit_fraction: float = 0.7,
              max_fit_seconds: float = 6.0, physics_step: float = 1e-3, max_evaluations: int = 120) -> HingeFitReport:
    """Fit the hinge model's stiffness and damping per joint to ``trace`` (see the module docstring).

    Args:
        spec: the robot of the run (its data file's gains are the rule's and the start).
        trace: the run (:func:`read_run_log`).
        target: follow the run's joints (:attr:`Target.MEASURED`) or its commands (``COMMANDED``).
        fit_fraction: the part of the log that is fitted (the rest is checked).
        max_fit_seconds: fit at most this much of the log's start, s (each candidate is simulated).
        physics_step: longest physics step, s (as ``armtwin run``'s; the control period is the log's).
        max_evaluations: simulations the optimiser may run.

    Raises:
        ValueError: a bad target or fraction, or a log too short to fit and check.
    """
    from scipy.optimize import least_squares

    target = Target.parse(target)
    if not (0.1 <= fit_fraction < 1.0):
        raise ValueError(f"fit_fraction must be in [0.1, 1), got {fit_fraction}")
    t0 = time.perf_counter()
    K = len(trace.t)
    split = int(min(fit_fraction * K, max_fit_seconds / trace.period))
    if split < 20 or K - split < 5:
        raise ValueError(f"the run log is too short to fit ({split} samples) and check ({K - split}); run a longer program")
    goal = trace.q if target is Target.MEASURED else trace.q_cmd
    unit = np.where(spec.prismatic, 1e3, 180.0 / math.pi)         # rad, m -> deg, mm
    margin = _Margin(spec)
    rule = spec.drive
    n = spec.dof
    sim = _HingeSim(spec, trace, physics_step)
    try:
        def residuals(z: np.ndarray) -> np.ndarray:
            q = sim.run(_gains(rule, z, margin), split)
            if q is None:
                return np.full(split * n, 1e3)
            return ((q - goal[:split]) * unit).ravel()

        z0 = np.zeros(2 * n)
        r0 = residuals(z0)
        sol = least_squares(residuals, z0, bounds=(np.full(2 * n, -math.log(20)), np.full(2 * n, math.log(20))),
                            diff_step=0.05, max_nfev=max(1, max_evaluations // (2 * n + 1)), xtol=1e-3, ftol=1e-4)
        improved = bool(sol.cost < 0.5 * float(r0 @ r0) * (1 - 1e-6))
        fitted = _gains(rule, sol.x, margin) if improved else rule
        full_rule, full_fit = sim.run(rule, K), sim.run(fitted, K)
        sims = sim.count
    finally:
        sim.close()

    def errors(q: np.ndarray | None, rows: slice) -> tuple[np.ndarray, float]:
        if q is None:
            return np.full(n, math.inf), math.inf
        e = np.abs((q[rows] - goal[rows]) * unit)
        if e.size == 0:
            return np.full(n, math.nan), math.nan
        return np.sqrt(np.mean(e * e, axis=0)), float(e.max())

    fit_rows, held_rows = slice(0, split), slice(split, K)
    rr, _ = errors(full_rule, fit_rows)
    rf, _ = errors(full_fit, fit_rows)
    rrh, mrh = errors(full_rule, held_rows)
    rfh, mfh = errors(full_fit, held_rows)
    return HingeFitReport(rule, fitted, target, float(trace.t[split]), rr, rf, rrh, rfh, mrh, mfh,
                          margin.eigenvalue(rule), margin.eigenvalue(fitted), time.perf_counter() - t0, sims, improved)


def write_hinge_gains(path, drive: DriveGains, *, comment: str = "") -> None:
    """Write the hinge gains as TOML lists, one value per joint (N·m/rad, N·m·s/rad; N/m, N·s/m for
    prismatic joints): the file ``armtwin run --hinge-gains`` reads."""
    lines = [f"# {c}" for c in comment.splitlines()]
    for name in GAIN_KEYS:
        lines.append(f"{name} = [{', '.join(repr(float(v)) for v in getattr(drive, name))}]")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def read_hinge_gains(path, spec: RobotSpec) -> DriveGains:
    """``spec``'s drive with the hinge gains of a file :func:`write_hinge_gains` wrote.

    Raises:
        OSError: the file cannot be read.
        ValueError: not such a file, a key missing or unknown, or not ``spec.dof`` finite values
            >= 0 (stiffness > 0) per key (the message names the file).
    """
    import tomllib
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not a hinge gains file ({exc})") from None
    if set(data) != set(GAIN_KEYS):
        raise ValueError(f"{path}: a hinge gains file has exactly {', '.join(GAIN_KEYS)}; it has "
                         f"{', '.join(sorted(data)) or 'nothing'}")
    values: dict[str, tuple[float, ...]] = {}
    for k in GAIN_KEYS:
        v = data[k]
        ok = (isinstance(v, list) and len(v) == spec.dof
              and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0 for x in v))
        if not ok or (k == "stiffness" and min(v) <= 0):
            raise ValueError(f"{path}: {k} must be {spec.dof} finite values >= 0 (stiffness > 0) for {spec.name}")
        values[k] = tuple(float(x) for x in v)
    return replace(spec.drive, stiffness=values["stiffness"], damping=values["damping"],
                   joint_damping=values["joint_damping"])
