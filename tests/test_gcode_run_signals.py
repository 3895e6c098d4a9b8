"""`armtwin run --log` under signals (issue 15.4): SIGTERM ends a run like SIGINT — every row
complete, the video playable, exit code 128 + the signal — and SIGKILL loses at most the row
being written, never part of one. Real subprocesses, killed at seeded random moments."""

from __future__ import annotations

import csv
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from armtwin.controllers.gcode import machine_for
from armtwin.envs.runner import log_columns
from armtwin.robots import get

IRB = get("irb120")
PERIOD = machine_for(IRB).control_period


def _program(path: Path) -> Path:
    """About 60 s of program time (15,000 control periods): squares at a slow feed, a dwell."""
    moves = ["G21 G90", "G0 X0 Y0 Z10", "G1 Z0 F600"]
    for _ in range(6):
        moves += ["G1 X40 Y0", "G1 X40 Y40", "G1 X0 Y40", "G1 X0 Y0"]
    moves += ["G4 P5", "G0 Z10", "M30"]
    path.write_text("\n".join(moves) + "\n")
    return path


def _start(args: list[str], log: Path) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-m", "armtwin", "run", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:        # wait for the run loop: the header and a first row
        if log.exists() and log.read_bytes().count(b"\n") >= 2:
            return p
        if p.poll() is not None:
            raise AssertionError(f"run ended before logging: {p.communicate()}")
        time.sleep(0.01)
    p.kill()
    raise AssertionError("the run never started logging")


def _rows(log: Path) -> list[list[str]]:
    """The log's rows, checked: header, whole rows only, every value parses, one row per period."""
    data = log.read_bytes()
    assert data.endswith(b"\r\n"), "the log ends in the middle of a row"
    with open(log, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == log_columns(IRB)
    body = rows[1:]
    for k, row in enumerate(body):
        assert len(row) == len(rows[0]), f"row {k} has {len(row)} fields"
        vals = [float(v) for v in row]
        assert np.isfinite(vals).all() and int(row[1]) >= 1
        assert vals[0] == pytest.approx(k * PERIOD, abs=1e-4), f"row {k} is not the next control period"
    return body


def _summary_periods(out: str) -> int:
    import re
    m = re.search(r"\((\d+) control periods", out)
    assert m, out
    return int(m.group(1))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_ends_the_run_with_every_row_complete(tmp_path, sig, seed):
    rng = random.Random(1000 * int(sig) + seed)
    prog, log = _program(tmp_path / "p.ngc"), tmp_path / "run.csv"
    p = _start([str(prog), "--robot", "irb120", "--log", str(log)], log)
    time.sleep(rng.uniform(0.0, 0.6))
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 128 + int(sig), (p.returncode, out, err)
    rows = _rows(log)
    assert len(rows) == _summary_periods(out) < 15_000       # every row the run made is in the file
    assert f"INTERRUPTED by {signal.Signals(sig).name}" in out and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_sigkill_loses_at_most_the_row_being_written(tmp_path, seed):
    rng = random.Random(seed)
    prog, log = _program(tmp_path / "p.ngc"), tmp_path / "run.csv"
    p = _start([str(prog), "--robot", "irb120", "--log", str(log)], log)
    time.sleep(rng.uniform(0.0, 0.6))
    before = log.read_bytes().count(b"\n") - 1        # rows on disk just before the kill
    p.kill()
    p.communicate(timeout=60)
    assert p.returncode == -signal.SIGKILL
    rows = _rows(log)                                  # whole rows only, contiguous from t = 0
    assert len(rows) >= before


@pytest.mark.slow
def test_sigterm_leaves_a_playable_video(tmp_path):
    import imageio.v3 as iio
    prog, log, video = _program(tmp_path / "p.ngc"), tmp_path / "run.csv", tmp_path / "run.mp4"
    p = _start([str(prog), "--robot", "irb120", "--log", str(log), "--video", str(video), "--fps", "10"], log)
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 143, (out, err)
    rows = _rows(log)
    frames = np.stack(list(iio.imiter(video)))
    assert len(frames) >= 1 and frames.shape[-1] == 3
    # the video lasts as long as the logged run (10 frames per simulated second, one at t = 0),
    # after the title card
    from armtwin.envs.video import TITLE_CARD_SECONDS
    card = round(TITLE_CARD_SECONDS * 10)
    assert abs(len(frames) - card - (int(len(rows) * PERIOD * 10) + 1)) <= 2


def test_a_signal_during_the_preflight_ends_at_once_with_nothing_written(tmp_path, monkeypatch, capsys):
    """Before the run loop a stop signal abandons the command as every armtwin command does
    (cli.main: exit 143 for SIGTERM): no log file."""
    from armtwin.scripts import cli, cmd_run
    prog, log = _program(tmp_path / "p.ngc"), tmp_path / "run.csv"
    real_check = cmd_run.check

    def check_then_signal(args, quiet=False):
        out = real_check(args, quiet=quiet)
        os.kill(os.getpid(), signal.SIGTERM)    # arrives while the command is still preparing
        for _ in range(1000):                   # the handler runs between bytecodes
            time.sleep(0.001)
        return out

    monkeypatch.setattr(cmd_run, "check", check_then_signal)
    old = signal.getsignal(signal.SIGTERM)
    try:
        code = cli.main(["run", str(prog), "--robot", "irb120", "--log", str(log)])
    finally:
        signal.signal(signal.SIGTERM, old)
    assert code == 143 and not log.exists()
    assert "terminated (SIGTERM)" in capsys.readouterr().err


def test_stop_before_the_run_writes_nothing_and_a_set_stop_mid_run_keeps_the_rows(tmp_path):
    """The library seam: ``run_program(stop=…)`` ends after the row being written."""
    import threading

    from armtwin.controllers.gcode import compile_program
    from armtwin.envs.runner import RunConfig, run_program
    rep = compile_program(_program(tmp_path / "p.ngc").read_text(), IRB)
    stop = threading.Event()
    stop.set()
    res = run_program(rep, IRB, RunConfig(), log_path=str(tmp_path / "a.csv"), stop=stop)
    assert res.interrupted and res.samples == 0 and not (tmp_path / "a.csv").exists()
    stop = threading.Event()
    seen = []
    log = tmp_path / "b.csv"
    K = rep.trajectory.count

    def progress(f):
        # progress(k / K) comes right after row k is written: that row is on disk already, whole
        on_disk = log.read_bytes()
        assert on_disk.endswith(b"\r\n") and on_disk.count(b"\n") - 1 == round(f * K) + 1
        seen.append(f)
        if f > 0.1:
            stop.set()
    res = run_program(rep, IRB, RunConfig(), log_path=str(log), progress=progress, stop=stop)
    assert res.interrupted and 0 < res.samples < K and len(seen) > 5 and seen[-1] < 1.0
    assert len(_rows(log)) == res.samples
