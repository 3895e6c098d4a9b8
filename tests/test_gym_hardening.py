"""The Gymnasium envs under bad input: options, reset options, actions, copies (issue 15: 9, 14, 17, 21, 22).

The promise: every option and every action either is refused with a ValueError that names it —
when it is given, before any state changes — or gives a valid step. Never a hang, a segfault, a
NaN in an observation, or a state a later step inherits.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import math
import pickle
import signal

import cloudpickle
import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from armtwin.controllers.tools import Tool
from armtwin.envs import gym_options as opt
from armtwin.envs import registration
from armtwin.envs.gym_envs import ReachEnv, TrackEnv
from armtwin.envs.tasks import TimedPath

ALL_IDS = sorted(registration.ENV_IDS)


@contextlib.contextmanager
def time_limit(seconds: float):
    """Fail (TimeoutError) instead of hanging when the block runs longer than ``seconds``."""
    def _raise(*_):
        raise TimeoutError(f"took longer than {seconds} s")
    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# ----- 9, 14: options checked when given ---------------------------------------------------

def _tcp(z: float) -> np.ndarray:
    """A TCP ``z`` m along the flange's z axis, (4, 4)."""
    m = np.eye(4)
    m[2, 3] = z
    return m


@pytest.mark.parametrize("kw,match", [
    ({"width": 20000, "height": 20000, "render_mode": "rgb_array"}, "width"),   # segfaulted in render()
    ({"height": 10 ** 6}, "height"),
    ({"width": 15}, "width"),
    ({"width": 64.5}, "width"),
    ({"control_freq": 1e-300}, "control_freq"),                                   # hung the first step
    ({"control_freq": float("nan")}, "control_freq"),
    ({"control_freq": -25}, "control_freq"),
    ({"control_freq": "25"}, "control_freq"),
    ({"physics_dt": 1e-9}, "physics_dt"),                                         # hung the first step
    ({"physics_dt": -1}, "physics_dt"),                                           # was accepted
    ({"physics_dt": 0}, "physics_dt"),                                            # ZeroDivisionError
    ({"physics_dt": float("nan")}, "physics_dt"),                                 # failed only at the first step
    ({"tool_step": float("inf")}, "tool_step"),
    ({"joint_step": 0.0}, "joint_step"),
    ({"rot_step": 100.0}, "rot_step"),
    ({"orientation": "False"}, "orientation"),                                    # text was taken as True
    ({"distance_threshold": float("nan")}, "distance_threshold"),
    ({"episode_steps": 10 ** 9}, "episode_steps"),
    ({"episode_steps": 2.5}, "episode_steps"),
    ({"goal_spread": -1.0}, "goal_spread"),
    ({"robot": "no_such_robot"}, "unknown robot"),
    ({"robot": 5}, "robot"),
    ({"camera": None}, "camera"),
    ({"tool": 9}, "tool: no tool 9"),                                              # not in the built-in table
    ({"tool": "lazer"}, "tool: no tool named"),
    ({"tool": "T99"}, "tool"),
    ({"tool": True}, "tool must be"),                                              # a bool is not tool 1
    ({"tool": 2.5}, "tool must be"),
    ({"tool": [0, 0, 100]}, "tool must be"),
    ({"tool": {"tcp": [0, 0]}}, r"tool\.tcp: three numbers"),
    ({"tool": {"tcp": [0, 0, float("nan")]}}, r"tool\.tcp"),
    ({"tool": {"tcp": [0, 0, 1e6]}}, r"tool\.tcp"),
    ({"tool": {"mass": 1000}}, r"tool\.mass"),
    ({"tool": {"tcp_mm": [0, 0, 100]}}, r"tool\.tcp_mm: unknown key"),
    ({"tool": {"number": -1}}, r"tool\['number'\]"),
    ({"tool": Tool(3, "heavy", mass=-1.0)}, "tool: the tool's mass"),
    ({"tool": Tool(3, "5 m long", tcp=_tcp(5.0))}, "tool: the tool's TCP"),
])
def test_reach_options_are_refused_when_given(kw, match):
    kw = {"robot": "scara", **kw}
    with pytest.raises(ValueError, match=match):
        ReachEnv(**kw)


@pytest.mark.parametrize("kw,match", [
    ({"duration": float("inf")}, "duration"),
    ({"duration": 0}, "duration"),
    ({"duration": 3000.0, "control_freq": 1000}, "control steps"),
    ({"lookahead": 0}, "lookahead"),
    ({"lookahead": 10 ** 7}, "lookahead"),
    ({"path": "spiral"}, "path shape"),
    ({"path": 3}, "path"),
    ({"path_factory": "circle"}, "path_factory"),
    ({"program": 42}, "program"),
    ({"residual": None}, "residual"),
])
def test_track_options_are_refused_when_given(kw, match):
    with pytest.raises(ValueError, match=match):
        TrackEnv("scara", joint_mode="kinematic", **kw)


def test_largest_frames_render_and_the_bounds_come_from_the_video_bounds():
    from armtwin.envs.config import MAX_VIDEO_SIZE, MIN_VIDEO_SIZE
    assert (opt.FRAME_WIDTH[1], opt.FRAME_HEIGHT[1]) == MAX_VIDEO_SIZE
    assert (opt.FRAME_WIDTH[0], opt.FRAME_HEIGHT[0]) == MIN_VIDEO_SIZE
    env = ReachEnv("scara", render_mode="rgb_array", width=MIN_VIDEO_SIZE[0], height=MIN_VIDEO_SIZE[1] + 1)
    try:
        env.reset(seed=0)
        assert env.render().shape == (17, 16, 3)
    finally:
        env.close()


def _state(env):
    u = env.unwrapped
    return (u.robot.q, u.robot.state().qd, u.controller.q_ref.copy(), u._step_count, u.np_random.bit_generator.state)


def _assert_same_state(a, b):
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
        else:
            assert x == y


@pytest.mark.parametrize("options,match", [
    ({"q": [0.0, 0.0, 0.0, 1e308, 0.0, 0.0]}, "joint 4"),      # left the robot at infinity
    ({"q": [3.0, 0, 0, 0, 0, 0]}, "joint 1 = 3 is outside"),    # accepted outside the range
    ({"q": [0, 0, float("nan"), 0, 0, 0]}, "finite"),
    ({"q": [0, 0, 0]}, "6 numbers"),
    ({"q": "home"}, "6 numbers"),
    ({"goal": [5.0, 0.0, 0.3]}, "workspace box"),
    ({"goal": [0.3, 0.0, float("inf")]}, "finite"),
    ({"goals": [0.3, 0.0, 0.3]}, "unknown reset option"),
    ({"path": "x"}, "unknown reset option"),                   # Reach has no path
])
def test_reach_reset_options_are_refused_and_change_nothing(options, match):
    env = gym.make("armtwin/IRB120Reach-v0")
    try:
        env.reset(seed=0)
        env.step(env.action_space.sample())
        before = _state(env)
        with pytest.raises(ValueError, match=match):
            env.reset(seed=99, options=options)
        _assert_same_state(before, _state(env))
    finally:
        env.close()


def test_reach_goal_orientation_must_be_a_unit_rotation():
    env = ReachEnv("irb120", orientation=True, control="joint")
    try:
        obs, _ = env.reset(seed=0)
        g = obs["achieved_goal"].astype(float)
        g[3:] *= 2.0
        with pytest.raises(ValueError, match="unit quaternion"):
            env.reset(options={"goal": g})
    finally:
        env.close()


@pytest.mark.parametrize("path,match", [
    ("x", "TimedPath"),                                        # raised AttributeError
    (42, "TimedPath"),
])
def test_track_path_option_must_be_a_timed_path(path, match):
    env = gym.make("armtwin/ScaraTrack-v1", joint_mode="kinematic")
    try:
        env.reset(seed=0)
        before = _state(env)
        with pytest.raises(ValueError, match=match):
            env.reset(options={"path": path})
        _assert_same_state(before, _state(env))
    finally:
        env.close()


def test_track_path_option_out_of_reach_is_a_clear_error():
    env = TrackEnv("scara", joint_mode="kinematic")
    try:
        env.reset(seed=0)
        far = TimedPath(np.array([0.0, 1.0]), np.array([[0.3, 0.0, 0.1], [3.0, 0.0, 0.1]]), np.eye(3), "far")
        with pytest.raises(ValueError, match="does not reach|reaches no joints"):
            env.reset(options={"path": far})
    finally:
        env.close()


@pytest.mark.parametrize("kw,match", [
    (dict(t=[0.0, float("nan")], p=np.zeros((2, 3)), rotation=np.eye(3)), "finite"),
    (dict(t=[0.0, 1.0, 0.5], p=np.zeros((3, 3)), rotation=np.eye(3)), "never decrease"),
    (dict(t=[0.1, 1.0], p=np.zeros((2, 3)), rotation=np.eye(3)), "start at 0"),
    (dict(t=[0.0, 1.0], p=np.zeros((3, 3)), rotation=np.eye(3)), r"\(2, 3\)"),
    (dict(t=[0.0, 1.0], p=np.zeros((2, 3)), rotation=2 * np.eye(3)), "rotation matrices"),
    (dict(t=[0.0, 1.0], p=np.zeros((2, 3)), rotation="I"), "numeric"),
])
def test_timed_path_refuses_what_is_not_a_path(kw, match):
    with pytest.raises(ValueError, match=match):
        TimedPath(**kw)


# ----- 17: a refused action changes no state ------------------------------------------------

@pytest.mark.parametrize("env_id,kw", [
    ("armtwin/IRB120Reach-v0", {"control": "joint"}),          # NaN stayed the target until reset()
    ("armtwin/IRB120Reach-v0", {}),
    ("armtwin/ScaraTrack-v1", {"joint_mode": "hinge"}),
])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_refused_action_changes_no_state(env_id, kw, bad):
    a, b = gym.make(env_id, **kw), gym.make(env_id, **kw)
    try:
        rng = np.random.default_rng(1)
        actions = rng.uniform(-1, 1, (12,) + a.action_space.shape).astype(np.float32)
        a.reset(seed=4)
        b.reset(seed=4)
        for i, act in enumerate(actions):
            if i == 5:
                poisoned = act.copy()
                poisoned[0] = bad
                before = _state(a)
                with pytest.raises(ValueError, match="non-finite"):
                    a.step(poisoned)
                _assert_same_state(before, _state(a))
            oa, ra, *_ = a.step(act)
            ob, rb, *_ = b.step(act)
            for k in oa:
                np.testing.assert_array_equal(oa[k], ob[k])
            assert ra == rb and np.isfinite(ra)
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("action", [[0.1, 0.2], "up", None, [[0.1, 0.2, 0.3, 0.4]]])
def test_malformed_actions_are_value_errors(action):
    env = ReachEnv("irb120", control="cartesian")
    try:
        env.reset(seed=0)
        before = _state(env)
        with pytest.raises(ValueError, match="action"):
            env.step(action)
        _assert_same_state(before, _state(env))
    finally:
        env.close()


def test_step_before_reset_asks_for_a_reset():
    env = ReachEnv("scara")
    try:
        with pytest.raises(gym.error.ResetNeeded):
            env.step(np.zeros(3, np.float32))
    finally:
        env.close()


# ----- 21: copies are independent ------------------------------------------------------------

@pytest.mark.parametrize("dumps,loads", [(cloudpickle.dumps, pickle.loads), (pickle.dumps, pickle.loads)])
@pytest.mark.parametrize("env_id", ["armtwin/IRB120Reach-v0", "armtwin/ScaraTrack-v1"])
def test_a_pickled_copy_has_its_own_world_and_collecting_it_leaves_the_original_alive(dumps, loads, env_id):
    env = gym.make(env_id)
    try:
        env.reset(seed=3)
        env.step(env.action_space.sample())
        clone = loads(dumps(env))
        assert clone.unwrapped.world.client != env.unwrapped.world.client
        # the copy continues the original's random sequence: its next episode is the original's next one
        oc, _ = clone.reset()
        oe, _ = env.reset()
        np.testing.assert_array_equal(oc["desired_goal"], oe["desired_goal"])
        clone.step(clone.action_space.sample())
        del clone, oc
        gc.collect()
        obs, r, *_ = env.step(env.action_space.sample())     # the original's client was disconnected here
        assert np.isfinite(r) and np.all(np.isfinite(obs["observation"]))
    finally:
        env.close()


def test_deepcopy_is_independent_and_closing_it_leaves_the_original():
    env = ReachEnv("scara", control="joint", episode_steps=9)
    try:
        env.reset(seed=2)
        dup = copy.deepcopy(env)
        assert dup._task_args == env._task_args and dup.world is not env.world
        dup.close()
        env.step(np.zeros(4, np.float32))
    finally:
        env.close()


def test_a_world_refuses_to_be_pickled():
    env = ReachEnv("scara")
    try:
        with pytest.raises(TypeError, match="PyBullet client"):
            pickle.dumps(env.world)
    finally:
        env.close()


# ----- 22: the GoalEnv contract, checked by SB3's check_env for every id ------------------------

@pytest.mark.parametrize("env_id", ALL_IDS)
def test_stable_baselines3_check_env_passes(env_id):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env
    env = gym.make(env_id)
    try:
        sb3_check_env(env.unwrapped, warn=False)   # asserts reward == compute_reward(obs's goals)
    finally:
        env.close()


# ----- the fuzz: random option dicts, reset options and actions --------------------------------

_BAD = st.sampled_from([0, -1, 1e-300, 1e300, float("nan"), float("inf"), -float("inf"), "x", None, True,
                        [1, 2], 2.0 ** 31])


def _mostly(valid):
    """Valid values four times in five, a hostile one otherwise."""
    return st.one_of(valid, valid, valid, valid, _BAD)


_COMMON = {
    "joint_mode": st.sampled_from(["kinematic", "hinge", "articulation", "articulation", "rigid", 3]),
    "control": st.sampled_from(["joint", "cartesian", "cartesian", "joints", None]),
    "control_freq": _mostly(st.floats(0.5, 1200.0)),
    "physics_dt": _mostly(st.floats(5e-5, 0.2)),
    "tool_step": _mostly(st.floats(1e-4, 1.5)),
    "joint_step": _mostly(st.floats(1e-4, 4.0)),
    "width": _mostly(st.integers(8, 200)),
    "height": _mostly(st.integers(8, 200)),
    "render_mode": st.sampled_from([None, None, "rgb_array", "ascii"]),
    "camera": st.sampled_from(["iso", "top", "under", None]),
    "tool": st.sampled_from([None, 1, "spindle", "T5", {"tcp": [0, 0, 100], "mass": 0.3}, 9, "lazer", True,
                             {"tcp": [0, 0]}, {"mass": -1}]),
}
_REACH = {
    **_COMMON,
    "orientation": _mostly(st.booleans()),
    "rot_step": _mostly(st.floats(1e-4, 4.0)),
    "reward": st.sampled_from(["sparse", "dense", "shaped"]),
    "distance_threshold": _mostly(st.floats(1e-4, 1.5)),
    "angle_threshold": _mostly(st.floats(1e-3, 4.0)),
    "episode_steps": _mostly(st.integers(-2, 60)),
    "goal_spread": _mostly(st.floats(1e-3, 7.0)),
    "terminate_on_success": _mostly(st.booleans()),
}
_TRACK = {
    **_COMMON,
    "duration": _mostly(st.floats(0.05, 3.0)),
    "path": st.sampled_from(["random", "circle", "lemniscate", "segments", "spiral"]),
    "residual": _mostly(st.booleans()),
    "lookahead": _mostly(st.integers(-1, 6)),
    "distance_threshold": _mostly(st.floats(1e-4, 1.5)),
}


def _options(table: dict) -> st.SearchStrategy:
    """Up to four of the options, each valid or hostile."""
    return st.lists(st.sampled_from(sorted(table)), max_size=4, unique=True).flatmap(
        lambda keys: st.fixed_dictionaries({k: table[k] for k in keys}))


_ACTION_VALUES = st.one_of(st.floats(-3, 3), st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308]))


def _check_valid_step(env, obs, reward):
    assert env.observation_space.contains(obs), "observation outside its space"
    assert all(np.all(np.isfinite(v)) for v in obs.values())
    assert math.isfinite(reward)


def _fuzz(cls, options: dict, robot: str, data) -> None:
    try:
        env = cls(robot, **options)
    except ValueError as exc:
        assert str(exc), "a refusal names the option"
        event("refused at construction")
        return
    event("built")
    try:
        n = env.action_space.shape[0]
        try:
            obs, _ = env.reset(seed=data.draw(st.integers(0, 2 ** 32 - 1)),
                               options=data.draw(st.one_of(
                                   st.none(),
                                   st.fixed_dictionaries({"q": st.lists(_ACTION_VALUES, min_size=env.robot_spec.dof,
                                                                        max_size=env.robot_spec.dof)}))))
        except ValueError:
            obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        for _ in range(data.draw(st.integers(1, 6))):
            size = data.draw(st.sampled_from([n, n, n, n + 1]))
            action = np.array(data.draw(st.lists(_ACTION_VALUES, min_size=size, max_size=size)))
            if size != n or not np.all(np.isfinite(action)):
                before = _state(env)
                with pytest.raises(ValueError):
                    env.step(action)
                event("action refused")
                _assert_same_state(before, _state(env))
                continue
            obs, reward, term, trunc, info = env.step(action)
            event("stepped")
            _check_valid_step(env, obs, reward)
            if env.render_mode == "rgb_array":
                assert env.render().shape == (env.frame_size[1], env.frame_size[0], 3)
            if term or trunc:
                env.reset()
    finally:
        env.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_options(_REACH), st.sampled_from(["scara", "irb120", "aubo_i5"]), st.data())
def test_fuzz_reach_options_and_actions(options, robot, data):
    with time_limit(60):
        _fuzz(ReachEnv, options, robot, data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_options(_TRACK), st.sampled_from(["scara", "irb120", "aubo_i5"]), st.data())
def test_fuzz_track_options_and_actions(options, robot, data):
    with time_limit(60):
        _fuzz(TrackEnv, options, robot, data)
