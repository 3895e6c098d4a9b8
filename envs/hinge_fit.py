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

Each joint's fitted stiffness and damping come with a 95 % confidence interval, computed as the
motor fit's (:mod:`armtwin.controllers.ident`) but in the fit's own parameters, the logarithms of
the multipliers: from the Jacobian of the fitted part's tracking residuals at the fitted gains
(forward differences, ``2n`` more simulations, without the margin's projection: how well the log
pins each gain), the residuals' variance, widened by their autocorrelation length (the model's
errors are slow, not independent samples). An interval symmetric in the logarithm is a *factor*
``f``: the gain lies in ``[value / f, value × f]``; ``inf`` where the log cannot tell a gain at all
(a joint it does not move) — the shared machinery of :mod:`armtwin.envs.drive_fit`. The damping
factor is that of ``D`` and ``d`` together (one fitted multiplier per joint, their split kept).

The gains file (:func:`write_hinge_gains`, ``fit --save``; read by ``armtwin run --hinge-gains`` and
by randomised twins, ``randomize={"fitted": FILE}``) is TOML: ``robot = "NAME"``, then
``stiffness``, ``damping``, ``joint_damping`` (one value per joint, N·m/rad and N·m·s/rad; N/m and
N·s/m for prismatic joints) and ``stiffness_ci95_factor``, ``damping_ci95_factor`` (one factor
>= 1 per joint, ``inf``: not identifiable). ``robot`` and the factors are optional when reading
(files saved before they were written have neither); a file of another robot is refused.

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
from .drive_fit import (ModelSim, RunTrace, Target, compared_errors, fit_frame, load_toml, log_confidence,
                        read_run_log)

__all__ = ["RunTrace", "HingeFitReport", "read_run_log", "fit_hinge", "Target", "project_to_margin",
           "write_hinge_gains", "read_hinge_gains", "HingeGainsFile", "read_hinge_file", "FIT_RANGE", "FIT_KEYS",
           "StabilityMargin"]

#: the keys of a hinge gains file, one value per joint each
GAIN_KEYS = ("stiffness", "damping", "joint_damping")
#: the fitted parameters per joint: the stiffness, and the damping pair (``damping`` and ``joint_damping``)
FIT_KEYS = ("stiffness", "damping")
#: the keys of their 95 % confidence factors in a gains file
CI_KEYS = tuple(f"{k}_ci95_factor" for k in FIT_KEYS)
#: the fit searches each joint's stiffness and damping from 1/FIT_RANGE to FIT_RANGE times the rule's
FIT_RANGE = 20.0


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
        ci95_factor: per key of :data:`FIT_KEYS`, (n,) factors ``f`` of the fitted gains' 95 %
            confidence intervals ``[value / f, value × f]`` (``inf``: the log cannot tell that gain).
        predicted: the whole log's joints (K, n) run with the rule's and with the fitted gains, rad / m
            (None: unstable).
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
    ci95_factor: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    predicted: tuple[np.ndarray | None, np.ndarray | None] = field(default=(None, None), repr=False, compare=False)


class StabilityMargin:
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


def project_to_margin(drive: DriveGains, margin: StabilityMargin) -> DriveGains:
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


def _gains(rule: DriveGains, z: np.ndarray, margin: StabilityMargin) -> DriveGains:
    n = len(rule.stiffness)
    k, c = np.exp(z[:n]), np.exp(z[n:])
    d = replace(rule, stiffness=tuple(float(v) for v in np.asarray(rule.stiffness) * k),
                damping=tuple(float(v) for v in np.asarray(rule.damping) * c),
                joint_damping=tuple(float(v) for v in np.asarray(rule.joint_damping) * c))
    return project_to_margin(d, margin)


def fit_hinge(spec: RobotSpec, trace: RunTrace, *, target: Target | str = Target.MEASURED, fit_fraction: float = 0.7,
              max_fit_seconds: float = 6.0, physics_step: float = 1e-3, max_evaluations: int = 120,
              tool=None) -> HingeFitReport:
    """Fit the hinge model's stiffness and damping per joint to ``trace`` (see the module docstring).

    Args:
        spec: the robot of the run (its data file's gains are the rule's and the start).
        trace: the run (:func:`read_run_log`).
        target: follow the run's joints (:attr:`Target.MEASURED`) or its commands (``COMMANDED``).
        fit_fraction: the part of the log that is fitted (the rest is checked).
        max_fit_seconds: fit at most this much of the log's start, s (each candidate is simulated).
        physics_step: longest physics step, s (as ``armtwin run``'s; the control period is the log's).
        max_evaluations: simulations the optimiser may run.
        tool: the tool the run's flange carried (:class:`~armtwin.controllers.tools.Tool`; its
            mass acts), or None for the bare flange.

    Raises:
        ValueError: a bad target or fraction, or a log too short to fit and check.
    """
    from scipy.optimize import least_squares
    from .sim import JointMode

    t0 = time.perf_counter()
    K = len(trace.t)
    target, split, goal, unit = fit_frame(spec, trace, target, fit_fraction, max_fit_seconds)
    margin = StabilityMargin(spec)
    rule = spec.drive
    n = spec.dof
    sim = ModelSim(spec, trace, physics_step, JointMode.HINGE, tool)
    try:
        def residuals(z: np.ndarray) -> np.ndarray:
            q = sim.run(_gains(rule, z, margin), split)
            if q is None:
                return np.full(split * n, 1e3)
            return ((q - goal[:split]) * unit).ravel()

        # the joints the log measured (all of a run log; a twin log's rig joints): the others keep the rule's
        free = np.flatnonzero(np.tile(unit != 0, 2))
        z0 = np.zeros(2 * n)

        def part(x: np.ndarray) -> np.ndarray:
            z = z0.copy()
            z[free] = x
            return residuals(z)

        r0 = residuals(z0)
        wide = math.log(FIT_RANGE)
        sol = least_squares(part, z0[free], bounds=(np.full(len(free), -wide), np.full(len(free), wide)),
                            diff_step=0.05, max_nfev=max(1, max_evaluations // (len(free) + 1)), xtol=1e-3, ftol=1e-4)
        improved = bool(sol.cost < 0.5 * float(r0 @ r0) * (1 - 1e-6))
        z_fit = z0.copy()
        z_fit[free] = sol.x
        fitted = _gains(rule, z_fit, margin) if improved else rule
        full_rule, full_fit = sim.run(rule, K), sim.run(fitted, K)
        factors = _confidence(sim, fitted, goal[:split], unit)
        sims = sim.count
    finally:
        sim.close()

    errors = compared_errors(full_rule, full_fit, goal, unit, split)
    return HingeFitReport(rule, fitted, target, float(trace.t[split]), *errors, margin.eigenvalue(rule),
                          margin.eigenvalue(fitted), time.perf_counter() - t0, sims, improved, factors,
                          (full_rule, full_fit))


def _scaled(drive: DriveGains, f: np.ndarray) -> DriveGains:
    """``drive`` with each joint's stiffness times ``f[:n]`` and its damping pair times ``f[n:]``."""
    n = len(drive.stiffness)
    return replace(drive, stiffness=tuple(float(v) for v in np.asarray(drive.stiffness) * f[:n]),
                   damping=tuple(float(v) for v in np.asarray(drive.damping) * f[n:]),
                   joint_damping=tuple(float(v) for v in np.asarray(drive.joint_damping) * f[n:]))


def _confidence(sim: ModelSim, drive: DriveGains, goal: np.ndarray, unit: np.ndarray) -> dict[str, tuple[float, ...]]:
    """The 95 % confidence factors of ``drive``'s stiffness and damping fitted to ``goal``, per key of
    :data:`FIT_KEYS` (:func:`~armtwin.envs.drive_fit.log_confidence`)."""
    n, until = len(drive.stiffness), len(goal)
    factor = log_confidence(lambda z: sim.run(_scaled(drive, np.exp(z)), until), 2 * n, goal, unit)
    return {"stiffness": tuple(float(f) for f in factor[:n]), "damping": tuple(float(f) for f in factor[n:])}


def write_hinge_gains(path, drive: DriveGains, *, comment: str = "", robot: str | None = None,
                      ci95_factor: Mapping[str, tuple[float, ...]] | None = None) -> None:
    """Write the hinge gains as TOML (module docstring): ``robot`` (when given), the gains as lists
    of one value per joint (N·m/rad, N·m·s/rad; N/m, N·s/m for prismatic joints) and, when given,
    their 95 % confidence factors ``ci95_factor`` (per key of :data:`FIT_KEYS`, >= 1, ``inf``
    allowed): the file ``armtwin run --hinge-gains`` and ``randomize={"fitted": FILE}`` read."""
    lines = [f"# {c}" for c in comment.splitlines()]
    if robot is not None:
        lines.append(f"robot = {json.dumps(str(robot))}")
    for name in GAIN_KEYS:
        lines.append(f"{name} = [{', '.join(repr(float(v)) for v in getattr(drive, name))}]")
    if ci95_factor:
        lines.append("# 95 % confidence intervals [value / factor, value * factor] of the stiffness and of the damping "
                     "pair (damping and joint_damping: one fitted multiplier); inf: the log cannot tell the gain")
        for name, key in zip(FIT_KEYS, CI_KEYS):
            lines.append(f"{key} = [{', '.join(repr(float(v)) for v in ci95_factor[name])}]")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


@dataclass(frozen=True)
class HingeGainsFile:
    """What a hinge gains file holds (:func:`read_hinge_file`).

    Attributes:
        path: the file, as given.
        robot: the robot it was fitted for, or None (a file saved before the name was written).
        gains: per key of :data:`GAIN_KEYS`, one value per joint.
        ci95_factor: per key of :data:`FIT_KEYS`, the 95 % confidence factors (``inf``: not
            identifiable), or None (a file without them).
    """

    path: str
    robot: str | None
    gains: Mapping[str, tuple[float, ...]]
    ci95_factor: Mapping[str, tuple[float, ...]] | None

    @property
    def dof(self) -> int:
        return len(self.gains["stiffness"])


def read_hinge_file(path) -> HingeGainsFile:
    """Read a file :func:`write_hinge_gains` wrote, without a robot to check it against.

    Raises:
        OSError: the file cannot be read.
        ValueError: not such a file: not TOML, a key missing or unknown, a list of values that are
            not finite and >= 0 (stiffness > 0), lists of different lengths, confidence factors
            not both there or not >= 1 (``inf`` allowed). The message names the file.
    """
    data = load_toml(path, "a hinge gains file")
    missing = [k for k in GAIN_KEYS if k not in data]
    unknown = sorted(set(data) - set(GAIN_KEYS) - set(CI_KEYS) - {"robot"})
    if missing or unknown:
        raise ValueError(f"{path}: a hinge gains file has {', '.join(GAIN_KEYS)} (and optionally robot and "
                         f"{', '.join(CI_KEYS)}); it has {', '.join(sorted(data)) or 'nothing'}")
    robot = data.get("robot")
    if robot is not None and (not isinstance(robot, str) or not robot):
        raise ValueError(f"{path}: robot must be a robot's name, got {robot!r}")
    n = len(data["stiffness"]) if isinstance(data["stiffness"], list) else 0

    def values(key: str, factor: bool) -> tuple[float, ...]:
        v = data[key]
        ok = (isinstance(v, list) and len(v) == n > 0
              and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= (1 if factor else 0)
                      and (math.isfinite(x) or (factor and x == math.inf)) for x in v))
        if not ok or (key == "stiffness" and min(v) <= 0):
            what = "factors >= 1 (inf: not identifiable)" if factor else "finite values >= 0 (stiffness > 0)"
            raise ValueError(f"{path}: {key} must be {n or 'a list of'} {what}, one per joint")
        return tuple(float(x) for x in v)

    gains = {k: values(k, False) for k in GAIN_KEYS}
    given = [k for k in CI_KEYS if k in data]
    if given and len(given) != len(CI_KEYS):
        raise ValueError(f"{path}: the confidence factors are {' and '.join(CI_KEYS)} together; it has only "
                         f"{', '.join(given)}")
    factors = {k: values(c, True) for k, c in zip(FIT_KEYS, CI_KEYS)} if given else None
    return HingeGainsFile(str(path), robot, gains, factors)


def read_hinge_gains(path, spec: RobotSpec) -> DriveGains:
    """``spec``'s drive with the hinge gains of a file :func:`write_hinge_gains` wrote.

    Raises:
        OSError: the file cannot be read.
        ValueError: not such a file (:func:`read_hinge_file`), fitted for another robot, or not
            ``spec.dof`` values per key (the message names the file).
    """
    f = read_hinge_file(path)
    if f.robot is not None and f.robot != spec.name:
        raise ValueError(f"{path}: hinge gains fitted for {f.robot}, not for {spec.name}")
    if f.dof != spec.dof:
        raise ValueError(f"{path}: stiffness must be {spec.dof} finite values >= 0 (stiffness > 0) for {spec.name}; "
                         f"the file has {f.dof}")
    return replace(spec.drive, stiffness=f.gains["stiffness"], damping=f.gains["damping"],
                   joint_damping=f.gains["joint_damping"])
