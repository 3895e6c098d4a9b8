"""Sweeps: a grid of armtwin jobs run as Ray tasks (or one after another), collected into one table.

A sweep is described in a TOML file (docs/SWEEP.md)::

    name = "irb120-dt-payload"
    kind = "compare"                 # check | compare | train
    retries = 1                      # a failed job is run again this many times, then reported
    timeout_s = 600                  # a job running longer is stopped and counts as failed
    metric = "rms_flange_err_mm"     # the result plotted (default: the kind's main result)

    [base]                           # parameters every job gets
    robot = "irb120"
    mode = "hinge"

    [grid]                           # the cartesian product of these lists
    dt = [0.002, 0.004, 0.008]
    payload = [0.0, 1.5, 3.0]

Job kinds and their parameters (units as at the command line):

- ``check`` — the G-code preflight of a program: ``program`` (a file, or a glob in the grid such
  as ``"examples/*.ngc"``), ``robot``, optional ``origin`` ([x, y, z] mm). Result: ``clean``,
  ``faults``, ``warnings``, ``lines``, ``program_time_s``.
- ``compare`` — one joint model on the joint-model experiment's motion: ``robot``, ``mode``,
  ``dt`` (s), ``payload`` (kg), ``gains`` (a factor on the drive's stiffness and damping),
  ``motion``. Result: the metrics of ``armtwin compare`` (errors in degrees and mm, torques in N·m).
- ``train`` — ``armtwin train``: ``env``, ``algo``, ``steps``, ``seed`` and any other ``train``
  option by its name (``learning_starts``, ``env_kw`` as a table). Result: what ``train --json``
  prints (success rate, wall time, …).

Every job runs the same function whatever the executor: :func:`run_job`, in a Ray task (the
default: a local Ray instance, or a cluster with ``address``) or in this process one after
another (``executor="local"``). A job that raises, times out or loses its worker is retried
``retries`` times and then reported as failed with its last error — never dropped. On a
cluster, every node needs armtwin installed (the same version) and the paths the jobs name.
"""

from __future__ import annotations

import contextlib
import glob as globmod
import io
import itertools
import json
import math
import os
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..controllers.choices import Choice

__all__ = ["JobKind", "Executor", "SweepSpec", "SweepSpecError", "Job", "JobResult", "SweepReport", "run_job",
           "run_sweep", "load_spec", "MAX_JOBS"]

#: most jobs a sweep may have (a grid typo such as 1e6 seeds must not start a million tasks)
MAX_JOBS = 10_000


class JobKind(Choice):
    """What each job of a sweep runs."""

    __label__ = "job kind"

    CHECK = "check"
    COMPARE = "compare"
    TRAIN = "train"


class Executor(Choice):
    """Where the jobs run: Ray tasks, or this process one after another."""

    __label__ = "executor"

    RAY = "ray"
    LOCAL = "local"


#: parameters each kind knows (the rest is refused when the spec is read), and its main result
_PARAMS: dict[JobKind, frozenset[str]] = {
    JobKind.CHECK: frozenset({"program", "robot", "origin"}),
    JobKind.COMPARE: frozenset({"robot", "mode", "dt", "payload", "gains", "motion"}),
    JobKind.TRAIN: frozenset({"env", "algo", "steps", "seed", "eval_episodes", "learning_starts", "no_her",
                              "no_normalize", "env_kw", "video_episodes"}),
}
_REQUIRED: dict[JobKind, frozenset[str]] = {
    JobKind.CHECK: frozenset({"program", "robot"}),
    JobKind.COMPARE: frozenset({"robot", "mode"}),
    JobKind.TRAIN: frozenset({"env"}),
}
_DEFAULT_METRIC = {JobKind.CHECK: "program_time_s", JobKind.COMPARE: "rms_flange_err_mm",
                   JobKind.TRAIN: "success_rate"}


class SweepSpecError(ValueError):
    """A sweep file that cannot be used; the message names the file, the key and why."""


@dataclass(frozen=True)
class Job:
    """One point of the grid: ``params`` (base and grid values merged), numbered from 0."""

    index: int
    kind: JobKind
    params: Mapping[str, Any]

    @property
    def label(self) -> str:
        """The grid values that tell this job from the others, e.g. ``dt=0.004 payload=1.5``."""
        grid = self.params.get("_grid_keys", ())
        return " ".join(f"{k}={Path(v).name if k == 'program' else v}" for k, v in self.params.items() if k in grid)


@dataclass(frozen=True)
class SweepSpec:
    """A sweep, as read from its TOML file (see the module docstring).

    Attributes:
        name: a name for the outputs.
        kind: what every job runs.
        base: parameters of every job.
        grid: parameter -> the values to sweep (the jobs are their cartesian product, in order).
        retries: extra attempts of a failed job (0..10).
        timeout_s: a job running longer fails (s), or None.
        metric: the result plotted and summarised.
        source: the file it was read from.
    """

    name: str
    kind: JobKind
    base: Mapping[str, Any] = field(default_factory=dict)
    grid: Mapping[str, tuple] = field(default_factory=dict)
    retries: int = 1
    timeout_s: float | None = None
    metric: str = ""
    source: str = ""

    def jobs(self) -> list[Job]:
        """The grid's points in order (globs of ``program`` expanded, sorted)."""
        keys = list(self.grid)
        values = [self.grid[k] for k in keys]
        out: list[Job] = []
        for combo in itertools.product(*values) if keys else [()]:
            params = dict(self.base)
            params.update(zip(keys, combo))
            params["_grid_keys"] = tuple(keys)
            out.append(Job(len(out), self.kind, params))
        return out


def _bad(source: str, key: str, why: str) -> SweepSpecError:
    return SweepSpecError(f"{source}: {key}: {why}")


def load_spec(path: str | os.PathLike) -> SweepSpec:
    """Read and check a sweep file (TOML).

    Raises:
        SweepSpecError: naming the file, the key and why (a ValueError: one line at the CLI).
        OSError: the file cannot be read.
    """
    source = str(path)
    with open(path, "rb") as f:
        try:
            data = tomllib.load(f)
        except tomllib.TOMLDecodeError as exc:
            raise SweepSpecError(f"{source}: not valid TOML: {exc}") from None
    known = {"name", "kind", "base", "grid", "retries", "timeout_s", "metric"}
    for key in data:
        if key not in known:
            raise _bad(source, key, f"unknown key; a sweep has {', '.join(sorted(known))}")
    if "kind" not in data:
        raise _bad(source, "kind", f"missing; one of {', '.join(k.value for k in JobKind)}")
    try:
        kind = JobKind.parse(data["kind"])
    except ValueError as exc:
        raise _bad(source, "kind", str(exc)) from None
    base = data.get("base", {})
    grid = data.get("grid", {})
    for name, table in (("base", base), ("grid", grid)):
        if not isinstance(table, dict):
            raise _bad(source, name, "must be a table ([base] / [grid])")
    for key in list(base) + list(grid):
        if key not in _PARAMS[kind]:
            raise _bad(source, key, f"not a parameter of a {kind.value} job ({', '.join(sorted(_PARAMS[kind]))})")
    both = set(base) & set(grid)
    if both:
        raise _bad(source, sorted(both)[0], "is in both [base] and [grid]")
    missing = _REQUIRED[kind] - set(base) - set(grid)
    if missing:
        raise _bad(source, sorted(missing)[0], f"a {kind.value} job needs it (in [base] or [grid])")
    root = Path(source).resolve().parent
    values: dict[str, tuple] = {}
    for key, v in grid.items():
        if not isinstance(v, list) or not v:
            raise _bad(source, f"grid.{key}", "must be a non-empty list of values")
        if key == "program":
            v = _expand_programs(v, root, source)
        values[key] = tuple(v)
    if "program" in base:
        base = {**base, "program": _expand_programs([base["program"]], root, source)[0]}
    n = math.prod(len(v) for v in values.values()) if values else 1
    if n > MAX_JOBS:
        raise _bad(source, "grid", f"{n:,} jobs; a sweep may have at most {MAX_JOBS:,}")
    retries = data.get("retries", 1)
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 10:
        raise _bad(source, "retries", f"a whole number from 0 to 10, got {retries!r}")
    timeout = data.get("timeout_s")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not (math.isfinite(timeout) and 0 < timeout <= 7 * 86400)):
        raise _bad(source, "timeout_s", f"seconds, more than 0 and at most a week, got {timeout!r}")
    metric = data.get("metric", _DEFAULT_METRIC[kind])
    if not isinstance(metric, str) or not metric:
        raise _bad(source, "metric", "the name of a result")
    name = data.get("name", Path(source).stem)
    if not isinstance(name, str) or not name.strip():
        raise _bad(source, "name", "a non-empty text")
    return SweepSpec(name.strip(), kind, dict(base), values, retries, None if timeout is None else float(timeout),
                     metric, source)


def _expand_programs(values: list, root: Path, source: str) -> list[str]:
    """Program names and globs, relative to the sweep file, as sorted absolute paths."""
    out: list[str] = []
    for v in values:
        if not isinstance(v, str):
            raise _bad(source, "program", f"a file name or a glob, got {v!r}")
        pattern = v if os.path.isabs(v) else str(root / v)
        hits = sorted(globmod.glob(pattern)) if any(c in v for c in "*?[") else [pattern]
        if not hits:
            raise _bad(source, "program", f"{v!r} matches no file")
        out.extend(os.path.normpath(h) for h in hits)
    return out


# ----- running one job ---------------------------------------------------------------------------

def _cli_json(argv: list[str]) -> dict:
    """Run an armtwin command in this process and return what its ``--json`` printed."""
    from ..scripts.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--json"])
    text = out.getvalue().strip()
    try:
        data = json.loads(text) if text else {}
    except json.JSONDecodeError:
        data = {}
    lines = [ln for ln in err.getvalue().splitlines() if ln.startswith("armtwin:")]
    data["exit_code"] = code
    if code not in (0, 1) or (code == 1 and not data):
        raise RuntimeError(lines[-1] if lines else f"armtwin {argv[0]} ended with exit code {code}")
    return data


def _check(p: Mapping[str, Any]) -> dict:
    argv = ["check", str(p["program"]), "--robot", str(p["robot"])]
    if "origin" in p:
        argv += ["--origin", *map(str, p["origin"])]
    d = _cli_json(argv)
    sev = [f.get("severity", "error") for f in d.get("faults", [])]
    return {"clean": bool(d.get("clean")), "faults": sev.count("error"), "warnings": sev.count("warning"),
            "lines": d.get("lines"), "program_time_s": d.get("program_time_s")}


def _compare(p: Mapping[str, Any]) -> dict:
    from dataclasses import replace

    import numpy as np

    from .. import robots
    from .compare import build_motion, metrics, run_motion
    from .config import JointMode
    spec = robots.get(p["robot"])
    drive = spec.drive
    g = float(p.get("gains", 1.0))
    if not (math.isfinite(g) and 0 < g <= 100):
        raise ValueError(f"gains must be a factor in (0, 100], got {g!r}")
    if g != 1.0:
        drive = replace(drive, stiffness=tuple(np.asarray(drive.stiffness) * g), damping=tuple(np.asarray(drive.damping) * g))
    traj = build_motion(spec, p.get("motion", "pick-place"))
    dt = float(p.get("dt", 1.0 / 240.0))
    if not (math.isfinite(dt) and 1e-4 <= dt <= 0.1):
        raise ValueError(f"dt must be within [1e-4, 0.1] s, got {dt!r}")
    payload = float(p.get("payload", 0.0))
    if not (math.isfinite(payload) and 0 <= payload <= 10 * spec.payload):
        raise ValueError(f"payload must be within [0, {10 * spec.payload:g}] kg, got {payload!r}")
    row = metrics(spec, traj, run_motion(spec, traj, JointMode.parse(p["mode"]), dt=dt, payload=payload, drive=drive)).row()
    return {k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v) for k, v in row.items()}


def _train(p: Mapping[str, Any]) -> dict:
    argv = ["train", str(p["env"])]
    for key, value in p.items():
        if key in ("env", "_grid_keys", "_out"):
            continue
        flag = "--" + key.replace("_", "-")
        if key == "env_kw":
            for k, v in dict(value).items():
                argv += ["--env-kw", f"{k}={json.dumps(v)}"]
        elif isinstance(value, bool):
            argv += [flag] if value else []
        else:
            argv += [flag, str(value)]
    if "_out" in p:
        argv += ["--out", str(p["_out"])]
    return _cli_json(argv)


_RUNNERS: dict[JobKind, Callable[[Mapping[str, Any]], dict]] = {
    JobKind.CHECK: _check, JobKind.COMPARE: _compare, JobKind.TRAIN: _train}


def run_job(kind: JobKind | str, params: Mapping[str, Any]) -> dict:
    """Run one job here and return its results (plain JSON values). Raises on failure."""
    t0 = time.perf_counter()
    out = _RUNNERS[JobKind.parse(kind)](params)
    out["wall_s"] = time.perf_counter() - t0
    out["pid"] = os.getpid()
    return out


# ----- running a sweep --------------------------------------------------------------------------------

@dataclass
class JobResult:
    """What became of one job.

    Attributes:
        job: the job.
        ok: it finished (within its attempts).
        attempts: how many times it was started.
        results: its results (empty when it failed).
        error: the last failure's message, or "".
    """

    job: Job
    ok: bool = False
    attempts: int = 0
    results: dict = field(default_factory=dict)
    error: str = ""

    def row(self) -> dict:
        """The job's table row: index, grid values, ok, attempts, error, then its results."""
        r: dict[str, Any] = {"job": self.job.index}
        r.update({k: self.job.params[k] for k in self.job.params.get("_grid_keys", ())})
        r.update({"ok": self.ok, "attempts": self.attempts, "error": self.error})
        r.update({k: v for k, v in self.results.items() if not isinstance(v, (list, dict))})
        return r


@dataclass
class SweepReport:
    """A finished sweep: every job's result in grid order, and timings (s)."""

    spec: SweepSpec
    results: list[JobResult]
    executor: Executor
    wall_s: float
    workers: int

    @property
    def failed(self) -> list[JobResult]:
        return [r for r in self.results if not r.ok]


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"[:500]


def run_sweep(spec: SweepSpec, *, executor: Executor | str = Executor.RAY, address: str | None = None,
              workers: int | None = None, progress: Callable[[int, int, JobResult], None] | None = None,
              out_dir: str | os.PathLike | None = None) -> SweepReport:
    """Run every job of ``spec`` and collect the results.

    Args:
        executor: RAY (tasks on a local Ray instance, or on the cluster at ``address``) or LOCAL
            (this process, one job after another).
        address: a Ray cluster (``host:port``, as ``ray start --head`` prints); None starts a
            local instance for this sweep and stops it at the end.
        workers: parallel tasks on a local Ray instance (default: the CPU count).
        progress: called as ``progress(done, total, result)`` after each job ends.
        out_dir: where train jobs write their runs (``out_dir/jobs/<index>``).
    """
    executor = Executor.parse(executor)
    jobs = spec.jobs()
    if out_dir is not None and spec.kind is JobKind.TRAIN:
        jobs = [Job(j.index, j.kind, {**j.params, "_out": str(Path(out_dir).resolve() / "jobs" / f"{j.index:04d}")})
                for j in jobs]
    t0 = time.perf_counter()
    results = [JobResult(j) for j in jobs]
    if executor is Executor.LOCAL:
        for k, r in enumerate(results):
            _run_here(spec, r)
            if progress is not None:
                progress(k + 1, len(results), r)
        return SweepReport(spec, results, executor, time.perf_counter() - t0, 1)
    n = _run_ray(spec, results, address, workers, progress)
    return SweepReport(spec, results, executor, time.perf_counter() - t0, n)


def _run_here(spec: SweepSpec, r: JobResult) -> None:
    while r.attempts <= spec.retries:
        r.attempts += 1
        try:
            r.results = run_job(spec.kind, r.job.params)
            r.ok, r.error = True, ""
            return
        except Exception as exc:  # noqa: BLE001 - a failed job is a result
            r.error = _describe(exc)


def _run_ray(spec: SweepSpec, results: list[JobResult], address: str | None, workers: int | None,
             progress: Callable[[int, int, JobResult], None] | None) -> int:
    import ray
    started_here = not ray.is_initialized()
    if started_here:
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
        if address:
            ray.init(address=address, **kw)
        else:
            ray.init(num_cpus=workers or os.cpu_count() or 1, **kw)
    try:
        n_workers = int(ray.cluster_resources().get("CPU", 1))
        task = ray.remote(num_cpus=1, max_retries=0)(run_job)
        pending: dict[Any, tuple[JobResult, float]] = {}
        queue = list(results)
        done = 0

        def submit(r: JobResult) -> None:
            r.attempts += 1
            pending[task.remote(spec.kind.value, dict(r.job.params))] = (r, time.monotonic())

        for r in queue:
            submit(r)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            now = time.monotonic()
            finished = []
            for ref in ready:
                r, _t = pending.pop(ref)
                try:
                    r.results, r.ok, r.error = ray.get(ref), True, ""
                except Exception as exc:  # noqa: BLE001 - the job's failure (or its worker's death) is a result
                    r.error = _describe(getattr(exc, "cause", None) or exc)
                finished.append(r)
            if spec.timeout_s is not None:
                for ref, (r, t_start) in list(pending.items()):
                    if now - t_start > spec.timeout_s:
                        ray.cancel(ref, force=True)
                        pending.pop(ref)
                        r.error = f"timeout: still running after {spec.timeout_s:g} s"
                        finished.append(r)
            for r in finished:
                if not r.ok and r.attempts <= spec.retries:
                    submit(r)
                    continue
                done += 1
                if progress is not None:
                    progress(done, len(results), r)
        return n_workers
    finally:
        if started_here:
            ray.shutdown()
