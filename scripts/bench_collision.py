"""``armtwin bench collision`` (also ``bench check``): the collision preflight of a long program.

Generates ``armtwin bench gcode``'s program (strokes, arcs, rapids within ±40 mm of the work
origin and 0–10 mm above it: it draws on the default table's top) and, in one process, times
on the IRB120 (process CPU time, best of ``--repeat``): the preflight without a workcell, the
same preflight with the robot's default cell (the collision pass alone is timed too), and a plain
loop of PyBullet ``getClosestPoints`` queries — every pair at every IK sample, nothing between
samples — on the first ``--brute`` samples, extrapolated to the whole path.
"""

from __future__ import annotations

import argparse
import sys
import time

from .cli import CliError, add_json_flag, print_json

LINES = 10_000
BRUTE = 2_000


def register(sub) -> None:
    p = sub.add_parser("collision", aliases=["check"],
                       help="collision preflight of a 10,000-line program vs a plain getClosestPoints loop")
    p.add_argument("--lines", type=int, default=LINES, help=f"program length (default {LINES:,})")
    p.add_argument("--repeat", type=int, default=3, help="rounds, the best counts (default 3)")
    p.add_argument("--brute", type=int, default=BRUTE,
                   help=f"samples the plain query loop is timed on (default {BRUTE:,})")
    p.add_argument("--robot", default="irb120", help="robot id (default irb120)")
    add_json_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..controllers.gcode.preflight import preflight
    from ..envs.collision import CollisionModel, timed_collision_pass
    from ..robots.workcell import default_cell
    from .bench_gcode import generate_program
    from .cli import get_robot
    from .cmd_check import CellCheck

    if not 10 <= args.lines <= 1_000_000 or not 1 <= args.repeat <= 20 or not 1 <= args.brute <= 1_000_000:
        raise CliError("--lines must be 10 to 1,000,000, --repeat 1 to 20 and --brute 1 to 1,000,000")
    spec = get_robot(args.robot)
    text = generate_program(args.lines)
    cell = default_cell(spec)
    plain, full, passes = [], [], []
    rep = None
    with CollisionModel(spec, cell) as model:
        for k in range(args.repeat):
            print(f"round {k + 1}/{args.repeat}: preflight without and with the cell …", file=sys.stderr)
            t0 = time.process_time()
            preflight(text, spec)
            plain.append(time.process_time() - t0)
            record = CellCheck(cell)
            t0 = time.process_time()
            rep = preflight(text, spec, passes=(timed_collision_pass(model, record),))
            full.append(time.process_time() - t0)
            passes.append(record.seconds)
        assert rep is not None and rep.samples is not None
        K = len(rep.samples)
        n = min(args.brute, K)
        print(f"plain getClosestPoints loop on {n:,} samples …", file=sys.stderr)
        t0 = time.process_time()
        model.distances(rep.q[:n])
        brute = time.process_time() - t0
        pairs = len(model.pairs)
    contacts = [c.to_dict() for c in record.contacts]
    out = {
        "robot": spec.name, "lines": args.lines, "samples": K, "pairs": pairs,
        "cell": cell.name, "clean": rep.clean(), "contacts": contacts,
        "preflight_s": min(plain), "preflight_with_cell_s": min(full), "collision_pass_s": min(passes),
        "collision_checks_per_s": K * pairs / min(passes),
        "brute_samples": n, "brute_s": brute, "brute_checks_per_s": n * pairs / brute,
        "brute_whole_path_s": brute * K / n,
        "speedup": (brute * K / n) / min(passes),
    }
    if args.json:
        print_json(out)
        return 0
    print(f"program: {args.lines:,} lines, {K:,} IK samples, {pairs} pairs ({spec.name} in {cell.name!r}: "
          f"{'clean' if rep.clean() else f'{len(contacts)} contact(s)'})")
    print(f"  preflight without the cell      {out['preflight_s']:>8.2f} s CPU")
    print(f"  preflight with the cell         {out['preflight_with_cell_s']:>8.2f} s CPU "
          f"(collision pass {out['collision_pass_s']:.2f} s, {out['collision_checks_per_s']:,.0f} sample-pairs/s, "
          f"nothing between samples missed)")
    print(f"  plain getClosestPoints loop     {out['brute_whole_path_s']:>8.2f} s CPU for the whole path "
          f"(measured on {n:,} samples: {out['brute_checks_per_s']:,.0f} sample-pairs/s, samples only)")
    print(f"  speed-up                        {out['speedup']:>8.1f} x")
    return 0
