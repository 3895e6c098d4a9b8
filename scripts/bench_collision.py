"""``armtwin bench collision`` (also ``bench check``): the collision preflight of a long program.

Generates ``armtwin bench gcode``'s program (strokes, arcs, rapids within ±40 mm of the work
origin and 0–10 mm above it: it draws on the default table's top) and, in one process, times
on the IRB120 (process CPU time, best of ``--repeat``): the preflight without a workcell, the
same preflight with the robot's default cell (the collision pass alone is timed too), and a plain
loop of PyBullet ``getClosestPoints`` queries — every pair at every IK sample, nothing between
samples — on the first ``--brute`` samples, extrapolated to the whole path. Then collision-aware
IK (:class:`~armtwin.envs.interference.CollisionFilter`): ``--ik`` seeded random poses solved with
and without the cell's filter, and every solution of each checked (what ``armtwin ik --all --cell``
does).
"""

from __future__ import annotations

import argparse
import sys
import time

from .cli import CliError, add_json_flag, print_json

LINES = 10_000
BRUTE = 2_000
IK_POSES = 200


def register(sub) -> None:
    p = sub.add_parser("collision", aliases=["check"],
                       help="collision preflight of a 10,000-line program vs a plain getClosestPoints loop")
    p.add_argument("--lines", type=int, default=LINES, help=f"program length (default {LINES:,})")
    p.add_argument("--repeat", type=int, default=3, help="rounds, the best counts (default 3)")
    p.add_argument("--brute", type=int, default=BRUTE,
                   help=f"samples the plain query loop is timed on (default {BRUTE:,})")
    p.add_argument("--robot", default="irb120", help="robot id (default irb120)")
    p.add_argument("--ik", type=int, default=IK_POSES,
                   help=f"random poses for the collision-aware IK timing (default {IK_POSES:,})")
    add_json_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..controllers.gcode.preflight import preflight
    from ..envs.collision import CollisionModel, timed_collision_pass
    from ..robots.workcell import default_cell
    from .bench_gcode import generate_program
    from .cli import get_robot
    from .cmd_check import CellCheck

    if not 10 <= args.lines <= 1_000_000 or not 1 <= args.repeat <= 20 or not 1 <= args.brute <= 1_000_000 \
            or not 1 <= args.ik <= 100_000:
        raise CliError("--lines must be 10 to 1,000,000, --repeat 1 to 20, --brute 1 to 1,000,000 and --ik 1 to 100,000")
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
        print(f"collision-aware IK on {args.ik:,} poses …", file=sys.stderr)
        ik = _time_ik(spec, model, args.ik)
    contacts = [c.to_dict() for c in record.contacts]
    out = {
        "robot": spec.name, "lines": args.lines, "samples": K, "pairs": pairs,
        "cell": cell.name, "clean": rep.clean(), "contacts": contacts,
        "preflight_s": min(plain), "preflight_with_cell_s": min(full), "collision_pass_s": min(passes),
        "collision_checks_per_s": K * pairs / min(passes),
        "brute_samples": n, "brute_s": brute, "brute_checks_per_s": n * pairs / brute,
        "brute_whole_path_s": brute * K / n,
        "speedup": (brute * K / n) / min(passes),
        **ik,
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
    print(f"collision-aware IK ({out['ik_poses']:,} random poses, {out['ik_solutions']:,} solutions, "
          f"{out['ik_in_collision']:,} of them in collision):")
    print(f"  solve without the cell          {out['ik_plain_us']:>8.1f} µs/pose CPU")
    print(f"  solve with the cell's filter    {out['ik_filtered_us']:>8.1f} µs/pose CPU (the choice: the filter asked "
          f"{out['ik_filter_calls_per_pose']:.2f} times per pose)")
    print(f"  every solution checked (--all)  {out['ik_all_ms']:>8.2f} ms/pose CPU "
          f"({out['ik_check_ms']:.2f} ms per solution)")
    return 0


def _time_ik(spec, model, poses: int) -> dict:
    """CPU times of IK without and with the cell's filter on ``poses`` seeded random poses (FK of
    random joints within the ranges), and of checking every solution."""
    import numpy as np

    from ..controllers.ik import solve
    from ..controllers.kinematics import chain_of, fk_batch
    from ..envs.interference import CollisionFilter
    rng = np.random.default_rng(0)
    T = fk_batch(chain_of(spec), rng.uniform(spec.lower, spec.upper, (poses, spec.dof)))
    t0 = time.process_time()
    for Ti in T:
        solve(spec, Ti)
    plain = time.process_time() - t0
    filt = CollisionFilter(model)
    calls = 0

    def counted(q):
        nonlocal calls
        calls += 1
        return filt(q)
    t0 = time.process_time()
    for Ti in T:
        solve(spec, Ti, reject=counted)
    filtered = time.process_time() - t0
    filt = CollisionFilter(model)          # nothing remembered: every solution checked afresh
    t0 = time.process_time()
    sols = [s.q for Ti in T for s in solve(spec, Ti, reject=filt).solutions]
    every = time.process_time() - t0
    return {"ik_poses": poses, "ik_solutions": len(sols), "ik_in_collision": sum(bool(filt.interference(q)) for q in sols),
            "ik_plain_us": plain / poses * 1e6, "ik_filtered_us": filtered / poses * 1e6,
            "ik_filter_calls_per_pose": calls / poses, "ik_all_ms": every / poses * 1e3,
            "ik_check_ms": every / max(len(sols), 1) * 1e3}
