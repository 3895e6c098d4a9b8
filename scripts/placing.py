"""``--place`` of ``armtwin check`` and ``armtwin run``: search the work origin, then check (or run) there.

``--place`` alone searches every origin; ``--place z=150`` or ``--place x=300,y=0`` (mm, base
frame, comma-separated) fixes coordinates of the origin. ``--place`` and ``--origin`` exclude each
other. A program that fits nowhere is one line naming why, exit code 1 (with ``--json`` the JSON
says the same: ``"placement": null`` and ``"reason"``); a program with errors of its own (parser,
interpreter) lists them and is not placed, exit code 1. The search itself is
:func:`armtwin.controllers.gcode.placement.place_program` (docs/GCODE.md, "Placing a job").

Also ``--dwell-ms``, the dialect option that reads G4 P as milliseconds (Inkscape-style writers).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace

from .cli import CliError, print_json

EXIT_FAULTY = 1


def _constraint(text: str):
    from ..controllers.gcode.placement import parse_constraint
    try:
        return parse_constraint(text)
    except ValueError as exc:
        hint = " (give the program before --place, or write --place= for no constraint)" if "=" not in text else ""
        raise argparse.ArgumentTypeError(f"{exc}{hint}") from None


def add_place_options(p: argparse.ArgumentParser) -> None:
    """``--place [x=MM,y=MM,z=MM]`` and ``--dwell-ms``; read them with :func:`dialect` and :func:`place`."""
    p.add_argument("--place", nargs="?", const="", default=None, type=_constraint, metavar="x=MM,y=MM,z=MM",
                   help="find the work origin at which the whole program checks clean with the largest joint "
                        "margin, and use it; optionally with fixed coordinates, e.g. --place z=150 "
                        "(docs/GCODE.md \"Placing a job\")")
    p.add_argument("--dwell-ms", action="store_true",
                   help="dialect option: G4 P is in milliseconds (as Inkscape-style writers mean it), not seconds")


def dialect(args: argparse.Namespace, machine):
    """``machine`` with the dialect options of ``args`` (``--dwell-ms``)."""
    return replace(machine, dwell_ms=True) if getattr(args, "dwell_ms", False) else machine


def place(args: argparse.Namespace, spec, machine, data: bytes, *, quiet: bool, passes=()):
    """Search the origin for ``args.place``; returns (machine at the origin found, its preflight report).

    ``passes``: extra preflight passes every candidate must also pass (``--cell``'s collision checks).
    Stores the :class:`~armtwin.controllers.gcode.placement.PlaceResult` as ``args.placement``
    (for :func:`placement_json`); prints the placement line unless ``--json``.

    Raises:
        CliError: ``--place`` with ``--origin`` (exit 2); the program fits nowhere (exit 1).
    """
    from ..controllers.gcode.placement import place_program
    if getattr(args, "origin", None) is not None:
        raise CliError("--place and --origin exclude each other: --place finds the origin")
    if not quiet:
        print(f"placing {args.program} for {spec.name} …", file=sys.stderr)
    res = place_program(data, spec, machine, args.place, passes=passes)
    args.placement = res
    if res.best is None:
        if res.faults:     # the program's own errors: report them as check does, then say why nothing was searched
            line = f"{args.program}: cannot be placed for {spec.name}: fix its error(s) first"
            if not getattr(args, "json", False):
                for f in res.faults:
                    print(f"{args.program}:{f}" if f.line else f"{args.program}: {f}")
        else:
            line = f"{args.program}: fits nowhere for {spec.name}: {res.reason}"
        if getattr(args, "json", False):
            print_json({"program": args.program, "robot": spec.name, "clean": False,
                        "faults": [f.to_dict() for f in res.faults], **placement_json(args, spec)})
        raise CliError(line, EXIT_FAULTY)
    machine = replace(machine, origin=res.best.origin)
    if not getattr(args, "json", False):
        print(placement_line(args.program, res, spec))
    return machine, res.best.report


def _joint_text(spec, best) -> str:
    j = best.joint
    if spec.prismatic[j]:
        return f"J{j + 1} stays {best.joint_distance * 1000:.1f} mm from its limit"
    return f"J{j + 1} stays {math.degrees(best.joint_distance):.1f} deg from its limit"


def placement_line(name: str, res, spec) -> str:
    """The one line that reports a placement."""
    b = res.best
    o = ", ".join(f"{v * 1000:g}" for v in b.origin)
    return (f"{name}: placed for {spec.name} at origin {o} mm: joint margin {b.margin:.3f} of a joint's range "
            f"({_joint_text(spec, b)}); {res.tried} origins tried, {res.feasible} feasible, {res.verified} checked "
            f"in full ({res.clean} clean), {res.seconds:.1f} s")


def placement_json(args: argparse.Namespace, spec) -> dict:
    """``{"placement": …}`` for the JSON of check and run ({} without ``--place``)."""
    res = getattr(args, "placement", None)
    if res is None:
        return {}
    counts = {"tried": res.tried, "feasible": res.feasible, "verified": res.verified, "clean": res.clean,
              "seconds": res.seconds}
    if res.best is None:
        return {"placement": None, "reason": res.reason, "placement_search": counts}
    b = res.best
    prismatic = bool(spec.prismatic[b.joint])
    return {"placement": {
        "origin_mm": [v * 1000 for v in b.origin], "margin": b.margin, "joint": b.joint + 1,
        "joint_distance": b.joint_distance * 1000 if prismatic else math.degrees(b.joint_distance),
        "joint_distance_unit": "mm" if prismatic else "deg", **counts}}
