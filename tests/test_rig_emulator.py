"""The rig emulator behaves like the board: a bounded serial receive buffer, a link name it never
takes from another emulator, and the firmware core's guards against repeated or reordered
frames (issue 15.13, 15.20, 15.19 on the rig side)."""

from __future__ import annotations

import os
import termios
import threading
import time
import tty

import numpy as np
import pytest

from armtwin.controllers import rigproto as rp
from armtwin.envs.rig import Emulator, LinkConfig, RigLink, RigLinkError
from armtwin.scripts.cli import main

HANG = 30.0


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _wait(cond, what: str, timeout: float = HANG):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.01)


# ----- the link name (issue 15.20) ----------------------------------------------------------------

def test_a_second_emulator_never_takes_over_a_live_link(exe, tmp_path):
    link = tmp_path / "rig"
    first = Emulator(exe=exe, link=str(link))
    try:
        target = os.readlink(link)
        with pytest.raises(RigLinkError, match=r"--link .*rig is in use: it points at /dev/pts/\d+, which exists"):
            Emulator(exe=exe, link=str(link))
        assert os.readlink(link) == target  # still the first one's
        with RigLink(str(link)) as rl:  # and the first one still answers on it
            assert rl.request_hello(timeout=5.0) is not None
    finally:
        first.stop()
    assert not os.path.lexists(link)  # the first one removed its own link


def test_rig_emulate_refuses_a_live_link_in_one_line(exe, tmp_path, capsys):
    link = tmp_path / "rig"
    first = Emulator(exe=exe, link=str(link))
    try:
        target = os.readlink(link)
        assert main(["rig", "emulate", "--link", str(link), "--seconds", "0.2"]) == 2
        err = capsys.readouterr().err.splitlines()
        errors = [e for e in err if e.startswith("armtwin: error:")]
        assert len(errors) == 1 and "is in use" in errors[0] and "Traceback" not in "\n".join(err)
        assert os.readlink(link) == target  # nothing taken, nothing removed
    finally:
        first.stop()


def test_a_dangling_link_is_replaced_and_only_the_own_link_removed(exe, tmp_path):
    link = tmp_path / "rig"
    os.symlink("/dev/pts/does-not-exist", link)  # left by an emulator that was killed
    emu = Emulator(exe=exe, link=str(link))
    try:
        assert os.readlink(link) != "/dev/pts/does-not-exist" and os.path.exists(link)
        os.unlink(link)
        os.symlink(str(tmp_path / "someone-else"), link)  # someone else's link under that name now
    finally:
        emu.stop()
    assert os.readlink(link) == str(tmp_path / "someone-else")  # not the emulator's: left alone


# ----- the receive buffer (issue 15.13) -----------------------------------------------------------

def test_an_unpaced_flood_is_dropped_like_uart_overruns_and_hello_still_answered(exe):
    """8 MB written as fast as the pty takes them: the board's 64-byte receive buffer overruns,
    the bytes are dropped and counted, memory stays flat, and a HELLO afterwards is answered at
    once (it used to queue all 8 MB — 131 MB of memory — and answer after ~12 minutes)."""
    emu = Emulator(exe=exe)
    try:
        rss0 = _rss_kb(emu.proc.pid)
        fd = os.open(emu.device, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(fd)
        termios.tcflush(fd, termios.TCIOFLUSH)
        peak = [rss0]
        done = threading.Event()

        def watch():
            while not done.is_set():
                peak[0] = max(peak[0], _rss_kb(emu.proc.pid))
                time.sleep(0.02)

        th = threading.Thread(target=watch, daemon=True)
        th.start()
        blob = bytes(range(1, 256)) * (8 * 1024 * 1024 // 255)  # no delimiters: one endless "frame"
        t0 = time.monotonic()
        view = memoryview(blob)
        while view:
            n = os.write(fd, view[:65536])
            view = view[n:]
            assert time.monotonic() - t0 < 120, "the emulator stopped reading"
        os.close(fd)
        with RigLink(emu.device) as link:
            t1 = time.monotonic()
            hello = link.request_hello(timeout=10.0)
            answered_s = time.monotonic() - t1
        done.set()
        th.join()
    finally:
        emu.stop()
    assert hello is not None and answered_s < 2.0, answered_s
    assert peak[0] - rss0 < 8 * 1024, f"RSS grew by {peak[0] - rss0} kB"
    wire = 115200 / 10 * (time.monotonic() - t0)  # at most this much could have crossed the wire
    assert emu.stats["rx_overruns"] >= len(blob) - wire - 64, emu.stats


# ----- repeated and reordered host frames on the rig (issue 15.19, the rig's side) -----------------

def test_the_rig_ignores_repeated_and_older_targets_and_a_repeated_mode(exe):
    """A repeated or reordered JOINT_TARGETS would move the motors back; a repeated MODE would
    reset the PIDs and targets. The firmware core ignores the first (counted) and takes the same
    MODE again without resetting anything."""
    emu = Emulator(exe=exe)
    try:
        with RigLink(emu.device, LinkConfig(heartbeat_s=0.01)) as link:
            link.set_mode(rp.Mode.VIRTUAL_TO_REAL)
            _wait(lambda: link.mode_ack is not None, "the MODE echo")
            end = time.monotonic() + HANG
            while True:  # drive to +20° / -10° and settle
                link.send_targets((750, -375))
                time.sleep(0.004)
                s = link.latest()
                if s is not None and np.allclose(s.degrees, [20.0, -10.0], atol=0.3) and abs(s.pwm[0]) < 40:
                    break
                assert time.monotonic() < end, "the rig did not reach the target"
            newest = link.send_targets((750, -375))
            # A man in the middle delays an older frame (a target of 0°/0° a few sequence numbers
            # back) and delivers it three times (paced: no overrun). How long the settling took does
            # not matter: the forged frame is always inside the firmware's stale window.
            old_seq = (newest - 5) & 0xFFFF
            for _ in range(3):
                with link._lock:  # noqa: SLF001
                    link._port.write(rp.encode_frame(rp.JointTargets((0, 0)), old_seq, 0))  # noqa: SLF001
                time.sleep(0.01)
            link.set_mode(rp.Mode.VIRTUAL_TO_REAL)  # the same mode again
            t = time.monotonic()
            while time.monotonic() - t < 0.3:  # the rig keeps holding +20° / -10° (only the heartbeat feeds it)
                s = link.latest()
                assert np.allclose(s.degrees, [20.0, -10.0], atol=0.5), s.degrees
                time.sleep(0.005)
            link.set_mode(rp.Mode.IDLE)
            _wait(lambda: link.mode_ack is not None, "the IDLE echo")
    finally:
        emu.stop()
    assert emu.stats["stale_targets"] == 3 and emu.stats["rx_overruns"] == 0, emu.stats
    assert emu.stats["mode_changes"] == 2, emu.stats  # VIRTUAL_TO_REAL once (not twice), then IDLE
