"""Tool outputs in G-code (issue 17.2): M3/M4/M5 S, M7/M8/M9, M62–M65, M300; their timeline along the
timed path; and the project's own corpus of CAM, laser, pen and pick-and-place programs run end to end."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode import compile_program, load_program, machine_for
from armtwin.controllers.gcode.blocks import OutputChange
from armtwin.controllers.gcode.modal import SpindleMode
from armtwin.controllers.gcode.outputs import OutputState, tool_level
from armtwin.controllers.tools import default_tools
from armtwin.scripts.cli import main

IRB = robots.get("irb120")
SCARA = robots.get("scara")
CORPUS = Path(__file__).resolve().parent / "data" / "gcode"
TOOLS = default_tools()


def _faults(text: str, spec=IRB, **machine) -> list[tuple[int, int, int]]:
    prog = load_program(text, spec, machine_for(spec, **machine) if machine else None)
    return [(int(f.code), f.line, f.column) for f in prog.faults]


# ----- words accepted and refused ---------------------------------------------------------------

@pytest.mark.parametrize("text", ["M3 S9000", "S9000 M3 M8", "M4 S100", "M5", "M7", "M8", "M9", "M7\nM8\nM9",
                                  "M62 P1", "M63 P31", "M64 P0", "M65 P2", "S0", "G0 X1 M3 S1", "m3 s1000 m7"])
def test_output_words_accepted(text):
    assert _faults(text + "\n") == []


def test_m300_is_accepted_with_the_pen_servo_option():
    assert _faults("M300 S30\nM300 S50\n", pen_servo=True) == []


@pytest.mark.parametrize("text,fault,machine", [
    ("M3 S-5", (45, 1, 4), {}),
    ("T2 M6\nM3 S30000", (45, 2, 4), {}),              # the built-in spindle's s_max is 24000
    ("M300", (45, 1, 1), {"pen_servo": True}),
    ("M300 S30", (47, 1, 1), {}),
    ("G0 X1\nM62", (46, 2, 1), {}),
    ("M62 P40", (46, 1, 5), {}),
    ("M65 P1.5", (46, 1, 5), {}),
    ("G4 P1 M64", (46, 1, 7), {}),
    ("M3 M4", (15, 1, 4), {}),
    ("M7 M9", (15, 1, 4), {}),
    ("M300 S30 M300 S50", [(15, 1, 10), (14, 1, 15)], {"pen_servo": True}),   # every fault of the line
])
def test_output_words_refused(text, fault, machine):
    assert _faults(text + "\n", **machine) == (fault if isinstance(fault, list) else [fault])


def test_a_refused_output_line_changes_nothing():
    prog = load_program("M3 S100\nM62 P99\nM5\n", IRB)
    assert [int(f.code) for f in prog.faults] == [46]
    outs = [b.outputs for b in prog.blocks if isinstance(b, OutputChange)]
    assert [(o.mode, o.s, o.digital) for o in outs] == [(SpindleMode.CW, 100.0, frozenset()),
                                                         (SpindleMode.OFF, 100.0, frozenset())]


# ----- the timeline ----------------------------------------------------------------------------------

def test_outputs_take_effect_where_the_path_stands_and_m62_waits_for_the_next_move():
    text = "G0 X0 Y0 Z10\nM64 P1\nM62 P2\nM8\nG4 P2\nM3 S5000\nG1 X10 F600\nM63 P2\nM9 M5\nG1 X20\n"
    c = compile_program(text, IRB)
    assert c.ok, c.refusal
    plan, o = c.report.plan, c.outputs
    arrive = plan.t_start[plan.block == 1][0] - 2.0           # the G0 ends; the dwell follows
    assert o.digital(arrive + 0.01, 1) and o.at(arrive + 0.01).flood      # M64 and M8 at once
    assert not o.digital(arrive + 1.0, 2)                                  # M62 waits for the move ...
    assert o.digital(arrive + 2.0 + 1e-6, 2) and o.tool_on(arrive + 2.0 + 1e-6)   # ... after the dwell (M3 too)
    t2 = plan.t_start[plan.block == 2][0]
    assert not o.tool_on(t2 + 1e-6) and not o.at(t2 + 1e-6).flood and not o.digital(t2 + 1e-6, 2)
    assert not o.tool_on(0.0) and o.at(0.0) == OutputState()


def test_grips_and_marks_follow_the_mounted_tool():
    c = compile_program("T4 M6\nG0 X0 Y0 Z10\nM3\nG1 Z0 F600\nM5\nT1 M6\nM3\nG1 Z10\n", IRB)
    assert c.ok, c.refusal
    o, t = c.outputs, c.report.plan.t_start
    assert o.grips(t[0] + 1e-6) is False and o.grips(t[1] + 1e-6) is True and o.marks(t[1] + 1e-6) is False
    assert o.marks(c.report.plan.duration) is True and o.grips(c.report.plan.duration) is False
    assert o.tools_mounted == (0, 4, 1)


def test_a_laser_under_m4_scales_with_speed_and_is_off_in_rapids():
    laser = TOOLS[3]
    st = OutputState(3, SpindleMode.CCW, 500.0)
    lv = tool_level(st, laser, speed=[0.0, 0.005, 0.01, 0.02, 0.3], feed=[0.01, 0.01, 0.01, 0.01, 0.0],
                    rapid=[False, False, False, False, True])
    np.testing.assert_allclose(lv, [0.0, 0.25, 0.5, 0.5, 0.0])
    m3 = tool_level(OutputState(3, SpindleMode.CW, 500.0), laser, [0.0, 0.3], [0.01, 0.0], [False, True])
    np.testing.assert_allclose(m3, [0.5, 0.0])                  # M3: constant power, still off in G0
    spindle = tool_level(OutputState(2, SpindleMode.CCW, 12000.0), TOOLS[2], [0.0], [0.01], [True])
    np.testing.assert_allclose(spindle, [0.5])                  # a spindle turns in rapids
    assert tool_level(OutputState(3), laser, [0.01], [0.01], [False]).tolist() == [0.0]


# ----- the corpus: each program runs clean and its logged path and outputs match it ----------------

def _near(path: np.ndarray, point) -> float:
    """Distance (mm) of ``point`` from the polyline through the logged points ``path`` (K, 3)."""
    a, b = path[:-1], path[1:]
    d = b - a
    p = np.asarray(point, float)
    u = np.clip(np.einsum("ij,ij->i", p - a, d) / np.maximum(np.einsum("ij,ij->i", d, d), 1e-300), 0.0, 1.0)
    return float(np.linalg.norm(p - (a + u[:, None] * d), axis=1).min())


def _off_path(q: np.ndarray, m, origin: np.ndarray) -> np.ndarray:
    """(K,) distance (mm) of points ``q`` (work coordinates) from the motion block ``m`` as programmed
    (a line, or a flat arc of constant radius: the corpus has no helix)."""
    a, b = np.array(m.start) * 1000.0 - origin, np.array(m.end) * 1000.0 - origin
    if m.centre is None:
        d = b - a
        u = np.clip((q - a) @ d / max(d @ d, 1e-300), 0.0, 1.0)
        return np.linalg.norm(q - (a + u[:, None] * d), axis=1)
    c = np.array(m.centre) * 1000.0 - origin
    i, j, n = m.plane
    return np.hypot(np.hypot(q[:, i] - c[i], q[:, j] - c[j]) - m.radius_start * 1000.0, q[:, n] - c[n])


CORPUS_RUNS = {
    # program: (robot, options, points (mm, work coordinates) the tool tip passes through)
    "cam_roughing.ngc": ("irb120", [], [(-14, -9, -1), (14, 9, -1), (8, 4, -1), (-14, 9, -2), (14, -9, -2)]),
    "laser_job.ngc": ("scara", ["--tool", "3"], [(-20, -10, 0), (0, 10, 0), (25, 10, 0), (5, 10, 0)]),
    "pen_plot.ngc": ("scara", ["--pen-servo", "--tool", "1"], [(20, -20, 0), (-20, 20, 0), (0, 10, 0)]),
    "pick_place.ngc": ("aubo_i5", [], [(-40, 0, 0), (40, 0, 0), (0, 0, 40)]),
}


@pytest.fixture(scope="module")
def corpus_logs(tmp_path_factory):
    out = {}
    for name, (robot, opts, _) in CORPUS_RUNS.items():
        log = tmp_path_factory.mktemp("corpus") / "run.csv"
        rc = main(["run", str(CORPUS / name), "--robot", robot, *opts, "--log", str(log), "--json"])
        out[name] = (rc, list(csv.DictReader(log.open())) if log.exists() else [])
    return out


@pytest.mark.parametrize("name", sorted(CORPUS_RUNS))
def test_corpus_program_is_clean_and_its_logged_path_matches_it(name, corpus_logs, capsys):
    robot, opts, points = CORPUS_RUNS[name]
    assert main(["check", str(CORPUS / name), "--robot", robot, *opts, "--strict"]) == 0
    rc, rows = corpus_logs[name]
    assert rc == 0 and rows
    spec = robots.get(robot)
    origin = np.array(spec.workcell.origin) * 1000.0
    tip = np.array([[float(r[k]) for k in ("x_mm", "y_mm", "z_mm")] for r in rows]) - origin
    cmd = np.array([[float(r[k]) for k in ("x_cmd_mm", "y_cmd_mm", "z_cmd_mm")] for r in rows]) - origin
    assert np.linalg.norm(tip - cmd, axis=1).max() < 0.01
    for p in points:                     # the corners written in the program (the path passes them at speed)
        assert _near(tip, p) < 0.05, (name, p)
    # every logged point lies on the move of its line as programmed, within 0.01 mm
    opt = {"tool": int(opts[opts.index("--tool") + 1]) if "--tool" in opts else 0, "pen_servo": "--pen-servo" in opts}
    c = compile_program((CORPUS / name).read_text(), spec, machine_for(spec, **opt))
    line = np.array([int(r["line"]) for r in rows])
    moves: dict[int, list] = {}
    for m in c.report.plan.motions:
        moves.setdefault(m.line, []).append(m)
    assert set(moves) <= set(line)
    for ln, ms in moves.items():
        q = tip[line == ln]
        off = np.min([_off_path(q, m, origin) for m in ms], axis=0)
        assert off.max() < 0.01, (name, ln, off.max())
        assert _near(tip, np.array(ms[-1].end) * 1000.0 - origin) < 0.05
    capsys.readouterr()


def _by_line(rows, column: str) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for r in rows:
        out.setdefault(int(r["line"]), set()).add(r[column])
    return out


def test_corpus_cam_roughing_outputs(corpus_logs):
    rows = corpus_logs["cam_roughing.ngc"][1]
    on, flood, tool = _by_line(rows, "tool_on"), _by_line(rows, "flood"), _by_line(rows, "tool")
    cutting = [int(r["line"]) for r in rows if r["tool_on"] == "1"]
    assert min(cutting) == 13 and max(cutting) == 32          # N45 … N140: the moves between M3 and M5
    for ln in (16, 17, 23, 27, 31):                            # cuts (N60 … N135)
        assert on[ln] == {"1"} and flood[ln] == {"1"} and tool[ln] == {"2"}
    assert {r["s"] for r in rows if r["tool_on"] == "1"} == {"12000"}
    assert rows[-1]["tool_on"] == "0" and rows[-1]["flood"] == "0"


def test_corpus_laser_is_off_in_travel_and_scaled_on_the_cuts(corpus_logs):
    rows = corpus_logs["laser_job.ngc"][1]
    level = {}
    for r in rows:
        level.setdefault(int(r["line"]), []).append(float(r["tool_level"]))
    for ln in (11, 15):                                        # G0 travel with the laser on (M4)
        assert max(level[ln]) == 0.0
    assert max(level[8]) == pytest.approx(0.8, abs=1e-3)       # G1 Y10 S800: S on the move's own line
    assert 0.0 < min(level[8]) < 0.8                           # dynamic power: less while it accelerates
    assert max(level[12]) == pytest.approx(0.4, abs=1e-3)      # S400 (s_max 1000)


def test_corpus_pen_is_down_only_on_the_drawing_moves(corpus_logs):
    rows = corpus_logs["pen_plot.ngc"][1]
    on = _by_line(rows, "tool_on")
    for ln in (11, 12, 13, 14, 15, 20):
        assert on[ln] == {"1"}, ln
    for ln in (8, 17, 18, 23):
        assert on[ln] == {"0"}, ln


def test_corpus_pick_and_place_switches_the_vacuum_with_the_moves(corpus_logs):
    rows = corpus_logs["pick_place.ngc"][1]
    dout = _by_line(rows, "dout")
    assert dout[10] == {"0"}              # M62 P1 waits for the next move: off through the dwell
    for ln in (11, 12, 13, 14, 16):
        assert dout[ln] == {"2"}, ln      # bit 1: the part is held from the lift to the place
    assert dout[17] == {"0"}              # M63 with the move away
    assert dout[19] == {"4"}              # M64 P2 at once, through its dwell
    assert rows[-1]["dout"] == "0" and {r["tool"] for r in rows} == {"4"}   # T4 M6 on line 5, at t = 0


def test_run_json_reports_the_tool_changes(tmp_path, capsys):
    prog = tmp_path / "p.ngc"
    prog.write_text("G0 X0 Y0 Z20\nT1 M6\nG0 Z20\nT2 M6\nG0 Z30\n")
    assert main(["run", str(prog), "--robot", "irb120", "--json", "--no-cell"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tool_changes"] == [2, 4]
