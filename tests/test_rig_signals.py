"""Signals during ``armtwin sync`` at seeded random moments (issue 15: "signals during sync").

The promise (README, exit codes): SIGINT or SIGTERM ends the sync cleanly — exit code 130 or
143, the summary printed, no traceback, the log closed with every row complete and readable by
``read_twin_log``; SIGKILL loses at most the row being written (the reader skips a last row cut
short). A signal while the host still waits for the rig's first answer ends it the same way,
with nothing logged.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from armtwin.envs.rig import TwinLogError, read_twin_log

HANG = 60.0


def _sync(port: str, log, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "armtwin.scripts.cli", "sync", "--port", port, "--robot", "irb120",
                             "--log", str(log), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _signal_at_random(emu, tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    sig = rng.choice([signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
    delay = rng.choice([0.0, rng.uniform(0.0, 0.05), rng.uniform(0.0, 1.5)])  # after the log's header exists
    log = tmp_path / f"twin{seed}.csv"
    p = _sync(emu.device, log, "--samples", "100000", "--power-test")
    try:
        end = time.monotonic() + HANG
        while not (log.exists() and log.stat().st_size > 0):
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < end, "the sync never started logging"
            time.sleep(0.002)
        time.sleep(delay)
        p.send_signal(sig)
        out, err = p.communicate(timeout=HANG)
    finally:
        if p.poll() is None:
            p.kill()
    assert "Traceback" not in err, err
    text = log.read_text()
    if sig == signal.SIGKILL:
        assert p.returncode == -signal.SIGKILL
        try:
            d = read_twin_log(log)  # a last row cut short is skipped
        except TwinLogError as exc:
            assert "has no samples" in str(exc)  # killed before the first row
            return
        assert len(text.splitlines()) - 1 - len(d["STT"]) <= 1  # at most the row being written
        return
    assert p.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[sig], (p.returncode, err)
    assert text.endswith("\n") and str(log) in out and "(interrupted)" in out, (out, err)
    if text.count("\n") == 1:  # stopped before its first sample: the header, complete
        assert text.startswith("STT,Time,")
        return
    d = read_twin_log(log)
    assert len(d["STT"]) == len(text.splitlines()) - 1  # every row complete
    if "power test was cut short" in err and len(d["STT"]) > 3000:
        assert "it has been restored" in err  # a cut power is never left cut


@pytest.mark.parametrize("seed", range(4))
def test_signals_at_random_moments_end_the_sync_cleanly(emu, tmp_path, seed):
    _signal_at_random(emu, tmp_path, seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4, 16))
def test_signals_at_random_moments_end_the_sync_cleanly_long(emu, tmp_path, seed):
    _signal_at_random(emu, tmp_path, seed)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_waiting_for_the_rig_ends_it_with_nothing_logged(tmp_path, sig, code):
    master, slave = os.openpty()  # a port where nothing answers
    log = tmp_path / "twin.csv"
    try:
        p = _sync(os.ttyname(slave), log, "--connect-timeout", "30")
        try:
            end = time.monotonic() + HANG
            while b"HELLO" not in _drain(master):  # the host asks: it is waiting for the rig now
                assert p.poll() is None and time.monotonic() < end, p.communicate()
            p.send_signal(sig)
            out, err = p.communicate(timeout=HANG)
        finally:
            if p.poll() is None:
                p.kill()
    finally:
        os.close(master)
        os.close(slave)
    assert p.returncode == code and "Traceback" not in err, (p.returncode, err)
    assert not log.exists()


def _drain(fd: int) -> bytes:
    """What the host wrote so far, decoded as far as frames go ("HELLO" once a HELLO came)."""
    import select
    from armtwin.controllers import rigproto as rp
    r, _, _ = select.select([fd], [], [], 0.05)
    if not r:
        return b""
    frames = rp.StreamDecoder().feed(os.read(fd, 4096))
    return b"HELLO" if any(isinstance(f.msg, rp.Hello) for f in frames) else b"other"
