"""Tool tables: TCP math, the built-in table, and files refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from armtwin.controllers.tools import ToolKind, ToolTableError, default_tools, load_tools
from armtwin.controllers.transforms import rpy_to_matrix


def _write(tmp_path, text):
    p = tmp_path / "tools.toml"
    p.write_text(text)
    return p


def test_the_built_in_table_has_the_flange_and_one_tool_of_each_kind():
    t = default_tools()
    assert t[0].kind is ToolKind.NONE and np.array_equal(t[0].tcp, np.eye(4)) and t[0].mass == 0
    assert {tool.kind for tool in t.values()} == set(ToolKind)
    assert t[1].kind.marks and t[4].kind.grips and not t[2].kind.marks
    assert t[2].length == pytest.approx(0.12) and t[2].s_max == 24000


def test_a_file_is_read_in_si_with_the_orientation_of_the_tcp(tmp_path):
    p = _write(tmp_path, """
[tool.7]
name = "angled laser"
kind = "laser"
tcp = [10, 0, 150]
rpy = [0, 90, 0]
mass = 0.5
com = [0, 0, 60]
s_max = 1000
width = 0.2
""")
    t = load_tools(p)
    assert set(t) == {0, 7} and t.source == str(p)
    tool = t[7]
    assert tool.kind is ToolKind.LASER and tool.mass == 0.5 and tool.width == pytest.approx(0.0002)
    assert np.allclose(tool.offset, [0.01, 0, 0.15]) and np.allclose(tool.com, [0, 0, 0.06])
    assert np.allclose(tool.tcp[:3, :3], rpy_to_matrix(np.radians([0, 90, 0])))


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.lists(st.floats(-0.3, 0.3), min_size=3, max_size=3), st.lists(st.floats(-180, 180), min_size=3, max_size=3),
       st.lists(st.floats(-1, 1), min_size=3, max_size=3), st.lists(st.floats(-180, 180), min_size=3, max_size=3))
def test_flange_of_and_tcp_of_are_inverse(xyz, rpy, p, r):
    from armtwin.controllers.tools import Tool
    tcp = np.eye(4)
    tcp[:3, :3], tcp[:3, 3] = rpy_to_matrix(np.radians(rpy)), xyz
    tool = Tool(1, "t", "pen", tcp)
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = rpy_to_matrix(np.radians(r)), p
    assert np.allclose(tool.tcp_of(tool.flange_of(T)), T, atol=1e-12)
    flange = tool.flange_of(T)
    assert np.allclose(flange[:3, 3] + flange[:3, :3] @ tcp[:3, 3], T[:3, 3], atol=1e-12)   # the tip is where asked
    batch = np.stack([T, T])
    assert np.allclose(tool.flange_of(batch), np.stack([flange, flange]))


@pytest.mark.parametrize("text, words", [
    ("[tool.1]\nkind = 'drill'\n", "tool.1.kind: unknown tool kind 'drill'"),
    ("[tool.1]\ntcp = [0, 0]\n", "tool.1.tcp: three numbers"),
    ("[tool.1]\ntcp = [0, 0, 1e9]\n", "tool.1.tcp: numbers must be finite and within ±2000"),
    ("[tool.1]\ntcp = [0, 0, nan]\n", "tool.1.tcp: numbers must be finite"),
    ("[tool.1]\nmass = -1\n", "tool.1.mass: a number from 0 to 50 kg"),
    ("[tool.1]\nmass = true\n", "tool.1.mass"),
    ("[tool.1]\ncolour = 'red'\n", "tool.1.colour: unknown key"),
    ("[tool.x]\n", "tool.x: a tool number is a whole number"),
    ("[tool.99999]\n", "tool.99999: tool numbers go from 0 to 9999"),
    ("[tools.1]\n", "tools: unknown key"),
    ("x = \n", "not valid TOML"),
    ("", "no [tool.N] table"),
])
def test_a_bad_tool_table_is_named_in_one_line(tmp_path, text, words):
    p = _write(tmp_path, text)
    with pytest.raises(ToolTableError) as e:
        load_tools(p)
    assert words in str(e.value) and str(p) in str(e.value) and "\n" not in str(e.value)


# ----- a tool on the simulated flange ------------------------------------------------------------

def _joint_axes_world(robot):
    import pybullet as p
    out = []
    for j in robot.joints:
        ls = p.getLinkState(robot.body, j, computeForwardKinematics=True, physicsClientId=robot.world.client)
        info = p.getJointInfo(robot.body, j, physicsClientId=robot.world.client)
        from armtwin.controllers.transforms import quat_to_matrix
        R = quat_to_matrix(ls[5])
        out.append((np.asarray(ls[4]), R @ np.asarray(info[13])))     # link frame = joint frame (URDF)
    return out


@pytest.mark.parametrize("number", [1, 2, 5])
def test_a_tool_on_the_flange_puts_its_tcp_where_the_table_says_and_its_weight_at_its_centre(number):
    from armtwin import robots
    from armtwin.envs.sim import World
    spec = robots.get("irb120")
    tool = default_tools()[number]
    q = np.radians([30, 20, -10, 40, 60, -20])
    with World() as w:
        bare = w.add_robot(spec, "articulation", q0=q)
        tooled = w.add_robot(spec, "articulation", q0=q, tool=tool, position=(0, 2.0, 0))
        F = tooled.flange_pose()
        assert np.allclose(tooled.tcp_pose(), F @ tool.tcp, atol=1e-6)
        assert np.allclose(F, bare.flange_pose(), atol=1e-9)
        extra = tooled.gravity_torque(q) - bare.gravity_torque(q)
        # what the tool's weight does about each joint axis (world frame of the tooled robot)
        W = tooled.world_T_report
        com = (W @ F @ np.r_[tool.com, 1.0])[:3]
        force = np.array([0, 0, -9.81 * tool.mass])
        want = [np.cross(axis, com - origin) @ force for origin, axis in _joint_axes_world(tooled)]
        assert np.allclose(extra, -np.array(want), atol=2e-3 * max(1.0, np.abs(want).max()))


def test_the_tooled_description_is_checked_and_keeps_the_robot_unchanged(tmp_path):
    from armtwin import robots
    from armtwin.robots.tooling import urdf_with_tool
    from armtwin.robots.urdfcheck import check_urdf
    spec = robots.get("aubo_i5")
    for tool in default_tools().values():
        text = urdf_with_tool(spec.urdf_path, tool)
        p = tmp_path / f"t{tool.number}.urdf"
        p.write_text(text)
        check_urdf(p, zip(spec.joint_names, (t.value for t in spec.joint_types)))
        assert text.count("<link ") == spec.urdf_path.read_text().count("<link ") + (1 if tool.number == 0 else 2)
