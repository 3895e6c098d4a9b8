"""``armtwin rig emulate [--baud 115200]``: build and run the servo-rig emulator.

The emulator is the rig's firmware core (``firmware/servo_rig``) compiled on the host with
g++ behind a pseudo-terminal; it prints the device path to pass to ``armtwin sync --port``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from .cli import CliError


def register(sub) -> None:
    p = sub.add_parser("rig", help="servo rig tools (emulator)")
    rs = p.add_subparsers(dest="rig_command", metavar="ACTION")
    e = rs.add_parser("emulate", help="build (if needed) and run the rig emulator on a pseudo-terminal")
    e.add_argument("--baud", type=int, default=115200, help="simulated serial speed, bit/s (default 115200)")
    e.add_argument("--link", default=None, help="also expose the pty under this stable path (symlink)")
    e.add_argument("--seconds", type=float, default=None, help="stop after this many seconds (default: until Ctrl-C)")
    e.set_defaults(func=run)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def run(args: argparse.Namespace) -> int:
    from ..envs.rig import Emulator, RigLinkError, build_emulator
    if not (300 <= args.baud <= 10_000_000):
        raise CliError(f"--baud {args.baud}: must be between 300 and 10000000 bit/s")
    if args.seconds is not None and not 0 < args.seconds < float("inf"):  # also refuses nan
        raise CliError(f"--seconds {args.seconds}: must be a positive number of seconds")
    try:
        print("armtwin: building the rig emulator (if needed)…", file=sys.stderr)
        exe = build_emulator()
        emu = Emulator(args.baud, link=args.link, exe=exe)
    except RigLinkError as exc:
        raise CliError(str(exc)) from None
    print(emu.device, flush=True)
    print(f"armtwin: rig emulator at {args.baud} baud on {emu.device} — Ctrl-C to stop", file=sys.stderr)
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
