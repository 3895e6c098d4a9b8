"""Gymnasium environments over armtwin's simulated world.

The pieces are separate, in the panda-gym spirit:

* the **world** — :class:`armtwin.envs.sim.World`, the only code that talks to PyBullet
  (one client per environment, so many environments live in one process);
* the **robot** — a :class:`armtwin.envs.sim.SimRobot` in that world, in any joint model;
  every action ends in :meth:`SimRobot.command` followed by :meth:`World.step`, the very
  command path of the G-code runner;
* the **action interface** — joint deltas or Cartesian tool deltas through armtwin's own
  IK (:mod:`armtwin.envs.actions`);
* the **controlled point** — the flange, or with ``tool=`` the tool's TCP
  (:class:`~armtwin.controllers.tcp.TcpKinematics`): observations, goals, rewards, Cartesian
  actions and Track's paths are the TCP's, and the tool's body and mass are on the simulated
  flange as ``armtwin run --tool N`` puts them;
* the **task** — :class:`~armtwin.envs.tasks.Reach` or :class:`~armtwin.envs.tasks.Track`
  (:mod:`armtwin.envs.tasks`), which samples goals and scores them.

:class:`ArmEnv` composes them; :class:`ReachEnv` and :class:`TrackEnv` choose the task and
document it. The registered ids live in :mod:`armtwin.envs.registration`, imported here.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import time
from types import MappingProxyType
from typing import Any, Callable

import gymnasium as gym
import math
from dataclasses import dataclass

import numpy as np
from gymnasium import spaces
from gymnasium.utils import EzPickle

from ..controllers.tcp import TcpKinematics
from ..controllers.transforms import transform
from ..robots import RobotSpec
from ..robots import get as get_robot
from .collision import CollisionModel
from .interference import CollisionFilter
from .workcell import mount_of, place_cell
from .actions import CartesianDeltaBatch, CartesianDeltaControl, ControlMode, JointDeltaBatch, JointDeltaControl
from .sim import Camera, JointMode, PhysicsConfig, SimRobot, World, cameras_for
from .tasks import PATH_SHAPES, RewardType, Reach, Task, TimedPath, Track, gcode_path, random_path, workspace_radius
from . import gym_options as opt
from .gym_options import ObsType
from .randomize import Randomization, RandomizationSample
from . import registration as _registration

__all__ = ["ArmEnv", "ReachEnv", "TrackEnv", "ObservationLayout", "DEFAULT_PHYSICS_DT"]

#: physics step (s) per joint model when ``physics_dt`` is not given: the kinematic model
#: needs no physics, the engine's implicit drive is accurate at 100 Hz, and the explicit
#: spring–damper of the hinge model needs PyBullet's default 240 Hz.
DEFAULT_PHYSICS_DT = MappingProxyType({JointMode.KINEMATIC: None, JointMode.ARTICULATION: 1.0 / 100.0,
                                       JointMode.HINGE: 1.0 / 240.0})

# "human" opens PyBullet's GUI, which needs a display; decided once, at import.
_RENDER_MODES = ["rgb_array", "human"] if os.environ.get("DISPLAY") else ["rgb_array"]


def _ik_solvers(kin: TcpKinematics) -> tuple[Callable, Callable]:
    """armtwin's IK of the controlled point (TCP poses) as ``(T, q_near) -> q | None`` and
    ``(T (N,4,4), q0) -> (Q, ok)``."""

    def one(T: np.ndarray, q_near: np.ndarray) -> np.ndarray | None:
        r = kin.solve(T, q_near)
        return r.best if r.ok else None

    def path(T: np.ndarray, q0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r = kin.solve_path(T, q0)
        return r.q, r.ok

    return one, path


@dataclass(frozen=True, eq=False)
class ObservationLayout:
    """How robot states become the bounded float32 ``Dict`` observation — one code path for one env
    and for N robots of a batched vector env (see :class:`ReachEnv`'s observation table).

    Attributes:
        q_mid, q_scale: (n,) joint range middles and 2 / span: positions to [-1, 1].
        v_scale: (n,) 1 / speed limit.
        lag_scale: (n,) 1 / span: (commanded − measured) joints.
        roll_only: SCARA: the tool orientation is (cos, sin) of the roll.
        obs_low, obs_high: (D,) float32 bounds of ``observation``.
        goal_low, goal_high: (g,) float32 bounds of the goal vectors.
    """

    q_mid: np.ndarray
    q_scale: np.ndarray
    v_scale: np.ndarray
    lag_scale: np.ndarray
    roll_only: bool
    obs_low: np.ndarray
    obs_high: np.ndarray
    goal_low: np.ndarray
    goal_high: np.ndarray

    @classmethod
    def of(cls, spec: RobotSpec, box: tuple[np.ndarray, np.ndarray], task: Task) -> "ObservationLayout":
        """The layout for ``spec`` with tool positions inside ``box`` (m) and ``task``'s own part."""
        n, (lo, hi) = spec.dof, box
        rot = 2 if spec.roll_only else 6
        f = SimRobot.INSTABILITY_SPEED_FACTOR
        t_lo, t_hi = task.obs_bounds(lo, hi)
        low = np.concatenate([-np.ones(n), -f * np.ones(n), -np.ones(n), lo, -np.ones(rot), t_lo]).astype(np.float32)
        high = np.concatenate([np.ones(n), f * np.ones(n), np.ones(n), hi, np.ones(rot), t_hi]).astype(np.float32)
        g = task.goals.size
        span = spec.upper - spec.lower
        return cls(0.5 * (spec.upper + spec.lower), 2.0 / span, 1.0 / spec.max_velocity, 1.0 / span, spec.roll_only,
                   low, high, np.concatenate([lo, -np.ones(g - 3)]).astype(np.float32),
                   np.concatenate([hi, np.ones(g - 3)]).astype(np.float32))

    def space(self) -> spaces.Dict:
        """The observation space of one env."""
        return spaces.Dict({
            "observation": spaces.Box(self.obs_low, self.obs_high, dtype=np.float32),
            "achieved_goal": spaces.Box(self.goal_low, self.goal_high, dtype=np.float32),
            "desired_goal": spaces.Box(self.goal_low, self.goal_high, dtype=np.float32),
        })

    def vectors(self, q: np.ndarray, qd: np.ndarray, q_ref: np.ndarray, T: np.ndarray,
                task: np.ndarray) -> np.ndarray:
        """``observation`` (N, D) float32 of joints q, qd, q_ref (N, n), tool poses T (N, 4, 4) and the
        task's part (N, m), clipped to the bounds."""
        rot = T[:, :2, 0] if self.roll_only else T[:, :3, :2].transpose(0, 2, 1).reshape(len(T), 6)
        vec = np.concatenate([(q - self.q_mid) * self.q_scale, qd * self.v_scale, (q_ref - q) * self.lag_scale,
                              T[:, :3, 3], rot, task], axis=1)
        # plain ufuncs: np.clip's wrapper costs more than the work
        return np.minimum(np.maximum(vec.astype(np.float32), self.obs_low), self.obs_high)

    def goals(self, g: np.ndarray) -> np.ndarray:
        """Goal vectors (..., g) as float32, clipped to the bounds."""
        return np.minimum(np.maximum(np.asarray(g, dtype=np.float32), self.goal_low), self.goal_high)


#: the physics step of a kinematic env whose task moves a gripper's jaws (they close by contact), s
JAWS_PHYSICS_DT = 1.0 / 240.0


class ArmEnv(gym.Env, EzPickle):
    """A robot arm in armtwin's world doing a :class:`~armtwin.envs.tasks.Task`.

    Use :class:`ReachEnv` or :class:`TrackEnv` (their docstrings are the manuals); this
    class holds what they share. Subclasses implement :meth:`make_task`.

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
        camera: camera preset name (``iso``, ``front``, ``side``, ``top``); also the view of
            image observations.
        obs_type: ``state``, ``rgb``, ``rgbd`` or ``both`` (:class:`~armtwin.envs.gym_options.ObsType`).
        image_size: pixels per side of image observations.
        randomize: per-episode domain randomisation (:class:`~armtwin.envs.randomize.Randomization`
            or a dict of its fields); None: off. Its ``fitted`` file must be this robot's and needs
            the joint model it was fitted for: ``joint_mode="hinge"`` for hinge gains,
            ``"articulation"`` for an articulation drive (ValueError otherwise).
        tool: the tool on the flange, whose TCP is the controlled point
            (:func:`~armtwin.envs.gym_options.tool`): None or 0 the bare flange; a number (``2``,
            ``"T2"``), name or kind (``"spindle"``) of the built-in tool table; a
            :class:`~armtwin.controllers.tools.Tool`; or a dict in the tool table's units
            (``{"tcp": [0, 0, 100], "mass": 0.3}``: mm, kg).
        cell: the workcell the robot works in (:func:`~armtwin.envs.gym_options.cell`: None, ``"default"``,
            a cell file or a :class:`~armtwin.robots.workcell.Cell`): its bodies are in the world and
            the images, the robot stands at its mount, goals are drawn where the arm reaches them
            without touching anything, and each step's ``info`` says whether the arm touches a body
            or itself (``"collision"``, and ``"collisions"``: who touches what) — by the collision
            preflight's rule (:class:`~armtwin.envs.collision.CollisionModel`: the tool may press
            into work bodies by the cell's ``touch``).
        collision_penalty: with a cell, taken off the reward of each step that ends in a collision
            (:meth:`compute_reward` needs the step's ``info`` to know it).
        terminate_on_collision: with a cell, a collision ends the episode (``terminated``).
    """

    metadata = {"render_modes": _RENDER_MODES, "render_fps": 25}

    def __init__(self, robot: str | RobotSpec = "irb120", *, joint_mode: str | JointMode = "articulation",
                 control: str | ControlMode = "cartesian", orientation: bool = False, control_freq: float = 25.0,
                 physics_dt: float | None = None, tool_step: float = 0.04, rot_step: float = 0.2,
                 joint_step: float = 0.05, render_mode: str | None = None, width: int = 320, height: int = 240,
                 camera: str = "iso", obs_type: str | ObsType = "state", image_size: int = 84,
                 randomize: Randomization | dict | None = None, tool: Any = None, cell: Any = None,
                 collision_penalty: float = 1.0, terminate_on_collision: bool = False) -> None:
        # every option is checked here, before a world exists (bounds: armtwin.envs.gym_options)
        if isinstance(robot, RobotSpec):
            self.robot_spec = robot
        else:
            try:
                self.robot_spec = get_robot(robot)
            except KeyError as exc:  # UnknownRobotError: a bad option value, like any other
                raise ValueError(exc.args[0] if exc.args else str(exc)) from None
        spec = self.robot_spec
        self.joint_mode = JointMode.parse(joint_mode)
        self.control = ControlMode.parse(control)
        self.orientation = opt.flag("orientation", orientation)
        control_freq = opt.number("control_freq", control_freq, opt.CONTROL_FREQ_HZ, "Hz", low_open=False)
        if physics_dt is not None:
            physics_dt = opt.number("physics_dt", physics_dt, opt.PHYSICS_DT_S, "s", low_open=False)
        tool_step = opt.number("tool_step", tool_step, opt.TOOL_STEP_M, "m")
        rot_step = opt.number("rot_step", rot_step, opt.ANGLE_STEP_RAD, "rad")
        joint_step = opt.number("joint_step", joint_step, opt.ANGLE_STEP_RAD, "rad")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not available here; choose one of "
                             f"{self.metadata['render_modes']}" + ("" if "human" in _RENDER_MODES else " (no display for 'human')"))
        width = opt.whole("width", width, opt.FRAME_WIDTH)
        height = opt.whole("height", height, opt.FRAME_HEIGHT)
        cameras = cameras_for(spec)
        if not isinstance(camera, str) or camera not in cameras:
            raise ValueError(f"unknown camera {camera!r}; choose one of: {', '.join(cameras)}")
        self.obs_type = ObsType.parse(obs_type)
        self.image_size = opt.whole("image_size", image_size, opt.IMAGE_SIZE)
        self.randomization = Randomization.of(randomize)
        # randomize.fitted: a drive fitted for this robot, in its joint model (else a ValueError), ready to draw
        self._fitted_twin = None if self.randomization is None else self.randomization.fitted_twin(spec, self.joint_mode)
        #: the tool on the flange (None: the bare flange) and the kinematics of its TCP
        self.tool = opt.tool("tool", tool)
        #: the workcell (None: the robot alone on the floor)
        self.cell = opt.cell("cell", cell, spec)
        self.collision_penalty = opt.number("collision_penalty", collision_penalty, opt.COLLISION_PENALTY, low_open=False)
        self._terminate_on_collision = opt.flag("terminate_on_collision", terminate_on_collision)
        self.kinematics = TcpKinematics(spec, self.tool)
        self.render_mode = render_mode
        self.dt = 1.0 / control_freq  # s, control period
        if physics_dt is None:      # the kinematic model steps once per control step; a gripper's jaws need more
            physics_dt = DEFAULT_PHYSICS_DT[self.joint_mode] or (min(self.dt, JAWS_PHYSICS_DT) if self._moves_jaws()
                                                                 else self.dt)
        # never a longer physics step than asked; at most dt / PHYSICS_DT_S[0] substeps (bounded above)
        substeps = max(1, int(math.ceil(self.dt / physics_dt - 1e-9)))
        self.physics = PhysicsConfig(dt=self.dt, substeps=substeps)
        self.metadata = {**type(self).metadata, "render_fps": int(round(control_freq))}  # a copy, per instance

        # workspace bounds: every reachable TCP position lies in this box (reporting frame)
        r = workspace_radius(spec, self.tool)
        #: (low (3,), high (3,)) m: every reachable TCP (flange) position lies in this box (reporting frame)
        self.workspace_box = (np.full(3, -r), np.full(3, r))
        self._tool_step, self._joint_step = tool_step, joint_step
        self._ik, self._ik_path = _ik_solvers(self.kinematics) if self._needs_ik() else (None, None)

        self._camera = cameras[camera]
        self._size = (width, height)

        # the world and the robot
        self.world = World(self.physics, gui=(render_mode == "human"), renderer="tiny")
        self._collisions: CollisionFilter | None = None
        try:
            position, rotation = ((0.0, 0.0, 0.0), None) if self.cell is None else mount_of(self.cell)
            self.robot: SimRobot = self.world.add_robot(spec, self.joint_mode, tool=self.tool,  # its mass a payload
                                                        position=position, orientation=rotation,
                                                        jaws=not self._moves_jaws())
            self._mount_z = float(-self.robot.world_T_report[2, 3])  # m, the floor in the reporting frame
            self._placed = None
            if self.cell is not None:
                self._placed = place_cell(self.world, self.cell, self.robot)
                self._collisions = CollisionFilter(CollisionModel(spec, self.cell, tool=self.tool))

            # the action interface and the task
            if self.control is ControlMode.CARTESIAN:
                self.controller = CartesianDeltaControl(spec, self.dt, self._ik, orientation=self.orientation,
                                                        tool_step=tool_step, rot_step=rot_step, box=self.workspace_box,
                                                        kinematics=self.kinematics)
            else:
                self.controller = JointDeltaControl(spec, self.dt, joint_step=joint_step, linear_step=tool_step / 4)
            self.task: Task = self.make_task()
        except Exception:
            if self._collisions is not None:
                self._collisions.model.close()
            self.world.close()
            raise

        self.action_space = spaces.Box(-1.0, 1.0, (self.controller.size + self.extra_actions,), np.float32)
        self.layout = ObservationLayout.of(spec, self.workspace_box, self.task)
        self.observation_space = self._observation_space()
        #: the current episode's randomisation draw (None when randomisation is off)
        self.randomization_sample: RandomizationSample | None = None
        self._pending: collections.deque = collections.deque()   # actions waiting out the latency
        self._step_count = 0
        self._T_tool = np.eye(4)
        self._achieved = np.zeros(self.task.goals.size)
        self._live = False  # reset() starts the first episode
        self._wall = 0.0

    def _observation_space(self) -> spaces.Dict:
        """The layout's Dict space, with the image for image observation types."""
        base = self.layout.space()
        if self.obs_type is ObsType.STATE:
            return base
        s, c = self.image_size, 4 if self.obs_type is ObsType.RGBD else 3
        keys = {"image": spaces.Box(0, 255, (s, s, c), np.uint8)}
        if self.obs_type is ObsType.BOTH:
            keys = {"observation": base["observation"], **keys}
        return spaces.Dict({**keys, "achieved_goal": base["achieved_goal"], "desired_goal": base["desired_goal"]})

    @property
    def depth_scale(self) -> float:
        """m per unit of the depth channel of ``rgbd`` images (255 units span twice the camera distance)."""
        return 2.0 * self._camera.distance / 255.0

    # ----- copies ---------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        """Pickle (pickle, cloudpickle, ``copy.deepcopy``) as the constructor's arguments and the
        random generator's state — never the PyBullet world.

        The copy builds a world of its own (so closing or collecting either never touches the
        other, as Ray workers and vector envs need); it starts like a new env: call ``reset()``
        (without a seed its episodes continue the original's random sequence).
        """
        state = EzPickle.__getstate__(self)
        state["np_random"] = None if self._np_random is None else self._np_random.bit_generator.state
        state["np_random_seed"] = self._np_random_seed
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        type(self).__init__(self, *state["_ezpickle_args"], **state["_ezpickle_kwargs"])
        if state.get("np_random") is not None:
            bitgen = getattr(np.random, state["np_random"]["bit_generator"])()
            bitgen.state = state["np_random"]
            self._np_random, self._np_random_seed = np.random.Generator(bitgen), state["np_random_seed"]

    # ----- subclass hooks (the batched vector envs use them too) -----------------------------
    #: action values after the arm's (an object task's gripper): :meth:`_act` takes them
    extra_actions = 0

    def _act(self, extra: np.ndarray) -> None:
        """Apply the action's :attr:`extra_actions` values (after the arm's command, before the step)."""

    def _after_step(self) -> None:
        """After the world's step, before the observation (an object task's gripper acts here)."""

    def _moves_jaws(self) -> bool:
        """The env simulates a gripper tool's jaws as bodies of their own (the robot is then loaded
        without drawn ones): tasks with objects do."""
        return False

    def _reset_objects(self, options: dict[str, Any]) -> None:
        """Place the episode's objects (after the robot is at its start; ``options`` as given to reset)."""

    def _achieved_goal(self, T: np.ndarray) -> np.ndarray:
        """The achieved goal vector with the TCP at ``T`` (reporting frame): the TCP's own (Reach, Track)."""
        return self.task.goals.of_pose(T)

    def _task_observation(self, T: np.ndarray) -> np.ndarray:
        """The task's part of the observation vector (after the robot's)."""
        return self.task.observation(self._step_count, self._achieved)

    def make_task(self) -> Task:
        """A fresh task of this env's kind and settings (the batched vector env makes one per robot)."""
        raise NotImplementedError

    def terminates_on_success(self) -> bool:
        """Whether an episode ends (terminated) when the goal is reached."""
        return False

    def make_controller(self, num: int) -> JointDeltaBatch | CartesianDeltaBatch:
        """The action interface of this env's settings for ``num`` robots, with the batch IK."""
        if self.control is ControlMode.CARTESIAN:
            kin = self.kinematics

            def ik_batch(T: np.ndarray, q_near: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                r = kin.solve_batch(T, q_near)
                return r.q, r.ok

            c = self.controller
            return CartesianDeltaBatch(self.robot_spec, self.dt, ik_batch, num, orientation=self.orientation,
                                       tool_step=c.tool_step, rot_step=c.rot_step, box=self.workspace_box,
                                       kinematics=kin)
        return JointDeltaBatch(self.robot_spec, self.dt, num, joint_step=self._joint_step,
                               linear_step=self._tool_step / 4)

    def _needs_ik(self) -> bool:
        return self.control is ControlMode.CARTESIAN or self.cell is not None   # a cell: goals are checked by IK

    def _path_contact(self, Q: np.ndarray) -> str | None:
        """In a cell: the first contact along the joint path ``Q`` (N, n) (the preflight's check,
        exact between the samples too), or None when it touches nothing."""
        assert self._collisions is not None
        contacts = self._collisions.model.check(Q, np.arange(len(Q)) * self.dt)
        if not contacts:
            return None
        c = contacts[0]
        return f"{c.link} touches {'link ' if c.self_collision else ''}{c.other} at t = {c.time:.2f} s, {c.depth * 1000:.1f} mm deep"

    def _free(self, q: np.ndarray | None) -> bool:
        """Joints ``q`` exist and, in a cell, touch nothing (the collision preflight's rule)."""
        return q is not None and (self._collisions is None or not self._collisions.interference(q))

    # ----- the loop -----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode. ``options``: ``"q"`` (start joints, inside their ranges) and the task's own
        (Reach: ``"goal"``, a goal vector inside the goal box; Track: ``"path"``, a
        :class:`~armtwin.envs.tasks.TimedPath`). A refused option (ValueError) changes nothing."""
        options = opt.reset_options(options, ("q",) + self.task.option_keys)
        q_start = self._checked_joints(options["q"]) if "q" in options else None
        if "goal" in options:
            options["goal"] = self._checked_goal(options["goal"])
        super().reset(seed=seed)  # reseeds only when a seed is given: never on every reset
        q0 = self.task.reset(self.np_random, options)
        q0 = q_start if q_start is not None else (self.robot_spec.home if q0 is None else q0)
        if self.randomization is not None:
            self._randomize()
        self.robot.reset(q0)
        self.robot.command(q0)
        self.controller.reset(q0)
        self._reset_objects(options)
        self._step_count = 0
        self._live = True
        self._wall = time.perf_counter()
        obs = self._observe()
        return obs, self._info(obs["achieved_goal"], obs["desired_goal"], False, self._touching())

    def _randomize(self) -> None:
        """Draw this episode's twin from the env's generator and apply it (drive, masses, payload)."""
        r = self.randomization
        spec = self.robot_spec
        d = self.randomization_sample = r.sample(self.np_random, self.robot.num_links, self._fitted_twin)
        if r.dynamic and self.joint_mode is not JointMode.KINEMATIC:
            # the drawn fitted gains (randomize.fitted) are the nominal drive the factors multiply
            base = spec.drive if d.fitted is None else dataclasses.replace(spec.drive, **d.fitted)
            effort = spec.max_effort if base.effort is None else np.asarray(base.effort, dtype=float)
            self.robot.set_drive(dataclasses.replace(
                base, stiffness=tuple(np.asarray(base.stiffness) * d.gains), damping=tuple(np.asarray(base.damping) * d.gains),
                position_gain=min(1.0, base.position_gain * d.gains), velocity_gain=min(1.0, base.velocity_gain * d.gains),
                friction=tuple(np.asarray(base.friction) * d.friction),
                joint_damping=tuple(np.asarray(base.joint_damping) * d.joint_damping), effort=tuple(effort * d.effort)))
            self.robot.set_payload(d.payload)
            self.robot.set_mass_scale(d.mass)
        self._pending = collections.deque([np.zeros(self.action_space.shape[0])] * d.latency)

    def _checked_joints(self, q: Any) -> np.ndarray:
        """``options["q"]``: n finite joint values inside the joint ranges (rad / m), or ValueError."""
        spec = self.robot_spec
        q = opt.vector("options['q']", q, spec.dof)
        outside = (q < spec.lower - 1e-9) | (q > spec.upper + 1e-9)
        if np.any(outside):
            k = int(np.argmax(outside))
            raise ValueError(f"options['q']: joint {k + 1} = {q[k]:.6g} is outside its range "
                             f"[{spec.lower[k]:.6g}, {spec.upper[k]:.6g}] {'m' if spec.prismatic[k] else 'rad'}")
        return q

    def _checked_goal(self, goal: Any) -> np.ndarray:
        """``options["goal"]``: a goal vector inside the goal box, unit orientation part, or ValueError."""
        g = opt.vector("options['goal']", goal, self.task.goals.size)
        lo, hi = self.layout.goal_low[:3], self.layout.goal_high[:3]
        if np.any(g[:3] < lo) or np.any(g[:3] > hi):
            raise ValueError(f"options['goal']: position {g[:3].tolist()} m is outside the workspace box "
                             f"[{lo[0]:.3f}, {hi[0]:.3f}] m per axis")
        if g.size > 3 and abs(float(np.linalg.norm(g[3:])) - 1.0) > 1e-3:
            what = "(cos, sin) of the roll" if g.size == 5 else "quaternion (x, y, z, w)"
            raise ValueError(f"options['goal']: the orientation part must be a unit {what}, got {g[3:].tolist()}")
        return g

    def step(self, action):
        """One control step. A non-finite or wrongly shaped action is refused (ValueError) before any state
        changes; values outside [-1, 1] are clipped."""
        if not self._live:
            raise gym.error.ResetNeeded("call reset() before step()")
        n = self.controller.size + self.extra_actions
        try:
            a = np.asarray(action, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise ValueError(f"an action is {n} numbers in [-1, 1], got {action!r}") from None
        if a.shape != (n,):
            raise ValueError(f"action needs {n} values, got {a.size}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"action has non-finite values {a.tolist()}; refused, nothing changed")
        a = np.clip(a, -1.0, 1.0)
        if self._pending:   # action latency (randomisation): the action of `latency` steps ago acts now
            self._pending.append(a)
            a = self._pending.popleft()
        k = self._step_count
        q_prev = self.controller.q_ref
        m = self.controller.size
        q_cmd, ik_failed = self.controller(a[:m], self.task.reference(k))
        self.robot.command(q_cmd, (q_cmd - q_prev) / self.dt)  # the G-code runner's command path
        if self.extra_actions:
            self._act(a[m:])
        self.world.step(1)
        self._after_step()
        self._step_count = k + 1
        obs = self._observe()
        info = self._info(obs["achieved_goal"], obs["desired_goal"], ik_failed, self._touching())
        reward = self.task.reward_of(info["distance"], info.get("angle_error", 0.0), info["is_success"])
        if info.get("collision"):
            reward = np.float32(reward) - np.float32(self.collision_penalty)
        reward = float(reward)
        terminated = bool(info["is_success"] and self.terminates_on_success())
        if info.get("collision") and self._terminate_on_collision:
            terminated = True
        truncated = info["unstable"] or self._step_count >= self.task.episode_steps()
        if info["unstable"]:
            info["instability"] = self.robot.instability.message
        if self.render_mode == "human":
            self._sync_real_time()
        return obs, reward, terminated, truncated, info

    def _observe(self) -> dict[str, np.ndarray]:
        st = self.robot.state()
        self._q_seen = st.q        # the joints of this observation (a cell's collision query reads them)
        T = self.robot.tcp_pose()  # the TCP (the flange without a tool), as the engine has it
        self._T_tool = T
        self._achieved = self._achieved_goal(T)
        L, kind = self.layout, self.obs_type
        obs: dict[str, np.ndarray] = {}
        if kind is ObsType.STATE or kind is ObsType.BOTH:
            task = self._task_observation(T)
            vec = L.vectors(st.q[None], st.qd[None], self.controller.q_ref[None], T[None], task[None])[0]
            d = self.randomization_sample
            if d is not None and d.obs_noise > 0:
                noise = self.np_random.normal(0.0, d.obs_noise, vec.shape).astype(np.float32)
                vec = np.minimum(np.maximum(vec + noise, L.obs_low), L.obs_high)
            obs["observation"] = vec
        if kind is not ObsType.STATE:
            s = self.image_size
            rgb, depth = self.world.render_observation(self._camera, s, s, depth=kind is ObsType.RGBD)
            self._draw_markers(rgb)
            if depth is not None:
                rgb = np.concatenate([rgb, np.clip(np.rint(depth / self.depth_scale), 0, 255).astype(np.uint8)[..., None]],
                                     axis=2)
            obs["image"] = rgb
        obs["achieved_goal"] = L.goals(self._achieved)
        obs["desired_goal"] = L.goals(self.task.desired_goal(self._step_count))
        return obs

    def _touching(self) -> tuple[str, ...] | None:
        """With a cell: who touches what at the joints of the last observation (empty: nothing); None
        without one."""
        if self._collisions is None:
            return None
        return tuple(i.describe() for i in self._collisions.interference(self._q_seen))

    def _info(self, achieved: np.ndarray, desired: np.ndarray, ik_failed: bool,
              touching: tuple[str, ...] | None = None) -> dict[str, Any]:
        """Errors and flags of the goal pair the reward is computed from (float32, as observed)."""
        dist, ang, success = self.task.evaluate(achieved, desired)
        info = {"is_success": success, "distance": dist, "ik_failed": bool(ik_failed), "unstable": not self.robot.stable}
        if touching is not None:
            info["collision"] = bool(touching)
            info["collisions"] = touching
        if self.task.goals.orientation:
            info["angle_error"] = ang
        if self.randomization_sample is not None:
            info["randomization"] = self.randomization_sample.as_dict()
        return info

    def compute_reward(self, achieved_goal, desired_goal, info=None) -> np.ndarray:
        """Reward of goal batches ``(..., g)`` -> ``(...)`` float32 (vectorised, for HER).

        The reward a step returns equals ``compute_reward(obs["achieved_goal"], obs["desired_goal"],
        info)`` of the observation and ``info`` that step returns (the Gymnasium-Robotics GoalEnv
        contract, checked by SB3's ``check_env``). ``info`` (a dict, or one per goal pair) matters
        only in a cell: a step that ended in a collision (``info["collision"]``) loses
        ``collision_penalty`` whatever the goal (relabelled goals keep it).
        """
        r = self.task.compute_reward(achieved_goal, desired_goal, info)
        if self._collisions is None or info is None or self.collision_penalty == 0:
            return r
        infos = [info] if isinstance(info, dict) else list(np.ravel(np.asarray(info, dtype=object)))
        hits = np.array([bool(i.get("collision", False)) for i in infos], dtype=np.float32).reshape(np.shape(r))
        return (r - np.float32(self.collision_penalty) * hits).astype(np.float32)

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
        self._draw_markers(img)
        return img

    def _draw_markers(self, img: np.ndarray) -> None:
        """Paint the task's markers (the goal in red, a path in cyan) into ``img`` in place."""
        pts = self.task.markers()
        if len(pts):
            h, w = img.shape[:2]
            wp = (self.robot.world_T_report @ np.c_[pts, np.ones(len(pts))].T).T[:, :3]
            uv = self._camera.project(wp, w, h)
            big = len(pts) == 1
            _draw_dots(img, uv, radius=max(2, w // 80) if big else 1, color=(230, 40, 40) if big else (0, 200, 230))

    def _sync_real_time(self) -> None:
        ahead = self._wall + self._step_count * self.dt - time.perf_counter()
        if ahead > 0:
            time.sleep(ahead)

    def close(self) -> None:
        """Disconnect the world (idempotent)."""
        world = getattr(self, "world", None)
        if world is not None:
            world.close()
        collisions = getattr(self, "_collisions", None)
        if collisions is not None:
            collisions.model.close()


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
    tool orientation — is drawn at every reset as the tool pose (the flange's, or with
    ``tool`` its TCP's) of random joints around home (revolute joints within ±``goal_spread`` rad), kept when it is at least 8 cm above
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
    | | 3 | tool position (with ``tool``: its TCP), m, base frame |
    | | 2 or 6 | tool orientation: SCARA cos/sin of the roll; arms the first two columns of R |
    | ``achieved_goal`` | 3, 5 or 7 | tool goal vector (position; + roll cos/sin or quaternion xyzw) |
    | ``desired_goal`` | 3, 5 or 7 | the goal, same layout |

    ``obs_type`` (default ``"state"``) chooses what the policy sees besides the goals:
    ``"rgb"`` replaces ``observation`` by ``image``, a (s, s, 3) uint8 picture from ``camera``
    (s = ``image_size``, TinyRenderer without shadows, the goal drawn as a red dot);
    ``"rgbd"`` adds a fourth channel, the depth along the view axis in units of
    :attr:`depth_scale` m (255 = twice the camera distance or farther); ``"both"`` keeps
    ``observation`` and adds the rgb ``image``. With ``randomize``, ``observation`` carries the
    drawn noise (the goals never do).

    ## Domain randomisation
    ``randomize`` (default None: off) draws a new twin at every reset — drive gains and force
    limits, friction, joint damping, link masses and inertias, payload, action latency,
    observation noise — from the env's seeded generator; ``info["randomization"]`` reports the
    draw (:mod:`armtwin.envs.randomize`). ``randomize={"fitted": FILE}`` makes the drive fitted to
    the rig the nominal drive — the hinge gains of ``armtwin fit --model hinge --save FILE`` in the
    hinge model, the articulation drive of ``--model articulation`` in the articulation model — and
    draws each fitted value within its confidence interval (``fitted_sigma`` of them wide,
    default 1).

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
    width=320, height=240, camera="iso", obs_type="state", image_size=84, randomize=None,
    tool=None) and:

    | argument | default | meaning |
    |---|---|---|
    | ``reward`` | ``"sparse"`` | ``"sparse"`` or ``"dense"`` |
    | ``distance_threshold`` | 0.02 | m, success radius |
    | ``angle_threshold`` | 0.1 | rad, success angle (with orientation) |
    | ``episode_steps`` | 50 | control steps per episode |
    | ``goal_spread`` | 1.2 | rad, joint window around home for goal sampling |
    | ``terminate_on_success`` | False | end the episode when the goal is reached |

    ## Version history
    * v0: initial version; options and reset options are checked when given (a ValueError
      naming the option), a refused action changes no state, copies are independent;
      ``obs_type``/``image_size`` and ``randomize`` added (off by default: the env is unchanged);
      ``tool`` added (None by default: the env is unchanged): the tool's body and mass on the
      flange, every tool pose of the tables above the TCP's.
    """

    def __init__(self, robot: str | RobotSpec = "irb120", *, reward: str | RewardType = "sparse",
                 distance_threshold: float = 0.02, angle_threshold: float = 0.1, episode_steps: int = 50,
                 goal_spread: float = 1.2, terminate_on_success: bool = False, **kwargs: Any) -> None:
        EzPickle.__init__(self, robot, reward=reward, distance_threshold=distance_threshold,
                          angle_threshold=angle_threshold, episode_steps=episode_steps, goal_spread=goal_spread,
                          terminate_on_success=terminate_on_success, **kwargs)
        self._task_args = dict(
            reward_type=RewardType.parse(reward),
            distance_threshold=opt.number("distance_threshold", distance_threshold, opt.DISTANCE_THRESHOLD_M, "m"),
            angle_threshold=opt.number("angle_threshold", angle_threshold, opt.ANGLE_THRESHOLD_RAD, "rad"),
            episode_steps=opt.whole("episode_steps", episode_steps, (1, opt.MAX_EPISODE_STEPS)),
            goal_spread=opt.number("goal_spread", goal_spread, opt.GOAL_SPREAD_RAD, "rad"))
        self._terminate = opt.flag("terminate_on_success", terminate_on_success)
        super().__init__(robot, **kwargs)

    def make_task(self) -> Task:
        feasible = None
        if self._ik is not None and (not self.orientation or self.cell is not None):
            R0 = self.kinematics.fk(self.robot_spec.home)[:3, :3]
            home = self.robot_spec.home

            def feasible(T: np.ndarray) -> bool:    # reachable (with the home orientation), in a cell touching nothing
                return self._free(self._ik(T if self.orientation else transform(R0, T[:3, 3]), home))

        return Reach(self.robot_spec, orientation=self.orientation, mount_z=self._mount_z, feasible=feasible,
                     kinematics=self.kinematics, **self._task_args)

    def terminates_on_success(self) -> bool:
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
    ``desired_goal``: the path position at k·dt after k steps (3,), m — where the tool should be
    now, the point the step that led here is scored against (the first look-ahead point is
    the next step's target).

    ## Rewards
    ``reward="dense"`` (default): −(distance from the path point, m). ``reward="sparse"``:
    0 within ``distance_threshold`` m, else −1. A step's reward is
    ``compute_reward(obs["achieved_goal"], obs["desired_goal"], info)`` of the observation it
    returns (the GoalEnv contract HER relies on).

    ## Episode end
    Truncation at the end of the path (``duration`` × ``control_freq`` steps) or when the
    simulation becomes unstable; never terminated. ``info["is_success"]`` is True while the
    tool is within ``distance_threshold`` of the path.

    ## Arguments
    ``gymnasium.make("armtwin/IRB120Track-v1", **kwargs)``; ids ScaraTrack, IRB120Track and
    AuboI5Track set ``robot``. All arguments of :class:`ArmEnv` except ``orientation``
    (position paths, orientation held; ``obs_type``, ``image_size``, ``randomize`` and ``tool``
    as in :class:`ReachEnv`: with ``tool`` the paths are the TCP's, and a ``program`` starts with
    that tool mounted, as ``armtwin run --tool N`` runs it, so a zero action commands ``run``'s
    joints), and:

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
    * v1: the desired goal after k steps is the path point at k·dt, the one the last step is
      scored against (v0 showed the next step's point and scored against the previous
      observation's goal, so ``compute_reward`` of a step's own observation differed from its
      reward); ``lookahead`` >= 1; every option and reset option checked when given; ``tool``
      added (None by default: the env is unchanged).
    * v0: initial version.
    """

    def __init__(self, robot: str | RobotSpec = "irb120", *, reward: str | RewardType = "dense",
                 distance_threshold: float = 0.005, duration: float = 4.0, path: str = "random",
                 program: str | None = None,
                 path_factory: Callable[[np.random.Generator], TimedPath] | None = None, residual: bool = True,
                 lookahead: int = 3, tool_step: float = 0.01, **kwargs: Any) -> None:
        EzPickle.__init__(self, robot, reward=reward, distance_threshold=distance_threshold, duration=duration,
                          path=path, program=program, path_factory=path_factory, residual=residual,
                          lookahead=lookahead, tool_step=tool_step, **kwargs)
        if opt.flag("orientation", kwargs.get("orientation", False)):
            raise ValueError("Track follows positions; orientation=True is not supported")
        self._reward = RewardType.parse(reward)
        self._threshold = opt.number("distance_threshold", distance_threshold, opt.DISTANCE_THRESHOLD_M, "m")
        self._duration = opt.number("duration", duration, (0.0, opt.MAX_EPISODE_STEPS / opt.CONTROL_FREQ_HZ[0]), "s")
        if not isinstance(path, str):
            raise ValueError(f"path must be a shape name ({', '.join(('random',) + PATH_SHAPES)}), got {path!r}")
        if program is not None and not isinstance(program, str):
            raise ValueError(f"program must be a G-code file name or text, got {type(program).__name__}")
        if path_factory is not None and not callable(path_factory):
            raise ValueError(f"path_factory must be a callable rng -> TimedPath, got {type(path_factory).__name__}")
        self._shape = path
        self._factory = path_factory
        self._program = program
        self._residual = opt.flag("residual", residual)
        self._lookahead = opt.whole("lookahead", lookahead, opt.LOOKAHEAD)
        super().__init__(robot, tool_step=tool_step, **kwargs)

    def _needs_ik(self) -> bool:
        return True

    def make_task(self) -> Task:
        spec = self.robot_spec
        steps = int(math.ceil(self._duration / self.dt - 1e-9))
        if steps > opt.MAX_EPISODE_STEPS:
            raise ValueError(f"duration {self._duration:g} s at {1 / self.dt:g} Hz is {steps} control steps; "
                             f"at most {opt.MAX_EPISODE_STEPS} per episode")
        home = spec.home
        T_home = self.kinematics.fk(home)
        centres = Reach(spec, mount_z=self._mount_z, goal_spread=0.8, kinematics=self.kinematics,
                        feasible=lambda T: self._free(self._ik(transform(T_home[:3, :3], T[:3, 3]), home)))
        shape, duration, dt = self._shape, self._duration, self.dt

        def factory(rng: np.random.Generator) -> TimedPath:
            c = centres.sample_goal(rng)[:3]
            return random_path(rng, c, T_home[:3, :3], duration, dt, shape=shape)

        if self._program is not None and self._factory is None:
            fixed = gcode_path(self._program, spec, dt, tool=self.tool)
            self._factory = lambda rng: fixed
        if self._factory is None:
            random_path(np.random.default_rng(0), T_home[:3, 3], T_home[:3, :3], duration, dt, shape=shape)  # checks `path`

        def start(T: np.ndarray) -> np.ndarray | None:
            return self._ik(T, home)

        task = Track(spec, dt, self._factory or factory, self._ik_path, start, reward_type=self._reward,
                     distance_threshold=self._threshold, lookahead=self._lookahead, residual=self._residual,
                     reject=self._path_contact if self._collisions is not None else None)
        return task


_registration.register_envs()
