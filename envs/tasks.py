"""Tasks for the Gymnasium environments: what the robot should do, and how it is scored.

A task knows nothing about PyBullet or about the robot object: it receives the robot's
spec (data), the kinematics of its controlled point (:class:`~armtwin.controllers.tcp.TcpKinematics`:
the flange, or a tool's TCP) and, at each step, the TCP pose the environment measured. It samples goals
with the environment's random generator, turns tool poses into *goal vectors* (the
``achieved_goal`` / ``desired_goal`` of a goal-conditioned observation) and scores them
with a vectorised :meth:`Task.compute_reward`, so hindsight relabelling (HER) can
recompute rewards for any batch of goals.

Goal vectors (reporting base frame, metres):

* position only: ``[x, y, z]``;
* with orientation, 6-axis arms: ``[x, y, z, qx, qy, qz, qw]`` (unit quaternion, w >= 0);
* with orientation, SCARA (4 axes): ``[x, y, z, cos(roll), sin(roll)]``, roll = angle of
  the tool x axis in the base xy plane.

Units: metres, radians, seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..controllers.choices import Choice
from ..controllers.tcp import TcpKinematics
from ..controllers.tools import Tool
from ..controllers.transforms import matrix_to_quat
from ..robots import RobotSpec
from .gym_options import MAX_EPISODE_STEPS, vector

__all__ = ["RewardType", "GoalSpace", "Task", "FixedGoalTask", "Reach", "Track", "TimedPath", "random_path", "gcode_path", "PATH_SHAPES",
           "workspace_radius", "sample_workspace_configs"]


class RewardType(Choice):
    """Dense: minus the error (m, plus a weighted angle in rad). Sparse: 0 on success, −1 otherwise."""

    __label__ = "reward type"

    DENSE = "dense"
    SPARSE = "sparse"



def workspace_radius(spec: RobotSpec, tool: Tool | None = None) -> float:
    """An upper bound (m) on the distance of the flange (or ``tool``'s TCP) from the reporting-frame origin.

    The sum of all link offsets, the flange offset, every prismatic stroke and the TCP's
    distance from the flange: no joint vector can put the TCP farther away.
    """
    total = float(np.linalg.norm(spec.report_frame.xyz))
    total += sum(float(np.linalg.norm(j.origin.xyz)) for j in spec.joints)
    total += float(np.linalg.norm(spec.tool.xyz))
    total += float(sum(max(abs(lo), abs(hi)) for lo, hi, p in zip(spec.lower, spec.upper, spec.prismatic) if p))
    if tool is not None:
        total += float(np.linalg.norm(tool.offset))
    return total


def sample_workspace_configs(spec: RobotSpec, rng: np.random.Generator, n: int, spread: float) -> np.ndarray:
    """Random joint vectors (n, dof) around the home pose, inside the joint limits.

    Revolute joints are drawn uniformly within ``home ± spread`` rad (clipped to their
    range), prismatic joints over their whole stroke.
    """
    lo, hi, home = spec.lower, spec.upper, spec.home
    a = np.where(spec.prismatic, lo, np.maximum(lo, home - spread))
    b = np.where(spec.prismatic, hi, np.minimum(hi, home + spread))
    return a + rng.random((n, spec.dof)) * (b - a)


@dataclass(frozen=True)
class GoalSpace:
    """How tool poses become goal vectors, and how far apart two goals are.

    Attributes:
        orientation: goal vectors carry the tool orientation too.
        scara: orientation is the tool roll only (cos, sin); otherwise a unit quaternion.
        angle_weight: m per rad: the dense reward's price of an angle error.
    """

    orientation: bool
    scara: bool
    angle_weight: float = 0.1

    @property
    def size(self) -> int:
        """Length of a goal vector."""
        if not self.orientation:
            return 3
        return 5 if self.scara else 7

    def of_pose(self, T: np.ndarray) -> np.ndarray:
        """Goal vectors (..., size) of tool poses (..., 4, 4)."""
        p = T[..., :3, 3]
        if not self.orientation:
            return p.copy()
        if self.scara:
            roll = np.arctan2(T[..., 1, 0], T[..., 0, 0])
            return np.concatenate([p, np.cos(roll)[..., None], np.sin(roll)[..., None]], axis=-1)
        q = np.asarray(matrix_to_quat(T[..., :3, :3]))
        q = np.where(q[..., 3:4] < 0, -q, q)
        return np.concatenate([p, q], axis=-1)

    def errors(self, achieved: np.ndarray, desired: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Position error (m) and angle error (rad) of goal batches (..., size) -> (...), (...)."""
        a = np.asarray(achieved, dtype=np.float64)
        d = np.asarray(desired, dtype=np.float64)
        e = a[..., :3] - d[..., :3]
        dist = np.sqrt(np.sum(e * e, axis=-1))
        if not self.orientation:
            return dist, np.zeros_like(dist)
        if self.scara:
            cross = a[..., 3] * d[..., 4] - a[..., 4] * d[..., 3]
            dot = a[..., 3] * d[..., 3] + a[..., 4] * d[..., 4]
            return dist, np.abs(np.arctan2(cross, dot))
        dot = np.abs(np.sum(a[..., 3:7] * d[..., 3:7], axis=-1))
        dot /= np.maximum(np.linalg.norm(a[..., 3:7], axis=-1) * np.linalg.norm(d[..., 3:7], axis=-1), 1e-12)
        return dist, 2.0 * np.arccos(np.clip(dot, 0.0, 1.0))


class Task:
    """Base class of a task. Subclasses set :attr:`goals` and implement the hooks below.

    Attributes:
        spec: the robot.
        goals: goal-vector layout.
        reward_type: dense or sparse.
        distance_threshold: m, success when the position error is below it.
        angle_threshold: rad, and (with orientation) the angle error below this.
    """

    spec: RobotSpec
    goals: GoalSpace
    reward_type: RewardType
    distance_threshold: float
    angle_threshold: float

    #: length of the task's own part of the observation vector
    obs_size: int = 0
    #: the task's own ``reset(options=...)`` keys
    option_keys: tuple[str, ...] = ()

    # ----- scoring (vectorised) ---------------------------------------------------------
    def is_success(self, achieved: np.ndarray, desired: np.ndarray) -> np.ndarray:
        """Bool (...) for goal batches (..., size)."""
        dist, ang = self.goals.errors(achieved, desired)
        ok = dist < self.distance_threshold
        if self.goals.orientation:
            ok &= ang < self.angle_threshold
        return ok

    def compute_reward(self, achieved: np.ndarray, desired: np.ndarray, info: Any = None) -> np.ndarray:
        """Reward (...) float32 for goal batches (..., size); ``info`` is not used."""
        if self.reward_type is RewardType.SPARSE:
            return -(~self.is_success(achieved, desired)).astype(np.float32)
        dist, ang = self.goals.errors(achieved, desired)
        return (-(dist + self.goals.angle_weight * ang)).astype(np.float32)

    def evaluate(self, achieved: np.ndarray, desired: np.ndarray) -> tuple[float, float, bool]:
        """Position error (m), angle error (rad) and success of one goal pair."""
        if self.goals.orientation:
            dist, ang = (float(v) for v in self.goals.errors(achieved, desired))
        else:  # the per-step fast path: same formula as errors()
            d = np.asarray(achieved, dtype=np.float64)[:3] - np.asarray(desired, dtype=np.float64)[:3]
            dist, ang = float(np.sqrt(np.sum(d * d))), 0.0
        ok = dist < self.distance_threshold and (not self.goals.orientation or ang < self.angle_threshold)
        return dist, ang, bool(ok)

    def reward_of(self, dist: float, ang: float, success: bool) -> float:
        """The reward of one step from :meth:`evaluate`'s numbers (as :meth:`compute_reward`)."""
        if self.reward_type is RewardType.SPARSE:
            return float(np.float32(0.0 if success else -1.0))
        return float(np.float32(-(dist + self.goals.angle_weight * ang)))

    # ----- hooks ------------------------------------------------------------------------
    def reset(self, rng: np.random.Generator, options: dict) -> np.ndarray | None:
        """Start an episode; return the initial joint vector (None: the robot's home)."""
        raise NotImplementedError

    def desired_goal(self, step: int) -> np.ndarray:
        """The goal vector the tool should reach after control step ``step`` (0-based)."""
        raise NotImplementedError

    def reference(self, step: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(tool pose (4, 4), joints (n,)) a residual controller starts from at ``step``, or None."""
        return None

    def observation(self, step: int, achieved: np.ndarray) -> np.ndarray:
        """The task's part of the observation vector, (obs_size,)."""
        return np.zeros(0)

    def obs_bounds(self, box_low: np.ndarray, box_high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bounds (obs_size,) of :meth:`observation`."""
        return np.zeros(0), np.zeros(0)

    def episode_steps(self) -> int:
        """Control steps in the current episode."""
        raise NotImplementedError

    def markers(self) -> np.ndarray:
        """Points (N, 3) in the reporting frame to draw into rendered frames (goal, path)."""
        return np.zeros((0, 3))


class FixedGoalTask(Task):
    """A task whose goal stays put for a whole episode (:attr:`_goal`) of :attr:`_steps` steps, drawn
    as a marker: Reach, and the object tasks (:mod:`armtwin.envs.object_tasks`)."""

    _goal: np.ndarray
    _steps: int

    def desired_goal(self, step: int) -> np.ndarray:
        return self._goal

    def episode_steps(self) -> int:
        return self._steps

    def markers(self) -> np.ndarray:
        return self._goal[None, :3]


class Reach(FixedGoalTask):
    """Move the tool to a random goal inside the reachable workspace.

    Goals are the TCP poses (``kinematics``; the flange by default) of random joint vectors around the home pose (revolute
    joints within ``home ± goal_spread``), kept when they lie at least ``floor`` above the
    mounting plane and at least a fifth of the reach away from the J1 axis; when
    ``feasible`` is given, a goal must also pass it (the Cartesian controller checks that
    its IK reaches the goal position with the held tool orientation).

    Args:
        spec: the robot.
        orientation: goals include the tool orientation (tool roll for the SCARA).
        reward_type: dense or sparse.
        distance_threshold: m.
        angle_threshold: rad.
        episode_steps: control steps per episode.
        goal_spread: rad, half-width of the revolute joint sampling window around home.
        floor: m, minimum goal height above the mount (world z).
        feasible: optional test ``(goal_pose (4, 4)) -> bool``.
        mount_z: m, z of the mounting plane in the reporting frame.
        kinematics: FK of the controlled point (default: the flange of ``spec``).
    """

    def __init__(self, spec: RobotSpec, *, orientation: bool = False, reward_type: RewardType = RewardType.SPARSE,
                 distance_threshold: float = 0.02, angle_threshold: float = 0.1, episode_steps: int = 50,
                 goal_spread: float = 1.2, floor: float = 0.08, mount_z: float = 0.0,
                 feasible: Callable[[np.ndarray], bool] | None = None, kinematics: TcpKinematics | None = None) -> None:
        if distance_threshold <= 0 or angle_threshold <= 0:
            raise ValueError("distance_threshold and angle_threshold must be > 0")
        if int(episode_steps) != episode_steps or episode_steps < 1:
            raise ValueError(f"episode_steps must be a whole number >= 1, got {episode_steps}")
        self.spec = spec
        self.goals = GoalSpace(bool(orientation), spec.roll_only)
        self.reward_type = RewardType.parse(reward_type)
        self.distance_threshold = float(distance_threshold)
        self.angle_threshold = float(angle_threshold)
        self._steps = int(episode_steps)
        self.goal_spread = float(goal_spread)
        self.floor = float(floor)
        self.mount_z = float(mount_z)  # z of the mounting plane in the reporting frame
        self.feasible = feasible
        self._fk = (kinematics or TcpKinematics(spec)).fk_batch
        self._goal = self.goals.of_pose(self._fk(spec.home[None])[0])

    def sample_goal(self, rng: np.random.Generator, batch: int = 32, tries: int = 50) -> np.ndarray:
        """A goal vector drawn as the class docstring says."""
        min_r = 0.2 * self.spec.reach
        for _ in range(tries):
            Q = sample_workspace_configs(self.spec, rng, batch, self.goal_spread)
            T = self._fk(Q)
            p = T[:, :3, 3]
            ok = (p[:, 2] - self.mount_z >= self.floor) & (np.hypot(p[:, 0], p[:, 1]) >= min_r)
            for i in np.flatnonzero(ok):
                if self.feasible is None or self.feasible(T[i]):
                    return self.goals.of_pose(T[i])
        raise RuntimeError(f"{self.spec.name}: no feasible goal found in {tries * batch} samples")

    option_keys = ("goal",)

    def reset(self, rng: np.random.Generator, options: dict) -> None:
        goal = options.get("goal")
        if goal is None:
            self._goal = self.sample_goal(rng)
        else:
            self._goal = vector("options['goal']", goal, self.goals.size)
        return None



# ----- Track ------------------------------------------------------------------------------

@dataclass(frozen=True)
class TimedPath:
    """A timed tool path: positions at sample times, one tool orientation held throughout.

    Attributes:
        t: (N,) sample times, s, increasing from 0.
        p: (N, 3) tool positions, m, reporting base frame.
        rotation: (3, 3) tool orientation held along the path, or (N, 3, 3) one per sample.
        name: what it is ("circle", "lemniscate", "segments", a program file …).
        q: (N, n) joints at the samples, rad / m, when the path comes with them (a compiled
            G-code program: the joints ``armtwin run`` commands); None: :class:`Track` solves IK.
    """

    t: np.ndarray
    p: np.ndarray
    rotation: np.ndarray
    name: str = "path"
    q: np.ndarray | None = None

    def __post_init__(self) -> None:
        """ValueError unless: t finite, from 0, not decreasing, ending after 0; p (N, 3) finite;
        rotation (3, 3) or (N, 3, 3) rotation matrices (orthonormal to 1e-6, det +1)."""
        try:
            t = np.asarray(self.t, dtype=float)
            p = np.asarray(self.p, dtype=float)
            R = np.asarray(self.rotation, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"path {self.name!r}: t, p and rotation must be numeric arrays") from None
        if t.ndim != 1 or len(t) < 2 or not np.all(np.isfinite(t)):
            raise ValueError(f"path {self.name!r}: t must be at least 2 finite sample times, got shape {t.shape}")
        if t[0] != 0.0 or np.any(np.diff(t) < 0) or t[-1] <= 0:
            raise ValueError(f"path {self.name!r}: t must start at 0 s, never decrease and end after 0 s")
        if p.shape != (len(t), 3) or not np.all(np.isfinite(p)):
            raise ValueError(f"path {self.name!r}: p must be ({len(t)}, 3) finite positions (m), got shape {p.shape}")
        if R.shape not in ((3, 3), (len(t), 3, 3)) or not np.all(np.isfinite(R)):
            raise ValueError(f"path {self.name!r}: rotation must be (3, 3) or ({len(t)}, 3, 3), got shape {R.shape}")
        Rs = R.reshape(-1, 3, 3)
        if (np.max(np.abs(Rs @ np.swapaxes(Rs, 1, 2) - np.eye(3))) > 1e-6
                or np.max(np.abs(np.linalg.det(Rs) - 1.0)) > 1e-6):
            raise ValueError(f"path {self.name!r}: rotation must be rotation matrices (orthonormal, det +1)")
        for name, v in (("t", t), ("p", p), ("rotation", R)):
            object.__setattr__(self, name, v)

    @property
    def duration(self) -> float:
        """s."""
        return float(self.t[-1])

    def at(self, times) -> np.ndarray:
        """Positions (..., 3) at ``times`` (...) s, linearly interpolated, held at the ends."""
        times = np.asarray(times, dtype=float)
        return np.stack([np.interp(times, self.t, self.p[:, k]) for k in range(3)], axis=-1)

    def poses(self, times) -> np.ndarray:
        """Tool poses (N, 4, 4) at ``times`` (N,) s (per-sample rotations: the nearest sample's)."""
        times = np.atleast_1d(np.asarray(times, dtype=float))
        P = self.at(times)
        T = np.zeros((len(P), 4, 4))
        T[:, 3, 3] = 1.0
        if self.rotation.ndim == 3:
            i = np.clip(np.searchsorted(self.t, times - 1e-9), 0, len(self.t) - 1)
            T[:, :3, :3] = self.rotation[i]
        else:
            T[:, :3, :3] = self.rotation
        T[:, :3, 3] = P
        return T


#: file name endings taken as G-code files (anything else without a line break may be a one-line program)
GCODE_SUFFIXES = (".ngc", ".nc", ".gcode", ".gc", ".tap", ".cnc")


def program_text(program: str) -> str:
    """The G-code of ``program``: a program's text, or a file — as given, or in armtwin's examples folder.

    A one-line string that names no file and does not look like a path (no ``/``, no G-code
    file ending) is taken as the text of a one-line program.

    Raises:
        FileNotFoundError: ``program`` looks like a file name but no such file exists.
    """
    import os
    from pathlib import Path

    from . import examples_dir

    if "\n" in program:
        return program
    p = Path(program)
    if p.is_file():
        return p.read_text()
    if p.suffix.lower() in GCODE_SUFFIXES or "/" in program or os.sep in program:
        ex = examples_dir()
        for cand in (ex / p, ex / p.name):
            if cand.is_file():
                return cand.read_text()
        raise FileNotFoundError(f"G-code program {program}: no such file (looked in {Path.cwd()} and {ex})")
    return program


def gcode_path(program: str, spec: RobotSpec, dt: float, origin_mm=None, tool: Tool | None = None) -> TimedPath:
    """The timed tool path of a G-code program (file name or text), with its joints, as ``armtwin run`` has them.

    Compiled by :func:`armtwin.controllers.gcode.compile_program` with the robot's default
    machine configuration (work origin ``origin_mm`` (3,) mm if given) at the control period
    ``dt`` s: the preflight (IK along the path, limits) and the control trajectory, so the
    path's samples and joints are those the runner commands every ``dt`` (sample k at k·dt, and
    one at the end). A program that cannot run raises ValueError naming its first fault.

    ``tool`` is on the flange when the program starts (``armtwin run --tool N``; a tool that is
    not in the built-in table takes its number there): the program moves its TCP until it mounts
    another. The path is that of the point the env observes and steers — ``tool``'s TCP, the
    flange without a tool — carried by the flange poses the program's joints give: with ``tool``
    and a program that keeps it, the program's own path; without ``tool``, a program that mounts
    one (``T n M6``, G43) has its TCP on the program and the path here is the flange's behind it.
    """
    from pathlib import Path

    from ..controllers.gcode import compile_program, machine_for
    from ..controllers.tools import ToolTable, default_tools

    text = program_text(program)
    tools: dict = {}
    if tool is not None:
        tools = {"tools": ToolTable({**default_tools().tools, tool.number: tool}), "tool": tool.number}
    machine = machine_for(spec, origin_mm, **tools)
    compiled = compile_program(text, spec, machine, period=dt)
    if compiled.trajectory is None:
        raise ValueError(f"G-code program {program if len(program) < 80 else '(text)'}: {compiled.refusal}")
    samples, q, _ = compiled.trajectory.arrays()
    name = Path(program).name if len(program) < 260 and "\n" not in program else "gcode"
    if samples.flange_of_block is None and tool is None:
        position, rotation = samples.position, samples.rotation
    else:   # the program moves a tool's TCP: the flange that carries it, and the env's TCP on that flange
        T = TcpKinematics(spec, tool).tcp_of(samples.poses())
        position, rotation = T[:, :3, 3], T[:, :3, :3]
    return TimedPath(np.asarray(samples.t, float), np.asarray(position, float), np.asarray(rotation, float), name, q)


PATH_SHAPES = ("circle", "lemniscate", "segments")


def _min_jerk(tau: np.ndarray) -> np.ndarray:
    """Minimum-jerk time scaling 0..1 (starts and ends at rest)."""
    return tau ** 3 * (10 - 15 * tau + 6 * tau ** 2)


def random_path(rng: np.random.Generator, centre: np.ndarray, rotation: np.ndarray, duration: float, dt: float,
                shape: str = "random", size: float | None = None, vertical: bool | None = None) -> TimedPath:
    """A smooth closed or open tool path around ``centre``, timed to start and end at rest.

    Args:
        rng: random generator.
        centre: (3,) m.
        rotation: (3, 3) tool orientation held along the path.
        duration: s.
        dt: s between samples.
        shape: "circle", "lemniscate", "segments" or "random" (one of them).
        size: m, radius / half-width (default random 0.04–0.09 m).
        vertical: path in a vertical plane (default: random; horizontal otherwise).
    """
    if shape == "random":
        shape = PATH_SHAPES[int(rng.integers(len(PATH_SHAPES)))]
    if shape not in PATH_SHAPES:
        raise ValueError(f"unknown path shape {shape!r}; choose one of: random, {', '.join(PATH_SHAPES)}")
    size = float(rng.uniform(0.04, 0.09)) if size is None else float(size)
    vertical = bool(rng.integers(2)) if vertical is None else bool(vertical)
    phi = float(rng.uniform(0, 2 * np.pi))
    n = int(round(duration / dt)) + 1
    t = np.arange(n) * dt
    s = _min_jerk(np.clip(t / duration, 0.0, 1.0))
    if shape == "circle":
        a = 2 * np.pi * s
        uv = np.c_[np.cos(a) - 1.0, np.sin(a)] * size
    elif shape == "lemniscate":
        a = 2 * np.pi * s
        uv = np.c_[np.sin(a), np.sin(a) * np.cos(a)] * size
    else:  # three random straight segments through four corners
        pts = np.vstack([[0.0, 0.0], rng.uniform(-1, 1, (3, 2)) * size])
        seg = np.linalg.norm(np.diff(pts, axis=0), axis=1)
        cum = np.r_[0.0, np.cumsum(seg)] / max(seg.sum(), 1e-9)
        uv = np.c_[np.interp(s, cum, pts[:, 0]), np.interp(s, cum, pts[:, 1])]
    e1 = np.array([np.cos(phi), np.sin(phi), 0.0])
    e2 = np.array([0.0, 0.0, 1.0]) if vertical else np.array([-np.sin(phi), np.cos(phi), 0.0])
    p = np.asarray(centre, dtype=float) + uv[:, :1] * e1 + uv[:, 1:] * e2
    return TimedPath(t, p, np.asarray(rotation, dtype=float).copy(), shape)


class Track(Task):
    """Follow a timed tool path; the reward comes from the path error.

    After k control steps the desired goal is the path position at time k·dt, where the tool
    should be now — the goal the step that led here is scored against, so a step's reward is
    :meth:`compute_reward` of the observation it returns. The observation adds the
    ``lookahead`` (>= 1) following path points (relative to the desired goal, m; the first
    is the target of the next step) and the phase k / steps. :meth:`reference` gives the path
    pose and its IK joints at (k + 1)·dt, for residual control.

    Args:
        spec: the robot.
        dt: control period, s.
        path_factory: ``(rng) -> TimedPath`` called at every reset (a random path, a
            G-code program …); must start near the home pose's reachable region.
        solve_path: ``(T (N, 4, 4), q_start (n,)) -> (Q (N, n), ok bool)`` IK along the path.
        start: ``(T (4, 4)) -> q or None``: the joints at the path start.
        reward_type: dense or sparse.
        distance_threshold: m, the tracking tolerance (success and sparse reward).
        lookahead: future path points in the observation.
        tries: paths drawn per reset until one is reachable all along.
        residual: :meth:`reference` gives the path reference (else None: plain delta control).
        reject: ``(joints (N, n)) -> reason or None``: a path whose joints it refuses is drawn again
            (a given one is refused with the reason): TrackEnv in a cell refuses paths that collide.
    """

    def __init__(self, spec: RobotSpec, dt: float, path_factory: Callable[[np.random.Generator], TimedPath],
                 solve_path: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
                 start: Callable[[np.ndarray], np.ndarray | None], *,
                 reward_type: RewardType = RewardType.DENSE, distance_threshold: float = 0.005,
                 lookahead: int = 3, tries: int = 20, residual: bool = True,
                 reject: Callable[[np.ndarray], str | None] | None = None) -> None:
        if distance_threshold <= 0:
            raise ValueError("distance_threshold must be > 0")
        self.spec = spec
        self.dt = float(dt)
        self.goals = GoalSpace(False, spec.roll_only)
        self.reward_type = RewardType.parse(reward_type)
        self.distance_threshold = float(distance_threshold)
        self.angle_threshold = np.inf
        self.lookahead = int(lookahead)
        self.obs_size = 3 * self.lookahead + 1
        self._factory, self._solve_path, self._start = path_factory, solve_path, start
        self._tries = int(tries)
        self.residual = bool(residual)
        self._reject = reject
        self.path: TimedPath | None = None
        self._T = np.zeros((1, 4, 4))
        self._Q = np.zeros((1, spec.dof))
        self._P = np.zeros((1, 3))

    option_keys = ("path",)

    def reset(self, rng: np.random.Generator, options: dict) -> np.ndarray:
        """Draw a path (or take ``options["path"]``) that the IK reaches all along; its first joints.

        Raises:
            ValueError: ``options["path"]`` (or what ``path_factory`` returned) is not a
                :class:`TimedPath`, is longer than :data:`~armtwin.envs.gym_options.MAX_EPISODE_STEPS`
                control steps, or (given) is not reachable all along.
            RuntimeError: no drawn path was reachable in ``tries`` draws.
        """
        given = options.get("path")
        for _ in range(self._tries if given is None else 1):
            path = given if given is not None else self._factory(rng)
            what = "options['path']" if given is not None else "path_factory"
            if not isinstance(path, TimedPath):
                raise ValueError(f"{what}: a path is a TimedPath, got {type(path).__name__}")
            n = max(1, int(np.ceil(path.duration / self.dt - 1e-9)))  # the last step ends at (or after) the end
            if n > MAX_EPISODE_STEPS:
                raise ValueError(f"{what}: path {path.name!r} lasts {path.duration:g} s = {n} control steps of "
                                 f"{self.dt:g} s; at most {MAX_EPISODE_STEPS} steps per episode")
            if path.q is not None:     # a compiled program: its own samples and joints (the runner's)
                why = self._reject(np.asarray(path.q, dtype=float)) if self._reject is not None else None
                if why:
                    raise ValueError(f"{what}: the program's path is refused: {why}")
                return self._use_joints(path)
            T = path.poses(np.arange(n + 1) * self.dt)
            q0 = self._start(T[0])
            if q0 is None:
                if given is not None:
                    raise ValueError(f"options['path']: the IK reaches no joints at the path's start {T[0, :3, 3].tolist()} m")
                continue
            Q, ok = self._solve_path(T, q0)
            why = self._reject(Q) if np.all(ok) and self._reject is not None else None
            if why and given is not None:
                raise ValueError(f"options['path']: refused: {why}")
            if np.all(ok) and not why:
                self.path, self._T, self._Q, self._P = path, T, Q, T[:, :3, 3].copy()
                return Q[0].copy()
            if given is not None:
                bad = int(np.argmin(ok))
                raise ValueError(f"options['path']: the IK does not reach the path at t = {bad * self.dt:.3f} s "
                                 f"({T[bad, :3, 3].tolist()} m)")
        raise RuntimeError(f"{self.spec.name}: no path reachable all along was found in {self._tries} tries")

    def _use_joints(self, path: TimedPath) -> np.ndarray:
        """Take a path that comes with its joints: its samples must be this task's control steps."""
        q = np.asarray(path.q, dtype=float)
        steps = np.diff(path.t)
        if (q.shape != (len(path.t), self.spec.dof) or len(path.t) < 2
                or not np.allclose(steps[:-1], self.dt, rtol=0, atol=1e-9) or not 0 < steps[-1] <= self.dt + 1e-9):
            raise ValueError(f"a path with joints must be sampled every control step ({self.dt:g} s) with "
                             f"(N, {self.spec.dof}) joints")
        T = path.poses(path.t)
        self.path, self._T, self._Q, self._P = path, T, q, T[:, :3, 3].copy()
        return q[0].copy()

    def _index(self, k: int) -> int:
        return min(k, len(self._P) - 1)

    def desired_goal(self, step: int) -> np.ndarray:
        return self._P[self._index(step)]

    def reference(self, step: int) -> tuple[np.ndarray, np.ndarray] | None:
        if not self.residual:
            return None
        i = self._index(step + 1)
        return self._T[i], self._Q[i]

    def observation(self, step: int, achieved: np.ndarray) -> np.ndarray:
        d = self.desired_goal(step)
        ahead = [self._P[self._index(step + 1 + j)] - d for j in range(self.lookahead)]
        return np.concatenate(ahead + [np.array([step / max(self.episode_steps(), 1)])])

    def obs_bounds(self, box_low: np.ndarray, box_high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        span = np.tile(box_high - box_low, self.lookahead)
        return np.r_[-span, 0.0], np.r_[span, 1.0]

    def episode_steps(self) -> int:
        return len(self._P) - 1

    def markers(self) -> np.ndarray:
        return self._P[:: max(1, len(self._P) // 60)]
