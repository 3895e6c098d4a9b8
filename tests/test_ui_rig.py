"""The teach pendant driving the servo rig (virtual → real) through the host-compiled emulator.

Every wait ends as soon as its condition holds (samples and states, not wall-clock durations);
``HANG`` only bounds a hang.
"""

from __future__ import annotations

import csv
import math
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from armtwin import robots
from armtwin.envs.pendant import Pendant, PendantConfig, PendantCore, rig_markdown
from armtwin.envs.rig import Emulator, RigLink, TwinLog
from armtwin.scripts.cli import main

HANG = 30.0  # s


def _tick_until(core: PendantCore, ok, what: str, min_ticks: int = 1) -> dict:
    """Tick the pendant (one rig sample per tick) until ``ok(readout)``; returns that readout."""
    end = time.monotonic() + HANG
    k = 0
    while True:
        core.tick(4)
        k += 1
        r = core.readout()
        if k >= min_ticks and ok(r):
            return r
        assert time.monotonic() < end, f"timed out waiting for {what}; last rig status: {r['twin']}"
        time.sleep(0.005)


def _wait(cond, what: str):
    end = time.monotonic() + HANG
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.01)


def _settled(target_deg: np.ndarray, tol: float = 0.5):
    def ok(r: dict) -> bool:
        tw = r["twin"]
        return (tw is not None and tw["faults"] == "OK" and np.all(np.abs(tw["servo_deg"] - target_deg) < tol)
                and np.all(np.abs(tw["error_deg"]) < tol))
    return ok


def _rows(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def core(tmp_path):
    c = PendantCore(robots.get("irb120"), config=PendantConfig(save_dir=tmp_path))
    yield c
    c.close()


def test_jogging_the_pendant_moves_the_servos_and_a_stopped_rig_shows(core, emu, tmp_path):
    log_path = tmp_path / "twin.csv"
    link = RigLink(emu.device).open()
    log = TwinLog(log_path, (0, 1))
    core.attach_rig(link, (0, 1), log)
    tw = core.rig_status()  # attached: no sample yet, or the rig loop's first ones already
    assert (tw["faults"] == "WAITING") == (tw["stt"] == -1)
    assert "waiting for the first sample" in rig_markdown({**tw, "faults": "WAITING", "stt": -1})
    # jog J1 by +10° and J2 by −5°: the servos follow to the commanded angles and ΔE settles
    assert core.jog_joint(0, +1, 10.0).applied and core.jog_joint(1, -1, 5.0).applied
    target = np.degrees(core.target_joints()[:2])
    r = _tick_until(core, _settled(target), "the servos to reach the jog", min_ticks=10)
    tw = r["twin"]
    assert tw["joints"] == [1, 2] and tw["port"] == emu.device and tw["connected"]
    np.testing.assert_allclose(tw["virtual_deg"], target, atol=1e-6)  # kinematic joints: at the target at once
    assert np.isfinite(tw["latency_ms"]) and tw["latency_ms"] > 0 and tw["lost"] == 0
    text = rig_markdown(tw)
    assert f"servo J1 {tw['servo_deg'][0]:.1f}° · J2 {tw['servo_deg'][1]:.1f}°" in text
    assert "ΔE J1 " in text and f"latency {tw['latency_ms']:.1f} ms" in text and "rig OK" in text
    # the rig disappears (the process ends, its pty goes): LINK LOST, port gone; the pendant goes on
    emu.stop(kill=True)
    r = _tick_until(core, lambda r: "LINK" in r["twin"]["faults"] and not r["twin"]["connected"], "LINK after the rig went away")
    tw = r["twin"]
    assert np.all(np.isnan(tw["servo_deg"])) and math.isnan(tw["latency_ms"])
    text = rig_markdown(tw)
    assert "**⚠ LINK LOST**" in text and "port gone, trying to reopen it" in text and "servo J1 — · J2 —" in text
    assert any(e.startswith("LINK on at #") for e in tw["events"]) and "LINK on at #" in text
    assert core.jog_joint(0, +1, 1.0).applied  # the pendant still works
    core.tick(4)
    core.close()  # closes the link (and its reader thread) and the log
    assert core.twin is None and not link.is_open and log._f.closed
    rows = _rows(log_path)
    assert [int(x["STT"]) for x in rows] == list(range(len(rows))) and len(rows) >= 12
    assert rows[-1]["Fault"].split("|").count("LINK") == 1 and rows[-1]["Servo_j1"] == "nan"
    settled = [x for x in rows if x["Fault"] == "OK"]
    assert settled and abs(float(settled[-1]["Servo_j1"]) - target[0]) < 0.5


def test_a_power_cut_shows_and_its_recovery_too(core, emu):
    core.attach_rig(RigLink(emu.device).open(), (1, 2))
    assert core.jog_joint(2, +1, 8.0).applied
    target = np.degrees(core.target_joints()[1:3])
    _tick_until(core, _settled(target), "the servos to settle")
    core.twin.link.power(False)
    r = _tick_until(core, lambda r: "POWER" in r["twin"]["faults"], "POWER after the cut")
    assert "**⚠ POWER**: motor supply cut" in rig_markdown(r["twin"])
    core.twin.link.power(True)
    r = _tick_until(core, _settled(target), "the servos back after the power returned")
    assert r["twin"]["joints"] == [2, 3]
    assert {"POWER on", "POWER off"} <= {" ".join(e.split()[:2]) for e in r["twin"]["events"]}


def test_a_rig_plugged_in_again_is_driven_again(core, exe, tmp_path):
    """Unplugged (LINK LOST, port gone) and plugged in again under the same name: back to OK at the target."""
    name = str(tmp_path / "rig")
    emus = [Emulator(exe=exe, link=name)]
    try:
        core.attach_rig(RigLink(name).open())
        core.jog_joint(0, +1, 4.0)
        target = np.degrees(core.target_joints()[:2])
        _tick_until(core, _settled(target), "the servos to settle")
        emus[0].stop(kill=True)
        _tick_until(core, lambda r: "LINK" in r["twin"]["faults"] and not r["twin"]["connected"], "LINK LOST")
        emus.append(Emulator(exe=exe, link=name))
        r = _tick_until(core, _settled(target), "the servos back at the target after the reconnect")
        link_events = [e.on for e in core.twin.events if e.fault == "LINK"]
        assert r["twin"]["reconnects"] >= 1 and link_events[-2:] == [True, False]
    finally:
        core.detach_rig()
        for e in emus:
            e.stop()


def test_attach_checks_its_input_and_detach_closes_the_link(core, emu):
    link = RigLink(emu.device)
    with pytest.raises(ValueError, match="open RigLink"):
        core.attach_rig(link)  # not opened
    link.open()
    with pytest.raises(ValueError, match="prismatic|does not exist"):
        core.attach_rig(link, (0, 9))
    core.attach_rig(link, (0,))
    with pytest.raises(ValueError, match="attached already"):
        core.attach_rig(link)
    r = _tick_until(core, lambda r: r["twin"]["faults"] == "OK", "the first good sample")
    assert r["twin"]["joints"] == [1] and r["twin"]["servo_deg"].shape == (1,)
    core.detach_rig()
    assert core.rig_status() is None and core.readout()["twin"] is None and not link.is_open
    core.detach_rig()  # idempotent
    core.tick(2)


class FullDisk:
    """A twin log on a full disk."""

    closed = False

    def write(self, sample):
        raise OSError(28, "No space left on device")

    def close(self):
        self.closed = True


def test_a_failing_sample_is_shown_not_raised(core, emu):
    log = FullDisk()
    core.attach_rig(RigLink(emu.device).open(), log=log)
    core.tick(2)  # does not raise
    tw = _wait(lambda: (lambda t: t if t["error"] else None)(core.rig_status()), "the failure to show")
    assert "No space left" in tw["error"] and "**⚠ sample failed**: OSError" in rig_markdown(tw)
    assert log.closed  # the log is given up; the twin goes on without it
    stt = tw["stt"]
    _wait(lambda: core.rig_status()["stt"] > stt + 50, "samples after the failure")


def test_rig_markdown_without_a_rig_and_with_several_faults():
    assert rig_markdown(None) == ""
    tw = {"port": "/dev/ttyUSB0", "joints": [1, 2], "stt": 7, "virtual_deg": np.zeros(2),
          "servo_deg": np.array([1.25, np.nan]), "error_deg": np.array([-1.25, np.nan]), "latency_ms": 2.5,
          "faults": "POWER|LINK", "connected": True, "states_rx": 9, "lost": 0, "dropped": 0, "reconnect_attempts": 0, "reconnects": 0,
          "events": [], "error": ""}
    text = rig_markdown(tw)
    assert "sample #7" in text and "servo J1 1.2° · J2 —" in text and "ΔE J1 -1.25° · J2 —" in text
    assert "**⚠ POWER**: motor supply cut" in text and "**⚠ LINK LOST**: no state from the rig — port open, the rig is silent" in text


def test_the_page_shows_the_rig_panel_and_closing_closes_the_link(emu, tmp_path):
    """The viser pendant (no browser): its own loop samples the rig; the panel appears, shows LINK LOST."""
    log = TwinLog(tmp_path / "twin.csv", (0, 1))
    with Pendant("irb120", port=0, config=PendantConfig(save_dir=tmp_path)) as p:
        assert not p.rig_md.visible
        link = RigLink(emu.device).open()
        p.core.attach_rig(link, (0, 1), log)
        p.core.jog_joint(0, -1, 6.0)

        def shows_the_jog():
            m = re.search(r"servo J1 (-?\d+\.\d)° · J2 (-?\d+\.\d)°", p.rig_md.content)
            return (p.rig_md.visible and "rig OK" in p.rig_md.content and m is not None
                    and abs(float(m[1]) + 6.0) < 0.5 and abs(float(m[2])) < 0.5)

        _wait(shows_the_jog, "the rig panel to show the servo at the jog")
        assert "ΔE J1 " in p.rig_md.content and "latency " in p.rig_md.content
        emu.stop(kill=True)
        _wait(lambda: "LINK LOST" in p.rig_md.content, "the rig panel to show LINK LOST")
        assert p._thread.is_alive() and p.core.jog_joint(1, +1, 2.0).applied
    assert not link.is_open and log._f.closed
    assert len(_rows(tmp_path / "twin.csv")) > 3


def test_armtwin_ui_rig_serves_logs_and_stops_cleanly_on_sigterm(emu, tmp_path):
    log_path = tmp_path / "ui_twin.csv"
    code = "import sys; from armtwin.scripts.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, "ui", "irb120", "--port", "0", "--save-dir", str(tmp_path),
                             "--rig", emu.device, "--joints", "2,3", "--rig-log", str(log_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(50):  # viser may print its banner first
            line = proc.stdout.readline()
            if not line or "open http://127.0.0.1:" in line:
                break
        assert "open http://127.0.0.1:" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
        _wait(lambda: log_path.exists() and len(_rows(log_path)) > 5 and _rows(log_path)[-1]["Fault"] == "OK",
              "the UI's twin log to fill with good samples")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=HANG)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "teach pendant stopped" in err and "drives the rig on" in err and "robot joints 2, 3 -> rig motors 1, 2" in err and "Traceback" not in err
    rows = _rows(log_path)
    assert list(rows[0]) == ["STT", "Time", "Error_j2", "Error_j3", "Virtual_j2", "Virtual_j3", "Servo_j2", "Servo_j3",
                             "Latency_ms", "Fault"]
    assert [int(x["STT"]) for x in rows] == list(range(len(rows)))
    assert open(log_path).read().endswith("\n")  # the last row complete: the log was closed, not cut


@pytest.mark.parametrize("argv, words", [
    (["--rig", "/dev/nonexistent-rig"], "cannot open rig port /dev/nonexistent-rig"),
    (["--rig", "/dev/null", "--joints", "1,9"], "joint 9 does not exist"),
    (["--rig", "/dev/null", "--joints", "1,2,3"], "2 motors"),
    (["--rig", "/dev/null", "--joints", "one"], "expected joint numbers"),
    (["--rig", "/dev/null", "--baud", "0"], "--baud 0"),
    (["--rig", "/dev/null", "--rig-log", "/dev/null"], "is the serial port itself"),
    (["--rig-log", "x.csv"], "--rig-log needs --rig"),
    (["--joints", "1,2"], "--joints needs --rig"),
])
def test_ui_refuses_bad_rig_options_in_one_line(argv, words, tmp_path, capsys):
    assert main(["ui", "irb120", "--port", "0", "--save-dir", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("armtwin: error: ") and words in err[0], err
    assert os.listdir(tmp_path) == []


def test_ui_refuses_a_prismatic_rig_joint(tmp_path, capsys):
    assert main(["ui", "scara", "--port", "0", "--save-dir", str(tmp_path), "--rig", "/dev/null", "--joints", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "prismatic" in err[0]


def test_ui_rig_log_must_be_a_csv_or_mcap_file_it_can_write(tmp_path, capsys):
    prog = tmp_path / "prog.ngc"
    prog.write_text("G21 G90\nG1 X10 F600\n")
    os.mkfifo(tmp_path / "fifo.csv")  # opening it for writing would block the pendant for ever
    (tmp_path / "dir.csv").mkdir()
    save = tmp_path / "save"
    save.mkdir()
    for log, words in ((prog, f"--rig-log {prog}: use a .csv or .mcap file name"),
                       (tmp_path / "fifo.csv", f"--rig-log {tmp_path / 'fifo.csv'}: is not a regular file"),
                       (tmp_path / "dir.csv", f"--rig-log {tmp_path / 'dir.csv'}: is a folder")):
        assert main(["ui", "irb120", "--port", "0", "--save-dir", str(save), "--rig", "/dev/nonexistent-rig",
                     "--rig-log", str(log)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], err
    assert prog.read_text() == "G21 G90\nG1 X10 F600\n"


def test_ui_names_rig_log_when_it_cannot_be_opened(emu, tmp_path, capsys, monkeypatch):
    import armtwin.envs.rig as rig
    pytest.importorskip("viser")

    def refuse(self, path, joints):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(rig.TwinLog, "__init__", refuse)
    log = tmp_path / "twin.csv"
    assert main(["ui", "irb120", "--port", "0", "--save-dir", str(tmp_path), "--rig", emu.device,
                 "--rig-log", str(log)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"armtwin: error: --rig-log {log}: cannot write it: Permission denied", err
