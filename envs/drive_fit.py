"""What the joint-model fits share: a run log's joints, the model rerun on its commands, the
confidence of fitted multipliers.

``armtwin fit RUN.csv --model hinge`` (:mod:`armtwin.envs.hinge_fit`) and ``--model articulation``
(:mod:`armtwin.envs.articulation_fit`) fit a joint model's drive so that the model, commanded as
the run was, follows the run's joints (or its commands). Both read the run log the same way
(:func:`read_run_log`), rerun the model in one PyBullet world reused for every candidate
(:class:`ModelSim`: the log's commanded joints, velocities from their differences, the run's tool on
the flange), search the logarithms of multipliers of the data file's values with SciPy's
``least_squares``, and give each fitted value a 95 % confidence interval the same way
(:func:`log_confidence`): from the Jacobian of the fitted part's tracking residuals in those
logarithms (forward differences, one more simulation per parameter, backwards where forwards is
unstable), the residuals' variance widened by their autocorrelation length (a model's errors are
slow, not independent samples; the motor fit's estimate,
:func:`armtwin.controllers.ident.correlation_length`). An interval symmetric in the logarithm is a
*factor* ``f``: the value lies in ``[value / f, value × f]``; ``inf`` where the log cannot tell the
value at all (its column of the Jacobian is in the null space: a joint the log does not move, a
force limit the drive never reached).

Units: rad, m, s, N·m inside; the run log's deg and mm at the edge.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..controllers.choices import Choice
from ..robots.spec import DriveGains, RobotSpec

__all__ = ["Target", "RunTrace", "read_run_log", "is_twin_log", "run_trace_of_twin", "ModelSim", "log_confidence",
           "tracking_errors", "fit_frame", "compared_errors", "load_toml", "toml_has", "CI_STEP", "NULL_RATIO"]

#: log step of the confidence intervals' forward differences
CI_STEP = 0.01
#: a singular value below this fraction of the largest is a direction the log does not see
NULL_RATIO = 1e-6


class Target(Choice):
    """What a fitted joint model should follow."""

    __label__ = "fit target"

    MEASURED = "measured"      # the joints the run reached (its model's, or a measured robot's)
    COMMANDED = "commanded"    # the commanded trajectory: the reference


@dataclass(frozen=True)
class RunTrace:
    """The joints of an ``armtwin run --log`` log.

    Attributes:
        t: (K,) times, s (a fixed control period).
        q_cmd: (K, n) commanded joints, rad / m.
        q: (K, n) the joints the run's model reached, rad / m.
        tool: the number of the first tool the run's flange carried (the log's ``tool`` column:
            the body a run simulates), 0 for none or a log without the column.
        measured: (n,) which joints' ``q`` are measurements a fit should follow (None: all; a twin
            log has only the joints the rig stands for).
    """

    t: np.ndarray
    q_cmd: np.ndarray
    q: np.ndarray
    tool: int = 0
    measured: tuple[bool, ...] | None = None

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
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except (UnicodeDecodeError, csv.Error):
        raise ValueError(f"{path}: not a run log (not a text CSV file)") from None
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
    tool = 0
    if "tool" in head:
        k = head.index("tool")
        try:
            tool = next((int(r[k]) for r in rows[1:] if r and int(r[k]) > 0), 0)
        except (ValueError, IndexError):
            raise ValueError(f"{path}: a row whose tool is not a whole number") from None
    dt = np.diff(data[:, 0])
    if len(dt) > 2 and 0 < dt[-1] < 0.99 * np.median(dt):
        # a run's last sample is at the program's end, off the control grid (ControlTrajectory): dropped
        data, dt = data[:-1], dt[:-1]
    t = data[:, 0]
    if not (np.all(dt > 0) and np.ptp(dt) <= 0.01 * np.median(dt) + 2e-4):
        raise ValueError(f"{path}: the times do not advance at a fixed control period")
    scale = np.where(spec.prismatic, 1e-3, math.pi / 180.0)    # mm, deg -> m, rad
    return RunTrace(t, data[:, 1:1 + n] * scale, data[:, 1 + n:] * scale, tool)


def is_twin_log(path) -> bool:
    """Whether ``path`` is a servo rig's twin log (``armtwin sync --log``: a ``.mcap`` file, or a CSV
    whose header starts with ``STT,Time``) rather than a run log."""
    if str(path).lower().endswith(".mcap"):
        return True
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readline().startswith("STT,Time,")
    except OSError:
        return False


def run_trace_of_twin(log, spec: RobotSpec, *, min_samples: int = 25) -> tuple[RunTrace, float]:
    """A servo rig's twin log (:func:`armtwin.envs.rig.read_twin_log`) as a run of ``spec``: what a
    joint model fitted to it should do is what the rig did.

    The commanded joints are the log's ``Virtual_jN`` and the reached ones its ``Servo_jN`` (robot
    joint N, deg); the joints the rig does not stand for stay at the robot's home pose. The joint
    model cannot follow a rig without power or without a link, so the longest stretch of rows whose
    ``Fault`` is ``OK`` (every servo angle known) is taken, and resampled onto a fixed period (the
    median of its steps) by linear interpolation, since a run is replayed on a fixed control period.

    Returns:
        The trace (its times from 0) and the log time where the stretch starts, s.

    Raises:
        ValueError: a joint label that is not one of the robot's joints, or no stretch of
            ``min_samples`` fault-free rows.
    """
    joints = []
    for label in log.labels:
        k = int(label[1:]) - 1 if label[:1] == "j" and label[1:].isdigit() else -1
        if not 0 <= k < spec.dof:
            raise ValueError(f"the twin log's joint {label} is not one of {spec.name}'s j1..j{spec.dof}")
        joints.append((label, k))
    t = np.asarray(log["Time"], dtype=float)
    ok = np.array([str(f) == "OK" for f in log["Fault"]], dtype=bool)
    for label, _ in joints:
        ok &= np.isfinite(np.asarray(log[f"Servo_{label}"], dtype=float))
    ok &= np.r_[True, np.diff(t) > 0]
    best, start, run = (0, 0), 0, 0          # the longest run of good rows: (length, first row)
    for i, good in enumerate(ok):
        run = run + 1 if good else 0
        start = i - run + 1 if good else start
        if run > best[0]:
            best = (run, start)
    length, first = best
    if length < min_samples:
        raise ValueError(f"the twin log has no stretch of {min_samples} rows without a fault (power cut, link down) "
                         f"to fit a joint model to; its longest has {length}")
    rows = slice(first, first + length)
    tt = t[rows]
    period = float(np.median(np.diff(tt)))
    grid = tt[0] + period * np.arange(int(np.floor((tt[-1] - tt[0]) / period + 1e-9)) + 1)
    home = np.asarray(spec.home, dtype=float)
    q_cmd = np.tile(home, (len(grid), 1))
    q = q_cmd.copy()
    for label, k in joints:
        scale = 1e-3 if spec.prismatic[k] else math.pi / 180.0
        q_cmd[:, k] = np.interp(grid, tt, np.asarray(log[f"Virtual_{label}"], dtype=float)[rows]) * scale
        q[:, k] = np.interp(grid, tt, np.asarray(log[f"Servo_{label}"], dtype=float)[rows]) * scale
    measured = tuple(any(k == j for _, k in joints) for j in range(spec.dof))
    return RunTrace(grid - grid[0], q_cmd, q, 0, measured), float(tt[0])


def load_toml(path, what: str) -> dict:
    """A drive file's TOML as a dict; ValueError ``"{path}: not {what} (…)"`` for a file that is not
    TOML text. OSError when it cannot be read."""
    import tomllib
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not {what} ({exc})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not {what} (not text)") from None


def toml_has(path, key: str) -> bool:
    """Whether ``path`` reads as TOML with a top-level ``key`` (False for anything unreadable)."""
    try:
        return key in load_toml(path, "TOML")
    except (OSError, ValueError):
        return False


class ModelSim:
    """One world with the robot in a dynamic joint model, rerun from the log's start for each drive.

    Args:
        spec: the robot of the run.
        trace: the run (its commands are replayed; its first measured pose is the start).
        physics_step: longest physics step, s (the control period is the log's).
        mode: the joint model (``hinge`` or ``articulation``).
        tool: the tool on the flange (its mass acts), or None for the bare flange.
    """

    def __init__(self, spec: RobotSpec, trace: RunTrace, physics_step: float, mode, tool=None) -> None:
        from .sim import PhysicsConfig, World
        period = trace.period
        self.world = World(PhysicsConfig(dt=period, substeps=max(1, int(math.ceil(period / physics_step - 1e-9)))))
        try:
            self.robot = self.world.add_robot(spec, mode, q0=trace.q[0], tool=tool)
        except Exception:
            self.world.close()
            raise
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


def log_confidence(run: Callable[[np.ndarray], np.ndarray | None], size: int, goal: np.ndarray,
                   unit: np.ndarray) -> np.ndarray:
    """(size,) 95 % confidence factors of fitted values, from their log multipliers (module docstring).

    Args:
        run: the joints (K, n) simulated with the fitted values times ``exp(z)`` ((size,) log
            multipliers; zeros: the fitted values), or None when that drive is unstable.
        size: how many values were fitted.
        goal: (K, n) what the fit followed, rad / m.
        unit: (n,) factors to the log's units (deg, mm): the residuals' scale.

    Returns:
        Factors >= 1, ``inf`` for a value the log cannot tell (all ``inf`` when the fitted drive
        itself is unstable, or every step around it is).
    """
    from ..controllers.ident import correlation_length   # the motor fit's estimate, shared
    wide = np.full(size, math.inf)
    q0 = run(np.zeros(size))
    if q0 is None:
        return wide
    r0 = (q0 - goal) * unit
    jac = np.empty((r0.size, size))
    for i in range(size):
        for step in (CI_STEP, -CI_STEP):       # backwards when a stiffer or stronger drive is unstable
            z = np.zeros(size)
            z[i] = step
            q = run(z)
            if q is not None:
                jac[:, i] = ((q - goal) * unit - r0).ravel() / step
                break
        else:
            return wide
    _, sv, vt = np.linalg.svd(jac, full_matrices=False)
    if sv[0] <= 0:
        return wide
    blind = np.zeros(size, dtype=bool)
    for row in vt[sv < NULL_RATIO * sv[0]]:
        blind |= np.abs(row) > 0.1
    blind |= ~np.any(jac != 0.0, axis=0)     # a value whose step changed nothing at all
    half = np.full(size, math.inf)
    if (~blind).any():
        res = r0.ravel()
        sigma2 = float(res @ res) / max(res.size - size, 1)
        corr = max((correlation_length(r0[:, j]) for j in range(r0.shape[1])), default=1.0)
        jg = jac[:, ~blind]
        cov = sigma2 * corr * np.linalg.pinv(jg.T @ jg)
        half[~blind] = 1.96 * np.sqrt(np.maximum(np.diag(cov), 0.0))   # of the log multipliers
    return np.where(np.isfinite(half), np.exp(np.minimum(half, 700.0)), math.inf)


def fit_frame(spec: RobotSpec, trace: RunTrace, target: "Target | str", fit_fraction: float,
              max_fit_seconds: float) -> tuple[Target, int, np.ndarray, np.ndarray]:
    """What a fit follows and on which rows: the target, how many of the log's first samples are
    fitted (``fit_fraction`` of them, at most ``max_fit_seconds``; the rest is held out), the goal
    (K, n) — the run's joints or its commands — and the factors (n,) to the log's units (deg, mm):
    0 for a joint the log did not measure (``RunTrace.measured``), which no residual counts.

    Raises:
        ValueError: a bad target, a fraction outside [0.1, 1), or too few samples to fit (20) or
            to check (5).
    """
    target = Target.parse(target)
    if not (0.1 <= fit_fraction < 1.0):
        raise ValueError(f"fit_fraction must be in [0.1, 1), got {fit_fraction}")
    K = len(trace.t)
    split = int(min(fit_fraction * K, max_fit_seconds / trace.period))
    if split < 20 or K - split < 5:
        raise ValueError(f"the run log is too short to fit ({split} samples) and check ({K - split}); run a longer program")
    goal = trace.q if target is Target.MEASURED else trace.q_cmd
    unit = np.where(spec.prismatic, 1e3, 180.0 / math.pi)
    if trace.measured is not None:
        unit = np.where(np.asarray(trace.measured, dtype=bool), unit, 0.0)
    return target, split, goal, unit


def compared_errors(before: np.ndarray | None, after: np.ndarray | None, goal: np.ndarray, unit: np.ndarray,
                    split: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float, float]:
    """Two whole runs against ``goal``: per joint RMS on the fitted rows (before, after), on the held-out
    rows (before, after), and the largest held-out errors (before, after) (:func:`tracking_errors`)."""
    fit_rows, held_rows = slice(0, split), slice(split, len(goal))
    rb, _ = tracking_errors(before, goal, unit, fit_rows)
    ra, _ = tracking_errors(after, goal, unit, fit_rows)
    rbh, mbh = tracking_errors(before, goal, unit, held_rows)
    rah, mah = tracking_errors(after, goal, unit, held_rows)
    return rb, ra, rbh, rah, mbh, mah


def tracking_errors(q: np.ndarray | None, goal: np.ndarray, unit: np.ndarray, rows: slice) -> tuple[np.ndarray, float]:
    """Per joint RMS and the largest error over all joints of ``q`` against ``goal`` on ``rows``, in
    the log's units; inf for an unstable run (None), NaN for no rows and for the joints not measured
    (``unit`` 0)."""
    n = goal.shape[1]
    seen = unit != 0
    if q is None:
        return np.where(seen, math.inf, math.nan), math.inf
    e = np.abs((q[rows] - goal[rows]) * unit)
    if e.size == 0:
        return np.full(n, math.nan), math.nan
    return np.where(seen, np.sqrt(np.mean(e * e, axis=0)), math.nan), float(e[:, seen].max())
