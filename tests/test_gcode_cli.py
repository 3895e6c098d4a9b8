"""`armtwin check`, `armtwin run` and `armtwin bench gcode` through the CLI entry point; run accuracy."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode.preflight import preflight
from armtwin.envs.runner import RunConfig, log_columns, run_program
from armtwin.scripts.cli import main

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"


@pytest.mark.parametrize("path", sorted(EX.glob("*.ngc")), ids=lambda p: p.name)
def test_examples_are_clean(path, capsys):
    robot = next(r for r in ("scara", "irb120", "aubo_i5") if path.name.startswith(r + "_"))
    assert main(["check", str(path), "--robot", robot]) == 0
    assert "clean" in capsys.readouterr().out


def test_check_exit_codes_and_json(tmp_path, capsys):
    bad = tmp_path / "bad.ngc"
    bad.write_text("G21\nG1 X1\nG0 X1 @\nG0 X900\n")
    assert main(["check", str(bad), "--robot", "irb120"]) == 1
    out = capsys.readouterr().out
    assert "line 2, column 1: error 20" in out and "line 3, column 7: error 3" in out
    assert main(["check", str(bad), "--robot", "irb120", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert not data["clean"] and [f["code"] for f in data["faults"]] == [20, 3]
    # usage errors: exit 2, one line, no traceback
    assert main(["check", str(tmp_path / "missing.ngc"), "--robot", "irb120"]) == 2
    assert main(["check", str(bad), "--robot", "nosuchbot"]) == 2
    assert main(["check", str(bad), "--robot", "irb120", "--origin", "nan", "0", "0"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "missing.ngc" in err


def test_unreachable_program_fails_and_origin_moves_it(tmp_path, capsys):
    p = tmp_path / "far.ngc"
    p.write_text("G21 G90 G0 X0 Y0 Z0\n")
    assert main(["check", str(p), "--robot", "irb120", "--origin", "900", "0", "200"]) == 1
    assert "error 100" in capsys.readouterr().out
    assert main(["check", str(p), "--robot", "irb120", "--origin", "300", "0", "200"]) == 0


def test_run_refuses_a_faulty_program(tmp_path, capsys):
    p = tmp_path / "bad.ngc"
    p.write_text("G0 X500\n")
    log = tmp_path / "log.csv"
    assert main(["run", str(p), "--robot", "irb120", "--log", str(log)]) == 1
    assert not log.exists()
    assert "refused" in capsys.readouterr().err


def test_kinematic_run_reproduces_the_path(tmp_path):
    spec = robots.get("irb120")
    rep = preflight("G21 G90 G0 X-10 Y0 Z5\nG1 Z0 F1500\nG2 X10 Y0 R10 F3000\nG1 Y10\nG4 P0.2\nG0 Z5\n", spec)
    assert rep.clean()
    log = tmp_path / "run.csv"
    res = run_program(rep, spec, RunConfig(), log_path=str(log))
    assert res.stable and res.max_error_mm < 0.01
    assert res.program_time == pytest.approx(rep.duration, abs=1e-9)
    assert res.lines_executed == 6
    rows = list(csv.reader(log.open()))
    assert rows[0] == log_columns(spec)
    assert rows[0][:8] == ["time_s", "line", "x_cmd_mm", "y_cmd_mm", "z_cmd_mm", "x_mm", "y_mm", "z_mm"]
    assert rows[0][8:] == [f"j{i}_cmd" for i in range(1, 7)] + [f"j{i}" for i in range(1, 7)]
    data = np.array(rows[1:], dtype=float)
    assert len(data) == res.samples
    assert np.abs(data[:, 2:5] - data[:, 5:8]).max() < 0.01
    # the commanded points follow the programmed arc (radius 10 mm about X0 Y0, Z0 in work coordinates)
    arc = data[data[:, 1] == 3]
    r = np.hypot(arc[:, 2] - 350.0, arc[:, 3] - 0.0)
    assert np.abs(r - 10.0).max() < 0.006


def test_run_cli_smoke_scara_with_video(tmp_path, capsys):
    prog = tmp_path / "p.ngc"
    prog.write_text("G21 G90 G0 X0 Y0 Z20 C0\nG1 Z10 F3000\nG0 Z20\n")
    log, video = tmp_path / "s.csv", tmp_path / "s.gif"
    assert main(["run", str(prog), "--robot", "scara", "--log", str(log), "--video", str(video), "--fps", "5",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ran"] and out["max_error_mm"] < 0.01 and out["lines_executed"] == 3
    header = log.read_text().splitlines()[0].split(",")
    assert header[-8:] == ["j1_cmd", "j2_cmd", "j3_cmd", "j4_cmd", "j1", "j2", "j3", "j4"]
    assert video.stat().st_size > 0


def test_bench_gcode_small(capsys):
    assert main(["bench", "gcode", "--lines", "300", "--repeat", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("armtwin_parse_lines_per_s", "gcodeparser_lines_per_s", "preflight_s", "parse_speed_ratio"):
        assert out[key] > 0
    assert out["preflight_clean"] and out["parse_faults"] == 0


def test_strict_counts_warnings(tmp_path, capsys):
    p = tmp_path / "sing.ngc"
    # ends with the wrist centre almost above the IRB120's base (shoulder singularity): warning 103 only
    p.write_text("G21 G90 G0 X-340 Y0 Z200\n")
    assert main(["check", str(p), "--robot", "irb120"]) == 0
    assert "warning 103" in capsys.readouterr().out
    assert main(["check", str(p), "--robot", "irb120", "--strict"]) == 1
