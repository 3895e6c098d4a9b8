"""Fault handling of the twin: power cuts (the published 3000/3150 test, and a reduced one),
a pulled cable (the emulator killed and restarted), and log integrity."""

import csv
import threading
import time

import numpy as np
import pytest

from armtwin.envs.rig import (Emulator, LinkConfig, RigLink, SyncConfig, TwinLog, TwinSync, build_emulator,
                              smooth_motion)
from armtwin.envs.sim import PhysicsConfig, World
from armtwin.robots import get


@pytest.fixture(scope="module")
def exe():
    return build_emulator()


def read_log(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def first_row_with(rows, start, fault, present=True):
    for r in rows[start:]:
        if (fault in r["Fault"].split("|")) == present:
            return r
    return None


def run_power_sequence(exe, tmp_path, cut, restore, cut2, n):
    spec = get("irb120")
    log_path = tmp_path / "twin.csv"
    with Emulator(exe=exe) as emu, World(PhysicsConfig(dt=1 / 500)) as world:
        robot = world.add_robot(spec)
        link = RigLink(emu.device).open()
        log = TwinLog(log_path, (0, 1))
        try:
            sync = TwinSync(robot, link, SyncConfig((0, 1)), log)
            rep = sync.run(None, source=smooth_motion(spec, (0, 1), move_s=1.0, hold_s=0.5), max_samples=n,
                           power_schedule={cut: False, restore: True, cut2: False})
        finally:
            log.close()
            link.close()
    rows = read_log(log_path)
    return rows, rep


def check_power_sequence(rows, rep, cut, restore, cut2, n):
    assert [int(r["STT"]) for r in rows] == list(range(n))  # consecutive, nothing lost
    t = {int(r["STT"]): float(r["Time"]) for r in rows}
    on1 = first_row_with(rows, cut, "POWER")
    assert on1 is not None and int(on1["STT"]) < restore
    assert float(on1["Time"]) - t[cut] <= 0.050  # detected within 50 ms
    off = first_row_with(rows, int(on1["STT"]), "POWER", present=False)
    assert off is not None and restore <= int(off["STT"]) < cut2  # recovery detected
    assert float(off["Time"]) - t[restore] <= 0.050
    on2 = first_row_with(rows, cut2, "POWER")
    assert on2 is not None and float(on2["Time"]) - t[cut2] <= 0.050
    # no POWER flag outside the cut windows
    for r in rows[:cut]:
        assert "POWER" not in r["Fault"]
    kinds = [(e.fault, e.on) for e in rep.events if e.fault == "POWER"]
    assert kinds == [("POWER", True), ("POWER", False), ("POWER", True)]


def test_power_cut_reduced_scale(exe, tmp_path):
    rows, rep = run_power_sequence(exe, tmp_path, 300, 315, 400, 500)
    check_power_sequence(rows, rep, 300, 315, 400, 500)


@pytest.mark.slow
def test_power_cut_published_3000_3150(exe, tmp_path):
    rows, rep = run_power_sequence(exe, tmp_path, 3000, 3150, 3600, 3800)
    check_power_sequence(rows, rep, 3000, 3150, 3600, 3800)
    # while the power is off the servo does not move; after the restore it tracks again
    cut_rows = [r for r in rows[3010:3150]]
    servo = np.array([float(r["Servo_j1"]) for r in cut_rows])
    assert np.ptp(servo[30:]) < 0.05  # coasted to a stop
    err_after = np.array([abs(float(r["Error_j1"])) for r in rows[3450:3600]])
    assert err_after.max() < 1.0


def test_pulled_cable_reconnects_without_losing_the_log(exe, tmp_path):
    spec = get("irb120")
    link_path = str(tmp_path / "rig-tty")
    log_path = tmp_path / "twin.csv"
    emus = [Emulator(exe=exe, link=link_path)]
    n = 900

    def pull_and_replug():
        time.sleep(0.5)
        emus[0].stop(kill=True)  # the cable is pulled: the port disappears
        time.sleep(0.6)
        emus.append(Emulator(exe=exe, link=link_path))  # plugged in again, same name

    with World(PhysicsConfig(dt=1 / 500)) as world:
        robot = world.add_robot(spec)
        link = RigLink(link_path, LinkConfig(reconnect_s=0.1)).open()
        log = TwinLog(log_path, (0, 1))
        th = threading.Thread(target=pull_and_replug)
        try:
            sync = TwinSync(robot, link, SyncConfig((0, 1)), log)
            th.start()
            rep = sync.run(None, source=smooth_motion(spec, (0, 1)), max_samples=n)
        finally:
            th.join()
            log.close()
            link.close()
            for e in emus:
                e.stop()
    rows = read_log(log_path)
    assert [int(r["STT"]) for r in rows] == list(range(n))
    faults = [r["Fault"] for r in rows]
    assert any("LINK" in f for f in faults)
    assert link.stats.disconnects >= 1
    assert link.stats.reconnect_attempts >= 2  # it kept trying while the port was gone
    assert link.stats.reconnects >= 1
    assert "LINK" not in faults[-1] and "WATCHDOG" not in faults[-1]  # back in sync at the end
    assert abs(float(rows[-1]["Error_j1"])) < 2.0
    events = [(e.fault, e.on) for e in rep.events if e.fault == "LINK"]
    assert ("LINK", True) in events and ("LINK", False) in events
