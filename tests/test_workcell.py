"""Workcells: the file format and its one-line errors, the default cell, the bodies in a world."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode import machine_for
from armtwin.controllers.kinematics import chain_of, fk
from armtwin.envs.sim import World
from armtwin.envs.workcell import mount_of, place_cell
from armtwin.robots.workcell import (BodyRole, CellError, ShapeKind, default_cell, end_effector_links,
                                     load_cell)

CELLS = Path(__file__).resolve().parents[1] / "examples" / "cells"


def _write(tmp_path, text, name="cell.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_the_example_cells_load_in_si():
    c = load_cell(CELLS / "irb120_cell.toml")
    assert [b.name for b in c.bodies] == ["table", "fixture", "post", "wall"]
    assert c.touch == pytest.approx(0.001) and np.array_equal(c.mount, np.eye(4))
    table = c.body("table")
    assert table.role is BodyRole.WORK and table.shape is ShapeKind.BOX
    assert np.allclose(table.size, [0.3, 0.3, 0.2]) and np.allclose(table.pose[:3, 3], [0.35, 0, 0.1])
    post = c.body("post")
    assert post.role is BodyRole.OBSTACLE and np.allclose(post.size, [0.02, 0.6])   # radius, height
    assert c.body("fixture").mesh == (CELLS / "fixture.obj").resolve()
    a = load_cell(CELLS / "aubo_i5_pedestal.toml")
    assert np.allclose(a.mount[:3, 3], [0, 0, 0.3])


@pytest.mark.parametrize("name", robots.names())
def test_the_default_table_top_is_the_programs_z0_under_the_default_origin(name):
    spec = robots.get(name)
    cell = default_cell(spec)
    (table,) = cell.bodies
    assert table.role is BodyRole.WORK
    origin_world = spec.report_frame.matrix @ np.append(machine_for(spec).origin, 1.0)
    top = table.pose[2, 3] + table.size[2] / 2
    assert top == pytest.approx(origin_world[2], abs=1e-12)
    assert np.allclose(table.pose[:2, 3], origin_world[:2])
    assert table.pose[2, 3] - table.size[2] / 2 == pytest.approx(0.0)       # it stands on the floor


@pytest.mark.parametrize("text, line, words", [
    ('name = "x"\ncolor = 3\n', 2, "color: unknown key"),
    ('[robot]\nxyz = [0, 0]\n', 2, "robot.xyz: 3 numbers"),
    ('[robot]\nrpy = [0, 0, 720]\n', 2, "within ±360"),
    ('[[body]]\nname = "a"\nshape = "cone"\nsize = [1, 2]\n', 3, "unknown shape 'cone'"),
    ('[[body]]\nname = "a"\nshape = "cylinder"\nsize = [40]\n', 4, "size [diameter, height]: 2 numbers"),
    ('[[body]]\nname = "a"\nshape = "box"\nsize = [40, 0, 1]\n', 4, "sizes must be more than 0"),
    ('[[body]]\nname = "a"\nshape = "box"\n', 1, "needs size = [x, y, z]"),
    ('[[body]]\nname = "a"\nshape = "box"\nsize = [1, 1, 1]\n\n[[body]]\nname = "a"\nshape = "sphere"\nsize = [2]\n',
     7, "the name is used already (line 2)"),
    ('[[body]]\nname = "a"\nshape = "box"\nsize = [1, 1, 1]\nrole = "target"\n', 5, "unknown body role"),
    ('[[body]]\nname = "m"\nshape = "mesh"\nfile = "nothere.stl"\n', 4, "no such file"),
    ('[[body]]\nname = "m"\nshape = "mesh"\nfile = "cell.toml"\n', 4, "an .stl or .obj file"),
    ('[[body]]\nname = "a"\nshape = "box"\nsize = [1, 1, 1]\ncolor = [1, 2, 0]\n', 5, "color: 3 or 4 numbers"),
    ('touch = -1\n', 1, "touch: a number from 0 to 100 mm"),
    ('[[body]\nname = 1\n', 1, "not valid TOML"),
    ('name = "a"\nname = "b"\n', 2, "not valid TOML"),
])
def test_a_bad_file_is_one_line_naming_the_file_the_line_and_why(tmp_path, text, line, words):
    p = _write(tmp_path, text)
    with pytest.raises(CellError) as e:
        load_cell(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:{line}: "), msg
    assert words in msg and "\n" not in msg


def test_end_effector_links_are_derived_from_the_geometry():
    assert end_effector_links(robots.get("irb120")) == ("link_6",)
    assert end_effector_links(robots.get("aubo_i5")) == ("wrist2_link", "wrist3_link")
    assert end_effector_links(robots.get("scara")) == ("link_3", "link_4")


def test_the_cell_is_in_the_world_where_the_file_says():
    cell = load_cell(CELLS / "irb120_cell.toml")
    with World() as w:
        pos, rot = mount_of(cell)
        r = w.add_robot(robots.get("irb120"), position=pos, orientation=rot)
        placed = place_cell(w, cell, r)
        assert set(placed.bodies) == {"table", "fixture", "post", "wall"}
        lo, hi = w.aabb(placed.bodies["table"])
        assert np.allclose(lo, [0.2, -0.15, 0.0], atol=2e-3) and np.allclose(hi, [0.5, 0.15, 0.2], atol=2e-3)
        lo, hi = w.aabb(placed.bodies["fixture"])          # the wedge turned by 90°: 40 mm along x, 60 along y
        assert hi[0] - lo[0] == pytest.approx(0.04, abs=3e-3) and hi[1] - lo[1] == pytest.approx(0.06, abs=3e-3)


def test_a_mounted_robot_reports_in_its_own_base_frame():
    cell = load_cell(CELLS / "aubo_i5_pedestal.toml")
    spec = robots.get("aubo_i5")
    with World() as w:
        pos, rot = mount_of(cell)
        r = w.add_robot(spec, position=pos, orientation=rot)
        assert np.allclose(r.flange_pose(), fk(chain_of(spec), spec.home), atol=1e-6)
        world_flange = r.world_T_report @ r.flange_pose()
        assert world_flange[2, 3] == pytest.approx(0.3 + 0.0235 + fk(chain_of(spec), spec.home)[2, 3], abs=1e-6)


def test_a_turned_mount_turns_the_robot_in_the_world():
    from armtwin.controllers.transforms import rot_z
    spec = robots.get("irb120")
    with World() as w:
        r = w.add_robot(spec, position=(1.0, 0.0, 0.0), orientation=rot_z(np.pi / 2))
        p = (r.world_T_report @ r.flange_pose())[:3, 3]
        home = fk(chain_of(spec), spec.home)[:3, 3]
        assert np.allclose(p, [1.0 - home[1], home[0], home[2]], atol=1e-6)
        with pytest.raises(ValueError, match="rotation"):
            w.add_robot(spec, orientation=np.diag([1.0, 1.0, -1.0]))


@pytest.mark.parametrize("mode", ["kinematic", "articulation"])
def test_a_run_in_a_cell_draws_on_its_table_without_being_pushed_off_the_path(mode):
    """The pen strokes of an example touch the table's top (the program's Z0); the end effector's
    touch is ideal, so the articulation model follows as closely as without the cell."""
    from armtwin.controllers.gcode import compile_program
    from armtwin.envs.runner import RunConfig, run_program
    spec = robots.get("irb120")
    text = "G21 G90\nG0 X0 Y0 Z3\nG1 Z0 F500\nG1 X20 F1000\nG1 Y10\nG0 Z20\n"
    prog = compile_program(text, spec)
    cfg = RunConfig(mode=mode)
    bare = run_program(prog, spec, cfg)
    placed = run_program(prog, spec, cfg, cell=load_cell(CELLS / "irb120_cell.toml"))
    assert placed.stable and placed.samples == bare.samples
    assert placed.max_error_mm <= bare.max_error_mm + 0.002


def test_run_with_a_cell_reports_it(tmp_path, capsys):
    import json

    from armtwin.scripts.cli import main
    p = tmp_path / "p.ngc"
    p.write_text("G21 G90\nG0 X0 Y0 Z3\nG1 Z0 F500\nG1 X10 F1000\nG0 Z20\n")
    assert main(["run", str(p), "--robot", "aubo_i5", "--cell", str(CELLS / "aubo_i5_pedestal.toml"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ran"] and out["cell"]["bodies"] == ["pedestal", "table", "fence"] and out["cell"]["contacts"] == []


def test_an_obstacle_in_the_physics_world_blocks_a_dynamic_arm():
    """Run (without the collision preflight) a plunge onto an obstacle block standing 10 mm above
    the program's Z0: the articulation model's flange is held up by it."""
    from armtwin.controllers.gcode import compile_program
    from armtwin.envs.runner import RunConfig, run_program
    from armtwin.robots.workcell import Cell, CellBody
    spec = robots.get("irb120")
    T = np.eye(4)
    T[:3, 3] = (0.35, 0.0, 0.205)                  # a 30 mm cube, its top at z = 220 mm (Z20 of the program)
    cell = Cell("block", bodies=(CellBody("block", ShapeKind.BOX, T, (0.03, 0.03, 0.03)),))
    prog = compile_program("G21 G90\nG0 X0 Y0 Z40\nG1 Z10 F300\nG4 P0.3\nG0 Z40\n", spec)
    blocked = run_program(prog, spec, RunConfig(mode="articulation"), cell=cell)
    free = run_program(prog, spec, RunConfig(mode="articulation"))
    assert free.max_error_mm < 0.05
    assert blocked.max_error_mm > 5.0               # held about 10 mm above where it was sent
