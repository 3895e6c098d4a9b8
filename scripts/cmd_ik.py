"""``armtwin ik ROBOT X Y Z (--quat QX QY QZ QW | --rpy RX RY RZ)``: closed-form inverse kinematics.

Position in mm, angles in degrees (the SCARA's J3 in mm). Exit codes: 0 solved (also at a
singularity, which is reported), 3 out of reach, 4 no solution inside the joint ranges (or none on
the requested branch, including a branch that merges with another at a singularity), 5 with
``--cell``: every solution inside the ranges is in collision, 2 bad input.

With ``--cell FILE|default`` (as ``armtwin check``) every solution is checked against the workcell
and the robot against itself (:class:`~armtwin.envs.interference.CollisionFilter`, the IK's
solution filter): ``--all`` marks each one free or in collision with the pairs that touch, and the
weighted shortest-travel choice skips solutions in collision (saying so when it skips the nearest).
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from .cli import CliError, add_json_flag, get_robot, parse_joints_display, print_json
from .cmd_check import add_cell_arg, load_cell_arg

EXIT_UNREACHABLE = 3
EXIT_OUT_OF_RANGE = 4
EXIT_IN_COLLISION = 5

_EPILOG = f"""\
orientation: --quat is (x, y, z, w) and is normalised; --rpy is URDF roll-pitch-yaw in degrees
(fixed axes X, then Y, then Z: R = Rz(RZ) Ry(RY) Rx(RX)). 6-axis robots need one of them. The
SCARA uses only the tool roll about z (RZ of --rpy, e.g. --rpy 180 0 30; default roll 0).

singular poses (wrist aligned J5 = 0, wrist centre on the J1 axis, arm stretched or folded) are
solved and reported: a "singular:" line naming the singularity and the joints kept at their
--near value because the pose does not determine them (JSON "singular", "free_joints" 1-based).

workcell: with --cell FILE (or --cell default, the robot's built-in cell with its table) every
solution is checked for collisions with the cell's bodies and of the robot with itself, by the
rule of `armtwin check --cell` (docs/WORKCELL.md): --all marks each one "free" or names the pairs
in contact (link-link "self", link-body "body"; the bare flange: a tool's "tool" pairs arise in the
pendant, `armtwin ui --tool N --cell`) and how deep; the choice takes the nearest solution that is
free, and says so when the nearest one is in collision.

exit codes: 0 solved; {EXIT_UNREACHABLE} target out of reach; {EXIT_OUT_OF_RANGE} no solution inside the joint
ranges, or none on the --near branch (status "singular" when that branch merges with another at
a singularity); {EXIT_IN_COLLISION} with --cell: every solution inside the ranges (on the --near branch
with --stay-on-branch) is in collision (status "rejected"); 2 bad input. With --json the JSON is
printed in every case (status "solved", "unreachable", "out_of_range", "singular" or "rejected")
and the one-line message still goes to stderr.
"""


def register(sub) -> None:
    p = sub.add_parser("ik", help="inverse kinematics: joint solutions for a flange pose (mm, deg)",
                       description="Closed-form inverse kinematics for a flange (tool0) pose in the base frame.",
                       epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("robot", help="robot id (see `armtwin robots`)")
    # three positionals, not nargs=3 with a tuple metavar: argparse's help cannot format that
    for axis in "xyz":
        p.add_argument(axis, metavar=axis.upper(), help=f"flange {axis}, mm")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quat", nargs=4, metavar=("QX", "QY", "QZ", "QW"), help="orientation quaternion (x, y, z, w)")
    g.add_argument("--rpy", nargs=3, metavar=("RX", "RY", "RZ"), help="orientation, URDF roll-pitch-yaw, degrees")
    p.add_argument("--near", nargs="+", metavar="J", help="current joints (deg; mm for prismatic): the reference "
                   "for the shortest-travel choice; default the home pose")
    p.add_argument("--stay-on-branch", action="store_true", help="only accept solutions on the --near branch")
    p.add_argument("--all", action="store_true", help="list every solution, inside the ranges or not")
    add_cell_arg(p, "mark the solutions in collision with this workcell")
    add_json_flag(p)
    p.set_defaults(func=run)


#: largest |X|, |Y|, |Z| accepted, m (as G-code's 10 m bound on targets)
MAX_COORD_M = 10.0
#: largest |angle| of --rpy accepted, deg (ten turns; beyond that a typo, not an orientation)
MAX_ANGLE_DEG = 3600.0


def _floats(values, what: str) -> np.ndarray:
    try:
        out = np.array([float(v) for v in values])
    except ValueError:
        raise CliError(f"{what} must be numbers, got {' '.join(values)}") from None
    if not np.all(np.isfinite(out)):
        raise CliError(f"{what} must be finite numbers")
    return out


def target_pose(spec, xyz_mm, quat=None, rpy_deg=None) -> np.ndarray:
    """(4, 4) target (m) from CLI values; raises CliError for bad values or a missing orientation."""
    from ..controllers.ik import pose_from_quat, pose_from_rpy
    pos = _floats(xyz_mm, "X Y Z") / 1000.0
    if np.max(np.abs(pos)) > MAX_COORD_M:
        raise CliError(f"X Y Z must be within ±{MAX_COORD_M * 1000:g} mm (the robots reach less than 1 m), "
                       f"got {' '.join(str(v) for v in xyz_mm)}")
    if quat is not None:
        qv = _floats(quat, "--quat")
        big = np.max(np.abs(qv))
        if big == 0.0 or np.linalg.norm(qv / big) * big < 1e-9:  # scaled first: no overflow
            raise CliError("--quat has zero length")
        return pose_from_quat(pos, qv / big)
    if rpy_deg is not None:
        rpy = _floats(rpy_deg, "--rpy")
        if np.max(np.abs(rpy)) > MAX_ANGLE_DEG:
            raise CliError(f"--rpy angles must be within ±{MAX_ANGLE_DEG:g}°, got {' '.join(rpy_deg)}")
        return pose_from_rpy(pos, np.radians(rpy))
    if spec.roll_only:
        return pose_from_rpy(pos, (math.pi, 0.0, 0.0))   # tool down, roll 0
    raise CliError(f"{spec.name} needs an orientation: --quat QX QY QZ QW or --rpy RX RY RZ (degrees)")


def solution_rows(spec, result, cell_filter=None) -> list[dict]:
    """The JSON rows of every solution (joints in display units); with a
    :class:`~armtwin.envs.interference.CollisionFilter`, whether each is in collision and the pairs
    in contact (``collision`` and ``contacts`` are None without one)."""
    rows = []
    for s in result.solutions:
        found = None if cell_filter is None else cell_filter.interference(s.q)
        rows.append({"joints_deg": spec.to_display(s.q).tolist(), "branch": s.branch,
                     "within_limits": bool(s.within_limits),
                     "chosen": bool(result.best is not None and np.array_equal(s.q, result.best)),
                     "collision": None if found is None else bool(found),
                     "contacts": None if found is None else [c.to_dict() for c in found]})
    return rows


def format_joints(spec, q) -> str:
    """Joints in display units on one line (no "-0.000")."""
    d = spec.to_display(q)
    d = np.where(np.abs(d) < 5e-4, 0.0, d)
    return "  ".join(f"J{i + 1} {v:9.3f}{' mm' if p else '°'}" for i, (v, p) in enumerate(zip(d, spec.prismatic)))


def run(args: argparse.Namespace) -> int:
    from ..controllers.ik import solve
    spec = get_robot(args.robot)
    T = target_pose(spec, [args.x, args.y, args.z], args.quat, args.rpy)
    # --near is where the robot is: outside its ranges it cannot be (and would skew the choice)
    q_near = parse_joints_display(spec, args.near) if args.near else None
    cc = load_cell_arg(args, spec)
    if cc is None:
        return report(args, spec, T, solve(spec, T, q_near, stay_on_branch=args.stay_on_branch))
    from ..envs.collision import CollisionModel
    from ..envs.interference import CollisionFilter
    with CollisionModel(spec, cc.cell) as model:
        cell_filter = CollisionFilter(model)
        r = solve(spec, T, q_near, stay_on_branch=args.stay_on_branch, reject=cell_filter)
        # the choice without the cell: when the filter refused it, the nearest solution was skipped
        plain = solve(spec, T, q_near, stay_on_branch=args.stay_on_branch)
        return report(args, spec, T, r, cc.cell, cell_filter, cell_filter.skipped(plain))


def report(args: argparse.Namespace, spec, T: np.ndarray, r, cell=None, cell_filter=None, skipped=None) -> int:
    """Print the result of ``armtwin ik`` (text or ``--json``) and return the exit code.

    ``cell``, ``cell_filter``: the workcell and its collision filter with ``--cell``; ``skipped``:
    (branch, pairs in contact) of the nearest solution when the choice skipped it for a collision.
    """
    from ..controllers.ik import IKStatus
    code = {IKStatus.SOLVED: 0, IKStatus.UNREACHABLE: EXIT_UNREACHABLE,
            IKStatus.REJECTED: EXIT_IN_COLLISION}.get(r.status, EXIT_OUT_OF_RANGE)
    rows = solution_rows(spec, r, cell_filter)
    if args.json:
        print_json({
            "robot": spec.name,
            "target": {"position_mm": (T[:3, 3] * 1000).tolist(), "rotation": T[:3, :3].tolist()},
            "solutions": rows,
            "best": None if r.best is None else spec.to_display(r.best).tolist(),
            "best_branch": r.best_branch,
            "status": r.status.value,
            "reason": r.reason,
            "singular": bool(r.singular),
            "free_joints": [j + 1 for j in r.free_joints],
            "distance_mm": r.distance * 1000.0,
            "cell": None if cell is None else {"name": cell.name, "source": cell.source},
            "skipped_nearest": None if skipped is None else {
                "branch": skipped[0], "contacts": [c.to_dict() for c in skipped[1]]},
        })
    else:
        x, y, z = T[:3, 3] * 1000
        print(f"{spec.title}: IK for flange at x={x:.3f} y={y:.3f} z={z:.3f} mm"
              + ("" if cell is None else f", in cell {cell.name!r}"))
        if spec.roll_only and T[2, 2] > -1.0 + 1e-9:  # anything but "tool pointing down"
            print("  note: the SCARA's tool points straight down; only the roll about z (RZ) is used")
        if skipped is not None and r.ok:   # (when none is free, the one line on stderr says it)
            print(f"  nearest solution ({skipped[0]}) skipped, in collision: "
                  + "; ".join(c.describe() for c in skipped[1]))
        if r.ok:
            print(f"  best ({r.best_branch}): {format_joints(spec, r.best)}")
            if r.singular:
                print(f"  singular: {r.reason.partition('; singular: ')[2]}")
        if args.all:
            legend = "" if cell_filter is None else "; with the cell: free, or the pairs in collision"
            print(f"  {len(r.solutions)} solution(s)  (* chosen, ✓ inside the joint ranges{legend})")
            for row, s in zip(rows, r.solutions):
                mark = "*" if row["chosen"] else " "
                ok = "✓" if s.within_limits else "✗"
                hit = "" if cell_filter is None else "  " + (
                    "COLLISION: " + "; ".join(c.describe() for c in cell_filter.interference(s.q))
                    if row["collision"] else "free")
                print(f"  {mark} {ok} {s.branch:<18} {format_joints(spec, s.q)}{hit}")
        elif r.ok and len(r.solutions) > 1:
            free = "" if cell_filter is None else \
                f", {sum(s.within_limits and not row['collision'] for s, row in zip(r.solutions, rows))} of them free"
            print(f"  ({len(r.solutions)} solutions in all, {sum(s.within_limits for s in r.solutions)} "
                  f"inside the ranges{free}; --all lists them)")
    if r.status is IKStatus.REJECTED and cell_filter is not None:
        print(f"armtwin: in collision: {cell_filter.refusal(r)}", file=sys.stderr)
    elif not r.ok:
        print(f"armtwin: {r.status.value.replace('_', ' ')}: {r.reason}", file=sys.stderr)
    return code
