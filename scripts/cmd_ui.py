"""``armtwin ui ROBOT [--port P] [--host 127.0.0.1]``: the browser teach pendant.

Serves a page (viser) showing the simulated robot live, with joint sliders, jog buttons for
joints and the tool, an IK target (dragged, or typed as X/Y/Z in mm) with a branch selector,
readouts, the joint model, "record point" / "save as G-code" and "run program". Bound to 127.0.0.1 unless
``--host`` says otherwise. Stop with Ctrl-C. See :mod:`armtwin.envs.pendant`.

    armtwin ui ROBOT [--port 8080] [--host 127.0.0.1] [--tool N [--tools FILE.toml]] [--cell FILE|default]
                     [--rig PORT [--joints 1,2] [--baud 115200] [--rig-log twin.csv]] [--live [--live-port 8765]]

With ``--tool N`` (a tool of the built-in table, or of ``--tools FILE`` as for ``armtwin run``)
the tool is on the simulated flange (its mass a payload of the dynamic joint models) and the
readout, the IK target, the tool jog (base or tool axes), the taught points and their saved
G-code are at its TCP; the saved program names the tool (``G43 H N``), so ``armtwin run
--tool N`` puts the tool tip on the taught poses. A bad table or tool number is one line on
stderr with exit code 2.

With ``--cell FILE`` (or ``--cell default``, as for ``armtwin check``) the robot stands in the
workcell, whose bodies the page draws, and the IK target is checked for collisions (with the cell,
and of the robot with itself, tool included): the nearest collision-free solution is taken (the
status line says when the nearest one was in collision), and a target whose every solution is in
collision is not applied — the target turns red and the status line names the pairs.

With ``--rig PORT`` the pendant's simulated robot also commands the servo rig (virtual → real,
as ``armtwin sync --direction virtual-to-real`` with the pendant as the program): ``--joints``
are mapped to the rig's two motors. The rig has a loop of its own at the sync rate (500 Hz),
whatever the page does: it sends the joints of the pendant's newest update, ramped from the
rig's measured joints (never a step; at most half of each joint's speed limit), and writes
every sample to the optional ``--rig-log`` CSV. The page's rig panel shows the servo joints, the twin error ΔE (deg),
the latency (ms) and the rig's and the link's faults (LINK LOST, POWER, …); a rig that goes
away shows LINK LOST while the link tries to reopen the port. Ctrl-C or SIGTERM closes the
link (the rig goes idle) and the log. Bad rig options or a port that cannot be opened end as
one line on stderr with exit code 2, before anything is served.

With ``--live`` (``--live-port``, default 8765) the pendant also streams the topics of
``armtwin run --live`` — joint states, the target joints as the commanded ones, ``/tf``, the
tool poses, the program line — to Foxglove over WebSocket on 127.0.0.1, one message per topic
per pendant update, while the user jogs (docs/TELEMETRY.md).
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from .cli import CliError, get_robot, missing_extra
from .cmd_check import add_cell_arg, load_cell_arg
from .options import (add_joint_mode, add_live_options, add_tool_options, check_live, check_log_file, joint_mode,
                      open_live, open_log, parse_joints, tool_settings)


def register(sub) -> None:
    p = sub.add_parser("ui", help="browser teach pendant (sliders, jog, IK target dragged or typed, teach, run G-code)")
    p.add_argument("robot", help="robot id (see `armtwin robots`)")
    p.add_argument("--port", type=int, default=8080, help="TCP port (default 8080; 0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1, this machine only)")
    add_joint_mode(p, what="initial joint model")
    add_tool_options(p, program=False)
    add_cell_arg(p, "stand the robot in this workcell (drawn) and refuse IK targets in collision with it",
                 implicit=True)
    p.add_argument("--save-dir", default=".", help="folder for 'save as G-code' (default: the current folder)")
    p.add_argument("--low-graphics", action="store_true", help="no shadows or environment map (software WebGL)")
    p.add_argument("--programs", default=None, help="folder listed by 'run program' (default: the repository's examples/)")
    p.add_argument("--rig", default=None, metavar="PORT",
                   help="also drive the servo rig on this pyserial port (virtual to real): /dev/ttyUSB0, the "
                        "emulator's pty (`armtwin rig emulate`), socket://host:port")
    p.add_argument("--joints", default=None, help="with --rig: robot joints (1-based) mapped to rig motors 1,2 (default 1,2)")
    p.add_argument("--baud", type=int, default=None, help="with --rig: serial speed, bit/s (default 115200)")
    p.add_argument("--rig-log", default=None, metavar="TWIN.csv",
                   help="with --rig: CSV log of every sample (the columns of `armtwin sync --log`; a .csv name, "
                        "an existing file is replaced)")
    add_live_options(p)
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


def _rig_options(args: argparse.Namespace, spec) -> tuple[int, ...] | None:
    """The checked rig options: the mapped joints (0-based), or None without ``--rig`` (CliError on bad input).

    Everything is checked before anything is opened, as ``armtwin sync`` does.
    """
    if args.rig is None:
        for opt, v in (("--joints", args.joints), ("--baud", args.baud), ("--rig-log", args.rig_log)):
            if v is not None:
                raise CliError(f"{opt} needs --rig PORT (the serial port of the servo rig)")
        return None
    if not args.rig.strip():
        raise CliError("--rig: give the rig's serial port, e.g. /dev/ttyUSB0")
    joints = parse_joints(args.joints or "1,2", spec)
    if args.baud is None:
        args.baud = 115200
    if not 300 <= args.baud <= 4_000_000:
        raise CliError(f"--baud {args.baud}: must be between 300 and 4000000 bit/s")
    if args.rig_log:  # a .csv name, never the port, a program or a FIFO (checked as `armtwin sync --log`)
        check_log_file(args.rig_log, "--rig-log", args.rig)
    return joints


def _open_rig(args: argparse.Namespace):
    """The open RigLink of ``--rig`` (CliError when the port cannot be opened or speaks another protocol)."""
    from ..envs.rig.link import LinkConfig, RigLink, RigLinkError
    from ..envs.rig.sync import connect
    try:
        link = RigLink(args.rig, LinkConfig(baudrate=args.baud)).open()
    except RigLinkError as exc:
        raise CliError(str(exc)) from None
    try:
        hello = connect(link, 0.0, bounded=False)  # an Arduino reboots when its port opens: 3 s, then go on
    except RigLinkError as exc:  # another protocol version
        link.close()
        raise CliError(f"--rig {exc}") from None
    if hello is None:
        print(f"armtwin: warning: no answer from the rig on {args.rig} yet; the page shows LINK LOST until it answers",
              file=sys.stderr)
    return link


def _interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt  # SIGTERM ends the pendant as Ctrl-C does: the link and the log are closed


def run(args: argparse.Namespace) -> int:
    spec = get_robot(args.robot)
    if not 0 <= args.port <= 65535:
        raise CliError(f"--port must be 0..65535, got {args.port}")
    save_dir = Path(args.save_dir)
    if not save_dir.is_dir():
        raise CliError(f"--save-dir {save_dir}: not a folder")
    if args.programs is not None and not Path(args.programs).is_dir():
        raise CliError(f"--programs {args.programs}: not a folder")
    tools = tool_settings(args)
    cell_check = load_cell_arg(args, spec)
    try:    # the 'ui' extra (viser draws the robot from its URDF with yourdfpy and trimesh)
        import trimesh  # noqa: F401
        import viser  # noqa: F401
        import yourdfpy  # noqa: F401
    except ModuleNotFoundError as exc:
        raise missing_extra(exc.name or "viser", "ui") from None
    from ..envs.pendant import Pendant, PendantConfig
    mode = joint_mode(args)
    config = PendantConfig(save_dir=save_dir, program_dir=Path(args.programs) if args.programs else None,
                           tools=tools["tools"], tool=tools["tool"],
                           cell=None if cell_check is None else cell_check.cell)
    joints = _rig_options(args, spec)
    check_live(args)
    _check_bindable(args.host, args.port)
    link = log = pendant = live = None
    try:
        from ..envs.telemetry.topics import PENDANT_TOPICS
        live = open_live(args, PENDANT_TOPICS)
        if joints is not None:
            link = _open_rig(args)
            log = open_log(args.rig_log, joints, "--rig-log", spec) if args.rig_log else None
        try:
            pendant = Pendant(spec, host=args.host, port=args.port, mode=mode, config=config,
                              low_graphics=args.low_graphics)
        except OSError as exc:
            raise CliError(f"cannot serve on {args.host}:{args.port}: {exc.strerror or exc}") from None
        if live is not None:
            pendant.core.attach_live(live)  # the pendant owns and closes it now
            live = None
        if link is not None:
            pendant.core.attach_rig(link, joints, log)  # the pendant owns and closes them now
            link = log = None
            print(f"armtwin: the simulated {spec.name} drives the rig on {args.rig} "
                  f"(robot joints {', '.join(str(j + 1) for j in joints)} -> rig motors "
                  f"{', '.join(str(k + 1) for k in range(len(joints)))})", file=sys.stderr)
    except BaseException:
        if pendant is not None:
            pendant.close()
        if log is not None:
            log.close()
        if link is not None:
            link.close()
        if live is not None:
            live.close()
        raise
    print(f"armtwin teach pendant for {spec.title}: open {pendant.url}  (Ctrl-C stops)", flush=True)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"armtwin: warning: serving on {args.host}: anyone who can reach this port can move the simulated robot",
              file=sys.stderr)
    old = signal.signal(signal.SIGTERM, _interrupt)
    try:
        pendant.serve_forever()  # closes the pendant, its rig link and log on the way out
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: the way to stop a server, not a failure
        print("armtwin: teach pendant stopped", file=sys.stderr)
    finally:
        signal.signal(signal.SIGTERM, old)
    return 0
