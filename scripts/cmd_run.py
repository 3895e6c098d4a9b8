"""``armtwin run PROGRAM --robot R``: preflight, then run the program in the simulated world.

A program that fails the preflight is refused before anything moves (exit 1). The run
shows a progress bar on stderr, can write a CSV log and a video, and ends with a report:
lines executed, program time, RMS and max path error (mm).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..envs.config import CameraPreset
from .cli import CliError, StderrProgress, add_json_flag, output_file, print_json
from .cmd_check import EXIT_FAULTY, add_program_args, check, print_report, report_dict
from .options import (LOG_SUFFIXES, VIDEO_SUFFIXES, add_joint_mode, add_video_options, check_output_name, check_outputs,
                      joint_mode, same_file, video_settings)


def register(sub) -> None:
    p = sub.add_parser("run", help="run a G-code program in the simulated world (after the preflight)")
    add_program_args(p)
    add_joint_mode(p)
    add_video_options(p, default_camera=CameraPreset.WORK, gif=False,
                      video_help="write a video with the programmed and followed paths (.mp4 or .gif); camera "
                                 "'work' frames the program's path, the others the whole robot")
    p.add_argument("--log", metavar="OUT.csv", help="write one CSV row per control period")
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


def run(args: argparse.Namespace) -> int:
    from ..envs.runner import ControlTrajectoryError, RunConfig, run_program
    check_outputs(args.program, {"--log": args.log, "--video": args.video})     # first: the gravest mistake
    for opt, path, suffixes in (("--log", args.log, LOG_SUFFIXES), ("--video", args.video, VIDEO_SUFFIXES)):
        if path is not None:
            check_output_name(path, opt, suffixes)
    video = video_settings(args)
    mode = joint_mode(args)
    if args.log:
        output_file(args.log, "--log", LOG_SUFFIXES)
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
        cfg = RunConfig(mode=mode, video_fps=video.fps, video_size=video.size, camera=video.camera.value)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    progress = None if args.json else StderrProgress(f"{spec.name} {mode.value}")
    try:
        res = run_program(rep, spec, cfg, log_path=args.log, video_path=args.video, progress=progress,
                          source_lines=Path(args.program).read_text(errors="replace").splitlines() if args.video else None)
    except ControlTrajectoryError as exc:
        print(f"{args.program}:{exc}; nothing was moved", file=sys.stderr)
        return EXIT_FAULTY
    except OSError as exc:   # an output that could not be written after all (a full disk, a folder made meanwhile)
        raise CliError(_output_error(exc, {"--log": args.log, "--video": args.video})) from None
    finally:
        if progress is not None:
            progress.done()
    out = {"program": args.program, "robot": spec.name, "mode": mode.value, "ran": True, **res.to_dict()}
    if args.json:
        print_json(out)
    else:
        print(f"{args.program} on {spec.name} ({mode.value}): {res.lines_executed} motion and dwell lines executed, "
              f"program time {res.program_time:.2f} s ({res.samples} control periods, wall {res.wall_time:.1f} s)")
        print(f"  path error: RMS {res.rms_error_mm:.4f} mm, max {res.max_error_mm:.4f} mm")
        if res.pauses:
            print(f"  M0 pause at line(s) {', '.join(map(str, res.pauses))}: passed without waiting (simulation)")
        if not res.stable:
            print(f"  STOPPED: {res.message}")
        for p in (res.log_path, res.video_path):
            if p:
                print(f"  wrote {p}")
    return 0 if res.stable else EXIT_FAULTY
