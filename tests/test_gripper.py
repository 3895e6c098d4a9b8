"""The vacuum gripper in physics: it holds what its cup touches when on, drops what it cannot hold."""

from __future__ import annotations

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.tools import default_tools
from armtwin.envs.gripper import GripKind, VacuumGripper
from armtwin.envs.sim import World
from armtwin.envs.workcell import place_cell
from armtwin.robots.workcell import Cell, CellBody, CellError, ShapeKind, load_cell

SPEC = robots.get("irb120")
VACUUM = default_tools()[4]


def _setup(mode: str, mass: float, gap: float = 0.0005):
    """The IRB120 with the vacuum cup at home and a 40 mm cube just under the cup."""
    w = World()
    r = w.add_robot(SPEC, mode, tool=VACUUM)
    tcp = r.world_T_report @ r.tcp_pose()
    T = np.eye(4)
    T[:3, 3] = tcp[:3, 3] - [0.0, 0.0, 0.02 + gap]
    placed = place_cell(w, Cell("c", bodies=(CellBody("part", ShapeKind.BOX, T, (0.04, 0.04, 0.04), mass=mass),)), r)
    return w, r, placed.bodies["part"], VacuumGripper(w, r, placed.bodies)


def _swing(w, r, g, steps=250):
    """Turn J1 by 0.5 rad and J2 by -0.3 rad in 0.6 s, suction on; the events it caused."""
    events = []
    for k in range(steps):
        q = SPEC.home.copy()
        q[0] += 0.5 * min(1.0, k / 150)
        q[1] -= 0.3 * min(1.0, k / 150)
        r.command(q)
        w.step(1)
        ev = g.update(True)
        if ev is not None:
            events.append(ev)
    return events


@pytest.mark.parametrize("mode", ["kinematic", "articulation"])
def test_a_light_part_is_carried_and_falls_when_released(mode):
    w, r, part, g = _setup(mode, 0.2)
    with w:
        start = np.linalg.inv(r.world_T_report @ r.tcp_pose()) @ w.body_pose(part)
        ev = g.update(True)
        assert ev is not None and ev.kind is GripKind.GRIP and ev.part == "part" and g.held == "part"
        assert _swing(w, r, g) == []
        now = np.linalg.inv(r.world_T_report @ r.tcp_pose()) @ w.body_pose(part)
        assert np.linalg.norm(now[:3, 3] - start[:3, 3]) < (1e-4 if mode == "kinematic" else 3e-3)
        height = w.body_pose(part)[2, 3]
        assert height > 0.4                                  # up with the tool, not on the floor
        assert g.update(False).kind is GripKind.RELEASE and g.held is None
        for _ in range(300):
            w.step(1)
        assert w.body_pose(part)[2, 3] == pytest.approx(0.02, abs=2e-3)   # on the floor


def test_a_part_too_heavy_for_the_cup_drops_in_a_dynamic_model_and_the_gripper_says_so():
    w, r, part, g = _setup("articulation", 20.0)
    with w:
        assert g.update(True).kind is GripKind.GRIP
        events = _swing(w, r, g)
        assert [e.kind for e in events] == [GripKind.DROP] and g.held is None
        assert g.events[-1] is events[0]


def test_nothing_within_reach_is_not_gripped_and_only_a_vacuum_tool_grips():
    w, r, part, g = _setup("kinematic", 0.2, gap=0.01)       # 10 mm under the cup
    with w:
        assert g.update(True) is None and g.held is None
        bare = w.add_robot(SPEC, position=(1.0, 0.0, 0.0))
        with pytest.raises(ValueError, match="vacuum tool"):
            VacuumGripper(w, bare, {"part": part})
        with pytest.raises(ValueError, match="max_force"):
            VacuumGripper(w, r, {"part": part}, max_force=-1.0)


def test_a_cell_file_gives_workpieces_a_mass(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[[body]]\nname = "box"\nshape = "box"\nsize = [40, 40, 40]\nmass = 0.25\nfriction = 0.5\n')
    b = load_cell(p).body("box")
    assert b.mass == 0.25 and b.friction == 0.5
    p.write_text('[[body]]\nname = "box"\nshape = "box"\nsize = [40, 40, 40]\nmass = -1\n')
    with pytest.raises(CellError, match=r"c.toml:5: body box: mass: a number from 0 to 100 kg"):
        load_cell(p)
