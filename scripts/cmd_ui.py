"""``armtwin ui ROBOT [--port P] [--host 127.0.0.1]``: the browser teach pendant.

Serves a page (viser) showing the simulated robot live, with joint sliders, jog buttons for
joints and the tool, an IK target (dragged, or typed as X/Y/Z in mm) with a branch selector,
readouts, the joint model, "record point" / "save as G-code" and "run program". Bound to 127.0.0.1 unless
``--host`` says otherwise. Stop with Ctrl-C. See :mod:`armtwin.envs.pendant`.

With ``--rig PORT`` the pendant's simulated robot also commands the servo rig (virtual → real,
``--joints`` mapped to the rig's two motors, optional ``--rig-log twin.csv``); the readout shows
the servo joints, the twin error ΔE, the latency and the rig's and the link's faults.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .cli import CliError, get_robot, output_file
from .cmd_sync import parse_joints


def register(sub) -> None:
    p = sub.add_parser("ui", help="browser teach pendant (sliders, jog, IK target dragged or typed, teach, run G-code)")
    p.add_argument("robot", help="robot id (see `armtwin robots`)")
    p.add_argument("--port", type=int, default=8080, help="TCP port (default 8080; 0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1, this machine only)")
    p.add_argument("--mode", default="kinematic", help="initial joint model: kinematic, hinge or articulation")
    p.add_argument("--save-dir", default=".", help="folder for 'save as G-code' (default: the current folder)")
    p.add_argument("--low-graphics", action="store_true", help="no shadows or environment map (software WebGL)")
    p.add_argument("--programs", default=None, help="folder listed by 'run program' (default: the repository's examples/)")
    p.add_argument("--rig", default=None, metavar="PORT",
                   help="also drive the servo rig on this pyserial port (virtual to real), e.g. the emulator's pty")
    p.add_argument("--joints", default="1,2", help="with --rig: robot joints (1-based) mapped to rig motors 1,2 (default 1,2)")
    p.add_argument("--baud", type=int, default=115200, help="with --rig: serial speed, bit/s (default 115200)")
    p.add_argument("--rig-log", default=None, metavar="TWIN.csv", help="with --rig: log every sample (as armtwin sync does)")
    p.set_defaults(func=run)


def _check_bindable(host: str, port: int) -> None:
    """CliError unless ``host:port`` can be bound now (viser would otherwise retry other ports or hang)."""
    import socket
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise CliError(f"cannot serve on {host}:{port}: {exc}") from None
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind(addr)
        except OSError as exc:
            raise CliError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None


def _open_rig(args: argparse.Namespace, spec):
    """The open RigLink of ``--rig`` after the checks of ``armtwin sync`` (CliError on bad input)."""
    from ..envs.rig import LinkConfig, RigLink, RigLinkError
    parse_joints(args.joints, spec)  # refused before the port is opened
    if args.rig_log:
        output_file(args.rig_log, "--rig-log")
    try:
        link = RigLink(args.rig, LinkConfig(baudrate=args.baud)).open()
    except RigLinkError as exc:
        raise CliError(str(exc)) from None
    if link.request_hello(timeout=3.0) is None:
        print(f"armtwin: warning: no answer from the rig on {args.rig} yet; the readout shows LINK until it answers",
              file=sys.stderr)
    return link


def run(args: argparse.Namespace) -> int:
    spec = get_robot(args.robot)
    if not 0 <= args.port <= 65535:
        raise CliError(f"--port must be 0..65535, got {args.port}")
    save_dir = Path(args.save_dir)
    if not save_dir.is_dir():
        raise CliError(f"--save-dir {save_dir}: not a folder")
    if args.programs is not None and not Path(args.programs).is_dir():
        raise CliError(f"--programs {args.programs}: not a folder")
    try:
        import viser  # noqa: F401
    except ImportError:
        raise CliError("the teach pendant needs the 'viser' package: pip install viser") from None
    from ..envs.pendant import Pendant, PendantConfig
    from ..envs.sim import JointMode
    try:
        mode = JointMode.parse(args.mode)
    except ValueError as exc:
        raise CliError(f"--mode: {exc}") from None
    config = PendantConfig(save_dir=save_dir, program_dir=Path(args.programs) if args.programs else None)
    _check_bindable(args.host, args.port)
    link = _open_rig(args, spec) if args.rig else None
    try:
        pendant = Pendant(spec, host=args.host, port=args.port, mode=mode, config=config,
                          low_graphics=args.low_graphics)
    except OSError as exc:
        if link is not None:
            link.close()
        raise CliError(f"cannot serve on {args.host}:{args.port}: {exc.strerror or exc}") from None
    if link is not None:
        from ..envs.rig import TwinLog
        joints = parse_joints(args.joints, spec)
        pendant.core.attach_rig(link, joints, TwinLog(args.rig_log, joints) if args.rig_log else None)
        print(f"armtwin: the simulated {spec.name} drives the rig on {args.rig} (joints {args.joints})", file=sys.stderr)
    print(f"armtwin teach pendant for {spec.title}: open {pendant.url}  (Ctrl-C stops)", flush=True)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"armtwin: warning: serving on {args.host}: anyone who can reach this port can move the simulated robot",
              file=sys.stderr)
    pendant.serve_forever()
    return 0
