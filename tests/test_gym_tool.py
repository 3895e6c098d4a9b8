"""The Gymnasium envs with a tool on the flange (issue 17.1, ``tool=``): observations, goals,
rewards, Cartesian actions and Track's paths at the TCP; the tool's body and mass in the world."""

from __future__ import annotations

import csv

import gymnasium as gym
import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode import compile_program, machine_for
from armtwin.controllers.tools import Tool, ToolKind, default_tools
from armtwin.envs.gym_envs import ReachEnv, TrackEnv
from armtwin.envs.vector import ReachVectorEnv

ROBOTS = ["scara", "irb120", "aubo_i5"]
#: a 100 mm tool given as a dict (mm, kg), as a user of the env writes it
TOOL_100 = {"tcp": [0, 0, 100], "mass": 0.3, "com": [0, 0, 40]}


@pytest.mark.parametrize("robot", ROBOTS)
@pytest.mark.parametrize("mode", ["kinematic", "articulation"])
def test_achieved_goal_is_100mm_from_the_flange_along_the_tool_axis(robot, mode):
    env = ReachEnv(robot, joint_mode=mode, tool=TOOL_100, orientation=True)
    try:
        obs, _ = env.reset(seed=3)
        rng = np.random.default_rng(0)
        for k in range(8):
            if k:
                obs, *_ = env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
            F = env.robot.flange_pose()                 # the engine's flange
            tip = obs["achieved_goal"][:3].astype(float)
            np.testing.assert_allclose(tip, F[:3, 3] + 0.100 * F[:3, 2], rtol=0, atol=2e-6)
            # the observation vector's tool position is the TCP too (after the 3n joint values)
            n = env.robot_spec.dof
            np.testing.assert_allclose(obs["observation"][3 * n:3 * n + 3], tip, rtol=0, atol=1e-7)
    finally:
        env.close()


def test_the_tool_body_and_mass_are_on_the_simulated_flange():
    pen = default_tools()[1]
    env = ReachEnv("irb120", joint_mode="articulation", tool=1)
    bare = ReachEnv("irb120", joint_mode="articulation")
    try:
        assert env.robot.tool is env.tool and (env.tool.number, env.tool.name, env.tool.mass) == (1, pen.name, pen.mass)
        assert {"tool", "tcp"} <= set(env.robot.link_index) and "tcp" not in bare.robot.link_index
        # the tool's weight sags the dynamic model's arm more than the bare flange's (same command)
        sag = []
        for e in (bare, env):
            e.reset(seed=0, options={"q": e.robot_spec.home})
            for _ in range(25):
                e.step(np.zeros(3, np.float32))
            sag.append(float(np.abs(e.robot.q - e.robot_spec.home).max()))
        assert sag[1] > sag[0]
    finally:
        env.close()
        bare.close()


@pytest.mark.parametrize("robot", ROBOTS)
def test_reach_with_a_tool_reaches_its_goals_with_the_tip(robot):
    """A proportional policy on (desired − achieved) drives the tool tip onto the goal: success,
    sparse reward 0, while the flange stays a tool length away from it."""
    env = ReachEnv(robot, joint_mode="kinematic", tool=TOOL_100, tool_step=0.04, episode_steps=80)
    try:
        for seed in range(3):
            obs, info = env.reset(seed=seed)
            for _ in range(80):
                d = obs["desired_goal"] - obs["achieved_goal"]
                obs, reward, _, truncated, info = env.step(np.clip(d / 0.04, -1, 1).astype(np.float32))
                if info["is_success"] or truncated:
                    break
            assert info["is_success"] and reward == 0.0, (seed, info)
            flange = env.robot.flange_pose()[:3, 3]
            assert np.linalg.norm(flange - obs["desired_goal"]) > 0.09
            assert np.linalg.norm(env.robot.tcp_pose()[:3, 3] - obs["desired_goal"]) < env.task.distance_threshold
    finally:
        env.close()


def test_reach_goals_are_sampled_at_the_tcp():
    """Goals are TCP poses of joints around home: with a joint window of 1 mrad they sit at the
    tool tip of the home pose, a tool length from the flange's home position (the 6-axis arms:
    the SCARA's prismatic joint is drawn over its whole stroke)."""
    for robot in ("irb120", "aubo_i5"):
        env = ReachEnv(robot, joint_mode="kinematic", tool=TOOL_100, goal_spread=1e-3, orientation=True)
        try:
            home = env.robot_spec.home
            tip, flange = env.kinematics.fk(home), env.kinematics.flange_of(env.kinematics.fk(home))
            for seed in range(3):
                obs, _ = env.reset(seed=seed)
                goal = obs["desired_goal"].astype(float)
                assert np.linalg.norm(goal[:3] - tip[:3, 3]) < 2e-3, robot
                assert np.linalg.norm(goal[:3] - flange[:3, 3]) > 0.098, robot
        finally:
            env.close()


def _rollout(env, seed, steps=20):
    rng = np.random.default_rng(11)
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for _ in range(steps):
        obs, r, te, tr, info = env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
        out.append((obs, r, info["distance"]))
    return out


@pytest.mark.parametrize("cls", [ReachEnv, TrackEnv])
def test_same_seed_same_rollout_with_a_tool(cls):
    a, b = (cls("aubo_i5", joint_mode="articulation", tool="spindle") for _ in range(2))
    try:
        ra, rb = _rollout(a, 4), _rollout(b, 4)
    finally:
        a.close()
        b.close()
    for x, y in zip(ra, rb):
        obs_x, obs_y = (x, y) if isinstance(x, dict) else (x[0], y[0])
        for key in obs_x:
            assert np.array_equal(obs_x[key], obs_y[key])
        if not isinstance(x, dict):
            assert x[1:] == y[1:]


def test_track_with_a_tool_follows_the_tcp_path_with_zero_action():
    env = TrackEnv("irb120", joint_mode="kinematic", tool=2, duration=1.0)
    try:
        obs, _ = env.reset(seed=1)
        for _ in range(env.task.episode_steps()):
            obs, reward, _, truncated, info = env.step(np.zeros(3, np.float32))
            assert info["distance"] < 1e-6 and not info["ik_failed"]
            tip = env.robot.tcp_pose()[:3, 3]
            assert np.linalg.norm(tip - env.robot.flange_pose()[:3, 3]) == pytest.approx(0.120, abs=1e-6)
            if truncated:
                break
    finally:
        env.close()


PROGRAM = "G21 G90\nG0 X-10 Y0 Z5\nG1 Z0 F1500\nG2 X10 Y0 R10 F3000\nG1 Y10\nG0 Z5\nM2\n"


@pytest.mark.parametrize("robot", ROBOTS)
def test_track_program_with_a_tool_commands_the_runners_joints(robot, tmp_path):
    """``run --tool 1``, the pendant with ``--tool 1`` and TrackEnv(program, tool=1): the same joints
    (a zero action is the runner's command), and the desired goals are the program's path of the tool tip."""
    from armtwin.envs.pendant import PendantConfig, PendantCore
    from armtwin.envs.runner import RunConfig, run_program

    spec = robots.get(robot)
    machine = machine_for(spec, tool=1)
    period = machine.control_period
    compiled = compile_program(PROGRAM, spec, machine)
    assert compiled.ok, compiled.refusal
    samples, q, _ = compiled.trajectory.arrays()
    log = tmp_path / "run.csv"
    res = run_program(compiled, spec, RunConfig(), log_path=str(log))
    assert res.max_error_mm < 0.01
    with open(log, newline="") as fh:
        rows = list(csv.reader(fh))
    n = spec.dof
    logged = np.array([[float(v) for v in r[8:8 + n]] for r in rows[1:]])
    np.testing.assert_allclose(logged, np.array([spec.to_display(x) for x in q]), rtol=0, atol=1e-4)

    core = PendantCore(spec, config=PendantConfig(dt=period, tool=1))
    try:
        planned = core.plan_program(PROGRAM)      # the robot stands at home, where programs start: no lead-in
    finally:
        core.close()
    assert not isinstance(planned, str), planned
    assert np.array_equal(np.array([p[0] for p in planned]), q)

    env = TrackEnv(robot, program=PROGRAM, tool=1, control="joint", joint_mode="kinematic",
                   control_freq=1.0 / period)
    try:
        obs, _ = env.reset(seed=0)
        np.testing.assert_allclose(env.robot.q, q[0], rtol=0, atol=1e-12)
        sent, goals, tips = [], [], []
        for k in range(len(q) - 1):
            obs, _, _, truncated, _ = env.step(np.zeros(env.action_space.shape, np.float32))
            sent.append(env.controller.q_ref.copy())
            goals.append(obs["desired_goal"].astype(float))
            tips.append(obs["achieved_goal"].astype(float))
            if truncated:
                break
    finally:
        env.close()
    assert len(sent) == len(q) - 1
    np.testing.assert_allclose(np.array(sent), q[1:], rtol=0, atol=1e-15)
    # the path is the program's own (the TCP of T1), and the tip is on it
    np.testing.assert_allclose(np.array(goals), samples.position[1:], rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.array(tips), np.array(goals), rtol=0, atol=1e-5)


def test_a_tool_object_and_a_custom_number_reach_the_program():
    """A Tool object outside the built-in table is the program's start tool under its own number."""
    tcp = np.eye(4)
    tcp[:3, 3] = [0.02, 0.0, 0.07]
    tool = Tool(7, "offset probe", ToolKind.NONE, tcp, 0.2)
    env = TrackEnv("irb120", program=PROGRAM, tool=tool, control="joint", joint_mode="kinematic", control_freq=100.0)
    try:
        obs, _ = env.reset(seed=0)
        assert env.tool is tool
        F = env.robot.flange_pose()
        np.testing.assert_allclose(obs["achieved_goal"], (F @ tcp)[:3, 3], atol=1e-6)
        np.testing.assert_allclose(obs["achieved_goal"], obs["desired_goal"], atol=1e-6)
    finally:
        env.close()


def test_the_batched_vector_env_observes_the_tcp_like_the_single_env():
    kw = {"joint_mode": "kinematic", "tool": TOOL_100}
    envs = ReachVectorEnv(3, "irb120", **kw)
    singles = [ReachEnv("irb120", **kw) for _ in range(3)]
    try:
        obs, _ = envs.reset(seed=10)
        rng = np.random.default_rng(2)
        single = [e.reset(seed=10 + i)[0] for i, e in enumerate(singles)]
        for _ in range(10):
            for i in range(3):
                for key in obs:
                    np.testing.assert_allclose(obs[key][i], single[i][key], atol=2e-6)
            a = rng.uniform(-1, 1, (3, 3))
            obs, *_ = envs.step(a)
            single = [e.step(a[i].astype(np.float32))[0] for i, e in enumerate(singles)]
        assert all("tcp" in r.link_index for r in envs.robots)
    finally:
        envs.close()
        for e in singles:
            e.close()


def test_make_passes_tool_through_gymnasium():
    env = gym.make("armtwin/ScaraReach-v0", tool="T1", joint_mode="kinematic")
    try:
        obs, _ = env.reset(seed=0)
        F = env.unwrapped.robot.flange_pose()
        np.testing.assert_allclose(obs["achieved_goal"], F[:3, 3] + 0.1 * F[:3, 2], atol=2e-6)
    finally:
        env.close()
