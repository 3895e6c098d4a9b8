"""Tasks with an object: pick a box up with the vacuum cup or the parallel gripper and put it at a
target (``PickAndPlaceEnv``), or push it there (``PushEnv``).

The robot stands at its cell (the default cell: a table whose top is the programs' Z0) with the
vacuum cup of the built-in tool table on its flange (T4), and a box lies on the table. The
action is the arm's (Cartesian or joint deltas, as in :class:`~armtwin.envs.gym_envs.ReachEnv`)
and one more value: the suction, on above 0. Switched on with the cup touching the box, the cup
holds it (:class:`~armtwin.envs.gripper.VacuumGripper`: ideal in the kinematic joint model, a
force-limited constraint in hinge and articulation, so a box swung too hard drops). With
``tool=5`` (the parallel gripper, or any tool of kind ``gripper``) the last action value closes
the jaws instead (:class:`~armtwin.envs.gripper.ParallelGripper`: bodies of their own that close
on the box and hold it by friction in hinge and articulation, ideally in the kinematic model,
whose physics then steps at 240 Hz so the jaws close by contact); the box must stand between the
open jaws (44 mm apart for the default 40 mm box), and an episode starts with the tool above the
boxes when it would stand in them at home (the gripper's jaw tips reach lower than the cup). The goal is
where the box's centre should be: on the table or, with probability ``in_air``, up to ``lift``
above it (held there). The GoalEnv API holds: ``achieved_goal`` is the box's centre,
``desired_goal`` the target, and ``compute_reward`` is vectorised for HER (the box's position
does not depend on the goal, so relabelled goals are exact).

Units: m, s inside (reporting frame: the robot's base).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..controllers.tools import ToolKind
from ..controllers.transforms import transform
from ..robots import RobotSpec
from . import gym_options as opt
from .actions import ControlMode
from .gripper import ParallelGripper, VacuumGripper
from .gym_envs import ArmEnv
from .sim import JointMode
from .tasks import FixedGoalTask, GoalSpace, RewardType, Task
from .gym_options import vector

__all__ = ["PickPlace", "PickAndPlaceEnv", "PushEnv", "PickPlaceExpert", "PushExpert"]

#: the vacuum cup of the built-in tool table
VACUUM_TOOL = 4
#: the parallel gripper of the built-in tool table
GRIPPER_TOOL = 5


class PickPlace(FixedGoalTask):
    """Put an object's centre at a goal position (see the module docstring).

    Args:
        spec: the robot.
        surface: (3,) the centre of the table's top, reporting frame, m.
        half_region: (2,) half the x and y extent where the box and the goals are drawn around it, m.
        half_size: half the box's edge, m.
        lift: m, the highest goal above the table's top (goals in the air).
        in_air: probability that a goal is in the air.
        reachable: ``(position (3,)) -> bool``: the cup can stand there pointing down.
        reward_type, distance_threshold, episode_steps: as :class:`~armtwin.envs.tasks.Reach`.
        start_q: the joints each episode starts from (None: the robot's home) — above the boxes
            when the tool at home would stand in them.
    """

    #: the object's centre (3), it less the TCP (3), held (1)
    obs_size = 7
    option_keys = ("goal", "object")

    def __init__(self, spec: RobotSpec, *, surface: np.ndarray, half_region: np.ndarray, half_size: float,
                 lift: float, in_air: float, reachable, reward_type: RewardType = RewardType.SPARSE,
                 distance_threshold: float = 0.02, episode_steps: int = 100, start_q: np.ndarray | None = None) -> None:
        self.spec = spec
        self.goals = GoalSpace(False, spec.roll_only)
        self.reward_type = RewardType.parse(reward_type)
        self.distance_threshold = float(distance_threshold)
        self.angle_threshold = np.pi
        self._steps = int(episode_steps)
        self.surface = np.asarray(surface, dtype=float)
        self.half_region = np.asarray(half_region, dtype=float)
        self.half_size, self.lift, self.in_air = float(half_size), float(lift), float(in_air)
        self.reachable = reachable
        self.start_q = None if start_q is None else np.asarray(start_q, dtype=float)
        self._goal = self.surface + [0.0, 0.0, self.half_size]
        self.start = self._goal.copy()

    def _on_table(self, rng: np.random.Generator) -> np.ndarray:
        for _ in range(200):
            p = self.surface + np.r_[rng.uniform(-self.half_region, self.half_region), self.half_size]
            if self.reachable(p + [0.0, 0.0, self.half_size]):       # the cup on the box's top
                return p
        raise RuntimeError(f"{self.spec.name}: no reachable place on the table in 200 draws")

    def sample(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(the box's centre, the goal) for one episode: apart by at least twice the threshold."""
        box = self._on_table(rng)
        for _ in range(200):
            goal = self._on_table(rng)
            if rng.random() < self.in_air:
                goal = goal + [0.0, 0.0, rng.uniform(0.0, self.lift)]
            if np.linalg.norm(goal - box) > 2 * self.distance_threshold and self.reachable(goal + [0, 0, self.half_size]):
                return box, goal
        raise RuntimeError(f"{self.spec.name}: no reachable goal apart from the box in 200 draws")

    def reset(self, rng: np.random.Generator, options: dict) -> None:
        box, goal = self.sample(rng)
        self.start = vector("options['object']", options["object"], 3) if "object" in options else box
        self._goal = vector("options['goal']", options["goal"], 3) if "goal" in options else goal
        return None if self.start_q is None else self.start_q.copy()

    def obs_bounds(self, box_low: np.ndarray, box_high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        span = box_high - box_low
        return np.r_[box_low, -span, 0.0], np.r_[box_high, span, 1.0]


class PickAndPlaceEnv(ArmEnv):
    """Pick a box up with the vacuum cup and put it at the goal (the module docstring is the manual).

    Observation (``Dict``): ReachEnv's robot part, then the box's centre (3, m), the box less the
    TCP (3, m) and whether the cup holds it (1); ``achieved_goal`` the box's centre, ``desired_goal``
    the target (3, m, reporting frame). Action: the arm's (:class:`~armtwin.envs.gym_envs.ReachEnv`)
    and the suction (on above 0). Reward: sparse −1/0 (the box within ``distance_threshold`` of the
    goal) or dense −distance. ``info`` adds ``held`` (the cup holds the box). Reset options:
    ``goal`` and ``object`` (the box's centre on the table), each 3 numbers in m.

    Args:
        robot: robot id or spec.
        reward: ``sparse`` or ``dense``.
        distance_threshold: m.
        episode_steps: control steps per episode.
        object_size: m, the box's edge (10–80 mm).
        object_mass: kg (0.01–2).
        in_air: probability that a goal is up to ``lift`` above the table.
        lift: m (0–0.2).
        region: m, half the side of the square on the table where boxes and goals are drawn.
        **kwargs: :class:`~armtwin.envs.gym_envs.ArmEnv`'s options; ``cell`` defaults to
            ``"default"`` (a cell with a table is needed), ``tool`` to the vacuum cup (T4); another
            tool must be a vacuum cup or a parallel gripper (T5: the last action value closes its jaws).
    """

    extra_actions = 1

    def __init__(self, robot: str | RobotSpec = "irb120", *, reward: str | RewardType = "sparse",
                 distance_threshold: float = 0.02, episode_steps: int = 100, object_size: float = 0.04,
                 object_mass: float = 0.1, in_air: float = 0.5, lift: float = 0.1, region: float = 0.12,
                 **kwargs: Any) -> None:
        self._task_args = dict(
            reward_type=RewardType.parse(reward),
            distance_threshold=opt.number("distance_threshold", distance_threshold, opt.DISTANCE_THRESHOLD_M, "m"),
            episode_steps=opt.whole("episode_steps", episode_steps, (1, opt.MAX_EPISODE_STEPS)))
        self._half = opt.number("object_size", object_size, (0.01, 0.08), "m", low_open=False) / 2
        self._mass = opt.number("object_mass", object_mass, (0.01, 2.0), "kg", low_open=False)
        self._in_air = opt.number("in_air", in_air, (0.0, 1.0), low_open=False)
        self._lift = opt.number("lift", lift, (0.0, 0.2), "m", low_open=False)
        self._region = opt.number("region", region, (0.0, 0.5), "m")
        kwargs.setdefault("cell", "default")
        kwargs.setdefault("tool", VACUUM_TOOL)
        self._check_tool(kwargs["tool"])
        if kwargs["cell"] is None:
            raise ValueError("cell: PickAndPlace needs a cell with a table ('default' or a cell file)")
        super().__init__(robot, **kwargs)
        self._object = -1
        self._gripper: VacuumGripper | ParallelGripper | None = None
        try:
            self._place_object(self.task.start)
        except Exception:
            self.close()
            raise
        self._suction = False

    def expert(self) -> "PickPlaceExpert":
        """The scripted policy of this task (:class:`PickPlaceExpert`): demonstrations, a reference."""
        return PickPlaceExpert(self)

    def _check_tool(self, tool: Any) -> None:
        """ValueError unless ``tool`` (the ``tool=`` option) is a vacuum cup or a parallel gripper."""
        cup = opt.tool("tool", tool)
        if cup is None or cup.kind not in (ToolKind.VACUUM, ToolKind.GRIPPER):
            raise ValueError(f"tool: PickAndPlace needs a vacuum cup (T{VACUUM_TOOL} of the built-in table, or a "
                             f"tool of kind 'vacuum') or a parallel gripper (T{GRIPPER_TOOL}, kind 'gripper') on the "
                             f"flange, got {tool!r}")

    def _moves_jaws(self) -> bool:
        return self.tool is not None and self.tool.kind is ToolKind.GRIPPER

    def _needs_ik(self) -> bool:
        return True

    def make_task(self) -> Task:
        cell = self.cell
        assert cell is not None
        tables = [b for b in cell.bodies if b.shape.value == "box" and b.mass == 0]
        if not tables:
            raise ValueError(f"cell: {cell.name!r} has no static box to work on (a table)")
        report_T_world = np.linalg.inv(self.robot.world_T_report)
        home = self.robot_spec.home
        reach = self.robot_spec.reach

        def top(b) -> np.ndarray:
            return (report_T_world @ b.pose @ np.r_[0.0, 0.0, b.size[2] / 2, 1.0])[:3]

        # the table: the static box whose top's centre is nearest the robot's reach (the work surface)
        table = min(tables, key=lambda b: abs(np.hypot(*top(b)[:2]) - 0.5 * reach))
        half = np.minimum(np.asarray(table.size[:2]) / 2 - 2 * self._half, self._region)
        R0 = self.kinematics.fk(home)[:3, :3]

        def reachable(p: np.ndarray) -> bool:
            return self._free(self._ik(transform(R0, p), home))

        surface = top(table)
        # a long tool (the gripper's jaws) may stand lower at home than a box's top: start above it
        T_home = self.kinematics.fk(home) @ (np.eye(4) if self.tool is None else self.tool.tcp)
        start = None
        box_top = surface[2] + 2 * self._half
        if T_home[2, 3] < box_top + 0.005:
            for above in (0.04, 0.01):
                start = self._ik(transform(T_home[:3, :3], np.r_[T_home[:2, 3], box_top + above]), home)
                if start is not None:
                    break
            else:
                raise ValueError(f"{self.robot_spec.name}: the tool cannot start above the boxes on the table")
        return PickPlace(self.robot_spec, surface=surface, half_region=np.maximum(half, 0.0), half_size=self._half,
                         lift=self._lift, in_air=self._in_air, reachable=reachable, start_q=start, **self._task_args)

    # ----- the object ---------------------------------------------------------------------
    def _world_pose(self, centre: np.ndarray) -> np.ndarray:
        T = np.eye(4)
        T[:3, 3] = centre
        return self.robot.world_T_report @ T

    def _object_position(self) -> np.ndarray:
        return (np.linalg.inv(self.robot.world_T_report) @ self.world.body_pose(self._object))[:3, 3]

    def _place_object(self, centre: np.ndarray) -> None:
        """A fresh box at ``centre`` (and a gripper for it): made anew each episode, so that no contact
        the engine remembers from the last one makes a seeded episode differ (Gymnasium's check)."""
        if self._object >= 0:
            self.world.remove_body(self._object)
        s = 2 * self._half
        self._object = self.world.add_shapes([("box", (s, s, s), np.eye(4))], self._world_pose(centre),
                                             color=(0.20, 0.45, 0.75, 1.0), mass=self._mass, friction=0.8, free=True)
        if not self.extra_actions:
            self._gripper = None
        elif self._moves_jaws():        # one pair of jaws for the env's life, over each episode's box
            if isinstance(self._gripper, ParallelGripper):
                self._gripper.reset({"object": self._object})
            else:
                ideal = [] if self._placed is None else self._placed.static_work
                self._gripper = ParallelGripper(self.world, self.robot, {"object": self._object}, ideal=ideal)
        else:
            self._gripper = VacuumGripper(self.world, self.robot, {"object": self._object})

    @property
    def held(self) -> bool:
        """The cup holds the box now."""
        return self._gripper is not None and self._gripper.held is not None

    def _reset_objects(self, options: dict[str, Any]) -> None:
        if isinstance(self._gripper, VacuumGripper):
            self._gripper.update(False)
        self._suction = False
        self._place_object(self.task.start)

    def _act(self, extra: np.ndarray) -> None:
        self._suction = bool(extra[0] > 0)

    def _after_step(self) -> None:
        if self._gripper is not None:
            self._gripper.update(self._suction)

    def _achieved_goal(self, T: np.ndarray) -> np.ndarray:
        return self._object_position()

    def _task_observation(self, T: np.ndarray) -> np.ndarray:
        p = self._achieved
        return np.r_[p, p - T[:3, 3], float(self.held)]

    def _info(self, achieved, desired, ik_failed, touching=None) -> dict[str, Any]:
        info = super()._info(achieved, desired, ik_failed, touching)
        info["held"] = self.held
        return info


class _TableExpert:
    """What the scripted experts of the box tasks share: Cartesian control, the box and the table,
    and how high the tool can travel above a place (:meth:`clearance`)."""

    #: m: how close a waypoint counts as reached
    TOLERANCE = 0.002
    #: m: travel heights above the box's top, tried from the first
    CLEARANCES = (0.05, 0.03, 0.02, 0.012)

    def __init__(self, env: "PickAndPlaceEnv", what: str) -> None:
        if env.control is not ControlMode.CARTESIAN:
            raise ValueError(f"the {what} expert acts in Cartesian control, the env has control={env.control.value!r}")
        if env.action_space.shape[0] != 3 + env.extra_actions:
            raise ValueError(f"the {what} expert moves the tool's position; the env's actions turn the tool too")
        self.n = env.robot_spec.dof
        self.half = env._half
        self.step = env._tool_step
        self.surface_z = float(env.task.surface[2])
        self.threshold = env.task.distance_threshold
        self._reachable = env.task.reachable
        self._clear: dict[tuple, float] = {}

    def clearance(self, p: np.ndarray) -> float:
        """The travel height above ``p`` (a box's top, m) the tool reaches (remembered per cm)."""
        key = tuple(np.round(p, 2))
        if key not in self._clear:
            # 5 mm to spare: a height at the end of a joint's range is reached, but a step along it is not
            self._clear[key] = next((c for c in self.CLEARANCES if self._reachable(p + [0.0, 0.0, c + 0.005])), 0.0)
        return self._clear[key]

    def _split(self, obs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
        """The tool's position, the box's centre, the goal and whether the box is held."""
        o = np.asarray(obs["observation"], dtype=float).reshape(-1)
        n = self.n
        return o[3 * n:3 * n + 3], o[-7:-4], np.asarray(obs["desired_goal"], dtype=float).reshape(-1), bool(o[-1] > 0.5)

    def _toward(self, target: np.ndarray, tcp: np.ndarray) -> np.ndarray:
        """The arm action that moves the tool towards ``target`` (a full step at most)."""
        return np.clip((target - tcp) / self.step, -1.0, 1.0)


class PickPlaceExpert(_TableExpert):
    """The scripted pick-and-place of :class:`PickAndPlaceEnv`: a proportional Cartesian policy that
    reads nothing but the observation, so it can act on any step of any episode (demonstrations).

    Not holding the box: up to a travel height if low, over the box, down onto its top (the parallel
    gripper: its jaw tips 5 mm above the table, straddling the box), then suction on (jaws closed)
    while it stands there. Holding it: up to the travel height, over the goal, down until the box's
    centre is at the goal; a goal on the table is let go of there, a goal in the air is held. A box
    already at a goal on the table (within the success distance) is let go of and left (the cup
    rises clear of it, the open jaws stay where they are). The travel height is the highest of 50,
    30, 20 and 12 mm above the box's top that the tool reaches pointing down with 5 mm to spare (the
    SCARA's quill has about 30 mm).

    ``expert(obs)`` takes one env's observation dict and returns its action (float32). Its only state
    is how many steps it has stood still since the box was caught or let go of (:attr:`settle`
    steps, for the grip to settle before lifting and the jaws to open before leaving).

    Args:
        env: the env (Cartesian control).
    """

    def __init__(self, env: "PickAndPlaceEnv") -> None:
        super().__init__(env, "pick-and-place")
        if env.extra_actions != 1:
            raise ValueError("the pick-and-place expert works the cup or the jaws; the env's actions work no gripper")
        self.jaws = env._moves_jaws()
        #: steps to stand still once the box is caught (the jaws squeeze, the cup's constraint settles)
        self.settle = 4 if self.jaws else 2
        self._gripping = self._released = 0
        #: the TCP less the box's centre when it is held
        self.hold = np.array([0.0, 0.0, -(self.half - 0.005) if self.jaws else self.half])

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        tcp, box, goal, held = self._split(obs)
        tol = self.TOLERANCE
        if held and self._gripping < self.settle:      # just caught: let the grip settle before lifting
            self._gripping += 1
            return np.r_[np.zeros(3), 1.0].astype(np.float32)
        on_table = goal[2] - self.surface_z < self.half + tol
        top = [0.0, 0.0, self.half]
        if held:
            at, over, travel = goal + self.hold, goal, goal + top
        elif on_table and np.linalg.norm(box - goal) < self.threshold:     # done: let go and stand clear above it
            self._released += 1
            up = np.r_[tcp[:2], box[2] + self.half + self.clearance(box + top)]
            if self.jaws or self._released <= self.settle:     # the cup lets go first; open jaws stay around it
                up = tcp
            return np.r_[self._toward(up, tcp), -1.0].astype(np.float32)
        else:
            at, over, travel = box + self.hold - [0.0, 0.0, 0.0 if self.jaws else 0.0005], box, box + top
        height = travel[2] + self.clearance(travel)
        if np.linalg.norm(tcp[:2] - over[:2]) > 2 * tol:          # not over it yet: travel high
            target = np.r_[tcp[:2], height] if tcp[2] < height - tol else np.r_[over[:2], height]
            arrived = False
        else:
            target = at
            arrived = bool(np.linalg.norm(at - tcp) < tol)
        grip = held and not (on_table and arrived) or (not held and arrived)
        self._gripping = self._gripping if held else 0
        self._released = 0
        return np.r_[self._toward(target, tcp), 1.0 if grip else -1.0].astype(np.float32)


class PushExpert(_TableExpert):
    """The scripted push of :class:`PushEnv`: a Cartesian policy that reads nothing but the
    observation, so it can act on any step of any episode (demonstrations).

    The push line runs through the box's centre to the goal. When the tool stands behind the box on
    that line (within :attr:`LINE` of it, behind the box's back face) at the box's centre height, it
    pushes along the line, at most :attr:`PUSH_STEP` a step, steering back onto the line, until
    the tool is where it stands when the box is at the goal. Otherwise it gets there: up to the
    travel height (as :class:`PickPlaceExpert`'s, so it clears the box), over the place
    :attr:`BACKOFF` behind the box's back face, down to the box's centre height. A box within the
    quarter of the success distance from the goal is left where it is (no motion). No state: a box pushed off the
    line is approached again from behind.

    Args:
        env: the env (Cartesian control).
    """

    #: m: the tool descends this far behind the box's back face
    BACKOFF = 0.025
    #: m: the tool counts as on the push line within this distance of it
    LINE = 0.004
    #: m: the longest push step (slow enough that the box moves with the tool instead of jumping)
    PUSH_STEP = 0.005
    #: m: where the push ends: the tool this far behind the back face of a box at the goal
    CONTACT = 0.016
    #: the push stops with the box within this fraction of the success distance of the goal
    DONE = 0.25

    def __init__(self, env: "PushEnv") -> None:
        super().__init__(env, "push")

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        tcp, box, goal, _ = self._split(obs)
        tol, half = self.TOLERANCE, self.half
        d = goal[:2] - box[:2]
        dist = float(np.linalg.norm(d))
        if dist < self.DONE * self.threshold:
            return np.zeros(3, dtype=np.float32)
        u = d / dist
        rel = tcp[:2] - box[:2]
        along = float(rel @ u)
        side = rel - along * u
        behind = np.r_[box[:2] - u * (half + self.BACKOFF), box[2]]
        if float(np.linalg.norm(side)) < self.LINE and along < -(half + 0.005) and abs(tcp[2] - box[2]) < 0.01:
            end = np.r_[goal[:2] - u * (half + self.CONTACT), goal[2]]
            move = end - tcp
            move[:2] -= side                                  # back onto the line
            length = float(np.linalg.norm(move))
            target = tcp + move * min(1.0, self.PUSH_STEP / max(length, 1e-9))
        elif np.linalg.norm(tcp[:2] - behind[:2]) < 2 * tol:   # behind it: down to the push height
            target = behind
        else:                                                 # up clear of the box, then over the place
            top = box + [0.0, 0.0, half]
            height = top[2] + self.clearance(top)
            target = np.r_[tcp[:2], height] if tcp[2] < height - tol else np.r_[behind[:2], height]
        return self._toward(target, tcp).astype(np.float32)


class PushEnv(PickAndPlaceEnv):
    """Push a box over the table to a goal on it with the tool (the arm's action only, no suction).

    As :class:`PickAndPlaceEnv` (observation — ``held`` always 0 —, goals, reward, options), but the
    goal always lies on the table and the tool only pushes: any tool (default the vacuum cup, T4,
    never switched on) or the bare flange (``tool=None``). What touches the box moves it through
    the physics, so the joint model must be a dynamic one (``hinge`` or ``articulation``, the
    default): a kinematic arm is set to each step's joints without moving between them, and the
    engine resolves the overlap by throwing the box.
    """

    extra_actions = 0

    def __init__(self, robot: str | RobotSpec = "irb120", **kwargs: Any) -> None:
        if kwargs.get("in_air"):
            raise ValueError("in_air: a pushed box stays on the table (Push's goals are on it)")
        if JointMode.parse(kwargs.get("joint_mode", JointMode.ARTICULATION)) is JointMode.KINEMATIC:
            raise ValueError("joint_mode: Push needs a dynamic joint model ('hinge' or 'articulation'); a kinematic "
                             "arm jumps from step to step and throws the box instead of pushing it")
        kwargs["in_air"] = 0.0
        super().__init__(robot, **kwargs)

    def expert(self) -> "PushExpert":  # type: ignore[override]
        """The scripted push of this task (:class:`PushExpert`): demonstrations, a reference."""
        return PushExpert(self)

    def _check_tool(self, tool: Any) -> None:
        opt.tool("tool", tool)          # any tool pushes (checked as any tool= option)

    def _moves_jaws(self) -> bool:
        return False                    # a gripper pushes with its drawn, open jaws
