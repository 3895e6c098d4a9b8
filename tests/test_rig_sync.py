"""Twin sync in both directions, the Gymnasium wrapper and the CLI commands (with the emulator)."""

import csv
import os
import re
import threading
import time

import gymnasium as gym
import numpy as np
import pytest

from armtwin.controllers import rigproto as rp
from armtwin.envs.rig import read_twin_log
from armtwin.envs.rig import (Direction, RigLink, SyncConfig, TwinLog, TwinSync, TwinSyncWrapper,
                              smooth_motion)
from armtwin.envs.sim import JointMode, PhysicsConfig, World
from armtwin.robots import get
from armtwin.scripts.cli import main


def test_virtual_to_real_tracks_and_settles(emu):
    """Move to +20° (J1) / −12° (J3), then hold; check the twin on the hold's fresh states.

    The hold window is chosen by the commanded motion's phase (source time ≥ move + 0.3 s),
    and the run lasts until that window has 60 fresh rig states, however slow the machine."""
    spec = get("irb120")
    move_s = 0.8
    motion = smooth_motion(spec, (0, 2), amplitude_deg=20, move_s=move_s, hold_s=1e6)  # one move, then hold
    samples, src_t, fresh_hold = [], [], []
    stop = threading.Event()
    deadline = time.monotonic() + 60.0  # bounds a hang only

    def source(t):
        src_t.append(t)
        return motion(t)

    def on_sample(s):
        prev = samples[-1].rig_state if samples else None
        samples.append(s)
        fresh = s.rig_state is not None and (prev is None or s.rig_state.seq != prev.seq)
        if fresh and src_t[-1] >= move_s + 0.3 and not s.faults:
            fresh_hold.append(s)
        if len(fresh_hold) >= 60 or time.monotonic() > deadline:
            stop.set()

    with World(PhysicsConfig(dt=1 / 500)) as world, RigLink(emu.device) as link:
        robot = world.add_robot(spec)
        sync = TwinSync(robot, link, SyncConfig((0, 2)), None)  # robot joints 1 and 3 on the two motors
        rep = sync.run(None, source=source, stop=stop, on_sample=on_sample)
    assert len(fresh_hold) >= 60, f"only {len(fresh_hold)} fresh states in the hold before the deadline"
    assert link.stats.lost == 0
    virt = np.array([s.virtual_deg for s in samples])
    servo = np.array([s.servo_deg for s in samples])
    err = np.array([s.error_deg for s in samples])
    np.testing.assert_allclose(err, virt - servo)
    hold_virt = np.array([s.virtual_deg for s in fresh_hold])
    np.testing.assert_allclose(hold_virt, [[20.0, -12.0]] * len(fresh_hold), atol=1e-6)  # it really moved
    assert np.max(np.abs([s.error_deg for s in fresh_hold])) < 0.5
    # latency: once measured, every sample with a live link shows one (NaN only under Fault.LINK)
    lat = np.array([s.latency_ms for s in samples])
    live = np.array([not (s.faults & rp.Fault.LINK) for s in samples])
    first = int(np.argmax(np.isfinite(lat)))
    assert np.isfinite(lat[first]) and np.all(np.isfinite(lat[first:][live[first:]]))
    assert np.all(lat[np.isfinite(lat)] > 0)
    assert rep.samples == len(samples)


def test_real_to_virtual_follows_the_rig(emu):
    spec = get("irb120")
    samples = []
    with World(PhysicsConfig(dt=1 / 500)) as world, RigLink(emu.device) as link:
        robot = world.add_robot(spec, mode=JointMode.KINEMATIC)
        cfg = SyncConfig((0, 1), Direction.REAL_TO_VIRTUAL, local_demo=True)
        TwinSync(robot, link, cfg, None).run(None, max_samples=600, on_sample=samples.append)
        q_final = robot.q
    servo = np.array([s.servo_deg for s in samples[100:]])
    virt = np.array([s.virtual_deg for s in samples[100:]])
    assert np.ptp(servo[:, 0]) > 5  # the rig's demo sine moved the motors
    np.testing.assert_allclose(virt, servo, atol=1e-6)  # the simulated joints took the measured ones
    np.testing.assert_allclose(np.degrees(q_final[:2]), samples[-1].servo_deg, atol=1e-6)
    assert np.allclose(q_final[2:], spec.home[2:])  # unmapped joints untouched


class StandInEnv(gym.Env):
    """A tiny env exposing ``unwrapped.robot`` like the armtwin envs: actions are joint targets."""

    def __init__(self):
        self.spec_ = get("irb120")
        self.world = World(PhysicsConfig(dt=1 / 500))
        self.robot = self.world.add_robot(self.spec_)
        n = self.spec_.dof
        self.action_space = gym.spaces.Box(-1.0, 1.0, (n,), np.float64)
        self.observation_space = gym.spaces.Box(-10.0, 10.0, (n,), np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.robot.reset(self.spec_.home)
        return self.robot.q, {}

    def step(self, action):
        self.robot.command(np.clip(action, self.spec_.lower, self.spec_.upper))
        self.world.step()
        return self.robot.q, 0.0, False, False, {}

    def close(self):
        self.world.close()


def settle(wenv, action, n_min, timeout=60.0):
    """Step with ``action`` at least ``n_min`` times and until the twin reports OK with
    |ΔE| < 0.5° (event-driven; the timeout only bounds a hang). Returns (steps, info)."""
    deadline = time.monotonic() + timeout
    k = 0
    while True:
        obs, r, term, trunc, info = wenv.step(action)
        k += 1
        tw = info["twin"]
        if k >= n_min and tw["faults"] == "OK" and np.all(np.abs(tw["error_deg"]) < 0.5):
            return k, info
        if time.monotonic() > deadline:
            return k, info
        time.sleep(0.002)


def test_gym_wrapper_mirrors_the_env_robot(emu, tmp_path):
    env = StandInEnv()
    with RigLink(emu.device) as link:
        log = TwinLog(tmp_path / "w.csv", (0, 1))
        wenv = TwinSyncWrapper(env, link, joints=(0, 1), log=log)
        obs, info = wenv.reset(seed=0)
        assert "twin" in info
        a = np.zeros(6)
        for k in range(300):
            a[0] = np.radians(15) * min(1.0, k / 300)
            a[1] = np.radians(-10) * min(1.0, k / 300)
            obs, r, term, trunc, info = wenv.step(a)
            time.sleep(0.002)
        a[:2] = np.radians([15.0, -10.0])
        n, info = settle(wenv, a, 50)
        log.close()
        assert link.stats.lost == 0
    tw = info["twin"]
    np.testing.assert_allclose(tw["servo_deg"], [15.0, -10.0], atol=0.5)
    assert tw["faults"] == "OK"
    with open(tmp_path / "w.csv") as f:
        assert len(list(csv.reader(f))) == 1 + 1 + 300 + n  # header, reset, ramp, hold
    env.close()


def test_gym_wrapper_real_to_virtual_lets_the_rig_drive_its_joints(emu):
    """REAL_TO_VIRTUAL: the rig's demo sine drives J1, J2 of the simulated robot whatever the
    policy asks for them; the policy still drives J3..J6; close() restores the robot's command."""
    env = StandInEnv()
    target = np.radians([30.0, -20.0, 10.0, 5.0, -15.0, 20.0])
    virt, servo, after = [], [], []
    with RigLink(emu.device) as link:
        wenv = TwinSyncWrapper(env, link, joints=(0, 1), direction="real-to-virtual", local_demo=True)
        wenv.reset(seed=0)
        deadline = time.monotonic() + 60.0  # bounds a hang only
        while len(servo) < 400 and time.monotonic() < deadline:
            prev = link.latest()
            obs, r, term, trunc, info = wenv.step(target)
            if prev is not None and info["twin"]["faults"] == "OK":
                virt.append(np.degrees(obs[:2]))  # the world stepped with the rig's newest joints then
                servo.append(prev.degrees[:2])  # ... which were these or a state received since
                after.append(info["twin"]["servo_deg"])
            time.sleep(0.002)
        assert link.stats.lost == 0
        wenv.close()
    virt, servo, after = np.array(virt), np.array(servo), np.array(after)
    assert len(servo) >= 400
    assert np.ptp(servo[:, 0]) > 5  # the rig's sine moved the motors
    # the simulated joints took a measured state of the step: the one before it, or one between
    # it and the sample after the step (the motion is smooth on that scale)
    assert np.all(np.abs(virt - servo) <= np.abs(after - servo) + 0.05)
    assert np.mean(np.all(np.abs(virt - servo) < 1e-6, axis=1)) > 0.5  # mostly exactly the one before
    np.testing.assert_allclose(obs[2:], target[2:], atol=1e-9)  # the policy drove the others
    assert "command" not in vars(env.robot)


def test_wrapper_reset_keeps_the_log_clock(emu, tmp_path):
    """A new episode re-sends the mode but neither STT nor Time starts again."""
    env = StandInEnv()
    with RigLink(emu.device) as link:
        with TwinLog(tmp_path / "w.csv", (0, 1)) as log:
            wenv = TwinSyncWrapper(env, link, joints=(0, 1), log=log)
            for episode in range(3):
                wenv.reset(seed=episode)
                for _ in range(20):
                    wenv.step(np.zeros(6))
                    time.sleep(0.001)
    with open(tmp_path / "w.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["STT"]) for r in rows] == list(range(3 * 21))
    t = np.array([float(r["Time"]) for r in rows])
    assert np.all(np.diff(t) > 0)  # never jumps back at a reset
    env.close()


def test_wrapper_needs_a_robot():
    class NoRobot(gym.Env):
        action_space = gym.spaces.Discrete(2)
        observation_space = gym.spaces.Discrete(2)

    with pytest.raises(ValueError):
        TwinSyncWrapper(NoRobot(), link=None)


def test_wrapper_needs_an_open_link(emu):
    env = StandInEnv()
    link = RigLink(emu.device)
    with pytest.raises(ValueError, match="open RigLink"):
        TwinSyncWrapper(env, link)
    with link:
        TwinSyncWrapper(env, link)  # open: accepted
    assert not link.is_open
    env.close()


def test_cli_sync_and_plot(emu, tmp_path, capsys):
    log = str(tmp_path / "twin.csv")
    rc = main(["sync", "--port", emu.device, "--robot", "irb120", "--joints", "1,2", "--direction", "virtual-to-real",
               "--samples", "400", "--log", log])
    out, err = capsys.readouterr()
    assert rc == 0 and log in out
    with open(log) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["STT", "Time", "Error_j1", "Error_j2", "Virtual_j1", "Virtual_j2", "Servo_j1",
                             "Servo_j2", "Latency_ms", "Fault"]
    check_cli_log(rows, out, 400)
    # no --program: the start message says which motion drives the rig (as --help does)
    assert ("no --program: the simulated irb120 follows the built-in motion (J1 ±30°, J2 ∓18° around home, "
            "1.5 s moves and 1 s holds)") in err
    rc = main(["plot", log])
    png = capsys.readouterr().out.strip()
    assert rc == 0 and png.endswith(".png") and os.path.getsize(png) > 10_000


def check_cli_log(rows, out, n, rate=500.0, max_late_s=0.05):
    """Exactly ``n`` complete rows, consecutive STT, nothing lost, every tick sampled or counted."""
    assert len(rows) == n
    assert [int(r["STT"]) for r in rows] == list(range(n))
    for r in rows:
        assert None not in r and all(v not in (None, "") for v in r.values())  # complete
        assert np.isfinite(float(r["Virtual_j1"])) and np.isfinite(float(r["Virtual_j2"]))
    m = re.search(r"samples (\d+) .* lost frames (\d+) .* skipped ticks (\d+) in (\d+) stalls", out)
    assert m, out
    samples, lost, skipped, stalls = map(int, m.groups())
    assert samples == n and lost == 0
    late = ["LATE" in r["Fault"].split("|") for r in rows]
    assert sum(late) == stalls
    t = np.array([float(r["Time"]) for r in rows])
    p = 1.0 / rate
    assert np.all(late[1:] | (np.diff(t) < (int(max_late_s / p) + 2) * p + 2e-6))  # long gaps are flagged
    assert t[-1] >= (n + skipped - 1) * p - 2e-6 and t[-1] - t[0] < (n + skipped + int(max_late_s / p)) * p + 2e-6


@pytest.mark.parametrize("argv, msg", [
    (["--joints", "1,9"], "does not exist"),
    (["--joints", "3"], "prismatic"),
    (["--direction", "sideways"], "direction"),
    (["--port", "/dev/nonexistent-rig"], "cannot open"),
    (["--samples", "0"], "--samples"),
    (["--connect-timeout", "nan"], "--connect-timeout"),
])
def test_cli_sync_bad_input(argv, msg, capsys, tmp_path):
    base = {"--port": "/dev/null", "--robot": "irb120", "--joints": "1,2", "--direction": "virtual-to-real"}
    if argv[1] == "3" and argv[0] == "--joints":
        base["--robot"] = "scara"
    base[argv[0]] = argv[1]
    args = ["sync", "--seconds", "0.1", "--log", str(tmp_path / "x.csv")] + [v for kv in base.items() for v in kv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err and err.count("\n") == 1


def test_cli_plot_bad_file(tmp_path, capsys):
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,2\n")
    assert main(["plot", str(p)]) == 2
    assert "not a twin log" in capsys.readouterr().err
    p.write_bytes(bytes(range(128, 256)) * 4)     # binary
    assert main(["plot", str(p)]) == 2
    err = capsys.readouterr().err
    assert str(p) in err and "not a twin log" in err and err.count("\n") == 1


@pytest.mark.parametrize("seconds", ["0", "-1", "nan", "inf", "1e308", "0.05", "3601"])
def test_cli_rig_emulate_refuses_a_bad_duration(seconds, capsys):
    assert main(["rig", "emulate", "--seconds", seconds]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--seconds" in err and "must be between 0.1 and 3600 s" in err


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGKILL"])
def test_cli_sync_log_survives_signals(sig, emu, tmp_path):
    import signal
    import subprocess
    import sys
    import time
    log = tmp_path / "twin.csv"
    p = subprocess.Popen([sys.executable, "-m", "armtwin.scripts.cli", "sync", "--port", emu.device, "--robot", "irb120",
                          "--joints", "1,2", "--log", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        t_end = time.monotonic() + 60  # generous: start-up on a loaded machine
        while time.monotonic() < t_end and p.poll() is None:  # wait until rows are flushed as they come
            if log.exists() and log.read_text().count("\n") > 310:
                break
            time.sleep(0.05)
        assert p.poll() is None, p.communicate()[1]
        p.send_signal(getattr(signal, sig))
        out, err = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
    text = log.read_text()
    lines = text.split("\n")
    complete = [l for l in lines[1:] if l.count(",") == 9]
    assert len(complete) > 300
    assert [int(l.split(",")[0]) for l in complete] == list(range(len(complete)))  # no gaps
    if sig == "SIGKILL":
        assert len(lines[1:]) - len(complete) <= 2  # at most the row being written (and the final "")
    else:
        assert p.returncode == {"SIGTERM": 143, "SIGINT": 130}[sig], err  # the README's exit codes
        assert text.endswith("\n") and len(complete) == len(lines) - 2  # closed cleanly, nothing partial
        assert str(log) in out and re.search(r" lost frames 0 ", out), out


def test_wrapper_on_a_registered_armtwin_env(emu):
    import armtwin.envs  # noqa: F401  (registers the armtwin/* ids)
    env = gym.make("armtwin/IRB120Reach-v0", control="joint", joint_mode="kinematic")
    with RigLink(emu.device) as link:
        wenv = TwinSyncWrapper(env, link, joints=(0, 1))
        obs, info = wenv.reset(seed=1)
        rng = np.random.default_rng(0)
        for _ in range(20):
            obs, r, term, trunc, info = wenv.step(rng.uniform(-0.3, 0.3, env.action_space.shape))
            time.sleep(0.02)
        n, info = settle(wenv, np.zeros(env.action_space.shape), 20)  # hold: zero joint deltas
    tw = info["twin"]
    assert tw["faults"] == "OK"
    assert np.all(np.abs(tw["error_deg"]) < 0.5)
    env.close()


def test_cli_sync_runs_a_gcode_program(emu, tmp_path, capsys):
    prog = tmp_path / "p.ngc"
    prog.write_text("G21 G90\nG1 X10 F600\n")
    log = str(tmp_path / "twin.csv")
    rc = main(["sync", "--port", emu.device, "--robot", "irb120", "--joints", "1,2", "--program", str(prog),
               "--samples", "400", "--log", log])
    out = capsys.readouterr().out
    assert rc == 0
    with open(log) as f:
        rows = list(csv.DictReader(f))
    check_cli_log(rows, out, 400)
    v = np.array([[float(r["Virtual_j1"]), float(r["Virtual_j2"])] for r in rows])
    assert np.ptp(v, axis=0).max() > 0.1  # the program moved the simulated joints (400 samples >= 0.8 s)
    bad = tmp_path / "bad.ngc"
    bad.write_text("G21 G90\nG1 X5000 F600\n")  # 5 m away: beyond the IRB120's reach
    capsys.readouterr()
    # a program that cannot run exits 1, as in `armtwin run` and `armtwin check` (issue 15.23)
    assert main(["sync", "--port", emu.device, "--robot", "irb120", "--program", str(bad), "--log", log]) == 1
    err = capsys.readouterr().err
    assert "bad.ngc" in err and err.count("\n") == 1


def test_cli_rig_emulate_prints_the_device(capsys):
    assert main(["rig", "emulate", "--seconds", "0.3"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("/dev/pts/")
    assert main(["rig", "emulate", "--baud", "10"]) == 2
    assert "--baud" in capsys.readouterr().err


def test_cli_bench_rig_json_keys(capsys, tmp_path):
    import json
    log = tmp_path / "bench.csv"
    assert main(["bench", "rig", "--seconds", "1", "--json", "--log", str(log)]) == 0
    text = capsys.readouterr().out
    assert "NaN" not in text  # valid JSON: a figure that could not be measured is null, with the reason
    r = json.loads(text)
    for k in ("rate_hz", "latency_p50_ms", "latency_p99_ms", "error_deg", "samples_lost", "wire_share"):
        assert k in r
    assert r["error_deg"] is None and "no steady-state window" in r["notes"]["error_deg"]
    assert r["samples"] >= 1 and 0 < r["wire_share"] <= 1.0
    for k in ("ticks_skipped", "power_detect_ms", "power_detect_rig_ms", "latency_samples"):
        assert k in r
    # --log: the timed sync's samples, then the power test's, as a twin log that plot reads
    assert r["log"] == str(log)
    d = read_twin_log(log)                       # checked: no sample lost, time never going back
    n = r["samples"]
    power = ["POWER" in f for f in d["Fault"]]
    assert len(d["STT"]) > n and not any(power[:n]) and any(power[n:])
    assert np.isfinite(d["Servo_j1"][:n]).sum() > n // 2
    assert main(["plot", str(log)]) == 0 and (tmp_path / "bench.png").stat().st_size > 10_000


def test_cli_sync_fails_when_the_rig_never_answers(tmp_path, capsys):
    import os
    import pty
    master, slave = pty.openpty()  # a port that accepts bytes but never answers
    try:
        log = tmp_path / "twin.csv"
        code = main(["sync", "--port", os.ttyname(slave), "--robot", "irb120", "--joints", "1,2",
                     "--direction", "virtual-to-real", "--samples", "60", "--log", str(log)])
        err = capsys.readouterr().err
    finally:
        os.close(master)
        os.close(slave)
    assert code == 1 and "no state ever came back from the rig" in err
    rows = log.read_text().splitlines()
    assert len(rows) == 61 and all(r.endswith("LINK") for r in rows[1:])  # every sample logged, flagged


def test_cli_sync_without_an_end_gives_up_on_a_silent_port(tmp_path, capsys):
    import os
    import pty
    master, slave = pty.openpty()  # a port that accepts bytes but never answers
    try:
        log = tmp_path / "twin.csv"
        code = main(["sync", "--port", os.ttyname(slave), "--robot", "irb120", "--connect-timeout", "0.5",
                     "--log", str(log)])          # no --seconds, --samples or --program: it would never end
        err = capsys.readouterr().err
    finally:
        os.close(master)
        os.close(slave)
    assert code == 1 and "no answer from the rig within 0.5 s" in err and "Traceback" not in err
    assert not log.exists()


def test_cli_sync_never_writes_its_log_over_the_program_or_the_port(tmp_path, capsys):
    import os
    import pty
    prog = tmp_path / "p.ngc"
    prog.write_text("G0 X0 Y0 Z10\n")
    master, slave = pty.openpty()
    try:
        for log in (str(tmp_path / "sub" / ".." / "p.ngc"), os.ttyname(slave)):
            code = main(["sync", "--port", os.ttyname(slave), "--robot", "irb120", "--program", str(prog),
                         "--seconds", "0.2", "--log", log])
            err = capsys.readouterr().err
            assert code == 2 and ("is the program itself" in err or "is the serial port itself" in err), err
    finally:
        os.close(master)
        os.close(slave)
    assert prog.read_text() == "G0 X0 Y0 Z10\n"


def test_cli_sync_help_says_what_drives_the_rig_without_a_program(capsys):
    with pytest.raises(SystemExit):
        main(["sync", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Without it the simulated joints follow a built-in motion: the first to ±30°, the second to ∓18°" in text
    assert "the run needs at least 3751 samples" in text and "a .csv name" in text


@pytest.mark.parametrize("extra, words", [
    (["--baud", "0"], "--baud 0: must be between 300 and 4000000 bit/s"),
    (["--baud", "4000001"], "--baud 4000001: must be between 300 and 4000000 bit/s"),
    (["--seconds", "inf"], "--seconds inf: must be more than 0"),
    (["--seconds", "1e308"], "--seconds 1e+308: must be more than 0"),
    (["--rate", "nan"], "--rate nan: must be between 1 and 5000 Hz"),
    (["--demo"], "--demo makes the rig move by itself: it needs --direction real-to-virtual"),
    (["--demo", "--direction", "virtual-to-real"], "--demo makes the rig move by itself"),
    (["--power-test", "--samples", "100"],
     "it needs a run of at least 3751 samples; --samples 100 stops before"),
    (["--power-test", "--seconds", "2"],
     "it needs a run of at least 3751 samples (at --rate 500: --seconds of at least 7.6); --seconds 2 gives 1000"),
    (["--power-test", "--seconds", "10", "--rate", "100"], "at --rate 100: --seconds of at least 37.6"),
])
def test_cli_sync_refuses_bad_options_before_opening_the_port(extra, words, tmp_path, capsys):
    log = tmp_path / "x.csv"
    assert main(["sync", "--port", "/dev/nonexistent-rig", "--robot", "irb120", "--log", str(log), *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err, err
    assert not log.exists()


def test_cli_sync_power_test_refuses_a_program_too_short_for_it(tmp_path, capsys):
    prog = tmp_path / "p.ngc"
    prog.write_text("G21 G90\nG1 X10 F600\n")  # about a second
    assert main(["sync", "--port", "/dev/nonexistent-rig", "--robot", "irb120", "--program", str(prog),
                 "--power-test", "--log", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert "needs a run of at least 3751 samples" in err and "the program's" in err and err.count("\n") == 1


def test_cli_sync_log_must_be_a_csv_or_mcap_file_it_can_write(tmp_path, capsys):
    prog = tmp_path / "prog.ngc"
    prog.write_text("G0 X300 Y0 Z400\n")
    os.mkfifo(tmp_path / "fifo.csv")  # opening it for writing would block for ever
    (tmp_path / "dir.csv").mkdir()
    for log, words in ((prog, f"--log {prog}: use a .csv or .mcap file name"),
                       (tmp_path / "notes.txt", "use a .csv or .mcap file name"),
                       (tmp_path / "fifo.csv", f"--log {tmp_path / 'fifo.csv'}: is not a regular file"),
                       (tmp_path / "dir.csv", f"--log {tmp_path / 'dir.csv'}: is a folder")):
        assert main(["sync", "--port", "/dev/nonexistent-rig", "--robot", "irb120", "--seconds", "1",
                     "--log", str(log)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, err
    assert prog.read_text() == "G0 X300 Y0 Z400\n" and not (tmp_path / "notes.txt").exists()
    # any case of .csv is a log name (the port is checked after the log)
    assert main(["sync", "--port", "/dev/nonexistent-rig", "--robot", "irb120", "--log", str(tmp_path / "T.CSV")]) == 2
    assert "cannot open rig port" in capsys.readouterr().err


def test_cli_sync_names_log_when_it_cannot_be_opened(emu, tmp_path, capsys, monkeypatch):
    import armtwin.envs.rig as rig

    def refuse(self, path, joints):
        raise IsADirectoryError(21, "Is a directory", str(path))

    monkeypatch.setattr(rig.TwinLog, "__init__", refuse)  # e.g. a folder made there after the checks
    log = tmp_path / "twin.csv"
    assert main(["sync", "--port", emu.device, "--robot", "irb120", "--samples", "10", "--log", str(log)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"armtwin: error: --log {log}: cannot write it: Is a directory", err


@pytest.mark.parametrize("argv", [
    ["rig", "emulate", "--baud", "4000001"],
    ["bench", "rig", "--baud", "4000001"],
    ["sync", "--port", "/dev/null", "--robot", "irb120", "--log", "x.csv", "--baud", "4000001"],
    ["ui", "irb120", "--rig", "/dev/null", "--baud", "4000001"],
])
def test_one_baud_range_for_every_rig_command(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert capsys.readouterr().err == "armtwin: error: --baud 4000001: must be between 300 and 4000000 bit/s\n"


@pytest.mark.parametrize("argv, words", [
    (["--rate", "0"], "--rate 0: must be between 10 and 2000 Hz"),
    (["--rate", "nan"], "--rate nan: must be between 10 and 2000 Hz"),
    (["--rate", "0.0001"], "--rate 0.0001: must be between 10 and 2000 Hz"),
    (["--rate", "inf"], "--rate inf: must be between 10 and 2000 Hz"),
    (["--seconds", "1e-9"], "--seconds 1e-09: must be between 1 and 3600 s"),
    (["--seconds", "1e308"], "--seconds 1e+308: must be between 1 and 3600 s"),
    (["--seconds", "nan"], "--seconds nan: must be between 1 and 3600 s"),
    (["--seconds", "0.5"], "--seconds 0.5: must be between 1 and 3600 s"),
    (["--baud", "0"], "--baud 0: must be between 300 and 4000000 bit/s"),
])
def test_cli_bench_rig_refuses_bad_options_in_one_line(argv, words, capsys):
    assert main(["bench", "rig", *argv]) == 2
    assert capsys.readouterr().err == f"armtwin: error: {words}\n"


def test_cli_bench_rig_refuses_a_log_that_is_no_twin_log_name(capsys, tmp_path):
    prog = tmp_path / "p.ngc"
    prog.write_text("G0 X0\n")
    assert main(["bench", "rig", "--seconds", "1", "--log", str(prog)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"armtwin: error: --log {prog}") and ".csv" in err and err.count("\n") == 1
    assert prog.read_text() == "G0 X0\n"
    assert main(["bench", "rig", "--chip", "--log", str(tmp_path / "chip.csv")]) == 2
    err = capsys.readouterr().err
    assert "--log" in err and "--chip" in err and err.count("\n") == 1 and not (tmp_path / "chip.csv").exists()


def test_cli_bench_rig_short_run_says_n_a_and_why(capsys, tmp_path):
    log = tmp_path / "bench.mcap"
    assert main(["bench", "rig", "--seconds", "1", "--log", str(log)]) == 0
    out, err = capsys.readouterr()
    assert f"samples written to {log}" in out
    assert len(read_twin_log(log)["STT"]) > int(re.search(r"\((?:[0-9.]+) s, ([0-9]+) samples,", out).group(1))
    assert "nan" not in out.lower()
    row = next(line for line in out.splitlines() if "steady-state error" in line)
    assert "n/a" in row and "the run is shorter than the 2.5 s the first one needs" in row
    assert "shorter than the 2.5 s the first steady-state window needs" in err


def test_cli_sync_power_test_cut_short_says_so_and_restores_the_power(emu, tmp_path, capsys, monkeypatch):
    """Interrupted between a cut and its restore (a small schedule stands in for 3000/3150/3600/3750)."""
    import signal
    from armtwin.scripts import cmd_sync
    monkeypatch.setattr(cmd_sync, "POWER_TEST", {10: False, 20: True, 30: False, 4000: True})
    monkeypatch.setattr(cmd_sync, "POWER_TEST_SAMPLES", 4001)
    log = tmp_path / "twin.csv"

    def interrupt_after_the_second_cut():
        end = time.monotonic() + 30.0  # bounds a hang only
        while time.monotonic() < end and not (log.exists() and log.read_text().count("\n") > 60):
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)  # the sync's handler stops it cleanly

    th = threading.Thread(target=interrupt_after_the_second_cut)
    th.start()
    try:
        rc = main(["sync", "--port", emu.device, "--robot", "irb120", "--power-test", "--log", str(log)])
    finally:
        th.join()
    out, err = capsys.readouterr()
    assert rc == 130 and "(interrupted)" in out
    assert "warning: the power test was cut short at sample" in err and "3 of 4 power commands sent" in err
    assert "the rig's power was cut; it has been restored" in err
