"""The parallel gripper in physics (issue 18, item 4): a GRIPPER tool's jaws are bodies of their own
that close on a workpiece and hold it by friction (hinge and articulation: the piece's weight acts
on the arm, too heavy a piece slides out), ideally in the kinematic model; the collision check
knows the open jaws and carries the piece they close on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode import compile_program
from armtwin.envs.gripper import GripKind, ParallelGripper
from armtwin.envs.runner import RunConfig, run_program
from armtwin.robots.workcell import load_cell
from armtwin.scripts.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
ROBOTS = ("irb120", "aubo_i5")


def _program(robot: str) -> str:
    return (EXAMPLES / f"{robot}_gripper_pick_place.ngc").read_text()


def _cell_file(robot: str) -> Path:
    return EXAMPLES / "cells" / f"{robot}_pick_place.toml"


def _line_of(text: str, word: str) -> int:
    (n,) = [i + 1 for i, ln in enumerate(text.splitlines()) if ln.split("(")[0].strip() == word]
    return n


def _run(robot: str, mode: str, text: str | None = None, cell=None, **kw):
    spec = robots.get(robot)
    c = compile_program(text if text is not None else _program(robot), spec)
    assert c.ok, c.refusal
    return run_program(c, spec, RunConfig(mode=mode), cell=cell or load_cell(_cell_file(robot)), **kw)


@pytest.mark.parametrize("mode", ["kinematic", "articulation"])
@pytest.mark.parametrize("robot", ROBOTS)
def test_the_jaws_move_the_box_to_its_target(robot, mode):
    """The jaws close on the box at the M3 line (the grip is reported once both touch it, after
    they travelled the 2 mm gap), carry it turned by 90° and let go at the M5 line; it ends within
    2 mm and 2° of the cell's target, 60 mm from where it stood."""
    text = _program(robot)
    res = _run(robot, mode)
    assert res.stable, res.message
    assert [(e.event.kind, e.line) for e in res.grip_events] == [(GripKind.GRIP, _line_of(text, "M3")),
                                                                 (GripKind.RELEASE, _line_of(text, "M5"))]
    (end,) = res.pieces
    assert end.offset_mm < 2.0 and end.angle_deg < 2.0, end.text()


def test_a_piece_too_heavy_for_the_grip_slides_out():
    """An 8 kg box (78 N) against 2 × 40 N of grip at a friction of 0.5: the jaws close on it, and
    it slides out as the arm lifts (a DROP), in the articulation model; the kinematic model's ideal
    grip carries it."""
    cell = load_cell(_cell_file("irb120"))
    from dataclasses import replace
    heavy = replace(cell, bodies=tuple(replace(b, mass=8.0) if b.name == "box" else b for b in cell.bodies))
    res = _run("irb120", "articulation", cell=heavy)
    kinds = [e.event.kind for e in res.grip_events]
    assert GripKind.DROP in kinds and kinds[0] is GripKind.GRIP, kinds
    assert res.pieces[0].offset_mm > 30
    res = _run("irb120", "kinematic", cell=heavy)
    assert [e.event.kind for e in res.grip_events] == [GripKind.GRIP, GripKind.RELEASE]


def test_jaws_closed_in_the_air_grip_nothing():
    """M3 before the jaws reach the box: they close on air (no event), and open again; the box
    stays where it stood."""
    text = _program("irb120").replace("M3 (close the jaws)", "").replace(
        "G0 X-30 Y0 C90", "G0 X-30 Y0 C90\nM3\nG4 P0.5\nM5\nG4 P0.5")
    res = _run("irb120", "articulation", text)
    assert res.grip_events == ()
    assert res.pieces[0].offset_mm > 50


def test_the_gripper_needs_a_gripper_tool():
    from armtwin.envs.sim import World
    with World() as w:
        r = w.add_robot(robots.get("irb120"))
        with pytest.raises(ValueError, match="gripper tool"):
            ParallelGripper(w, r, {})


def test_the_check_knows_the_open_jaws(tmp_path, capsys):
    """The open jaws straddle the box across its 40 mm side (clean); turned by 90° (C0) they come
    down on its 60 mm side and are refused, naming the tool and the box."""
    ok = main(["check", str(EXAMPLES / "irb120_gripper_pick_place.ngc"), "--robot", "irb120",
               "--cell", str(_cell_file("irb120")), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert ok == 0 and out["cell"]["contacts"] == []
    prog = tmp_path / "p.ngc"
    prog.write_text(_program("irb120").replace("G0 X-30 Y0 C90", "G0 X-30 Y0 C0"))
    assert main(["check", str(prog), "--robot", "irb120", "--cell", str(_cell_file("irb120")), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert ("tool", "box") in {(c["link"], c["other"]) for c in out["cell"]["contacts"]}


def test_the_check_carries_what_the_jaws_close_on(tmp_path, capsys):
    """A wall between pick and place whose top (265 mm) is below the jaw tips on the way (270 mm)
    and above the carried box's bottom (260 mm: the box hangs 10 mm below the tips): the carried
    box is refused on the move across (line 12). Without M3 nothing is carried and only the open
    jaws' own graze of the wall as they come down at the place (line 13) is left."""
    cell = tmp_path / "cell.toml"
    cell.write_text(_cell_file("irb120").read_text() + '\n[[body]]\nname = "wall"\nshape = "box"\n'
                    'size = [4, 200, 65]\nxyz = [355, 0, 232.5]\nrole = "obstacle"\n')
    prog = tmp_path / "p.ngc"
    text = _program("irb120")
    prog.write_text(text)
    assert main(["check", str(prog), "--robot", "irb120", "--cell", str(cell), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    move = _line_of(text, "G0 X30 Y0 C180")
    got = {(c["link"], c["other"], c["line"]) for c in out["cell"]["contacts"]}
    assert ("box (carried)", "wall", move) in got
    prog.write_text(text.replace("M3 (close the jaws)", ""))
    assert main(["check", str(prog), "--robot", "irb120", "--cell", str(cell), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert {(c["link"], c["other"], c["line"]) for c in out["cell"]["contacts"]} == {("tool", "wall", move + 1)}


def test_a_run_without_pieces_still_moves_the_jaws():
    """In a cell without workpieces the jaws are still simulated: they close on M3 and open on M5
    (the gap between them measured in the run), and nothing is reported gripped."""
    from armtwin.envs import gripper as G
    gaps: list[tuple[bool, float]] = []
    update = G.ParallelGripper.update

    def spy(self, on):
        out = update(self, on)
        gaps.append((bool(on), self.opening))
        return out
    cell = load_cell(_cell_file("irb120"))
    from dataclasses import replace
    empty = replace(cell, bodies=tuple(b for b in cell.bodies if b.name != "box"))
    G.ParallelGripper.update = spy
    try:
        res = _run("irb120", "articulation", cell=empty)
    finally:
        G.ParallelGripper.update = update
    assert res.stable and res.grip_events == ()
    closed = [g for on, g in gaps if on]
    assert max(g for on, g in gaps if not on) == pytest.approx(0.044, abs=5e-4)   # open: 40 mm stroke + 2 x 2 mm
    assert min(closed) < 0.002                                                    # closed on nothing
