"""The default workcell (issue 18, item 1): without ``--cell``, ``check``, ``run``, ``compare --program``
and ``ui`` stand the robot at its built-in table, whose top is the program's Z0 under the default
origin; ``--no-cell`` is the empty world. A cutter may go into the table as deep as its flutes
(the tool table's ``cut``), so CAM programs whose Z0 is the stock's top still check clean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from armtwin.controllers.tools import ToolTableError, default_tools, load_tools
from armtwin.scripts.cli import main

DATA = Path(__file__).resolve().parent / "data" / "gcode"


def _check(capsys, *args) -> tuple[int, dict]:
    code = main(["check", *map(str, args), "--json"])
    return code, json.loads(capsys.readouterr().out)


def _plunge(tmp_path, tool: int, depth_mm: float) -> Path:
    """A program that mounts ``tool`` and moves its TCP ``depth_mm`` below Z0 (into the table)."""
    f = tmp_path / f"t{tool}_{depth_mm:g}.ngc"
    f.write_text(f"G21 G90\nT{tool} M6\nG0 X0 Y0 Z30\nG1 Z{-depth_mm:g} F300\nG1 X20\nG0 Z30\n")
    return f


def test_check_uses_the_default_cell_unless_told_otherwise(tmp_path, capsys):
    """The same plunge of a pen 10 mm into the table: refused without options (the default cell's
    table, named in the report), clean with --no-cell, and the default cell is the one
    ``--cell default`` names."""
    prog = _plunge(tmp_path, 1, 10)
    code, out = _check(capsys, prog, "--robot", "irb120")
    assert code == 1 and out["cell"]["name"] == "irb120 default cell"
    assert [(c["link"], c["other"]) for c in out["cell"]["contacts"]] == [("tool", "table")]
    assert out["cell"]["contacts"][0]["depth_mm"] == pytest.approx(10, abs=0.5)
    code2, out2 = _check(capsys, prog, "--robot", "irb120", "--cell", "default")
    assert code2 == 1 and out2["cell"]["contacts"] == out["cell"]["contacts"]
    code, out = _check(capsys, prog, "--robot", "irb120", "--no-cell")
    assert code == 0 and "cell" not in out


@pytest.mark.parametrize("depth, clean", [(2, True), (19, True), (21, False)])
def test_a_cutter_goes_into_work_as_deep_as_its_flutes(tmp_path, capsys, depth, clean):
    """T2 (spindle, ``cut`` 20 mm) may cut into the table down to 20 mm (a stock whose top is Z0);
    deeper, the holder would hit it: refused with the allowed depth in the message."""
    code, out = _check(capsys, _plunge(tmp_path, 2, depth), "--robot", "irb120")
    assert (code == 0) == clean, out["cell"]["contacts"]
    if not clean:
        (c,) = out["cell"]["contacts"]
        assert (c["link"], c["other"], c["allowed_mm"]) == ("tool", "table", pytest.approx(20.0))


@pytest.mark.parametrize("tool", [1, 3, 4])
def test_other_tools_press_in_only_the_cells_touch(tmp_path, capsys, tool):
    """A pen, a laser or a cup 2 mm below Z0 is in the table (the cell's touch is 1 mm)."""
    code, out = _check(capsys, _plunge(tmp_path, tool, 2), "--robot", "irb120")
    assert code == 1 and out["cell"]["contacts"][0]["allowed_mm"] == pytest.approx(1.0)


def test_the_cam_program_checks_clean_in_the_default_cell(capsys):
    """The project's CAM roughing program cuts 2 mm below its Z0 with T2: clean without options."""
    code, out = _check(capsys, DATA / "cam_roughing.ngc", "--robot", "irb120")
    assert code == 0 and out["cell"]["name"] == "irb120 default cell" and out["cell"]["contacts"] == []


def test_run_stands_in_the_default_cell_and_refuses_a_plunge(tmp_path, capsys):
    prog = _plunge(tmp_path, 1, 10)
    assert main(["run", str(prog), "--robot", "irb120"]) == 1
    assert "tool touches table" in capsys.readouterr().out
    assert main(["run", str(prog), "--robot", "irb120", "--no-cell", "--json"]) == 0
    assert "cell" not in json.loads(capsys.readouterr().out)


def test_place_searches_without_the_implicit_table(tmp_path, capsys):
    """``--place`` looks for an origin anywhere in reach: no implicit table in the way (the report
    has no cell), unless ``--cell`` gives one."""
    prog = tmp_path / "far.ngc"
    prog.write_text("G21 G90\nG0 X600 Y0 Z0\nG1 X640 F600\n")
    code, out = _check(capsys, prog, "--robot", "irb120", "--place")
    assert code == 0 and "cell" not in out


def test_cell_and_no_cell_together_is_one_line(tmp_path, capsys):
    prog = _plunge(tmp_path, 1, 0)
    assert main(["check", str(prog), "--robot", "irb120", "--cell", "default", "--no-cell"]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "--no-cell: choose one" in err


def test_cut_in_a_tool_table(tmp_path):
    assert default_tools()[2].cut == pytest.approx(0.02) and default_tools()[1].cut == 0.0
    f = tmp_path / "t.toml"
    f.write_text('[tool.7]\nkind = "spindle"\ntcp = [0, 0, 100]\ncut = 35\n')
    assert load_tools(f)[7].cut == pytest.approx(0.035)
    f.write_text('[tool.7]\nkind = "spindle"\ncut = -1\n')
    with pytest.raises(ToolTableError, match=r"tool\.7\.cut: a number from 0 to 200 mm"):
        load_tools(f)
