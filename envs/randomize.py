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
==================  ===========================================================  ================

From a dict (``gym.make(..., randomize={"gains": [0.8, 1.2], "latency": [0, 2]})``, or JSON with
``armtwin train --env-kw``): unknown keys, non-finite or reversed ranges, negative values are a
ValueError naming the field. The kinematic joint model has no dynamics: there only ``latency``
and ``obs_noise`` act.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

__all__ = ["Randomization", "RandomizationSample", "MAX_LATENCY_STEPS"]

#: the longest action latency, control steps
MAX_LATENCY_STEPS = 50
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
    """

    gains: Range | None = None
    effort: Range | None = None
    friction: Range | None = None
    joint_damping: Range | None = None
    mass: Range | None = None
    payload: Range | None = None
    latency: tuple[int, int] | None = None
    obs_noise: float = 0.0

    def __post_init__(self) -> None:
        for name in ("gains", "effort", "friction", "joint_damping", "mass"):
            object.__setattr__(self, name, _range(name, getattr(self, name), _FACTOR_BOUNDS))
        object.__setattr__(self, "payload", _range("payload", self.payload, (0.0, 1000.0)))
        object.__setattr__(self, "latency", _range("latency", self.latency, (0, MAX_LATENCY_STEPS), integer=True))
        noise = self.obs_noise
        if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not (math.isfinite(noise) and 0 <= noise <= 10):
            raise ValueError(f"randomize.obs_noise must be a standard deviation from 0 to 10, got {noise!r}")
        object.__setattr__(self, "obs_noise", float(noise))

    @classmethod
    def of(cls, value: "Randomization | Mapping[str, Any] | None") -> "Randomization | None":
        """``value`` as a Randomization (a dict's keys are the field names), or None for off."""
        if value is None or isinstance(value, Randomization):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"randomize must be a dict of ranges (or None), got {type(value).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(str(k) for k in value if k not in names)
        if unknown:
            raise ValueError(f"randomize: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        return cls(**dict(value))

    @property
    def dynamic(self) -> bool:
        """Anything that changes the simulated robot itself (not only latency and noise)."""
        return any(getattr(self, n) is not None for n in ("gains", "effort", "friction", "joint_damping", "mass", "payload"))

    def sample(self, rng: np.random.Generator, links: int) -> "RandomizationSample":
        """One episode's twin: every field drawn from ``rng`` in field order (``links`` mass factors)."""
        def u(r: Range | None) -> float:
            return 1.0 if r is None else float(rng.uniform(r[0], r[1]))

        gains, effort, friction, damping = u(self.gains), u(self.effort), u(self.friction), u(self.joint_damping)
        mass = (np.ones(links) if self.mass is None else rng.uniform(self.mass[0], self.mass[1], links))
        payload = 0.0 if self.payload is None else float(rng.uniform(*self.payload))
        latency = 0 if self.latency is None else int(rng.integers(self.latency[0], self.latency[1] + 1))
        return RandomizationSample(gains, effort, friction, damping, tuple(float(m) for m in mass), payload, latency,
                                   self.obs_noise)


@dataclass(frozen=True)
class RandomizationSample:
    """One episode's draw (what ``info["randomization"]`` reports, as a dict).

    Attributes:
        gains, effort, friction, joint_damping: factors on the robot's drive data.
        mass: factor per link (the URDF's links in order).
        payload: kg at the flange.
        latency: control steps of action delay.
        obs_noise: std of the observation noise.
    """

    gains: float
    effort: float
    friction: float
    joint_damping: float
    mass: tuple[float, ...]
    payload: float
    latency: int
    obs_noise: float

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
