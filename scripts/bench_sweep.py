"""``armtwin bench sweep [--json]``: the same 8-job sweep in one process and as Ray tasks.

The jobs are joint-model runs of ``armtwin compare``'s motion (IRB120, articulation, two physics
steps × four payloads: seconds each, all the same work whatever the executor). Measured side by
side in one run: the wall time of the sweep in this process one job after another, and on a
local Ray instance with ``--workers`` workers (Ray's start-up counted separately). Printed: the
speed-up, and Ray's overhead per job — the Ray wall time beyond the ideal (the jobs' own time
divided among the workers), per job.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from .cli import CliError, add_json_flag, print_json


def register(sub) -> None:
    p = sub.add_parser("sweep", help="an 8-job sweep: one process vs Ray with 2 workers")
    p.add_argument("--workers", type=int, default=2, help="Ray workers (default 2)")
    p.add_argument("--rounds", type=int, default=1, help="repeat both, interleaved (default 1)")
    add_json_flag(p)
    p.set_defaults(func=run)


def _spec():
    from ..envs.sweep import JobKind, SweepSpec
    return SweepSpec("bench", JobKind.COMPARE, {"robot": "irb120", "mode": "articulation"},
                     {"dt": (1 / 2000, 1 / 4000), "payload": (0.0, 1.0, 2.0, 3.0)}, retries=0, metric="rms_flange_err_mm")


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.workers <= 64:
        raise CliError(f"--workers {args.workers}: must be from 1 to 64")
    if not 1 <= args.rounds <= 20:
        raise CliError(f"--rounds {args.rounds}: must be from 1 to 20")
    try:
        import ray
    except ModuleNotFoundError:
        from .cli import missing_extra
        raise missing_extra("ray", "cluster") from None
    from ..envs.sweep import Executor, run_sweep
    spec = _spec()
    n = len(spec.jobs())
    local, remote, job_s, start = [], [], [], []
    for k in range(args.rounds):
        print(f"round {k + 1}/{args.rounds}: {n} jobs in this process ...", file=sys.stderr, flush=True)
        rep = run_sweep(spec, executor=Executor.LOCAL)
        if rep.failed:
            raise CliError(f"a benchmark job failed: {rep.failed[0].error}")
        local.append(rep.wall_s)
        job_s.append(sum(r.results["wall_s"] for r in rep.results))
        print(f"round {k + 1}/{args.rounds}: {n} jobs on Ray with {args.workers} workers ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        start.append(time.perf_counter() - t0)
        try:
            rep = run_sweep(spec, executor=Executor.RAY)
        finally:
            ray.shutdown()
        if rep.failed:
            raise CliError(f"a benchmark job failed on Ray: {rep.failed[0].error}")
        remote.append(rep.wall_s)
    best = min(range(args.rounds), key=lambda i: remote[i])
    lw, rw, js = min(local), remote[best], job_s[best]
    ideal = js / args.workers
    res = {"jobs": n, "workers": args.workers, "cpus": os.cpu_count(), "rounds": args.rounds,
           "local_wall_s": lw, "ray_wall_s": rw, "ray_start_s": min(start), "jobs_cpu_s": js,
           "speedup": lw / rw, "ideal_speedup": min(args.workers, os.cpu_count() or 1),
           "ray_overhead_per_job_s": max(0.0, rw - ideal) / n, "load_average": os.getloadavg()[0]}
    if args.json:
        print_json(res)
        return 0
    print(f"{n} compare jobs (IRB120 articulation at 0.5 and 0.25 ms, 4 payloads), best of {args.rounds}:")
    print(f"  one process, one after another  {lw:7.2f} s")
    print(f"  Ray, {args.workers} workers                {rw:7.2f} s   (+ {res['ray_start_s']:.2f} s to start Ray)")
    print(f"  speed-up {res['speedup']:.2f}x (at most {res['ideal_speedup']}x on {os.cpu_count()} CPUs); "
          f"Ray's overhead {res['ray_overhead_per_job_s'] * 1000:.0f} ms per job")
    print(f"  load average {res['load_average']:.2f}")
    return 0
