"""Gymnasium environments over armtwin's simulated world.

The pieces are separate, in the panda-gym spirit:

* the **world** — :class:`armtwin.envs.sim.World`, the only code that talks to PyBullet
  (one client per environment, so many environments live in one process);
* the **robot** — a :class:`armtwin.envs.sim.SimRobot` in that world, in any joint model;
  every action ends in :meth:`SimRobot.command` followed by :meth:`World.step`, the very
  command path of the G-code runner;
* the **action interface** — joint deltas or Cartesian tool deltas through armtwin's own
  IK (:mod:`armtwin.envs.actions`);
* the **task** — :class:`~armtwin.envs.tasks.Reach` or :class:`~armtwin.envs.tasks.Track`
  (:mod:`armtwin.envs.tasks`), which samples goals and scores them.

:class:`ArmEnv` composes them; :class:`ReachEnv` and :class:`TrackEnv` choose the task and
document it. The registered ids live in :mod:`armtwin.envs.registration`, imported here.
"""

from __future__ import annotations

import os
import time
from types import MappingProxyType
from typing import Any, Callable

import gymnasium as gym
import math

import numpy as np
from gymnasium import spaces

from ..controllers.kinematics import chain_of, fk_batch
from ..controllers.transforms import transform
from ..robots import RobotSpec
from ..robots import get as get_robot
from .actions import CartesianDeltaControl, ControlMode, JointDeltaControl
from .sim import Camera, JointMode, PhysicsConfig, SimRobot, World, cameras_for
from .tasks import RewardType, Reach, Task, TimedPath, Track, gcode_path, random_path, workspace_radius
from . import registration as _registration

__all__ = ["ArmEnv", "ReachEnv", "TrackEnv", "DEFAULT_PHYSICS_DT"]

#: physics step (s) per joint model when ``physics_dt`` is not given: the kinematic model
#: needs no physics, the engine's implicit drive is accurate at 100 Hz, and the explicit
#: spring–damper of the hinge model needs PyBullet's default 240 Hz.
DEFAULT_PHYSICS_DT = MappingProxyType({JointMode.KINEMATIC: None, JointMode.ARTICULATION: 1.0 / 100.0,
                                       JointMode.HINGE: 1.0 / 240.0})

# "human" opens PyBullet's GUI, which needs a display; decided once, at import.
_RENDER_MODES = ["rgb_array", "human"] if os.environ.get("DISPLAY") else ["rgb_array"]


def _ik_solvers(spec: RobotSpec) -> tuple[Callable, Callable]:
    """armtwin's IK as ``(T, q_near) -> q | None`` and ``(T (N,4,4), q0) -> (Q, ok)``."""
    try:
        from ..controllers import ik
    except ImportError as exc:  # the IK module is a sibling package of this one
        raise RuntimeError(f"Cartesian control and Track need armtwin.controllers.ik ({exc})") from None

    def one(T: np.ndarray, q_near: np.ndarray) -> np.ndarray | None:
        r = ik.solve(spec, T, q_near)
        return r.best if r.ok else None

    def path(T: np.ndarray, q0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r = ik.solve_path(spec, T, q0)
        return r.q, r.ok

    return one, path


class ArmEnv(gym.Env):
    """A robot arm in armtwin's world doing a :class:`~armtwin.envs.tasks.Task`.

    Use :class:`ReachEnv` or :class:`TrackEnv` (their docstrings are the manuals); this
    class holds what they share. Subclasses implement :meth:`_make_task`.

    Args:
        robot: robot id (``scara``, ``irb120``, ``aubo_i5``) or a spec.
        joint_mode: ``kinematic``, ``hinge`` or ``articulation``.
        control: ``joint`` (joint position deltas) or ``cartesian`` (tool deltas via IK).
        orientation: the goal / action includes the tool orientation.
        control_freq: Hz, actions per simulated second.
        physics_dt: s, physics step (default per joint model, :data:`DEFAULT_PHYSICS_DT`).
        tool_step: m per step at action 1 (Cartesian control).
        rot_step: rad per step at action 1 (Cartesian control with orientation).
        joint_step: rad per step at action 1 (joint control; prismatic joints use tool_step / 4).
        render_mode: ``None``, ``"rgb_array"`` or ``"human"`` (PyBullet GUI; needs a display).
        width, height: pixels of ``rgb_array`` frames.
        camera: camera preset name (``iso``, ``front``, ``side``, ``top``).
    """

    metadata = {"render_modes": _RENDER_MODES, "render_fps": 25}

    def __init__(self, robot: str | RobotSpec = "irb120", *, joint_mode: str | JointMode = "articulation",
                 control: str | ControlMode = "cartesian", orientation: bool = False, control_freq: float = 25.0,
                 physics_dt: float | None = None, tool_step: float = 0.04, rot_step: float = 0.2,
                 joint_step: float = 0.05, render_mode: str | None = None, width: int = 320, height: int = 240,
                 camera: str = "iso") -> None:
        self.robot_spec = get_robot(robot) if isinstance(robot, str) else robot
        spec = self.robot_spec
        self.joint_mode = JointMode.parse(joint_mode)
        self.control = ControlMode.parse(control)
        self.orientation = bool(orientation)
        if not (np.isfinite(control_freq) and control_freq > 0):
            raise ValueError(f"control_freq must be > 0 Hz, got {control_freq}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not available here; choose one of "
                             f"{self.metadata['render_modes']}" + ("" if "human" in _RENDER_MODES else " (no display for 'human')"))
        if int(width) < 16 or int(height) < 16:
            raise ValueError("width and height must be at least 16 pixels")
        self.render_mode = render_mode
        self.dt = 1.0 / float(control_freq)  # s, control period
        if physics_dt is None:
            physics_dt = DEFAULT_PHYSICS_DT[self.joint_mode] or self.dt
        substeps = max(1, int(math.ceil(self.dt / float(physics_dt) - 1e-9)))  # never a longer physics step than asked
        self.physics = PhysicsConfig(dt=self.dt, substeps=substeps)
        self.metadata = {**type(self).metadata, "render_fps": int(round(control_freq))}  # a copy, per instance

        # workspace bounds: every reachable flange position lies in this box (reporting frame)
        r = workspace_radius(spec)
        self._box = (np.full(3, -r), np.full(3, r))
        self._ik, self._ik_path = _ik_solvers(spec) if self._needs_ik() else (None, None)
        self._chain = chain_of(spec)

        cameras = cameras_for(spec)
        if camera not in cameras:
            raise ValueError(f"unknown camera {camera!r}; choose one of: {', '.join(cameras)}")
        self._camera = cameras[camera]
        self._size = (int(width), int(height))

        # the world and the robot
        self.world = World(self.physics, gui=(render_mode == "human"), renderer="tiny")
        try:
            self.robot: SimRobot = self.world.add_robot(spec, self.joint_mode)
            self._mount_z = float(-self.robot.world_T_report[2, 3])  # m, the floor in the reporting frame

            # the action interface and the task
            if self.control is ControlMode.CARTESIAN:
                self.controller = CartesianDeltaControl(spec, self.dt, self._ik, orientation=self.orientation,
                                                        tool_step=tool_step, rot_step=rot_step, box=self._box)
            else:
                self.controller = JointDeltaControl(spec, self.dt, joint_step=joint_step, linear_step=tool_step / 4)
            self.task: Task = self._make_task()
        except Exception:
            self.world.close()
            raise

        self.action_space = spaces.Box(-1.0, 1.0, (self.controller.size,), np.float32)
        self.observation_space = self._make_observation_space()
        span = spec.upper - spec.lower
        self._q_mid, self._q_scale = 0.5 * (spec.upper + spec.lower), 2.0 / span
        self._v_scale, self._lag_scale = 1.0 / spec.max_velocity, 1.0 / span
        self._step_count = 0
        self._T_tool = np.eye(4)
        self._achieved = np.zeros(self.task.goals.size)
        self._desired_obs = np.zeros(self.task.goals.size, dtype=np.float32)
        self._wall = 0.0

    # ----- subclass hooks -----------------------------------------------------------------
    def _make_task(self) -> Task:
        raise NotImplementedError

    def _needs_ik(self) -> bool:
        return self.control is ControlMode.CARTESIAN

    # ----- spaces -------------------------------------------------------------------------
    def _make_observation_space(self) -> spaces.Dict:
        n = self.robot_spec.dof
        lo, hi = self._box
        rot = 2 if n == 4 else 6
        f = SimRobot.INSTABILITY_SPEED_FACTOR
        t_lo, t_hi = self.task.obs_bounds(lo, hi)
        low = np.concatenate([-np.ones(n), -f * np.ones(n), -np.ones(n), lo, -np.ones(rot), t_lo])
        high = np.concatenate([np.ones(n), f * np.ones(n), np.ones(n), hi, np.ones(rot), t_hi])
        self._obs_low, self._obs_high = low.astype(np.float32), high.astype(np.float32)
        g = self.task.goals.size
        g_lo = np.concatenate([lo, -np.ones(g - 3)]).astype(np.float32)
        g_hi = np.concatenate([hi, np.ones(g - 3)]).astype(np.float32)
        self._goal_low, self._goal_high = g_lo, g_hi
        return spaces.Dict({
            "observation": spaces.Box(self._obs_low, self._obs_high, dtype=np.float32),
            "achieved_goal": spaces.Box(g_lo, g_hi, dtype=np.float32),
            "desired_goal": spaces.Box(g_lo, g_hi, dtype=np.float32),
        })

    # ----- the loop -----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode. ``options``: ``"goal"`` (Reach: a goal vector), ``"q"`` (start joints),
        ``"path"`` (Track: a :class:`~armtwin.envs.tasks.TimedPath`)."""
        super().reset(seed=seed)  # reseeds only when a seed is given: never on every reset
        options = dict(options or {})
        q0 = self.task.reset(self.np_random, options)
        if options.get("q") is not None:
            q0 = np.asarray(options["q"], dtype=float)
        q0 = self.robot_spec.home if q0 is None else q0
        self.robot.reset(q0)
        self.robot.command(q0)
        self.controller.reset(q0)
        self._step_count = 0
        self._wall = time.perf_counter()
        obs = self._observe()
        return obs, self._info(obs["achieved_goal"], obs["desired_goal"], False)

    def step(self, action):
        a = np.clip(np.asarray(action, dtype=np.float64).reshape(-1), -1.0, 1.0)
        if a.shape != (self.controller.size,):
            raise ValueError(f"action needs {self.controller.size} values, got {a.size}")
        k = self._step_count
        desired = self._desired_obs  # the float32 desired goal the agent saw
        q_prev = self.controller.q_ref
        q_cmd, ik_failed = self.controller(a, self.task.reference(k))
        self.robot.command(q_cmd, (q_cmd - q_prev) / self.dt)  # the G-code runner's command path
        self.world.step(1)
        self._step_count = k + 1
        obs = self._observe()
        info = self._info(obs["achieved_goal"], desired, ik_failed)
        reward = float(self.task.reward_of(info["distance"], info.get("angle_error", 0.0), info["is_success"]))
        terminated = bool(info["is_success"] and self._terminate_on_success())
        truncated = info["unstable"] or self._step_count >= self.task.episode_steps()
        if info["unstable"]:
            info["instability"] = self.robot.instability.message
        if self.render_mode == "human":
            self._sync_real_time()
        return obs, reward, terminated, truncated, info

    def _terminate_on_success(self) -> bool:
        return False

    def _observe(self) -> dict[str, np.ndarray]:
        spec = self.robot_spec
        st = self.robot.state()
        q = st.q
        T = self.robot.flange_pose()  # as the engine has it
        self._T_tool = T
        self._achieved = self.task.goals.of_pose(T)
        rot = T[:2, 0] if spec.roll_only else T[:3, :2].T.ravel()
        vec = np.concatenate([(q - self._q_mid) * self._q_scale, st.qd * self._v_scale,
                              (self.controller.q_ref - q) * self._lag_scale, T[:3, 3], rot,
                              self.task.observation(self._step_count, self._achieved)])
        desired = self.task.desired_goal(self._step_count)
        lo, hi = self._goal_low, self._goal_high
        mn, mx = np.minimum, np.maximum  # plain ufuncs: np.clip's wrapper costs more than the work
        self._desired_obs = mn(mx(np.asarray(desired, dtype=np.float32), lo), hi)
        return {
            "observation": mn(mx(vec.astype(np.float32), self._obs_low), self._obs_high),
            "achieved_goal": mn(mx(self._achieved.astype(np.float32), lo), hi),
            "desired_goal": self._desired_obs.copy(),
        }

    def _info(self, achieved: np.ndarray, desired: np.ndarray, ik_failed: bool) -> dict[str, Any]:
        """Errors and flags of the goal pair the reward is computed from (float32, as observed)."""
        dist, ang, success = self.task.evaluate(achieved, desired)
        info = {"is_success": success, "distance": dist, "ik_failed": bool(ik_failed), "unstable": not self.robot.stable}
        if self.task.goals.orientation:
            info["angle_error"] = ang
        return info

    def compute_reward(self, achieved_goal, desired_goal, info=None) -> np.ndarray:
        """Reward of goal batches ``(..., g)`` -> ``(...)`` float32 (vectorised, for HER).

        ``info`` is not used; step k's reward equals
        ``compute_reward(obs[k+1]["achieved_goal"], obs[k]["desired_goal"], info)``.
        """
        return self.task.compute_reward(achieved_goal, desired_goal, info)

    # ----- rendering ----------------------------------------------------------------------
    @property
    def camera(self) -> Camera:
        """The camera ``rgb_array`` frames are rendered from (also used for evaluation videos)."""
        return self._camera

    @property
    def frame_size(self) -> tuple[int, int]:
        """(width, height) of rendered frames, pixels."""
        return self._size

    def render(self) -> np.ndarray | None:
        """An RGB frame (height, width, 3) uint8 in ``rgb_array`` mode; the GUI shows itself in ``human`` mode."""
        if self.render_mode != "rgb_array":
            return None
        w, h = self._size
        img = self.world.render(self._camera, w, h)
        pts = self.task.markers()
        if len(pts):
            wp = (self.robot.world_T_report @ np.c_[pts, np.ones(len(pts))].T).T[:, :3]
            uv = self._camera.project(wp, w, h)
            big = len(pts) == 1
            _draw_dots(img, uv, radius=max(2, w // 80) if big else 1, color=(230, 40, 40) if big else (0, 200, 230))
        return img

    def _sync_real_time(self) -> None:
        ahead = self._wall + self._step_count * self.dt - time.perf_counter()
        if ahead > 0:
            time.sleep(ahead)

    def close(self) -> None:
        """Disconnect the world (idempotent)."""
        world = getattr(self, "world", None)
        if world is not None:
            world.close()


def _draw_dots(img: np.ndarray, uv: np.ndarray, radius: int, color: tuple[int, int, int]) -> None:
    """Paint filled discs at pixel positions ``uv`` (N, 2) into ``img`` in place (NaN skipped)."""
    h, w = img.shape[:2]
    r = int(radius)
    dy, dx = np.mgrid[-r:r + 1, -r:r + 1]
    disc = dx ** 2 + dy ** 2 <= r * r + r
    dy, dx = dy[disc], dx[disc]
    ok = np.all(np.isfinite(uv), axis=1)
    if not np.any(ok):
        return
    c = np.round(uv[ok]).astype(int)
    xs = (c[:, 0:1] + dx[None]).reshape(-1)
    ys = (c[:, 1:2] + dy[None]).reshape(-1)
    inside = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
    img[ys[inside], xs[inside]] = color


class ReachEnv(ArmEnv):
    """Reach: move the tool to a random goal inside the robot's workspace.

    ## Description
    The robot starts at its ``home`` pose; a goal — a tool position, optionally with the
    tool orientation — is drawn at every reset as the flange pose of random joints around
    home (revolute joints within ±``goal_spread`` rad), kept when it is at least 8 cm above
    the floor and a fifth of the reach away from the J1 axis. With Cartesian control and no
    orientation, a goal must also be reachable by armtwin's IK with the tool orientation
    held from home. Each action goes through :meth:`SimRobot.command` and
    :meth:`World.step`, the command path of the G-code runner.

    ## Action space
    ``Box(-1, 1, (k,), float32)``; each control step moves a held reference:

    | control | orientation | k | meaning (per step, at action 1) |
    |---|---|---|---|
    | ``cartesian`` | False | 3 | tool dx, dy, dz in the base frame: ``tool_step`` m |
    | ``cartesian`` | True, SCARA | 4 | + tool roll about base z: ``rot_step`` rad |
    | ``cartesian`` | True, 6-axis | 6 | + rotation vector rx, ry, rz (base frame): ``rot_step`` rad |
    | ``joint`` | any | n | joint deltas: ``joint_step`` rad (prismatic: ``tool_step`` / 4 m) |

    Joint targets are clipped to the joint ranges and to the joint speed limits. A
    Cartesian step whose pose has no IK solution leaves the joints where they are and sets
    ``info["ik_failed"]``.

    ## Observation space
    ``Dict`` of float32 boxes (bounded; values are clipped to the bounds):

    | key | size | content |
    |---|---|---|
    | ``observation`` | n | joint positions scaled to [-1, 1] over their ranges |
    | | n | joint velocities / speed limits |
    | | n | (commanded − measured joints) / range: the drive lag |
    | | 3 | tool position, m, base frame |
    | | 2 or 6 | tool orientation: SCARA cos/sin of the roll; arms the first two columns of R |
    | ``achieved_goal`` | 3, 5 or 7 | tool goal vector (position; + roll cos/sin or quaternion xyzw) |
    | ``desired_goal`` | 3, 5 or 7 | the goal, same layout |

    ## Rewards
    ``reward="sparse"`` (default): 0 when the position error is below
    ``distance_threshold`` (and, with orientation, the angle error below
    ``angle_threshold``), else −1. ``reward="dense"``: −(position error in m + 0.1 ×
    angle error in rad). :meth:`compute_reward` gives the same numbers for batches.

    ## Starting state
    Home pose at rest; with ``options={"goal": g}`` the goal is ``g``, with
    ``options={"q": q}`` the robot starts at joints ``q``.

    ## Episode end
    Truncation after ``episode_steps`` steps or when the simulation becomes unstable
    (``info["instability"]`` says why); termination on success only with
    ``terminate_on_success=True``. ``info["is_success"]`` reports success at every step.

    ## Arguments
    ``gymnasium.make("armtwin/IRB120Reach-v0", **kwargs)``; ids ScaraReach, IRB120Reach and
    AuboI5Reach set ``robot``. All arguments of :class:`ArmEnv` (robot, joint_mode
    ="articulation", control="cartesian", orientation=False, control_freq=25.0,
    physics_dt=None, tool_step=0.04, rot_step=0.2, joint_step=0.05, render_mode=None,
    width=320, height=240, camera="iso") and:

    | argument | default | meaning |
    |---|---|---|
    | ``reward`` | ``"sparse"`` | ``"sparse"`` or ``"dense"`` |
    | ``distance_threshold`` | 0.02 | m, success radius |
    | ``angle_threshold`` | 0.1 | rad, success angle (with orientation) |
    | ``episode_steps`` | 50 | control steps per episode |
    | ``goal_spread`` | 1.2 | rad, joint window around home for goal sampling |
    | ``terminate_on_success`` | False | end the episode when the goal is reached |

    ## Version history
    * v0: initial version.
    """

    def __init__(self, robot: str | RobotSpec = "irb120", *, reward: str | RewardType = "sparse",
                 distance_threshold: float = 0.02, angle_threshold: float = 0.1, episode_steps: int = 50,
                 goal_spread: float = 1.2, terminate_on_success: bool = False, **kwargs: Any) -> None:
        self._task_args = dict(reward_type=RewardType.parse(reward), distance_threshold=distance_threshold,
                               angle_threshold=angle_threshold, episode_steps=episode_steps, goal_spread=goal_spread)
        self._terminate = bool(terminate_on_success)
        super().__init__(robot, **kwargs)

    def _make_task(self) -> Task:
        feasible = None
        if self.control is ControlMode.CARTESIAN and not self.orientation:
            R0 = fk_batch(self._chain, self.robot_spec.home[None])[0][:3, :3]
            home = self.robot_spec.home

            def feasible(T: np.ndarray) -> bool:
                return self._ik(transform(R0, T[:3, 3]), home) is not None

        return Reach(self.robot_spec, orientation=self.orientation, mount_z=self._mount_z, feasible=feasible,
                     **self._task_args)

    def _terminate_on_success(self) -> bool:
        return self._terminate


class TrackEnv(ArmEnv):
    """Track: follow a timed tool path; the reward comes from the path error.

    ## Description
    At every reset a tool path is drawn: a circle, a lemniscate or three straight
    segments (``path="random"`` picks one), 4–9 cm in size, in a horizontal or vertical
    plane around a random reachable point, timed over ``duration`` s with a minimum-jerk
    profile (it starts and ends at rest), the tool orientation held from home. With
    ``program="examples/irb120_circle.ngc"`` the path is that G-code program compiled as
    ``armtwin run`` compiles it (:func:`~armtwin.controllers.gcode.compile_program`: preflight,
    then the joints at every control step; same path every episode; the episode lasts the
    program time; a program that cannot run is a ValueError naming its first fault), and
    ``path_factory`` (a callable ``rng -> TimedPath``) takes any other source. A path without
    joints is solved by armtwin's IK along its length (branch continuity); the robot starts at
    rest on its first point.

    By default the action is a *residual* on the path: the reference of control step k is
    the path pose at (k + 1)·dt and its IK joints, and the action adds to it — with a
    ``program``, the reference joints are exactly the runner's commands, so a zero action is
    the G-code runner's plain feed-forward command. The policy learns the correction the
    joint model (e.g. ``hinge`` or ``articulation`` drive lag) needs. Every action goes
    through :meth:`SimRobot.command` and :meth:`World.step`.

    ## Action space
    ``Box(-1, 1, (k,), float32)``: as :class:`ReachEnv` (``cartesian``: k = 3, tool offset
    ``tool_step`` m; ``joint``: k = n, joint offsets ``joint_step`` rad) but, with
    ``residual=True``, added to the path reference instead of the held pose. Default
    ``tool_step`` here is 0.01 m.

    ## Observation space
    As :class:`ReachEnv` (``observation``: n + n + n + 3 + 2|6 values), then 3 ×
    ``lookahead`` values — the next path points relative to the desired goal, m — and the
    phase k / steps in [0, 1]. ``achieved_goal``: tool position (3,), m;
    ``desired_goal``: the path position at (k + 1)·dt (3,), m.

    ## Rewards
    ``reward="dense"`` (default): −(distance from the path point, m). ``reward="sparse"``:
    0 within ``distance_threshold`` m, else −1. Step k's reward is
    ``compute_reward(obs[k+1]["achieved_goal"], obs[k]["desired_goal"], info)``.

    ## Episode end
    Truncation at the end of the path (``duration`` × ``control_freq`` steps) or when the
    simulation becomes unstable; never terminated. ``info["is_success"]`` is True while the
    tool is within ``distance_threshold`` of the path.

    ## Arguments
    ``gymnasium.make("armtwin/IRB120Track-v0", **kwargs)``; ids ScaraTrack, IRB120Track and
    AuboI5Track set ``robot``. All arguments of :class:`ArmEnv` except ``orientation``
    (position paths, orientation held), and:

    | argument | default | meaning |
    |---|---|---|
    | ``reward`` | ``"dense"`` | ``"dense"`` or ``"sparse"`` |
    | ``distance_threshold`` | 0.005 | m, tracking tolerance |
    | ``duration`` | 4.0 | s per path (episode length) |
    | ``path`` | ``"random"`` | ``"random"``, ``"circle"``, ``"lemniscate"``, ``"segments"`` |
    | ``program`` | None | G-code file (or text) whose timed path replaces the random one |
    | ``path_factory`` | None | callable ``rng -> TimedPath`` overriding ``path`` |
    | ``residual`` | True | actions add to the path reference |
    | ``lookahead`` | 3 | future path points in the observation |
    | ``tool_step`` | 0.01 | m per step at action 1 |

    ## Version history
    * v0: initial version.
    """

    def __init__(self, robot: str | RobotSpec = "irb120", *, reward: str | RewardType = "dense",
                 distance_threshold: float = 0.005, duration: float = 4.0, path: str = "random",
                 program: str | None = None,
                 path_factory: Callable[[np.random.Generator], TimedPath] | None = None, residual: bool = True,
                 lookahead: int = 3, tool_step: float = 0.01, **kwargs: Any) -> None:
        if kwargs.get("orientation"):
            raise ValueError("Track follows positions; orientation=True is not supported")
        if not (np.isfinite(duration) and duration > 0):
            raise ValueError(f"duration must be > 0 s, got {duration}")
        self._reward = RewardType.parse(reward)
        self._threshold = float(distance_threshold)
        self._duration = float(duration)
        self._shape = str(path)
        self._factory = path_factory
        self._program = program
        self._residual = bool(residual)
        self._lookahead = int(lookahead)
        super().__init__(robot, tool_step=tool_step, **kwargs)

    def _needs_ik(self) -> bool:
        return True

    def _make_task(self) -> Task:
        spec = self.robot_spec
        home = spec.home
        T_home = fk_batch(self._chain, home[None])[0]
        centres = Reach(spec, mount_z=self._mount_z, goal_spread=0.8,
                        feasible=lambda T: self._ik(transform(T_home[:3, :3], T[:3, 3]), home) is not None)
        shape, duration, dt = self._shape, self._duration, self.dt

        def factory(rng: np.random.Generator) -> TimedPath:
            c = centres.sample_goal(rng)[:3]
            return random_path(rng, c, T_home[:3, :3], duration, dt, shape=shape)

        if self._program is not None and self._factory is None:
            fixed = gcode_path(self._program, spec, dt)
            self._factory = lambda rng: fixed
        if self._factory is None:
            random_path(np.random.default_rng(0), T_home[:3, 3], T_home[:3, :3], duration, dt, shape=shape)  # checks `path`

        def start(T: np.ndarray) -> np.ndarray | None:
            return self._ik(T, home)

        task = Track(spec, dt, self._factory or factory, self._ik_path, start, reward_type=self._reward,
                     distance_threshold=self._threshold, lookahead=self._lookahead, residual=self._residual)
        return task


_registration.register_envs()
