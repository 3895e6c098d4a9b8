"""Batched worlds: N robots in one PyBullet world, stepped as one Gymnasium vector env.

``gymnasium.make_vec("armtwin/IRB120Reach-v0", num_envs=16)`` builds a :class:`ReachVectorEnv`
(the ids register it as their ``vector_entry_point``; ``vectorization_mode="sync"`` or ``"async"``
still give Gymnasium's own vectorisation of single envs). Env i is the single env of the same id
and keyword arguments — the same options, spaces, task, rewards, episode ends and command path
(:meth:`SimRobot.command` then one :meth:`World.step` for all robots) — with these differences:

* all N robots stand in one world, ``spacing`` m apart on a grid (far enough never to touch), so
  one ``stepSimulation`` advances them all;
* the control, the kinematics and the scoring run for all N at once: the batch action interface
  (:mod:`armtwin.envs.actions`, with armtwin's batch IK for Cartesian control), the analytic batch
  FK of the measured joints for the tool poses — the TCP's with ``tool=`` — (the engine's own link
  poses agree to 4·10⁻⁷ m),
  one :class:`~armtwin.envs.gym_envs.ObservationLayout` call and one vectorised ``compute_reward``;
* no rendering.

Seeding follows Gymnasium: ``reset(seed=s)`` seeds env i with ``s + i`` (the same goals as a single
env reset with that seed), a list seeds each env; without a seed the envs continue their sequences.

Autoreset follows Gymnasium's vector API (``autoreset_mode``): ``next_step`` (default) — the step
after an env's episode ended resets it, ignores its action and returns its first observation with
reward 0; ``same_step`` — the ending step resets it and returns the first observation of the next
episode, the last one in ``info["final_obs"]`` / ``info["final_info"]``; ``disabled`` — nothing is
reset until ``reset(options={"reset_mask": mask})``.

``info`` holds arrays (N,) with Gymnasium's ``"_<key>"`` masks: ``is_success``, ``distance``,
``ik_failed``, ``unstable`` (and ``angle_error`` with orientation goals; ``instability``, a message
for the envs whose robot became unstable).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ..robots import RobotSpec
from . import gym_options as opt
from .gym_envs import ArmEnv, ReachEnv, TrackEnv
from .sim import World
from .tasks import workspace_radius

__all__ = ["ArmVectorEnv", "ReachVectorEnv", "TrackVectorEnv", "MAX_VECTOR_ENVS"]

#: most robots in one batched world
MAX_VECTOR_ENVS = 1024


class ArmVectorEnv(VectorEnv):
    """N armtwin envs of one kind in one PyBullet world (see the module docstring).

    Args:
        num_envs: N, 1 to :data:`MAX_VECTOR_ENVS`.
        robot: as the single env.
        autoreset_mode: ``next_step``, ``same_step`` or ``disabled`` (a Gymnasium ``AutoresetMode``).
        spacing: m between neighbouring robots (default: 2.2 × the robot's workspace radius).
        **kwargs: the single env's keyword arguments (all but ``render_mode``), checked as it checks them.
    """

    single_env_class: type[ArmEnv] = ArmEnv
    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(self, num_envs: int = 16, robot: str | RobotSpec = "irb120", *,
                 autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP, spacing: float | None = None,
                 **kwargs: Any) -> None:
        n = opt.whole("num_envs", num_envs, (1, MAX_VECTOR_ENVS))
        try:
            mode = AutoresetMode(autoreset_mode)
        except ValueError:
            raise ValueError(f"autoreset_mode must be one of {', '.join(m.value for m in AutoresetMode)}, "
                             f"got {autoreset_mode!r}") from None
        if kwargs.get("obs_type", "state") != "state" or kwargs.get("randomize") is not None:
            raise ValueError("the batched vector env has state observations and no randomisation; for image "
                             "observations or randomize use vectorization_mode='sync' or 'async'")
        if kwargs.get("cell") is not None:
            raise ValueError("the batched vector env has no workcell (its robots stand side by side on one floor); "
                             "for cell= use vectorization_mode='sync' or 'async'")
        if kwargs.get("render_mode") is not None:
            raise ValueError("a batched vector env does not render; leave render_mode out (or use "
                             "vectorization_mode='sync' for rendered single envs)")
        self._ctor = dict(num_envs=num_envs, robot=robot, autoreset_mode=mode, spacing=spacing, **kwargs)
        template = self.single_env_class(robot, **kwargs)  # checks every option; its world is not used
        try:
            spec = template.robot_spec
            r = workspace_radius(spec, template.tool)     # the tools of neighbours never touch either
            spacing = 2.2 * r if spacing is None else opt.number("spacing", spacing, (2.0 * r, 1000.0), "m", low_open=False)
            self.template = template
            self.num_envs = n
            self.single_observation_space = template.observation_space
            self.single_action_space = template.action_space
            self.observation_space = batch_space(template.observation_space, n)
            self.action_space = batch_space(template.action_space, n)
            self.metadata = {**type(self).metadata, "autoreset_mode": mode, "render_fps": template.metadata["render_fps"]}
            self.render_mode = None
            self.spec_robot = spec
            self.dt = template.dt
            self.layout = template.layout
            self.tasks = [template.make_task() for _ in range(n)]
            self.controller = template.make_controller(n)
        finally:
            template.close()
        self._kinematics = template.kinematics       # FK of the controlled point (a tool's TCP)
        self._terminate = template.terminates_on_success()
        side = int(math.ceil(math.sqrt(n)))
        self.world = World(template.physics, renderer="tiny")
        try:
            self.robots = [self.world.add_robot(spec, template.joint_mode, tool=template.tool,
                                                position=(spacing * (i % side), spacing * (i // side), 0.0))
                           for i in range(n)]
        except Exception:
            self.world.close()
            raise
        self._rngs: list[np.random.Generator | None] = [None] * n
        self._steps = np.zeros(n, dtype=int)
        self._ends = np.zeros(n, dtype=int)     # each env's episode length (steps)
        self._autoreset = np.zeros(n, dtype=bool)
        self._live = False

    # ----- copies -------------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        """Pickle as the constructor's arguments and each env's random-generator state (never the world)."""
        return {"ctor": self._ctor, "rngs": [None if g is None else g.bit_generator.state for g in self._rngs]}

    def __setstate__(self, state: dict[str, Any]) -> None:
        type(self).__init__(self, **state["ctor"])
        for i, st in enumerate(state["rngs"]):
            if st is not None:
                bitgen = getattr(np.random, st["bit_generator"])()
                bitgen.state = st
                self._rngs[i] = np.random.Generator(bitgen)

    # ----- the loop -------------------------------------------------------------------------------
    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        """Reset every env, or those of ``options["reset_mask"]`` ((N,) bools). ``seed``: an int (env i
        gets seed + i), a list of N ints or None, or None (continue each env's sequence)."""
        n = self.num_envs
        options = opt.reset_options(options, ("reset_mask",))
        mask = np.ones(n, dtype=bool)
        if "reset_mask" in options:
            m = np.asarray(options["reset_mask"])
            if m.shape != (n,) or m.dtype != bool:
                raise ValueError(f"options['reset_mask'] must be {n} bools, got {options['reset_mask']!r}")
            mask = m.copy()
        if seed is None:
            seeds: list[int | None] = [None] * n
        elif isinstance(seed, (list, tuple)):
            if len(seed) != n:
                raise ValueError(f"seed needs {n} values (or one int), got {len(seed)}")
            seeds = list(seed)
        else:
            seeds = [int(seed) + i for i in range(n)]
        for i in np.flatnonzero(mask):
            if seeds[i] is not None or self._rngs[i] is None:
                self._rngs[i] = seeding.np_random(seeds[i])[0]
        self._reset_rows(mask)
        self._autoreset[mask] = False
        self._live = True
        obs, achieved, desired = self._observe()
        return obs, self._infos(achieved, desired, np.zeros(n, dtype=bool))

    def _reset_rows(self, mask: np.ndarray) -> None:
        """Start new episodes for the envs of ``mask``: a task reset each, robots teleported at rest."""
        q0 = self.controller.q_ref.copy()
        home = self.spec_robot.home
        for i in np.flatnonzero(mask):
            q = self.tasks[i].reset(self._rngs[i], {})
            q0[i] = home if q is None else q
            self.robots[i].reset(q0[i])
            self.robots[i].command(q0[i])
        self.controller.reset(q0, mask)
        self._steps[mask] = 0
        self._ends[mask] = [self.tasks[i].episode_steps() for i in np.flatnonzero(mask)]

    def step(self, actions):
        """One control step of every env (see the module docstring for autoreset). Non-finite or
        wrongly shaped actions are refused (ValueError) before any state changes."""
        if not self._live:
            raise ValueError("call reset() before step()")
        n, k = self.num_envs, self.single_action_space.shape[0]
        try:
            a = np.asarray(actions, dtype=np.float64).reshape(n, k)
        except (TypeError, ValueError):
            raise ValueError(f"actions must be ({n}, {k}) numbers in [-1, 1], got {np.shape(actions)}") from None
        if not np.all(np.isfinite(a)):
            raise ValueError("actions have non-finite values; refused, nothing changed")
        a = np.clip(a, -1.0, 1.0)
        restart = self._autoreset.copy()      # next_step: these envs start over instead of acting
        live = ~restart
        reference = None
        if self.tasks[0].reference(0) is not None:     # residual control (Track): each env's path reference
            refs = [t.reference(int(s)) for t, s in zip(self.tasks, self._steps)]
            reference = (np.stack([r[0] for r in refs]), np.stack([r[1] for r in refs]))
        q_prev = self.controller.q_ref.copy()
        q_cmd, ik_failed = self.controller(a, reference)
        qd_cmd = (q_cmd - q_prev) / self.dt
        for i in np.flatnonzero(live):
            self.robots[i].command(q_cmd[i], qd_cmd[i])    # the G-code runner's command path
        self.world.step(1)
        self._steps[live] += 1
        if restart.any():
            self._reset_rows(restart)
            ik_failed = ik_failed & live
        obs, achieved, desired = self._observe()
        infos = self._infos(achieved, desired, ik_failed)
        rewards = self.tasks[0].compute_reward(achieved, desired).astype(np.float64)
        unstable = infos["unstable"]
        terminated = infos["is_success"] & self._terminate & live
        truncated = (unstable | (self._steps >= self._ends)) & live
        rewards[restart] = 0.0
        mode = self.metadata["autoreset_mode"]
        done = terminated | truncated
        if mode is AutoresetMode.NEXT_STEP:
            self._autoreset = done
        elif mode is AutoresetMode.SAME_STEP and done.any():
            infos["final_obs"] = np.array([{key: v[i] for key, v in obs.items()} if done[i] else None
                                           for i in range(n)], dtype=object)
            infos["_final_obs"] = done.copy()
            infos["final_info"] = np.array([{key: v[i] for key, v in infos.items() if not key.startswith("_")
                                             and key not in ("final_obs",)} if done[i] else None
                                            for i in range(n)], dtype=object)
            infos["_final_info"] = done.copy()
            self._reset_rows(done)
            obs, _, _ = self._observe()
        return obs, rewards, terminated, truncated, infos

    def _observe(self) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """The batch observation, and the float32 achieved and desired goals it holds."""
        q, qd = self.world.joint_states(self.robots)
        T = self._kinematics.fk_batch(q)
        goals = self.tasks[0].goals
        achieved_full = goals.of_pose(T)
        tasks, steps = self.tasks, self._steps
        if tasks[0].obs_size:
            task_obs = np.stack([t.observation(int(s), g) for t, s, g in zip(tasks, steps, achieved_full)])
        else:
            task_obs = np.zeros((len(tasks), 0))
        L = self.layout
        achieved = L.goals(achieved_full)
        desired = L.goals(np.stack([t.desired_goal(int(s)) for t, s in zip(tasks, steps)]))
        obs = {"observation": L.vectors(q, qd, self.controller.q_ref, T, task_obs),
               "achieved_goal": achieved, "desired_goal": desired.copy()}
        return obs, achieved, desired

    def _infos(self, achieved: np.ndarray, desired: np.ndarray, ik_failed: np.ndarray) -> dict[str, Any]:
        task = self.tasks[0]
        dist, ang = task.goals.errors(achieved, desired)
        unstable = np.array([not r.stable for r in self.robots])
        info: dict[str, Any] = {"is_success": task.is_success(achieved, desired), "distance": dist,
                                "ik_failed": np.asarray(ik_failed, dtype=bool), "unstable": unstable}
        if task.goals.orientation:
            info["angle_error"] = ang
        for key in list(info):
            info["_" + key] = np.ones(self.num_envs, dtype=bool)
        if unstable.any():
            info["instability"] = np.array([r.instability.message if not r.stable else None for r in self.robots],
                                           dtype=object)
            info["_instability"] = unstable.copy()
        return info

    def compute_reward(self, achieved_goal, desired_goal, info=None) -> np.ndarray:
        """Reward of goal batches ``(..., g)`` -> ``(...)`` float32, as the single env's."""
        return self.tasks[0].compute_reward(achieved_goal, desired_goal, info)

    def close_extras(self, **kwargs: Any) -> None:
        """Disconnect the world."""
        world = getattr(self, "world", None)
        if world is not None:
            world.close()


class ReachVectorEnv(ArmVectorEnv):
    """:class:`~armtwin.envs.gym_envs.ReachEnv` for N robots in one world (``gymnasium.make_vec``)."""

    single_env_class = ReachEnv


class TrackVectorEnv(ArmVectorEnv):
    """:class:`~armtwin.envs.gym_envs.TrackEnv` for N robots in one world (``gymnasium.make_vec``)."""

    single_env_class = TrackEnv
