"""``armtwin compare ROBOT --program FILE --cell C``: a G-code pick-and-place in each joint model, with
its real payload (issue 18.4)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from armtwin.scripts.cli import main

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = str(ROOT / "examples" / "irb120_pick_place.ngc")
CELL = ROOT / "examples" / "cells" / "irb120_pick_place.toml"


def test_the_pick_and_place_runs_in_every_joint_model_and_says_where_the_box_ended(tmp_path, capsys):
    assert main(["compare", "irb120", "--program", PROGRAM, "--cell", str(CELL), "--out", str(tmp_path), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    runs = {r["mode"]: r for r in res["runs"]}
    assert set(runs) == {"kinematic", "hinge", "articulation"} and res["cell"] == "IRB120 pick and place"
    for mode in ("kinematic", "articulation"):      # as test_pick_place_run holds armtwin run to
        box = runs[mode]["pieces"][0]
        assert box["piece"] == "box" and box["offset_mm"] < 2.0 and box["angle_deg"] < 2.0, runs[mode]
    assert runs["kinematic"]["rms_error_mm"] < 1e-3 < runs["hinge"]["rms_error_mm"]   # the hinge model lags
    assert runs["hinge"]["pieces"][0]["offset_mm"] > runs["articulation"]["pieces"][0]["offset_mm"]
    rows = list(csv.DictReader(open(tmp_path / "program_runs.csv")))
    assert [r["mode"] for r in rows] == ["kinematic", "hinge", "articulation"] and "box_offset_mm" in rows[0]


def test_a_program_that_carries_the_box_into_a_wall_is_refused_before_any_run(tmp_path, capsys):
    cell = tmp_path / "wall.toml"
    cell.write_text(CELL.read_text() + '\n[[body]]\nname = "wall"\nshape = "box"\nsize = [4, 200, 45]\nxyz = [355, 0, 222.5]\n')
    assert main(["compare", "irb120", "--program", PROGRAM, "--cell", str(cell), "--out", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "box (carried) touches wall" in captured.out and "nothing was run" in captured.err
    assert not (tmp_path / "program_runs.csv").exists()


@pytest.mark.parametrize("argv, words", [
    (["--program", PROGRAM, "--video"], "--video is for the built-in motions"),
    (["--program", PROGRAM, "--dt", "0.01"], "--dt is for the built-in motions"),
    (["--cell", "default"], "--cell belongs to --program"),
])
def test_options_that_do_not_fit_are_one_line_and_exit_2(argv, words, capsys):
    assert main(["compare", "irb120", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]
