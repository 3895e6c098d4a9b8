"""Hardware starts from its measured state and ramps (issue 15.3): the ramp planner and the target
limiter alone (pure numpy), ``armtwin sync`` against the emulator, and the pendant's rig loop."""

from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest

from armtwin.controllers import rigproto as rp
from armtwin.controllers.ramp import SlewLimiter, plan_ramp
from armtwin.envs.rig import LinkConfig, RigLink, TwinLog, read_twin_log
from armtwin.scripts.cli import main

HANG = 30.0


# ----- the planner and the limiter ---------------------------------------------------------------

@pytest.mark.parametrize("seed", range(20))
def test_a_planned_ramp_keeps_every_joint_within_its_limits_and_arrives_together(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 7))
    q0, q1 = rng.uniform(-3, 3, n), rng.uniform(-3, 3, n)
    v, a = rng.uniform(0.2, 5, n), rng.uniform(0.5, 20, n)
    r = plan_ramp(q0, q1, v, a)
    t = np.linspace(0, r.duration, 4001)
    q = np.array([r.q_at(x) for x in t])
    dt = t[1] - t[0]
    speed = np.abs(np.diff(q, axis=0)) / dt
    acc = np.abs(np.diff(q, 2, axis=0)) / dt ** 2
    assert np.all(speed <= v * (1 + 1e-3)) and np.all(acc <= a * (1 + 1e-2))
    assert np.any(np.isclose(r.peak_speed(), v, rtol=1e-9) | np.isclose(r.peak_acceleration(), a, rtol=1e-9))  # shortest
    np.testing.assert_allclose(q[0], q0, atol=1e-12)
    np.testing.assert_allclose(q[-1], q1, atol=1e-12)
    np.testing.assert_allclose(r.qd_at(0.0), 0.0, atol=1e-12)
    np.testing.assert_allclose(r.qd_at(r.duration), 0.0, atol=1e-9)


def test_a_ramp_of_nothing_takes_no_time_and_bad_limits_are_refused():
    assert plan_ramp([0.5, -1.0], [0.5, -1.0], 1.0, 1.0).duration == 0.0
    with pytest.raises(ValueError, match="limits must be finite and > 0"):
        plan_ramp([0.0], [1.0], 0.0, 1.0)
    with pytest.raises(ValueError, match="finite"):
        plan_ramp([math.nan], [1.0], 1.0, 1.0)


def test_the_limiter_turns_a_step_into_a_ramp_within_its_limits():
    lim = SlewLimiter(1.0, 4.0, 1)
    lim.reset([0.0])
    h = 0.002
    x = np.array([lim.update([1.0], h)[0] for _ in range(1000)])
    v = np.diff(np.r_[0.0, x]) / h
    assert np.max(np.abs(v)) <= 1.0 + 1e-9 and x[-1] == 1.0
    assert np.max(np.abs(np.diff(v))) / h <= 4.0 * 1.5  # the trapezoid's corners on a 2 ms grid
    assert np.max(x) - 1.0 < 1e-4  # no overshoot to speak of
    assert 1.2 <= np.argmax(x == 1.0) * h <= 1.35  # 1/v + v/a = 1.25 s for a rest-to-rest move


@pytest.mark.parametrize("jitter", [0.0, 0.8])
def test_the_limiter_passes_a_reference_within_its_limits_exactly(jitter):
    """Locked on, the output is the reference sample for sample, even with irregular samples."""
    rng = np.random.default_rng(3)
    lim = SlewLimiter(1.0, 4.0, 1)
    lim.reset([0.0])
    t, err = 0.0, []
    for _ in range(3000):
        h = 0.002 * rng.uniform(1 - jitter, 1 + jitter)
        t += h
        r = 0.3 * math.sin(2 * t)  # 0.6 rad/s, 1.2 rad/s² at most
        err.append(abs(lim.update([r], h)[0] - r))
    err = np.array(err)
    assert np.mean(err[1000:] == 0.0) > 0.95 and np.max(err[1000:]) < 2e-3


def test_the_limiter_needs_a_start_and_finite_values():
    lim = SlewLimiter([1.0, 1.0], [1.0, 1.0], 2)
    with pytest.raises(ValueError, match="before reset"):
        lim.update([0.0, 0.0], 0.01)
    lim.reset([0.0, 0.0])
    with pytest.raises(ValueError, match="finite"):
        lim.update([math.inf, 0.0], 0.01)


# ----- armtwin sync ---------------------------------------------------------------------------------

def _drive_rig_to(device: str, deg: tuple[float, float]) -> None:
    """Leave the rig's motors at ``deg`` (then IDLE: the motors stay there)."""
    with RigLink(device) as link:
        link.set_mode(rp.Mode.VIRTUAL_TO_REAL)
        end = time.monotonic() + HANG
        while True:
            link.send_targets([round(d * 37.5) for d in deg])
            time.sleep(0.004)
            s = link.latest()
            if s is not None and np.allclose(s.degrees, deg, atol=0.3) and max(abs(p) for p in s.pwm) < 30:
                break
            assert time.monotonic() < end, "the rig did not get there"


def test_sync_ramps_from_the_measured_position_and_says_so(emu, tmp_path, capsys):
    """Issue 15.3 (regression): sync started with a full step (74–103°) to the first target."""
    _drive_rig_to(emu.device, (60.0, -40.0))
    log = tmp_path / "twin.csv"
    assert main(["sync", "--port", emu.device, "--robot", "irb120", "--samples", "1600", "--log", str(log)]) == 0
    err = capsys.readouterr().err
    m = re.search(r"ramping the rig from its measured joints to the first target: J1 \+(5\d\.\d|60\.\d)° → \+0\.0°, "
                  r"J2 -(39\.\d|40\.\d)° → \+0\.0° in (\d\.\d\d) s \(limits J1 63°/s, 250°/s², J2 63°/s, 250°/s²\)", err)
    assert m and 1.4 < float(m.group(3)) < 1.6, err  # π·60°/(2·62.5°/s) = 1.51 s
    d = read_twin_log(log)
    t, v1, s1, s2 = d["Time"], d["Virtual_j1"], d["Servo_j1"], d["Servo_j2"]
    # rows before the rig's first state are the wait (nothing sent, no servo angle: on a loaded
    # machine the first state can come after the first tick); the first row with one starts where the rig is
    k = int(np.argmax(np.isfinite(s1)))
    assert k < 250, k
    assert abs(v1[k] - 60.0) < 0.5 and abs(s1[k] - 60.0) < 0.5 and abs(s2[k] + 40.0) < 0.5
    ok = np.isfinite(s1)
    ts, ss = t[ok], s1[ok]
    # speed over 50 ms windows: host time stamps jitter on a loaded machine (one late sample
    # doubles a per-sample speed), a step to the target would still show ~600-870°/s here
    j = np.searchsorted(ts, ts + 0.05)
    inside = j < len(ts)
    speed = np.abs(ss[j[inside]] - ss[inside]) / (ts[j[inside]] - ts[inside])
    # the ramp: 25 % of J1's 250°/s; a step would have driven the motor near its 870°/s
    assert np.percentile(speed, 99) < 100.0, np.percentile(speed, 99)
    # the virtual joint ramps within the limit from the first row sent (the wait rows before it hold 0)
    assert np.max(np.abs(np.diff(v1[k:])) / np.diff(t[k:])) < 62.5 * 1.05
    assert not any("WATCHDOG" in f or "STALL" in f for f in d["Fault"])


# ----- the pendant's rig loop ----------------------------------------------------------------------

def test_the_pendant_rig_loop_keeps_the_rig_fed_while_the_gui_thread_stalls(emu, tmp_path):
    """Issue 15.3 (regression): the rig was driven from the GUI thread (~30 Hz); a browser loading
    the page stalled it (link-lost windows, watchdog trips). Now the rig has a loop of its own:
    with the pendant's lock held for a second (a stalled tick), targets keep going out at the
    sync rate and no watchdog trips."""
    from armtwin import robots
    from armtwin.envs.pendant import PendantConfig, PendantCore
    core = PendantCore(robots.get("irb120"), config=PendantConfig(save_dir=tmp_path))
    log_path = tmp_path / "twin.csv"
    try:
        link = RigLink(emu.device).open()
        core.attach_rig(link, (0, 1), TwinLog(log_path, (0, 1)))
        core.jog_joint(0, +1, 5.0)
        core.tick(4)
        end = time.monotonic() + HANG
        while not (core.rig_status()["faults"] == "OK" and core.rig_status()["stt"] > 100):
            assert time.monotonic() < end
            time.sleep(0.01)
        tx0, stt0 = link.stats.frames_tx, core.twin.stt
        t0 = time.monotonic()
        with core.lock:  # the GUI thread stalls inside a tick for a second
            time.sleep(1.0)
        dt = time.monotonic() - t0
        sent, samples = link.stats.frames_tx - tx0, core.twin.stt - stt0
        rate = core.twin.config.rate_hz
        assert samples >= 0.8 * rate * dt and sent >= 0.8 * rate * dt, (samples, sent, dt)
        core.tick(2)
    finally:
        core.close()
    d = read_twin_log(log_path)
    # from the rig's first OK state on (before it, the rig reports how it stood without a host:
    # a fresh emulator that waited for the pendant to load has its watchdog tripped)
    first_ok = d["Fault"].index("OK")
    faults = [(k, f) for k, f in enumerate(d["Fault"]) if f != "OK" and k > first_ok]
    assert not any("WATCHDOG" in f for _, f in faults) and not any("LINK" in f for f in d["Fault"][-100:]), \
        (len(d["Fault"]), first_ok, faults[:5], faults[-5:])


def test_the_pendant_rig_ramps_from_the_measured_position(emu, tmp_path):
    """Attached while the rig stands 40° away from the pendant's robot: the rig ramps, no step."""
    from armtwin import robots
    from armtwin.envs.pendant import PendantConfig, PendantCore
    _drive_rig_to(emu.device, (40.0, 0.0))
    core = PendantCore(robots.get("irb120"), config=PendantConfig(save_dir=tmp_path))
    try:
        link = RigLink(emu.device, LinkConfig(keep_states=4096)).open()
        core.attach_rig(link, (0, 1))
        end = time.monotonic() + HANG
        while not (core.rig_status()["faults"] == "OK" and abs(core.rig_status()["servo_deg"][0]) < 0.3):
            core.tick(2)
            assert time.monotonic() < end
            time.sleep(0.01)
        states = list(link.history)
    finally:
        core.close()
    deg = np.array([s.degrees[0] for s in states])
    t_us = np.array([s.t_us for s in states], dtype=float)
    speed = np.abs(np.diff(deg)) / np.maximum(np.diff(t_us) * 1e-6, 1e-4)
    assert deg[0] > 39.0 and np.percentile(speed, 99) < 0.5 * 250 * 1.3, np.percentile(speed, 99)
