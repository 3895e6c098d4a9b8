"""armtwin rig identify: the excitation within limits, the ramp from the measured joints, and the whole
identification against the host emulator running a motor the fit does not know."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from armtwin.controllers.ident import (NOMINAL, MotorFit, excitation, fit_motor, prediction_error, read_motor_fit,
                                       simulate_loop,
                                       traces_of, virtual_rig_log, write_params_file)
from armtwin.controllers.servo import RIG_MOTOR
from armtwin.controllers.virtual_rig import VirtualServo
from armtwin.scripts.cli import main

#: the emulator's motor in the end-to-end test: known, and not the data sheet's
TRUTH_MOTOR = dataclasses.replace(RIG_MOTOR, rotor_inertia=RIG_MOTOR.rotor_inertia * 1.25,
                                  coulomb_friction=RIG_MOTOR.coulomb_friction * 0.8,
                                  viscous_friction=RIG_MOTOR.viscous_friction * 1.2, no_load_rpm=145.0 * 1.15)
TRUTH = MotorFit.of(TRUTH_MOTOR, dead_band=0.3)


def test_excitation_keeps_the_speed_and_acceleration_limits_sample_to_sample():
    e = excitation(30.0, amplitude_deg=40.0, max_speed_deg_s=250.0, max_accel_deg_s2=4000.0)
    v = np.diff(e.angle) / np.diff(e.t)
    a = np.diff(v) / np.diff(e.t)[1:]
    assert np.abs(e.angle).max() <= 40.0 + 1e-9
    assert np.abs(v).max() <= 250.0 * (1 + 1e-9)
    assert np.abs(a).max() <= 4000.0 * (1 + 1e-6)
    assert e.angle[0] == 0.0 and abs(e.angle[-1]) < 0.01      # from rest at the start, back there at the end
    free = excitation(30.0, amplitude_deg=40.0, max_speed_deg_s=250.0)
    assert np.abs(np.diff(np.diff(free.angle))).max() / (e.t[1] - e.t[0]) ** 2 > 10 * 4000.0   # the unlimited one jumps
    assert e.power == free.power
    with pytest.raises(ValueError):
        excitation(30.0, max_accel_deg_s2=0.0)


def test_virtual_servo_is_the_loop_the_fit_models():
    """Fed sample by sample, the virtual servo gives what the fit's exact loop model gives for the
    same motor (to the encoder's resolution), and another motor gives something else."""
    exc = excitation(20.0, max_speed_deg_s=300.0, max_accel_deg_s2=6000.0)
    tr = virtual_rig_log(exc, TRUTH_MOTOR, dead_band=0.3, delay_down=0.0012, delay_up=0.0018)
    fit = MotorFit.of(TRUTH_MOTOR, dead_band=0.3, delay_down=0.0012, delay_up=0.0018)
    model = simulate_loop(tr, fit.vector()[None], fit, exact=True)[0]
    rms = lambda d: float(np.sqrt(np.mean(d * d)))  # noqa: E731
    assert rms(model - tr.servo) < 0.03
    v = VirtualServo(fit, start_deg=0.0)
    assert v.angle_at(0.0) == 0.0 and v.powered
    other = virtual_rig_log(exc, RIG_MOTOR, dead_band=0.3, delay_down=0.0012, delay_up=0.0018)
    assert rms(other.servo - tr.servo) > 5 * rms(model - tr.servo)


def test_timed_targets_the_virtual_servo_and_the_fit_agree_and_the_links_delay_does_not_enter():
    """Timed targets (each for its sample's time + 4 ms on the rig's clock): the virtual servo and
    the fit's exact model give the same counts, and the fit recovers the motor within 5 %. The link's
    delay enters only through the POWER frames (untimed): it is reported open, not as a number; the
    read delay does not enter (each angle's tick is known) and is reported so."""
    exc = excitation(24.0, max_speed_deg_s=300.0, max_accel_deg_s2=6000.0, power_cuts=2)
    tr = virtual_rig_log(exc, TRUTH_MOTOR, dead_band=0.3, delay_down=0.0012, delay_up=0.0, lead=0.004)
    # as `rig identify` has it: the tick each angle was taken at (the rig's clock; no read delay here)
    tr = dataclasses.replace(tr, t_taken=np.floor(tr.t * 1000.0 + 1e-9) / 1000.0)
    fit = MotorFit.of(TRUTH_MOTOR, dead_band=0.3, delay_down=0.0012, delay_up=0.0)
    model = simulate_loop(tr, fit.vector()[None], fit, exact=True)[0]
    np.testing.assert_allclose(model, tr.servo, atol=1e-9)
    # taken as untimed (applied at their arrival, from it), the same targets give other counts
    untimed = simulate_loop(dataclasses.replace(tr, t_apply=None), fit.vector()[None], fit, exact=True)[0]
    assert np.count_nonzero(np.abs(untimed - tr.servo) > 1e-9) > len(tr.t) // 20
    rep = fit_motor(tr, generations=30)
    assert rep.param("delay_down").value is None and "delay_down" in rep.not_identifiable
    assert "delay_up: does not enter (the states carry the rig's clock" in rep.not_identifiable
    for n in ("inertia", "coulomb", "motor_constant"):
        assert abs(getattr(rep.fitted, n) / getattr(fit, n) - 1) < 0.05, (n, getattr(rep.fitted, n) / getattr(fit, n))


def test_identify_refuses_bad_options_in_one_line(tmp_path, capsys):
    base = ["rig", "identify", "--port", "/dev/null", "--robot", "irb120", "--log", str(tmp_path / "id.csv")]
    for extra, msg in ((["--seconds", "5"], "--seconds 5"), (["--max-speed", "0"], "--max-speed 0"),
                       (["--max-accel", "1"], "--max-accel 1"), (["--power-cuts", "9"], "--power-cuts 9"),
                       (["--joints", "3,3"], "--joints"), (["--save", str(tmp_path / "m.txt")], "--save"),
                       (["--amplitude", "nan"], "--amplitude nan")):
        assert main(base + extra) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and msg in err[0], (extra, err)
    assert main(["rig", "identify", "--port", "/dev/null", "--robot", "irb120", "--log", str(tmp_path / "x.txt")]) == 2


@pytest.fixture(scope="module")
def truth_file(tmp_path_factory):
    """TRUTH as a motor-parameter file, for the emulator's --motor-params."""
    path = tmp_path_factory.mktemp("truth") / "truth.toml"
    write_params_file(path, TRUTH)
    return path


@pytest.fixture(scope="module")
def parked_run(exe, truth_file, tmp_path_factory):
    """``rig identify --no-fit`` (J1 and J2, 20 s, ±30°, 120 °/s, 1500 °/s²) on an emulator running
    TRUTH_MOTOR whose J2 was parked at +100° first: (its JSON report, its log). The ramp test checks
    the run; the end-to-end test predicts it with the motor it fitted from another run."""
    import contextlib
    import io
    from armtwin.envs.rig import Emulator, RigLink, SyncConfig, TwinSync
    from armtwin import robots
    from armtwin.envs.sim import PhysicsConfig, World
    tmp = tmp_path_factory.mktemp("parked")
    spec = robots.get("irb120")
    with Emulator(exe=exe, motor_params=truth_file) as emu:
        # park the rig's motor 2 at +100° of ±110° first (a sync ramping there)
        with World(PhysicsConfig(dt=1 / 500)) as world, RigLink(emu.device) as link:
            q = spec.home.copy()
            q[1] = np.radians(100.0)
            TwinSync(world.add_robot(spec), link, SyncConfig((0, 1))).run(2.5, source=lambda t: q)
        log = tmp / "parked.csv"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["rig", "identify", "--port", emu.device, "--robot", "irb120", "--joints", "1,2",
                         "--seconds", "20", "--max-speed", "120", "--max-accel", "1500", "--amplitude", "30",
                         "--log", str(log), "--no-fit", "--json"])
    assert code == 0
    return json.loads(out.getvalue()), log


def test_identify_ramps_from_the_measured_joint_and_keeps_the_limits(parked_run):
    """A rig standing outside the room the excitation needs (J2 at +100° of ±110°) is ramped to a
    centre from which the excitation fits; no logged target moves faster than the limits."""
    from armtwin.envs.rig import read_twin_log
    out, log = parked_run
    assert out["fitted"] is False and out["samples"] > 20 * 500 * 0.9
    ramp = out["ramp"]
    assert abs(ramp["from_deg"][1] - 100.0) < 1.0                     # from where the rig was parked …
    assert ramp["to_deg"][1] == pytest.approx(110.0 - 0.05 * 220.0 - 30.0)   # … to where centre + 30° fits
    assert ramp["duration_s"] > 0.1
    data = read_twin_log(log)
    v2, t = data["Virtual_j2"], data["Time"]
    first = ramp["stt"]
    assert abs(v2[first] - ramp["from_deg"][1]) < 0.2                  # the first target is the measured joint
    after = t >= t[first] + ramp["duration_s"]
    assert v2[after].max() <= 110.0 - 0.05 * 220.0 + 1e-6             # the excitation fits the range
    assert v2[after].max() - v2[after].min() > 30.0                   # and it did move
    for j in ("Virtual_j1", "Virtual_j2"):
        speed = np.abs(np.diff(data[j][first:]) / np.diff(t[first:]))
        assert np.percentile(speed, 99.9) <= 120.0 * 1.05, j           # (sample times jitter)


@pytest.mark.slow
def test_identify_on_the_emulator_recovers_its_motor_and_predicts_a_held_out_run(exe, tmp_path, capsys, truth_file,
                                                                                parked_run):
    """End to end: the C++ emulator runs a motor it was given (TRUTH, not the data sheet's);
    ``rig identify`` drives it for 30 s, fits it and writes the file; another run (the parked run:
    20 s, smaller and slower, from elsewhere) is predicted better by the fitted motor than by the
    data sheet's, and the saved motor constant is within 10 % — on any machine (measured: within 7 % in
    every run of docs/DYNAMICS.md's table, A-I). Inertia and friction within ±30 % only on a quiet
    machine, and only where the fit calls them identifiable: on a saturated one the real-time loop's
    timing is not the model's (runs F, I: inertia -51 %, -71 %); the command flags such a run (the
    states' age at the samples varies by more than 1.5 ms, or ticks were skipped), and then that part
    is skipped."""
    from armtwin.envs.rig import Emulator, read_twin_log
    with Emulator(exe=exe, motor_params=truth_file) as emu:
        code = main(["rig", "identify", "--port", emu.device, "--robot", "irb120", "--joints", "1",
                     "--seconds", "30", "--log", str(tmp_path / "id.csv"), "--save", str(tmp_path / "motor.toml"),
                     "--generations", "20", "--json"])
        assert code == 0
        out = json.loads(capsys.readouterr().out)
    rep = out["joints"][0]
    timing = out["timing"]
    print("timing:", timing)
    fitted = read_motor_fit(tmp_path / "motor.toml")
    params = rep["parameters"]
    errors = {n: getattr(fitted, n) / getattr(TRUTH, n) - 1 for n in ("inertia", "coulomb", "motor_constant")}
    shown = {**errors, **{n: getattr(fitted, n) / getattr(TRUTH, n) - 1 for n in ("dead_band", "viscous")}}
    print("relative errors:", {n: f"{100 * e:+.1f}%" + ("" if params[n]["identifiable"] else " (n/i)")
                               for n, e in shown.items()})
    held_out, held_log = parked_run
    held = traces_of(read_twin_log(held_log), ["j1"])[0]
    held = held.cut(held_out["ramp"]["stt"], len(held.t))
    pred = simulate_loop(held, np.vstack([NOMINAL.vector(), fitted.vector()]), fitted, exact=True)
    known = np.isfinite(held.servo)
    (rms_sheet, _), (rms_fit, _) = (prediction_error(held, p, known) for p in pred)
    print(f"held-out run: data sheet {rms_sheet:.3f} deg RMS, fitted {rms_fit:.3f} deg RMS")
    assert rms_fit < rms_sheet
    assert rep["held_out_deg"]["rms_after"] < rep["held_out_deg"]["rms_before"]
    # the saved motor constant is right on any machine; whether the fit *calls* it identifiable depends on
    # how noisy the run was (a clean CI run on a loaded machine: -1.5 %, but every confidence interval
    # widened past ±15 % and all were reported not identifiable, the honest answer)
    assert abs(errors["motor_constant"]) <= 0.10, errors
    if timing["disturbed"]:
        # the command flagged its own run: inertia and friction cannot be trusted, and it said so
        pytest.skip(f"the host's timing was disturbed during the run ({timing}); the ±30 % is a claim for a "
                    f"quiet machine")
    # a value the fit gives as determined (its 95 % interval within ±15 %) is within 30 % of the truth; one
    # it reports as not identifiable carries no claim (a quiet CI run: inertia +30.6 %, reported n/i)
    for n, e in errors.items():
        if params[n]["identifiable"]:
            assert abs(e) <= 0.30, (n, e)


def _emulate(tmp_path, *files):
    """``armtwin rig emulate --motor-params …`` as its own process, reachable at a stable link."""
    import subprocess
    import sys
    link = str(tmp_path / "rig")
    proc = subprocess.Popen([sys.executable, "-m", "armtwin.scripts.cli", "rig", "emulate", "--link", link,
                             "--seconds", "120", *(["--motor-params", *map(str, files)] if files else [])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    device = proc.stdout.readline().strip()
    if device != link:
        proc.kill()
        raise AssertionError(f"rig emulate did not start: {device!r} {proc.stderr.read()}")
    return proc, link


@pytest.mark.slow      # real time: needs a machine that is not saturated
def test_rig_emulate_runs_the_identified_motors_and_the_virtual_rig_predicts_them(exe, tmp_path):
    """``rig emulate --motor-params TRUTH`` emulates that motor: a twin whose virtual rig has the same
    motor predicts what the rig reports far better than one with the data sheet's motor."""
    from armtwin import robots
    from armtwin.controllers.virtual_rig import VirtualRig
    from armtwin.envs.rig import RigLink, SyncConfig, TwinSync
    from armtwin.envs.sim import PhysicsConfig, World
    delays = {"delay_down": 0.0015, "delay_up": 0.0015}
    truth, sheet = dataclasses.replace(TRUTH, **delays), dataclasses.replace(MotorFit.of(RIG_MOTOR), **delays)
    write_params_file(tmp_path / "truth.toml", truth)
    exc = excitation(20.0, max_speed_deg_s=250.0, max_accel_deg_s2=5000.0)
    spec = robots.get("irb120")

    def source(t):
        q = spec.home.copy()
        q[0] += np.radians(np.interp(t, exc.t, exc.angle))
        return q

    proc, link = _emulate(tmp_path, tmp_path / "truth.toml")
    try:
        rms = {}
        for name, fit in (("truth", truth), ("sheet", sheet)):
            vr = VirtualRig([fit])
            with World(PhysicsConfig(dt=1 / 500)) as world, RigLink(link) as rig:
                TwinSync(world.add_robot(spec), rig, SyncConfig((0,)), virtual_rig=vr).run(8.0, source=source)
            rms[name] = vr.errors()[0][0]
    finally:
        proc.terminate()
        proc.wait(5)
    print("virtual rig predicted - measured RMS, deg:", rms)
    assert rms["truth"] < rms["sheet"]       # measured: 0.17 vs 0.38 quiet; 0.32-0.40 vs 0.47-0.52 at load 5-8


def test_sync_motor_params_reports_the_virtual_rigs_prediction(emu, tmp_path, capsys):
    write_params_file(tmp_path / "m.toml", MotorFit.of(RIG_MOTOR, delay_down=0.0015, delay_up=0.0015))
    argv = ["sync", "--port", emu.device, "--robot", "irb120", "--seconds", "3", "--log", str(tmp_path / "t.csv")]
    assert main(argv + ["--motor-params", str(tmp_path / "m.toml")]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("virtual rig"))
    assert "J1 RMS" in line and "J2 RMS" in line
    rms = [float(part.split("RMS ")[1].split()[0]) for part in line.split(";")]
    assert all(0 <= r < 1.0 for r in rms)             # the data sheet motor is the emulator's: it predicts it
    (tmp_path / "bad.toml").write_text("rotor_inertia = -1\n")
    for extra, msg in ((["--motor-params", str(tmp_path / "bad.toml")], "bad.toml"),
                       (["--motor-params", str(tmp_path / "none.toml")], "none.toml"),
                       (["--motor-params", *[str(tmp_path / "m.toml")] * 3], "one per motor"),
                       (["--motor-params", str(tmp_path / "m.toml"), "--direction", "real-to-virtual"], "virtual-to-real")):
        assert main(argv + extra) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and msg in err[0], (extra, err)
    assert main(["rig", "emulate", "--seconds", "1", "--motor-params", str(tmp_path / "bad.toml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "bad.toml" in err[-1]


@pytest.mark.slow
def test_bench_fit_identify_reports_the_fit_time_and_every_parameters_error(capsys):
    """``bench fit --identify``: rig identify against the emulator with two drawn motors (20 s)."""
    assert main(["bench", "fit", "--identify", "--seconds", "20", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fit_seconds"] > 0 and out["samples"] > 0.9 * 20 * 500
    assert [j["joint"] for j in out["joints"]] == ["j1", "j2"]
    for j in out["joints"]:
        assert set(j["error_percent"]) == {"inertia", "viscous", "coulomb", "motor_constant", "dead_band"}
        assert j["held_out_rms_after"] < j["held_out_rms_before"]
        if out["timing_disturbed"]:
            # a busy machine (the CI runner under the whole suite): the host's timing was disturbed and
            # the report says so ("rerun on a quiet machine"); the confidence intervals are then not
            # to be trusted and an n/i motor constant is an honest answer
            continue
        # the fitted value is right whether or not the fit calls it identifiable: on a loaded machine
        # that the timing check did not flag, every interval widened past ±15 % and the motor
        # constant was reported n/i (a whole-suite run beside three other jobs), which is honest
        assert abs(j["fitted_value_error_percent"]["motor_constant"]) < 30.0


def test_bench_fit_refuses_a_short_run(capsys):
    assert main(["bench", "fit", "--identify", "--seconds", "5"]) == 2
    assert "--seconds 5" in capsys.readouterr().err
