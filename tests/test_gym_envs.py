"""Gymnasium environments: API conformance, determinism, vector envs, rewards, control, rendering."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from armtwin.envs import registration
from armtwin.envs.gym_envs import ArmEnv, ReachEnv, TrackEnv

ALL_IDS = sorted(registration.ENV_IDS)


def make(env_id: str, **kw):
    return gym.make(env_id, **kw)


def rollout(env, seed: int, steps: int, action_seed: int = 7):
    """Observations, rewards and infos of ``steps`` seeded random steps (no resets)."""
    rng = np.random.default_rng(action_seed)
    obs, _ = env.reset(seed=seed)
    out = [obs]
    rewards, infos = [], []
    for _ in range(steps):
        a = rng.uniform(-1, 1, env.action_space.shape).astype(np.float32)
        obs, r, term, trunc, info = env.step(a)
        out.append(obs)
        rewards.append(r)
        infos.append(info)
        if term or trunc:
            break
    return out, rewards, infos


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_check_env_passes_without_warnings(env_id):
    env = make(env_id)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env.unwrapped)
        assert [str(w.message) for w in caught] == []
    finally:
        env.close()


def test_every_id_is_registered_and_registration_imports_no_pybullet():
    for env_id in ALL_IDS:
        assert env_id in gym.registry
    code = "import sys, armtwin.envs.registration; print('pybullet' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "False"


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_same_seed_same_rollout_in_fresh_envs(env_id):
    a, b = make(env_id), make(env_id)
    try:
        ra, rb = rollout(a, 3, 25), rollout(b, 3, 25)
    finally:
        a.close()
        b.close()
    assert len(ra[0]) == len(rb[0]) > 0
    for oa, ob in zip(ra[0], rb[0]):
        for k in oa:
            np.testing.assert_array_equal(oa[k], ob[k])
    assert ra[1] == rb[1]
    other = make(env_id)
    try:
        rc = rollout(other, 4, 25)
    finally:
        other.close()
    assert not np.array_equal(ra[0][0]["desired_goal"], rc[0][0]["desired_goal"])


def test_reset_without_seed_does_not_reseed():
    env = make("armtwin/ScaraReach-v0", control="joint")
    other = make("armtwin/ScaraReach-v0", control="joint")
    try:
        first = env.reset(seed=11)[0]["desired_goal"]
        goals = [env.reset()[0]["desired_goal"] for _ in range(3)]
        assert not np.array_equal(goals[0], first) and not np.array_equal(goals[1], goals[0])
        other.reset(seed=11)
        again = [other.reset()[0]["desired_goal"] for _ in range(3)]
        np.testing.assert_array_equal(np.array(goals), np.array(again))
    finally:
        env.close()
        other.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec(mode):
    envs = gym.make_vec("armtwin/ScaraReach-v0", num_envs=2, vectorization_mode=mode)
    try:
        obs, infos = envs.reset(seed=5)
        assert obs["observation"].shape[0] == 2
        assert not np.array_equal(obs["desired_goal"][0], obs["desired_goal"][1])
        for _ in range(3):
            obs, rew, term, trunc, infos = envs.step(envs.action_space.sample())
        assert rew.shape == (2,) and obs["achieved_goal"].shape == (2, 3)
        assert np.all(np.isfinite(obs["observation"]))
    finally:
        envs.close()


@pytest.mark.parametrize("env_id,kw", [
    ("armtwin/IRB120Reach-v0", {"reward": "dense"}),
    ("armtwin/ScaraTrack-v1", {"reward": "sparse", "distance_threshold": 0.01, "joint_mode": "hinge"}),
    ("armtwin/IRB120Reach-v0", {"reward": "sparse", "distance_threshold": 0.3}),
    ("armtwin/IRB120Reach-v0", {"reward": "dense", "orientation": True, "control": "joint"}),
    ("armtwin/ScaraReach-v0", {"reward": "sparse", "orientation": True, "distance_threshold": 0.25, "angle_threshold": 1.0}),
    ("armtwin/AuboI5Track-v1", {"reward": "dense"}),
])
def test_reward_equals_vectorised_compute_reward(env_id, kw):
    env = make(env_id, **kw)
    try:
        obs, rewards, infos = rollout(env, 1, 30)
    finally:
        env.close()
    # the GoalEnv contract (SB3's check_env, HER): a step's reward is compute_reward of the
    # observation that step returns — its own achieved and desired goals
    achieved = np.array([o["achieved_goal"] for o in obs[1:]])
    desired = np.array([o["desired_goal"] for o in obs[1:]])
    batch = env.unwrapped.compute_reward(achieved, desired, infos)
    single = np.array([env.unwrapped.compute_reward(a, d, i) for a, d, i in zip(achieved, desired, infos)])
    assert batch.shape == (len(rewards),)
    np.testing.assert_array_equal(batch, np.array(rewards, dtype=np.float32))
    np.testing.assert_array_equal(batch, single)
    if kw["reward"] == "sparse":
        assert set(np.unique(batch)) <= {0.0, -1.0}
        success = np.array([i["is_success"] for i in infos])
        np.testing.assert_array_equal(batch == 0.0, success)
    # a batch with a leading shape of its own (HER samples (batch, envs, g))
    np.testing.assert_array_equal(env.unwrapped.compute_reward(achieved[None], desired[None], None), batch[None])


@pytest.mark.parametrize("robot", ["irb120", "scara", "aubo_i5"])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_cartesian_action_moves_tool_in_commanded_direction(robot, axis):
    env = ReachEnv(robot, joint_mode="kinematic", control="cartesian")
    try:
        obs, _ = env.reset(seed=0)
        p0 = obs["achieved_goal"][:3].astype(float)
        a = np.zeros(3, dtype=np.float32)
        a[axis] = -0.5 if axis == 2 else 0.5
        obs, _, _, _, info = env.step(a)
        assert not info["ik_failed"]
        d = obs["achieved_goal"][:3] - p0
        expected = np.zeros(3)
        expected[axis] = a[axis] * env.controller.tool_step
        np.testing.assert_allclose(d, expected, atol=2e-4)
        # the orientation is held
        T = env.robot.flange_pose()
        assert np.allclose(T[:3, :3], env.controller.T_ref[:3, :3], atol=1e-6)
    finally:
        env.close()


def test_cartesian_action_in_articulation_mode_moves_the_right_way():
    env = ReachEnv("irb120", joint_mode="articulation")
    try:
        obs, _ = env.reset(seed=0)
        p0 = obs["achieved_goal"].astype(float)
        for _ in range(5):
            obs, *_ = env.step(np.array([0.0, 0.6, 0.0], dtype=np.float32))
        d = obs["achieved_goal"] - p0
        assert d[1] > 0.1 and abs(d[0]) < 0.01 and abs(d[2]) < 0.01
    finally:
        env.close()


def test_unreachable_cartesian_step_keeps_joints_and_flags_it():
    env = ReachEnv("scara", joint_mode="kinematic")
    try:
        env.reset(seed=0)
        hit = None
        for _ in range(40):  # push outward until the arm cannot follow
            q_before = env.robot.q
            _, _, _, _, info = env.step(np.array([1.0, 1.0, 0.0], dtype=np.float32))
            if info["ik_failed"]:
                hit = q_before
                break
        assert hit is not None
        np.testing.assert_allclose(env.robot.q, hit, atol=1e-9)
    finally:
        env.close()


@pytest.mark.parametrize("env_id,kw", [
    ("armtwin/IRB120Reach-v0", {}),
    ("armtwin/AuboI5Reach-v0", {"control": "joint", "joint_mode": "hinge"}),
    ("armtwin/ScaraReach-v0", {"orientation": True}),
    ("armtwin/IRB120Reach-v0", {"orientation": True, "control": "cartesian"}),
])
def test_goal_at_the_tool_is_a_success(env_id, kw):
    env = make(env_id, terminate_on_success=True, **kw)
    try:
        obs, _ = env.reset(seed=0)
        obs, _ = env.reset(options={"goal": obs["achieved_goal"]})
        assert obs["desired_goal"].shape == obs["achieved_goal"].shape
        obs, reward, terminated, truncated, info = env.step(np.zeros(env.action_space.shape, np.float32))
        assert info["is_success"] and reward == 0.0 and terminated and not truncated
        # and a goal 10 cm away is not
        far = obs["achieved_goal"].copy()
        far[2] += 0.1
        env.reset(options={"goal": far})
        _, reward, terminated, _, info = env.step(np.zeros(env.action_space.shape, np.float32))
        assert not info["is_success"] and reward == -1.0 and not terminated
    finally:
        env.close()


def test_episode_is_truncated_after_episode_steps():
    env = make("armtwin/ScaraReach-v0", episode_steps=7, control="joint")
    try:
        env.reset(seed=0)
        flags = [env.step(env.action_space.sample())[3] for _ in range(7)]
        assert flags == [False] * 6 + [True]
    finally:
        env.close()


def test_track_follows_its_path_with_zero_action_in_kinematic_mode():
    env = make("armtwin/IRB120Track-v1", joint_mode="kinematic", duration=2.0, path="circle")
    try:
        obs, _ = env.reset(seed=2)
        n = 0
        done = False
        while not done:
            obs, reward, term, trunc, info = env.step(np.zeros(3, np.float32))
            n += 1
            done = term or trunc
            assert info["distance"] < 1e-6 and reward > -1e-6
        assert n == 50 and not term
        # an offset action moves the tool off the path by the offset
        env.reset(seed=2)
        _, reward, *_ = env.step(np.array([1.0, 0.0, 0.0], np.float32))
        assert reward == pytest.approx(-0.01, abs=1e-5)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ["armtwin/IRB120Reach-v0", "armtwin/ScaraTrack-v1"])
def test_rgb_array_frames(env_id):
    env = make(env_id, render_mode="rgb_array", width=160, height=120)
    try:
        env.reset(seed=0)
        frame = env.render()
        assert frame.shape == (120, 160, 3) and frame.dtype == np.uint8
        assert frame.std() > 5  # not a blank image
        red = (frame[..., 0] > 200) & (frame[..., 1] < 80) & (frame[..., 2] < 80)
        cyan = (frame[..., 0] < 40) & (frame[..., 1] > 170) & (frame[..., 2] > 200)
        assert red.any() if "Reach" in env_id else cyan.any()  # the goal marker / the path
    finally:
        env.close()
    plain = make(env_id)
    try:
        plain.reset(seed=0)
        assert plain.render() is None
    finally:
        plain.close()


@pytest.mark.parametrize("kw,match", [
    ({"control": "joints"}, "control mode"),
    ({"joint_mode": "rigid"}, "joint mode"),
    ({"reward": "shaped"}, "reward type"),
    ({"control_freq": 0}, "control_freq"),
    ({"render_mode": "ascii"}, "render_mode"),
    ({"camera": "under"}, "camera"),
    ({"episode_steps": 0}, "episode_steps"),
])
def test_bad_options_fail_when_the_env_is_built(kw, match):
    with pytest.raises(ValueError, match=match):
        ReachEnv("scara", **kw)


def _documented_defaults(doc: str) -> dict[str, str]:
    rows = re.findall(r"^\s*\| ``(\w+)`` \| ([^|]+?) \|", doc, flags=re.M)
    return {name: default.strip().strip("`") for name, default in rows}


@pytest.mark.parametrize("cls", [ReachEnv, TrackEnv])
def test_documented_defaults_match_the_signatures(cls):
    documented = _documented_defaults(cls.__doc__.split("## Arguments")[1])
    assert documented, "the manual has an arguments table"
    params = inspect.signature(cls.__init__).parameters
    for name, text in documented.items():
        assert name in params, f"{cls.__name__} documents {name} but has no such argument"
        assert repr(params[name].default).strip("'") == text.strip('"'), name
    base = inspect.signature(ArmEnv.__init__).parameters
    listed = dict(re.findall(r"(\w+)=(\"?[\w.]+\"?)", cls.__doc__.split("## Arguments")[1].split("|")[0]))
    for name, text in listed.items():
        if name in base:
            assert repr(base[name].default).strip("'") == text.strip('"'), name


def test_program_text_finds_files_and_examples_and_refuses_missing_files(tmp_path, monkeypatch):
    from armtwin.envs.tasks import program_text

    square = (Path(__file__).resolve().parents[1] / "examples" / "scara_square.ngc").read_text()
    monkeypatch.chdir(tmp_path)  # not the repository: examples/... is found in armtwin's examples folder
    assert program_text("examples/scara_square.ngc") == square == program_text("scara_square.ngc")
    (tmp_path / "mine.nc").write_text("G0 X1\n")
    assert program_text("mine.nc") == "G0 X1\n"
    assert program_text("G0 X1 Y2.5") == "G0 X1 Y2.5"          # a one-line program
    for missing in ("/nonexistent.ngc", "no_such.ngc", "sub/dir"):
        with pytest.raises(FileNotFoundError, match="no such file"):
            program_text(missing)


def test_track_a_gcode_program_from_examples():
    from pathlib import Path

    from armtwin.envs.tasks import gcode_path

    program = Path(__file__).resolve().parents[1] / "examples" / "scara_square.ngc"
    env = make("armtwin/ScaraTrack-v1", program=str(program), joint_mode="kinematic")
    try:
        path = gcode_path(str(program), env.unwrapped.robot_spec, env.unwrapped.dt)
        obs, _ = env.reset(seed=0)
        np.testing.assert_allclose(obs["achieved_goal"], path.p[0], atol=1e-5)
        steps, done, worst = 0, False, 0.0
        while not done:
            obs, _, term, trunc, info = env.step(np.zeros(3, np.float32))
            steps, done, worst = steps + 1, term or trunc, max(worst, info["distance"])
        assert steps == len(path.t) - 1 and worst < 1e-5
        np.testing.assert_allclose(obs["achieved_goal"], path.p[-1], atol=1e-5)
    finally:
        env.close()


@pytest.mark.parametrize("robot", ["irb120", "aubo_i5"])
def test_cartesian_reference_never_runs_ahead_of_the_arm(robot):
    """When the joint speed limits cut a step short, the held tool position is where the arm went."""
    env = ReachEnv(robot, joint_mode="kinematic")
    try:
        env.reset(seed=1)
        rng = np.random.default_rng(0)
        limited = 0
        for _ in range(60):
            env.step(rng.uniform(-1, 1, 3).astype(np.float32))
            limited += env.controller.clipped
            np.testing.assert_allclose(env.robot.flange_pose()[:3, 3], env.controller.T_ref[:3, 3], atol=1e-6)
        assert limited > 0  # the case was exercised
    finally:
        env.close()
