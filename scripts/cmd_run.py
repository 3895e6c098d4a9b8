"""``armtwin run PROGRAM --robot R``: preflight, then run the program in the simulated world.

A program that fails the preflight is refused before anything moves (exit 1). The run
shows a progress bar on stderr, can write a CSV log and a video, and ends with a report:
lines executed, program time, RMS and max path error (mm).

Interruptions: SIGINT (Ctrl-C) and SIGTERM end a run the same way — the row being written is
completed, the log and the video are closed (the video playable), the report says where the run
stopped, and the exit code is 128 + the signal's number: 130 for SIGINT, 143 for SIGTERM (as a
shell reports a process ended by that signal). A signal before the run has started (during the
preflight) ends the command at once with the same codes; nothing has been written then. Every
log row is handed to the OS as it is written, so even SIGKILL loses at most the row being
written, never part of one (:class:`armtwin.envs.runner.RunLog`).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import threading
from pathlib import Path

from .cli import CliError, StderrProgress, add_json_flag, output_file, print_json
from .cmd_check import EXIT_FAULTY, add_program_args, check, print_report, report_dict


def register(sub) -> None:
    p = sub.add_parser("run", help="run a G-code program in the simulated world (after the preflight)")
    add_program_args(p)
    p.add_argument("--mode", default="kinematic", choices=["kinematic", "hinge", "articulation"],
                   help="joint model (default kinematic)")
    p.add_argument("--video", metavar="OUT.mp4", help="write a video with the programmed and followed paths")
    p.add_argument("--log", metavar="OUT.csv", help="write one CSV row per control period")
    p.add_argument("--camera", default="work", choices=["work", "iso", "front", "side", "top"],  # = envs.runner.CAMERAS
                   help="video camera: work (default) frames the program's path, the others the whole robot")
    p.add_argument("--fps", type=float, default=30.0,
                   help=f"video frames per second, {MIN_FPS:g} to {MAX_FPS:g} (default 30; as `armtwin show`)")
    add_json_flag(p)
    p.set_defaults(func=run)


#: --fps range (the same as ``armtwin show``): below 1 frame/s a video is a slide show whose frames
#: claim to last for seconds (0.001 made one frame "lasting" 1000 s); above 120 no player shows more
MIN_FPS, MAX_FPS = 1.0, 120.0
#: the file name endings of the outputs
LOG_SUFFIXES = (".csv",)
VIDEO_SUFFIXES = (".mp4", ".gif")


def check_output_name(path: str, opt: str, suffixes: tuple[str, ...]) -> None:
    """CliError (naming ``opt``) unless ``path`` is a file name with one of ``suffixes`` (any case)
    and something before it: ``--log other.ngc`` would overwrite a G-code program with the log,
    ``--video .mp4`` is only an ending."""
    what = " or ".join(suffixes)
    if not path.strip():
        raise CliError(f"{opt}: needs a file name ending in {what}")
    name = os.path.basename(path.rstrip("/" + os.sep))
    if path.endswith(("/", os.sep)) or Path(path).is_dir():
        raise CliError(f"{opt} {path}: names a folder; give a file name ending in {what}")
    if not name.lower().endswith(suffixes):
        raise CliError(f"{opt} {path}: must end in {what}")
    if name.lower() in suffixes:
        raise CliError(f"{opt} {path}: needs a file name before {name} (e.g. out{name.lower()})")


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: equal after resolving links and ``..``, or one file (hard links)."""
    if Path(a).resolve() == Path(b).resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:       # one of them does not exist (yet): then they are not the same file
        return False


def check_outputs(program: str, outputs: dict[str, str | None]) -> None:
    """CliError when an output file (``{"--log": path, …}``) is the program or another output."""
    named = [(opt, path) for opt, path in outputs.items() if path]
    for i, (opt, path) in enumerate(named):
        if _same_file(path, program):
            raise CliError(f"{opt} {path}: is the program itself; writing it would destroy the G-code")
        for opt2, path2 in named[:i]:
            if _same_file(path, path2):
                raise CliError(f"{opt} {path}: is the same file as {opt2}; give them different names")


def _output_error(exc: OSError, outputs: dict[str, str | None]) -> str:
    """One line for an OSError of the run, naming the output option whose file it is about."""
    why = exc.strerror or str(exc)
    name = exc.filename
    for opt, path in outputs.items():
        if path and name is not None and (os.fspath(name) == path or _same_file(os.fspath(name), path)):
            return f"{opt} {path}: cannot write it: {why}"
    named = [f"{opt} {path}" for opt, path in outputs.items() if path]
    where = f" ({', '.join(named)})" if named else ""
    return f"cannot write the run's output{where}: {why}" + (f" ({os.fspath(name)})" if name is not None else "")


#: the signals that end a run cleanly (rows complete, files closed)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_code_of(signum: int) -> int:
    """Exit code of a run ended by signal ``signum``: 128 + its number (SIGINT 130, SIGTERM 143)."""
    return 128 + int(signum)


class _Interrupted(Exception):
    """A stop signal arrived before the run loop started (nothing written yet)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _StopSignals:
    """SIGINT and SIGTERM handlers for the length of one ``armtwin run``.

    Before :attr:`running` is set, a signal raises :class:`_Interrupted` (the preflight is
    abandoned at once); afterwards it sets :attr:`stop`, which the run loop reads after every
    row. The previous handlers are put back by :meth:`restore`. Only the main thread can own
    signal handlers; elsewhere (a test calling the CLI from a thread) nothing is installed.
    """

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.signum: int | None = None
        self.running = False
        self._old: dict = {}
        if threading.current_thread() is threading.main_thread():
            self._old = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS}

    def _handle(self, signum: int, _frame) -> None:
        if self.signum is None:
            self.signum = signum
        self.stop.set()
        if not self.running:
            raise _Interrupted(signum)

    def restore(self) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old = {}


def _source_lines(program: str) -> list[str]:
    """The program's lines as the parser numbers them (LF, CR LF and a lone CR end a line;
    ``str.splitlines`` would also break at FS, GS, VT, … inside a comment and shift the numbers)."""
    from ..controllers.gcode.parser import split_lines
    return split_lines(Path(program).read_bytes())


def run(args: argparse.Namespace) -> int:
    signals = _StopSignals()
    try:
        return _run(args, signals)
    except _Interrupted as exc:
        print(f"armtwin: interrupted by {signal.Signals(exc.signum).name} before the run started; "
              f"nothing was moved or written", file=sys.stderr)
        return exit_code_of(exc.signum)
    finally:
        signals.restore()


def _run(args: argparse.Namespace, signals: _StopSignals) -> int:
    from ..controllers.gcode import ControlTrajectoryError
    from ..controllers.gcode.compile import compile_report
    from ..envs.runner import RunConfig, run_program
    from ..envs.sim import JointMode
    check_outputs(args.program, {"--log": args.log, "--video": args.video})     # first: the gravest mistake
    for opt, path, suffixes in (("--log", args.log, LOG_SUFFIXES), ("--video", args.video, VIDEO_SUFFIXES)):
        if path is not None:
            check_output_name(path, opt, suffixes)
    if args.video:
        output_file(args.video, "--video", VIDEO_SUFFIXES)
    if args.log:
        output_file(args.log, "--log", LOG_SUFFIXES)
    if not (math.isfinite(args.fps) and MIN_FPS <= args.fps <= MAX_FPS):
        raise CliError(f"--fps must be between {MIN_FPS:g} and {MAX_FPS:g}, got {args.fps:g}")
    spec, machine, rep = check(args, quiet=args.json)
    if not rep.clean():
        if args.json:
            print_json({"program": args.program, "ran": False, **report_dict(rep, spec, machine, False)})
        else:
            print_report(args.program, rep, spec, machine, False)
            print(f"{args.program}: refused: the preflight found faults; nothing was moved", file=sys.stderr)
        return EXIT_FAULTY
    if rep.plan is None or rep.samples is None:
        raise CliError(f"{args.program}: the program does not move the robot")
    try:
        cfg = RunConfig(mode=JointMode.parse(args.mode), video_fps=args.fps, camera=args.camera)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    try:
        program = compile_report(rep, spec, machine.control_period)
    except ControlTrajectoryError as exc:
        print(f"{args.program}:{exc}; nothing was moved", file=sys.stderr)
        return EXIT_FAULTY
    progress = None if args.json else StderrProgress(f"{spec.name} {args.mode}")
    signals.running = True      # from here a signal ends the run after the row being written
    try:
        res = run_program(program, spec, cfg, log_path=args.log, video_path=args.video, progress=progress,
                          source_lines=_source_lines(args.program) if args.video else None, stop=signals.stop)
    except OSError as exc:   # an output that could not be written after all (a full disk, a folder made meanwhile)
        raise CliError(_output_error(exc, {"--log": args.log, "--video": args.video})) from None
    finally:
        if progress is not None:
            progress.done()
    out = {"program": args.program, "robot": spec.name, "mode": args.mode, "ran": True, **res.to_dict()}
    stopped_by = signal.Signals(signals.signum).name if res.interrupted and signals.signum is not None else None
    if stopped_by:
        out["stopped_by"] = stopped_by
    if args.json:
        print_json(out)
    else:
        print(f"{args.program} on {spec.name} ({args.mode}): {res.lines_executed} motion and dwell lines executed, "
              f"program time {res.program_time:.2f} s ({res.samples} control periods, wall {res.wall_time:.1f} s)")
        print(f"  path error: RMS {res.rms_error_mm:.4f} mm, max {res.max_error_mm:.4f} mm")
        if res.pauses:
            print(f"  M0 pause at line(s) {', '.join(map(str, res.pauses))}: passed without waiting (simulation)")
        if not res.stable:
            print(f"  STOPPED: {res.message}")
        if res.interrupted:
            print(f"  INTERRUPTED by {stopped_by or 'a stop request'} at t = {res.program_time:.3f} s; "
                  f"the files below hold everything up to there")
        for p in (res.log_path, res.video_path):
            if p:
                print(f"  wrote {p}")
    if res.interrupted and signals.signum is not None:
        return exit_code_of(signals.signum)
    return 0 if res.stable else EXIT_FAULTY
