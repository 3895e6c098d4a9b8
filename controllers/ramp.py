"""Joint ramps for hardware: from a measured position to a target within speed and acceleration limits.

Anything that drives the servo rig starts from the rig's *measured* joints and ramps, never with
a step. Two tools, pure numpy (no PyBullet), one call per control cycle where it matters:

* :func:`plan_ramp` — a planned move from ``q0`` to ``q1`` at rest at both ends, all joints
  starting and arriving together: ``q(t) = q0 + (q1 − q0)·(1 − cos(π t / T)) / 2``. Its peak
  speed is ``π |Δq| / (2T)`` and its peak acceleration ``π² |Δq| / (2T²)``; ``T`` is the
  shortest duration that keeps every joint within its limits. ``armtwin sync`` runs one from
  the rig's measured joints to the program's first target before the program starts.
* :class:`SlewLimiter` — a second-order limiter for a reference that may jump (a slider, a jog,
  a policy): its output follows the reference as closely as ``vmax`` and ``amax`` allow, and
  exactly (sample for sample) whenever the reference itself keeps within them. It starts at the
  measured position (:meth:`SlewLimiter.reset`).

Units: rad, rad/s, rad/s², s; arrays of shape (n,), one value per joint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Ramp", "plan_ramp", "SlewLimiter"]


def _limits(vmax, amax, n: int) -> tuple[np.ndarray, np.ndarray]:
    v = np.broadcast_to(np.asarray(vmax, dtype=float), (n,)).copy()
    a = np.broadcast_to(np.asarray(amax, dtype=float), (n,)).copy()
    if not (np.all(np.isfinite(v)) and np.all(v > 0) and np.all(np.isfinite(a)) and np.all(a > 0)):
        raise ValueError(f"speed and acceleration limits must be finite and > 0, got {v} and {a}")
    return v, a


@dataclass(frozen=True)
class Ramp:
    """A planned move at rest at both ends (see :func:`plan_ramp`).

    Attributes:
        q0: (n,) start, rad.
        q1: (n,) end, rad.
        duration: T, s (0 when ``q0`` equals ``q1``).
    """

    q0: np.ndarray
    q1: np.ndarray
    duration: float

    def _s(self, t: float) -> tuple[float, float]:
        if self.duration <= 0 or t >= self.duration:
            return 1.0, 0.0
        if t <= 0:
            return 0.0, 0.0
        w = math.pi / self.duration
        return 0.5 - 0.5 * math.cos(w * t), 0.5 * w * math.sin(w * t)

    def q_at(self, t: float) -> np.ndarray:
        """(n,) joint positions at ``t`` s after the start, rad (``q0`` before, ``q1`` after)."""
        s, _ = self._s(t)
        return self.q0 + (self.q1 - self.q0) * s

    def qd_at(self, t: float) -> np.ndarray:
        """(n,) joint speeds at ``t``, rad/s."""
        _, ds = self._s(t)
        return (self.q1 - self.q0) * ds

    def peak_speed(self) -> np.ndarray:
        """(n,) the largest |speed| of each joint, rad/s."""
        return np.abs(self.q1 - self.q0) * (math.pi / (2 * self.duration)) if self.duration > 0 else np.zeros_like(self.q0)

    def peak_acceleration(self) -> np.ndarray:
        """(n,) the largest |acceleration| of each joint, rad/s²."""
        return (np.abs(self.q1 - self.q0) * (math.pi ** 2 / (2 * self.duration ** 2)) if self.duration > 0
                else np.zeros_like(self.q0))


def plan_ramp(q0, q1, vmax, amax) -> Ramp:
    """The shortest cosine move from ``q0`` to ``q1`` keeping every joint within its limits.

    Args:
        q0: (n,) start (the measured joints), rad.
        q1: (n,) end (the first target), rad.
        vmax: (n,) or scalar speed limits, rad/s (> 0).
        amax: (n,) or scalar acceleration limits, rad/s² (> 0).

    Raises:
        ValueError: non-finite positions, shapes that differ, or limits that are not > 0.
    """
    q0 = np.asarray(q0, dtype=float).reshape(-1)
    q1 = np.asarray(q1, dtype=float).reshape(-1)
    if q0.shape != q1.shape or not (np.all(np.isfinite(q0)) and np.all(np.isfinite(q1))):
        raise ValueError(f"plan_ramp needs two finite joint vectors of one size, got {q0} and {q1}")
    v, a = _limits(vmax, amax, q0.size)
    d = np.abs(q1 - q0)
    t = np.maximum(math.pi * d / (2 * v), math.pi * np.sqrt(d / (2 * a)))
    return Ramp(q0.copy(), q1.copy(), float(np.max(t)) if t.size else 0.0)


class SlewLimiter:
    """Second-order limiter: ``update(reference, dt)`` → the limited target, one call per sample.

    While the reference moves within the limits, the output is the reference itself (checked
    every sample: the step it asks for needs at most ``vmax`` and ``amax``). When it jumps, the
    output brakes and accelerates toward it at ``amax``, at most at ``vmax``, and locks onto it
    again once there.

    Args:
        vmax: (n,) or scalar speed limits, rad/s.
        amax: (n,) or scalar acceleration limits, rad/s².
        n: number of joints.
    """

    def __init__(self, vmax, amax, n: int) -> None:
        self.vmax, self.amax = _limits(vmax, amax, n)
        self.n = int(n)
        self.x: np.ndarray | None = None  # output, rad (None until reset)
        self.v = np.zeros(self.n)  # output speed, rad/s
        self._h_prev = 0.0
        self._r_prev: np.ndarray | None = None  # the previous reference (its speed is followed)

    @property
    def started(self) -> bool:
        """True once :meth:`reset` gave it a start."""
        return self.x is not None

    def reset(self, q) -> None:
        """Start at rest at ``q`` (n,), rad — the measured joints."""
        q = np.asarray(q, dtype=float).reshape(-1)
        if q.shape != (self.n,) or not np.all(np.isfinite(q)):
            raise ValueError(f"SlewLimiter.reset needs {self.n} finite values, got {q}")
        self.x = q.copy()
        self.v = np.zeros(self.n)
        self._h_prev = 0.0
        self._r_prev = None

    def update(self, reference, dt: float) -> np.ndarray:
        """The next output (n,), rad, ``dt`` s after the previous one (the first call after
        :meth:`reset` counts from the reset).

        Raises:
            ValueError: before :meth:`reset`, or a non-finite reference.
        """
        if self.x is None:
            raise ValueError("SlewLimiter.update before reset(measured joints)")
        r = np.asarray(reference, dtype=float).reshape(-1)
        if r.shape != (self.n,) or not np.all(np.isfinite(r)):
            raise ValueError(f"SlewLimiter.update needs {self.n} finite values, got {r}")
        h = float(dt)
        if not h > 0:
            return self.x.copy()
        vmax, amax = self.vmax, self.amax
        # the acceleration a step asks for, over the mean of this and the previous interval
        # (samples are not evenly spaced: a catch-up sample right after a late one is not a jerk)
        h_acc = 0.5 * (h + self._h_prev) if self._h_prev > 0 else h
        self._h_prev = h
        v_need = (r - self.x) / h
        ok = (np.abs(v_need) <= vmax * (1 + 1e-9)) & (np.abs(v_need - self.v) <= amax * h_acc * (1 + 1e-9))
        # elsewhere: close in on the reference at the fastest speed from which a braking at amax
        # still comes to rest relative to it exactly where it is (on the sample grid of the
        # trapezoidal update below); relative to a reference moving at its own speed
        r_v = np.zeros(self.n) if self._r_prev is None else np.clip((r - self._r_prev) / h, -vmax, vmax)
        self._r_prev = r
        e = r - self.x
        sgn = np.where(e >= 0, 1.0, -1.0)
        closing = sgn * (self.v - r_v)
        disc = (amax * h) ** 2 + 8 * amax * np.abs(e) - 4 * amax * h * closing
        u_goal = np.where(disc > 0, 0.5 * (np.sqrt(np.maximum(disc, 0.0)) - amax * h), -np.inf)
        v_goal = np.clip(r_v + sgn * u_goal, -vmax, vmax)
        v_new = self.v + np.clip(v_goal - self.v, -amax * h, amax * h)
        x_new = self.x + 0.5 * (self.v + v_new) * h
        self.v = np.where(ok, v_need, v_new)
        self.x = np.where(ok, r, x_new)
        return self.x.copy()
