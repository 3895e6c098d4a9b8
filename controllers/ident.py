"""System identification of the servo rig's motors from a twin log (issue 20, item 3).

A twin log (``armtwin sync --log``, read by :func:`armtwin.envs.rig.read_twin_log`) holds, per
sample and mapped joint, the angle the host commanded (``Virtual``) and the angle the rig
reported back (``Servo``), and the rig's faults (a power cut shows as ``POWER``). Between the
two sits the whole loop: the serial link (a transport delay), the firmware's position loop
(target extrapolation, the PID of :mod:`armtwin.controllers.pid`, velocity and friction
feed-forward, the PWM), the H-bridge (a dead band) and the DC gear motor of
:mod:`armtwin.controllers.servo`. :func:`simulate_loop` runs that loop for many parameter sets
at once (numpy, vectorised over the sets) from the logged commands; :func:`fit_motor` fits the
motor's parameters with SciPy's ``least_squares`` so that the simulated servo angles meet the
logged ones on the first part of the log, and reports on the rest.

What can be known from such a log. The armature resistance R only scales the others (J, b, Tc
by α and R by 1/α give the same motion), so it is fixed at the data sheet value. While the motor
is powered, position data show only ``J·R/k``, ``k + b·R/k`` and ``R·Tc/k``; a power cut (the
motor coasts, no current) adds ``b/J`` and ``Tc/J``. The rig's viscous friction is small (b·R/k
is under 1 % of k, and b·ω a few % of Tc at the speeds a rig reaches), so in practice k, J and Tc
are well determined and b is not. The dead band is known only to a PWM step: the rig drives the
motor with whole PWM steps of supply/255 (47 mV), and the bridge passes a duty when it reaches the
dead band, so every dead band between two steps gives the same motion, bit for bit
(:func:`dead_band_step`); the fit gives the middle of the step it finds, and its interval is
never narrower than half a step (±24 mV: ±6–11 % of a 0.2–0.4 V dead band, whatever the log or
the excitation). Each parameter's 95 % confidence interval comes from the
Jacobian with the residuals' autocorrelation taken into account (the model's errors are slow,
not independent per sample); a parameter known to no better than ±:data:`MAX_RELATIVE_CI`, or
lying in a direction the log cannot see at all (singular values below :data:`NULL_RATIO` of
the largest), is reported as **not identifiable**, without a number.

The loop model follows the firmware (``firmware/servo_rig/rig_core.cpp``, ``RigCore::control_tick``)
and the motor model. Its exact form is the firmware's own integer arithmetic (the target's
velocity in Q20 pulses/µs from the host's frame times, the extrapolated target in whole pulses,
the fixed-point PID, the feed-forward and the duty's rounding: :func:`firmware_duty`), encoder
counts and the motor in 0.1 ms Euler steps — equal, count for count, to the C++ core and motor
the emulator runs (``rig_emulator --loop-trace``, tests/test_ident.py); its smoothed form, whose
cost is smooth in the parameters, reads the encoder as the continuous angle less half a pulse (the
mean of the floor), runs the PID in floating point on a continuous target ramp (less the half pulse
the firmware's floor loses), leaves its output unrounded (but keeps the PWM's zero step as a dead
zone) and integrates the motor exactly over each control tick. With the rig's clock
(``Trace.t_taken``) the model ticks on the rig's own tick grid and reads the tick each state was
taken at. The loop is compiled with Numba (extra ``fit``).

Pure numpy and SciPy. Units: s, V, rad, N·m, kg·m²; angles in logs and reports in degrees.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .pid import RIG_GAINS, PIDGains
from .servo import PWM_MAX, RIG_MOTOR, SUPPLY_V, MotorParams

__all__ = ["correlation_length", "LoopConfig", "MotorFit", "Trace", "FitParam", "FitReport", "PARAMETERS", "simulate_loop", "fit_motor",
           "prediction_error", "NULL_RATIO", "read_params_file", "read_motor_fit", "write_params_file", "Excitation", "excitation",
           "virtual_rig_log", "NOMINAL", "MAX_RELATIVE_CI", "traces_of", "RANGES", "dead_band_step", "rig_clock_times",
           "rig_time_base", "firmware_ints", "firmware_duty",
           "target_velocities_q20"]

#: a singular value of the scaled Jacobian below this fraction of the largest marks a direction
#: the log cannot see
NULL_RATIO = 1e-4

#: the fitted parameters, in the order of the parameter vectors (``resistance`` is fixed)
PARAMETERS = ("inertia", "viscous", "coulomb", "motor_constant", "dead_band", "delay_down", "delay_up")


@dataclass(frozen=True)
class LoopConfig:
    """The firmware's position loop, as the fit assumes it (``RigConfig`` in ``rig_core.h``).

    Attributes:
        control_hz: control ticks per second.
        pulses_per_deg: encoder pulses per output degree.
        gains: the position PID (error in pulses, output in V).
        supply: motor supply, V (the voltage limit and the PWM scale).
        ff_pulses_per_s_per_volt: velocity feed-forward, (pulses/s) per V.
        ff_static_v: friction feed-forward while the target moves, V.
        extrapolate_max_s: the target is extrapolated at most this long past its arrival, s.
        target_gap_max_s: a target velocity is taken from two targets at most this far apart, s.
    """

    control_hz: float = 1000.0
    pulses_per_deg: float = 37.5
    gains: PIDGains = RIG_GAINS
    supply: float = SUPPLY_V
    ff_pulses_per_s_per_volt: float = 145.0 * 6.0 * 37.5 / 12.0
    ff_static_v: float = 0.21
    extrapolate_max_s: float = 0.02
    target_gap_max_s: float = 0.05

    @property
    def pwm_step(self) -> float:
        """One step of the 8-bit PWM, V (``supply`` / 255): the rig drives its motors only with
        whole multiples of it."""
        return self.supply / PWM_MAX


def dead_band_step(dead_band: float, loop: LoopConfig = LoopConfig()) -> tuple[float, float]:
    """The PWM step a dead band lies in, ``(lo, hi]`` V: every dead band in it gives the rig the same
    motion, bit for bit.

    The bridge passes a duty of n PWM steps when n·step ≥ the dead band, so all the rig (and a log
    of it) can show is the first duty it passes, n = ⌈dead band / step⌉ (at least 1: a zero duty
    passes nothing anyway). ``(lo, hi] = ((n − 1)·step, n·step]``; its middle is the estimate
    whose error is smallest whatever the true dead band is (at most half a step).
    """
    if not (math.isfinite(dead_band) and dead_band >= 0):
        raise ValueError(f"a dead band must be finite and >= 0 V, got {dead_band}")
    step = loop.pwm_step
    n = max(1, math.ceil(dead_band / step - 1e-9))
    return (n - 1) * step, n * step


@dataclass(frozen=True)
class MotorFit:
    """The parameters of the loop that are fitted (and the fixed resistance).

    Attributes:
        inertia: total inertia on the motor shaft (rotor, gears and load / ratio²), kg·m².
        viscous: motor-side viscous friction, N·m·s/rad.
        coulomb: motor-side Coulomb friction (and stiction), N·m.
        motor_constant: torque constant = back-EMF constant, N·m/A = V·s/rad.
        dead_band: the H-bridge passes no current below this voltage, V.
        delay_down: from a logged command to the rig acting on it, s.
        delay_up: from the rig's reading to the log, s (both include the host's and the rig's
            scheduling, not only the wire).
        resistance: armature resistance, Ω (not identifiable: fixed).
        gear_ratio: motor turns per output turn.
        encoder_cpr: encoder counts per motor turn.
    """

    inertia: float
    viscous: float
    coulomb: float
    motor_constant: float
    dead_band: float = 0.0
    delay_down: float = 0.0
    delay_up: float = 0.0
    resistance: float = RIG_MOTOR.resistance
    gear_ratio: float = RIG_MOTOR.gear_ratio
    encoder_cpr: int = RIG_MOTOR.encoder_cpr

    @staticmethod
    def of(motor: MotorParams = RIG_MOTOR, *, dead_band: float = 0.0, delay_down: float = 0.0,
           delay_up: float = 0.0) -> "MotorFit":
        """The parameters of a :class:`~armtwin.controllers.servo.MotorParams` motor."""
        return MotorFit(motor.inertia, motor.viscous_friction, motor.coulomb_friction, motor.motor_constant,
                        dead_band, delay_down, delay_up, motor.resistance, motor.gear_ratio, motor.encoder_cpr)

    def motor_params(self) -> MotorParams:
        """The same motor as :class:`MotorParams` (all inertia on the rotor; the no-load speed that
        gives this motor constant)."""
        k, r = self.motor_constant, self.resistance
        w0 = (SUPPLY_V * k - r * self.coulomb) / (k * k + r * self.viscous)     # motor-side no-load speed, rad/s
        rpm = w0 / self.gear_ratio * 60.0 / (2 * math.pi)
        return MotorParams(nominal_voltage=SUPPLY_V, no_load_rpm=rpm, gear_ratio=self.gear_ratio,
                           encoder_cpr=self.encoder_cpr, resistance=r, rotor_inertia=self.inertia, load_inertia=0.0,
                           coulomb_friction=self.coulomb, viscous_friction=self.viscous)

    def vector(self) -> np.ndarray:
        """(7,) the fitted parameters in :data:`PARAMETERS` order."""
        return np.array([getattr(self, n) for n in PARAMETERS], dtype=float)

    def with_vector(self, v) -> "MotorFit":
        values: dict = {n: float(x) for n, x in zip(PARAMETERS, v)}
        return replace(self, **values)


#: the Trace fields with one value per sample besides ``t`` (None where not known)
_PER_SAMPLE = ("virtual", "servo", "powered", "power_sent", "t_taken", "sent", "t_apply")


@dataclass(frozen=True)
class Trace:
    """One joint of a twin log.

    Attributes:
        t: (K,) sample times, s (increasing).
        virtual: (K,) commanded angle, deg.
        servo: (K,) measured angle, deg (NaN: none).
        powered: (K,) whether the motor supply was on (no ``POWER`` fault).
        label: the joint's name in the log.
        power_sent: (K,) the supply the host had commanded when each sample's targets went out, or
            None: the supply is known only from the log's ``POWER`` flags (to a sample period).
            A POWER frame goes out just before that sample's targets and reaches the rig
            ``power_lead`` s before them (``armtwin rig identify`` knows both).
        power_lead: s, see ``power_sent``.
        sent: (K,) whether each sample's targets went out (the link skips a target while its wire is
            still busy after a host stall, ``RigLink.send_targets``), or None: all were.
        t_taken: (K,) when each servo angle was taken at the rig, s on ``t``'s clock (from the
            rig's own clock, :func:`rig_clock_times`; NaN: not known), or None: at the sample's
            time, up to a state period after it (a twin log does not keep the rig's clock;
            ``armtwin rig identify`` does). With it the model
            ticks on the rig's own tick grid and reads the tick each state was taken at
            (``delay_up`` is then only the host's least read latency, near 0).
        t_apply: (K,) timed targets (firmware 2.1, MODE flag TIMED): the time each sample's target
            was stamped for, s on ``t``'s clock (the rig's clock mapped as for ``t_taken``). The rig
            applies it at its first tick from then — or at its arrival, ``delay_down`` after the
            sample, when that is later — and extrapolates it from that time. NaN, or None: the
            target applies at its arrival and is extrapolated from it (untimed).
    """

    t: np.ndarray
    virtual: np.ndarray
    servo: np.ndarray
    powered: np.ndarray
    label: str = ""
    power_sent: np.ndarray | None = None
    power_lead: float = 0.0
    t_taken: np.ndarray | None = None
    sent: np.ndarray | None = None
    t_apply: np.ndarray | None = None

    def __post_init__(self) -> None:
        k = len(self.t)
        for name in _PER_SAMPLE:
            if getattr(self, name) is None:
                continue
            if len(getattr(self, name)) != k:
                raise ValueError(f"Trace.{name} has {len(getattr(self, name))} samples, t has {k}")
        if k < 2 or not np.all(np.diff(self.t) > 0):
            raise ValueError("a trace needs at least two samples at increasing times")

    @property
    def on_rig_ticks(self) -> bool:
        """The tick each servo angle was taken at is known (``t_taken``): no read delay."""
        return self.t_taken is not None and bool(np.isfinite(self.t_taken).any())

    def cut(self, a: int, b: int) -> "Trace":
        """Samples a..b-1."""
        cols: dict[str, Any] = {n: None if getattr(self, n) is None else getattr(self, n)[a:b] for n in _PER_SAMPLE}
        return replace(self, t=self.t[a:b], **cols)


def _kernel():
    """The loop simulation compiled by Numba (built on first use; cached on disk)."""
    import numba

    duty = numba.njit(cache=True)(firmware_duty)

    @numba.njit(cache=True, fastmath=False, parallel=True)
    def run(t, tgt, vel, powered_log, P, R, rad_per_pulse, h, ticks, kp, ki, kd, dtau, lim, ilim, ff, ff_static,
            supply, half_step, extrap, exact, half_log, velq, fw, by_cmd, power_lead, t_state, tick0, tt, tap, out):
        n_sets = P.shape[0]
        K = t.shape[0]
        KT = tt.shape[0]
        for q in numba.prange(n_sets):
            J, B, TC, KM, DB, down, up = P[q, 0], P[q, 1], P[q, 2], P[q, 3], P[q, 4], P[q, 5], P[q, 6]
            ip = 0
            theta = out[q, 0]
            omega = 0.0
            volts = 0.0
            integ = 0.0
            dterm = 0.0
            e_prev = 0.0
            fresh = True
            idx = -1
            # the firmware's integers (exact): PIDFixed's state, the time a target arrived (µs)
            pid = np.zeros(4, dtype=np.int64)
            rx_us = np.int64(0)
            t_ref = 0.0  # the newest target's time it is extrapolated from
            thresh = DB if (DB > half_step or exact) else half_step
            a_pow = (KM * KM / R + B) / J
            a_off = B / J
            for n in range(ticks):
                s = tick0 + n * h
                # the supply as the host commanded it (by_cmd: its POWER frame arrives power_lead
                # before the sample's targets), or as the log saw it delay_up later (a change shows in
                # the log up to one log period after it happened: half a period is the best guess)
                while ip + 1 < K and ((t[ip + 1] + down - power_lead) if by_cmd else (t_state[ip + 1] - up - half_log)) <= s:
                    ip += 1
                powered = powered_log[ip]
                v = volts if (volts >= thresh or volts <= -thresh) else 0.0
                if exact:
                    # DCMotor / MotorModel: explicit Euler in 0.1 ms steps, stiction below Tc
                    m = 10
                    hs = h / m
                    for _ in range(m):
                        cur = (v - KM * omega) / R if powered else 0.0
                        t_drive = KM * cur - B * omega
                        if abs(omega) < 1e-9 and abs(t_drive) <= TC:
                            omega = 0.0
                            continue
                        if omega != 0.0:
                            sg = 1.0 if omega > 0 else -1.0
                        else:
                            sg = 1.0 if t_drive > 0 else -1.0
                        w_new = omega + hs * (t_drive - TC * sg) / J
                        if omega != 0.0 and w_new * omega < 0:
                            w_new = 0.0
                        theta += 0.5 * (omega + w_new) * hs
                        omega = w_new
                    out[q, n] = theta
                    meas = np.floor(theta / rad_per_pulse + 1e-9)
                else:
                    # exact over the tick at constant voltage
                    g_drive = KM / R if powered else 0.0
                    a = a_pow if powered else a_off
                    if omega == 0.0:
                        if abs(g_drive * v) > TC:
                            sgn = 1.0 if v > 0 else -1.0
                        else:
                            sgn = 0.0
                    else:
                        sgn = 1.0 if omega > 0 else -1.0
                    if sgn != 0.0:
                        f = (g_drive * v - TC * sgn) / J
                        if a * h < 1e-9:
                            w1 = omega + f * h
                            th1 = theta + omega * h + 0.5 * f * h * h
                            if w1 * sgn < 0.0:
                                ts = -omega / f
                                th1 = theta + omega * ts + 0.5 * f * ts * ts
                                w1 = 0.0
                        else:
                            w_ss = f / a
                            e = np.exp(-a * h)
                            w1 = w_ss + (omega - w_ss) * e
                            th1 = theta + w_ss * h + (omega - w_ss) * (1.0 - e) / a
                            if w1 * sgn < 0.0:
                                ts = -np.log(-w_ss / (omega - w_ss)) / a
                                es = np.exp(-a * ts)
                                th1 = theta + w_ss * ts + (omega - w_ss) * (1.0 - es) / a
                                w1 = 0.0
                        omega = w1
                        theta = th1
                    out[q, n] = theta
                    meas = theta / rad_per_pulse - 0.5
                # the newest target that has arrived (above), extrapolated
                # (a timed target, tap not NaN: at its time or its arrival, whichever is later, and
                # extrapolated from its time; else at its arrival, from its arrival)
                while idx + 1 < KT and max(tt[idx + 1] + down, tap[idx + 1] - 1e-7 if tap[idx + 1] == tap[idx + 1] else 0.0) <= s:
                    idx += 1
                    t_ref = tap[idx] if tap[idx] == tap[idx] else tt[idx] + down
                    rx_us = np.int64(np.floor(t_ref * 1e6 + 0.5))
                if idx < 0 or not powered:
                    volts = 0.0
                    integ = 0.0
                    dterm = 0.0
                    e_prev = 0.0
                    pid[:] = 0
                    fresh = True
                    continue
                if exact:     # the firmware's integers (firmware_duty)
                    ts_us = np.int64(np.floor(s * 1e6 + 0.5)) - rx_us
                    vq = velq[idx]
                    ei = np.int64(tgt[idx]) + ((vq * min(ts_us, fw[10])) >> 20) - np.int64(meas)
                    volts = duty(pid, ei, vq, fw) * 2.0 * half_step
                    continue
                since = s - t_ref
                if since > extrap:
                    since = extrap
                sp = tgt[idx] + vel[idx] * since - (0.5 if vel[idx] != 0.0 else 0.0)  # the firmware floors it
                e = sp - meas
                dt = 0.0 if fresh else h
                if dt > 0:
                    d_raw = kd * (e - e_prev) / dt
                    al = dt / (dtau + dt) if dtau > 0 else 1.0
                    dterm += al * (d_raw - dterm)
                cand = integ + ki * e * dt
                un = kp * e + cand + dterm
                if (un > lim and e > 0) or (un < -lim and e < 0):
                    cand = integ
                if cand > ilim:
                    cand = ilim
                elif cand < -ilim:
                    cand = -ilim
                integ = cand
                u = kp * e + integ + dterm
                if u > lim:
                    u = lim
                elif u < -lim:
                    u = -lim
                vv = vel[idx]
                if abs(vv) > 1.0:
                    u += vv / ff + (ff_static if vv > 0 else -ff_static)
                if u > supply:
                    u = supply
                elif u < -supply:
                    u = -supply
                volts = u
                e_prev = e
                fresh = False
        return out

    return run


_RUN = None


def _fixed(v: "float | np.floating", scale: float, limit: float) -> int:
    """The firmware's ``fixed()``: round(v·scale) half away from zero, saturated to ±limit, in
    single precision as the AVR computes it."""
    x = np.float32(np.float32(v) * np.float32(scale))
    x = min(max(x, np.float32(-limit)), np.float32(limit))
    return int(x + np.float32(0.5)) if x >= 0 else int(x - np.float32(0.5))


def firmware_ints(loop: LoopConfig) -> np.ndarray:
    """The fixed-point constants ``PIDFixed::configure`` and ``RigCore``'s constructor derive from
    the loop's gains (``rig_core.cpp``): kp (Q14 duty per pulse), ki (Q22 per pulse and tick), kd
    (Q14 per pulse change), the derivative filter (Q8), the output and integral limits, the largest
    error and error change whose products fit 32 bits, the velocity feed-forward (Q14 duty per
    Q20 pulses/µs), the static feed-forward (Q14) and the extrapolation limit (µs)."""
    g = loop.gains
    f32 = np.float32
    dpv = f32(PWM_MAX) / f32(loop.supply)
    period = f32(1.0) / f32(loop.control_hz)
    two30 = 1073741824.0
    kp = _fixed(f32(g.kp) * dpv, 16384.0, two30)
    ki = _fixed(f32(g.ki) * dpv * period, 4194304.0, two30)
    kd = _fixed(f32(g.kd) * dpv / period, 16384.0, two30)
    a = _fixed(period / (f32(g.derivative_tau) + period) if g.derivative_tau > 0 else 1.0, 256.0, 256.0)
    lim = _fixed(f32(g.output_limit) * dpv, 16384.0, PWM_MAX * 16384.0)
    ilim_v = g.output_limit if g.integral_limit is None else g.integral_limit
    ilim = _fixed(f32(ilim_v) * dpv, 4194304.0, PWM_MAX * 4194304.0)
    e_max = 32767
    if kp > 0:
        e_max = min(e_max, (1 << 30) // kp)
    if ki > 0:
        e_max = min(e_max, (1 << 29) // ki)
    de_max = 32767 if kd <= 0 else min(32767, (1 << 30) // kd)
    ff = _fixed(f32(1e6 / 1048576.0) * dpv / f32(loop.ff_pulses_per_s_per_volt) * f32(16384.0), 1.0, 30000.0)
    ff_static = _fixed(f32(loop.ff_static_v) * dpv, 16384.0, PWM_MAX * 16384.0)
    extrap_us = int(round(loop.extrapolate_max_s * 1e6))
    return np.array([kp, ki, kd, a, lim, ilim, e_max, de_max, ff, ff_static, extrap_us], dtype=np.int64)


def firmware_duty(pid: np.ndarray, e: int, vel_q20: int, fw: np.ndarray) -> int:
    """One control tick of the firmware from the position error on: ``PIDFixed::update`` (Q14
    duty, Q22 integral, the derivative filter in Q8, conditional integration, the output clamp),
    the velocity and friction feed-forward of ``RigCore::control_tick`` and the duty rounded half
    away from zero to ±255 — integer for integer (``>>`` floors, as the AVR's arithmetic shift).
    Plain Python for :class:`~armtwin.controllers.virtual_rig.VirtualServo`; Numba compiles the
    same function into the fit's loop.

    Args:
        pid: the PID's state, int64 (i_q22, d_q14, e_prev, started), updated in place; zeros after
            a reset.
        e: the error, pulses (the extrapolated target less the encoder).
        vel_q20: the target's velocity, Q20 pulses/µs (:func:`target_velocities_q20`).
        fw: :func:`firmware_ints`.

    Returns:
        The signed PWM duty.
    """
    e = min(max(e, -fw[6]), fw[6])
    p = e * fw[0]
    if pid[3] != 0:
        d_raw = min(max(min(max(e - pid[2], -fw[7]), fw[7]) * fw[2], -(1 << 29)), 1 << 29)
        pid[1] += ((d_raw - pid[1]) >> 8) * fw[3]
        cand = pid[0] + e * fw[1]
        un = p + (cand >> 8) + pid[1]
        if (un > fw[4] and e > 0) or (un < -fw[4] and e < 0):
            cand = pid[0]
        pid[0] = min(max(cand, -fw[5]), fw[5])
    pid[2] = e
    pid[3] = 1
    u = min(max(p + (pid[0] >> 8) + pid[1], -fw[4]), fw[4])
    if vel_q20 > 1 or vel_q20 < -1:
        u += vel_q20 * fw[8] + (fw[9] if vel_q20 > 0 else -fw[9])
    m = min(((min(abs(u), 511 * 16384) >> 8) + 32) >> 6, 255)
    return m if u >= 0 else -m


#: the firmware's largest target velocity, Q20 pulses/µs (60,000 pulses/s)
_VEL_MAX_Q20 = 62914


def target_velocities_q20(t: np.ndarray, tgt: np.ndarray, loop: LoopConfig) -> np.ndarray:
    """Each target's velocity as the firmware takes it (``RigCore::handle``, ``control_tick``): the
    pulse step from the previous target (±2047 at most) over the host's time step in whole µs
    (none when the gap is 0 or ``target_gap_max_s`` or more), by a Q30 reciprocal, Q20 pulses/µs."""
    t_us = np.floor(np.asarray(t, dtype=float) * 1e6 + 0.5).astype(np.int64)
    v = np.zeros(len(tgt), dtype=np.int64)
    if len(tgt) < 2:
        return v
    dth: np.ndarray = np.diff(t_us)
    dp: np.ndarray = np.clip(np.diff(np.asarray(tgt, dtype=np.int64)), -2047, 2047)
    ok = (dth > 0) & (dth < int(round(loop.target_gap_max_s * 1e6)))
    recip: np.ndarray = np.where(ok, (1 << 30) // np.where(ok, dth, 1), 0).astype(np.int64)
    v[1:] = np.clip(dp * (recip >> 10) + ((dp * (recip & 1023)) >> 10), -_VEL_MAX_Q20, _VEL_MAX_Q20)
    return v


def simulate_loop(trace: Trace, params: np.ndarray, base: MotorFit, loop: LoopConfig = LoopConfig(), *,
                  until: float | None = None, exact: bool = False) -> np.ndarray:
    """The servo angle the loop gives for each parameter set, at the trace's sample times.

    A command reaches the rig ``delay_down`` after the log's time; the logged servo angle is the
    rig's ``delay_up`` before it.

    Args:
        trace: the logged commands (and power states); the motor starts where the log's first
            servo angle says.
        params: (N, 7) parameter sets in :data:`PARAMETERS` order.
        base: the fixed parameters (resistance, gear ratio, encoder).
        loop: the firmware's position loop.
        until: simulate only up to this time, s (samples after it are NaN).
        exact: quantise as the rig does (encoder counts, PWM steps) instead of the smoothed model.

    Returns:
        (N, K) servo angles, deg.
    """
    global _RUN
    if _RUN is None:
        _RUN = _kernel()
    P = np.ascontiguousarray(np.atleast_2d(np.asarray(params, dtype=float)))
    if P.shape[1] != len(PARAMETERS) or not np.all(np.isfinite(P)) or np.any(P[:, [0, 3]] <= 0) or np.any(P < 0):
        raise ValueError(f"parameter sets must be (N, {len(PARAMETERS)}) finite, inertia and motor constant > 0, "
                         f"the others >= 0")
    rad_per_pulse = 2 * math.pi / base.encoder_cpr
    ppd = loop.pulses_per_deg
    g = loop.gains
    h = 1.0 / loop.control_hz
    t = np.ascontiguousarray(trace.t - trace.t[0], dtype=float)
    end = t[-1] if until is None else min(t[-1], float(until) - trace.t[0])
    ticks = int(math.floor(end / h + 1e-9)) + 2
    # the targets the rig received: every sample's, or those the link sent
    tt = t if trace.sent is None else np.ascontiguousarray(t[np.asarray(trace.sent, dtype=bool)])
    tgt = np.rint((trace.virtual if trace.sent is None else trace.virtual[np.asarray(trace.sent, dtype=bool)]) * ppd)
    # timed targets: the time each was stamped for (NaN: untimed); their velocities come from those
    # times, as the firmware takes them from the frames' time fields
    tap = np.full(len(tt), np.nan)
    if trace.t_apply is not None:
        ap = np.asarray(trace.t_apply, dtype=float) - trace.t[0]
        tap = np.ascontiguousarray(ap if trace.sent is None else ap[np.asarray(trace.sent, dtype=bool)])
    by_cmd = trace.power_sent is not None
    powered = np.ascontiguousarray(trace.power_sent if by_cmd else trace.powered, dtype=np.bool_)
    t_vel = np.where(np.isfinite(tap), tap, tt)
    gap = np.diff(t_vel)
    vel = np.zeros_like(tgt)
    vel[1:] = np.where(gap < loop.target_gap_max_s, np.diff(tgt) / np.maximum(gap, 1e-12), 0.0)
    velq = target_velocities_q20(t_vel, tgt, loop)
    known = trace.servo[np.isfinite(trace.servo)]
    theta0 = (known[0] if len(known) else trace.virtual[0]) * ppd * rad_per_pulse + 0.5 * rad_per_pulse
    ilim = g.output_limit if g.integral_limit is None else g.integral_limit
    # when each sample's state (its angle, its POWER flag) left the rig, delay_up before this: the
    # sample's time — or, from the rig's clock, when it was taken, on the rig's tick grid (tick0:
    # the grid's phase after the log's first sample)
    t_read = t
    tick0 = 0.0
    on_grid = trace.on_rig_ticks
    if on_grid:
        taken = trace.t_taken - trace.t[0]
        tick0 = float(np.fmod(taken[np.isfinite(taken)][0], h)) % h
        t_read = np.maximum.accumulate(np.where(np.isfinite(taken), taken, t))
        ticks += 1
    out = np.empty((len(P), ticks))
    out[:, 0] = theta0
    # a state whose tick is known has no read delay: delay_up enters nothing (neither the reads nor
    # where the log's POWER flags place a power cut)
    PK = P.copy() if on_grid else P
    if on_grid:
        PK[:, 6] = 0.0
    _RUN(t, tgt, vel, powered, PK, base.resistance, rad_per_pulse, h, ticks, g.kp, g.ki, g.kd, g.derivative_tau,
         g.output_limit, ilim, loop.ff_pulses_per_s_per_volt, loop.ff_static_v, loop.supply,
         0.5 * loop.supply / 255.0, loop.extrapolate_max_s, bool(exact), 0.5 * float(np.median(np.diff(t))), velq,
         firmware_ints(loop), by_cmd, float(trace.power_lead), np.ascontiguousarray(t_read), tick0, tt, tap, out)
    # the logged angle: the rig's at t_read − delay_up (linear between ticks), less the half pulse the
    # encoder's floor loses on average (on the grid: the tick the state was taken at)
    when = (t_read[None, :] - PK[:, 6:7] - tick0) / h + (1e-3 if on_grid else 0.0)
    i0 = np.clip(np.floor(when).astype(np.int64), 0, ticks - 2)
    frac = np.clip(when - i0, 0.0, 1.0)
    rows = np.arange(len(P))[:, None]
    theta = out[rows, i0] * (1 - frac) + out[rows, i0 + 1] * frac
    if exact:
        theta = out[rows, np.clip(np.floor(when + 1e-9).astype(np.int64), 0, ticks - 1)]
        servo = np.floor(theta / rad_per_pulse + 1e-9) / ppd
    else:
        servo = (theta / rad_per_pulse - 0.5) / ppd
    if until is not None:
        servo[:, t > end + 1e-12] = np.nan
    return servo


@dataclass(frozen=True)
class FitParam:
    """One fitted parameter.

    Attributes:
        name: one of :data:`PARAMETERS`, ``delay_total`` or ``resistance``.
        value: fitted value (SI), or None when the log cannot tell it.
        ci95: half-width of its 95 % confidence interval (SI), or None.
        start: the value the fit started from (the nominal motor).
        identifiable: whether the log determines it.
        fixed: not fitted (the resistance).
    """

    name: str
    value: float | None
    ci95: float | None
    start: float
    identifiable: bool
    fixed: bool = False


@dataclass(frozen=True)
class FitReport:
    """The result of :func:`fit_motor` for one joint.

    Attributes:
        label: the joint's name in the log.
        params: per parameter: PARAMETERS, then ``delay_total`` (the round trip, down + up: better
            known than its split) and ``resistance`` (fixed).
        fitted: the fitted loop, every value the search found (the best predictor, even where a
            value alone is not identifiable).
        split_time: the log is fitted before this time and checked after it, s.
        rms_before, max_before: held-out prediction error of the start model, deg.
        rms_after, max_after: held-out prediction error of the fitted model, deg.
        rms_fit: residual on the fitted part, deg.
        seconds: wall time of the fit, s.
        evaluations: loop simulations run (one per parameter set).
        not_identifiable: the parameters the log cannot tell, with why.
    """

    label: str
    params: tuple[FitParam, ...]
    fitted: MotorFit
    split_time: float
    rms_before: float
    max_before: float
    rms_after: float
    max_after: float
    rms_fit: float
    seconds: float
    evaluations: int
    not_identifiable: str = ""

    def param(self, name: str) -> FitParam:
        return next(p for p in self.params if p.name == name)


def prediction_error(trace: Trace, predicted: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    """(RMS, max) of |predicted − servo| over ``mask`` where the servo angle is known, deg."""
    m = mask & np.isfinite(trace.servo) & np.isfinite(predicted)
    if not m.any():
        return math.nan, math.nan
    d = np.abs(predicted[m] - trace.servo[m])
    return float(np.sqrt(np.mean(d * d))), float(d.max())


#: a parameter whose 95 % confidence half-width exceeds this fraction of its value is reported as not
#: identifiable from the log
MAX_RELATIVE_CI = 0.15
#: values below these count as this small when judging the relative width (SI, PARAMETERS order)
_FLOOR = np.array([1e-9, 1e-8, 1e-5, 1e-4, 0.02, 2e-4, 2e-4])

#: the search ranges: inertia, viscous, Coulomb and motor constant as multiples of the data sheet's
#: values, dead band in V, delays in s
RANGES = ((0.3, 3.0), (0.1, 10.0), (0.3, 3.0), (0.5, 2.0), (0.0, 1.0), (0.0, 0.01), (0.0, 0.01))


#: the differential evolution's first population: around the least-squares result, this far each
#: way in inertia, viscous, Coulomb friction and motor constant (natural logs of their factors:
#: wider than the least-squares stage's errors on the simulated rig, up to 67 %, 19 % and 6 %
#: against the firmware's integer loop; the viscous friction is open). The dead band (which the
#: smoothed model puts up to 60 % low) and the delays are drawn from zero to well past the first
#: stage's values instead.
_DE_SPREAD = np.array([0.6, 1.5, 0.3, 0.1, 0.0, 0.0, 0.0])

#: differential-evolution searches per fit, from different seeds; the lowest exact cost is kept. One
#: search ends in a false valley now and then (simulated rig, seed 2029 j1: searches seeded 0, 1, 2
#: end at inertia +18.6, +0.6 and +20.5 %, exact costs 3.5, 1.7 and 4.6·10⁻⁴ deg², the true
#: parameters' 0), and a second one costs what the first does (26 s per two-joint log each).
SEARCHES = 2


#: where a fit starts: the data sheet motor, a 0.1 V dead band, 1 ms each way
NOMINAL = MotorFit.of(RIG_MOTOR, dead_band=0.1, delay_down=0.001, delay_up=0.001)


def fit_motor(trace: Trace, start: MotorFit = NOMINAL, loop: LoopConfig = LoopConfig(), *,
              fit_fraction: float = 0.7, generations: int = 60, seed: int = 0, searches: int = SEARCHES) -> FitReport:
    """Fit the loop's motor parameters to ``trace`` (see the module docstring).

    The first ``fit_fraction`` of the log's time is fitted; the rest is predicted from the start
    of the log with both the start and the fitted parameters, and their errors reported. Two
    stages: SciPy's ``least_squares`` on the smoothed loop model (a good start in a second), then
    SciPy's ``differential_evolution`` on the exact one (encoder counts, PWM steps, the motor in
    0.1 ms steps: the rig's own arithmetic, whose cost is piecewise constant at the finest scale,
    so it needs a derivative-free search) over physical ranges (:data:`RANGES`: 0.3–3× the data
    sheet's inertia and Coulomb friction, 0.1–10× its viscous friction, 0.5–2× its motor constant,
    0–1 V dead band, 0–10 ms delays), its first population spread around the first stage's result
    (:data:`_DE_SPREAD`). The dead band found is given as the middle of its PWM step
    (:func:`dead_band_step`: the rig cannot tell it closer). Confidence intervals come from the
    smoothed model's Jacobian at the result (the dead band's at least half a PWM step).

    Args:
        trace: one joint of a twin log.
        start: the nominal motor (its resistance, gear ratio and encoder are taken as known).
        loop: the firmware's position loop.
        fit_fraction: the part of the log's time that is fitted.
        generations: differential-evolution generations (0: the first stage only).
        searches: differential-evolution searches, seeded ``seed``, ``seed + 1``, …; the one with
            the lowest exact cost is kept (:data:`SEARCHES`).
        seed: the search's random seed (the result is reproducible).

    Raises:
        ValueError: too few servo samples to fit and check, or a bad ``fit_fraction``.
    """
    from scipy.optimize import least_squares

    if not (0.1 <= fit_fraction < 1.0):
        raise ValueError(f"fit_fraction must be in [0.1, 1), got {fit_fraction}")
    t0 = time.perf_counter()
    split = trace.t[0] + fit_fraction * (trace.t[-1] - trace.t[0])
    known = np.isfinite(trace.servo)
    fit_mask = known & (trace.t <= split)
    hold_mask = known & (trace.t > split)
    if fit_mask.sum() < 50 or hold_mask.sum() < 10:
        raise ValueError(f"{trace.label or 'the log'}: too few servo samples to fit ({fit_mask.sum()}) and check "
                         f"({hold_mask.sum()}); record a longer excitation")
    x0 = start.vector()
    measured = trace.servo[fit_mask]
    count = [0]

    # ----- stage 1: least squares on the smoothed model (parameters relative to the start) -----
    scale = np.array([x0[0], max(x0[1], 1e-7), max(x0[2], 1e-4), x0[3], 0.05, 0.001, 0.001])
    rel = np.array([True, True, True, True, False, False, False])
    bounds = np.array(RANGES)
    lo = np.where(rel, bounds[:, 0] * x0, bounds[:, 0]) / scale
    hi = np.where(rel, bounds[:, 1] * x0, bounds[:, 1]) / scale
    steps = np.array([1e-2, 3e-2, 1e-2, 1e-2, 0.02, 0.05, 0.05])    # finite-difference steps, scaled units
    cache: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def batch(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = z.tobytes()
        if key not in cache:
            zs = np.vstack([z] + [z + np.eye(len(z))[i] * np.where(z[i] + steps[i] < hi[i], steps[i], -steps[i])
                                  for i in range(len(z))])
            sim = simulate_loop(trace, zs * scale, start, loop, until=split)
            count[0] += len(zs)
            res = sim[:, fit_mask] - measured
            dz = np.array([zs[i + 1, i] - z[i] for i in range(len(z))])
            cache.clear()
            cache[key] = (res[0], ((res[1:] - res[0]) / dz[:, None]).T)
        return cache[key]

    z0 = np.clip(x0 / scale, lo + 1e-9, hi - 1e-9)
    sol = least_squares(lambda z: batch(z)[0], z0, jac=lambda z: batch(z)[1], bounds=(lo, hi), method="trf",
                        x_scale="jac", max_nfev=40, xtol=1e-6, ftol=1e-8)
    x = sol.x * scale

    # ----- stage 2: differential evolution on the exact model ---------------------------------
    if generations > 0:
        d_lo = np.where(rel, np.log(np.maximum(bounds[:, 0], 1e-300)), bounds[:, 0])
        d_hi = np.where(rel, np.log(bounds[:, 1]), bounds[:, 1])
        # a delay that does not enter is not searched (a dimension the search would spend its
        # population on): the read delay when the states' ticks are known — it is then the states'
        # mean age at the samples, for a virtual rig that reads at the samples' times. (The link's
        # delay still enters when every target was timed: a POWER frame is not, nor a late target.)
        for i, value in _fixed_delays(trace).items():
            d_lo[i] = d_hi[i] = x[i] = value

        def to_x(Z: np.ndarray) -> np.ndarray:
            X = np.empty_like(Z)
            X[:, :4] = x0[:4] * np.exp(Z[:, :4])
            X[:, 4:] = Z[:, 4:]
            return X

        def cost(Z: np.ndarray) -> np.ndarray:                      # Z: (7, S), the population at once
            X = to_x(np.atleast_2d(Z.T))
            count[0] += len(X)
            r = simulate_loop(trace, X, start, loop, until=split, exact=True)[:, fit_mask] - measured
            return np.mean(r * r, axis=1)

        z_ls = np.r_[np.log(np.maximum(x[:4], 1e-30) / x0[:4]), x[4:]]
        z_ls = np.clip(z_ls, d_lo, d_hi)
        best = min((_search(cost, z_ls, x, d_lo, d_hi, generations, seed + k) for k in range(max(1, searches))),
                   key=lambda de: de.fun)
        x = to_x(best.x[None])[0]
        # the rig shows only the PWM step the dead band is in: its middle
        x[4] = 0.5 * sum(dead_band_step(float(x[4]), loop))

    # ----- identifiability and confidence: the smoothed model's Jacobian at the result ----------
    # The residuals are not independent (model error is slow): the covariance is inflated by the
    # number of samples per independent one, from the residuals' autocorrelation time.
    z = np.clip(x / scale, lo + 1e-9, hi - 1e-9)
    res, jac = batch(z)
    _, sv, vt = np.linalg.svd(jac, full_matrices=False)
    null = sv < NULL_RATIO * sv[0]
    blind = np.zeros(len(z), dtype=bool)
    for row in vt[null]:
        blind |= np.abs(row) > 0.1
    sigma2 = float(res @ res) / max(len(res) - len(z), 1)
    ci = np.full(len(z), np.nan)
    cov_full = np.full((len(z), len(z)), np.nan)
    if (~blind).any():
        jg = jac[:, ~blind]
        cov = sigma2 * correlation_length(res) * np.linalg.pinv(jg.T @ jg)
        sel = np.flatnonzero(~blind)
        cov_full[np.ix_(sel, sel)] = cov * np.outer(scale[sel], scale[sel])
        ci[~blind] = 1.96 * np.sqrt(np.maximum(np.diag(cov_full)[~blind], 0.0))
    # the log cannot tell a dead band closer than half a PWM step (every one within a step gives the
    # rig the same motion): its interval is never narrower
    i_db = PARAMETERS.index("dead_band")
    if not blind[i_db]:
        ci[i_db] = max(ci[i_db], 0.5 * loop.pwm_step)
    # relative to the value found, or to the data sheet's where that is smaller: a value far above
    # the data sheet's (the viscous friction at 4x) must not look well known for being large
    ref = np.where(rel, np.minimum(np.abs(x), np.abs(x0)), np.abs(x))
    vague = ~blind & (ci > MAX_RELATIVE_CI * np.maximum(ref, _FLOOR))
    unknown = blind | vague
    # the model for predictions keeps every fitted value (the best estimate, even where one alone is open)
    fitted = start.with_vector(x)
    # the delays' sum (the round trip) is better known than their split
    i_d, i_u = PARAMETERS.index("delay_down"), PARAMETERS.index("delay_up")
    var_sum = cov_full[i_d, i_d] + cov_full[i_u, i_u] + 2 * cov_full[i_d, i_u]
    ci_sum = 1.96 * math.sqrt(var_sum) if np.isfinite(var_sum) and var_sum >= 0 else math.nan
    total = float(x[i_d] + x[i_u])
    sum_known = bool(np.isfinite(ci_sum) and ci_sum <= MAX_RELATIVE_CI * max(total, _FLOOR[i_d]))
    # held-out prediction from the start of the log (the state runs through the fitted part)
    both = simulate_loop(trace, np.vstack([x0, fitted.vector()]), start, loop, exact=True)
    rb, mb = prediction_error(trace, both[0], hold_mask)
    ra, ma = prediction_error(trace, both[1], hold_mask)
    rf, _ = prediction_error(trace, both[1], fit_mask)
    params = tuple(FitParam(n, None if unknown[i] else float(x[i]), None if unknown[i] else float(ci[i]),
                            float(x0[i]), not bool(unknown[i])) for i, n in enumerate(PARAMETERS))
    params += (FitParam("delay_total", total if sum_known else None, ci_sum if sum_known else None,
                        float(x0[i_d] + x0[i_u]), sum_known),
               FitParam("resistance", start.resistance, None, start.resistance, False, fixed=True))
    why = []
    # the link's delays that do not enter at all, and why (the rig's clock in the trace)
    on_grid = trace.on_rig_ticks
    timed = trace.t_apply is not None and bool(np.isfinite(trace.t_apply).any())
    known_why = {}
    if on_grid and blind[i_u]:
        known_why["delay_up"] = "the states carry the rig's clock: the tick each angle was taken at is known"
    if timed and blind[i_d]:
        known_why["delay_down"] = "the targets were timed (each applied at its stamp) and no POWER frame went out"
    for n, reason in known_why.items():
        why.append(f"{n}: does not enter ({reason})")
    if any(b and n not in known_why for n, b in zip(PARAMETERS, blind)):
        names = ", ".join(n for n, b in zip(PARAMETERS, blind) if b and n not in known_why)
        why.append(f"{names}: the log determines only combinations of them (a power cut that lets the motor "
                   f"coast separates inertia, friction and motor constant)")
    if vague.any():
        names = ", ".join(f"{n} (±{100 * c / max(v, f):.0f} %)" for n, b, c, v, f in
                          zip(PARAMETERS, vague, ci, ref, _FLOOR) if b)
        why.append(f"{names}: the log leaves them open by more than ±{100 * MAX_RELATIVE_CI:.0f} % (95 %)")
    return FitReport(trace.label, params, fitted, float(split), rb, mb, ra, ma, rf, time.perf_counter() - t0,
                     count[0], "; ".join(why))


def _fixed_delays(trace: Trace) -> dict[int, float]:
    """The delays the trace leaves nothing to fit for, by their index in :data:`PARAMETERS`, with the
    value to keep (:func:`fit_motor`)."""
    out = {}
    if trace.on_rig_ticks:
        age = trace.t - trace.t_taken
        out[PARAMETERS.index("delay_up")] = float(min(max(np.nanmean(age), 0.0), RANGES[6][1]))
    return out


def _search(cost, z_ls: np.ndarray, x: np.ndarray, d_lo: np.ndarray, d_hi: np.ndarray, generations: int, seed: int):
    """One differential-evolution search of :func:`fit_motor`'s second stage (SciPy's result)."""
    from scipy.optimize import differential_evolution

    rng = np.random.default_rng(seed)
    pop = 8 * len(x)
    # The population starts around the least-squares result, as wide as that result's errors
    # can be (:data:`_DE_SPREAD`), not over the whole box: the exact cost is rugged (a motor
    # held in the dead band breaks away when its integrator reaches a PWM step, a moment the
    # slightest change of a parameter moves), and a population drawn over the whole box
    # spends its generations far away — the search ended a PWM step off in the dead band.
    # The dead band and the delays, which the first stage gets worst, are drawn from zero up.
    init = z_ls + _DE_SPREAD * (2.0 * rng.random((pop, len(x))) - 1.0)
    init[:, 4] = rng.uniform(0.0, min(d_hi[4], max(3.0 * x[4], 0.5)), pop)
    init[:, 5:] = rng.uniform(0.0, np.minimum(d_hi[5:], np.maximum(2.0 * x[5:], 0.005)), (pop, 2))
    init = np.clip(init, d_lo, d_hi)
    init[0] = z_ls
    return differential_evolution(cost, list(zip(d_lo, d_hi)), init=init, vectorized=True, maxiter=generations,
                                  tol=1e-7, polish=False, seed=seed, updating="deferred")


def correlation_length(res: np.ndarray) -> float:
    """Samples per independent one in a residual series: 1 + 2 Σ autocorrelation (up to its first
    zero), at least 1."""
    r = res - res.mean()
    n = len(r)
    if n < 4 or not np.any(r):
        return 1.0
    f = np.fft.rfft(r, 2 * n)
    ac = np.fft.irfft(f * np.conj(f))[:n]
    ac /= ac[0]
    neg = np.flatnonzero(ac <= 0)
    stop = int(neg[0]) if len(neg) else n
    return float(max(1.0, 1.0 + 2.0 * ac[1:stop].sum()))


# ----- parameter files (shared with the emulator's --motor-params) ------------------------------
_FILE_KEYS = ("rotor_inertia", "load_inertia", "coulomb_friction", "viscous_friction", "no_load_rpm", "resistance",
              "gear_ratio", "encoder_cpr", "nominal_voltage", "dead_band", "delay_down", "delay_up")


def write_params_file(path, fit: MotorFit, *, comment: str = "") -> None:
    """Write ``fit`` as ``name = value`` lines (TOML), the format ``rig_emulator --motor-params`` reads."""
    m = fit.motor_params()
    values = {"rotor_inertia": m.rotor_inertia, "load_inertia": m.load_inertia, "coulomb_friction": m.coulomb_friction,
              "viscous_friction": m.viscous_friction, "no_load_rpm": m.no_load_rpm, "resistance": m.resistance,
              "gear_ratio": m.gear_ratio, "encoder_cpr": m.encoder_cpr, "nominal_voltage": m.nominal_voltage,
              "dead_band": fit.dead_band, "delay_down": fit.delay_down, "delay_up": fit.delay_up}
    lines = [f"# {line}" for line in comment.splitlines()] if comment else []
    lines += [f"{k} = {float(values[k])!r}" if k != "encoder_cpr" else f"{k} = {int(values[k])}" for k in _FILE_KEYS]
    lines.insert(len(lines) - 2, "# the link's transport delays, s (the host's virtual rig uses them; the emulator has "
                                 "its own link)")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def read_motor_fit(path) -> MotorFit:
    """The whole fitted loop from a file :func:`write_params_file` wrote: the motor, the dead band
    and the link's delays (0 when the file has none) — what a
    :class:`~armtwin.controllers.virtual_rig.VirtualServo` needs.

    Raises:
        ValueError: as :func:`read_params_file`.
    """
    motor, dead, (down, up) = _read_params(path)
    return MotorFit.of(motor, dead_band=dead, delay_down=down, delay_up=up)


def read_params_file(path) -> tuple[MotorParams, float]:
    """(motor, dead band V) from a file :func:`write_params_file` wrote (unknown keys are an error).

    Raises:
        ValueError: a line that is not ``name = number``, an unknown name, or invalid values.
    """
    motor, dead, _ = _read_params(path)
    return motor, dead


def _read_params(path) -> tuple[MotorParams, float, tuple[float, float]]:
    import tomllib
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not a motor parameter file ({exc})") from None
    unknown = sorted(set(data) - set(_FILE_KEYS))
    if unknown:
        raise ValueError(f"{path}: unknown parameter(s) {', '.join(unknown)}; known: {', '.join(_FILE_KEYS)}")
    for k, v in data.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{path}: {k} must be a finite number, got {v!r}")
    dead = float(data.pop("dead_band", 0.0))
    if dead < 0:
        raise ValueError(f"{path}: dead_band must be >= 0 V, got {dead}")
    delays = (float(data.pop("delay_down", 0.0)), float(data.pop("delay_up", 0.0)))
    if min(delays) < 0 or max(delays) > 1.0:
        raise ValueError(f"{path}: delay_down and delay_up must be from 0 to 1 s, got {delays[0]}, {delays[1]}")
    kwargs: dict = {k: (int(v) if k == "encoder_cpr" else float(v)) for k, v in data.items()}
    try:
        motor = replace(RIG_MOTOR, **kwargs)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return motor, dead, delays


# ----- the excitation (``armtwin rig identify``) --------------------------------------------------
@dataclass(frozen=True)
class Excitation:
    """A commanded angle over time that makes the motor's parameters visible, for one rig joint.

    Attributes:
        t: (K,) times, s, at the sync rate.
        angle: (K,) commanded angle, deg, relative to where the joint starts.
        power: {sample index: power on?} — where the motor supply is cut and restored (coast-downs).
        phases: (name, start s, end s) of the parts, for people and plots.
    """

    t: np.ndarray
    angle: np.ndarray
    power: dict = field(default_factory=dict)
    phases: tuple = ()

    @property
    def peak_speed(self) -> float:
        """Largest commanded speed, deg/s."""
        return float(np.max(np.abs(np.diff(self.angle) / np.diff(self.t))))


def _excitation_pass(t: np.ndarray, seconds: float, amplitude_deg: float, max_speed_deg_s: float,
                     power_cuts: int, max_accel_deg_s2: float | None = None) -> tuple[np.ndarray, dict[int, bool]]:
    """One pass of :func:`excitation` over times ``t`` (from 0, ``seconds`` long)."""
    n = len(t)
    dt = t[1] - t[0]
    a = np.zeros(n)
    t_chirp, t_slow = 0.45 * seconds, 0.30 * seconds
    t2 = t_chirp + t_slow

    def k(time_s: float) -> int:
        return min(int(round(time_s / dt)), n)

    # 1. chirp
    tc = t[:k(t_chirp)]
    f0, f1 = 0.2, 3.0
    phase = 2 * np.pi * (f0 * tc + 0.5 * (f1 - f0) / t_chirp * tc * tc)
    freq = f0 + (f1 - f0) * tc / t_chirp
    amp = np.minimum(amplitude_deg, 0.9 * max_speed_deg_s / (2 * np.pi * freq))
    if max_accel_deg_s2 is not None:
        amp = np.minimum(amp, 0.9 * max_accel_deg_s2 / (2 * np.pi * freq) ** 2)
    env = np.clip(np.minimum(tc, t_chirp - tc) / min(1.0, 0.2 * t_chirp), 0.0, 1.0)
    a[:len(tc)] = amp * env * np.sin(phase)
    # 2. ramps, then steps, each leg moving from the last position to the next level at its speed
    span = min(amplitude_deg, 10.0)
    plan = [(f * span, v) for f, v in ((-0.5, 5.0), (0.5, 5.0), (-0.5, 15.0), (0.5, 15.0), (-1.0, 60.0), (1.0, 60.0),
                                       (0.0, 60.0))]
    plan += [(level, max_speed_deg_s) for level in (2.0, -2.0, 4.0, -4.0, 0.0)]
    seg = t_slow / len(plan)
    pos = 0.0
    for i, (target, speed) in enumerate(plan):
        lo, hi = k(t_chirp + i * seg), k(t_chirp + (i + 1) * seg)
        steps = np.arange(1, hi - lo + 1) * dt * min(speed, max_speed_deg_s)
        a[lo:hi] = pos + np.sign(target - pos) * np.minimum(steps, abs(target - pos))
        pos = float(a[hi - 1]) if hi > lo else pos
    # 3. coast-downs: cosine swings, the supply cut at the fastest point
    power: dict[int, bool] = {}
    if power_cuts:
        per = (seconds - t2) / power_cuts
        sweep = min(amplitude_deg, 0.9 * max_speed_deg_s * per / (2 * np.pi))
        for c in range(power_cuts):
            lo, hi = k(t2 + c * per), k(t2 + (c + 1) * per)
            ks = np.arange(hi - lo) * dt
            a[lo:hi] = (1.0 if c % 2 == 0 else -1.0) * sweep * 0.5 * (1 - np.cos(2 * np.pi * ks / per))
            cut = lo + k(0.25 * per)
            power[cut] = False
            power[min(cut + k(min(1.0, 0.45 * per)), n - 1)] = True
    a[-1] = 0.0
    return a, power


def _rate_limited(ref: np.ndarray, dt: float, vmax: float, amax: float) -> np.ndarray:
    """``ref`` (deg, one sample every ``dt`` s) followed as closely as a joint can that keeps its
    sample-to-sample speed within ``vmax`` and its speed's change within ``amax``·dt: it closes in
    on the reference at the speed from which braking at ``amax`` ends exactly on it, and follows
    it sample for sample once there (while the reference keeps within the limits)."""
    x = np.empty_like(ref)
    x[0] = ref[0]
    v, r_prev, du = 0.0, float(ref[0]), amax * dt
    for k in range(1, len(ref)):
        r = float(ref[k])
        rv = min(max((r - r_prev) / dt, -vmax), vmax)
        r_prev = r
        e = r - x[k - 1]
        u = min(0.5 * (math.sqrt(du * du + 8.0 * amax * abs(e)) - du), abs(e) / dt)
        want = rv + math.copysign(u, e)
        v = min(max(v + min(max(want - v, -du), du), -vmax), vmax)
        x[k] = x[k - 1] + v * dt
    return x


def excitation(seconds: float = 60.0, *, rate_hz: float = 500.0, amplitude_deg: float = 45.0,
               max_speed_deg_s: float = 600.0, power_cuts: int = 3, fit_fraction: float = 0.7,
               max_accel_deg_s2: float | None = None) -> Excitation:
    """The identification program: two passes (the first ``fit_fraction`` of the time, then the
    rest), so that the part a fit uses and the part it is checked on each hold everything. A pass,
    from rest:

    1. (45 %) a chirp, 0.2 → 3 Hz, amplitude ``amplitude_deg`` (less where the speed cap bites),
       faded in and out: inertia and back-EMF;
    2. (30 %) ramps at ±5, ±15, ±60 deg/s (friction against speed), then steps of 2 and 4 deg taken
       at the speed cap (the dead band and stiction hold small errors back);
    3. (25 %) coast-downs (``power_cuts`` in the first pass, one in the second): a cosine swing, the
       supply cut for up to 1 s at its fastest and restored — the motor coasts on friction alone,
       which separates inertia, friction and motor constant.

    Everything stays within ±``amplitude_deg`` of the start and at or below ``max_speed_deg_s``
    (the rig's motor does 870 deg/s at 12 V), and each pass ends at rest where it started. With
    ``max_accel_deg_s2`` the chirp's amplitude is lowered where ``amplitude · (2πf)²`` would exceed
    it, and the whole program goes through a second-order rate limiter (the ramps' and steps'
    corners rounded): from sample to sample no speed exceeds ``max_speed_deg_s`` and no change of
    speed ``max_accel_deg_s2`` × the sample period, so a hardware joint is never asked for more.

    Raises:
        ValueError: seconds < 20, or non-positive rate, amplitude, speed or acceleration, or a bad
            fit_fraction.
    """
    if not (seconds >= 20.0 and rate_hz > 0 and amplitude_deg > 0 and max_speed_deg_s > 0 and power_cuts >= 0
            and 0.5 <= fit_fraction <= 0.9 and (max_accel_deg_s2 is None or max_accel_deg_s2 > 0)):
        raise ValueError("excitation needs seconds >= 20, rate_hz, amplitude_deg, max_speed_deg_s (and "
                         "max_accel_deg_s2, if given) > 0, power_cuts >= 0 and fit_fraction in [0.5, 0.9]")
    dt = 1.0 / rate_hz
    n = int(round(seconds * rate_hz)) + 1
    t = np.arange(n) * dt
    n1 = int(round(fit_fraction * seconds * rate_hz))
    a1, p1 = _excitation_pass(t[:n1], n1 * dt, amplitude_deg, max_speed_deg_s, power_cuts, max_accel_deg_s2)
    a2, p2 = _excitation_pass(t[:n - n1], (n - n1) * dt, amplitude_deg, max_speed_deg_s, min(power_cuts, 1),
                              max_accel_deg_s2)
    angle = np.concatenate([a1, a2])
    if max_accel_deg_s2 is not None:
        angle = _rate_limited(angle, dt, max_speed_deg_s, max_accel_deg_s2)
        peak = float(np.max(np.abs(angle)))
        if peak > amplitude_deg:       # the limiter's lag may overshoot a turn: scale it back (slower, gentler)
            angle *= amplitude_deg / peak
    power = {**p1, **{k + n1: on for k, on in p2.items()}}
    split = n1 * dt
    phases = (("first pass (fit)", 0.0, split), ("second pass (check)", split, float(t[-1])))
    return Excitation(t, angle, power, phases)


def virtual_rig_log(exc: Excitation, motor: MotorParams = RIG_MOTOR, *, dead_band: float = 0.0,
                    delay_down: float = 0.0015, delay_up: float = 0.0015, loop: LoopConfig = LoopConfig(),
                    label: str = "j1", lead: float | None = None) -> Trace:
    """The twin log a rig would give for ``exc``: a plain, firmware-faithful loop (no smoothing).

    The host sends whole-pulse targets (and the excitation's power cuts) at the excitation's
    samples; each reaches the rig ``delay_down`` s later; the rig runs the firmware's loop in its
    own integers (:func:`firmware_duty`), the H-bridge dead band (no current below ``dead_band``
    V) and :class:`~armtwin.controllers.servo.DCMotor` (0.1 ms Euler steps) at ``control_hz``;
    the host logs the encoder count it had ``delay_up`` s earlier, and ``POWER`` while the supply
    is cut — :class:`~armtwin.controllers.virtual_rig.VirtualServo` fed sample by sample, its motor
    starting in the middle of a count. The trace knows the power commands (``power_sent``), as
    ``armtwin rig identify`` does. ``lead``: timed targets (MODE flag TIMED), each stamped for its
    sample's time + ``lead`` (the trace's ``t_apply``). A separate implementation of
    :func:`simulate_loop`'s exact form (sample by sample instead of vectorised), so it can check it.
    """
    from .virtual_rig import VirtualServo
    servo = VirtualServo(MotorFit.of(motor, dead_band=dead_band, delay_down=delay_down, delay_up=delay_up), loop,
                         start_deg=0.5 / loop.pulses_per_deg)
    tgt = np.rint(exc.angle * loop.pulses_per_deg)
    angle = np.empty(len(exc.t))
    powered = np.empty(len(exc.t), dtype=bool)
    for k, t in enumerate(exc.t):
        if k in exc.power:
            servo.power(exc.power[k], float(t))
        servo.target(tgt[k], float(t), lead)
        angle[k] = servo.angle_at(float(t))
        powered[k] = servo.powered
    sent = np.ones(len(exc.t), dtype=bool)
    for k in sorted(exc.power):
        sent[k:] = exc.power[k]
    return Trace(exc.t.copy(), exc.angle.copy(), angle, powered, label, power_sent=sent,
                 t_apply=None if lead is None else exc.t + lead)


def rig_clock_times(arrival: np.ndarray, rig_us: np.ndarray, *, wire_s: float = 0.0, windows: int = 20) -> np.ndarray:
    """When each state was taken, on the host's clock, from the rig's own clock: better than its
    arrival, which the wire and the host's scheduling delay by a varying amount (0.5 ms sd, spikes
    of 15 ms on a quiet machine).

    The rig stamps every state with its clock (µs, a 32-bit counter that wraps; its crystal runs
    at its own rate). A state cannot arrive before it was taken, and the fastest arrivals show the
    wire alone, so the lower envelope of ``arrival − rig time`` maps one clock onto the other: a
    line (offset and drift) fitted through the lowest point of each of ``windows`` stretches, then
    lowered until no state arrives before its mapped time, and moved back by the wire time of a
    state frame: what is left is the host's least read latency (tens of µs).

    Args:
        arrival: (K,) when each sample's state reached the host, s (NaN: none).
        rig_us: (K,) that state's rig clock, µs (NaN: none).
        wire_s: a state frame's time on the wire, s (its bytes × 10 bits / baud rate).
        windows: stretches for the envelope.

    Returns:
        (K,) when the states were taken, on the host's clock, s (NaN where either input is); ``arrival``
        itself when fewer than 4 states per window are known or the rig's clock ran backwards (it
        rebooted).
    """
    got = _rig_clock_line(arrival, rig_us, wire_s, windows)
    if got is None:
        return np.asarray(arrival, dtype=float)
    ok, r, offset, drift = got
    out = np.full(len(ok), np.nan)
    out[ok] = r + offset + drift * r
    return out


def _rig_clock_line(arrival, rig_us, wire_s: float, windows: int):
    """:func:`rig_clock_times`' map: (which states are known, their unwrapped rig times in s, offset,
    drift), host = r + offset + drift·r; None when it cannot be made."""
    arrival = np.asarray(arrival, dtype=float)
    rig = np.asarray(rig_us, dtype=float)
    ok = np.isfinite(arrival) & np.isfinite(rig)
    if ok.sum() < 4 * windows:
        return None
    r = rig[ok]
    step = np.diff(r)
    step = np.where(step < -2.0 ** 31, step + 2.0 ** 32, step)  # the counter wrapped
    if np.any(step < 0):
        return None
    r = (r[0] + np.r_[0.0, np.cumsum(step)]) * 1e-6
    d = arrival[ok] - r
    lows = [int(k[np.argmin(d[k])]) for k in np.array_split(np.arange(len(r)), windows)]
    drift, offset = np.polyfit(r[lows], d[lows], 1)
    offset += float(np.min(d - (offset + drift * r))) - wire_s
    return ok, r, float(offset), float(drift)


def rig_time_base(t: np.ndarray, arrival: np.ndarray, rig_us: np.ndarray, stamp_us: np.ndarray | None = None, *,
                  wire_s: float = 0.0, windows: int = 20) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
    """A run's times on the rig's own clock, s: the clock the model should tick on.

    The firmware acts on its clock alone — it ticks every 1/control_hz of it, stamps each state
    with the tick it was taken at, and applies a timed target at the tick at or after its stamp,
    extrapolated by the µs between the two — so on that clock the model's ticks, the states' reads
    and the targets' times are exact. Mapped onto the host's clock instead (:func:`rig_clock_times`),
    a drift estimate wrong by 1 ppm moves them 60 µs against the model's ticks over a minute: a
    target then applies a tick off, or is extrapolated 60 µs wrong. Only the host's own times (the
    samples: an untimed target's arrival, a power command) need the map, host → rig: the lower
    envelope of :func:`rig_clock_times`, inverted.

    Args:
        t: (K,) the samples' times on the host's clock, s.
        arrival, rig_us: (K,) per sample, when its state reached the host (s) and its ``t_us``.
        stamp_us: (K,) per sample, the rig-clock time its timed target was stamped for, µs (NaN:
            none), or None.
        wire_s, windows: as :func:`rig_clock_times`.

    Returns:
        (the samples' times, the states' times (NaN: none), the stamps' times or None), s on the
        rig's clock (unwrapped: the counter wraps every 71.6 min); None when the map cannot be made
        (too few states, a rig clock that went back).
    """
    got = _rig_clock_line(arrival, rig_us, wire_s, windows)
    if got is None:
        return None
    ok, r, offset, drift = got
    t_rig = (np.asarray(t, dtype=float) - offset) / (1.0 + drift)
    taken = np.full(len(ok), np.nan)
    taken[ok] = r
    if stamp_us is None:
        return t_rig, taken, None
    # each stamp unwrapped against its own sample's state, or the newest before it (within ±35 min)
    stamp = np.asarray(stamp_us, dtype=float)
    rig = np.asarray(rig_us, dtype=float)
    idx = np.maximum.accumulate(np.where(ok, np.arange(len(ok)), -1))
    idx[idx < 0] = int(np.flatnonzero(ok)[0])
    has = np.isfinite(stamp)
    d = np.mod(stamp[has] - rig[idx[has]] + 2.0 ** 31, 2.0 ** 32) - 2.0 ** 31
    apply = np.full(len(stamp), np.nan)
    apply[has] = taken[idx[has]] + d * 1e-6
    return t_rig, taken, apply


def traces_of(log, labels=None) -> list[Trace]:
    """The joints of a twin log read by :func:`armtwin.envs.rig.read_twin_log` (a mapping of columns
    ``Time``, ``Virtual_<j>``, ``Servo_<j>``, ``Fault``) as :class:`Trace` objects.

    Rows whose time repeats the one before are dropped (the log allows them; the loop model needs
    time to move). A sample is unpowered when its ``Fault`` names ``POWER``.

    Args:
        log: the columns.
        labels: joint labels to take (default: every joint of the log).

    Raises:
        ValueError: an unknown label, or fewer than two samples.
    """
    known = [c[len("Virtual_"):] for c in log if c.startswith("Virtual_")]
    labels = list(known if labels is None else labels)
    bad = [l for l in labels if l not in known]
    if bad:
        raise ValueError(f"the log has no joint {', '.join(bad)}; it has {', '.join(known)}")
    t = np.asarray(log["Time"], dtype=float)
    keep = np.r_[True, np.diff(t) > 0]
    powered = np.array(["POWER" not in str(f).split("|") for f in log["Fault"]], dtype=bool)
    return [Trace(t[keep], np.asarray(log[f"Virtual_{l}"], float)[keep], np.asarray(log[f"Servo_{l}"], float)[keep],
                  powered[keep], l) for l in labels]
