"""armtwin replay: a twin-sync log rendered as a video of both twins."""

import csv

import numpy as np
import pytest

from armtwin.scripts.cli import main

import imageio.v3 as iio


def _write_log(path, n=121, dt=0.01):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["STT", "Time", "Error_j1", "Error_j2", "Virtual_j1", "Virtual_j2", "Servo_j1", "Servo_j2",
                    "Latency_ms", "Fault"])
        for k in range(n):
            v1, v2 = 30 * np.sin(k * dt), 10.0
            s1 = v1 - 0.5 if k < n // 2 else float("nan")  # the link drops half-way
            w.writerow([k, f"{k * dt:.3f}", 0.5, 0.0, v1, v2, s1, v2 if k < n // 2 else "nan", 4.0,
                        "OK" if k < n // 2 else "LINK"])


def test_replay_writes_a_video_as_long_as_the_log(tmp_path, capsys):
    log, video = tmp_path / "twin.csv", tmp_path / "replay.mp4"
    _write_log(log)
    assert main(["replay", str(log), "--robot", "irb120", "--video", str(video), "--fps", "20"]) == 0
    assert str(video) in capsys.readouterr().out
    frames = list(iio.imiter(video))
    assert len(frames) == int(1.2 * 20) + 1  # log time 1.2 s at 20 frames/s
    assert frames[0].std() > 5  # a scene, not a blank frame


@pytest.mark.parametrize("content,needle", [("a,b\n1,2\n", "not a twin log"),
                                            ("STT,Time,Fault\n0,0,OK\n", "no Virtual_jN columns")])
def test_replay_rejects_files_that_are_not_twin_logs(tmp_path, capsys, content, needle):
    log = tmp_path / "x.csv"
    log.write_text(content)
    assert main(["replay", str(log), "--robot", "irb120", "--video", str(tmp_path / "v.mp4")]) == 2
    assert needle in capsys.readouterr().err
