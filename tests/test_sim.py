"""The simulator facade basics (envs/sim.py). Runtime ≈ 2 s."""

from __future__ import annotations

import numpy as np
import pytest

from armtwin import robots
from armtwin.envs.sim import JointMode, PhysicsConfig, SimulationError, World, cameras_for

IRB = robots.get("irb120")


def test_direct_by_default_and_each_world_has_its_own_client():
    with World() as a, World() as b:
        assert a.client != b.client
        ra, rb = a.add_robot(IRB), b.add_robot(IRB)
        ra.reset(IRB.pose("ready"))
        np.testing.assert_allclose(rb.q, IRB.home)  # the other world did not move


def test_set_and_read_joint_state():
    with World() as w:
        r = w.add_robot(IRB, JointMode.HINGE)
        q = np.radians([10, -20, 30, -40, 50, -60])
        qd = np.array([0.1, -0.2, 0.3, -0.4, 0.5, -0.6])
        r.reset(q, qd)
        s = r.state()
        np.testing.assert_allclose(s.q, q, atol=1e-12)
        np.testing.assert_allclose(s.qd, qd, atol=1e-12)
        np.testing.assert_allclose(r.flange_pose(), r.fk(q), atol=1e-6)  # engine (float32 quaternions) agrees with the analytic FK


def test_physics_config_is_validated():
    with pytest.raises(ValueError):
        PhysicsConfig(dt=0.0)
    with pytest.raises(ValueError):
        PhysicsConfig(substeps=0)
    with World(PhysicsConfig(dt=0.01, substeps=4)) as w:
        w.add_robot(IRB, JointMode.ARTICULATION)
        w.step(3)
        assert w.time == pytest.approx(0.03)


def test_command_rejects_bad_input():
    with World() as w:
        r = w.add_robot(IRB)
        with pytest.raises(ValueError):
            r.command(np.zeros(5))
        with pytest.raises(ValueError):
            r.command([np.nan] * 6)
        with pytest.raises(ValueError):
            r.set_payload(-1.0)


def test_render_returns_an_image_of_the_right_shape_that_is_not_uniform():
    with World() as w:
        w.add_robot(IRB)
        img = w.render(cameras_for(IRB)["iso"], 96, 64)
        assert img.shape == (64, 96, 3) and img.dtype == np.uint8
        assert img.reshape(-1, 3).std(axis=0).max() > 5.0


def test_gui_without_display_is_a_simulation_error(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    with pytest.raises(SimulationError, match="display"):
        World(gui=True)


def test_urdf_that_does_not_load_names_the_path(tmp_path):
    bad = tmp_path / "broken.urdf"
    bad.write_text("<robot name='x'><link name='a'>")
    from armtwin.robots.urdfcheck import RobotDataError
    with World() as w:
        with pytest.raises(RobotDataError, match="broken.urdf.*not well-formed XML"):
            w.add_robot(IRB, urdf_path=str(bad))


def test_sim_is_the_only_module_that_imports_pybullet():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    pattern = re.compile(r"^\s*(import pybullet|from pybullet)", re.M)
    users = sorted(str(p.relative_to(root)) for d in ("envs", "controllers", "robots", "scripts")
                   for p in (root / d).rglob("*.py") if pattern.search(p.read_text(encoding="utf-8")))
    assert users == ["envs/sim.py"]
