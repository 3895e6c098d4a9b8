"""The articulation joint model's drive fitted to a run: ``armtwin fit RUN.csv --model articulation --robot R``.

The articulation model (``JointMode.ARTICULATION``) drives each joint with PyBullet's implicit
motor: at every physics step of length ``h`` the joint velocity is driven towards
``q̇_cmd + position_gain · (q_cmd − q) / h`` (``velocity_gain`` of the velocity error removed per
step), with a force limit per joint (``effort``), against the engine's joint damping
(``joint_damping``, the model's only joint friction: its motor row is the drive). With the data
files' values (position gain 0.3, velocity gain 1) the drive is effectively rigid: it lags a
reference accelerating at ``q̈`` by about ``h² q̈ / position_gain`` (micro-degrees) while no force
limit is reached. What it can be fitted to is a robot that is *not* rigid: a softer drive (the gains
show as a lag of the reference), a weaker one (the force limits show where the drive saturates),
or the joints of another model or of a measured robot.

:func:`fit_articulation` fits ``2 + 2n`` values: the position and velocity gains (one each, as
the model has them: all joints share them), and per joint the joint damping and the force limit,
so that the model, commanded as the run was (:class:`~armtwin.envs.drive_fit.ModelSim`), follows
the run's joints (``measured``) or its commands (``commanded``). Each is searched as the logarithm
of a multiplier of the data file's value (gains from 1/100 of it up to 2, PyBullet's limit; damping
and force limits from 1/20 to 20 times it) by SciPy's ``least_squares``. A force limit has no
gradient while the drive stays under it, so each joint's search starts, instead of at the rated
limit, at the largest torque the run's measured motion needed (the engine's inverse dynamics of the
logged joints, with the tool, plus the joint damping) when that start fits the log better: a drive
that saturated shows its limit there. The first ``fit_fraction`` of the log (at most
``max_fit_seconds``) is fitted, the whole log is then run with the data file's and the fitted
drive, and the tracking errors reported on the fitted part and on the rest; a fit that does not beat
the data file's drive on the fitted part returns it unchanged.

Every fitted value has a 95 % confidence factor (:func:`~armtwin.envs.drive_fit.log_confidence`):
``inf`` where the log cannot tell it (also where the factor is :data:`OPEN_FACTOR` or wider: the
interval spans the whole search range) — a force limit the drive never reached, the damping of a
joint a rigid drive overrides, the gains of a drive the log shows as rigid. Those values are
reported as *not identifiable* (:attr:`ArticulationFitReport.not_identifiable`) and keep the
value the fit ended at, which is the data file's.

The drive file (:func:`write_articulation_drive`, ``fit --save``; read by ``armtwin run
--articulation-drive``) is TOML: ``robot = "NAME"``, ``position_gain``, ``velocity_gain`` (numbers),
``joint_damping``, ``effort`` (one value per joint, N·m·s/rad and N·m; N·s/m and N for prismatic
joints), then the 95 % factors ``<key>_ci95_factor`` of each (``inf``: not identifiable).

Units: rad, m, s, N·m inside; the run log's deg and mm at the edge.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, replace
from typing import Mapping

import numpy as np

from ..robots.spec import DriveGains, RobotSpec
from .drive_fit import ModelSim, RunTrace, Target, compared_errors, fit_frame, load_toml, log_confidence, toml_has

__all__ = ["ArticulationFitReport", "fit_articulation", "write_articulation_drive", "read_articulation_drive",
           "read_articulation_file", "ArticulationDriveFile", "is_articulation_file",
           "DRIVE_KEYS", "GAIN_RANGE", "JOINT_RANGE"]

#: the fitted values: two shared gains, then per joint the damping and the force limit
DRIVE_KEYS = ("position_gain", "velocity_gain", "joint_damping", "effort")
_SCALAR = ("position_gain", "velocity_gain")
#: the gains are searched from 1/GAIN_RANGE of the data file's value up to PyBullet's limit of 2
GAIN_RANGE = 100.0
GAIN_LIMIT = 2.0
#: per joint damping and force limits are searched from 1/JOINT_RANGE to JOINT_RANGE times the data file's
JOINT_RANGE = 20.0
#: a 95 % factor at least this wide (the interval spans the search range of the joint values) counts
#: as not identifiable
OPEN_FACTOR = JOINT_RANGE ** 2
#: the coarse grid of (position, velocity) gains the search starts from
GRID = (8, 5)
#: a velocity gain of 0 in a data file is searched from this value
_VELOCITY_GAIN_FLOOR = 0.01


@dataclass(frozen=True)
class ArticulationFitReport:
    """The result of :func:`fit_articulation`.

    Attributes:
        nominal: the data file's drive (the start).
        fitted: the fitted drive (the data file's when the fit did not beat it); ``effort`` always set.
        target: what was followed.
        split_time: fitted before this time, checked after, s.
        rms_nominal, rms_fit: (n,) per joint RMS tracking error on the fitted part, deg (mm prismatic).
        rms_nominal_held, rms_fit_held: the same after ``split_time``.
        max_nominal_held, max_fit_held: largest error after ``split_time`` over all joints.
        seconds: wall time of the fit, s.
        simulations: runs simulated.
        improved: the fitted drive beats the data file's on the fitted part.
        ci95_factor: per key of :data:`DRIVE_KEYS`, the 95 % confidence factors (one for each gain,
            one per joint for the others; ``inf``: the log cannot tell that value).
        predicted: the whole log's joints (K, n) run with the data file's and with the fitted drive,
            rad / m (None: unstable).
    """

    nominal: DriveGains
    fitted: DriveGains
    target: Target
    split_time: float
    rms_nominal: np.ndarray
    rms_fit: np.ndarray
    rms_nominal_held: np.ndarray
    rms_fit_held: np.ndarray
    max_nominal_held: float
    max_fit_held: float
    seconds: float
    simulations: int
    improved: bool
    ci95_factor: Mapping[str, tuple[float, ...]]
    predicted: tuple[np.ndarray | None, np.ndarray | None] = field(default=(None, None), repr=False, compare=False)

    @property
    def not_identifiable(self) -> list[str]:
        """The values the log cannot tell, e.g. ``["effort J1", "velocity_gain"]``."""
        out = []
        for key in DRIVE_KEYS:
            f = self.ci95_factor[key]
            if key in _SCALAR:
                out += [key] if not math.isfinite(f[0]) else []
            else:
                out += [f"{key} J{j + 1}" for j, v in enumerate(f) if not math.isfinite(v)]
        return out


class _Params:
    """The fitted values as log multipliers ``z`` (2 + 2n) of a base drive."""

    def __init__(self, spec: RobotSpec, base: DriveGains) -> None:
        self.n = n = spec.dof
        self.base = base
        self.gains = np.array([base.position_gain, base.velocity_gain or _VELOCITY_GAIN_FLOOR])
        self.damping = np.asarray(base.joint_damping, dtype=float)
        self.effort = np.asarray(base.effort if base.effort is not None else [j.effort for j in spec.joints], dtype=float)
        up = np.log(GAIN_LIMIT / self.gains)
        self.lower = np.concatenate([np.full(2, -math.log(GAIN_RANGE)), np.full(2 * n, -math.log(JOINT_RANGE))])
        self.upper = np.concatenate([up, np.full(2 * n, math.log(JOINT_RANGE))])
        #: the base drive with its force limits written out (the start: all multipliers 1)
        self.nominal = replace(base, velocity_gain=float(self.gains[1]), effort=tuple(float(v) for v in self.effort))

    def drive(self, z: np.ndarray) -> DriveGains | None:
        """The drive at ``z``; None outside the search range (a confidence step past a bound)."""
        if np.any(z < self.lower - 1e-12) or np.any(z > self.upper + 1e-12):
            return None
        n = self.n
        g = self.gains * np.exp(z[:2])
        return replace(self.base, position_gain=float(min(g[0], GAIN_LIMIT)), velocity_gain=float(min(g[1], GAIN_LIMIT)),
                       joint_damping=tuple(float(v) for v in self.damping * np.exp(z[2:2 + n])),
                       effort=tuple(float(v) for v in self.effort * np.exp(z[2 + n:])))

    def factors(self, f: np.ndarray) -> dict[str, tuple[float, ...]]:
        n = self.n
        return {"position_gain": (float(f[0]),), "velocity_gain": (float(f[1]),),
                "joint_damping": tuple(float(v) for v in f[2:2 + n]), "effort": tuple(float(v) for v in f[2 + n:])}


def _needed_torque(sim: ModelSim, trace: RunTrace, until: int, damping: np.ndarray) -> np.ndarray:
    """(n,) the largest torque per joint the logged joints' motion needed on the first ``until``
    samples: the engine's inverse dynamics (with the tool) plus the joint damping."""
    q = trace.q[:until]
    qd = np.gradient(q, trace.t[:until], axis=0)
    qdd = np.gradient(qd, trace.t[:until], axis=0)
    tau = np.array([sim.robot.inverse_dynamics(q[k], qd[k], qdd[k]) for k in range(until)])
    return np.max(np.abs(tau + damping * qd), axis=0)


def fit_articulation(spec: RobotSpec, trace: RunTrace, *, target: Target | str = Target.MEASURED,
                     fit_fraction: float = 0.7, max_fit_seconds: float = 6.0, physics_step: float = 1e-3,
                     max_evaluations: int = 240, tool=None, drive: DriveGains | None = None) -> ArticulationFitReport:
    """Fit the articulation model's drive to ``trace`` (see the module docstring).

    Args:
        spec: the robot of the run.
        trace: the run (:func:`~armtwin.envs.drive_fit.read_run_log`).
        target: follow the run's joints (:attr:`Target.MEASURED`) or its commands (``COMMANDED``).
        fit_fraction: the part of the log that is fitted (the rest is checked).
        max_fit_seconds: fit at most this much of the log's start, s (each candidate is simulated).
        physics_step: longest physics step, s (as ``armtwin run``'s; the control period is the log's).
        max_evaluations: simulations the optimiser may run.
        tool: the tool the run's flange carried (its mass acts), or None for the bare flange.
        drive: the start and the reference (default: the robot's data file's drive).

    Raises:
        ValueError: a bad target or fraction, or a log too short to fit and check.
    """
    from scipy.optimize import least_squares
    from .sim import JointMode

    t0 = time.perf_counter()
    K = len(trace.t)
    target, split, goal, unit = fit_frame(spec, trace, target, fit_fraction, max_fit_seconds)
    nominal = drive or spec.drive
    params = _Params(spec, nominal)
    n = spec.dof
    sim = ModelSim(spec, trace, physics_step, JointMode.ARTICULATION, tool)
    try:
        def residuals(z: np.ndarray) -> np.ndarray:     # every z searched lies within the bounds
            d = params.drive(z)
            q = None if d is None else sim.run(d, split)
            if q is None:
                return np.full(split * n, 1e3)
            return ((q - goal[:split]) * unit).ravel()

        def cost(z: np.ndarray) -> float:
            r = residuals(z)
            return float(r @ r)

        zero = np.zeros(2 + 2 * n)
        c0 = best = cost(zero)
        z0 = zero
        needed = _needed_torque(sim, trace, split, params.damping)
        for j in range(n):            # a saturated drive shows its limit as the largest torque it gave
            z = z0.copy()
            z[2 + n + j] = float(np.clip(math.log(max(needed[j], 1e-9) / params.effort[j]),
                                         params.lower[2 + n + j], params.upper[2 + n + j]))
            c = cost(z)
            if c < best:
                z0, best = z, c
        grid = z0.copy()
        for zp in np.linspace(params.lower[0], params.upper[0], GRID[0]):     # the gains' valley, coarsely
            for zv in np.linspace(params.lower[1], params.upper[1], GRID[1]):
                z = grid.copy()
                z[:2] = zp, zv
                c = cost(z)
                if c < best:
                    z0, best = z, c
        sol = least_squares(residuals, np.clip(z0, params.lower + 1e-9, params.upper - 1e-9),
                            bounds=(params.lower, params.upper), diff_step=0.02,
                            max_nfev=max(1, max_evaluations // (3 + 2 * n)), xtol=1e-6, ftol=1e-8)
        improved = bool(2 * sol.cost < c0 * (1 - 1e-6))
        z_fit = sol.x if improved else zero

        def stepped(z: np.ndarray) -> np.ndarray | None:
            d = params.drive(z_fit + z)
            return None if d is None else sim.run(d, split)

        f = log_confidence(stepped, 2 + 2 * n, goal[:split], unit)
        f = np.where(f < OPEN_FACTOR, f, math.inf)        # an interval wider than the search range: not known
        z_fit = np.where(np.isfinite(f), z_fit, 0.0)    # what the log cannot tell keeps the data file's value
        factors = params.factors(f)
        fitted = params.drive(z_fit)
        assert fitted is not None     # z_fit lies within the bounds
        full_nominal, full_fit = sim.run(params.nominal, K), sim.run(fitted, K)
        sims = sim.count
    finally:
        sim.close()
    errors = compared_errors(full_nominal, full_fit, goal, unit, split)
    return ArticulationFitReport(params.nominal, fitted, target, float(trace.t[split]), *errors,
                                 time.perf_counter() - t0, sims, improved, factors, (full_nominal, full_fit))


def write_articulation_drive(path, drive: DriveGains, *, robot: str, comment: str = "",
                             ci95_factor: Mapping[str, tuple[float, ...]] | None = None) -> None:
    """Write the articulation drive as TOML (module docstring): ``robot``, the gains, the joint damping
    and force limits (``drive.effort`` must be set), and when given their 95 % factors."""
    if drive.effort is None:
        raise ValueError("the drive's force limits (effort) must be set to be written")
    lines = [f"# {c}" for c in comment.splitlines()]
    lines.append(f"robot = {json.dumps(str(robot))}")
    for key in DRIVE_KEYS:
        v = getattr(drive, key)
        lines.append(f"{key} = {float(v)!r}" if key in _SCALAR else f"{key} = [{', '.join(repr(float(x)) for x in v)}]")
    if ci95_factor:
        lines.append("# 95 % confidence intervals [value / factor, value * factor]; inf: the log cannot tell the value")
        for key in DRIVE_KEYS:
            f = ci95_factor[key]
            lines.append(f"{key}_ci95_factor = {float(f[0])!r}" if key in _SCALAR
                         else f"{key}_ci95_factor = [{', '.join(repr(float(x)) for x in f)}]")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


@dataclass(frozen=True)
class ArticulationDriveFile:
    """What an articulation drive file holds (:func:`read_articulation_file`).

    Attributes:
        path: the file, as given.
        robot: the robot it was fitted for.
        values: per key of :data:`DRIVE_KEYS`: a number for the gains, one value per joint otherwise.
        ci95_factor: per key of :data:`DRIVE_KEYS`, the 95 % factors (one for a gain; ``inf``: not
            identifiable), or None (a file without them).
    """

    path: str
    robot: str
    values: Mapping[str, tuple[float, ...]]
    ci95_factor: Mapping[str, tuple[float, ...]] | None

    @property
    def dof(self) -> int:
        return len(self.values["effort"])

    def drive(self, spec: RobotSpec) -> DriveGains:
        """``spec``'s drive with this file's values."""
        v = self.values
        return replace(spec.drive, position_gain=v["position_gain"][0], velocity_gain=v["velocity_gain"][0],
                       joint_damping=v["joint_damping"], effort=v["effort"])


def is_articulation_file(path) -> bool:
    """Whether ``path`` reads as TOML holding ``position_gain`` (an articulation drive file, good or not)."""
    return toml_has(path, "position_gain")


def read_articulation_file(path) -> ArticulationDriveFile:
    """Read a file :func:`write_articulation_drive` wrote, without a robot to check it against.

    Raises:
        OSError: the file cannot be read.
        ValueError: not such a file: not TOML, a key missing or unknown, a value out of range (gains
            in (0, 2] and [0, 2], damping >= 0, force limits > 0, factors >= 1 or inf, one factor per
            value), lists of different lengths. The message names the file.
    """
    data = load_toml(path, "an articulation drive file")
    ci_keys = [f"{k}_ci95_factor" for k in DRIVE_KEYS]
    missing = [k for k in ("robot", *DRIVE_KEYS) if k not in data]
    unknown = sorted(set(data) - set(DRIVE_KEYS) - set(ci_keys) - {"robot"})
    if missing or unknown:
        raise ValueError(f"{path}: an articulation drive file has robot, {', '.join(DRIVE_KEYS)} (and their "
                         f"_ci95_factor); it has {', '.join(sorted(data)) or 'nothing'}")
    robot = data["robot"]
    if not isinstance(robot, str) or not robot:
        raise ValueError(f"{path}: robot must be a robot's name, got {robot!r}")

    def number(x) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

    pg, vg = data["position_gain"], data["velocity_gain"]
    if not (number(pg) and 0 < pg <= GAIN_LIMIT and number(vg) and 0 <= vg <= GAIN_LIMIT):
        raise ValueError(f"{path}: position_gain must be in (0, 2] and velocity_gain in [0, 2], got {pg!r}, {vg!r}")
    n = len(data["effort"]) if isinstance(data["effort"], list) else 0

    def joints(key: str, positive: bool) -> tuple[float, ...]:
        v = data[key]
        if not (isinstance(v, list) and len(v) == n > 0 and all(number(x) and (x > 0 if positive else x >= 0) for x in v)):
            raise ValueError(f"{path}: {key} must be {n or 'a list of'} finite values {'> 0' if positive else '>= 0'}, "
                             f"one per joint")
        return tuple(float(x) for x in v)

    values = {"position_gain": (float(pg),), "velocity_gain": (float(vg),),
              "joint_damping": joints("joint_damping", False), "effort": joints("effort", True)}
    given = [k for k in ci_keys if k in data]
    if given and len(given) != len(ci_keys):
        raise ValueError(f"{path}: the confidence factors are {', '.join(ci_keys)} together; it has only {', '.join(given)}")
    factors = None
    if given:
        factors = {}
        for key, ck in zip(DRIVE_KEYS, ci_keys):
            v = data[ck] if isinstance(data[ck], list) else [data[ck]]
            if len(v) != len(values[key]) or not all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 1 for x in v):
                raise ValueError(f"{path}: {ck} must be {len(values[key])} factor(s) >= 1 (inf: not identifiable)")
            factors[key] = tuple(float(x) for x in v)
    return ArticulationDriveFile(str(path), robot, values, factors)


def read_articulation_drive(path, spec: RobotSpec) -> DriveGains:
    """``spec``'s drive with the articulation values of a file :func:`write_articulation_drive` wrote.

    Raises:
        OSError: the file cannot be read.
        ValueError: not such a file (:func:`read_articulation_file`), fitted for another robot, or
            not ``spec.dof`` values per joint (the message names the file).
    """
    f = read_articulation_file(path)
    if f.robot != spec.name:
        raise ValueError(f"{path}: an articulation drive fitted for {f.robot!r}, not for {spec.name}")
    if f.dof != spec.dof:
        raise ValueError(f"{path}: {f.dof} joints' values; {spec.name} has {spec.dof}")
    return f.drive(spec)
