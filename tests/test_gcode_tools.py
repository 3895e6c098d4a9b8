"""Tools with a TCP in G-code (issue 17.1): the tool table at the command line, T/M6, G43/G43.1/G49,
and runs that put the tool tip — not the flange — on the programmed path."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode import ErrorCode, StopKind, compile_program, load_program, machine_for
from armtwin.controllers.gcode.blocks import FLANGE, Motion, Stop
from armtwin.controllers.kinematics import chain_of, fk
from armtwin.controllers.tools import Tool, ToolKind, ToolTable
from armtwin.envs.runner import RunConfig, log_columns, run_program
from armtwin.scripts.cli import main

IRB = robots.get("irb120")
#: a 100 mm spindle (T1) and a 60 mm pen (T2) turned 90° about the flange's z axis
_PEN = np.eye(4)
_PEN[:3, :3] = [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
_PEN[2, 3] = 0.06
_SPINDLE = np.eye(4)
_SPINDLE[2, 3] = 0.100
TABLE = ToolTable({1: Tool(1, "100 mm spindle", ToolKind.SPINDLE, _SPINDLE, 1.2, np.array([0, 0, 0.05]), 24000.0),
                   2: Tool(2, "pen, turned", ToolKind.PEN, _PEN, 0.1)}, "test table")

#: the path test of test_gcode_cli: lines, a clockwise arc, a dwell, a retract (mm)
PATH = "G21 G90 G0 X-10 Y0 Z5\nG1 Z0 F1500\nG2 X10 Y0 R10 F3000\nG1 Y10\nG4 P0.2\nG0 Z5\n"


def _dist_to_segment(p: np.ndarray, a, b) -> np.ndarray:
    a, b = np.asarray(a, float), np.asarray(b, float)
    d = b - a
    u = np.clip((p - a) @ d / max(d @ d, 1e-300), 0.0, 1.0)
    return np.linalg.norm(p - (a + u[:, None] * d), axis=1)


def _errors(spec, *, text: str, **machine) -> list[tuple[int, int, int]]:
    prog = load_program(text, spec, machine_for(spec, **machine) if machine else None)
    return [(int(f.code), f.line, f.column) for f in prog.faults]


# ----- the tip on the path ------------------------------------------------------------------------

@pytest.mark.parametrize("robot", ["scara", "irb120", "aubo_i5"])
def test_a_100mm_tool_puts_its_tip_on_the_path_and_the_flange_100mm_behind(robot, tmp_path):
    """Kinematic run with T1 (100 mm) mounted by the program: the engine's TCP (x_mm …) follows
    the lines and the arc as written within 0.01 mm, and the engine's flange is 100 mm above it
    (the tool points down) — a CAM program for a 100 mm spindle does not drive the flange into
    the work."""
    spec = robots.get(robot)
    text = "T1 M6\nG43 H1\n" + PATH
    c = compile_program(text, spec, machine_for(spec, tools=TABLE))
    assert c.ok, c.refusal
    log = tmp_path / "run.csv"
    res = run_program(c, spec, RunConfig(), log_path=str(log))
    assert res.stable and res.max_error_mm < 0.01 and res.tool_changes == (1,)
    rows = list(csv.reader(log.open()))
    assert rows[0] == log_columns(spec)
    col = {name: i for i, name in enumerate(rows[0])}
    data = np.array([r[:col["tool"]] for r in rows[1:]], dtype=float)
    line = data[:, 1].astype(int)
    origin = np.array(spec.workcell.origin) * 1000.0
    tip = data[:, col["x_mm"]:col["x_mm"] + 3] - origin
    flange = data[:, col["flange_x_mm"]:col["flange_x_mm"] + 3] - origin
    geometry = {
        4: lambda q: _dist_to_segment(q, (-10, 0, 5), (-10, 0, 0)),
        5: lambda q: np.hypot(np.hypot(q[:, 0], q[:, 1]) - 10.0, q[:, 2]),
        6: lambda q: _dist_to_segment(q, (10, 0, 0), (10, 10, 0)),
        7: lambda q: np.linalg.norm(q - (10, 10, 0), axis=1),
        8: lambda q: _dist_to_segment(q, (10, 10, 0), (10, 10, 5)),
    }
    for ln, dist in geometry.items():
        assert (line == ln).any()
        assert dist(tip[line == ln]).max() <= 0.01, f"{robot} line {ln}"
    work = np.isin(line, [4, 5, 6, 7, 8])
    np.testing.assert_allclose(flange[work] - tip[work], np.tile([0.0, 0.0, 100.0], (work.sum(), 1)), atol=0.01)
    assert flange[work, 2].min() >= 100.0 - 0.01         # never below 100 mm over the work's Z0
    # the program starts where the arm stands: the flange at home, the tip 100 mm below it
    home = fk(chain_of(spec), spec.home)[:3, 3] * 1000.0 - origin
    np.testing.assert_allclose(flange[0], home, atol=0.01)


def test_without_the_tool_the_same_program_drives_the_flange_onto_the_path():
    c0 = compile_program(PATH, IRB)
    c1 = compile_program("T1 M6\n" + PATH, IRB, machine_for(IRB, tools=TABLE))
    q0, q1 = c0.trajectory.arrays()[1], c1.trajectory.arrays()[1]
    z0 = min(fk(chain_of(IRB), q)[2, 3] for q in q0)
    z1 = min(fk(chain_of(IRB), q)[2, 3] for q in q1)
    assert z1 - z0 == pytest.approx(0.100, abs=1e-6)


def test_the_start_tool_of_the_machine_is_the_controlled_point_from_the_first_line():
    c = compile_program(PATH, IRB, machine_for(IRB, tools=TABLE, tool=1))
    ps, q, _ = c.trajectory.arrays()
    F = np.array([fk(chain_of(IRB), qq) for qq in q])
    np.testing.assert_allclose((F @ _SPINDLE)[:, :3, 3], ps.position, atol=1e-9)
    assert c.body_tool.number == 1 and c.outputs.tools_mounted == (1,)


def test_a_turned_tcp_turns_the_flange_and_keeps_the_tip_on_the_path():
    c = compile_program("T2 M6\nG0 X0 Y0 Z5\nG1 X20 F1200\n", IRB, machine_for(IRB, tools=TABLE))
    assert c.ok, c.refusal
    ps, q, _ = c.trajectory.arrays()
    F = np.array([fk(chain_of(IRB), qq) for qq in q])
    T = F @ _PEN
    np.testing.assert_allclose(T[:, :3, 3], ps.position, atol=1e-9)
    np.testing.assert_allclose(T[:, :3, :3], ps.rotation, atol=1e-9)


def test_tool_changes_g43_g43_1_and_g49_move_the_controlled_point_not_the_arm():
    prog = load_program("T1 M6\nG0 X0 Y0 Z0\nG49\nG0 Z0\nG43.1 Z40\nG0 Z0\nG43 H1\nG0 Z0\nT2\nG0 Z1\n", IRB,
                        machine_for(IRB, tools=TABLE))
    assert prog.ok, prog.faults
    moves = [b for b in prog.blocks if isinstance(b, Motion)]
    assert [b.tcp[2, 3] for b in moves] == [0.1, 0.0, 0.04, 0.1, 0.1]   # T2 alone only selects
    assert moves[0].tcp is TABLE[1].tcp and moves[1].tcp is FLANGE
    # G49: the flange, standing 100 mm above the tip, moves down to Z0 (100 mm)
    assert moves[1].start[2] - moves[1].end[2] == pytest.approx(0.1)
    # G43.1 Z40: the point 40 mm beyond the flange (now at Z0) rises to Z0
    assert moves[2].end[2] - moves[2].start[2] == pytest.approx(0.04)
    assert moves[3].end[2] - moves[3].start[2] == pytest.approx(0.06)        # back to the 100 mm tool
    stops = [b for b in prog.blocks if isinstance(b, Stop)]
    assert [(s.line, s.kind) for s in stops] == [(1, StopKind.TOOL_CHANGE)]


def test_the_flange_does_not_jump_at_a_tool_change():
    c = compile_program("G0 X0 Y0 Z20\nT1 M6\nG0 Z20\nT2 M6\nG1 X10 F1200\n", IRB, machine_for(IRB, tools=TABLE))
    assert c.ok, c.refusal
    _, q, _ = c.trajectory.arrays()
    assert np.abs(np.diff(q, axis=0)).max() < 0.01      # rad per 4 ms control period: continuous
    assert c.outputs.tools_mounted == (0, 1, 2)


def test_g28_sends_the_flange_home_whatever_the_tool():
    c = compile_program("T1 M6\nG0 X0 Y0 Z0\nG28\n", IRB, machine_for(IRB, tools=TABLE))
    assert c.ok, c.refusal
    q = c.trajectory.arrays()[1][-1]
    np.testing.assert_allclose(fk(chain_of(IRB), q)[:3, 3], fk(chain_of(IRB), IRB.home)[:3, 3], atol=1e-9)


# ----- words accepted and refused ------------------------------------------------------------------

@pytest.mark.parametrize("text", ["T1 M6 G43 H1", "M6 T2", "T1\nM6", "G43.1 Z100", "G43.1 X1 Y2 Z100", "G49", "G43",
                                  "t1 m6 g43 h1", "N10 T2 M6"])
def test_tool_words_accepted(text):
    assert _errors(IRB, text=text + "\n", tools=TABLE) == []


@pytest.mark.parametrize("text,fault", [
    ("T77 M6", (44, 1, 1)),
    ("G0 X1\nT1.5", (44, 2, 1)),
    ("G43 H9", (44, 1, 5)),
    ("T-1", (44, 1, 1)),
    ("G43.1", (23, 1, 1)),
    ("G1 G43.1 Z10 F100", (22, 1, 1)),
    ("H5", (25, 1, 1)),
    ("G43.1 Z10 A5", (25, 1, 11)),
    ("M6 M6", (15, 1, 4)),
])
def test_tool_words_refused(text, fault):
    assert _errors(IRB, text=text + "\n", tools=TABLE) == [fault]


def test_a_refused_tool_line_changes_nothing():
    prog = load_program("T1 M6\nG43 H9\nG0 Z0\n", IRB, machine_for(IRB, tools=TABLE))
    assert [f.code for f in prog.faults] == [ErrorCode.UNKNOWN_TOOL]
    assert [b.tcp[2, 3] for b in prog.blocks if isinstance(b, Motion)] == [0.1]


# ----- the command line -----------------------------------------------------------------------------

def test_check_and_run_take_a_tool_table(tmp_path, capsys):
    table = tmp_path / "tools.toml"
    table.write_text('[tool.7]\nname = "long spindle"\nkind = "spindle"\ntcp = [0, 0, 100]\nmass = 1.0\n'
                     'com = [0, 0, 50]\ns_max = 20000\n')
    prog = tmp_path / "p.ngc"
    prog.write_text("T7 M6\nG43 H7\nM3 S12000\n" + PATH + "M5\nM30\n")
    assert main(["check", str(prog), "--robot", "irb120"]) == 1            # the built-in table has no T7
    assert "error 44" in capsys.readouterr().out
    assert main(["check", str(prog), "--robot", "irb120", "--tools", str(table)]) == 0
    assert "tool change(s): line 1 T7" in capsys.readouterr().out
    assert main(["check", str(prog), "--robot", "irb120", "--tools", str(table), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tool_changes"] == [{"line": 1, "tool": 7}]
    log = tmp_path / "run.csv"
    assert main(["run", str(prog), "--robot", "irb120", "--tools", str(table), "--log", str(log), "--json"]) == 0
    rows = list(csv.DictReader(log.open()))
    assert {r["tool"] for r in rows} >= {"7"} and any(r["tool_on"] == "1" and r["s"] == "12000" for r in rows)
    on = [r for r in rows if r["tool_on"] == "1"]
    assert 4 <= min(int(r["line"]) for r in on)          # on from line 3: the moves after it
    capsys.readouterr()


@pytest.mark.parametrize("args,needle", [
    (["--tools", "missing.toml"], "--tools missing.toml: no such file"),
    (["--tool", "9"], "--tool 9: the tool table (built-in) has T0"),
])
def test_bad_tool_options_are_one_line_and_exit_2(tmp_path, capsys, args, needle):
    prog = tmp_path / "p.ngc"
    prog.write_text("G0 X0\n")
    assert main(["check", str(prog), "--robot", "irb120", *args]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_a_bad_tool_table_names_its_key(tmp_path, capsys):
    table = tmp_path / "t.toml"
    table.write_text('[tool.1]\nkind = "lazer"\n')
    prog = tmp_path / "p.ngc"
    prog.write_text("G0 X0\n")
    assert main(["check", str(prog), "--robot", "irb120", "--tools", str(table)]) == 2
    err = capsys.readouterr().err
    assert "tool.1.kind" in err and "Traceback" not in err


def test_the_gym_track_path_of_a_program_with_a_tool_is_the_flanges():
    """TrackEnv observes and steers the flange: a program's path with a tool is the flange's, the
    one its joints reach."""
    from armtwin.envs.tasks import gcode_path
    path = gcode_path("T1 M6\nG0 X0 Y0 Z10\nG1 X10 F600\n", IRB, 0.04)
    F = np.array([fk(chain_of(IRB), q) for q in path.q])
    np.testing.assert_allclose(path.p, F[:, :3, 3], atol=1e-9)
    np.testing.assert_allclose(path.rotation, F[:, :3, :3], atol=1e-9)
    assert path.p[:, 2].min() == pytest.approx(IRB.workcell.origin[2] + 0.010 + 0.100)   # the pen (T1) is 100 mm
