"""``armtwin torque ROBOT --program P``: the joint torques a G-code program needs, before any physics runs.

The program goes through the same preflight as ``armtwin check`` and the same control
trajectory as ``armtwin run`` (IK at every control sample on the preflight's branch, velocities
from the timed path); accelerations are the velocities' central differences. The rigid-body
inverse dynamics (gravity + inertia + Coriolis, :mod:`armtwin.controllers.dynamics`, the robot's
published link data and the payload on the flange) give the torque every sample needs; per joint
the peak (with its time and program line) and the RMS are printed, and every program line on
which a joint needs more than its effort limit is flagged. ``--friction`` adds the drive data's
Coulomb and viscous friction.

Exit codes: 0 the program stays within the effort limits; 1 a line exceeds them, or the program
does not pass the preflight (its faults are printed as ``armtwin check`` prints them); 2 usage
errors (unknown robot, a program file that is missing or unreadable, bad --origin or --payload).
Long programs show progress on stderr (not with ``--json``).
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from .cli import CliError, StderrProgress, add_json_flag, print_json
from .cmd_check import EXIT_FAULTY, PROGRESS_MIN_LINES, check, print_report, report_dict

#: largest payload accepted, kg (ten times the largest rated payload of armtwin's robots)
MAX_PAYLOAD = 50.0
#: control samples per chunk of a dwell (a long G4 is evaluated in pieces of this size)
HOLD_CHUNK = 50_000


def register(sub) -> None:
    p = sub.add_parser("torque", help="peak and RMS joint torques a G-code program needs; lines over the effort limits")
    p.add_argument("robot", help="robot id (see `armtwin robots`)")
    p.add_argument("--program", required=True, metavar="P", help="G-code file (.ngc, .gcode, .nc)")
    p.add_argument("--origin", nargs=3, type=float, metavar=("X", "Y", "Z"),
                   help="work origin (program X0 Y0 Z0) in the robot base frame, mm (default: per robot, see docs/GCODE.md)")
    p.add_argument("--payload", type=float, default=0.0, metavar="KG",
                   help=f"mass on the flange, kg, 0 to {MAX_PAYLOAD:g} (a solid aluminium sphere on the flange "
                        f"origin, as in the simulator; default 0)")
    p.add_argument("--friction", action="store_true",
                   help="add the drive data's Coulomb and viscous friction to the rigid-body torques")
    add_json_flag(p)
    p.set_defaults(func=run)


def _payload(value: float) -> float:
    if not (math.isfinite(value) and 0.0 <= value <= MAX_PAYLOAD):
        raise CliError(f"--payload {value:g}: must be a mass from 0 to {MAX_PAYLOAD:g} kg")
    return float(value)


def budget_of(report, spec, *, payload: float = 0.0, friction: bool = False, progress=None):
    """The :class:`~armtwin.controllers.torque_budget.TorqueBudget` of a clean preflight report.

    Args:
        report: a clean :class:`~armtwin.controllers.gcode.preflight.PreflightReport`.
        spec: its robot.
        payload: kg on the flange.
        friction: add the drive data's Coulomb friction and joint damping.
        progress: called with the done fraction 0..1, or None.

    Raises:
        ControlTrajectoryError: a control sample has no solution on the preflight's branch.
    """
    from ..controllers.torque_budget import TorqueBudgetBuilder
    from ..controllers.gcode.trajectory import ControlTrajectory, HoldPiece
    from ..robots.bodies import rigid_bodies
    traj = ControlTrajectory(report, spec)
    builder = TorqueBudgetBuilder(rigid_bodies(spec, payload=payload), spec.max_effort,
                                  friction=spec.drive.friction if friction else None,
                                  viscous=spec.drive.joint_damping if friction else None)
    for piece in traj:
        if isinstance(piece, HoldPiece):
            for a in range(piece.start, piece.stop, HOLD_CHUNK):
                b = min(a + HOLD_CHUNK, piece.stop)
                t = traj.plan.sample_times(traj.period, a, b)
                builder.add(t, np.full(b - a, piece.line), np.broadcast_to(piece.q, (b - a, spec.dof)),
                            np.zeros((b - a, spec.dof)))
        else:
            builder.add(piece.samples.t, piece.samples.line, piece.q, piece.qd)
        if progress is not None:
            progress(piece.stop / traj.count)
    return builder.finish()


def budget_dict(budget, spec) -> dict:
    """The budget as JSON-ready data (torques in N·m, N for prismatic joints)."""
    unit = ["N" if p else "N·m" for p in spec.prismatic]
    return {
        "samples": budget.samples,
        "program_time_s": budget.duration,
        "within_limits": budget.within_limits,
        "joints": [{"joint": f"J{j + 1}", "unit": unit[j], "peak": b.peak_torque, "peak_abs": b.peak,
                    "peak_time_s": b.peak_time, "peak_line": b.peak_line, "rms": b.rms, "limit": b.limit,
                    "peak_over_limit": b.ratio} for j, b in enumerate(budget.joints)],
        "lines_over_limit": budget.excess_lines,
        "over_limit": [{"line": e.line, "joint": f"J{e.joint + 1}", "torque": e.torque, "limit": e.limit,
                        "time_s": e.time} for e in budget.excesses],
        "over_limit_truncated": budget.truncated,
    }


def run(args: argparse.Namespace) -> int:
    payload = _payload(args.payload)
    spec, machine, rep = check(args, quiet=args.json)
    if not rep.clean(False):
        if args.json:
            print_json({"program": args.program, **report_dict(rep, spec, machine, False), "torque": None})
        else:
            print_report(args.program, rep, spec, machine, False)
            print(f"{args.program}: no torques: the program must pass the preflight first", file=sys.stderr)
        return EXIT_FAULTY
    progress = None
    if not args.json and rep.program.line_count > PROGRESS_MIN_LINES:
        progress = StderrProgress(f"torques of {args.program}")
    budget = budget_of(rep, spec, payload=payload, friction=args.friction, progress=progress)
    if progress is not None:
        progress.done()
    if args.json:
        print_json({"program": args.program, "robot": spec.name, "payload_kg": payload, "friction": args.friction,
                    "origin_mm": [v * 1000 for v in machine.origin], **budget_dict(budget, spec)})
    else:
        print_budget(args.program, budget, spec, machine, payload, args.friction)
    return 0 if budget.within_limits else EXIT_FAULTY


def print_budget(name: str, budget, spec, machine, payload: float, friction: bool) -> None:
    """The per-joint table, then one line per (program line, joint) over the limit, then the verdict."""
    units = ["N" if p else "N·m" for p in spec.prismatic]
    o = ", ".join(f"{v * 1000:g}" for v in machine.origin)
    what = "rigid body" + (" + friction" if friction else "")
    print(f"{name}: {spec.name}, payload {payload:g} kg, origin {o} mm: {budget.samples} control samples, "
          f"{budget.duration:.2f} s ({what})")
    print(f"{'joint':>5} {'peak':>10} {'at s':>8} {'line':>6} {'RMS':>9} {'limit':>8} {'peak/limit':>10}")
    for j, b in enumerate(budget.joints):
        print(f"{'J' + str(j + 1):>5} {b.peak_torque:>10.2f} {b.peak_time:>8.3f} {b.peak_line:>6d} {b.rms:>9.2f} "
              f"{b.limit:>8.4g} {100 * b.ratio:>9.0f}%  {units[j]}")
    for e in budget.excesses:
        print(f"{name}:{e.line}: J{e.joint + 1} needs {e.torque:.1f} {units[e.joint]} at t = {e.time:.3f} s, "
              f"over its limit of {e.limit:g} {units[e.joint]} ({100 * abs(e.torque) / e.limit:.0f}%)")
    if budget.truncated:
        print(f"{name}: … more lines over the limits than listed ({budget.excess_lines} in all)")
    if budget.within_limits:
        worst = max(range(spec.dof), key=lambda j: budget.joints[j].ratio)
        print(f"{name}: within the effort limits (highest: J{worst + 1} at "
              f"{100 * budget.joints[worst].ratio:.0f}% of its limit)")
    else:
        print(f"{name}: OVER the effort limits on {budget.excess_lines} line(s)")
