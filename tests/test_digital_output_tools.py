"""A tool worked by a digital output (issue 18: "M3/M62 as the tool table says"): a tool table entry's
``output = n`` makes M62–M65 P n switch the tool instead of M3/M5 — the suction valve of a vacuum
cup on a robot controller's I/O. The run grips and releases at the digital output's lines, the
collision check carries the piece between them, and M3 no longer works that tool."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from armtwin.controllers.gcode import compile_program
from armtwin.controllers.gcode.outputs import OutputState
from armtwin.controllers.tools import ToolTableError, default_tools, load_tools
from armtwin.scripts.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CELL = str(EXAMPLES / "cells" / "irb120_pick_place.toml")


def _table(tmp_path, output) -> Path:
    """The built-in cup (T4) with its suction on digital output ``output`` (None: M3/M5)."""
    cup = default_tools()[4]
    f = tmp_path / "tools.toml"
    f.write_text(f'[tool.4]\nname = "vacuum cup on a valve"\nkind = "vacuum"\ntcp = [0, 0, {cup.length * 1000:g}]\n'
                 f'mass = {cup.mass:g}\nwidth = {cup.width * 1000:g}\n'
                 + ("" if output is None else f"output = {output}\n"))
    return f


def _program(tmp_path, on: str, off: str) -> tuple[Path, str]:
    text = (EXAMPLES / "irb120_pick_place.ngc").read_text()
    assert text.count("\nM3 ") == 1 and text.count("\nM5 ") == 1
    text = text.replace("\nM3 ", f"\n{on} ").replace("\nM5 ", f"\n{off} ")
    f = tmp_path / "p.ngc"
    f.write_text(text)
    return f, text


def _line(text: str, word: str) -> int:
    (n,) = [i + 1 for i, ln in enumerate(text.splitlines()) if ln.split("(")[0].strip() == word]
    return n


def _run(args, capsys) -> dict:
    assert main(["run", *map(str, args), "--robot", "irb120", "--cell", CELL, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("on,off", [("M64 P2", "M65 P2"), ("M62 P2", "M63 P2")])
def test_the_cup_follows_its_digital_output(tmp_path, capsys, on, off):
    """With ``output = 2`` the example picks and places its box on M64/M65 P2 (at once) and on
    M62/M63 P2 (with the next move): the grip and the release carry the digital output's lines
    and the box ends at its target as with M3/M5."""
    prog, text = _program(tmp_path, on, off)
    out = _run([prog, "--tools", _table(tmp_path, 2)], capsys)
    assert [(e["kind"], e["line"]) for e in out["grip_events"]] == [("grip", _line(text, on)),
                                                                   ("release", _line(text, off))]
    (piece,) = out["pieces"]
    assert piece["offset_mm"] < 2.0 and piece["angle_deg"] < 2.0


def test_another_output_or_m3_does_not_work_it(tmp_path, capsys):
    """The cup on output 2 does not grip on output 3, nor on M3: the box stays where it was.
    Without ``output`` the digital output does nothing to the cup (M3/M5 work it)."""
    prog, _ = _program(tmp_path, "M64 P3", "M65 P3")
    out = _run([prog, "--tools", _table(tmp_path, 2)], capsys)
    assert out["grip_events"] == [] and out["pieces"][0]["offset_mm"] > 50
    out = _run([EXAMPLES / "irb120_pick_place.ngc", "--tools", _table(tmp_path, 2)], capsys)
    assert out["grip_events"] == [] and out["pieces"][0]["offset_mm"] > 50
    prog, _ = _program(tmp_path, "M64 P2", "M65 P2")
    out = _run([prog, "--tools", _table(tmp_path, None)], capsys)
    assert out["grip_events"] == [] and out["pieces"][0]["offset_mm"] > 50


def test_the_collision_check_carries_the_piece_between_the_digital_lines(tmp_path, capsys):
    """A wall between pick and place: the carried box touches it only when the output grips it —
    the check refuses the valve program with the cup on output 2 and passes it with the cup on M3
    (nothing is carried then, and the bare cup flies over the wall)."""
    cell = tmp_path / "cell.toml"
    cell.write_text(Path(CELL).read_text() + '\n[[body]]\nname = "wall"\nshape = "box"\nsize = [4, 200, 45]\n'
                    'xyz = [355, 0, 222.5]\nrole = "obstacle"\n')
    prog, text = _program(tmp_path, "M64 P2", "M65 P2")
    args = ["check", str(prog), "--robot", "irb120", "--cell", str(cell), "--tools"]
    assert main([*args, str(_table(tmp_path, 2))]) == 1
    out = capsys.readouterr().out
    assert "box (carried) touches wall" in out
    assert main([*args, str(_table(tmp_path, None))]) == 0, capsys.readouterr().out


def test_output_state_works_a_tool_by_its_output():
    """``OutputState.works``: a tool without ``output`` by M3/M4, one with it by that output alone."""
    from dataclasses import replace
    from armtwin.controllers.gcode.modal import SpindleMode
    cup = default_tools()[4]
    valve = replace(cup, output=5)
    m3 = OutputState(tool=4, mode=SpindleMode.CW)
    assert m3.works(cup) and not m3.works(valve)
    assert OutputState(tool=4).with_digital(5, True).works(valve)
    assert not OutputState(tool=4).with_digital(4, True).works(valve)
    assert not OutputState(tool=4).with_digital(5, True).works(cup)


@pytest.mark.parametrize("value,why", [("32", "0 to 31"), ("-1", "0 to 31"), ("1.5", "whole number"),
                                       ("true", "whole number"), ('"2"', "whole number")])
def test_a_bad_output_is_one_line_naming_the_key(tmp_path, value, why):
    f = tmp_path / "t.toml"
    f.write_text(f'[tool.4]\nkind = "vacuum"\noutput = {value}\n')
    with pytest.raises(ToolTableError, match=rf"t\.toml: tool\.4\.output: .*{why}"):
        load_tools(f)


def test_compiled_program_grips_between_the_digital_lines(tmp_path):
    """The compiled program's output timeline (shared by the run and the check) grips from the
    M64 line to the M65 line and nowhere else."""
    from armtwin import robots
    from armtwin.controllers.gcode.config import machine_for
    _, text = _program(tmp_path, "M64 P2", "M65 P2")
    spec = robots.get("irb120")
    c = compile_program(text, spec, machine_for(spec, tools=load_tools(_table(tmp_path, 2))))
    assert c.ok, c.refusal
    o = c.outputs
    t = np.linspace(0.0, float(c.trajectory.plan.duration), 4000)
    g = o.grips_at(t)
    assert not g[0] and not g[-1] and np.count_nonzero(np.diff(g.astype(int))) == 2
    on = o.lines[[i for i, st in enumerate(o.states) if 2 in st.digital][0]]
    assert on == _line(text, "M64 P2")
