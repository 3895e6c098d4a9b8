"""The one place where armtwin's Gymnasium ids are registered.

This module imports only Gymnasium (no PyBullet): the entry points are strings, so the
simulator loads when an environment is made. Importing :mod:`armtwin.envs.gym_envs`
registers the ids too; without importing anything first, ask Gymnasium to import this
module::

    import gymnasium as gym
    env = gym.make("armtwin.envs.registration:armtwin/IRB120Reach-v0", control="joint")

or ``import armtwin.envs.registration`` then ``gym.make("armtwin/IRB120Reach-v0")``.
Keyword arguments of ``gym.make`` reach the environment class (see :class:`ReachEnv` and
:class:`TrackEnv`, and :class:`~armtwin.envs.object_tasks.PickAndPlaceEnv`, for the options);
``gym.make_vec(id, num_envs=N)`` builds N of them in one batched world
(:mod:`armtwin.envs.vector`; PickAndPlace: N single envs, synchronously).
"""

from __future__ import annotations

from types import MappingProxyType

import gymnasium as gym

__all__ = ["ENV_IDS", "register_envs"]

_REACH = ("armtwin.envs.gym_envs:ReachEnv", "armtwin.envs.vector:ReachVectorEnv")
_TRACK = ("armtwin.envs.gym_envs:TrackEnv", "armtwin.envs.vector:TrackVectorEnv")
_PICK = ("armtwin.envs.object_tasks:PickAndPlaceEnv", None)      # make_vec: sync or async
_PUSH = ("armtwin.envs.object_tasks:PushEnv", None)

#: the robots' names in the ids, and each task's entry points and version
_ROBOTS = {"Scara": "scara", "IRB120": "irb120", "AuboI5": "aubo_i5"}
_TASKS = {"Reach-v0": _REACH, "Track-v1": _TRACK, "PickAndPlace-v0": _PICK, "Push-v0": _PUSH}

#: id -> ((entry point, vector entry point), default keyword arguments)
ENV_IDS = MappingProxyType({f"armtwin/{name}{task}": (points, {"robot": robot})
                            for task, points in _TASKS.items() for name, robot in _ROBOTS.items()})


def register_envs() -> None:
    """Register every id in :data:`ENV_IDS` with Gymnasium (idempotent).

    Episodes are truncated by the environments themselves (``episode_steps`` /
    ``duration``), so no ``max_episode_steps`` is registered. ``gymnasium.make_vec(id, num_envs=N)``
    builds the batched vector env (N robots in one world, :mod:`armtwin.envs.vector`);
    ``vectorization_mode="sync"`` / ``"async"`` vectorise single envs instead.
    """
    for env_id, ((entry_point, vector_entry_point), kwargs) in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, vector_entry_point=vector_entry_point,
                         kwargs=dict(kwargs))


register_envs()
