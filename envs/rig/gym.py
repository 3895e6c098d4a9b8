"""The twin inside a Gymnasium env: :class:`TwinSyncWrapper` couples an env's robot with the rig."""

from __future__ import annotations

from typing import Sequence

import gymnasium as gym
import numpy as np

from .link import RigLink
from .log import SyncSample, TwinLog
from .sync import Direction, SyncConfig, TwinSync

__all__ = ["TwinSyncWrapper"]


class TwinSyncWrapper(gym.Wrapper):
    """Couple an armtwin Gymnasium env's robot with the servo rig, in either direction.

    VIRTUAL_TO_REAL (default): each ``step`` first lets the env step (the policy commands the
    simulated robot and the world advances), then sends the mapped joints to the rig as targets
    — through a limiter that starts from the rig's measured joints (and again after the rig
    stopped), at ``limit_speed`` of each joint's speed limit: a policy's jump is a ramp for the
    rig, never a step.

    REAL_TO_VIRTUAL: the rig's measured joints drive the mapped simulated joints and the policy
    drives the others. Every command the env gives its robot has the mapped joints replaced by
    the rig's newest measurement (clipped to the joint ranges; the last one known while the
    link is down), so the world steps with them; the observation therefore shows the rig as
    of the start of the step. Use it to act with a policy on a robot whose first joints a
    person moves on the rig by hand, or to check a policy against measured joint motion. This
    goes through the robot's one explicit seam, :meth:`SimRobot.set_command_filter`; ``close``
    removes the filter.

    Both directions add ``info["twin"]`` = {"error_deg", "servo_deg", "latency_ms", "faults"}:
    ΔE, the servo joints, the latency and the link/rig faults of that sample. ``reset``
    re-sends the mode (the rig may have rebooted); the log's sample numbers and clock run on
    across episodes.

    Assumption: ``env.unwrapped.robot`` is the env's :class:`armtwin.envs.sim.SimRobot`
    (true for the armtwin envs; any env exposing such an attribute works).

    Args:
        env: the env to wrap.
        link: an open :class:`RigLink`.
        joints: 0-based robot joint indices mapped to the rig's motors.
        log: optional :class:`TwinLog`.
        direction: :class:`Direction` (or its value, "virtual-to-real" / "real-to-virtual").
        local_demo: REAL_TO_VIRTUAL: let the rig move its motors along its built-in sine.
        limit_speed: VIRTUAL_TO_REAL: the targets' speed limit as a share of each joint's (0, 1]
            (acceleration: that speed in 0.25 s); None sends the joints unlimited.

    Raises:
        ValueError: the env has no robot, ``link`` is not open (every step would only
            report LINK), or a joint the rig cannot stand for.
    """

    def __init__(self, env, link: RigLink, joints: Sequence[int] = (0, 1), log: TwinLog | None = None, *,
                 direction: Direction | str = Direction.VIRTUAL_TO_REAL, local_demo: bool = False,
                 limit_speed: float | None = 0.5) -> None:
        super().__init__(env)
        robot = getattr(env.unwrapped, "robot", None)
        if robot is None or not hasattr(robot, "command"):
            raise ValueError("TwinSyncWrapper needs env.unwrapped.robot to be a SimRobot")
        if not getattr(link, "is_open", False):
            raise ValueError("TwinSyncWrapper needs an open RigLink: call link.open() or use `with RigLink(...) as link`")
        direction = Direction.parse(direction)
        cfg = SyncConfig(tuple(joints), direction, local_demo=local_demo,
                         limit_speed=limit_speed if direction is Direction.VIRTUAL_TO_REAL else None)
        self.sync = TwinSync(robot, link, cfg, log)
        self._robot = robot
        self._filtering = direction is Direction.REAL_TO_VIRTUAL
        if self._filtering:
            robot.set_command_filter(self._rig_joints)

    def _rig_joints(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The command filter (REAL_TO_VIRTUAL): the mapped joints become the rig's newest
        measurement (clipped to the ranges, at rest); the others stay as the env commanded them."""
        state = self.sync.link.latest()
        if state is not None:
            idx, spec = self.sync.idx, self._robot.spec
            q[idx] = np.clip(np.radians(state.degrees[:len(idx)]), spec.lower[idx], spec.upper[idx])
            qd[idx] = 0.0
        return q, qd

    def close(self):
        if self._filtering:
            self._filtering = False
            self._robot.set_command_filter(None)  # the env's commands reach its robot unchanged again
        return super().close()

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.sync.start()  # the mode again (the rig may have rebooted); the log's clock keeps running
        info = dict(info)
        info["twin"] = self._info(self.sync.step(step_world=False))
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = dict(info)
        info["twin"] = self._info(self.sync.step(step_world=False))
        return obs, reward, terminated, truncated, info

    @staticmethod
    def _info(s: SyncSample) -> dict:
        return {"error_deg": s.error_deg, "servo_deg": s.servo_deg, "latency_ms": s.latency_ms, "faults": s.faults.names()}
