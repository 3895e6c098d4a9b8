"""Forward kinematics: the analytic chain against PyBullet loading the URDF, and known poses."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from armtwin import robots
from armtwin.controllers import transforms as tf
from armtwin.controllers.kinematics import chain_of, fk, fk_batch, fk_frames
from armtwin.envs.sim import World

ALL = robots.names()


def random_q(spec, n, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(spec.lower, spec.upper, size=(n, spec.dof))


@pytest.mark.parametrize("name", ALL)
def test_fk_matches_pybullet_at_1000_random_configurations(name):
    spec = robots.get(name)
    chain = chain_of(spec)
    Q = random_q(spec, 1000, seed=1)
    analytic = fk_batch(chain, Q)
    pos_err = rot_err = 0.0
    with World(ground=False) as world:
        robot = world.add_robot(spec)
        for q, T in zip(Q, analytic):
            robot.reset(q)
            P = robot.flange_pose()
            pos_err = max(pos_err, float(np.linalg.norm(P[:3, 3] - T[:3, 3])))
            rot_err = max(rot_err, float(tf.rotation_angle(P[:3, :3], T[:3, :3])))
    assert pos_err <= 1e-6, f"position error {pos_err:.3g} m"
    assert rot_err <= 1e-6, f"rotation error {rot_err:.3g} rad"


def test_irb120_flange_at_zero_is_374_0_630_mm():
    T = fk(chain_of(robots.get("irb120")), np.zeros(6))
    assert np.allclose(T[:3, 3], [0.374, 0.0, 0.630], atol=1e-12)
    # ABB tool0 at the calibration pose points along +x (its z) with its x pointing down.
    assert np.allclose(T[:3, 2], [1, 0, 0], atol=1e-12)
    assert np.allclose(T[:3, 0], [0, 0, -1], atol=1e-12)


@given(st.floats(-2.3, 2.3), st.floats(-2.6, 2.6), st.floats(0, 0.2), st.floats(-6.2, 6.2))
@settings(max_examples=200, deadline=None)
def test_scara_fk_is_the_planar_formula(q1, q2, q3, q4):
    spec = robots.get("scara")
    g = spec.geometry
    T = fk(chain_of(spec), [q1, q2, q3, q4])
    assert T[0, 3] == pytest.approx(g.l1 * np.cos(q1) + g.l2 * np.cos(q1 + q2), abs=1e-12)
    assert T[1, 3] == pytest.approx(g.l1 * np.sin(q1) + g.l2 * np.sin(q1 + q2), abs=1e-12)
    assert T[2, 3] == pytest.approx(g.z0 - q3, abs=1e-12)
    roll = q1 + q2 + q4
    assert np.allclose(T[:3, 0], [np.cos(roll), np.sin(roll), 0], atol=1e-12)
    assert np.allclose(T[:3, 2], [0, 0, -1], atol=1e-12)  # tool points down


def _dh_standard(a, alpha, d, theta):
    ct, st_, ca, sa = np.cos(theta), np.sin(theta), np.cos(alpha), np.sin(alpha)
    return np.array([[ct, -st_ * ca, st_ * sa, a * ct], [st_, ct * ca, -ct * sa, a * st_], [0, sa, ca, d], [0, 0, 0, 1]])


def _dh_modified(a, alpha, d, theta):
    ct, st_, ca, sa = np.cos(theta), np.sin(theta), np.cos(alpha), np.sin(alpha)
    return np.array([[ct, -st_, 0, a], [st_ * ca, ct * ca, -sa, -sa * d], [st_ * sa, ct * sa, ca, ca * d], [0, 0, 0, 1]])


@pytest.mark.parametrize("name,conv", [("irb120", _dh_standard), ("aubo_i5", _dh_modified)])
def test_fk_equals_the_published_dh_table(name, conv):
    """The chain built for the URDF reproduces the textbook DH product for the docs/ROBOTS.md tables."""
    spec = robots.get(name)
    dh = spec.dh
    a, d = np.array(dh["a_mm"]) / 1000, np.array(dh["d_mm"]) / 1000
    alpha, off = np.radians(dh["alpha_deg"]), np.radians(dh["offset_deg"])
    for q in random_q(spec, 50, seed=2):
        T = np.eye(4)
        for i in range(6):
            T = T @ conv(a[i], alpha[i], d[i], q[i] + off[i])
        assert np.allclose(fk(chain_of(spec), q), T, atol=1e-12)


@pytest.mark.parametrize("name", ALL)
def test_batch_equals_single_and_frames_end_at_the_flange(name):
    spec = robots.get(name)
    chain = chain_of(spec)
    Q = random_q(spec, 20, seed=3)
    B = fk_batch(chain, Q)
    for q, T in zip(Q, B):
        assert np.allclose(fk(chain, q), T, atol=1e-14)
        frames = fk_frames(chain, q)
        assert frames.shape == (spec.dof + 1, 4, 4)
        assert np.allclose(frames[-1], T)


def test_fk_rejects_wrong_joint_count():
    with pytest.raises(ValueError, match="expected 6 joint values"):
        fk(chain_of(robots.get("irb120")), [0, 0, 0])


def test_aubo_pose_is_reported_in_controller_base_frame():
    """The mounting face is 23.5 mm below the controller base frame (docs/ROBOTS.md)."""
    spec = robots.get("aubo_i5")
    with World(ground=False) as world:
        robot = world.add_robot(spec, q0=np.zeros(6))
        # Shoulder joint 122 mm above the mount = 98.5 mm above the reporting frame.
        assert spec.joints[0].origin.xyz[2] == pytest.approx(0.122)
        T = robot.flange_pose()
    assert T[2, 3] == pytest.approx((98.5 + 408 + 376 + 102.5) / 1000, abs=1e-6)
