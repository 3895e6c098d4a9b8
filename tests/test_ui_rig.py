"""The teach pendant driving the servo rig (virtual → real) through the host-compiled emulator."""

from __future__ import annotations

import csv
import time

import numpy as np

from armtwin import robots
from armtwin.envs.pendant import PendantConfig, PendantCore, _twin_text
from armtwin.envs.rig import RigLink, TwinLog
from armtwin.scripts.cli import main

HANG = 60.0  # s: bounds a hang only; every loop ends as soon as its condition holds


def _tick_until(core: PendantCore, ok, what: str, min_ticks: int = 1):
    """Tick the pendant (one rig sample per tick, ~ at the pendant's rate) until ``ok(readout)``."""
    end = time.monotonic() + HANG
    k = 0
    while True:
        core.tick(4)
        k += 1
        r = core.readout()
        if k >= min_ticks and ok(r):
            return r
        assert time.monotonic() < end, f"timed out waiting for {what}; last readout twin: {r['twin']}"
        time.sleep(0.01)


def test_jogging_the_pendant_moves_the_servos_and_a_pulled_rig_shows(emu, tmp_path):
    core = PendantCore(robots.get("irb120"), config=PendantConfig(save_dir=tmp_path))
    log_path = tmp_path / "twin.csv"
    try:
        link = RigLink(emu.device).open()
        core.attach_rig(link, (0, 1), TwinLog(log_path, (0, 1)))
        # jog J1 by +10° and J2 by -5°: the servos follow to the commanded angles, ΔE settles
        core.jog_joint(0, +1, 10.0)
        core.jog_joint(1, -1, 5.0)
        target = np.degrees(core.target_joints()[:2])
        r = _tick_until(core, lambda r: r["twin"] is not None and r["twin"]["faults"] == "OK"
                        and np.all(np.abs(r["twin"]["servo_deg"] - target) < 0.5)
                        and np.all(np.abs(r["twin"]["error_deg"]) < 0.5), "the servos to reach the jog", 10)
        assert r["twin"]["joints"] == [1, 2] and np.isfinite(r["twin"]["latency_ms"])
        text = _twin_text(r["twin"])
        assert "rig: J1 " in text and "ΔE" in text and text.rstrip().endswith("OK")
        # the rig disappears: the readout says LINK, the pendant keeps running
        emu.stop()
        r = _tick_until(core, lambda r: "LINK" in r["twin"]["faults"], "LINK after the rig went away")
        assert "**" in _twin_text(r["twin"]) and core.jog_joint(0, +1, 1.0).applied
    finally:
        core.close()
    rows = list(csv.DictReader(open(log_path)))
    assert [int(x["STT"]) for x in rows] == list(range(len(rows))) and len(rows) >= 11
    assert rows[-1]["Fault"].split("|").count("LINK") == 1
    assert core.twin is None and not link.is_open   # closing the pendant closed the link and the log


def test_ui_refuses_a_bad_rig_in_one_line(capsys, tmp_path):
    for argv, words in ((["--rig", "/dev/nonexistent-rig"], "cannot open"),
                        (["--rig", "/dev/null", "--joints", "1,9"], "does not exist")):
        assert main(["ui", "irb120", "--port", "0", "--save-dir", str(tmp_path), *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], err
