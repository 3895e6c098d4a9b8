"""Discrete PID controllers with a control-cycle API (one :meth:`PID.update` per cycle).

Two forms (docs/RIG.md, "The position loop"):

* :attr:`PIDForm.STANDARD` (default) — a proper discrete PID: accumulating integral
  ``I += Ki·e·dt`` with anti-windup (conditional integration: the integral does not grow
  while the output is saturated in the direction of the error, and it is clamped to
  ``integral_limit``), derivative of the error (optionally of the measurement, which
  avoids a kick when the setpoint jumps) through a first-order low-pass of time constant ``derivative_tau``, output clamped
  to ``±output_limit``.
* :attr:`PIDForm.PUBLISHED` — the formula of the published rig, kept for comparison::

      U = Kp·e + Ki·(e_prev + e·(t − t_prev)) + Kd·(e − e_prev)/(t − t_prev)

  Its "integral" term does not accumulate. The output is clamped to ``±output_limit``
  as the published loop clamped the PWM to ±255.

Units are the caller's: with the rig's gains the error is in encoder pulses, time in
seconds and the output in volts.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

__all__ = ["PIDForm", "PIDGains", "PIDStep", "PID", "RIG_GAINS"]


class PIDForm(enum.Enum):
    """Which discrete formula :class:`PID` evaluates."""

    STANDARD = "standard"
    PUBLISHED = "published"


@dataclass(frozen=True)
class PIDGains:
    """Configuration of a :class:`PID`.

    Attributes:
        kp: proportional gain, output units per error unit.
        ki: integral gain, output units per (error unit · s).
        kd: derivative gain, output units per (error unit / s).
        output_limit: the output is clamped to ±output_limit (> 0; ``inf`` for none).
        integral_limit: the integral term (Ki·∫e dt, output units) is clamped to ±this
            (STANDARD form only; default: ``output_limit``).
        derivative_tau: time constant of the derivative low-pass, s (STANDARD form; 0 = none).
        derivative_on_measurement: STANDARD form: differentiate −measurement instead of the
            error (no kick on setpoint steps, but it brakes the tracking of moving setpoints;
            the default, on the error, suits the rig's densely streamed smooth targets).
        form: STANDARD (default) or PUBLISHED.
    """

    kp: float
    ki: float = 0.0
    kd: float = 0.0
    output_limit: float = math.inf
    integral_limit: float | None = None
    derivative_tau: float = 0.0
    derivative_on_measurement: bool = False
    form: PIDForm = PIDForm.STANDARD

    def __post_init__(self) -> None:
        for name in ("kp", "ki", "kd", "derivative_tau"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"PIDGains.{name} must be a finite number >= 0, got {v!r}")
        if not (self.output_limit > 0):
            raise ValueError(f"PIDGains.output_limit must be > 0, got {self.output_limit!r}")
        if self.integral_limit is not None and not (self.integral_limit >= 0):
            raise ValueError(f"PIDGains.integral_limit must be >= 0, got {self.integral_limit!r}")
        if not isinstance(self.form, PIDForm):
            raise ValueError(f"PIDGains.form must be a PIDForm, got {self.form!r}")


#: Gains found by hand on the published rig (error in pulses, output in volts, 12 V supply).
RIG_GAINS = PIDGains(kp=0.01, ki=0.002, kd=0.001, output_limit=12.0, derivative_tau=0.004)


@dataclass(frozen=True)
class PIDStep:
    """The result of one control cycle.

    Attributes:
        u: output after clamping (output units).
        p, i, d: the three terms before clamping (output units).
        error: setpoint − measurement (error units).
        dt: time since the previous cycle, s (0 on the first cycle).
        saturated: the unclamped output exceeded ±output_limit.
    """

    u: float
    p: float
    i: float
    d: float
    error: float
    dt: float
    saturated: bool


class PID:
    """A discrete PID controller; call :meth:`update` once per control cycle.

    Args:
        gains: the configuration.

    Example:
        >>> pid = PID(RIG_GAINS)
        >>> step = pid.update(setpoint=375.0, measurement=0.0, t=0.0)
        >>> round(step.u, 3)   # Kp·e on the first cycle: 0.01 V/pulse × 375 pulses
        3.75
    """

    def __init__(self, gains: PIDGains) -> None:
        if not isinstance(gains, PIDGains):
            raise TypeError(f"gains must be PIDGains, got {type(gains).__name__}")
        self.gains = gains
        self.reset()

    def reset(self) -> None:
        """Forget the history (integral, previous error/measurement/time)."""
        self.integral = 0.0  # output units (Ki·∫e dt)
        self._d = 0.0  # filtered derivative term, output units
        self._e_prev: float | None = None
        self._m_prev: float | None = None
        self._t_prev: float | None = None

    def update(self, setpoint: float, measurement: float, t: float) -> PIDStep:
        """Run one cycle at time ``t`` (s, strictly increasing) and return the output.

        Raises:
            ValueError: non-finite inputs or time that does not increase.
        """
        if not (math.isfinite(setpoint) and math.isfinite(measurement) and math.isfinite(t)):
            raise ValueError(f"PID.update needs finite numbers, got setpoint={setpoint}, measurement={measurement}, t={t}")
        g = self.gains
        e = float(setpoint) - float(measurement)
        if self._t_prev is None:
            dt = 0.0
        else:
            dt = float(t) - self._t_prev
            if dt <= 0.0:
                raise ValueError(f"PID.update: time must increase (t={t} after {self._t_prev})")
        lim = g.output_limit
        if g.form is PIDForm.PUBLISHED:
            e_prev = 0.0 if self._e_prev is None else self._e_prev
            p = g.kp * e
            i = g.ki * (e_prev + e * dt)
            d = g.kd * (e - e_prev) / dt if dt > 0 else 0.0
            raw = p + i + d
        else:
            p = g.kp * e
            # derivative of the error (or of −measurement), low-passed
            if dt > 0 and self._m_prev is not None and self._e_prev is not None:
                if g.derivative_on_measurement:
                    d_raw = -g.kd * (float(measurement) - self._m_prev) / dt
                else:
                    d_raw = g.kd * (e - self._e_prev) / dt
                a = dt / (g.derivative_tau + dt) if g.derivative_tau > 0 else 1.0
                self._d += a * (d_raw - self._d)
            d = self._d
            ilim = lim if g.integral_limit is None else g.integral_limit
            candidate = self.integral + g.ki * e * dt
            unclamped = p + candidate + d
            # conditional integration: freeze while saturated and the error pushes further out
            if (unclamped > lim and e > 0) or (unclamped < -lim and e < 0):
                candidate = self.integral
            self.integral = min(max(candidate, -ilim), ilim)
            i = self.integral
            raw = p + i + d
        u = min(max(raw, -lim), lim)
        self._e_prev, self._m_prev, self._t_prev = e, float(measurement), float(t)
        return PIDStep(u=u, p=p, i=i, d=d, error=e, dt=dt, saturated=abs(raw) > lim)
