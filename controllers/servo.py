"""The servo rig's units and a DC gear-motor model (docs/RIG.md, "The motor").

Conversions:
    * encoder pulses ↔ output degrees: 500 CPR × 27 / 360 = 37.5 pulses per degree
      (one count per encoder cycle: the firmware interrupts on channel A's rising edge
      and reads channel B for the direction).
    * volts ↔ 8-bit PWM: pwm = U × 255 / 12 = U × 21.25, clamped to ±255.

:class:`DCMotor` models the rig's motor: armature resistance, back-EMF, rotor inertia,
Coulomb + viscous friction (with stiction), a 1:27 gearbox, the supply voltage as a hard
voltage limit, and a power switch (power cut = open H-bridge: no current, the motor
coasts down on friction). The torque constant is derived from the data sheet figure
"145 rpm at the output at 12 V, no load", so the model meets it by construction.
The firmware core (``firmware/servo_rig/rig_core.cpp``) carries the same model for the
rig emulator.

Units: V, A, Ω, rad, rad/s, N·m, kg·m², s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "PULSES_PER_DEG", "PWM_PER_VOLT", "PWM_MAX", "SUPPLY_V",
    "pulses_to_deg", "deg_to_pulses", "volts_to_pwm", "pwm_to_volts",
    "MotorParams", "DCMotor", "RIG_MOTOR",
]

ENCODER_CPR = 500  # counts per motor revolution (x1 decoding)
GEAR_RATIO = 27.0
PULSES_PER_DEG = ENCODER_CPR * GEAR_RATIO / 360.0  # 37.5 pulses per output degree
SUPPLY_V = 12.0  # V
PWM_MAX = 255
PWM_PER_VOLT = PWM_MAX / SUPPLY_V  # 21.25


def pulses_to_deg(pulses):
    """Encoder pulses -> output shaft degrees (float, or float array for an array)."""
    if np.isscalar(pulses):
        return float(pulses) / PULSES_PER_DEG
    return np.asarray(pulses, dtype=float) / PULSES_PER_DEG


def deg_to_pulses(deg):
    """Output shaft degrees -> encoder pulses, rounded to whole pulses (int or int array)."""
    if np.isscalar(deg):
        return int(round(float(deg) * PULSES_PER_DEG))
    return np.rint(np.asarray(deg, dtype=float) * PULSES_PER_DEG).astype(np.int64)


def volts_to_pwm(volts):
    """Volts -> 8-bit PWM duty (U × 21.25, rounded, clamped to ±255)."""
    if np.isscalar(volts):
        return int(max(-PWM_MAX, min(PWM_MAX, round(float(volts) * PWM_PER_VOLT))))
    return np.clip(np.rint(np.asarray(volts, dtype=float) * PWM_PER_VOLT), -PWM_MAX, PWM_MAX).astype(np.int64)


def pwm_to_volts(pwm):
    """8-bit PWM duty -> volts at the nominal 12 V supply."""
    if np.isscalar(pwm):
        return float(pwm) / PWM_PER_VOLT
    return np.asarray(pwm, dtype=float) / PWM_PER_VOLT


@dataclass(frozen=True)
class MotorParams:
    """A brushed DC gear motor.

    Attributes:
        nominal_voltage: V at which ``no_load_rpm`` is reached.
        no_load_rpm: output-shaft speed at ``nominal_voltage`` without load, rpm.
        gear_ratio: motor turns per output turn.
        encoder_cpr: encoder counts per motor turn (as the firmware counts them).
        resistance: armature resistance, Ω.
        rotor_inertia: motor-side inertia (rotor + gears), kg·m².
        load_inertia: inertia on the output shaft, kg·m².
        coulomb_friction: motor-side Coulomb friction torque, N·m (also the stiction level).
        viscous_friction: motor-side viscous friction, N·m·s/rad.
    """

    nominal_voltage: float = 12.0
    no_load_rpm: float = 145.0
    gear_ratio: float = 27.0
    encoder_cpr: int = 500
    resistance: float = 2.0
    rotor_inertia: float = 4.0e-6
    load_inertia: float = 2.0e-4
    coulomb_friction: float = 3.0e-3
    viscous_friction: float = 2.0e-6

    def __post_init__(self) -> None:
        for name in ("nominal_voltage", "no_load_rpm", "gear_ratio", "resistance", "rotor_inertia"):
            if not (getattr(self, name) > 0):
                raise ValueError(f"MotorParams.{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("load_inertia", "coulomb_friction", "viscous_friction"):
            if not (getattr(self, name) >= 0):
                raise ValueError(f"MotorParams.{name} must be >= 0, got {getattr(self, name)!r}")
        if int(self.encoder_cpr) != self.encoder_cpr or self.encoder_cpr < 1:
            raise ValueError(f"MotorParams.encoder_cpr must be a whole number >= 1, got {self.encoder_cpr!r}")
        if self.motor_constant <= 0:
            raise ValueError("MotorParams: friction too high to reach the no-load speed at the nominal voltage")

    @property
    def no_load_speed(self) -> float:
        """Motor-side no-load speed at the nominal voltage, rad/s."""
        return self.no_load_rpm * self.gear_ratio * 2 * math.pi / 60.0

    @property
    def motor_constant(self) -> float:
        """k = Kt = Ke (N·m/A = V·s/rad) so that the no-load speed is met exactly.

        At no load k·ω = V − R·(Tc + b·ω)/k, i.e. k²·ω − V·k + R·(Tc + b·ω) = 0 (larger root).
        """
        w, v, r = self.no_load_speed, self.nominal_voltage, self.resistance
        disc = v * v - 4 * w * r * (self.coulomb_friction + self.viscous_friction * w)
        if disc < 0:
            return -1.0
        return (v + math.sqrt(disc)) / (2 * w)

    @property
    def inertia(self) -> float:
        """Total inertia seen by the motor shaft, kg·m²."""
        return self.rotor_inertia + self.load_inertia / self.gear_ratio ** 2

    @property
    def pulses_per_deg(self) -> float:
        """Encoder pulses per output degree (37.5 for the rig)."""
        return self.encoder_cpr * self.gear_ratio / 360.0


#: The rig's motor (docs/RIG.md): 12 V, 1:27, 145 rpm, 500 CPR.
RIG_MOTOR = MotorParams()


class DCMotor:
    """A DC gear motor driven by a voltage, integrated with fixed sub-steps.

    Args:
        params: the motor.
        supply: supply voltage, V (the voltage limit).
        substep: integration step, s.
    """

    def __init__(self, params: MotorParams = RIG_MOTOR, *, supply: float = SUPPLY_V, substep: float = 1e-4) -> None:
        if not (supply >= 0 and substep > 0):
            raise ValueError(f"supply must be >= 0 V and substep > 0 s, got {supply}, {substep}")
        self.params = params
        self.supply = float(supply)
        self.substep = float(substep)
        self.powered = True
        self.theta = 0.0  # motor shaft angle, rad
        self.omega = 0.0  # motor shaft speed, rad/s
        self.current = 0.0  # A
        self.voltage = 0.0  # applied terminal voltage, V

    # ----- derived outputs ------------------------------------------------------------
    @property
    def output_angle(self) -> float:
        """Output-shaft angle, rad."""
        return self.theta / self.params.gear_ratio

    @property
    def output_speed(self) -> float:
        """Output-shaft speed, rad/s."""
        return self.omega / self.params.gear_ratio

    @property
    def output_rpm(self) -> float:
        """Output-shaft speed, rpm."""
        return self.output_speed * 60.0 / (2 * math.pi)

    @property
    def pulses(self) -> int:
        """Encoder count (x1 decoding: one count per encoder cycle), signed."""
        return math.floor(self.theta / (2 * math.pi) * self.params.encoder_cpr + 1e-9)

    def set_power(self, on: bool) -> None:
        """Switch the motor supply (power cut = open bridge, the motor coasts)."""
        self.powered = bool(on)

    # ----- dynamics -------------------------------------------------------------------
    def step(self, volts: float, dt: float) -> None:
        """Apply ``volts`` (clamped to ±supply) for ``dt`` seconds."""
        if not (math.isfinite(volts) and dt >= 0):
            raise ValueError(f"DCMotor.step needs finite volts and dt >= 0, got {volts}, {dt}")
        p = self.params
        k, r, j = p.motor_constant, p.resistance, p.inertia
        n = max(1, int(math.ceil(dt / self.substep - 1e-9)))
        h = dt / n
        for _ in range(n):
            if self.powered and self.supply > 0:
                v = min(max(volts, -self.supply), self.supply)
                self.voltage = v
                self.current = (v - k * self.omega) / r
            else:
                self.voltage = 0.0
                self.current = 0.0
            t_drive = k * self.current - p.viscous_friction * self.omega
            tc = p.coulomb_friction
            if abs(self.omega) < 1e-9 and abs(t_drive) <= tc:
                self.omega = 0.0  # stuck
                continue
            sgn = math.copysign(1.0, self.omega) if self.omega != 0.0 else math.copysign(1.0, t_drive)
            w_new = self.omega + h * (t_drive - tc * sgn) / j
            if self.omega != 0.0 and w_new * self.omega < 0:  # friction stops it within the step
                w_new = 0.0
            self.theta += 0.5 * (self.omega + w_new) * h
            self.omega = w_new
