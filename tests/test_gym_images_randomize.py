"""Image observations (issue 21 item 5) and per-episode domain randomisation (item 2)."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from armtwin.envs.gym_envs import ReachEnv, TrackEnv
from armtwin import robots
from armtwin.envs.randomize import Randomization


def _hue_pixels(img: np.ndarray, rgba, tol_deg: float = 15.0) -> np.ndarray:
    """(h, w) bool: saturated pixels of ``img`` within ``tol_deg`` of the hue of the colour ``rgba`` (0..1)."""
    import colorsys
    hue = 360.0 * colorsys.rgb_to_hsv(*rgba[:3])[0]
    rgb = img[..., :3].astype(float) / 255.0
    mx, mn = rgb.max(axis=2), rgb.min(axis=2)
    c = np.where(mx - mn > 1e-9, mx - mn, 1.0)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    h = np.where(mx == r, ((g - b) / c) % 6, np.where(mx == g, (b - r) / c + 2, (r - g) / c + 4)) * 60.0
    d = np.abs((h - hue + 180.0) % 360.0 - 180.0)
    return (d < tol_deg) & ((mx - mn) / np.maximum(mx, 1e-9) > 0.5) & (mx > 0.3)


# ----- image observations ---------------------------------------------------------------------

@pytest.mark.parametrize("obs_type,keys,channels", [("rgb", {"image"}, 3), ("rgbd", {"image"}, 4),
                                                    ("both", {"image", "observation"}, 3)])
def test_image_observation_types_pass_both_env_checkers(obs_type, keys, channels):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env
    env = gym.make("armtwin/IRB120Reach-v0", obs_type=obs_type, image_size=64).unwrapped
    try:
        assert set(env.observation_space.spaces) == keys | {"achieved_goal", "desired_goal"}
        assert env.observation_space["image"].shape == (64, 64, channels)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env)
        assert [str(w.message) for w in caught] == []
        sb3_check_env(env, warn=False)
    finally:
        env.close()


def test_rgb_image_shows_the_arm_and_the_goal_and_follows_the_arm():
    env = ReachEnv("irb120", obs_type="rgb", image_size=96, control="joint")
    try:
        obs, _ = env.reset(seed=0)
        img = obs["image"].astype(int)
        red = (img[..., 0] > 200) & (img[..., 1] < 80) & (img[..., 2] < 80)
        assert red.sum() >= 4                                        # the goal marker
        wrist = next(s.paint for s in robots.get("irb120").links[5].visual)   # the arm's orange wrist
        assert _hue_pixels(img, wrist.rgba).sum() >= 5
        for _ in range(10):
            obs, *_ = env.step(np.array([1.0, 0, 0, 0, 0, 0], np.float32))   # swing J1
        moved = np.abs(obs["image"].astype(int) - img).sum(axis=2) > 60
        assert moved.sum() > 50
        again, _ = ReachEnv("irb120", obs_type="rgb", image_size=96, control="joint").reset(seed=0)
        np.testing.assert_array_equal(again["image"], img.astype(np.uint8))   # rendering is deterministic
    finally:
        env.close()


def test_depth_channel_is_metres_along_the_view_axis():
    """A ground pixel's depth equals the distance to where its ray meets the floor, along the view axis."""
    env = ReachEnv("scara", obs_type="rgbd", image_size=64)
    try:
        obs, _ = env.reset(seed=0)
        depth = obs["image"][..., 3].astype(float) * env.depth_scale
        cam = env.camera
        u, v = 32.5, 62.5                          # bottom-centre pixel (centre of the pixel): the floor
        x_ndc, y_ndc = 2 * u / 64 - 1, 1 - 2 * v / 64
        P = cam.projection_matrix(1.0) @ cam.view_matrix()
        ray = np.linalg.inv(P) @ np.array([x_ndc, y_ndc, 1.0, 1.0])
        far = ray[:3] / ray[3]
        eye = cam.eye
        d = far - eye
        hit = eye + d * (-eye[2] / d[2])           # the floor z = 0
        forward = np.asarray(cam.target) - eye
        forward /= np.linalg.norm(forward)
        expected = float((hit - eye) @ forward)
        assert depth[62, 32] == pytest.approx(expected, abs=1.5 * env.depth_scale)
        arm = obs["image"][..., :3].astype(int).sum(axis=2) < 150
        assert depth[arm].mean() < depth[~arm].mean()   # the arm stands in front of the floor
    finally:
        env.close()


@pytest.mark.parametrize("kw,match", [({"obs_type": "pixels"}, "observation type"), ({"image_size": 8}, "image_size"),
                                      ({"image_size": 1000}, "image_size"), ({"image_size": 64.5}, "image_size")])
def test_bad_image_options_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        ReachEnv("scara", **kw)


# ----- domain randomisation ---------------------------------------------------------------------

FULL = {"gains": [0.6, 1.4], "effort": [0.8, 1.2], "friction": [0.5, 2.0], "joint_damping": [0.5, 2.0],
        "mass": [0.8, 1.2], "payload": [0.0, 2.0], "latency": [0, 2], "obs_noise": 0.01}


def test_randomisation_is_off_by_default_and_leaves_the_random_sequence_alone():
    plain = gym.make("armtwin/IRB120Reach-v0")
    try:
        _, info = plain.reset(seed=1)
        assert "randomization" not in info and plain.unwrapped.randomization_sample is None
    finally:
        plain.close()


def test_each_episode_draws_a_seeded_twin_and_reports_it():
    a = gym.make("armtwin/IRB120Reach-v0", joint_mode="hinge", randomize=FULL)
    b = gym.make("armtwin/IRB120Reach-v0", joint_mode="hinge", randomize=FULL)
    try:
        _, ia = a.reset(seed=7)
        _, ib = b.reset(seed=7)
        assert ia["randomization"] == ib["randomization"]                       # seeded
        _, _, _, _, step_info = a.step(np.zeros(3, np.float32))
        assert step_info["randomization"] == ia["randomization"]                # in every step's info
        draws = [ia["randomization"]] + [a.reset()[1]["randomization"] for _ in range(5)]
        assert len({d["gains"] for d in draws}) == 6                            # a new twin per episode
        for d in draws:
            for key in ("gains", "effort", "friction", "joint_damping"):
                assert FULL[key][0] <= d[key] <= FULL[key][1]
            assert all(0.8 <= m <= 1.2 for m in d["mass"]) and 0 <= d["payload"] <= 2 and d["latency"] in (0, 1, 2)
    finally:
        a.close()
        b.close()


def test_the_draw_is_applied_to_the_simulated_robot():
    fixed = {"gains": [0.5, 0.5], "effort": [2.0, 2.0], "payload": [1.5, 1.5], "mass": [1.2, 1.2]}
    env = ReachEnv("irb120", joint_mode="articulation", randomize=fixed)
    ref = ReachEnv("irb120", joint_mode="articulation")
    try:
        env.reset(seed=0)
        ref.reset(seed=0)
        base = env.robot_spec.drive
        np.testing.assert_allclose(env.robot.drive.stiffness, np.array(base.stiffness) * 0.5)
        assert env.robot.drive.position_gain == pytest.approx(base.position_gain * 0.5)
        np.testing.assert_allclose(env.robot.drive.effort, env.robot_spec.max_effort * 2.0)
        assert env.robot.payload == 1.5
        # the physics carries the heavier links: the drive holds the arm at home with ~1.2x the torque
        # (PyBullet's own inverse-dynamics queries keep the loaded masses, so the engine's drive is asked)
        for e in (env, ref):
            e.robot.set_payload(0.0)
            for _ in range(25):
                e.step(np.zeros(3, np.float32))
        ratio = env.robot.state().tau[1:3] / ref.robot.state().tau[1:3]
        assert np.all((ratio > 1.15) & (ratio < 1.22)), ratio
    finally:
        env.close()
        ref.close()


def test_latency_delays_every_action_by_whole_steps():
    env = ReachEnv("scara", control="joint", joint_mode="kinematic", randomize={"latency": [2, 2]})
    try:
        env.reset(seed=0)
        q0 = env.controller.q_ref.copy()
        a = np.array([1.0, 0, 0, 0], np.float32)
        env.step(a)
        env.step(np.zeros(4, np.float32))
        np.testing.assert_array_equal(env.controller.q_ref, q0)                 # nothing has acted yet
        env.step(np.zeros(4, np.float32))
        assert env.controller.q_ref[0] - q0[0] == pytest.approx(env.controller.scale[0])   # the first action, now
    finally:
        env.close()


def test_observation_noise_leaves_the_goals_and_the_reward_exact():
    noisy = ReachEnv("irb120", randomize={"obs_noise": 0.05}, reward="dense")
    clean = ReachEnv("irb120", reward="dense")
    try:
        on, _ = noisy.reset(seed=3)
        oc, _ = clean.reset(seed=3)
        np.testing.assert_array_equal(on["desired_goal"], oc["desired_goal"])
        diff = on["observation"] - oc["observation"]
        assert 0.02 < diff.std() < 0.08
        a = np.array([0.3, -0.2, 0.1], np.float32)
        on, rn, *_ = noisy.step(a)
        oc, rc, *_ = clean.step(a)
        np.testing.assert_array_equal(on["achieved_goal"], oc["achieved_goal"])
        assert rn == rc == noisy.compute_reward(on["achieved_goal"], on["desired_goal"], None)
    finally:
        noisy.close()
        clean.close()


def test_track_randomised_hinge_runs_and_stays_finite():
    env = TrackEnv("aubo_i5", joint_mode="hinge", randomize=FULL, duration=1.0)
    try:
        for seed in range(3):
            obs, info = env.reset(seed=seed)
            done = False
            while not done:
                obs, r, te, tr, info = env.step(env.action_space.sample())
                assert np.isfinite(r) and env.observation_space.contains(obs)
                done = te or tr
    finally:
        env.close()


@pytest.mark.parametrize("value,match", [({"gain": [1, 2]}, "unknown field"), ({"gains": [1.2, 0.8]}, "low <= high"),
                                         ({"gains": [0, 1]}, "within"), ({"payload": [-1, 1]}, "within"),
                                         ({"latency": [0, 1.5]}, "whole control steps"), ({"obs_noise": -0.1}, "obs_noise"),
                                         ({"mass": "x"}, "pair"), ("heavy", "dict")])
def test_bad_randomisation_is_a_value_error(value, match):
    with pytest.raises(ValueError, match=match):
        ReachEnv("scara", randomize=value)


def test_randomization_round_trips_as_data():
    r = Randomization.of(FULL)
    assert r.gains == (0.6, 1.4) and r.latency == (0, 2) and r.dynamic
    assert not Randomization(latency=(1, 1)).dynamic
