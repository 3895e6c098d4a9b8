"""Closed-form inverse kinematics for every armtwin robot (pure Python/numpy, no PyBullet).

>>> from armtwin import robots
>>> from armtwin.controllers.ik import pose_from_rpy, solve
>>> spec = robots.get("irb120")
>>> r = solve(spec, pose_from_rpy((0.374, 0.0, 0.630), (0.0, 1.5707963267948966, 0.0)))
>>> r.ok, r.best_branch
(True, 'front/up/noflip')

Three entry points share one prepared IK per robot (:func:`robot_ik`, kept with the spec):

* :func:`solve` — one pose, the choice over every closed-form branch (control loops; plain
  Python scalars, ~8–25 µs on the IRB120). The solver skips a branch as soon as its partial
  travel cannot win (:mod:`.travel`), and :attr:`IKResult.solutions` is only built when
  it is read.
* :func:`solve_batch` — N poses at once, vectorised over poses and branches (whole programs).
* :func:`solve_path` — a densely sampled path, keeping the arm configuration (shoulder and
  elbow branch) and unwrapping joints toward the previous sample; reports the first sample
  that cannot be followed.

The package, by module:

==========================  ==========================================================================
:mod:`.solving`             the entry points above, the pose helpers, input checks
:mod:`.results`             :class:`IKResult`, :class:`BatchIKResult`, :class:`PathIKResult`, :class:`IKStatus`, :data:`Reject`
:mod:`.model`               :class:`RobotIK` (a robot's solver, ranges, weights, prepared once), :func:`solver_for`
:mod:`.solver`              the :class:`Solver` protocol every family implements, its base, singularity flags
:mod:`.travel`              :class:`TravelRule`, the weighted shortest-travel choice
:mod:`.geometry`            typed geometry per family (metres, radians), :class:`KinematicFamily`, :class:`ToolOrientation`
:mod:`.angles`              wrapping, turns, angles a float pose determines badly
:mod:`.spherical_wrist`     :class:`SphericalWristSolver` (IRB120): 8 branches, front/back × up/down × noflip/flip
:mod:`.offset_wrist`        :class:`OffsetWristSolver` (AUBO-i5): up to 8, only the real ones
:mod:`.scara`               :class:`ScaraSolver` (SCARA): 2 branches, right/left
==========================  ==========================================================================

The family is chosen from the type of ``spec.geometry`` (a :class:`SphericalWristGeometry`,
:class:`OffsetWristGeometry` or :class:`ScaraGeometry`); each solver is checked once against
:func:`~armtwin.controllers.kinematics.fk`, and its fused choice against
:meth:`TravelRule.pick`, when it is built.

Joints whose range is wider than a turn (IRB120 J6 ±400°, SCARA J4 ±360°) take the 2π
equivalent nearest ``q_near``; :attr:`IKResult.solutions` also lists the other equivalents
that fit the range, so every in-range joint vector of the pose is among them exactly.

Singular poses are reported, not hidden: :attr:`IKResult.singular` and
:attr:`IKResult.free_joints` say that the chosen solution sits on a singularity and which
joints kept their ``q_near`` value because the pose does not determine them, and the reason
names the singularity. The status stays SOLVED (a singular pose is reached exactly);
:attr:`IKStatus.SINGULAR` is the outcome of ``stay_on_branch`` when ``q_near``'s branch merges
with another one at the singularity and so does not exist there.

Where a float pose does not determine a joint (singularities) the solvers keep ``q_near``'s
value, so ``solve(spec, fk(q), q)`` gives ``q`` back: the free joint at a singularity (IRB120 J1
on the J1 axis and J4 at theta5 = 0, AUBO J6 at theta5 = 0 unless J2–J4 have no in-range
solution with it: then the value nearest ``q_near``'s where they have one); a nearly free wrist
joint where keeping it changes the pose by at most 1e-12 (:func:`.angles.kept_angle`); a
stretched or folded elbow (and the AUBO's shoulder angle near its singularity), known only to
~1e-8 rad, where ``q_near``'s elbow reproduces the reach to float precision, else exactly
stretched / folded (:func:`.angles.elbow_angle`). Every solution reproduces the pose to 1e-9 m
and 1e-9 rad. A joint within :data:`LIMIT_TOL` (1e-9 rad / m) beyond a limit counts as inside,
as in ``RobotSpec.within_limits``.

Choice rule (:class:`TravelRule`): among the solutions inside the joint ranges the one with the
smallest weighted travel ``sum_i w_i * |q_i - q_near_i|`` (rad, m) wins; the default weights
(:func:`default_weights`) are 1 for J1–J3 and 0.25 for the wrist joints. ``stay_on_branch``
keeps the branch label of ``q_near``. A solution filter (``reject``, :data:`Reject`) refuses
solutions for reasons the IK does not know (collisions, a workcell's keep-out zones): the
choice then takes the nearest solution it accepts. The workcell's collision check is such a
filter (:class:`armtwin.envs.interference.CollisionFilter`, used by ``armtwin ik --cell`` and the
pendant); it is passed in as a callable, so this package stays free of PyBullet.

Orientation input: a (4, 4) transform (metres) in the robot's reporting base frame for the
flange ``tool0``; :func:`pose_from_quat` builds one from a position and a quaternion
(x, y, z, w), :func:`pose_from_rpy` from URDF roll-pitch-yaw (fixed axes X, then Y, then Z:
``R = Rz(yaw) Ry(pitch) Rx(roll)``, radians). For a robot with :attr:`ToolOrientation.ROLL`
(the SCARA) only the position and the tool roll (the angle of the tool x axis in the base xy
plane) are used.

Normal outcomes are results (:class:`IKStatus`); invalid input (wrong shapes, NaN, a matrix
that is not a rotation) raises ``ValueError``.
"""
# mypy: disallow-untyped-defs, check-untyped-defs

from __future__ import annotations

from .geometry import (
    IKGeometry,
    KinematicFamily,
    OffsetWristGeometry,
    ScaraGeometry,
    SphericalWristGeometry,
    ToolOrientation,
)
from .model import DEFAULT_ARM_WEIGHT, DEFAULT_WRIST_WEIGHT, LIMIT_TOL, RobotIK, default_weights, robot_ik, solver_for
from .offset_wrist import OffsetWristSolver
from .results import BatchIKResult, IKResult, IKSolution, IKStatus, PathIKResult, Reject
from .scara import ScaraSolver
from .solver import BranchSolver, Singularity, Solver
from .solving import (
    DEFAULT_MAX_STEP,
    branch_labels,
    branch_of,
    pose_from_quat,
    pose_from_rpy,
    solve,
    solve_batch,
    solve_path,
)
from .spherical_wrist import SphericalWristSolver
from .travel import TravelRule

__all__ = [
    "DEFAULT_ARM_WEIGHT",
    "DEFAULT_MAX_STEP",
    "DEFAULT_WRIST_WEIGHT",
    "LIMIT_TOL",
    "BatchIKResult",
    "BranchSolver",
    "IKGeometry",
    "IKResult",
    "IKSolution",
    "IKStatus",
    "KinematicFamily",
    "OffsetWristGeometry",
    "OffsetWristSolver",
    "PathIKResult",
    "Reject",
    "RobotIK",
    "ScaraGeometry",
    "ScaraSolver",
    "Singularity",
    "Solver",
    "SphericalWristGeometry",
    "SphericalWristSolver",
    "ToolOrientation",
    "TravelRule",
    "branch_labels",
    "branch_of",
    "default_weights",
    "pose_from_quat",
    "pose_from_rpy",
    "robot_ik",
    "solve",
    "solve_batch",
    "solve_path",
    "solver_for",
]
