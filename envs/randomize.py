"""Per-episode domain randomisation of the simulated twin, configured as data.

A :class:`Randomization` says what varies from one episode to the next and by how much; at every
``reset()`` the env draws one :class:`RandomizationSample` from its own seeded generator (the same
seed gives the same twins), applies it to the world before the episode starts, and reports it in
``info["randomization"]`` of the reset and of every step. Off by default (``randomize=None``): no
draw is made, so the env's random sequence is the one it has without randomisation.

Ranges are ``(low, high)`` pairs drawn uniformly; factors multiply the robot's data:

==================  ===========================================================  ================
field               what varies                                                  unit
==================  ===========================================================  ================
``gains``           drive gains: the hinge spring and damper, the articulation   factor
                    drive's position and velocity gains (capped at 1)
``effort``          drive force limits                                           factor
``friction``        Coulomb joint friction (hinge model)                         factor
``joint_damping``   viscous joint damping (both dynamic models)                  factor
``mass``            every link's mass and inertia, independently per link        factor
``payload``         a payload at the flange                                      kg
``latency``         whole control steps between an action and its effect         steps (ints)
``obs_noise``       Gaussian noise added to the ``observation`` vector (its      std, in the
                    scaled units); the goals — the reward's truth — stay exact   vector's units
``fitted``          the hinge gains or the articulation drive fitted to the rig  a gains or
                    (``armtwin fit RUN.csv --model hinge|articulation --robot    drive file
                    R --save FILE.toml``) replace the robot's as the nominal
                    drive, and each episode draws every fitted value around
                    itself within its confidence interval (below)
``fitted_sigma``    how wide ``fitted`` draws, in confidence-interval units      (default 1)
                    (0: the fitted gains in every episode)
==================  ===========================================================  ================

From a dict (``gym.make(..., randomize={"gains": [0.8, 1.2], "latency": [0, 2]})``, or JSON with
``armtwin train --env-kw``): unknown keys, non-finite or reversed ranges, negative values are a
ValueError naming the field. The kinematic joint model has no dynamics: there only ``latency``
and ``obs_noise`` act.

Sampling around the fitted twin (``fitted``). The file is the one ``fit --model hinge --save``
writes (:mod:`armtwin.envs.hinge_fit`): the robot's name, each joint's fitted ``stiffness``,
``damping`` and ``joint_damping``, and the 95 % confidence interval of the stiffness and of the
damping pair as factors ``f`` (the value lies in ``[value / f, value × f]``: the fit's parameters
are the logarithms of multipliers of the gain rule's values, and the interval is symmetric in
them). Each episode draws, per joint, the stiffness and the damping pair (``damping`` and
``joint_damping`` by one multiplier, their split kept, as the fit has them) independently: the
logarithm of the drawn value is normal around the logarithm of the fitted one with standard
deviation ``fitted_sigma × ln f / 1.96`` (``fitted_sigma = 1``: the fit's own uncertainty, 95 % of
draws inside its interval), clipped to ``fitted_sigma`` intervals (``[value / f^σ, value × f^σ]``)
and to the fit's search range (1/20 to 20 × the rule's value, :data:`~armtwin.envs.hinge_fit.FIT_RANGE`).
When that interval spans the whole range — the log could not tell the gain (``inf``, a joint it
does not move) — the draw is uniform in the logarithm over the range. The draw is reported as
``info["randomization"]["fitted"]`` (the three lists, SI); the factors ``gains`` and
``joint_damping``, when given, still multiply the drawn values (unchecked, as always). Every drawn twin is as stable as the fitted one: a
draw whose stability eigenvalue (the fit's margin, :func:`~armtwin.envs.hinge_fit.project_to_margin`:
the largest eigenvalue of ``M(q)⁻¹ (h² K + 2 h (D + d))`` over the gain rule's poses at its design
step) exceeds the fitted gains' or the rule's 2, whichever is larger, is pulled back towards the
fitted gains until it does not — only the joints drawn stiffer or more damped than fitted, each
first by itself to where it alone would reach that eigenvalue, then those together by one
fraction (:meth:`FittedTwin._inside`) — since the explicit hinge model would ring or chatter past
its stability guard otherwise (a short log leaves a joint's damping open by a factor of
thousands). So the draws centre on the fitted values — the mean of their logarithms is the fitted
value's, their geometric mean the fitted value — when the fit lies inside the margin; when it lies
on it (the fit projects its candidates onto it, and often ends there), the draws that would leave
it are shortened and the stiffer gains' mean lies below the fitted. Fit a log that moves every
joint to narrow the intervals.

An articulation drive file (``fit --model articulation --save``, :mod:`armtwin.envs.articulation_fit`:
the two gains, and per joint the joint damping and the force limit, each with its 95 % factor) is
drawn the same way — each value's logarithm normal around the fitted one, ``fitted_sigma × ln f /
1.96`` wide, clipped to ``fitted_sigma`` intervals and to the fit's search range (gains from 1/100 of
the data file's to PyBullet's limit of 2, and then, as every articulation drive here, to 1; joint
damping and force limits 1/20 to 20 times the data file's) — with one difference: a value the log could not tell
(``inf``) is not drawn at all but keeps the file's value, which the fit left at the data file's. Its
force limits are the ones that are not identifiable whenever the drive never saturated, and a limit
drawn from 1/20 to 20 times the rated one would give twins that cannot hold their own arm up.
There is no stability margin to keep: the articulation drive is implicit (stable for every gain).
The draw is reported as ``info["randomization"]["fitted"]`` (``position_gain``, ``velocity_gain``,
``joint_damping``, ``effort``, SI); the factors ``gains``, ``effort`` and ``joint_damping``, when
given, still multiply them.

Decided: ``fitted`` needs the joint model its file is for — hinge gains the hinge model, an
articulation drive the articulation model; the kinematic model has no drive — so another
``joint_mode`` is a ValueError, as ``armtwin run --hinge-gains`` and ``--articulation-drive``
refuse them. A file fitted for another robot is
a ValueError naming both robots. A missing or unreadable file, one that is not a hinge gains file
(a motor parameter file of ``fit --model motor`` describes the servo rig's DC motor, which the
PyBullet twin does not simulate), or one without the robot's name or the confidence factors
(saved before ``fit`` wrote them: refit) is one ValueError naming the file and why — when the
Randomization is made (the file is read then, a relative path from the working directory; a
pickled Randomization carries the contents, a pickled env reads the file again).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

if TYPE_CHECKING:
    from ..robots.spec import RobotSpec
    from .articulation_fit import ArticulationDriveFile
    from .config import JointMode
    from .hinge_fit import HingeGainsFile

__all__ = ["Randomization", "RandomizationSample", "MAX_LATENCY_STEPS", "MAX_FITTED_SIGMA"]

#: the longest action latency, control steps
MAX_LATENCY_STEPS = 50
#: the widest ``fitted_sigma``, confidence intervals
MAX_FITTED_SIGMA = 5.0
#: the widest factor range (a factor of 0 or 100 is not a twin of the robot)
_FACTOR_BOUNDS = (0.05, 20.0)
Range = tuple[float, float]


def _range(name: str, value: Any, bounds: tuple[float, float], integer: bool = False) -> Range | None:
    if value is None:
        return None
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"randomize.{name} must be a (low, high) pair, got {value!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and bounds[0] <= lo <= hi <= bounds[1]):
        raise ValueError(f"randomize.{name} must be low <= high within [{bounds[0]:g}, {bounds[1]:g}], got {value!r}")
    if integer and (lo != int(lo) or hi != int(hi)):
        raise ValueError(f"randomize.{name} counts whole control steps, got {value!r}")
    return (int(lo), int(hi)) if integer else (lo, hi)


@dataclass(frozen=True)
class Randomization:
    """What varies per episode, and within which ranges (None: that quantity stays the robot's).

    Attributes:
        gains: (low, high) factor on the drive gains.
        effort: (low, high) factor on the drive force limits.
        friction: (low, high) factor on the joint friction.
        joint_damping: (low, high) factor on the joint damping.
        mass: (low, high) factor on each link's mass and inertia (drawn per link).
        payload: (low, high) kg at the flange.
        latency: (low, high) whole control steps of action delay.
        obs_noise: standard deviation of the noise on the ``observation`` vector (scaled units).
        fitted: a hinge gains file or an articulation drive file of ``armtwin fit --model
            hinge|articulation --save``: the nominal drive, drawn within its confidence intervals
            (module docstring); None: the robot's own drive.
        fitted_sigma: the width of those draws in confidence-interval units, 0 to
            :data:`MAX_FITTED_SIGMA` (None: 1; only with ``fitted``).
        fitted_gains: the file's contents, read when the Randomization is made.
    """

    gains: Range | None = None
    effort: Range | None = None
    friction: Range | None = None
    joint_damping: Range | None = None
    mass: Range | None = None
    payload: Range | None = None
    latency: tuple[int, int] | None = None
    obs_noise: float = 0.0
    fitted: str | None = None
    fitted_sigma: float | None = None
    fitted_gains: "HingeGainsFile | ArticulationDriveFile | None" = field(default=None, init=False, repr=False,
                                                                          compare=False)

    def __post_init__(self) -> None:
        for name in ("gains", "effort", "friction", "joint_damping", "mass"):
            object.__setattr__(self, name, _range(name, getattr(self, name), _FACTOR_BOUNDS))
        object.__setattr__(self, "payload", _range("payload", self.payload, (0.0, 1000.0)))
        object.__setattr__(self, "latency", _range("latency", self.latency, (0, MAX_LATENCY_STEPS), integer=True))
        noise = self.obs_noise
        if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not (math.isfinite(noise) and 0 <= noise <= 10):
            raise ValueError(f"randomize.obs_noise must be a standard deviation from 0 to 10, got {noise!r}")
        object.__setattr__(self, "obs_noise", float(noise))
        sigma = self.fitted_sigma
        if self.fitted is None:
            if sigma is not None:
                raise ValueError("randomize.fitted_sigma widens the draws around fitted gains: give randomize.fitted "
                                 "(the file of armtwin fit --model hinge|articulation --save) too")
            return
        if not isinstance(self.fitted, (str, os.PathLike)) or not os.fspath(self.fitted):
            raise ValueError(f"randomize.fitted must be the path of a hinge gains or articulation drive file, "
                             f"got {self.fitted!r}")
        if sigma is None:
            sigma = 1.0
        if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not (
                math.isfinite(sigma) and 0 <= sigma <= MAX_FITTED_SIGMA):
            raise ValueError(f"randomize.fitted_sigma must be from 0 to {MAX_FITTED_SIGMA:g} confidence intervals, "
                             f"got {self.fitted_sigma!r}")
        object.__setattr__(self, "fitted", os.fspath(self.fitted))
        object.__setattr__(self, "fitted_sigma", float(sigma))
        object.__setattr__(self, "fitted_gains", _read_fitted(self.fitted))

    @classmethod
    def of(cls, value: "Randomization | Mapping[str, Any] | None") -> "Randomization | None":
        """``value`` as a Randomization (a dict's keys are the field names), or None for off."""
        if value is None or isinstance(value, Randomization):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"randomize must be a dict of ranges (or None), got {type(value).__name__}")
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(str(k) for k in value if k not in names)
        if unknown:
            raise ValueError(f"randomize: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        return cls(**dict(value))

    @property
    def dynamic(self) -> bool:
        """Anything that changes the simulated robot itself (not only latency and noise)."""
        return any(getattr(self, n) is not None
                   for n in ("gains", "effort", "friction", "joint_damping", "mass", "payload", "fitted"))

    def fitted_twin(self, spec: "RobotSpec", joint_mode: "JointMode") -> "FittedTwin | FittedDrive | None":
        """The ``fitted`` file made ready to draw for ``spec`` (None without ``fitted``); a ValueError
        for a file fitted for another robot or a joint model other than the file's (module docstring)."""
        from .articulation_fit import ArticulationDriveFile
        from .config import JointMode
        f = self.fitted_gains
        if f is None:
            return None
        articulation = isinstance(f, ArticulationDriveFile)
        what = "an articulation drive" if articulation else "hinge gains"
        if f.robot != spec.name or f.dof != spec.dof:
            raise ValueError(f"randomize.fitted: {f.path} holds {what} fitted for {f.robot} ({f.dof} joints); "
                             f"this env's robot is {spec.name} ({spec.dof} joints)")
        mode, want = JointMode.parse(joint_mode), (JointMode.ARTICULATION if articulation else JointMode.HINGE)
        if mode is not want:
            raise ValueError(f"randomize.fitted: {f.path} holds {what}, which act only in the {want.value} joint "
                             f"model; this env's joint model is {mode.value} (use joint_mode='{want.value}')")
        if isinstance(f, ArticulationDriveFile):
            return FittedDrive(f, spec)
        return FittedTwin(f, spec)

    def sample(self, rng: np.random.Generator, links: int,
               fitted: "FittedTwin | FittedDrive | None" = None) -> "RandomizationSample":
        """One episode's twin: every field drawn from ``rng`` in field order (``links`` mass factors); the
        ``fitted`` gains last, by ``fitted`` (:meth:`fitted_twin`), which they need."""
        def u(r: Range | None) -> float:
            return 1.0 if r is None else float(rng.uniform(r[0], r[1]))

        gains, effort, friction, damping = u(self.gains), u(self.effort), u(self.friction), u(self.joint_damping)
        mass = (np.ones(links) if self.mass is None else rng.uniform(self.mass[0], self.mass[1], links))
        payload = 0.0 if self.payload is None else float(rng.uniform(*self.payload))
        latency = 0 if self.latency is None else int(rng.integers(self.latency[0], self.latency[1] + 1))
        drawn = None
        if self.fitted_gains is not None:
            if fitted is None:
                raise ValueError("randomize.fitted: sample() needs the fitted twin (Randomization.fitted_twin(spec, mode))")
            drawn = fitted.draw(rng, float(self.fitted_sigma or 0.0))
        return RandomizationSample(gains, effort, friction, damping, tuple(float(m) for m in mass), payload, latency,
                                   self.obs_noise, drawn)


def _read_fitted(path: str) -> "HingeGainsFile | ArticulationDriveFile":
    """The file of ``randomize.fitted`` — hinge gains or an articulation drive — with the robot's name
    and the confidence factors, or one ValueError naming the file and why."""
    from .articulation_fit import is_articulation_file, read_articulation_file
    from .hinge_fit import read_hinge_file
    articulation = is_articulation_file(path)
    model = "articulation" if articulation else "hinge"
    try:
        f = read_articulation_file(path) if articulation else read_hinge_file(path)
    except OSError as exc:
        raise ValueError(f"randomize.fitted: {path}: cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:
        if _is_motor_file(path):
            raise ValueError(f"randomize.fitted: {path} is a motor parameter file (armtwin fit --model motor): the servo "
                             f"rig's DC motor, which the PyBullet twin does not simulate; give the file of "
                             f"armtwin fit --model hinge|articulation --save") from None
        raise ValueError(f"randomize.fitted: {exc}") from None
    if f.robot is None:
        raise ValueError(f"randomize.fitted: {path} names no robot (saved before armtwin fit wrote it): refit it with "
                         f"armtwin fit RUN.csv --model hinge --robot R --save")
    if f.ci95_factor is None:
        raise ValueError(f"randomize.fitted: {path} has no confidence intervals (its _ci95_factor keys) to draw "
                         f"within: refit it with armtwin fit --model {model} --save")
    return f


def _is_motor_file(path: str) -> bool:
    """Whether ``path`` is a motor parameter file (``controllers.ident.write_params_file``'s keys)."""
    from .drive_fit import toml_has
    return toml_has(path, "rotor_inertia")


class FittedTwin:
    """Draws a robot's hinge gains around the fitted ones of a gains file (module docstring).

    Attributes:
        file: the gains file's contents.
        spec: the robot (its own drive is the gain rule's, the fit's range is about it).
        cap: the largest stability eigenvalue a drawn twin may have: the fitted gains' or the
            rule's target (2), whichever is larger, at the rule's design step.
    """

    #: bisection steps that pull a draw back inside the margin (the segment to 2⁻¹⁰ of its length)
    PULL_BACK_STEPS = 10

    def __init__(self, file: "HingeGainsFile", spec: "RobotSpec") -> None:
        from ..robots.gains import TARGET
        from .hinge_fit import StabilityMargin
        self.file, self.spec = file, spec
        self._margin = StabilityMargin(spec)
        self.cap = max(TARGET, self.eigenvalue(file.gains))

    def draw(self, rng: np.random.Generator, sigma: float) -> dict[str, tuple[float, ...]]:
        """One twin's hinge gains, ``sigma`` confidence intervals wide (per joint: the stiffness and the
        damping pair). Always takes 4 n numbers from ``rng`` (n joints), whatever the widths."""
        from .hinge_fit import FIT_KEYS, FIT_RANGE
        f, rule, n = self.file, self.spec.drive, self.file.dof
        normal, uniform = rng.standard_normal((2, n)), rng.random((2, n))
        g = {k: np.asarray(f.gains[k], dtype=float) for k in ("stiffness", "damping", "joint_damping")}
        nominal = {"stiffness": (g["stiffness"], np.asarray(rule.stiffness, dtype=float)),
                   "damping": (g["damping"] + g["joint_damping"],
                               np.asarray(rule.damping, dtype=float) + np.asarray(rule.joint_damping, dtype=float))}
        assert f.ci95_factor is not None
        wide = math.log(FIT_RANGE)
        y = {}
        for i, key in enumerate(FIT_KEYS):
            value, base = nominal[key]
            ok = (value > 0) & (base > 0)
            m = np.log(np.where(ok, value, 1.0) / np.where(ok, base, 1.0))    # the fitted multiplier's logarithm
            lo, hi = np.minimum(0.0, -wide - m), np.maximum(0.0, wide - m)    # the fit's range, about the fitted value
            with np.errstate(invalid="ignore", over="ignore"):                 # inf factors: the uniform branch
                c = sigma * np.log(np.asarray(f.ci95_factor[key], dtype=float)) if sigma > 0 else np.zeros(n)
                spans = c >= np.maximum(-lo, hi)                              # the interval covers the whole range
                drawn = np.clip(normal[i] * c / 1.96, np.maximum(lo, -c), np.minimum(hi, c))
            y[key] = np.where(c > 0, np.where(spans, lo + uniform[i] * (hi - lo), drawn), 0.0)
        k, d = np.exp(y["stiffness"]), np.exp(y["damping"])
        out = {"stiffness": g["stiffness"] * k, "damping": g["damping"] * d, "joint_damping": g["joint_damping"] * d}
        return {key: tuple(float(v) for v in vals) for key, vals in self._inside(g, out).items()}

    def eigenvalue(self, gains: Mapping[str, Any]) -> float:
        """The stability eigenvalue of hinge ``gains`` (the fit's margin: the largest eigenvalue of
        ``M(q)⁻¹ (h² K + 2 h (D + d))`` over the gain rule's poses at its design step)."""
        return self._eigenvalue(self._a(gains))

    def _a(self, g: Mapping[str, Any]) -> np.ndarray:
        h = self._margin.h
        return (h * h * np.asarray(g["stiffness"], dtype=float)
                + 2 * h * (np.asarray(g["damping"], dtype=float) + np.asarray(g["joint_damping"], dtype=float)))

    def _eigenvalue(self, a: np.ndarray) -> float:
        r = np.sqrt(np.maximum(a, 0.0))      # M⁻¹ diag(a) has the eigenvalues of diag(√a) M⁻¹ diag(√a), symmetric
        return float(np.linalg.eigvalsh(self._margin.minv * r[None, :, None] * r[None, None, :]).max())

    def _inside(self, fitted: dict[str, np.ndarray], drawn: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``drawn`` pulled back towards ``fitted`` until its stability eigenvalue is within :attr:`cap`.

        The eigenvalue grows with each joint's ``a = h² K + 2 h (D + d)`` (and is convex in them), so
        only joints drawn above their fitted ``a`` are pulled back, each along its own line towards its
        fitted gains: first each alone, to the ``a`` at which that joint by itself would reach the cap
        (the diagonal of ``M⁻¹``: so one joint's wide draw does not pull the others back); then, if the
        joints' coupling still exceeds it, all of those together by one fraction (bisection).
        """
        a_fit, a_draw = self._a(fitted), self._a(drawn)
        up = a_draw > a_fit
        if not up.any() or self._eigenvalue(a_draw) <= self.cap:   # nothing above the fitted: within its eigenvalue
            return drawn
        alone = np.maximum(self.cap / np.diagonal(self._margin.minv, axis1=1, axis2=2).max(axis=0), a_fit)
        t = np.ones_like(a_fit)
        over = up & (a_draw > alone)
        t[over] = (alone[over] - a_fit[over]) / (a_draw[over] - a_fit[over])

        def a_at(t: np.ndarray) -> np.ndarray:   # a is linear along each joint's line
            return a_fit + t * (a_draw - a_fit)

        if self._eigenvalue(a_at(t)) > self.cap:
            lo, hi = 0.0, 1.0
            for _ in range(self.PULL_BACK_STEPS):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if self._eigenvalue(a_at(np.where(up, mid * t, t))) <= self.cap else (lo, mid)
            t = np.where(up, lo * t, t)
        return {k: np.where(t < 1, fitted[k] + t * (drawn[k] - fitted[k]), drawn[k]) for k in drawn}


class FittedDrive:
    """Draws a robot's articulation drive around the fitted one of a drive file (module docstring).

    Attributes:
        file: the drive file's contents.
        low, high: per key of the file's values, the fit's search range (about the robot's data file's
            drive: gains from 1/100 of it to 2, joint damping and force limits 1/20 to 20 times it),
            which no draw leaves.
    """

    def __init__(self, file: "ArticulationDriveFile", spec: "RobotSpec") -> None:
        from .articulation_fit import GAIN_LIMIT, GAIN_RANGE, JOINT_RANGE
        self.file = file
        d = spec.drive
        base = {"position_gain": np.array([d.position_gain]), "velocity_gain": np.array([d.velocity_gain]),
                "joint_damping": np.asarray(d.joint_damping, dtype=float), "effort": np.asarray(spec.max_effort, dtype=float)}
        self.low = {k: v / (GAIN_RANGE if k.endswith("gain") else JOINT_RANGE) for k, v in base.items()}
        self.high = {k: (np.full_like(v, GAIN_LIMIT) if k.endswith("gain") else v * JOINT_RANGE) for k, v in base.items()}

    def draw(self, rng: np.random.Generator, sigma: float) -> dict[str, Any]:
        """One twin's articulation drive, ``sigma`` confidence intervals wide: ``position_gain``,
        ``velocity_gain`` (numbers), ``joint_damping``, ``effort`` (one per joint). Always takes
        2 + 2n numbers from ``rng`` (n joints), whatever the widths."""
        from .articulation_fit import DRIVE_KEYS
        f = self.file
        assert f.ci95_factor is not None
        out: dict[str, Any] = {}
        for key in DRIVE_KEYS:
            value = np.asarray(f.values[key], dtype=float)
            normal = rng.standard_normal(len(value))
            with np.errstate(invalid="ignore", over="ignore"):
                c = sigma * np.log(np.asarray(f.ci95_factor[key], dtype=float)) if sigma > 0 else np.zeros(len(value))
                y = np.where(np.isfinite(c), np.clip(normal * c / 1.96, -c, c), 0.0)     # not identifiable: kept
            drawn = value * np.exp(np.minimum(y, 700.0))
            inside = np.clip(drawn, np.minimum(self.low[key], value), np.maximum(self.high[key], value))
            out[key] = float(inside[0]) if key.endswith("gain") else tuple(float(v) for v in inside)
        return out


@dataclass(frozen=True)
class RandomizationSample:
    """One episode's draw (what ``info["randomization"]`` reports, as a dict).

    Attributes:
        gains, effort, friction, joint_damping: factors on the robot's drive data.
        mass: factor per link (the URDF's links in order).
        payload: kg at the flange.
        latency: control steps of action delay.
        obs_noise: std of the observation noise.
        fitted: with ``Randomization.fitted``, the drawn hinge gains (``stiffness``, ``damping``,
            ``joint_damping``: one value per joint, SI) or articulation drive (``position_gain``,
            ``velocity_gain``, ``joint_damping``, ``effort``) the episode's drive starts from; else None.
    """

    gains: float
    effort: float
    friction: float
    joint_damping: float
    mass: tuple[float, ...]
    payload: float
    latency: int
    obs_noise: float
    fitted: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
