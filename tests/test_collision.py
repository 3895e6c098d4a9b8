"""The collision preflight: programs against a workcell and the robot against itself."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode.errors import ErrorCode
from armtwin.controllers.gcode.preflight import preflight
from armtwin.envs.collision import (CONTACT_EPS, REFINE_TOLERANCE, CollisionModel, _allowed, allowed_pairs,
                                    collision_pass)
from armtwin.robots.workcell import default_cell, end_effector_links, load_cell
from armtwin.scripts.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.ngc"))


def _check(spec, text, cell):
    contacts: list = []
    with CollisionModel(spec, cell) as model:
        rep = preflight(text, spec, passes=(collision_pass(model, contacts),))
    return rep, contacts


def _assert_touching(model, c) -> None:
    """The pair of a reported first contact touches at its joints (to the engine's precision, which
    varies by some µm with the query's distance threshold: the first contact is a grazing one)."""
    p = model.pair_index(c.link, c.other)
    assert model.distance(p, c.q, 0.01) - model.pairs[p].limit < REFINE_TOLERANCE
    assert c.depth > CONTACT_EPS


def _plunge(dz: float) -> str:
    """Down through the program's Z0 (the default table's top) by 20 mm, along X, and up."""
    return f"G21 G90\nG0 X0 Y0 Z{10 + dz:g}\nG1 Z{-20 + dz:g} F600\nG1 X30 F600\nG0 Z{50 + dz:g}\n"


@pytest.mark.parametrize("name", robots.names())
def test_driving_the_tool_through_the_table_is_refused_on_its_line_and_50_mm_higher_passes(name):
    spec = robots.get(name)
    rep, contacts = _check(spec, _plunge(0), default_cell(spec))
    faults = [f for f in rep.faults if f.code is ErrorCode.COLLISION]
    assert [f.line for f in faults] == [3], rep.faults
    assert not rep.clean()
    ee = set(end_effector_links(spec))
    assert {c.link for c in contacts} <= ee and {c.other for c in contacts} == {"table"}
    for c in contacts:
        assert c.line == 3 and c.depth == pytest.approx(0.020, abs=1e-3)   # 20 mm into the table
        assert c.allowed == pytest.approx(0.001)
    assert "table" in faults[0].message and "20.0 mm deep" in faults[0].message
    rep, contacts = _check(spec, _plunge(50), default_cell(spec))
    assert rep.clean() and not contacts, rep.faults


@pytest.mark.parametrize("name", robots.names())
def test_pressing_into_the_work_less_than_touch_is_allowed_and_deeper_is_not(name):
    spec = robots.get(name)
    ok = "G21 G90\nG0 X0 Y0 Z5\nG1 Z-0.8 F300\nG1 X20 F600\nG0 Z20\n"
    deep = ok.replace("Z-0.8", "Z-1.5")
    assert _check(spec, ok, default_cell(spec))[0].clean()
    rep, contacts = _check(spec, deep, default_cell(spec))
    assert [f.line for f in rep.faults] == [3]
    assert max(c.depth for c in contacts) == pytest.approx(0.0015, abs=1e-4)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_passes_in_its_robots_default_cell(path):
    name = next(n for n in robots.names() if path.stem.startswith(n))
    spec = robots.get(name)
    rep, contacts = _check(spec, path.read_bytes(), default_cell(spec))
    assert rep.clean() and not contacts, [str(f) for f in rep.faults]


def test_the_irb120_examples_pass_in_the_example_cell():
    cell = load_cell(ROOT / "examples" / "cells" / "irb120_cell.toml")
    spec = robots.get("irb120")
    for path in (p for p in EXAMPLES if p.stem.startswith("irb120")):
        rep, contacts = _check(spec, path.read_bytes(), cell)
        assert rep.clean() and not contacts, (path.name, [str(f) for f in rep.faults])


def test_an_obstacle_in_the_way_is_named_with_its_line():
    cell = load_cell(ROOT / "examples" / "cells" / "irb120_cell.toml")
    spec = robots.get("irb120")
    # the fixture (a wedge) stands at (430, 100) mm on the table: program X80 Y100 from the origin (350, 0)
    text = "G21 G90\nG0 X0 Y0 Z60\nG0 X80 Y100\nG1 Z10 F600\nG0 Z60\n"
    rep, contacts = _check(spec, text, cell)
    assert [(f.line, f.code) for f in rep.faults] == [(4, ErrorCode.COLLISION)], rep.faults
    assert {(c.link, c.other) for c in contacts} == {("link_6", "fixture")}


@pytest.mark.parametrize("name, move, pairs", [
    ("irb120", "G1 X-250 F3000", {("link_1", "link_4"), ("link_1", "link_5")}),
    ("aubo_i5", "G1 X-400 Y120 Z-100 F3000", {("upper_arm_link", "wrist2_link")}),
])
def test_a_path_that_folds_the_arm_onto_itself_is_refused_with_the_pair(name, move, pairs):
    spec = robots.get(name)
    rep, contacts = _check(spec, f"G21 G90\nG0 X0 Y0 Z0\n{move}\n", None)
    selfs = [f for f in rep.faults if f.code is ErrorCode.SELF_COLLISION]
    assert [f.line for f in selfs] == [3]
    found = {(c.link, c.other) for c in contacts if c.self_collision}
    assert pairs <= found
    with CollisionModel(spec, None) as model:       # each reported contact is real (a direct query)
        for c in contacts:
            _assert_touching(model, c)


def test_the_scara_cannot_fold_onto_itself():
    """Its arms are stacked (arm 2 above arm 1) and the quill hangs 164 mm or more from the base axis
    at J2 = ±150°: no self pair the matrix leaves touches anywhere in its ranges."""
    spec = robots.get("scara")
    rng = np.random.default_rng(3)
    Q = rng.uniform(spec.lower, spec.upper, size=(3000, spec.dof))
    with CollisionModel(spec, None) as model:
        assert model.pairs, "the SCARA has pairs to check"
        bounds = model.lower_bounds(model.link_poses(Q))
        for p in range(len(model.pairs)):
            for k in np.flatnonzero(bounds[:, p] < -CONTACT_EPS):
                assert model.distance(p, Q[k], 0.01) >= -CONTACT_EPS, (model.pair_names(p), Q[k])


@pytest.mark.parametrize("name", robots.names())
def test_the_allowed_collision_matrix_is_generated_the_same_every_time(name):
    spec = robots.get(name)
    first = allowed_pairs(spec)
    _allowed.cache_clear()
    assert allowed_pairs(spec) == first
    names = [lk.name for lk in spec.links]
    for a, b in zip(names[:-1], names[1:]):            # neighbours never count
        assert (a, b) in first
    with CollisionModel(spec, None) as model:          # and the model checks every other pair
        checked = {model.pair_names(i) for i in range(len(model.pairs)) if model.pairs[i].self_pair}
        every = {(a, b) for i, a in enumerate(names) for b in names[i + 1:]}
        assert checked == every - first


@pytest.mark.parametrize("seed", range(12))
def test_the_check_never_misses_a_contact_that_ten_times_denser_sampling_finds(seed):
    """Random joint paths through the example cell: every pair a brute-force check of ten times as
    many samples finds in contact (deeper than the refinement can hide) the check finds too, no later
    than the dense sampling does, and every contact it reports is real."""
    spec = robots.get("irb120")
    cell = load_cell(ROOT / "examples" / "cells" / "irb120_cell.toml")
    rng = np.random.default_rng(seed)
    lo, hi = spec.lower * 0.8, spec.upper * 0.8
    _assert_as_dense(spec, cell, rng.uniform(lo, hi, size=(7, spec.dof)))


def _joints_on_the_table(spec, cell) -> np.ndarray:
    """The preflight's joint samples of a short stroke drawn on the cell's work surface (Z0)."""
    from armtwin.controllers.gcode.preflight import CheckPass
    got = []
    preflight("G21 G90\nG0 X-20 Y0 Z0\nG1 X20 F600\n", spec,
              passes=(CheckPass("grab", lambda path, findings: got.append(path.track.q.copy()), ()),))
    return got[0]


@pytest.mark.parametrize("name", robots.names())
@pytest.mark.parametrize("seed", range(4))
def test_sliding_on_the_work_surface_never_hides_a_dip_between_samples(name, seed):
    """A tool on the table's top wobbled by small random joint changes — the intervals the face-plane
    bound clears without bisecting: every contact ten times denser sampling finds the check finds."""
    spec = robots.get(name)
    cell = default_cell(spec)
    q = _joints_on_the_table(spec, cell)
    rng = np.random.default_rng(seed)
    Q = q[:: max(1, len(q) // 8)] + rng.normal(0.0, 0.004, size=(len(q[:: max(1, len(q) // 8)]), spec.dof))
    _assert_as_dense(spec, cell, Q)


def _assert_as_dense(spec, cell, Q: np.ndarray) -> None:
    t = np.arange(len(Q), dtype=float)
    with CollisionModel(spec, cell) as model:
        contacts = model.check(Q, t, np.arange(1, len(Q) + 1))
        got = {(c.link, c.other): c for c in contacts}
        for c in contacts:
            _assert_touching(model, c)
        dense = np.concatenate([Q[i] + np.linspace(0, 1, 10, endpoint=False)[:, None] * (Q[i + 1] - Q[i])
                                for i in range(len(Q) - 1)] + [Q[-1:]])
        td = np.concatenate([t[i] + np.linspace(0, 1, 10, endpoint=False) for i in range(len(Q) - 1)] + [t[-1:]])
        first: dict = {}
        for k, q in enumerate(dense):
            for a, b, depth in model.contacts_at(q):
                if depth > REFINE_TOLERANCE and (a, b) not in first:
                    first[(a, b)] = td[k]
        for pair, when in first.items():
            assert pair in got, (pair, when, sorted(got))
            assert got[pair].time <= when + 1e-9


def test_check_and_run_take_a_cell_and_refuse_a_collision(tmp_path, capsys):
    prog = tmp_path / "plunge.ngc"
    prog.write_text(_plunge(0))
    assert main(["check", str(prog), "--robot", "irb120", "--cell", "default", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [f["code"] for f in out["faults"]] == [110] and out["faults"][0]["line"] == 3
    assert out["cell"]["contacts"][0]["other"] == "table" and out["cell"]["contacts"][0]["link"] == "link_6"
    assert main(["run", str(prog), "--robot", "irb120", "--cell", "default"]) == 1
    assert "refused" in capsys.readouterr().err
    assert main(["check", str(prog), "--robot", "irb120", "--no-cell"]) == 0   # no cell: nothing to hit
    capsys.readouterr()
    # without --cell, check and run use the built-in cell: the same refusal
    assert main(["check", str(prog), "--robot", "irb120", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["cell"]["contacts"][0]["other"] == "table"
    assert main(["run", str(prog), "--robot", "irb120"]) == 1
    assert "refused" in capsys.readouterr().err
    assert main(["check", str(prog), "--robot", "irb120", "--cell", "default", "--no-cell"]) == 2
    assert "--cell default and --no-cell: choose one" in capsys.readouterr().err
    high = tmp_path / "high.ngc"
    high.write_text(_plunge(50))
    assert main(["check", str(high), "--robot", "irb120", "--cell", str(ROOT / "examples/cells/irb120_cell.toml")]) == 0


@pytest.mark.parametrize("cell, words", [
    ("nope.toml", "--cell nope.toml: no such file"),
    ("bad.toml", "--cell {tmp}/bad.toml:2: body body1: size [x, y, z]: 3 numbers"),
])
def test_a_bad_cell_is_one_line_and_exit_2(tmp_path, capsys, cell, words):
    (tmp_path / "bad.toml").write_text('[[body]]\nsize = [1, 2]\nshape = "box"\n')
    prog = tmp_path / "p.ngc"
    prog.write_text(_plunge(50))
    arg = cell if cell == "nope.toml" else str(tmp_path / cell)
    assert main(["check", str(prog), "--robot", "irb120", "--cell", arg]) == 2
    err = capsys.readouterr().err.strip()
    assert words.format(tmp=tmp_path) in err and "\n" not in err


def test_bench_collision_measures_the_pass_against_the_plain_query_loop(capsys):
    assert main(["bench", "collision", "--lines", "200", "--repeat", "1", "--brute", "50", "--ik", "20", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["clean"] and out["contacts"] == [] and out["samples"] > 50 and out["pairs"] > 0
    assert out["collision_pass_s"] > 0 and out["brute_samples"] == 50 and out["brute_checks_per_s"] > 0
    assert out["ik_poses"] == 20 and out["ik_solutions"] >= 20 and 0 <= out["ik_in_collision"] <= out["ik_solutions"]
    assert out["ik_filtered_us"] > 0 and out["ik_filter_calls_per_pose"] >= 1 and out["ik_check_ms"] > 0
    assert main(["bench", "check", "--lines", "5"]) == 2             # the alias; bad input is exit 2


def test_the_check_gives_the_same_contacts_whatever_its_chunk_size(monkeypatch):
    import armtwin.envs.collision as collision
    spec = robots.get("irb120")
    cell = load_cell(ROOT / "examples" / "cells" / "irb120_cell.toml")
    rng = np.random.default_rng(5)
    Q = rng.uniform(spec.lower * 0.8, spec.upper * 0.8, size=(40, spec.dof))
    with CollisionModel(spec, cell) as model:
        whole = model.check(Q, np.arange(40.0), np.arange(1, 41))
        monkeypatch.setattr(collision, "CHUNK", 7)
        chunked = model.check(Q, np.arange(40.0), np.arange(1, 41))
    assert whole, "the random path touches something"
    assert [(c.link, c.other, c.line) for c in chunked] == [(c.link, c.other, c.line) for c in whole]
    assert [c.time for c in chunked] == pytest.approx([c.time for c in whole])


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_the_commanded_joints_stay_close_to_the_checked_path(path):
    """The check follows the joints linearly between the preflight's IK samples; the control loop
    commands IK at every control period on the same tool path. Every link frame of the commanded
    arm stays within 0.6 mm of where the checked path has it, and a first-order bound of how far any
    point of a link is from it (|dq| times its distance from each joint's axis) stays under 1.5 mm
    (at most 1.3 mm, on the word programs' 5 mm arcs)."""
    from armtwin.controllers.gcode import compile_program
    name = next(n for n in robots.names() if path.stem.startswith(n))
    spec = robots.get(name)
    c = compile_program(path.read_bytes(), spec)
    gs, q = c.report.samples, c.report.q
    ps, qc, _ = c.trajectory.arrays()
    qi = np.column_stack([np.interp(ps.s, gs.s, q[:, j]) for j in range(spec.dof)])   # the checked path there
    with CollisionModel(spec, None) as model:
        moved = model.reach(model.link_poses(qi))            # any point's distance from each joint's axis
        gap = np.einsum("kj,kjl->kl", np.abs(qc - qi), moved + 0.0)
        assert gap.max() < 0.0015                           # a first-order bound of the gap …
        Ci = model.link_poses(qi)
        Cc = model.link_poses(qc)
        for lk in range(1, len(model.link_names)):          # … and the frames themselves
            assert np.abs(Ci[:, lk, :3, 3] - Cc[:, lk, :3, 3]).max() < 0.0006


def test_clearance_warns_of_near_misses_and_strict_refuses_them(tmp_path, capsys):
    cell = str(ROOT / "examples" / "cells" / "irb120_cell.toml")
    prog = tmp_path / "near.ngc"        # down to 2 mm above the fixture's top edge (Z30), beside it
    prog.write_text("G21 G90\nG0 X0 Y0 Z60\nG0 X80 Y100\nG1 Z32 F600\nG0 Z60\n")
    assert main(["check", str(prog), "--robot", "irb120", "--cell", cell]) == 0
    capsys.readouterr()
    assert main(["check", str(prog), "--robot", "irb120", "--cell", cell, "--clearance", "5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(f["code"], f["line"], f["severity"]) for f in out["faults"]] == [(112, 4, "warning")]
    (near,) = out["cell"]["near_misses"]
    assert (near["link"], near["other"]) == ("link_6", "fixture") and 0 < near["distance_mm"] < 5
    assert main(["check", str(prog), "--robot", "irb120", "--cell", cell, "--clearance", "5", "--strict"]) == 1
    capsys.readouterr()
    prog.write_text("G21 G90\nG0 X0 Y0 Z60\nG0 X80 Y100\nG1 Z25 F600\nG0 Z60\n")   # into it: an error, not also a warning
    assert main(["check", str(prog), "--robot", "irb120", "--cell", cell, "--clearance", "5", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [f["code"] for f in out["faults"]] == [110] and out["cell"]["near_misses"] == []
    assert main(["check", str(prog), "--robot", "irb120", "--clearance", "5", "--no-cell"]) == 2
    assert main(["check", str(prog), "--robot", "irb120", "--cell", cell, "--clearance", "0"]) == 2


def test_a_tool_on_the_flange_is_part_of_the_robot_for_the_check():
    """The pen (100 mm) with the flange 50 mm above the table's top: the bare flange is clear, the
    tool is 50 mm into the table; it is the end effector, so only what passes the touch depth counts."""
    from armtwin.controllers.gcode import compile_program
    from armtwin.controllers.tools import default_tools
    spec = robots.get("irb120")
    c = compile_program("G21 G90\nG0 X0 Y0 Z150\nG1 Z50 F600\n", spec)
    rep = c.report
    pen = default_tools()[1]
    with CollisionModel(spec, default_cell(spec)) as bare:
        assert bare.check(rep.q, rep.samples.t, rep.samples.line) == []
    with CollisionModel(spec, default_cell(spec), tool=pen) as tooled:
        assert "tool" in tooled.link_names and ("link_6", "tool") in tooled.allowed
        (hit,) = tooled.check(rep.q, rep.samples.t, rep.samples.line)
        assert (hit.link, hit.other, hit.line) == ("tool", "table", 3)
        assert hit.depth == pytest.approx(0.05, abs=1e-3) and hit.allowed == pytest.approx(0.001)


@pytest.mark.parametrize("name", robots.names())
def test_the_bend_bound_bounds_every_points_acceleration(name):
    """The face-plane bound rests on |p''| ≤ M (CollisionModel._bend) for every point of a link while
    the joints move linearly: finite differences of the links' shape points along random intervals,
    large and small, never exceed it."""
    from armtwin.controllers.tools import default_tools
    spec = robots.get(name)
    tool = default_tools()[2]                                       # the spindle: a tool link too
    rng = np.random.default_rng(7)
    with CollisionModel(spec, default_cell(spec), tool=tool) as model:
        h = 1e-3
        s = np.arange(0.0, 1.0 + h / 2, h)
        worst = 0.0
        for _ in range(40):
            q0 = rng.uniform(spec.lower, spec.upper)
            dq = rng.normal(0.0, rng.choice([0.01, 0.1, 1.0]), spec.dof)
            poses = model.link_poses(q0 + s[:, None] * dq)
            for pc in model._pieces:
                ends = [pc.center + sign * pc.half * pc.axis for sign in (-1, 1)]
                for point in ends:
                    p = np.einsum("kij,j->ki", poses[:, pc.link, :3, :3], point) + poses[:, pc.link, :3, 3]
                    acc = np.linalg.norm(p[2:] - 2 * p[1:-1] + p[:-2], axis=1) / h ** 2
                    bound = model._bend(dq[None], pc.link)[0]
                    assert acc.max() <= bound * (1 + 1e-3) + 1e-9, (pc.link, acc.max(), bound)
                    worst = max(worst, acc.max() / max(bound, 1e-12))
        assert worst > 0.05          # and the bound is not vacuous
