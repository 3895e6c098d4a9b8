"""Workpieces a program carries are part of the robot in the collision check, and stay where they
are set down (envs/carrying.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode.errors import ErrorCode
from armtwin.controllers.gcode.outputs import program_outputs
from armtwin.controllers.gcode.preflight import preflight
from armtwin.controllers.tools import default_tools
from armtwin.envs.carrying import carries
from armtwin.envs.collision import CARRIED, CollisionModel, collision_pass
from armtwin.robots.workcell import CellBody, load_cell
from armtwin.scripts.cli import main

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = (ROOT / "examples" / "irb120_pick_place.ngc").read_text()
CELL = load_cell(ROOT / "examples" / "cells" / "irb120_pick_place.toml")
CUP = default_tools()[4]
# between where the box is picked (x 290..350 mm) and where it is set down (x 360..400 mm): the box,
# carried with its bottom at z 230 mm, cannot pass; the cup alone (its tip at 260 mm) can
WALL = CellBody("wall", "box", np.array([[1, 0, 0, 0.355], [0, 1, 0, 0], [0, 0, 1, 0.2225], [0, 0, 0, 1.0]]),
                (0.004, 0.2, 0.045))


def _check(text: str, cell=CELL):
    spec = robots.get("irb120")
    contacts: list = []
    with CollisionModel(spec, cell, tool=CUP) as model:
        rep = preflight(text, spec, passes=(collision_pass(model, contacts),))
    return rep, contacts


def test_the_example_carries_the_box_from_its_grip_to_its_release():
    spec = robots.get("irb120")
    rep = preflight(PROGRAM, spec)
    gs = rep.samples
    grips = program_outputs(rep.program, rep.plan, rep.machine).grips_at(gs.t)
    with CollisionModel(spec, CELL, tool=CUP) as model:
        got = carries(model, rep.q, grips)
    assert [c.piece for c in got] == ["box"]
    c = got[0]
    assert gs.line[c.start] == 8 and gs.line[c.end] == 14     # gripped on the box's top, let go on the table
    # held 105 mm below the tool's frame: the 90 mm cup and half the 30 mm box
    assert c.grip[:3, 3] == pytest.approx([0, 0, 0.105], abs=1e-6)
    rep, contacts = _check(PROGRAM)
    assert rep.clean() and not contacts, rep.faults


def test_a_carried_box_that_hits_a_wall_is_refused_where_the_bare_cup_passes():
    cell = replace(CELL, bodies=CELL.bodies + (WALL,))
    rep, contacts = _check(PROGRAM, cell)
    faults = [f for f in rep.faults if f.code is ErrorCode.COLLISION]
    assert [f.line for f in faults] == [12], rep.faults          # G0 X30 Y0 C90, the box in the cup
    assert [(c.link, c.other) for c in contacts] == [("box" + CARRIED, "wall")]
    assert contacts[0].depth == pytest.approx(0.015, abs=1e-3)  # its bottom 15 mm below the wall's top
    # the same path without switching the suction on: the cup flies over the wall, the box stays
    rep, contacts = _check(PROGRAM.replace("M3 (suction on)", "(no suction)"), cell)
    assert rep.clean() and not contacts, rep.faults


def _after_placing(x: float) -> str:
    """The example, then the cup 10 mm above the table driven to program X ``x`` at Y0."""
    head, _, _ = PROGRAM.partition("G28")
    return head + f"G0 X{x - 60:g} Y0\nG1 Z10 F1500\nG1 X{x:g} F600\nG0 Z60\nM30\n"


def test_a_box_set_down_is_an_obstacle_where_it_was_set_down_and_no_longer_where_it_was():
    rep, contacts = _check(_after_placing(30))              # through the box on its new place
    faults = [f for f in rep.faults if f.code is ErrorCode.COLLISION]
    assert [f.line for f in faults] == [20] and {c.other for c in contacts} == {"box"}, rep.faults
    assert contacts[0].depth > 0.015                         # the cup 20 mm into a 30 mm box, less touch
    rep, contacts = _check(_after_placing(-30))             # through where it stood before: empty now
    assert rep.clean() and not contacts, rep.faults


def test_suction_in_the_air_grips_nothing_and_the_box_stays_an_obstacle():
    text = PROGRAM.replace("G1 Z30 F300 (the cup on the box's top)", "G1 Z40 F300 (10 mm above the box)", 1)
    spec = robots.get("irb120")
    rep = preflight(text, spec)
    grips = program_outputs(rep.program, rep.plan, rep.machine).grips_at(rep.samples.t)
    assert grips.any()
    with CollisionModel(spec, CELL, tool=CUP) as model:
        assert carries(model, rep.q, grips) == []
    rep, contacts = _check(_after_placing(-30).replace("G1 Z30 F300 (the cup on the box's top)",
                                                        "G1 Z40 F300 (10 mm above the box)", 1))
    assert {c.other for c in contacts} == {"box"} and not rep.clean()   # the box never left


def test_check_refuses_the_carried_box_at_the_command_line(tmp_path, capsys):
    prog = tmp_path / "pp.ngc"
    prog.write_text(PROGRAM)
    cell = tmp_path / "wall.toml"
    cell.write_text((ROOT / "examples" / "cells" / "irb120_pick_place.toml").read_text()
                    + '\n[[body]]\nname = "wall"\nshape = "box"\nsize = [4, 200, 45]\nxyz = [355, 0, 222.5]\n')
    assert main(["check", str(prog), "--robot", "irb120", "--cell", str(cell)]) == 1
    out = capsys.readouterr().out
    assert "line 12: error 110" in out and "box (carried) touches wall" in out
