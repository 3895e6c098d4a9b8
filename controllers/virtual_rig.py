"""A virtual rig: one servo motor of the rig simulated on the host, sample by sample, to predict the real one.

:class:`VirtualServo` runs what the firmware runs (``firmware/servo_rig/rig_core.cpp``,
``RigCore::control_tick``) at the rig's control rate, in the firmware's own integers
(:func:`armtwin.controllers.ident.firmware_duty`) — the newest target extrapolated along its
velocity in whole pulses, the fixed-point PID, the velocity and friction feed-forward, the PWM's
8-bit rounding — then the H-bridge's dead band and the DC gear motor of
:class:`armtwin.controllers.servo.DCMotor` (0.1 ms Euler steps, stiction), and reads the encoder
as the firmware does. Fed the targets the host sends (at the times it sends them) and the power
commands, it says what angle the rig will report: with an identified motor
(``armtwin rig identify`` / ``armtwin fit --save``, read by
:func:`armtwin.controllers.ident.read_motor_fit`) it is a copy of the measured rig; ``armtwin
sync --motor-params`` runs one per mapped joint beside the real rig.

The link's delays are part of it: a target sent at host time ``t`` acts from ``t + delay_down``,
extrapolated from then, and the angle reported at ``t`` is the rig's at ``t − delay_up``. A timed
target (``lead``: MODE flag TIMED, firmware 2.1) acts from ``t + lead`` instead, extrapolated from
then — or from its arrival, when that is later.
:func:`armtwin.controllers.ident.virtual_rig_log` makes a whole twin log with it.

Pure Python and numpy. Units: s, V, encoder pulses on the wire, degrees out.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from .ident import LoopConfig, MotorFit, firmware_duty, firmware_ints, target_velocities_q20
from .servo import DCMotor

__all__ = ["VirtualServo", "VirtualRig"]


class VirtualServo:
    """One rig motor and its position loop, advanced on demand (see the module docstring).

    Args:
        fit: the motor, the H-bridge's dead band and the link's delays.
        loop: the firmware's position loop.
        start_deg: the output angle it starts at, deg (for a rig's reading of n pulses, the middle
            of that pulse, (n + 0.5) / pulses per degree, is the best guess).
        t0: the host time it starts at, s (times passed later are on the same clock).
    """

    def __init__(self, fit: MotorFit, loop: LoopConfig = LoopConfig(), *, start_deg: float = 0.0,
                 t0: float = 0.0) -> None:
        if not (math.isfinite(start_deg) and math.isfinite(t0)):
            raise ValueError(f"VirtualServo needs a finite start angle and time, got {start_deg}, {t0}")
        self.fit, self.loop = fit, loop
        self.motor = DCMotor(fit.motor_params())
        self.motor.theta = start_deg * loop.pulses_per_deg * 2 * math.pi / fit.encoder_cpr
        self._fw = firmware_ints(loop)
        self._pid = np.zeros(4, dtype=np.int64)  # the firmware PID's state (firmware_duty)
        self._h = 1.0 / loop.control_hz
        self._t0 = float(t0)
        self._tick = 0                      # the next control tick to run (tick n at t0 + n·h)
        self._targets: deque = deque()      # (time it applies, pulses, its stamp, time extrapolated from)
        self._powers: deque = deque()       # (arrival time, on)
        self._target: int | None = None     # pulses
        self._target_vel = 0                # Q20 pulses/µs, as the firmware keeps it
        self._t_host = -math.inf            # host time of the newest target
        self._rx_us = 0                     # the time it is extrapolated from, µs
        self._powered = True
        self._volts = 0.0
        self._pos = self.motor.pulses       # the encoder count after the newest tick

    def target(self, pulses: float, t: float, lead: float | None = None) -> None:
        """A target (encoder pulses) the host sends at time ``t`` (non-decreasing); ``lead``: timed,
        stamped for ``t + lead``."""
        arrival = t + self.fit.delay_down
        if lead is None:
            self._targets.append((arrival, int(round(pulses)), t, arrival))
        else:
            self._targets.append((max(arrival, t + lead), int(round(pulses)), t + lead, t + lead))

    def power(self, on: bool, t: float) -> None:
        """The host switches the motor supply at time ``t``."""
        self._powers.append((t + self.fit.delay_down, bool(on)))

    def angle_at(self, t: float) -> float:
        """The angle the rig reports at host time ``t`` (non-decreasing): its encoder, ``delay_up``
        earlier, deg."""
        until = t - self.fit.delay_up
        while self._t0 + self._tick * self._h <= until + 1e-12:
            self._run_tick()
        return self._pos / self.loop.pulses_per_deg

    @property
    def powered(self) -> bool:
        """Whether the motor supply was on at the newest control tick run (by :meth:`angle_at`)."""
        return self._powered

    def _run_tick(self) -> None:
        loop, m = self.loop, self.motor
        s = self._t0 + self._tick * self._h
        self._tick += 1
        while self._powers and self._powers[0][0] <= s:
            self._powered = self._powers.popleft()[1]
        m.set_power(self._powered)
        m.step(0.0 if abs(self._volts) < self.fit.dead_band else self._volts, self._h)
        self._pos = m.pulses
        while self._targets and self._targets[0][0] <= s + 1e-7:
            _, value, t_host, ref = self._targets.popleft()
            self._target_vel = (0 if self._target is None else
                                int(target_velocities_q20(np.array([self._t_host, t_host]), np.array([self._target, value]),
                                                          loop)[1]))
            self._target, self._t_host, self._rx_us = value, t_host, math.floor(ref * 1e6 + 0.5)
        if self._target is None or not self._powered:
            self._pid[:] = 0
            self._volts = 0.0
            return
        ts_us = min(math.floor(s * 1e6 + 0.5) - self._rx_us, int(self._fw[10]))
        e = self._target + ((self._target_vel * ts_us) >> 20) - int(self._pos)
        self._volts = int(firmware_duty(self._pid, e, self._target_vel, self._fw)) * loop.supply / 255.0


class VirtualRig:
    """The rig's mapped motors on the host, one :class:`VirtualServo` each, beside the real rig.

    It starts at the rig's first measured joints (:meth:`start`); from then on it is sent what the
    rig is sent (:meth:`targets`, :meth:`power`) and says what the rig should report
    (:meth:`angles_at`). :meth:`observe` keeps the prediction error against what the rig did
    report. The rig's watchdog and reboots are not modelled.

    Args:
        fits: one fitted motor per mapped joint (the rig's motors 1, 2 …).
        loop: the firmware's position loop.
    """

    def __init__(self, fits, loop: LoopConfig = LoopConfig()) -> None:
        self.fits = tuple(fits)
        if not self.fits:
            raise ValueError("VirtualRig needs one motor per mapped joint, got none")
        self.loop = loop
        self.servos: list[VirtualServo] = []
        self._sq = [0.0] * len(self.fits)
        self._max = [0.0] * len(self.fits)
        self._n = [0] * len(self.fits)

    @property
    def started(self) -> bool:
        return bool(self.servos)

    def start(self, measured_deg, t: float) -> None:
        """Start at the rig's measured joints (deg, as read: whole pulses) at time ``t``, s."""
        ppd = self.loop.pulses_per_deg
        self.servos = [VirtualServo(f, self.loop, start_deg=float(a) + 0.5 / ppd, t0=t)
                       for f, a in zip(self.fits, measured_deg)]

    def targets(self, pulses, t: float, lead: float | None = None) -> None:
        """The targets (pulses, one per motor) the host sends at ``t`` (ignored before :meth:`start`);
        ``lead``: timed, for ``t + lead``."""
        for s, p in zip(self.servos, pulses):
            s.target(p, t, lead)

    def power(self, on: bool, t: float) -> None:
        """The host switches the rig's supply at ``t``."""
        for s in self.servos:
            s.power(on, t)

    def angles_at(self, t: float) -> np.ndarray:
        """(k,) the angles the rig should report at ``t``, deg (NaN before :meth:`start`)."""
        if not self.servos:
            return np.full(len(self.fits), np.nan)
        return np.array([s.angle_at(t) for s in self.servos])

    def observe(self, predicted, measured) -> None:
        """Count one sample's prediction error (joints without both values are skipped)."""
        for i, (p, m) in enumerate(zip(predicted, measured)):
            if math.isfinite(p) and math.isfinite(m):
                d = abs(p - m)
                self._sq[i] += d * d
                self._max[i] = max(self._max[i], d)
                self._n[i] += 1

    def errors(self) -> list[tuple[float, float, int]]:
        """Per motor (RMS, max, samples) of predicted − measured, deg (NaN without samples)."""
        return [(math.sqrt(sq / n) if n else math.nan, mx if n else math.nan, n)
                for sq, mx, n in zip(self._sq, self._max, self._n)]
