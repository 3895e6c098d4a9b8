"""Rig units (pulses, PWM) and the DC gear-motor model, in Python and in the firmware core."""

import subprocess

import numpy as np
import pytest

from armtwin.controllers.servo import (PULSES_PER_DEG, RIG_MOTOR, DCMotor, MotorParams, deg_to_pulses,
                                       pulses_to_deg, pwm_to_volts, volts_to_pwm)


def test_pulses_per_degree_from_the_data():
    assert PULSES_PER_DEG == 500 * 27 / 360 == 37.5
    assert deg_to_pulses(90.0) == 3375
    assert pulses_to_deg(-3375) == -90.0
    np.testing.assert_array_equal(deg_to_pulses(np.array([0.0, 1.0, -2.0])), [0, 38, -75])  # 37.5 rounds to even


def test_pwm_conversion_and_clamp():
    assert volts_to_pwm(12.0) == 255
    assert volts_to_pwm(-12.0) == -255
    assert volts_to_pwm(30.0) == 255 and volts_to_pwm(-30.0) == -255
    assert volts_to_pwm(1.0) == 21  # 21.25 rounded
    assert pwm_to_volts(255) == pytest.approx(12.0)
    np.testing.assert_array_equal(volts_to_pwm(np.array([0.0, 6.0, 100.0])), [0, 128, 255])


def run_motor(volts, seconds, motor=None):
    m = motor or DCMotor()
    for _ in range(int(seconds * 1000)):
        m.step(volts, 1e-3)
    return m


def test_no_load_speed_at_12V_is_145_rpm():
    m = run_motor(12.0, 1.0)
    assert m.output_rpm == pytest.approx(145.0, rel=0.01)


def test_speed_scales_with_voltage_and_is_limited_by_the_supply():
    half = run_motor(6.0, 1.0).output_rpm
    assert 0.4 * 145 < half < 0.5 * 145  # friction takes a little more than half the drop
    over = run_motor(24.0, 1.0).output_rpm  # the supply (12 V) is the limit
    assert over == pytest.approx(145.0, rel=0.01)
    assert run_motor(-12.0, 1.0).output_rpm == pytest.approx(-145.0, rel=0.01)


def test_stiction_holds_below_breakaway_voltage():
    p = RIG_MOTOR
    v_break = p.resistance * p.coulomb_friction / p.motor_constant
    assert run_motor(0.8 * v_break, 0.5).pulses == 0
    assert run_motor(1.5 * v_break, 0.5).pulses > 0


def test_power_cut_stops_the_motor():
    m = run_motor(12.0, 0.5)
    m.set_power(False)
    run_motor(12.0, 1.0, m)  # commanded on, but no supply: coasts down on friction
    assert m.omega == 0.0 and m.current == 0.0
    p = m.pulses
    run_motor(12.0, 0.2, m)
    assert m.pulses == p
    m.set_power(True)
    run_motor(12.0, 0.5, m)
    assert m.output_rpm == pytest.approx(145.0, rel=0.01)


def test_encoder_counts_37_5_per_output_degree():
    m = DCMotor()
    m.theta = np.radians(90.0) * 27.0  # motor angle for 90° at the output
    assert m.pulses == 3375


def test_invalid_motor_params_raise():
    with pytest.raises(ValueError):
        MotorParams(resistance=0.0)
    with pytest.raises(ValueError):
        MotorParams(coulomb_friction=1.0)  # cannot reach 145 rpm any more


def test_firmware_motor_model_matches_python():
    from armtwin.envs.rig import build_emulator
    out = subprocess.run([build_emulator(), "--motor-trace", "7.5", "0.5"], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    m = DCMotor()
    for line in out[:51]:
        t, rpm, pulses = line.split()
        assert float(rpm) == pytest.approx(m.output_rpm, abs=1e-6)
        assert abs(int(pulses) - m.pulses) <= 1
        m.step(7.5, 0.01)
