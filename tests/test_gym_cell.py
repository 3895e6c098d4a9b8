"""The Gymnasium envs in a workcell (``cell=``, issue 18.1): the bodies in the world, goals the arm
reaches without touching anything, and each step's collisions in ``info`` and the reward."""

from __future__ import annotations

import copy
import os
from dataclasses import replace

import numpy as np
import pytest

from armtwin import robots
from armtwin.envs.gym_envs import ReachEnv, TrackEnv
from armtwin.robots.workcell import default_cell

ROBOTS = ["scara", "irb120", "aubo_i5"]


def _goals_in_the_table(env, table, seeds) -> int:
    """How many of the episodes' goals lie inside the table (deeper than the cell's touch)."""
    top = float(table.pose[2, 3] + table.size[2] / 2)
    inside = 0
    for k in seeds:
        obs, _ = env.reset(seed=k)
        w = (env.robot.world_T_report @ np.r_[obs["desired_goal"][:3].astype(float), 1.0])[:3]
        over = np.all(np.abs(w[:2] - table.pose[:2, 3]) < np.asarray(table.size[:2]) / 2)
        inside += bool(over and w[2] < top - 0.001)
    return inside


@pytest.mark.parametrize("robot", ROBOTS)
def test_reach_goals_in_a_cell_are_reached_without_touching_it(robot):
    table = default_cell(robots.get(robot)).bodies[0]
    bare = ReachEnv(robot, joint_mode="kinematic")
    try:        # the same goals without the cell: some lie where the table would be (the AUBO's, drawn
        # around its home pose high above its table, do not in 40 episodes)
        assert _goals_in_the_table(bare, table, range(40)) > 0 or robot == "aubo_i5"
    finally:
        bare.close()
    env = ReachEnv(robot, cell="default", joint_mode="kinematic")
    try:
        assert _goals_in_the_table(env, table, range(40)) == 0
        R0 = env.kinematics.fk(env.robot_spec.home)[:3, :3]
        for k in range(10):
            obs, info = env.reset(seed=k)
            assert info["collision"] is False and info["collisions"] == ()
            T = np.eye(4)
            T[:3, :3], T[:3, 3] = R0, obs["desired_goal"][:3].astype(float)
            q = env._ik(T, env.robot_spec.home)      # the arm reaches the goal touching nothing
            assert q is not None and not env._collisions.interference(q), k
    finally:
        env.close()


def test_pressing_into_the_table_is_a_collision_with_its_penalty_and_reward_contract():
    env = ReachEnv("irb120", cell="default", joint_mode="kinematic", collision_penalty=2.5)
    try:
        obs, info = env.reset(seed=1)
        seen = {False: 0, True: 0}
        for _ in range(60):                                # straight down, into the table
            obs, r, term, trunc, info = env.step(np.array([0.0, 0.0, -1.0]))
            seen[info["collision"]] += 1
            base = float(env.task.compute_reward(obs["achieved_goal"], obs["desired_goal"], info))
            assert r == pytest.approx(base - (2.5 if info["collision"] else 0.0), abs=1e-6)
            assert r == float(env.compute_reward(obs["achieved_goal"], obs["desired_goal"], info))
            if info["collision"]:
                assert any("table" in c for c in info["collisions"]), info["collisions"]
            assert not term
            if trunc:
                break
        assert seen[False] and seen[True]                  # free above it, then touching it
        # HER's batch form: one info per relabelled goal pair
        a = np.stack([obs["achieved_goal"]] * 3)
        d = np.stack([obs["desired_goal"]] * 3)
        infos = np.array([{"collision": True}, {"collision": False}, {"collision": True}], dtype=object)
        got = env.compute_reward(a, d, infos)
        base = env.task.compute_reward(a, d, None)
        np.testing.assert_allclose(got, base - np.array([2.5, 0.0, 2.5]), atol=1e-6)
    finally:
        env.close()


def test_terminate_on_collision_ends_the_episode_and_no_cell_leaves_info_as_it_was():
    env = ReachEnv("irb120", cell="default", joint_mode="kinematic", terminate_on_collision=True)
    try:
        env.reset(seed=1)
        for _ in range(60):
            _, _, term, trunc, info = env.step(np.array([0.0, 0.0, -1.0]))
            if term or trunc:
                break
        assert term and info["collision"]
    finally:
        env.close()
    env = ReachEnv("irb120", joint_mode="kinematic")
    try:
        _, info = env.reset(seed=1)
        _, _, _, _, info2 = env.step(np.zeros(3))
        assert "collision" not in info and "collision" not in info2
    finally:
        env.close()


def test_the_robot_stands_at_the_cells_mount_and_a_copy_has_the_cell():
    spec = robots.get("irb120")
    cell = default_cell(spec)
    mount = np.eye(4)
    mount[:3, 3] = [0.1, -0.2, 0.3]
    table = cell.bodies[0]
    moved = replace(cell, mount=mount, bodies=(replace(table, pose=mount @ table.pose),))
    env = TrackEnv("irb120", cell=moved, joint_mode="kinematic")
    try:
        np.testing.assert_allclose(env.robot.world_T_report[:3, 3], [0.1, -0.2, 0.3], atol=1e-9)
        obs, info = env.reset(seed=0)
        assert info["collision"] is False
        twin = copy.deepcopy(env)
        try:
            assert twin.cell.name == moved.name and len(twin.cell.bodies) == 1
            np.testing.assert_array_equal(twin.cell.mount, mount)
            np.testing.assert_allclose(twin.robot.world_T_report, env.robot.world_T_report)
        finally:
            twin.close()
    finally:
        env.close()


@pytest.mark.parametrize("value, words", [
    ("no/such/cell.toml", "cannot read"),
    (42, "a cell file's path or a Cell"),
])
def test_a_bad_cell_option_is_one_clear_value_error(value, words):
    with pytest.raises(ValueError, match="cell") as exc:
        ReachEnv("irb120", cell=value)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_a_cell_file_with_a_mistake_names_its_line_and_a_fifo_is_refused(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[[body]]\nname = "t"\nshape = "box"\nsize = [1, 2]\n')
    with pytest.raises(ValueError, match=r"bad.toml:\d+"):
        ReachEnv("irb120", cell=str(bad))
    fifo = tmp_path / "cell.fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        ReachEnv("irb120", cell=str(fifo))


def test_the_batched_vector_env_refuses_a_cell_in_one_line():
    from armtwin.envs.vector import ReachVectorEnv
    with pytest.raises(ValueError, match="no workcell.*vectorization_mode='sync'"):
        ReachVectorEnv(2, "irb120", cell="default")


def test_track_in_a_cell_draws_paths_that_touch_nothing_and_refuses_one_through_the_table():
    from armtwin.envs.tasks import TimedPath
    env = TrackEnv("irb120", cell="default", joint_mode="kinematic")
    try:
        model = env._collisions.model
        for seed in range(4):
            env.reset(seed=seed)
            assert model.check(env.task._Q) == [], seed          # every drawn path is free all along
        # a straight line from above the table to 30 mm into it: refused with the pair, nothing changed
        home = env.kinematics.fk(env.robot_spec.home)
        table = env.cell.bodies[0]
        top = (np.linalg.inv(env.robot.world_T_report) @ table.pose @ [0, 0, table.size[2] / 2, 1.0])[:3]
        a, b = home.copy(), home.copy()
        a[:3, 3] = top + [0, 0, 0.05]
        b[:3, 3] = top + [0, 0, -0.03]
        t = np.array([0.0, 2.0])
        path = TimedPath(t, np.stack([a[:3, 3], b[:3, 3]]), home[:3, :3], name="into the table")
        before = env.task._Q.copy()
        with pytest.raises(ValueError, match="refused: .*touches table"):
            env.reset(options={"path": path})
        np.testing.assert_array_equal(env.task._Q, before)
    finally:
        env.close()
