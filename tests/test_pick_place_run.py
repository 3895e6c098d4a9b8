"""Pick and place in ``armtwin run`` (issue 18, items 4 and 5): each robot's example moves the box
of its cell with the vacuum cup (T4, M3/M5) to the cell's target; the result, the report and the
log record the grip, the release and where the box ended."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode import compile_program
from armtwin.envs.gripper import GripKind
from armtwin.envs.runner import RunConfig, log_columns, run_program
from armtwin.robots.workcell import CellError, load_cell
from armtwin.scripts.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
ROBOTS = ("scara", "irb120", "aubo_i5")
#: how close the box must end to its target in the kinematic and articulation models
TOL_MM, TOL_DEG = 2.0, 2.0


def _program(robot: str) -> str:
    return (EXAMPLES / f"{robot}_pick_place.ngc").read_text()


def _cell(robot: str):
    return load_cell(EXAMPLES / "cells" / f"{robot}_pick_place.toml")


def _line_of(text: str, word: str) -> int:
    """The 1-based number of the only line whose code (before a comment) is ``word``."""
    hits = [i + 1 for i, ln in enumerate(text.splitlines()) if ln.split("(")[0].strip() == word]
    assert len(hits) == 1, (word, hits)
    return hits[0]


def _run(robot: str, mode: str, text: str | None = None, **kw):
    spec = robots.get(robot)
    c = compile_program(text if text is not None else _program(robot), spec)
    assert c.ok, c.refusal
    return run_program(c, spec, RunConfig(mode=mode), cell=_cell(robot), **kw)


@pytest.mark.parametrize("mode", ["kinematic", "hinge", "articulation"])
@pytest.mark.parametrize("robot", ROBOTS)
def test_the_example_moves_the_box_to_its_target(robot, mode):
    """The box is gripped at the M3 line and released at the M5 line, once each; in the
    kinematic and articulation models it ends within 2 mm and 2° of the cell's target (60 mm from
    where it started, turned 90°). The hinge model is only held to carrying the box away from its
    start: its wrist rests about 20° short of the command, so the box is turned about 50° instead
    of 90° (measured: up to 11 mm and 39° off, docs/WORKCELL.md)."""
    text = _program(robot)
    cell = _cell(robot)
    box = cell.body("box")
    assert box.target is not None
    start_off = np.linalg.norm(box.pose[:3, 3] - box.target[:3, 3]) * 1000
    assert start_off > 50                    # the run has something to do
    res = _run(robot, mode)
    assert res.stable, res.message
    assert [(e.event.kind, e.line, e.event.part) for e in res.grip_events] == [
        (GripKind.GRIP, _line_of(text, "M3"), "box"), (GripKind.RELEASE, _line_of(text, "M5"), "box")]
    (end,) = res.pieces
    assert end.piece == "box"
    assert end.offset_mm < (TOL_MM if mode != "hinge" else 20.0), end.text()
    if mode != "hinge":
        assert end.angle_deg < TOL_DEG, end.text()
        # it rests on the table where the cup left it
        assert np.linalg.norm(res.grip_events[1].event.pose[:3, 3] - end.pose[:3, 3]) * 1000 < TOL_MM


def test_the_log_has_the_held_piece_between_grip_and_release(tmp_path):
    """The log's ``held`` column names the box exactly while the suction is on (tool_on = 1)."""
    log = tmp_path / "run.csv"
    res = _run("irb120", "kinematic", log_path=str(log))
    rows = list(csv.reader(log.open()))
    assert rows[0] == log_columns(robots.get("irb120"), held=True) and rows[0][-1] == "held"
    col = {n: i for i, n in enumerate(rows[0])}
    held = [r[col["held"]] for r in rows[1:]]
    on = [r[col["tool_on"]] == "1" for r in rows[1:]]
    assert set(held) == {"", "box"}
    t = np.array([float(r[0]) for r in rows[1:]])
    grip, release = (e.time for e in res.grip_events)
    inside = (t > grip - 1e-6) & (t < release - 1e-6)     # the log rounds to 0.1 ms
    assert all(h == "box" for h, i in zip(held, inside) if i)
    assert all(h == "" for h, i in zip(held, inside) if not i)
    assert all(on[k] for k in np.flatnonzero(inside))


@pytest.mark.parametrize("mode", ["kinematic", "articulation"])
def test_suction_off_mid_air_drops_the_box_short_of_the_target(mode):
    """M5 at the travel height halfway: the box is released 30 mm above the table, falls and rests
    on the table (its bottom at the top, upright or not) far from the target."""
    text = _program("irb120").replace("G0 X30 Y0 C90", "G0 X0 Y0\nM5 (let go mid-air)\nG4 P1\nG0 X30 Y0 C90")
    text = text.replace("M5 (suction off)", "")
    res = _run("irb120", mode, text)
    assert res.stable, res.message
    kinds = [(e.event.kind, e.line) for e in res.grip_events]
    assert kinds == [(GripKind.GRIP, _line_of(text, "M3")), (GripKind.RELEASE, _line_of(text, "M5"))]
    released = res.grip_events[1].event.pose[:3, 3] * 1000
    assert released[2] > 215 + 25                           # in the air
    (end,) = res.pieces
    z = end.pose[2, 3] * 1000
    assert 200 < z < 235                                    # on the table (top at 200 mm), not in the air
    assert end.offset_mm > 20


def test_cli_reports_the_events_and_the_end(capsys):
    """``armtwin run --cell`` prints a line per event and per workpiece; ``--json`` lists them in mm/deg."""
    prog = str(EXAMPLES / "scara_pick_place.ngc")
    cell = str(EXAMPLES / "cells" / "scara_pick_place.toml")
    assert main(["run", prog, "--robot", "scara", "--cell", cell, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [e["kind"] for e in out["grip_events"]] == ["grip", "release"]
    assert all(set(e) >= {"line", "piece", "time", "xyz_mm", "rpy_deg"} for e in out["grip_events"])
    (piece,) = out["pieces"]
    assert piece["piece"] == "box" and piece["offset_mm"] < TOL_MM and piece["angle_deg"] < TOL_DEG
    assert piece["target_xyz_mm"] == [380.0, 0.0, 215.0]
    assert main(["run", prog, "--robot", "scara", "--cell", cell]) == 0
    text = capsys.readouterr().out
    assert "GRIP box at line" in text and "RELEASE box at line" in text
    assert "from its target" in text


def test_tool_option_mounts_the_cup_for_a_program_without_m6(tmp_path, capsys):
    """``--tool 4`` mounts the cup from the start: the same program without ``T4 M6`` picks the box;
    without it (the bare flange, no vacuum tool) M3 grips nothing and the box stays where it was."""
    prog = tmp_path / "p.ngc"
    text = _program("scara")
    prog.write_text("".join(ln for ln in text.splitlines(keepends=True) if not ln.startswith("T4 M6")))
    cell = str(EXAMPLES / "cells" / "scara_pick_place.toml")
    assert main(["run", str(prog), "--robot", "scara", "--cell", cell, "--tool", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [e["kind"] for e in out["grip_events"]] == ["grip", "release"] and out["pieces"][0]["offset_mm"] < TOL_MM
    assert main(["run", str(prog), "--robot", "scara", "--cell", cell, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["grip_events"] == [] and out["pieces"][0]["offset_mm"] > 50


@pytest.mark.parametrize("robot", ROBOTS)
def test_the_examples_check_clean_in_their_cells(robot, capsys):
    """The cup touching the box (a work body) is allowed: ``armtwin check`` finds nothing."""
    assert main(["check", str(EXAMPLES / f"{robot}_pick_place.ngc"), "--robot", robot,
                 "--cell", str(EXAMPLES / "cells" / f"{robot}_pick_place.toml")]) == 0
    assert "clean" in capsys.readouterr().out


def test_a_target_belongs_to_a_workpiece(tmp_path):
    """``target`` (mm) with ``target_rpy`` (deg, default the body's rpy) on a body with a mass; on a
    static body it is refused with the file and line."""
    f = tmp_path / "c.toml"
    f.write_text('[[body]]\nname = "b"\nshape = "box"\nsize = [10, 10, 10]\nrpy = [0, 0, 30]\nmass = 0.1\n'
                 'target = [100, 0, 5]\n')
    (b,) = load_cell(f).bodies
    assert np.allclose(b.target[:3, 3], [0.1, 0, 0.005]) and np.allclose(b.target[:3, :3], b.pose[:3, :3])
    f.write_text('[[body]]\nname = "b"\nshape = "box"\nsize = [10, 10, 10]\ntarget = [100, 0, 5]\n')
    with pytest.raises(CellError, match=r"c\.toml:5: body b: a target belongs to a movable workpiece"):
        load_cell(f)


def test_an_mcap_log_has_each_event_as_a_log_message(tmp_path):
    """An MCAP run log carries each grip event (with the piece's pose) on /rosout."""
    reader = pytest.importorskip("mcap.reader")
    log = tmp_path / "run.mcap"
    res = _run("scara", "kinematic", log_path=str(log))
    with log.open("rb") as f:
        notes = [m.data for _, ch, m in reader.make_reader(f).iter_messages() if ch.topic == "/rosout"]
    for event in res.grip_events:
        assert sum(event.text().encode() in n for n in notes) == 1
    assert len(res.grip_events) == 2
