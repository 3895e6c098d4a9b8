"""armtwin replay: a twin-sync log rendered as a video of both twins."""

import csv

import numpy as np
import pytest

from armtwin.scripts.cli import main

import imageio.v3 as iio


def _write_log(path, n=121, dt=0.01, edit=None):
    """A twin log; ``edit`` = (row, column, value) changes one value."""
    head = ["STT", "Time", "Error_j1", "Error_j2", "Virtual_j1", "Virtual_j2", "Servo_j1", "Servo_j2", "Latency_ms",
            "Fault"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(head)
        for k in range(n):
            v1, v2 = 30 * np.sin(k * dt), 10.0
            s1 = v1 - 0.5 if k < n // 2 else float("nan")  # the link drops half-way
            up = k < n // 2
            row = [k, f"{k * dt:.3f}", 0.5 if up else "nan", 0.0 if up else "nan", v1, v2, s1, v2 if up else "nan",
                   4.0 if up else "nan", "OK" if up else "LINK"]
            if edit and edit[0] == k:
                row[head.index(edit[1])] = edit[2]
            w.writerow(row)


def test_replay_writes_a_video_as_long_as_the_log(tmp_path, capsys, monkeypatch):
    from armtwin.envs.video import VideoRecorder
    infos = []
    capture = VideoRecorder.maybe_capture
    monkeypatch.setattr(VideoRecorder, "maybe_capture", lambda self, info=None: (infos.append(dict(info)),
                                                                                  capture(self, info))[1])
    log, video = tmp_path / "twin.csv", tmp_path / "replay.mp4"
    _write_log(log, edit=(10, "Servo_j1", "200.0"))  # a rig shaft turned beyond J1's range (±165°)
    assert main(["replay", str(log), "--robot", "irb120", "--video", str(video), "--fps", "20"]) == 0
    out, err = capsys.readouterr()
    assert str(video) in out
    assert "warning: 1 sample(s) of the log have a servo joint beyond the irb120's range" in err
    frames = list(iio.imiter(video))
    assert len(frames) == int(1.2 * 20) + 1  # log time 1.2 s at 20 frames/s
    assert frames[0].std() > 5  # a scene, not a blank frame
    # the recorder's joint and tool rows show the virtual twin with the unlogged joints at home: said so
    assert infos and all(i["note"] == "J3-J6 not in the log, drawn at home; tool pose above is not the real one"
                         for i in infos)
    assert infos[0]["latency"] == "4.0 ms" and infos[-1]["latency"] == "n/a" and "n/a" in infos[-1]["error"]


def test_pose_note_names_the_joints_that_are_not_logged():
    from armtwin.robots import get
    from armtwin.scripts.cmd_replay import _pose_note
    assert _pose_note([1, 2], get("irb120")) == "J1, J4, J5, J6 not in the log, drawn at home; tool pose above is not the real one"
    assert _pose_note([0, 1], get("scara")).startswith("J3-J4 not in the log")


@pytest.mark.parametrize("edit, words", [
    ((7, "Virtual_j1", "1e308"), "line 9, column Virtual_j1: '1e308' is not a value in ±10000 deg"),
    ((7, "Servo_j2", "inf"), "line 9, column Servo_j2: 'inf'"),
    ((7, "Time", "0.0"), "line 9, column Time: 0 s goes back"),
    ((7, "Fault", "BOGUS"), "line 9, column Fault: 'BOGUS'"),
    ((7, "Virtual_j2", "120"), "line 9, column Virtual_j2: 120° is outside J2's range [-110, 110]° of the irb120"),
])
def test_replay_refuses_garbage_and_joints_outside_the_robot(tmp_path, capsys, edit, words):
    log, video = tmp_path / "twin.csv", tmp_path / "v.mp4"
    _write_log(log, edit=edit)
    assert main(["replay", str(log), "--robot", "irb120", "--video", str(video)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err, err
    assert not video.exists()


def test_replay_never_writes_over_its_log(tmp_path, capsys):
    log = tmp_path / "twin.mp4"
    _write_log(log)
    before = log.read_bytes()
    assert main(["replay", str(log), "--robot", "irb120", "--video", str(log)]) == 2
    assert "is the log itself" in capsys.readouterr().err and log.read_bytes() == before


@pytest.mark.parametrize("content,needle", [("a,b\n1,2\n", "not a twin log"),
                                            ("STT,Time,Fault\n0,0,OK\n", "no Virtual_jN columns")])
def test_replay_rejects_files_that_are_not_twin_logs(tmp_path, capsys, content, needle):
    log = tmp_path / "x.csv"
    log.write_text(content)
    assert main(["replay", str(log), "--robot", "irb120", "--video", str(tmp_path / "v.mp4")]) == 2
    assert needle in capsys.readouterr().err
