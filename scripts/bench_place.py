"""``armtwin bench place``: how long ``check --place`` takes to place a job.

Times :func:`~armtwin.controllers.gcode.placement.place_program` (what ``armtwin check --place``
runs: the coarse batch-IK grid, its refinement and the full preflights of the best candidates) on
``examples/irb120_word.ngc`` and on a generated program of ``--lines`` lines (``armtwin bench
gcode``'s generator: strokes, arcs, rapids, comments and tool outputs within ±40 mm), for the
IRB120, starting from an origin at which the program is out of reach. Wall and process CPU time,
best of ``--repeat`` runs, with the search's counts and the origin found.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from .cli import add_json_flag, print_json

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "irb120_word.ngc"


def register(sub) -> None:
    p = sub.add_parser("place", help="time of check --place (job placement) on the word example and a generated program",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lines", type=int, default=1000, help="lines of the generated program (default 1000)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each; the best counts (default 3)")
    add_json_flag(p)
    p.set_defaults(func=run)


def _timed(f, repeat: int):
    best_w = best_c = float("inf")
    out = None
    for _ in range(max(1, repeat)):
        w0, c0 = time.perf_counter(), time.process_time()
        out = f()
        best_c = min(best_c, time.process_time() - c0)
        best_w = min(best_w, time.perf_counter() - w0)
    return out, best_w, best_c


def run(args: argparse.Namespace) -> int:
    from .. import robots
    from ..controllers.gcode import machine_for
    from ..controllers.gcode.placement import place_program
    from .bench_gcode import generate_program
    spec = robots.get("irb120")
    machine = machine_for(spec, (900.0, 0.0, 200.0))        # out of reach: the search must move the job
    cases = [(EXAMPLE.name, EXAMPLE.read_bytes()), (f"generated, {args.lines} lines", generate_program(args.lines))]
    rows = []
    for name, text in cases:
        res, wall, cpu = _timed(lambda: place_program(text, spec, machine), args.repeat)
        rows.append({"program": name, "lines": text.count(b"\n" if isinstance(text, bytes) else "\n"),
                     "wall_s": wall, "cpu_s": cpu, "tried": res.tried, "feasible": res.feasible,
                     "verified": res.verified, "clean": res.clean,
                     "origin_mm": [v * 1000 for v in res.best.origin] if res.best else None,
                     "margin": res.best.margin if res.best else None, "reason": res.reason})
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    if args.json:
        print_json({"robot": spec.name, "load_average": load, "results": rows})
        return 0
    print(f"check --place on {spec.name} (best of {args.repeat}; load average {load:.2f})" if load is not None
          else f"check --place on {spec.name} (best of {args.repeat})")
    for r in rows:
        where = (f"origin {', '.join(f'{v:g}' for v in r['origin_mm'])} mm, margin {r['margin']:.3f}"
                 if r["origin_mm"] else f"fits nowhere: {r['reason']}")
        print(f"  {r['program']:<24} {r['lines']:>6} lines  wall {r['wall_s']:6.2f} s  cpu {r['cpu_s']:6.2f} s  "
              f"{r['tried']} tried, {r['feasible']} feasible, {r['verified']} checked in full; {where}")
    return 0
