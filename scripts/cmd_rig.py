"""``armtwin rig emulate [--baud 115200] [--motor-params FILE [FILE2]]``: build and run the servo-rig
emulator; ``armtwin rig identify`` (:mod:`.rig_identify`): identify the rig's motors;
``armtwin rig build [--board uno]``: build the firmware for AVR boards (avr-gcc), print its footprint.

The emulator is the rig's firmware core (``firmware/servo_rig``) compiled on the host with
g++ behind a pseudo-terminal; it prints the device path to pass to ``armtwin sync --port``.
With ``--motor-params`` its motors are identified ones (one file for both, or one per motor):
a virtual copy of a measured rig.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import time

from . import rig_identify
from .cli import CliError
from .options import BAUD_MAX, BAUD_MIN, add_motor_params, check_baud, motor_params

#: longest timed run of the emulator and of ``bench rig``, s (without --seconds the emulator runs until Ctrl-C)
SECONDS_MAX = 3600.0


def check_range(value: float, opt: str, lo: float, hi: float, unit: str, hint: str = "") -> float:
    """``value`` if it is a finite number in [lo, hi], else a CliError naming ``opt`` (nan and inf refused)."""
    if not (math.isfinite(value) and lo <= value <= hi):
        raise CliError(f"{opt} {value:g}: must be between {lo:g} and {hi:g} {unit}{hint}")
    return value


def register(sub) -> None:
    p = sub.add_parser("rig", help="servo rig tools: the emulator, identification of the motors")
    rs = p.add_subparsers(dest="rig_command", metavar="ACTION")
    e = rs.add_parser("emulate", help="build (if needed) and run the rig emulator on a pseudo-terminal")
    e.add_argument("--baud", type=int, default=115200,
                   help=f"simulated serial speed, bit/s, {BAUD_MIN}..{BAUD_MAX} (default 115200)")
    e.add_argument("--link", default=None, help="also expose the pty under this stable path (symlink)")
    e.add_argument("--seconds", type=float, default=None,
                   help=f"stop after this many seconds, 0.1..{SECONDS_MAX:g} (default: until Ctrl-C)")
    add_motor_params(e, "the emulated motors instead of the data sheet's (a virtual copy of an identified rig)")
    e.set_defaults(func=run)
    b = rs.add_parser("build", help="build the rig firmware for AVR boards with avr-gcc; print flash and static RAM")
    b.add_argument("--board", action="append", default=None, metavar="BOARD",
                   help="uno, nano or mega2560 (repeatable; default: all three)")
    b.set_defaults(func=run_build)
    rig_identify.register(rs)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def run(args: argparse.Namespace) -> int:
    from ..envs.rig.emulator import Emulator, build_emulator
    from ..envs.rig.link import RigLinkError
    check_baud(args.baud)
    if args.seconds is not None:
        check_range(args.seconds, "--seconds", 0.1, SECONDS_MAX, "s", " (leave it out to run until Ctrl-C)")
    motor_params(args, 2)      # checked here: one line naming the file, before anything is built
    files = args.motor_params or [None]
    try:
        print("armtwin: building the rig emulator (if needed)…", file=sys.stderr)
        exe = build_emulator()
        emu = Emulator(args.baud, link=args.link, exe=exe, motor_params=files[0],
                       motor2_params=files[1] if len(files) > 1 else None)
    except RigLinkError as exc:
        raise CliError(str(exc)) from None
    print(emu.device, flush=True)
    motors = f" with the motors of {' and '.join(files)}" if args.motor_params else ""
    print(f"armtwin: rig emulator at {args.baud} baud on {emu.device}{motors} — Ctrl-C to stop", file=sys.stderr)
    stop = {"flag": False}

    def _term(*_):
        stop["flag"] = True

    old = signal.signal(signal.SIGTERM, _term)
    t0 = time.monotonic()
    try:
        while not stop["flag"] and emu.proc.poll() is None:
            if args.seconds is not None and time.monotonic() - t0 >= args.seconds:
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, old)
        emu.stop()
    print("armtwin: rig emulator stopped", file=sys.stderr)
    return 0


def run_build(args: argparse.Namespace) -> int:
    """Build for each board; one line per board with flash and static RAM (exit 2 on a bad board or a failed build)."""
    from ..envs.rig.chip import Board, build_firmware
    from ..envs.rig.link import RigLinkError
    names = args.board or [b.value for b in Board]
    boards = []
    for n in names:
        try:
            boards.append(Board(n))
        except ValueError:
            raise CliError(f"--board {n}: unknown board; choose from {', '.join(b.value for b in Board)}") from None
    for b in boards:
        try:
            img = build_firmware(b)
        except RigLinkError as exc:
            raise CliError(str(exc)) from None
        print(f"{img.summary()}  {img.elf}")
    return 0
