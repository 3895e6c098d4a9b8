"""System identification of the rig's motor from twin logs (controllers/ident.py, armtwin fit, the
emulator's --motor-params)."""

from __future__ import annotations

import dataclasses
import json
import subprocess

import numpy as np
import pytest

from armtwin.controllers.ident import (MAX_RELATIVE_CI, PARAMETERS, LoopConfig, MotorFit, Trace, dead_band_step, excitation,
                                       fit_motor, read_params_file, rig_clock_times, simulate_loop, traces_of, virtual_rig_log,
                                       write_params_file)
from armtwin.controllers.servo import RIG_MOTOR, DCMotor
from armtwin.scripts.bench_fit import _largest, virtual_rig, write_virtual_log
from armtwin.scripts.cli import main

#: one PWM step of the rig, V
STEP = 12.0 / 255.0

def _drawn(seed: int):
    """A motor ±30 % around the data sheet, a dead band and delays, from ``seed``."""
    rng = np.random.default_rng(seed)
    f = lambda: float(rng.uniform(0.7, 1.3))  # noqa: E731
    motor = dataclasses.replace(RIG_MOTOR, rotor_inertia=RIG_MOTOR.rotor_inertia * f(),
                                coulomb_friction=RIG_MOTOR.coulomb_friction * f(),
                                viscous_friction=RIG_MOTOR.viscous_friction * f(), no_load_rpm=145.0 * f())
    return motor, 0.3 * f(), 0.0015 * f(), 0.0015 * f()


def test_excitation_stays_within_its_limits_and_cuts_the_power_in_both_parts():
    e = excitation(30.0, amplitude_deg=40.0, max_speed_deg_s=300.0)
    assert np.abs(e.angle).max() <= 40.0 + 1e-9
    assert e.peak_speed <= 300.0 + 1e-6
    assert e.angle[0] == 0.0 and e.angle[-1] == 0.0
    cuts = sorted(k for k, on in e.power.items() if not on)
    restores = sorted(k for k, on in e.power.items() if on)
    split = 0.7 * 30.0
    assert len(cuts) == len(restores) == 4 and all(r > c for c, r in zip(cuts, restores))
    assert any(e.t[c] < split for c in cuts) and any(e.t[c] > split for c in cuts)
    with pytest.raises(ValueError):
        excitation(10.0)


def test_the_exact_loop_model_reproduces_an_independent_rig_simulation():
    """simulate_loop(exact) against virtual_rig_log (VirtualServo: the firmware's integers sample by
    sample, DCMotor, the encoder's floor): the same count at every sample; the smoothed model
    (continuous encoder, unrounded PID, a target ramp instead of whole pulses) within a few pulses."""
    motor, dead, down, up = _drawn(3)
    exc = excitation(30.0, max_speed_deg_s=360.0)
    tr = virtual_rig_log(exc, motor, dead_band=dead, delay_down=down, delay_up=up)
    truth = MotorFit.of(motor, dead_band=dead, delay_down=down, delay_up=up)
    exact, smooth = simulate_loop(tr, truth.vector()[None], truth, exact=True)[0], simulate_loop(tr, truth.vector()[None], truth)[0]
    rms = lambda d: float(np.sqrt(np.mean(d * d)))  # noqa: E731
    np.testing.assert_array_equal(exact, tr.servo)
    assert rms(smooth - tr.servo) < 0.08
    # and the data sheet motor is clearly another one
    sheet = np.r_[MotorFit.of().vector()[:4], dead, down, up]        # the data sheet motor in the same loop
    other = simulate_loop(tr, sheet[None], truth, exact=True)[0]
    assert rms(other - tr.servo) > 5 * rms(exact - tr.servo)


@pytest.mark.slow
def test_fit_recovers_a_motor_it_did_not_know_and_predicts_the_held_out_part():
    """60 s at 500 Hz from the simulated rig, parameters drawn from a seed the fit does not see."""
    traces, truths = virtual_rig(60.0, 500.0, 2026)
    tr, truth = traces[0], truths[0]
    rep = fit_motor(tr)
    assert rep.rms_before > 0.2                       # the data sheet motor predicts badly
    assert rep.rms_after <= 0.3 and rep.rms_after < rep.rms_before / 5
    # measured over 12 such fits (`armtwin bench fit --seeds 6`, docs/DYNAMICS.md)
    for name, tol in (("inertia", 0.05), ("coulomb", 0.05), ("motor_constant", 0.05)):
        p = rep.param(name)
        assert p.identifiable, (name, rep.not_identifiable)
        assert p.value == pytest.approx(getattr(truth, name), rel=tol), name
        assert p.ci95 is not None and p.ci95 <= MAX_RELATIVE_CI * p.value
    # the dead band: the true one's PWM step found, and its middle given — within half a step of the
    # truth, which is all the rig shows of it (here 5.5 %); its interval says so
    db = rep.param("dead_band")
    lo, hi = dead_band_step(truth.dead_band)
    assert db.identifiable and db.value == pytest.approx(0.5 * (lo + hi), abs=1e-12)
    assert abs(db.value - truth.dead_band) <= 0.5 * STEP
    assert db.ci95 is not None and 0.5 * STEP <= db.ci95 <= MAX_RELATIVE_CI * db.value
    total = rep.param("delay_total")
    assert total.value == pytest.approx(truth.delay_down + truth.delay_up, abs=1e-3)   # within a control tick
    # the rig's viscous friction is a few % of its torques: the fit says it cannot tell it
    visc = rep.param("viscous")
    assert not visc.identifiable and visc.value is None and visc.ci95 is None
    assert "viscous" in rep.not_identifiable
    assert rep.param("resistance").fixed and not rep.param("resistance").identifiable


def test_the_rig_shows_its_dead_band_only_to_a_pwm_step():
    """The rig drives its motor with whole PWM steps (12 V / 255): every dead band within a step
    gives the same log, bit for bit, and one just past it another — so the step is all a fit can
    find (dead_band_step), and no fit can be sure to come closer than half a step."""
    motor, dead, down, up = _drawn(3)
    lo, hi = dead_band_step(dead)
    assert lo < dead <= hi and hi - lo == pytest.approx(STEP) and LoopConfig().pwm_step == pytest.approx(STEP)
    exc = excitation(20.0, max_speed_deg_s=360.0)
    logs = [virtual_rig_log(exc, motor, dead_band=d, delay_down=down, delay_up=up).servo
            for d in (lo + 1e-6, dead, hi, hi + 1e-6)]
    assert np.array_equal(logs[0], logs[1]) and np.array_equal(logs[1], logs[2])
    assert np.sum(logs[3] != logs[2]) > 100
    assert dead_band_step(0.0) == dead_band_step(0.5 * STEP) == (0.0, pytest.approx(STEP))   # below a step: none
    assert dead_band_step(3 * STEP) == (pytest.approx(2 * STEP), pytest.approx(3 * STEP))
    with pytest.raises(ValueError):
        dead_band_step(-0.1)


def test_bench_fit_takes_each_parameters_largest_error_over_the_fits_that_report_it():
    names = ("inertia", "viscous", "coulomb", "motor_constant", "dead_band")
    rows = [{"error_percent": dict(zip(names, (1.0, None, -2.0, 0.5, -6.0)))},
            {"error_percent": dict(zip(names, (-3.0, None, 1.0, None, 2.0)))}]
    big = _largest(rows)
    assert big["inertia"] == {"percent": 3.0, "not_identifiable": 0}
    assert big["viscous"] == {"percent": None, "not_identifiable": 2}
    assert big["motor_constant"] == {"percent": 0.5, "not_identifiable": 1}
    assert big["dead_band"]["percent"] == 6.0
    assert main(["bench", "fit", "--seeds", "0"]) == 2
    assert main(["bench", "fit", "--identify", "--seeds", "2"]) == 2


def test_a_parameter_the_log_cannot_see_is_reported_without_a_number():
    """Without a dead band the dead-band parameter has no effect below the PWM's own zero step, and
    the viscous friction hides behind the motor constant: both 'not identifiable', no value."""
    motor, _, down, up = _drawn(5)
    exc = excitation(24.0, max_speed_deg_s=360.0, power_cuts=0)
    tr = virtual_rig_log(exc, motor, dead_band=0.0, delay_down=down, delay_up=up)
    rep = fit_motor(tr, generations=0)
    visc = rep.param("viscous")
    assert visc.value is None and visc.ci95 is None and not visc.identifiable
    assert "viscous" in rep.not_identifiable
    shown = [p for p in rep.params if p.identifiable]
    assert all(p.value is not None and p.ci95 is not None for p in shown)
    assert rep.param("motor_constant").identifiable


def test_params_file_round_trips_and_feeds_the_emulator_motor(exe, tmp_path):
    """The file armtwin fit --save writes is what rig_emulator --motor-params reads: the C++ motor
    with it runs as controllers/servo.DCMotor does with the same file."""
    motor, dead, _, _ = _drawn(8)
    fit = MotorFit.of(motor, dead_band=dead)
    path = tmp_path / "motor.toml"
    write_params_file(path, fit, comment="test")
    back, dead_back = read_params_file(path)
    assert dead_back == pytest.approx(dead)
    assert back.motor_constant == pytest.approx(motor.motor_constant, rel=1e-12)
    assert back.inertia == pytest.approx(motor.inertia, rel=1e-12)
    for volts in (0.9 * dead, 6.0):
        out = subprocess.run([exe, "--motor-params", str(path), "--motor-trace", str(volts), "0.5"],
                             capture_output=True, text=True, timeout=30, check=True).stdout.split("\n")
        rows = np.array([[float(x) for x in line.split()] for line in out if line.strip()])
        m = DCMotor(back)
        rpm = []
        for _ in range(len(rows)):
            rpm.append(m.output_rpm)
            m.step(0.0 if abs(volts) < dead_back else volts, 0.01)
        np.testing.assert_allclose(rows[:, 1], rpm, rtol=1e-6, atol=1e-6)
        if volts < dead:
            assert np.all(rows[:, 2] == 0)       # inside the dead band nothing moves
    bad = tmp_path / "bad.toml"
    bad.write_text("rotor_inertia = 4e-6\nflux_capacitor = 1.21\n")
    with pytest.raises(ValueError, match="unknown parameter"):
        read_params_file(bad)
    p = subprocess.run([exe, "--motor-params", str(bad), "--motor-trace", "1", "0.01"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 2 and "line 2" in p.stderr


def test_cli_fit_reads_a_twin_log_saves_and_plots(tmp_path, capsys):
    traces, truths = virtual_rig(24.0, 500.0, 7)
    log = tmp_path / "twin.csv"
    write_virtual_log(log, traces)
    code = main(["fit", str(log), "--joints", "j1", "--generations", "10", "--save", str(tmp_path / "m.toml"),
                 "--plot", str(tmp_path / "fit.png"), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    j = out["joints"][0]
    assert j["joint"] == "j1" and set(j["parameters"]) == set(PARAMETERS) | {"delay_total", "resistance"}
    assert j["held_out_deg"]["rms_after"] < j["held_out_deg"]["rms_before"]
    assert (tmp_path / "m.toml").is_file() and (tmp_path / "fit.png").stat().st_size > 10_000
    motor, dead = read_params_file(tmp_path / "m.toml")
    assert motor.rotor_inertia > 0 and dead >= 0
    # the log's power cuts become unpowered samples
    tr = traces_of({"Time": traces[0].t, "Virtual_j1": traces[0].virtual, "Servo_j1": traces[0].servo,
                    "Fault": ["OK" if p else "POWER" for p in traces[0].powered]})[0]
    assert (~tr.powered).sum() == (~traces[0].powered).sum() > 0


@pytest.mark.parametrize("argv, msg", [
    (["nope.csv"], "nope.csv"),
    (["{log}", "--joints", "j7"], "no joint j7"),
    (["{log}", "--fit-fraction", "0.95"], "--fit-fraction 0.95"),
    (["{log}", "--save", "x.txt"], "--save x.txt: use a .toml file name"),
])
def test_cli_fit_bad_input_is_one_line_and_exit_2(argv, msg, tmp_path, capsys):
    traces, _ = virtual_rig(20.0, 100.0, 1)
    log = tmp_path / "twin.csv"
    write_virtual_log(log, traces[:1])
    assert main(["fit", *[a.replace("{log}", str(log)) for a in argv]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0]


def _loop_trace(exe, path, exc, down: float, power_lead: float, timed: float | None = None) -> np.ndarray:
    """rig_emulator --loop-trace on an excitation (both motors the same targets): (ticks, 5) rows of
    tick, pos1, pos2, pwm1, pwm2. ``timed``: timed targets, each stamped for its time + ``timed``."""
    powered = _powered(exc)
    tgt = np.rint(exc.angle * LoopConfig().pulses_per_deg).astype(int)
    lines = "".join(f"{t:.6f} {p} {p} {int(on)}\n" for t, p, on in zip(exc.t, tgt, powered))
    opt = [] if timed is None else ["--timed", repr(timed)]
    out = subprocess.run([exe, "--motor-params", str(path), *opt, "--loop-trace", repr(down), repr(power_lead)],
                         input=lines, capture_output=True, text=True, timeout=60, check=True).stdout
    return np.array([[int(x) for x in line.split()] for line in out.splitlines() if line.strip()])


def _powered(exc) -> np.ndarray:
    on, out = True, np.ones(len(exc.t), dtype=bool)
    for k in range(len(exc.t)):
        on = exc.power.get(k, on)
        out[k] = on
    return out


def _parity_case(tmp_path, seed: int, power_cuts: int):
    """A motor drawn from ``seed`` (its file written for the emulator) and a 20 s excitation: (the
    motor's MotorFit, its link delay, the file, the excitation, the servo column that only starts
    the model, pulses per degree, each sample's control tick)."""
    motor, dead, down, _ = _drawn(seed)
    truth = MotorFit.of(motor, dead_band=dead, delay_down=down, delay_up=0.0)
    path = tmp_path / "motor.toml"
    write_params_file(path, truth)
    exc = excitation(20.0, amplitude_deg=45.0, max_speed_deg_s=250.0, power_cuts=power_cuts)
    start = np.r_[0.0, np.full(len(exc.t) - 1, np.nan)]
    tick = np.rint(exc.t * LoopConfig().control_hz).astype(int)
    return truth, down, path, exc, start, LoopConfig().pulses_per_deg, tick


@pytest.mark.parametrize("seed", [2026, 5])
def test_the_exact_loop_model_is_the_firmware_bit_for_bit(exe, tmp_path, seed):
    """simulate_loop(exact) against the firmware's own RigCore (the fixed-point PID, the target
    velocity and extrapolation in Q20, the PWM rounding) and the emulator's MotorModel, run by
    rig_emulator --loop-trace without a wire or a clock: the same encoder count at every sample,
    through a 20 s excitation with power cuts, for motors drawn ±30 % — the supply switched as a log
    shows it and as the host commands it. (A float PID in its place first differed by 14 pulses:
    its derivative saw the extrapolated target ramp where the firmware's moves in whole pulses.)"""
    truth, down, path, exc, start, ppd, tick = _parity_case(tmp_path, seed, power_cuts=2)
    # the supply from the log's flags: a change counts from half a sample period before its sample
    tr = Trace(exc.t, exc.angle, start, _powered(exc))
    py = simulate_loop(tr, truth.vector()[None], truth, exact=True)[0] * ppd
    fw = _loop_trace(exe, path, exc, down, 0.5 * float(np.median(np.diff(exc.t))))
    assert np.abs(fw[:, 3]).max() > 100                      # it drove hard, and
    np.testing.assert_array_equal(np.rint(py).astype(int), fw[tick, 1])
    # the supply as the host commanded it: its POWER frame reaches the rig 0.4 ms before the targets
    tr = dataclasses.replace(tr, power_sent=_powered(exc), power_lead=0.0004)
    py = simulate_loop(tr, truth.vector()[None], truth, exact=True)[0] * ppd
    fw = _loop_trace(exe, path, exc, down, 0.0004 - down)
    np.testing.assert_array_equal(np.rint(py).astype(int), fw[tick, 1])


@pytest.mark.parametrize("lead", [0.004, 0.0007])
def test_the_exact_loop_model_is_the_firmware_bit_for_bit_with_timed_targets(exe, tmp_path, lead):
    """Timed targets (MODE flag TIMED): each frame stamped for its sample's time + ``lead`` on the
    rig's clock. The rig holds a target until then — or applies it at its arrival (``delay_down``
    after the sample) when that is later, a late target — and extrapolates it from its stamp; the
    model given the stamps (``Trace.t_apply``) meets RigCore count for count either way. A model
    that takes them as untimed does not."""
    truth, down, path, exc, start, ppd, tick = _parity_case(tmp_path, 2026, power_cuts=1)
    assert (lead > down) == (lead == 0.004)  # one run on time, one with every target late
    tr = Trace(exc.t, exc.angle, start, _powered(exc), t_apply=exc.t + lead)
    py = simulate_loop(tr, truth.vector()[None], truth, exact=True)[0] * ppd
    fw = _loop_trace(exe, path, exc, down, 0.5 * float(np.median(np.diff(exc.t))), timed=lead)
    assert np.abs(fw[:, 3]).max() > 100
    np.testing.assert_array_equal(np.rint(py).astype(int), fw[tick, 1])
    untimed = simulate_loop(dataclasses.replace(tr, t_apply=None), truth.vector()[None], truth, exact=True)[0] * ppd
    assert np.count_nonzero(np.rint(untimed).astype(int) != fw[tick, 1]) > len(tick) // 10


def test_rig_clock_times_map_the_rigs_clock_through_drift_jitter_and_a_wrap():
    """States stamped by a rig whose crystal runs 80 ppm fast and whose µs counter wraps mid-run,
    arriving after a 1.9 ms frame and a host latency of 0.05 ms plus an exponential 0.5 ms with
    15 ms stalls: the times they were taken come back within 0.1 ms (their arrivals are up to 17 ms
    late); a rig clock that jumps back (a reboot) gives the arrivals back unchanged."""
    rng = np.random.default_rng(4)
    taken = np.arange(30000) * 0.002 + 0.0004                      # host clock, s
    rig_us = np.mod(np.floor((taken * (1 + 80e-6) + 4294.9) * 1e6), 2.0 ** 32)  # wraps after ~0.07 s
    assert np.any(np.diff(rig_us) < 0)
    late = 0.0019 + 0.00005 + rng.exponential(0.0005, len(taken))
    late[rng.choice(len(taken), 20, replace=False)] += 0.015
    arrival = taken + late
    arrival[::97] = np.nan
    got = rig_clock_times(arrival, rig_us, wire_s=0.0019)
    ok = np.isfinite(arrival)
    assert np.all(np.isnan(got[~ok]))
    err = got[ok] - taken[ok]
    assert np.abs(err).max() < 1e-4, np.abs(err).max()
    assert np.abs(arrival[ok] - taken[ok]).max() > 0.015
    back = rig_us.copy()
    back[15000:] = np.arange(15000) * 2000.0                       # the rig rebooted
    np.testing.assert_array_equal(rig_clock_times(arrival, back), arrival)


def test_states_taken_on_the_rigs_tick_grid_are_read_at_their_ticks():
    """A rig whose control ticks fall 0.37 ms after the host's sample times (its own clock): with
    the time each state was taken (t_taken) the model ticks on that grid and meets the rig's counts
    exactly; read at the samples' times instead (its ticks on the samples' grid) it does not."""
    from armtwin.controllers.virtual_rig import VirtualServo
    motor, dead, down, _ = _drawn(6)
    truth = MotorFit.of(motor, dead_band=dead, delay_down=down, delay_up=0.0)
    exc = excitation(20.0, amplitude_deg=45.0, max_speed_deg_s=250.0, power_cuts=2)
    phase, h = 0.00037, 1.0 / LoopConfig().control_hz
    servo = VirtualServo(truth, start_deg=0.5 / LoopConfig().pulses_per_deg, t0=phase)
    tgt = np.rint(exc.angle * LoopConfig().pulses_per_deg)
    angle = np.empty(len(exc.t))
    for k, t in enumerate(exc.t):
        if k in exc.power:
            servo.power(exc.power[k], float(t))
        servo.target(tgt[k], float(t))
        angle[k] = servo.angle_at(float(t))
    taken = phase + np.floor((exc.t - phase) / h + 1e-9) * h
    tr = Trace(exc.t, exc.angle, angle, _powered(exc), power_sent=_powered(exc), t_taken=taken)
    np.testing.assert_array_equal(simulate_loop(tr, truth.vector()[None], truth, exact=True)[0], angle)
    plain = dataclasses.replace(tr, t_taken=None)
    assert np.any(simulate_loop(plain, truth.vector()[None], truth, exact=True)[0] != angle)


def test_targets_the_link_skipped_are_left_out_of_the_model():
    """After a host stall the link skips targets (its wire still busy) while the log keeps every
    sample's row: with the rows marked (Trace.sent) the model delivers only the targets that went
    out and meets a rig that received only those, count for count; delivering every row's target
    it does not."""
    from armtwin.controllers.virtual_rig import VirtualServo
    motor, dead, down, up = _drawn(7)
    truth = MotorFit.of(motor, dead_band=dead, delay_down=down, delay_up=up)
    exc = excitation(20.0, amplitude_deg=45.0, max_speed_deg_s=250.0, power_cuts=2)
    sent = np.ones(len(exc.t), dtype=bool)
    for k, n in ((1200, 3), (3300, 6), (5100, 4), (7400, 5)):       # four stalls, n targets skipped each
        sent[k:k + n] = False
    servo = VirtualServo(truth, start_deg=0.5 / LoopConfig().pulses_per_deg)
    tgt = np.rint(exc.angle * LoopConfig().pulses_per_deg)
    angle = np.empty(len(exc.t))
    for k, t in enumerate(exc.t):
        if k in exc.power:
            servo.power(exc.power[k], float(t))
        if sent[k]:
            servo.target(tgt[k], float(t))
        angle[k] = servo.angle_at(float(t))
    tr = Trace(exc.t, exc.angle, angle, _powered(exc), power_sent=_powered(exc), sent=sent)
    np.testing.assert_array_equal(simulate_loop(tr, truth.vector()[None], truth, exact=True)[0], angle)
    every = simulate_loop(dataclasses.replace(tr, sent=None), truth.vector()[None], truth, exact=True)[0]
    assert np.any(every != angle)
    assert tr.cut(1000, 2000).sent.sum() == 1000 - 3
