"""The batched vector env (issue 21 item 3): N robots in one world, the same as N single envs."""

from __future__ import annotations

import pickle

import cloudpickle
import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from armtwin.envs import registration
from armtwin.envs.vector import ReachVectorEnv, TrackVectorEnv

ALL_IDS = sorted(registration.ENV_IDS)
#: the ids with a batched vector env (an object task has none: make_vec vectorises single envs)
BATCHED_IDS = [i for i in ALL_IDS if registration.ENV_IDS[i][0][1] is not None]


def test_make_vec_of_an_object_task_vectorises_single_envs():
    envs = gym.make_vec("armtwin/IRB120PickAndPlace-v0", num_envs=2, joint_mode="kinematic")
    try:
        assert isinstance(envs.unwrapped, gym.vector.SyncVectorEnv)
        obs, _ = envs.reset(seed=1)
        assert not np.array_equal(obs["desired_goal"][0], obs["desired_goal"][1])
        obs, reward, *_ = envs.step(envs.action_space.sample())
        assert reward.shape == (2,) and envs.observation_space.contains(obs)
    finally:
        envs.close()


@pytest.mark.parametrize("env_id", BATCHED_IDS)
def test_make_vec_builds_the_batched_env_for_every_id(env_id):
    envs = gym.make_vec(env_id, num_envs=3)
    try:
        assert isinstance(envs.unwrapped, (ReachVectorEnv, TrackVectorEnv))
        obs, info = envs.reset(seed=1)
        assert envs.observation_space.contains(obs)
        assert not np.array_equal(obs["desired_goal"][0], obs["desired_goal"][1])
        for _ in range(4):
            obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
            assert envs.observation_space.contains(obs)
            assert reward.shape == terminated.shape == truncated.shape == (3,) and np.all(np.isfinite(reward))
            assert set(info) >= {"is_success", "_is_success", "distance", "ik_failed", "unstable"}
            np.testing.assert_array_equal(reward, envs.unwrapped.compute_reward(obs["achieved_goal"], obs["desired_goal"]))
    finally:
        envs.close()


@pytest.mark.parametrize("env_id,kw", [
    ("armtwin/IRB120Reach-v0", {"reward": "dense"}),                                   # articulation, Cartesian
    ("armtwin/AuboI5Reach-v0", {"reward": "dense", "control": "joint", "joint_mode": "hinge"}),
    ("armtwin/ScaraReach-v0", {"reward": "dense", "orientation": True, "joint_mode": "kinematic"}),
    ("armtwin/IRB120Track-v1", {"joint_mode": "articulation", "duration": 1.0}),
])
def test_env_i_of_the_batch_is_the_single_env_seeded_seed_plus_i(env_id, kw):
    n, steps = 4, 30
    rng = np.random.default_rng(5)
    envs = gym.make_vec(env_id, num_envs=n, **kw)
    singles = [gym.make(env_id, **kw) for _ in range(n)]
    try:
        actions = rng.uniform(-1, 1, (steps, n) + envs.single_action_space.shape)
        obs, _ = envs.reset(seed=10)
        single = [e.reset(seed=10 + i)[0] for i, e in enumerate(singles)]
        for t in range(steps):
            for i in range(n):
                for key in obs:
                    # the batch takes the tool pose from the analytic FK of the measured joints, the single
                    # env from the engine: they agree to 4e-7 m
                    np.testing.assert_allclose(obs[key][i], single[i][key], atol=2e-6, err_msg=f"{key} t={t} env={i}")
            obs, reward, terminated, truncated, _ = envs.step(actions[t])
            for i, e in enumerate(singles):
                single[i], r, te, tr, _ = e.step(actions[t, i].astype(np.float32))
                assert reward[i] == pytest.approx(r, abs=2e-6)
                assert (terminated[i], truncated[i]) == (te, tr)
                if te or tr:   # next_step autoreset: the batch resets env i on the next step; the single env now
                    single[i] = None
            if any(s is None for s in single):
                break
    finally:
        envs.close()
        for e in singles:
            e.close()


def _episode_env(mode, n=3):
    return ReachVectorEnv(n, "scara", control="joint", joint_mode="kinematic", episode_steps=4, autoreset_mode=mode)


def test_next_step_autoreset_starts_the_next_episode_on_the_following_step():
    envs = _episode_env(AutoresetMode.NEXT_STEP)
    single = gym.make("armtwin/ScaraReach-v0", control="joint", joint_mode="kinematic", episode_steps=4)
    try:
        obs, _ = envs.reset(seed=0)
        single.reset(seed=0)
        a = np.zeros((3, 4))
        for k in range(4):
            obs, reward, terminated, truncated, _ = envs.step(a)
        assert truncated.all() and not terminated.any()
        obs, reward, terminated, truncated, _ = envs.step(np.ones((3, 4)))      # ignored: a reset
        np.testing.assert_array_equal(reward, 0.0)
        assert not truncated.any() and not terminated.any()
        second, _ = single.reset()                                               # the single env's next episode
        np.testing.assert_array_equal(obs["desired_goal"][0], second["desired_goal"])
        np.testing.assert_allclose(obs["achieved_goal"][0], second["achieved_goal"], atol=2e-6)
    finally:
        envs.close()
        single.close()


def test_same_step_autoreset_returns_the_new_episode_and_the_final_observation():
    envs = _episode_env(AutoresetMode.SAME_STEP)
    try:
        first, _ = envs.reset(seed=0)
        for k in range(4):
            obs, reward, terminated, truncated, info = envs.step(np.full((3, 4), 0.5))
        assert truncated.all() and info["_final_obs"].all()
        final = info["final_obs"][0]
        assert not np.array_equal(final["desired_goal"], obs["desired_goal"][0])   # obs is the next episode's
        np.testing.assert_array_equal(final["desired_goal"], first["desired_goal"][0])
        assert "is_success" in info["final_info"][0]
        obs, reward, *_ = envs.step(np.zeros((3, 4)))
        assert np.all(reward < 0)                                                  # a real step, not a reset
    finally:
        envs.close()


def test_disabled_autoreset_and_a_partial_reset():
    envs = _episode_env(AutoresetMode.DISABLED)
    try:
        obs0, _ = envs.reset(seed=0)
        for _ in range(4):
            obs, *_ = envs.step(np.full((3, 4), 0.5))
        obs, _ = envs.reset(options={"reset_mask": np.array([False, True, False])})
        np.testing.assert_array_equal(obs["desired_goal"][0], obs0["desired_goal"][0])
        assert not np.array_equal(obs["desired_goal"][1], obs0["desired_goal"][1])
        assert envs.unwrapped._steps.tolist() == [4, 0, 4]
        with pytest.raises(ValueError, match="reset_mask"):
            envs.reset(options={"reset_mask": [1, 0, 1]})
    finally:
        envs.close()


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_actions_are_refused_and_change_nothing(bad):
    envs = ReachVectorEnv(4, "irb120")
    twin = ReachVectorEnv(4, "irb120")
    try:
        envs.reset(seed=3)
        twin.reset(seed=3)
        a = np.random.default_rng(0).uniform(-1, 1, (4, 3))
        poisoned = a.copy()
        poisoned[2, 1] = bad
        with pytest.raises(ValueError, match="non-finite"):
            envs.step(poisoned)
        with pytest.raises(ValueError, match=r"\(4, 3\)"):
            envs.step(a[:3])
        oa, ra, *_ = envs.step(a)
        ob, rb, *_ = twin.step(a)
        for key in oa:
            np.testing.assert_array_equal(oa[key], ob[key])
        np.testing.assert_array_equal(ra, rb)
    finally:
        envs.close()
        twin.close()


@pytest.mark.parametrize("kw,match", [({"num_envs": 0}, "num_envs"), ({"num_envs": 10 ** 6}, "num_envs"),
                                      ({"autoreset_mode": "sometimes"}, "autoreset_mode"),
                                      ({"render_mode": "rgb_array"}, "render"), ({"control_freq": 0}, "control_freq"),
                                      ({"spacing": 0.1}, "spacing"), ({"tool": "lazer"}, "tool"),
                                      ({"tool": {"mass": -1}}, r"tool\.mass")])
def test_bad_vector_options_are_value_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        ReachVectorEnv(**{"num_envs": 2, "robot": "scara", **kw})


def test_a_pickled_batch_has_its_own_world():
    envs = ReachVectorEnv(2, "scara")
    try:
        envs.reset(seed=1)
        for dumps in (cloudpickle.dumps, pickle.dumps):
            copy = pickle.loads(dumps(envs))
            assert copy.world.client != envs.world.client
            a, _ = copy.reset()
            b, _ = envs.reset()
            np.testing.assert_array_equal(a["desired_goal"], b["desired_goal"])
            copy.close()
        obs, reward, *_ = envs.step(np.zeros((2, 3)))
        assert np.all(np.isfinite(reward))
    finally:
        envs.close()


def test_track_batch_follows_its_paths_with_zero_action_in_kinematic_mode():
    envs = TrackVectorEnv(3, "irb120", joint_mode="kinematic", duration=2.0, path="circle")
    try:
        envs.reset(seed=2)
        for _ in range(50):
            obs, reward, terminated, truncated, info = envs.step(np.zeros((3, 3)))
            assert np.all(info["distance"] < 1e-5) and not terminated.any()
        assert truncated.all()
    finally:
        envs.close()
