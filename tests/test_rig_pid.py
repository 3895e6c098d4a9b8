"""PID (standard and published forms), and the firmware PID against the Python one."""

import math
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from armtwin.controllers.pid import PID, PIDForm, PIDGains, RIG_GAINS


def test_first_cycle_is_proportional_only():
    s = PID(RIG_GAINS).update(375.0, 0.0, 0.0)
    assert s.u == pytest.approx(0.01 * 375.0)
    assert s.i == 0.0 and s.d == 0.0 and s.dt == 0.0


def test_integral_accumulates():
    pid = PID(PIDGains(kp=0.0, ki=2.0))
    for k in range(11):
        s = pid.update(1.0, 0.0, 0.1 * k)
    assert s.i == pytest.approx(2.0 * 1.0 * 1.0)  # Ki · e · 1 s


@given(st.lists(st.tuples(st.floats(-1e5, 1e5), st.floats(-1e5, 1e5)), min_size=1, max_size=60))
@settings(max_examples=60, deadline=None)
def test_output_is_clamped(seq):
    pid = PID(PIDGains(kp=0.5, ki=3.0, kd=0.01, output_limit=12.0, derivative_tau=0.002))
    for k, (sp, m) in enumerate(seq):
        s = pid.update(sp, m, 0.001 * k)
        assert -12.0 <= s.u <= 12.0
        assert abs(s.i) <= 12.0 + 1e-12


def test_anti_windup_recovers_promptly_after_saturation():
    g = PIDGains(kp=0.01, ki=0.5, output_limit=1.0)
    pid = PID(g)
    t = 0.0
    for _ in range(2000):  # 2 s with a huge error: saturated all the time
        s = pid.update(1000.0, 0.0, t)
        t += 1e-3
    assert s.saturated and s.u == 1.0
    assert pid.integral <= 1.0
    # the error reverses: a wound-up integral (0.5 · 1000 · 2 = 1000 V) would keep the output
    # at +1 for seconds; with anti-windup it leaves saturation within a few cycles
    steps = 0
    while pid.update(-10.0, 0.0, t).u > 0:
        t += 1e-3
        steps += 1
        assert steps < 2000
    naive_integral = 0.5 * 1000.0 * 2.0
    assert pid.integral < naive_integral / 100


def test_published_form_reproduces_its_formula():
    g = PIDGains(kp=0.01, ki=0.002, kd=0.001, output_limit=12.0, form=PIDForm.PUBLISHED)
    pid = PID(g)
    rng = np.random.default_rng(3)
    t, e_prev, t_prev = 0.0, 0.0, None
    for _ in range(200):
        t += rng.uniform(0.002, 0.01)
        sp, m = rng.uniform(-3000, 3000), rng.uniform(-3000, 3000)
        e = sp - m
        dt = 0.0 if t_prev is None else t - t_prev
        expected = 0.01 * e + 0.002 * (e_prev + e * dt) + (0.001 * (e - e_prev) / dt if dt else 0.0)
        expected = max(-12.0, min(12.0, expected))
        assert pid.update(sp, m, t).u == pytest.approx(expected, rel=1e-12, abs=1e-12)
        e_prev, t_prev = e, t


def test_published_integral_does_not_accumulate():
    pid = PID(PIDGains(kp=0.0, ki=1.0, form=PIDForm.PUBLISHED))
    outs = [pid.update(1.0, 0.0, 0.01 * k).u for k in range(100)]
    assert outs[-1] == pytest.approx(1.0 + 0.01)  # Ki·(e_prev + e·dt): constant, not growing


@pytest.mark.parametrize("bad", [dict(kp=-1.0), dict(kp=1.0, ki=math.nan), dict(kp=1.0, output_limit=0.0)])
def test_invalid_gains_raise(bad):
    with pytest.raises(ValueError):
        PIDGains(**bad)


def test_time_must_increase():
    pid = PID(RIG_GAINS)
    pid.update(1.0, 0.0, 1.0)
    with pytest.raises(ValueError):
        pid.update(1.0, 0.0, 1.0)


@pytest.mark.parametrize("published", [False, True])
def test_firmware_pid_matches_python(published, emulator_exe):
    rng = np.random.default_rng(7)
    n = 300
    sp = np.cumsum(rng.normal(0, 20, n))
    meas = sp + rng.normal(0, 40, n)
    dts = rng.uniform(0.0008, 0.0012, n)
    lines = "".join(f"{a:.3f} {b:.3f} {d:.6f}\n" for a, b, d in zip(sp, meas, dts))
    out = subprocess.run([emulator_exe, "--pid-trace"] + (["published"] if published else []), input=lines,
                         capture_output=True, text=True, check=True).stdout.split()
    g = RIG_GAINS if not published else PIDGains(kp=0.01, ki=0.002, kd=0.001, output_limit=12.0, form=PIDForm.PUBLISHED)
    pid = PID(g)
    t = 0.0
    for k in range(n):
        t += float(f"{dts[k]:.6f}") if k else 0.0  # the dt the firmware read
        u = pid.update(float(f"{sp[k]:.3f}"), float(f"{meas[k]:.3f}"), t).u
        assert float(out[k]) == pytest.approx(u, rel=1e-4, abs=1e-4)  # float32 firmware vs float64


@pytest.fixture
def emulator_exe(exe):
    return exe


def test_the_chips_fixed_point_pid_follows_the_python_pid(emulator_exe):
    """PIDFixed (the chip's integer PID, firmware/servo_rig/rig_core.h) is the same algorithm as the
    standard PID: on a noisy random walk of integer pulses at 1 kHz it stays within two PWM steps of
    the float64 Python PID (its quantisation: 1/2^14 duty on P, the derivative filter's 1/64-duty
    step and 8-bit coefficient, Ki·dt to 3 digits), through saturation and the anti-windup."""
    rng = np.random.default_rng(11)
    n = 2000
    sp = np.round(np.cumsum(rng.normal(0, 30, n))).astype(int)
    meas = np.round(sp + rng.normal(0, 60, n)).astype(int)
    lines = "".join(f"{a} {b}\n" for a, b in zip(sp, meas))
    out = subprocess.run([emulator_exe, "--pid-trace", "fixed", "0.001"], input=lines, capture_output=True,
                         text=True, check=True).stdout.split()
    pid = PID(RIG_GAINS)
    u = np.array([pid.update(float(a), float(b), k * 0.001).u for k, (a, b) in enumerate(zip(sp, meas))])
    fixed = np.array([float(v) for v in out])
    assert np.any(np.abs(u) >= 12.0 - 1e-9)  # the walk saturates the output at times
    err = np.abs(fixed - u)
    # volts; a PWM step is 12 / 255 = 0.047 V. The largest differences come from the derivative
    # filter's coefficient (0.2 as 51/256) on this very noisy input (±60 pulses a millisecond)
    assert err.max() < 0.1, err.max()
    assert np.mean(err) < 0.02, np.mean(err)
