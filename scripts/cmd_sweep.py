"""``armtwin sweep SPEC.toml``: a grid of jobs (check, compare, train) as Ray tasks, one table.

Runs every job of the sweep file (docs/SWEEP.md) on a local Ray instance (default), on a Ray
cluster (``--address host:port``), or in this process one after another
(``--executor local``); prints a line per finished job and writes ``results.csv``,
``results.json`` and ``<metric>.png`` into ``--out``. A failed job is retried as the file says
and then reported with its error — never dropped; the exit code is 1 when any job failed.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

from ..envs.sweep import Executor
from .cli import CliError, add_json_flag, output_folder, print_json

EXIT_JOBS_FAILED = 1
#: units of the parameters and results that sweeps plot most, for axis labels
UNITS = {"dt": "s", "payload": "kg", "gains": "×", "steps": "env steps", "program_time_s": "s", "rms_flange_err_mm": "mm",
         "max_flange_err_mm": "mm", "rms_joint_err": "°", "max_joint_err": "°", "peak_tau": "N·m", "rms_tau": "N·m",
         "energy_j": "J", "wall_s": "s", "success_rate": "fraction"}


def register(sub) -> None:
    p = sub.add_parser("sweep", help="run a grid of check/compare/train jobs as Ray tasks and collect one table")
    p.add_argument("spec", metavar="SPEC.toml", help="the sweep file (docs/SWEEP.md)")
    p.add_argument("--executor", default=Executor.RAY.value, choices=[e.value for e in Executor],
                   help="ray (default: a local Ray instance, or the cluster of --address) or local (this process, "
                        "one job after another)")
    p.add_argument("--address", default=None, metavar="HOST:PORT",
                   help="a running Ray cluster (`ray start --head` prints it); default: a local instance")
    p.add_argument("--workers", type=int, default=None, help="parallel jobs on a local Ray instance (default: CPUs)")
    p.add_argument("--out", default=None, metavar="DIR", help="output folder (default out/sweep_<name>)")
    add_json_flag(p)
    p.set_defaults(func=run)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def write_outputs(report, out: Path) -> list[Path]:
    """results.csv, results.json and a plot of the sweep's metric; returns the paths written."""
    rows = [r.row() for r in report.results]
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    csv_path, json_path = out / "results.csv", out / "results.json"
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    summary = {"name": report.spec.name, "kind": report.spec.kind.value, "executor": report.executor.value,
               "workers": report.workers, "wall_s": report.wall_s, "jobs": len(rows),
               "failed": len(report.failed), "metric": report.spec.metric, "results": rows}
    json_path.write_text(json.dumps(summary, indent=2, default=str))
    paths = [csv_path, json_path]
    plot = _plot(report, out)
    if plot is not None:
        paths.append(plot)
    return paths


def _plot(report, out: Path) -> Path | None:
    """The metric against the first grid key, one line per value of the second (mean ± sd over the
    others, e.g. seeds); None when no job has the metric."""
    metric = report.spec.metric
    keys = list(report.spec.grid)
    ok = [r for r in report.results if r.ok and isinstance(r.results.get(metric), (int, float))]
    if not ok or not keys:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    x_key = next((k for k in keys if k != "seed"), keys[0])
    group_key = next((k for k in keys if k not in (x_key, "seed")), None)
    xs = list(report.spec.grid[x_key])
    groups = list(report.spec.grid[group_key]) if group_key else [None]
    numeric_x = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in xs)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for g in groups:
        means, sds = [], []
        for x in xs:
            vals = [float(r.results[metric]) for r in ok
                    if r.job.params[x_key] == x and (group_key is None or r.job.params[group_key] == g)]
            vals = [v for v in vals if math.isfinite(v)]
            means.append(np.mean(vals) if vals else np.nan)
            sds.append(np.std(vals) if len(vals) > 1 else 0.0)
        pos = xs if numeric_x else list(range(len(xs)))
        label = f"{group_key} = {g} {UNITS.get(group_key, '')}".rstrip() if group_key else None
        ax.errorbar(pos, means, yerr=sds, marker="o", capsize=3, label=label)
    if not numeric_x:
        ax.set_xticks(range(len(xs)), [Path(str(v)).name for v in xs], rotation=30, ha="right", fontsize=8)
    ax.set_xlabel(f"{x_key} ({UNITS[x_key]})" if x_key in UNITS else x_key)
    ax.set_ylabel(f"{metric} ({UNITS[metric]})" if metric in UNITS else metric)
    n_seeds = len(report.spec.grid.get("seed", ()))
    title = f"{report.spec.name}: {metric}" + (f" (mean ± sd over {n_seeds} seeds)" if n_seeds > 1 else "")
    failed = len(report.failed)
    ax.set_title(title + (f" — {failed} job(s) failed" if failed else ""), fontsize=10)
    if group_key:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = out / f"{metric}.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def run(args: argparse.Namespace) -> int:
    from ..envs.sweep import load_spec, run_sweep
    try:
        spec = load_spec(args.spec)
    except FileNotFoundError:
        raise CliError(f"{args.spec}: no such sweep file") from None
    if args.workers is not None and not 1 <= args.workers <= 1024:
        raise CliError(f"--workers {args.workers}: must be from 1 to 1024")
    if args.address is not None and args.executor != Executor.RAY.value:
        raise CliError("--address is a Ray cluster: it needs --executor ray")
    out = output_folder(args.out or f"out/sweep_{spec.name}", "--out")
    jobs = spec.jobs()
    if args.executor == Executor.RAY.value:
        try:
            import ray  # noqa: F401
        except ModuleNotFoundError:
            from .cli import missing_extra
            raise missing_extra("ray", "cluster") from None
    print(f"sweep {spec.name}: {len(jobs)} {spec.kind.value} job(s) on {args.executor}"
          + (f" at {args.address}" if args.address else ""), file=sys.stderr)

    def progress(done: int, total: int, r) -> None:
        status = "ok" if r.ok else f"FAILED after {r.attempts} attempt(s): {r.error}"
        value = r.results.get(spec.metric)
        shown = f" {spec.metric}={_fmt(value)}" if r.ok and value is not None else ""
        print(f"[{done}/{total}] job {r.job.index} {r.job.label}: {status}{shown}", file=sys.stderr, flush=True)

    report = run_sweep(spec, executor=args.executor, address=args.address, workers=args.workers, progress=progress,
                       out_dir=out)
    paths = write_outputs(report, out)
    failed = report.failed
    if args.json:
        print_json({"name": spec.name, "jobs": len(report.results), "failed": len(failed), "wall_s": report.wall_s,
                    "workers": report.workers, "files": [str(p) for p in paths]})
    else:
        print(f"{len(report.results) - len(failed)} of {len(report.results)} jobs finished in {report.wall_s:.1f} s "
              f"({report.workers} worker(s))" + (f"; {len(failed)} FAILED" if failed else ""))
        for r in failed:
            print(f"  job {r.job.index} {r.job.label}: {r.error}")
        for p in paths:
            print(f"wrote {p}")
    return EXIT_JOBS_FAILED if failed else 0
