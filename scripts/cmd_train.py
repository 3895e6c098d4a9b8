"""``armtwin train ENV_ID``: train a policy with stable-baselines3, evaluate it, write the results.

Needs the optional extra ``rl`` (stable-baselines3 on a CPU build of PyTorch). The hyper-parameters
come from the repository's versioned file ``envs/hyperparams.toml`` (per algorithm and env id, as in
rl-baselines3-zoo); ``--steps``, ``--learning-starts``, ``--no-her``, ``--no-normalize`` and
``--hp KEY=VALUE`` change them for one run, and ``summary.json`` records the file's version and
every change. One run writes into ``--out`` (default ``runs/<env>-<algo>-s<seed>``) the files of
:func:`armtwin.envs.training.train_run`: ``policy.zip``, ``vecnormalize.pkl``,
``learning_curve.png``, ``eval.mp4`` (``eval.gif`` with ``--gif``; ``eval.mcap`` with ``--mcap``), ``summary.json``, ``monitor.csv``.

``--seeds 0-4`` trains one run per seed (``--jobs`` at a time, default: one per CPU core), each
in its own process and its own folder ``seed-<k>``, and then writes ``seeds.json`` (per-seed
results, success rate mean ± sd over the seeds, wall time) and ``learning_curves.png`` (every
seed's training success rate and their mean ± sd in one plot).

Interruption: SIGINT (Ctrl-C) and SIGTERM stop the training at the next env step; the policy so
far, the normalisation, the learning curve and a summary marked ``"interrupted": true`` are
saved, the files kept are listed, and the exit code is 128 + the signal number (130 for SIGINT,
143 for SIGTERM). With ``--seeds`` every running seed does the same, seeds not started are
skipped, and ``seeds.json`` and the plot cover what was trained.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .cli import CliError, StderrProgress, add_json_flag, missing_extra, output_folder, print_json
from .options import add_frame_options, frame_settings

#: most seeds one ``--seeds`` may ask for
MAX_SEEDS = 100
#: exit code of a run stopped by signal s: 128 + s (SIGINT 130, SIGTERM 143), as a shell reports it
EXIT_SIGNAL_BASE = 128
#: exit code when a seed's run failed (its error is printed)
EXIT_SEED_FAILED = 1


def register(sub) -> None:
    from ..envs.hyperparams import Algo

    p = sub.add_parser("train", help="train an RL policy on an armtwin Gymnasium env (needs the rl extra)")
    p.add_argument("env_id", metavar="ENV_ID", help="a registered id, e.g. armtwin/ScaraReach-v0")
    p.add_argument("--algo", choices=[a.value for a in Algo], default=Algo.SAC.value, help="algorithm (default sac)")
    p.add_argument("--steps", type=int, default=None,
                   help="environment steps to train (default: the hyperparams file's, per env id)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default 0)")
    p.add_argument("--seeds", default=None, metavar="LIST",
                   help="train one run per seed, e.g. 0-4 or 0,2,7, and report mean ± sd (exclusive with --seed)")
    p.add_argument("--jobs", type=int, default=None,
                   help="with --seeds: runs at a time, each in its own process (default: CPU cores)")
    p.add_argument("--out", default=None, help="output folder (default runs/<env>-<algo>-s<seed> or -seeds<LIST>)")
    p.add_argument("--eval-episodes", type=int, default=20, help="evaluation episodes (default 20)")
    p.add_argument("--video-episodes", type=int, default=3, help="evaluation episodes in the video (default 3; 0: none)")
    p.add_argument("--gif", action="store_true", help="also write the evaluation video as eval.gif")
    add_frame_options(p, fps=None, fps_default="the control rate, at most 60")
    p.add_argument("--mcap", action="store_true",
                   help="also write every evaluation episode as ROS 2 messages into eval.mcap (extra telemetry; "
                        "the run log's topics, docs/TELEMETRY.md)")
    p.add_argument("--no-her", action="store_true", help="SAC without hindsight experience replay")
    p.add_argument("--no-normalize", action="store_true",
                   help="do not normalise observations with running statistics (VecNormalize)")
    p.add_argument("--learning-starts", type=int, default=None,
                   help="SAC: random steps before learning (default: the hyperparams file's)")
    p.add_argument("--hp", action="append", default=[], metavar="KEY=VALUE",
                   help="override one hyper-parameter of envs/hyperparams.toml, repeatable (e.g. learning_rate=3e-4)")
    p.add_argument("--env-kw", action="append", default=[], metavar="KEY=VALUE",
                   help="environment keyword argument, repeatable (e.g. control=joint, joint_mode=hinge)")
    add_json_flag(p)
    p.set_defaults(func=run)


def _parse_env_kwargs(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--env-kw {item!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def parse_seeds(text: str) -> list[int]:
    """``"0-4"``, ``"0,2,7"``, ``"0-2,9"`` -> sorted distinct seeds; CliError for anything else."""
    seeds: set[int] = set()
    for part in str(text).split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise CliError(f"--seeds {text!r}: expected a list such as 0-4 or 0,2,7")
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) is not None else a
        if b < a or b >= 2 ** 32:
            raise CliError(f"--seeds {text!r}: a range goes up, within 0 .. 2**32 - 1")
        if b - a + 1 + len(seeds) > MAX_SEEDS:
            raise CliError(f"--seeds {text!r}: at most {MAX_SEEDS} seeds")
        seeds.update(range(a, b + 1))
    return sorted(seeds)


class _Stop:
    """The SIGINT/SIGTERM flag a run polls (the handler only records the signal)."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self) -> bool:
        return self.signum is not None

    def handler(self, signum: int, _frame: Any) -> None:
        if self.signum is None:
            self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[_Stop]:
    stop = _Stop()
    old = {s: signal.signal(s, stop.handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _settings(args: argparse.Namespace, goal_env: bool):
    from ..envs.hyperparams import load_settings, parse_override

    overrides: dict[str, Any] = {}
    try:
        for item in args.hp:
            key, value = parse_override(item)
            overrides[key] = value
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.steps is not None:
        overrides["steps"] = args.steps
    if args.learning_starts is not None:
        overrides["learning_starts"] = args.learning_starts
    if args.no_her:
        overrides["her"] = False
    if args.no_normalize:
        overrides["normalize"] = False
    try:
        return load_settings(args.algo, args.env_id, overrides=overrides, env_kwargs=_parse_env_kwargs(args.env_kw),
                             goal_env=goal_env)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _check(args: argparse.Namespace):
    """Every option checked, and the env built once, before anything trains. Returns the settings."""
    import gymnasium as gym

    from ..envs import registration

    if args.env_id not in gym.registry or not args.env_id.startswith("armtwin/"):
        raise CliError(f"unknown environment {args.env_id!r}; known: {', '.join(registration.ENV_IDS)}")
    if args.steps is not None and args.steps < 1:
        raise CliError(f"--steps must be >= 1, got {args.steps}")
    if args.seed is not None and not 0 <= args.seed < 2 ** 32:
        raise CliError(f"--seed must be between 0 and 2**32 - 1, got {args.seed}")
    if args.seed is not None and args.seeds is not None:
        raise CliError("give --seed or --seeds, not both")
    if args.jobs is not None and not 1 <= args.jobs <= MAX_SEEDS:
        raise CliError(f"--jobs must be between 1 and {MAX_SEEDS}, got {args.jobs}")
    args.video_fps, args.video_size = frame_settings(args)
    if args.eval_episodes < 1 or args.video_episodes < 0:
        raise CliError("--eval-episodes must be >= 1 and --video-episodes >= 0")
    if args.learning_starts is not None and args.learning_starts < 0:
        raise CliError(f"--learning-starts must be >= 0, got {args.learning_starts}")
    env_kwargs = _parse_env_kwargs(args.env_kw)
    if "render_mode" in env_kwargs:
        raise CliError("--env-kw render_mode: train renders its evaluation video itself; leave render_mode out")
    settings = _settings(args, goal_env=False)
    try:
        probe = gym.make(args.env_id, **settings.env_kwargs)
    except TypeError as exc:
        raise CliError(f"--env-kw: {exc}") from None
    except (ValueError, FileNotFoundError) as exc:
        raise CliError(f"--env-kw: {exc}") from None
    try:
        goal_env = "desired_goal" in getattr(probe.observation_space, "spaces", {})
        episode = probe.unwrapped.task.episode_steps()
    finally:
        probe.close()
    settings = _settings(args, goal_env=goal_env)
    starts = int(settings.algo_kwargs.get("learning_starts", 0))
    if settings.her and starts <= episode and starts < settings.steps:
        # HER samples goals from finished episodes: it cannot learn before the first one ends
        raise CliError(f"--learning-starts must exceed the episode length ({episode} steps) when SAC uses HER, "
                       f"got {starts}")
    return settings


def _import_rl() -> None:
    for module in ("stable_baselines3", "torch"):
        try:
            __import__(module)
        except ImportError:
            raise missing_extra(module, "rl") from None


def run(args: argparse.Namespace) -> int:
    with _stop_on_signals() as stop:   # from the start: a signal while PyTorch loads is not lost either
        _import_rl()
        if args.mcap:
            from .cli import require_telemetry
            require_telemetry()
        settings = _check(args)
        if args.seeds is not None:
            return _run_seeds(args, settings, parse_seeds(args.seeds), stop)
        return _run_one(args, settings, stop)


def _progress_printer():
    tty = sys.stderr.isatty()

    def show(n: int, total: int, seconds: float, success: float | None) -> None:
        succ = f", success(last 20) {success:.0%}" if success is not None else ""
        text = f"train: {n}/{total} steps, {seconds:.0f} s, {n / max(seconds, 1e-9):.0f} steps/s{succ}"
        print(f"\r{text}   " if tty else text, end="" if tty else "\n", file=sys.stderr, flush=True)

    return show


def _kept(files: dict) -> list[str]:
    return [str(v) for v in files.values() if v]


def _run_one(args: argparse.Namespace, settings, stop: _Stop) -> int:
    from ..envs.training import train_run

    seed = 0 if args.seed is None else args.seed
    out = output_folder(args.out or f"runs/{args.env_id.split('/')[-1]}-{args.algo}-s{seed}", "--out")
    tag = settings.tag
    print(f"train: {args.env_id}, {tag}, seed {seed}, {settings.steps} steps (hyperparams v{settings.version}), "
          f"into {out}; Ctrl-C stops and keeps what was learned", file=sys.stderr, flush=True)
    summary = train_run(settings, seed, out, stop=stop, progress=_progress_printer(),
                        eval_episodes=args.eval_episodes, video_episodes=args.video_episodes, gif=args.gif,
                        mcap=args.mcap, video_size=args.video_size, video_fps=args.video_fps)
    print(file=sys.stderr)
    if args.json:
        print_json(summary)
    else:
        print(f"{args.env_id}: {tag}, {summary['steps_done']} of {settings.steps} steps in "
              f"{summary['train_wall_s'] / 60:.1f} min (seed {seed}; hyperparams v{settings.version})")
        if summary["success_rate"] is not None:
            d = summary["final_distance_mean_m"]
            print(f"evaluation: success rate {summary['success_rate']:.0%} over {summary['eval_episodes']} episodes"
                  + (f", mean final distance {d * 1000:.1f} mm" if d is not None else ""))
        for path in _kept(summary["files"]):
            print(f"wrote {path}")
    if summary["interrupted"]:   # (a signal after the run was complete changes nothing: exit 0)
        print(f"armtwin: train: interrupted by {stop.name} at {summary['steps_done']} of {settings.steps} steps; kept: "
              f"{', '.join(Path(p).name for p in _kept(summary['files']))} (in {out})", file=sys.stderr)
        return EXIT_SIGNAL_BASE + int(stop.signum)
    return 0


# ----- several seeds ------------------------------------------------------------------------------

class _SeedProcess:
    """One seed's ``armtwin train`` in its own process; its stderr goes to ``train.log`` and its
    last progress line is kept for the parent's status."""

    _STEPS = re.compile(r"train: (\d+)/(\d+) steps")

    def __init__(self, seed: int, argv: list[str], out: Path) -> None:
        self.seed, self.out = seed, out
        self.steps_done = 0
        self.log = out / "train.log"
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.stdout = b""
        self._err: list[str] = []
        self._threads = [threading.Thread(target=self._read_err, daemon=True),
                         threading.Thread(target=self._read_out, daemon=True)]
        for t in self._threads:
            t.start()

    def _read_out(self) -> None:
        self.stdout = self.proc.stdout.read()

    def _read_err(self) -> None:
        with open(self.log, "w") as log:
            buf = ""
            while True:
                chunk = self.proc.stderr.read1(4096).decode(errors="replace")
                if not chunk:
                    break
                log.write(chunk)
                log.flush()
                buf += chunk
                *parts, buf = re.split(r"[\r\n]", buf)
                for part in parts:
                    m = self._STEPS.search(part)
                    if m:
                        self.steps_done = int(m.group(1))
                    elif part.strip():
                        self._err.append(part.strip())

    def wait(self) -> int:
        code = self.proc.wait()
        for t in self._threads:
            t.join()
        return code

    @property
    def last_error(self) -> str:
        errs = [e for e in self._err if e.startswith("armtwin: error")] or self._err
        return errs[-1] if errs else "no message"


def _child_argv(args: argparse.Namespace, seed: int, out: Path) -> list[str]:
    argv = [sys.executable, "-m", "armtwin", "train", args.env_id, "--algo", args.algo, "--seed", str(seed),
            "--out", str(out), "--eval-episodes", str(args.eval_episodes),
            "--video-episodes", str(args.video_episodes), "--size", args.size, "--json"]
    if args.fps is not None:
        argv += ["--fps", repr(args.fps)]
    if args.steps is not None:
        argv += ["--steps", str(args.steps)]
    if args.learning_starts is not None:
        argv += ["--learning-starts", str(args.learning_starts)]
    for flag, on in (("--gif", args.gif), ("--mcap", args.mcap), ("--no-her", args.no_her), ("--no-normalize", args.no_normalize)):
        argv += [flag] if on else []
    for item in args.hp:
        argv += ["--hp", item]
    for item in args.env_kw:
        argv += ["--env-kw", item]
    return argv


def _mean_sd(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (ddof 1; 0 for one value) of the values, None when empty."""
    if not values:
        return None, None
    v = np.asarray(values, dtype=float)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


def _run_seeds(args: argparse.Namespace, settings, seeds: list[int], stop: _Stop) -> int:
    from ..envs.training import plot_seeds

    out = output_folder(args.out or f"runs/{args.env_id.split('/')[-1]}-{args.algo}-seeds{args.seeds}", "--out")
    jobs = min(len(seeds), args.jobs or os.cpu_count() or 1)
    print(f"train: {len(seeds)} seeds ({args.seeds}), {jobs} at a time, {settings.steps} steps each, into {out}",
          file=sys.stderr)
    pending = list(seeds)
    running: dict[int, _SeedProcess] = {}
    codes: dict[int, int] = {}
    failed: dict[int, str] = {}
    progress = StderrProgress("train seeds")
    forwarded: int | None = None
    t0 = time.perf_counter()
    while pending or running:
        if stop() and forwarded is None:   # a terminal's Ctrl-C reached the children too; SIGTERM did not
            forwarded = stop.signum
            for sp in running.values():
                with contextlib.suppress(ProcessLookupError):
                    sp.proc.send_signal(stop.signum)
            pending.clear()
        while pending and len(running) < jobs and not stop():
            seed = pending.pop(0)
            folder = out / f"seed-{seed}"
            folder.mkdir(exist_ok=True)
            running[seed] = _SeedProcess(seed, _child_argv(args, seed, folder), folder)
        for seed, sp in list(running.items()):
            if sp.proc.poll() is not None:
                codes[seed] = sp.wait()
                if codes[seed] not in (0, EXIT_SIGNAL_BASE + signal.SIGINT, EXIT_SIGNAL_BASE + signal.SIGTERM):
                    failed[seed] = sp.last_error
                del running[seed]
        done = sum(codes.get(s) is not None for s in seeds)
        steps = sum(sp.steps_done for sp in running.values()) + settings.steps * done
        progress(steps / (settings.steps * len(seeds)), f"{done}/{len(seeds)} seeds done")
        time.sleep(0.25)
    progress.done()
    wall = time.perf_counter() - t0
    runs = []
    for seed in seeds:
        summary_file = out / f"seed-{seed}" / "summary.json"
        s = json.loads(summary_file.read_text()) if summary_file.is_file() and seed in codes and seed not in failed else None
        runs.append({"seed": seed, "exit_code": codes.get(seed), "error": failed.get(seed),
                     "interrupted": None if s is None else s["interrupted"],
                     "steps_done": None if s is None else s["steps_done"],
                     "success_rate": None if s is None else s["success_rate"],
                     "final_distance_mean_m": None if s is None else s["final_distance_mean_m"],
                     "train_wall_s": None if s is None else s["train_wall_s"],
                     "folder": str(out / f"seed-{seed}")})
    complete = [r for r in runs if r["success_rate"] is not None and not r["interrupted"]]
    mean, sd = _mean_sd([r["success_rate"] for r in complete])
    dmean, dsd = _mean_sd([r["final_distance_mean_m"] for r in complete if r["final_distance_mean_m"] is not None])
    tag = settings.tag
    curves_png = out / "learning_curves.png"
    curves = plot_seeds([(r["seed"], out / f"seed-{r['seed']}" / "monitor.csv") for r in runs if r["exit_code"] is not None],
                        settings.steps, curves_png,
                        f"{args.env_id} — {tag}, {settings.steps} steps, seeds {args.seeds}",
                        expert_steps=settings.expert_steps)
    result = {**settings.as_dict(), "seeds": seeds, "jobs": jobs, "wall_s": wall,
              "complete_seeds": [r["seed"] for r in complete],
              "success_rate_mean": mean, "success_rate_sd": sd, "final_distance_mean_m": dmean,
              "final_distance_sd_m": dsd, "interrupted": stop(), "runs": runs, "curves": curves,
              "files": {"seeds": str(out / "seeds.json"), "learning_curves": str(curves_png)}}
    (out / "seeds.json").write_text(json.dumps(result, indent=2))
    if args.json:
        print_json(result)
    else:
        print(f"{args.env_id}: {tag}, {settings.steps} steps per seed (hyperparams v{settings.version}), "
              f"{len(seeds)} seeds in {wall / 60:.1f} min wall, {jobs} at a time")
        print(f"{'seed':>6s} {'success':>8s} {'final dist mm':>14s} {'train min':>10s}  note")
        for r in runs:
            note = ("failed: " + r["error"]) if r["error"] else ("interrupted" if r["interrupted"] else "")
            sr = "-" if r["success_rate"] is None else f"{r['success_rate']:.0%}"
            fd = "-" if r["final_distance_mean_m"] is None else f"{1000 * r['final_distance_mean_m']:.1f}"
            tm = "-" if r["train_wall_s"] is None else f"{r['train_wall_s'] / 60:.1f}"
            print(f"{r['seed']:>6d} {sr:>8s} {fd:>14s} {tm:>10s}  {note}")
        if mean is not None:
            print(f"success rate {100 * mean:.0f} ± {100 * sd:.0f} % (mean ± sd over {len(complete)} seeds)")
        print(f"wrote {out / 'seeds.json'}")
        print(f"wrote {curves_png}")
    for seed, why in failed.items():
        print(f"armtwin: error: seed {seed}: {why} (log: {out / f'seed-{seed}' / 'train.log'})", file=sys.stderr)
    if stop():
        print(f"armtwin: train: interrupted by {stop.name}; {len(complete)} of {len(seeds)} seeds complete, every "
              f"started seed kept its policy, curve and summary (in {out})", file=sys.stderr)
        return EXIT_SIGNAL_BASE + int(stop.signum)
    return EXIT_SEED_FAILED if failed else 0
