"""``armtwin run PROGRAM --robot R``: preflight, then run the program in the simulated world.

A program that fails the preflight is refused before anything moves (exit 1). The run
shows a progress bar on stderr, can write a CSV log and a video, and ends with a report:
lines executed, program time, RMS and max path error (mm).

Interruptions: SIGINT (Ctrl-C) and SIGTERM end a run the same way — the row being written is
completed, the log and the video are closed (the video playable), the report says where the run
stopped, and the exit code is 130 for SIGINT and 143 for SIGTERM (128 + the signal's number, as
every armtwin command gives them: ``cli.EXIT_INTERRUPTED`` / ``cli.EXIT_TERMINATED``). A signal
before the run has started (during the preflight) ends the command at once with the same codes;
nothing has been written then. Every log row is handed to the OS as it is written, so even
SIGKILL loses at most the row being written, never part of one
(:class:`armtwin.envs.runner.RunLog`).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from ..envs.config import CameraPreset
from ..envs.telemetry.mcapfile import Compression
from .cli import (EXIT_INTERRUPTED, EXIT_TERMINATED, CliError, StderrProgress, add_json_flag, output_file, print_json,
                  require_telemetry)
from .cmd_check import EXIT_FAULTY, add_program_args, check, print_report, report_dict
from .options import (LOG_SUFFIXES, VIDEO_SUFFIXES, add_joint_mode, add_live_options, add_publish_options,
                      add_video_options, check_live, check_output_name, check_outputs, check_publish, joint_mode,
                      open_live, open_publisher, print_publish_report, same_file, video_settings)
from .placing import add_place_options, placement_json


def register(sub) -> None:
    p = sub.add_parser("run", help="run a G-code program in the simulated world (after the preflight)")
    add_program_args(p)
    add_place_options(p)
    add_joint_mode(p)
    add_video_options(p, default_camera=CameraPreset.WORK, gif=False,
                      video_help="write a video with the programmed and followed paths (.mp4 or .gif); camera "
                                 "'work' frames the program's path, the others the whole robot")
    p.add_argument("--log", metavar="OUT.csv|OUT.mcap",
                   help="write one CSV row per control period, or (a .mcap name) ROS 2 messages that Foxglove "
                        "and ros2 bag read: joint states, TF, tool pose, G-code line, tool outputs (docs/TELEMETRY.md)")
    p.add_argument("--log-compression", default=Compression.ZSTD.value, choices=[c.value for c in Compression],
                   help=f"chunk compression of a .mcap log: {', '.join(c.value for c in Compression)} "
                        f"(default {Compression.ZSTD.value})")
    add_live_options(p)
    add_publish_options(p, "run records (commanded joints as 'virtual', simulated as 'servo'; run time)")
    p.add_argument("--hinge-gains", metavar="FILE.toml",
                   help="with --joint-mode hinge: the hinge gains of this file (`armtwin fit RUN.csv --model hinge "
                        "--save FILE.toml`) instead of the robot's")
    p.add_argument("--articulation-drive", metavar="FILE.toml",
                   help="with --joint-mode articulation: the drive of this file (gains, joint damping, force limits: "
                        "`armtwin fit RUN.csv --model articulation --save FILE.toml`) instead of the robot's")
    add_json_flag(p)
    p.set_defaults(func=run)


def _output_error(exc: OSError, outputs: dict[str, str | None]) -> str:
    """One line for an OSError of the run, naming the output option whose file it is about."""
    why = exc.strerror or str(exc)
    name = exc.filename
    for opt, path in outputs.items():
        if path and name is not None and (os.fspath(name) == path or same_file(os.fspath(name), path)):
            return f"{opt} {path}: cannot write it: {why}"
    named = [f"{opt} {path}" for opt, path in outputs.items() if path]
    where = f" ({', '.join(named)})" if named else ""
    return f"cannot write the run's output{where}: {why}" + (f" ({os.fspath(name)})" if name is not None else "")


class _StopSignals:
    """While the run loop runs, SIGINT and SIGTERM set :attr:`stop` (the loop ends after the row
    being written and closes its files) instead of raising where the program is; the handlers
    before it (``cli.main``'s: KeyboardInterrupt, Terminated) are put back on exit. Only the main
    thread can own signal handlers; elsewhere (a test calling the CLI from a thread) nothing is
    installed."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.signum: int | None = None
        self._old: dict = {}

    def __enter__(self) -> "_StopSignals":
        if threading.current_thread() is threading.main_thread():
            self._old = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def _handle(self, signum: int, _frame) -> None:
        if self.signum is None:
            self.signum = signum
        self.stop.set()

    def __exit__(self, *exc) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old = {}

    @property
    def exit_code(self) -> int:
        """130 after SIGINT, 143 after SIGTERM."""
        return EXIT_TERMINATED if self.signum == signal.SIGTERM else EXIT_INTERRUPTED


def _source_lines(program: str) -> list[str]:
    """The program's lines as the parser numbers them (LF, CR LF and a lone CR end a line;
    ``str.splitlines`` would also break at FS, GS, VT, … inside a comment and shift the numbers)."""
    from ..controllers.gcode.parser import split_lines
    return split_lines(Path(program).read_bytes())


def run(args: argparse.Namespace) -> int:
    from ..controllers.gcode import ControlTrajectoryError
    from ..controllers.gcode.compile import compile_report
    from ..envs.runner import RunConfig, run_program
    check_outputs(args.program, {"--log": args.log, "--video": args.video})     # first: the gravest mistake
    for opt, path, suffixes in (("--log", args.log, LOG_SUFFIXES), ("--video", args.video, VIDEO_SUFFIXES)):
        if path is not None:
            check_output_name(path, opt, suffixes)
    video = video_settings(args)
    mode = joint_mode(args)
    target = check_publish(args)
    check_live(args)
    if args.log:
        output_file(args.log, "--log", LOG_SUFFIXES)
        if args.log.lower().endswith(".mcap"):
            require_telemetry()
    drive = _drive_file(args, mode)     # before the preflight: a bad file is one line, nothing checked
    spec, machine, rep = check(args, quiet=args.json)
    if not rep.clean():
        if args.json:
            print_json({"program": args.program, "ran": False, **report_dict(rep, spec, machine, False, args.cell_check),
                        **placement_json(args, spec)})
        else:
            print_report(args.program, rep, spec, machine, False, args.cell_check)
            print(f"{args.program}: refused: the preflight found faults; nothing was moved", file=sys.stderr)
        return EXIT_FAULTY
    if rep.plan is None or rep.samples is None:
        raise CliError(f"{args.program}: the program does not move the robot")
    try:
        cfg = RunConfig(mode=mode, video_fps=video.fps, video_size=video.size, camera=video.camera.value, drive=drive,
                        log_compression=args.log_compression)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    try:
        program = compile_report(rep, spec, machine.control_period)
    except ControlTrajectoryError as exc:
        print(f"{args.program}:{exc}; nothing was moved", file=sys.stderr)
        return EXIT_FAULTY
    progress = None if args.json else StderrProgress(f"{spec.name} {mode.value}")
    signals = _StopSignals()
    mcap = bool(args.log) and args.log.lower().endswith(".mcap")
    from ..envs.telemetry.topics import RUN_TOPICS
    live = open_live(args, RUN_TOPICS)
    publisher = open_publisher(target, range(spec.dof), args.publish_hz)
    try:
        with signals:    # from here a signal ends the run after the row being written
            res = run_program(program, spec, cfg, log_path=args.log, video_path=args.video, progress=progress,
                              name=Path(args.program).name,
                              source_lines=_source_lines(args.program) if args.video or mcap or live else None,
                              stop=signals.stop, publish=publisher, live=live,
                              cell=args.cell_check.cell if args.cell_check is not None else None)
    except OSError as exc:   # an output that could not be written after all (a full disk, a folder made meanwhile)
        raise CliError(_output_error(exc, {"--log": args.log, "--video": args.video})) from None
    finally:
        if progress is not None:
            progress.done()
        print_publish_report(target, publisher)
    out = {"program": args.program, "robot": spec.name, "mode": mode.value, "ran": True, **res.to_dict(),
           **placement_json(args, spec)}
    if args.cell_check is not None:
        out["cell"] = report_dict(rep, spec, machine, False, args.cell_check)["cell"]
    stopped_by = signal.Signals(signals.signum).name if res.interrupted and signals.signum is not None else None
    if stopped_by:
        out["stopped_by"] = stopped_by
    if args.json:
        print_json(out)
    else:
        runs = (f"{res.blocks_executed} motion and dwell blocks executed ({res.lines_executed} distinct lines)"
                if res.blocks_executed != res.lines_executed else f"{res.lines_executed} motion and dwell lines executed")
        print(f"{args.program} on {spec.name} ({mode.value}): {runs}, "
              f"program time {res.program_time:.2f} s ({res.samples} control periods, wall {res.wall_time:.1f} s)")
        print(f"  path error: RMS {res.rms_error_mm:.4f} mm, max {res.max_error_mm:.4f} mm")
        if args.cell_check is not None:
            cell = args.cell_check.cell
            print(f"  in the cell {cell.name!r} ({', '.join(b.name for b in cell.bodies) or 'no bodies'}): "
                  f"no collision in the preflight")
        if res.pauses:
            print(f"  pause (M0, or M1 with --optional-stop) at line(s) {', '.join(map(str, res.pauses))}: "
                  f"passed without waiting (simulation)")
        if res.tool_changes:
            print(f"  M6 tool change at line(s) {', '.join(map(str, res.tool_changes))}: the arm rested; the "
                  f"simulated flange carries the first tool only")
        for event in res.grip_events:
            print(f"  {event.text()}")
        for piece in res.pieces:
            print(f"  {piece.text()}")
        if not res.stable:
            print(f"  STOPPED: {res.message}")
        if res.interrupted:
            print(f"  INTERRUPTED by {stopped_by or 'a stop request'} at t = {res.program_time:.3f} s; "
                  f"the files below hold everything up to there")
        for p in (res.log_path, res.video_path):
            if p:
                print(f"  wrote {p}")
    if res.interrupted:
        return signals.exit_code
    return 0 if res.stable else EXIT_FAULTY


def _drive_file(args: argparse.Namespace, mode):
    """The drive of ``--hinge-gains`` or ``--articulation-drive`` (for its joint model and ``--robot``), or None."""
    from ..envs.config import JointMode
    given = [(opt, path, model) for opt, path, model in
             (("--hinge-gains", args.hinge_gains, JointMode.HINGE),
              ("--articulation-drive", args.articulation_drive, JointMode.ARTICULATION)) if path]
    if len(given) > 1:
        raise CliError("--hinge-gains and --articulation-drive belong to different joint models; give one")
    if not given:
        return None
    opt, path, model = given[0]
    from ..envs.articulation_fit import read_articulation_drive
    from ..envs.hinge_fit import read_hinge_gains
    from .cli import get_robot
    read = read_hinge_gains if model is JointMode.HINGE else read_articulation_drive
    spec = get_robot(args.robot)
    if mode is not model:
        raise CliError(f"{opt}: the values are the {model.value} model's; add --joint-mode {model.value} (not {mode.value})")
    try:
        return read(path, spec)
    except OSError as exc:
        raise CliError(f"{opt} {path}: cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CliError(f"{opt} {exc}") from None
