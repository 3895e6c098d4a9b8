"""Robot data and URDF files: registry, limits from docs/ROBOTS.md, valid inertials, independent parser."""

from __future__ import annotations

import numpy as np
import pytest
import yourdfpy

from armtwin import robots
from armtwin.robots import urdfgen

ALL = robots.names()


def test_registry_lists_the_three_robots_and_rejects_unknown():
    assert set(ALL) == {"scara", "irb120", "aubo_i5"}
    assert robots.get("IRB120") is robots.get("irb120")
    with pytest.raises(robots.UnknownRobotError, match="known robots: scara, irb120, aubo_i5"):
        robots.get("ur5")


def test_spec_is_frozen():
    s = robots.get("irb120")
    with pytest.raises(Exception):
        s.payload = 10  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.named_poses["x"] = (0,) * 6  # type: ignore[index]


@pytest.mark.parametrize("name", ALL)
def test_committed_urdf_is_what_the_generator_writes(name):
    spec = robots.get(name)
    assert spec.urdf_path.read_text() == urdfgen.urdf_text(spec), "run: python -m armtwin.robots.urdfgen"


def _deg(v):
    return np.round(np.degrees(v), 6)


def test_spec_limits_match_spec_md():
    irb = robots.get("irb120")
    assert _deg(irb.lower).tolist() == [-165, -110, -110, -160, -120, -400]
    assert _deg(irb.upper).tolist() == [165, 110, 70, 160, 120, 400]
    assert _deg(irb.max_velocity).tolist() == [250, 250, 250, 320, 320, 420]
    assert [l.mass for l in irb.links] == [6.215, 3.067, 3.909, 2.944, 1.328, 0.546, 0.137]
    aubo = robots.get("aubo_i5")
    assert _deg(aubo.upper).tolist() == [175] * 6
    assert aubo.max_effort.tolist() == [133, 133, 133, 13.5, 13.5, 13.5]
    assert aubo.max_velocity.tolist() == pytest.approx([2.5964] * 3 + [3.1105] * 3, abs=1e-12)  # AUBO's rad/s
    # AUBO's published masses; docs/ROBOTS.md rounds them to 1.54, 4.85, 10.84, 2.85, 1.63, 1.63, 0.20 (≈ 23.5)
    assert [l.mass for l in aubo.links] == [1.53902, 4.848581, 10.836261, 2.849168, 1.628022, 1.628022, 0.1978]
    assert sum(l.mass for l in aubo.links) == pytest.approx(23.5, abs=0.05)
    scara = robots.get("scara")
    assert _deg(scara.upper[[0, 1, 3]]).tolist() == [132, 150, 360]
    assert (scara.lower[2], scara.upper[2]) == (0.0, 0.2)
    assert sum(l.mass for l in scara.links) == pytest.approx(17.0, abs=0.5)


@pytest.mark.parametrize("name", ALL)
def test_urdf_loads_in_yourdfpy_with_the_spec_joints(name):
    spec = robots.get(name)
    u = yourdfpy.URDF.load(str(spec.urdf_path))
    assert u.validate()
    assert list(u.actuated_joint_names) == list(spec.joint_names)
    for j in spec.joints:
        uj = u.joint_map[j.name]
        assert uj.type == j.type.value
        assert uj.limit.lower == pytest.approx(j.lower)
        assert uj.limit.upper == pytest.approx(j.upper)
        assert uj.limit.velocity == pytest.approx(j.velocity)
        assert uj.limit.effort == pytest.approx(j.effort)
    assert "tool0" in u.link_map


def _inside_geometry(point, link) -> bool:
    """Is ``point`` (link frame) inside one of the link's collision primitives?"""
    for c in link.collisions:
        t = c.origin if c.origin is not None else np.eye(4)
        local = np.linalg.inv(t) @ np.r_[point, 1.0]
        g = c.geometry
        if g.cylinder is not None:
            if np.hypot(local[0], local[1]) <= g.cylinder.radius + 1e-9 and abs(local[2]) <= g.cylinder.length / 2 + 1e-9:
                return True
        elif g.sphere is not None and np.linalg.norm(local[:3]) <= g.sphere.radius + 1e-9:
            return True
    return False


@pytest.mark.parametrize("name", ALL)
def test_inertials_are_physically_valid(name):
    u = yourdfpy.URDF.load(str(robots.get(name).urdf_path))
    for link in u.robot.links:
        if link.name == "tool0":
            continue
        m = link.inertial.mass
        inertia = link.inertial.inertia
        assert m > 0, link.name
        assert np.allclose(inertia, inertia.T)
        principal = np.linalg.eigvalsh(inertia)
        assert principal.min() > 0, f"{link.name}: inertia not positive definite"
        a, b, c = principal
        assert a + b >= c - 1e-12 and a + c >= b - 1e-12 and b + c >= a - 1e-12, f"{link.name}: triangle inequality"
        com = link.inertial.origin[:3, 3]
        assert _inside_geometry(com, link), f"{link.name}: centre of mass {com} outside the link"


@pytest.mark.parametrize("name", ALL)
def test_every_link_has_visual_and_collision_geometry(name):
    u = yourdfpy.URDF.load(str(robots.get(name).urdf_path))
    for link in u.robot.links:
        if link.name != "tool0":
            assert link.visuals and link.collisions, link.name
    colors = {tuple(v.material.color.rgba) for link in u.robot.links for v in link.visuals
              if v.material is not None and v.material.color is not None}
    assert len(colors) >= 4, "link groups should have distinct colours"


def test_display_units_round_trip():
    s = robots.get("scara")
    q = np.array([0.5, -1.0, 0.1, 2.0])
    assert np.allclose(s.from_display(s.to_display(q)), q)
    assert s.to_display(q)[2] == pytest.approx(100.0)  # J3 in mm
    assert s.display_units() == ("deg", "deg", "mm", "deg")
