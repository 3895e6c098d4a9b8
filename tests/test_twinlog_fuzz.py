"""Seeded fuzz of the twin-log reader (issue 15: "twin logs: random/mutated CSVs → read or one
clear line, never a traceback").

The promise: :func:`armtwin.envs.rig.read_twin_log` returns the log or raises one
:class:`TwinLogError` whose message is a single line naming the file (and, for a bad value, the
line and column); ``armtwin plot`` and ``armtwin replay`` turn it into one line on stderr with
exit code 2. Whatever it accepts is what :class:`TwinLog` could have written: every number
finite and within the documented bounds, sample numbers consecutive, time never going back,
fault cells that :meth:`Fault.parse` reads.
"""

from __future__ import annotations

import csv
import io
import math
import random

import numpy as np
import pytest

from armtwin.controllers import rigproto as rp
from armtwin.envs.rig import (LOG_MAX_JOINT_DEG, LOG_MAX_LATENCY_MS, LOG_MAX_STT, LOG_MAX_TIME_S, SyncSample, TwinLog,
                              TwinLogData, TwinLogError, read_twin_log)
from armtwin.scripts.cli import main

#: cells an adversary (or a broken disk, or a spreadsheet) puts into a log
NASTY = ["", " ", "nan", "NaN", "-nan", "inf", "-inf", "1e308", "-1e308", "1e309", "1e-320", "0", "-0", "1_000", "0x10",
         "9" * 30, "-" + "9" * 30, "9223372036854775807", "9223372036854775808", "18446744073709551616", "1e400",
         "１２", "٣", "1,5", "\"", "\"\"", "OK", "LINK", "POWER|", "|", "0x20", "0x80000000", "0x100000000", "NONE",
         "POWER|0x20", "ok", "\x00", "é", "\U0001F600", "a" * 300, "1.5", "-1", "3.4e38", "STT", "Time", "\r", "\n",
         "5e-324", "+5", "  7  "]

HEADER = ["STT", "Time", "Error_j1", "Error_j2", "Virtual_j1", "Virtual_j2", "Servo_j1", "Servo_j2", "Latency_ms",
          "Fault"]


def _valid_log(path, rng: random.Random, n: int) -> None:
    with TwinLog(path, (0, 1)) as log:
        for k in range(n):
            virt = np.array([rng.uniform(-170, 170), rng.uniform(-110, 110)])
            down = rng.random() < 0.1
            servo = np.full(2, math.nan) if down else virt - rng.uniform(-2, 2)
            faults = rp.Fault.LINK if down else rp.Fault(rng.choice([0, 0, 0, 1, 2, 0x10, 0xE0, 0x200]))
            log.write(SyncSample(k, 0.002 * k, virt, servo, virt - servo, math.nan if down else rng.uniform(1, 9),
                                 faults))


def _mutate(text: str, rng: random.Random) -> str | bytes:
    rows = list(csv.reader(io.StringIO(text)))
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(9)
        r = rng.randrange(len(rows))
        if kind <= 3:  # one cell
            row = rows[r]
            if row:
                row[rng.randrange(len(row))] = rng.choice(NASTY)
        elif kind == 4:  # a row lost, doubled or moved
            if len(rows) > 2:
                row = rows.pop(r)
                if rng.random() < 0.5:
                    rows.insert(rng.randrange(len(rows) + 1), row)
                if rng.random() < 0.5:
                    rows.insert(rng.randrange(len(rows) + 1), list(row))
        elif kind == 5:  # a field added or removed
            row = rows[r]
            if row and rng.random() < 0.5:
                row.pop(rng.randrange(len(row)))
            else:
                row.insert(rng.randrange(len(row) + 1), rng.choice(NASTY))
        elif kind == 6:  # the header
            rows[0] = list(rows[0])
            if rows[0]:
                rows[0][rng.randrange(len(rows[0]))] = rng.choice(HEADER + ["Virtual_j9", "Servo_", "Virtual_j1", ""])
        elif kind == 7:  # the file cut anywhere
            out = io.StringIO()
            csv.writer(out).writerows(rows)
            return out.getvalue()[:rng.randrange(len(out.getvalue()) + 1)]
        else:  # bytes flipped
            out = io.StringIO()
            csv.writer(out).writerows(rows)
            data = bytearray(out.getvalue().encode())
            for _ in range(rng.randint(1, 5)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            return bytes(data)
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue()


def _check_accepted(d: TwinLogData) -> None:
    """What the reader accepts is a log TwinLog could have written."""
    stt, t = d["STT"], d["Time"]
    assert stt.dtype == np.int64 and len(stt) >= 1 and 0 <= stt[0] <= LOG_MAX_STT and np.all(np.diff(stt) == 1)
    assert np.all(np.isfinite(t)) and np.all(t >= 0) and np.all(t <= LOG_MAX_TIME_S) and np.all(np.diff(t) >= 0)
    for col, v in d.items():
        if col.startswith("Virtual_"):
            assert np.all(np.abs(v) <= LOG_MAX_JOINT_DEG)
        elif col.startswith("Servo_"):
            assert np.all(np.isnan(v) | (np.abs(v) <= LOG_MAX_JOINT_DEG))
        elif col.startswith("Error_"):
            assert np.all(np.isnan(v) | (np.abs(v) <= 2 * LOG_MAX_JOINT_DEG))
        elif col == "Latency_ms":
            assert np.all(np.isnan(v) | ((v >= 0) & (v <= LOG_MAX_LATENCY_MS)))
    for f in d["Fault"]:
        assert f == "OK" or rp.Fault.parse(f)
    assert len(d.lines) == len(stt)


def _one_case(path, seed: int) -> tuple[bool, str]:
    rng = random.Random(seed)
    _valid_log(path, rng, rng.randint(1, 40))
    data = _mutate(path.read_text(), rng)
    (path.write_bytes if isinstance(data, bytes) else path.write_text)(data)
    try:
        d = read_twin_log(path)
    except TwinLogError as exc:
        msg = str(exc)
        assert "\n" not in msg and "\r" not in msg and msg.startswith(f"{path}:") and len(msg) < 500, repr(msg)
        return False, msg
    _check_accepted(d)
    return True, ""


def test_mutated_logs_are_read_or_refused_in_one_line(tmp_path):
    accepted = refused = 0
    for seed in range(600):
        ok, _ = _one_case(tmp_path / f"f{seed % 7}.csv", seed)
        accepted += ok
        refused += not ok
    assert accepted > 30 and refused > 300, (accepted, refused)  # the fuzz reaches both outcomes


@pytest.mark.slow
def test_mutated_logs_through_plot_and_replay_give_one_line_or_a_file(tmp_path, capsys):
    """The commands on the same inputs: exit 0 with a file, or exit 2 with one line — never a traceback."""
    for seed in range(1000, 1040):
        log = tmp_path / "twin.csv"
        ok, _ = _one_case(log, seed)
        argv = (["replay", str(log), "--robot", "irb120", "--video", str(tmp_path / "r.mp4"), "--fps", "5",
                 "--size", "64x48"] if seed % 4 == 0 else ["plot", str(log), "--out", str(tmp_path / "p.png")])
        code = main(argv)
        err = capsys.readouterr().err
        assert "Traceback" not in err
        if ok and code == 0:
            continue
        lines = [l for l in err.splitlines() if not l.startswith("armtwin: warning:")]
        assert code == 2 and len(lines) == 1 and lines[0].startswith("armtwin: error: "), (seed, code, err)
