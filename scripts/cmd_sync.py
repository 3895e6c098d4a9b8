"""``armtwin sync``: the twin between a simulated robot and the servo rig over a serial port.

    armtwin sync --port PORT --robot R --joints 1,2 --direction virtual-to-real|real-to-virtual
                 [--program P] [--seconds S] [--samples N] --log twin.csv

virtual-to-real: the simulated joints — driven by ``--program`` (a G-code file: preflight,
then the runner's control samples from :func:`armtwin.envs.runner.control_trajectory`; the
run lasts the program plus a 1 s hold unless ``--seconds`` or ``--samples`` is given) or else by a built-in
smooth joint motion — command the rig. real-to-virtual: the rig's measured joints drive the simulated joints.
Every sample goes to the CSV log (flushed per row; Ctrl-C / SIGTERM close it cleanly).
``--samples N`` stops after exactly N samples (N rows); with ``--seconds`` too, whichever comes
first. The summary line counts rig frames lost (sequence gaps), corrupt frames dropped and
control ticks skipped by host stalls (those samples carry ``LATE`` in the log's Fault column).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from .cli import CliError, get_robot, output_file
from .cmd_run import _same_file, check_outputs


def register(sub) -> None:
    p = sub.add_parser("sync", help="twin sync with the servo rig over a serial port (CSV log)")
    p.add_argument("--port", required=True, help="pyserial URL: /dev/ttyUSB0, the emulator's pty, socket://host:port")
    p.add_argument("--robot", required=True, help="robot id (see `armtwin robots`)")
    p.add_argument("--joints", default="1,2", help="robot joints (1-based) mapped to rig motors 1,2 (default 1,2)")
    p.add_argument("--direction", default="virtual-to-real", help="virtual-to-real (default) or real-to-virtual")
    p.add_argument("--program", default=None, help="G-code program driving the simulated robot (virtual-to-real)")
    p.add_argument("--seconds", type=float, default=None, help="duration, s (default: until Ctrl-C)")
    p.add_argument("--samples", type=int, default=None,
                   help="stop after this many samples (log rows); with --seconds, whichever comes first")
    p.add_argument("--rate", type=float, default=500.0, help="loop rate, Hz (default 500)")
    p.add_argument("--baud", type=int, default=115200, help="serial speed, bit/s (default 115200)")
    p.add_argument("--log", required=True, help="CSV log path")
    p.add_argument("--connect-timeout", type=float, default=None, metavar="S",
                   help="give up (exit 1, nothing logged) when the rig has not answered within S seconds of opening "
                        "the port; 0: run on without an answer, every sample logged with LINK. Default: 5 s for a "
                        "sync without an end, 0 when --seconds, --samples or --program ends it "
                        "(an Arduino needs ~2 s to boot when its port opens)")
    p.add_argument("--power-test", action="store_true",
                   help="the published fault test: cut the rig's power at sample 3000, restore at 3150, cut at 3600, restore at 3750")
    p.add_argument("--joint-mode", default="kinematic",
                   help="joint model of the simulated robot: kinematic (default), hinge or articulation "
                        "(real-to-virtual with a dynamic model shows how the simulated joints lag the rig)")
    p.add_argument("--demo", action="store_true", help="real-to-virtual: ask the rig to move along its built-in sine")
    p.set_defaults(func=run)


def parse_joints(text: str, spec) -> tuple[int, ...]:
    """"1,2" -> (0, 1): 1 or 2 different revolute joints of ``spec`` (CliError on bad input)."""
    dof = spec.dof
    try:
        js = tuple(int(v) - 1 for v in text.split(","))
    except ValueError:
        raise CliError(f"--joints {text!r}: expected joint numbers such as 1,2") from None
    if not 1 <= len(js) <= 2 or len(set(js)) != len(js):
        raise CliError(f"--joints {text!r}: the rig has 2 motors; give 1 or 2 different joints")
    for j in js:
        if not 0 <= j < dof:
            raise CliError(f"--joints {text!r}: joint {j + 1} does not exist (1..{dof})")
        if spec.prismatic[j]:
            raise CliError(f"--joints: {spec.name} joint {j + 1} is prismatic; the rig's motors stand for revolute joints")
    return js


def _program_source(path: str, spec, period: float):
    """q(t) (rad, all joints) of a G-code program: preflight, then the runner's control samples.

    Returns (q(t), program duration in s). The last pose is held after the end.
    """
    try:
        from ..controllers.gcode.preflight import preflight
        from ..envs.runner import ControlTrajectory
    except ImportError as exc:
        raise CliError(f"--program needs the G-code runner (armtwin.envs.runner): {exc}") from None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as exc:
        raise CliError(f"cannot read program {path}: {exc.strerror or exc}") from None
    rep = preflight(text, spec)
    errors = rep.errors()
    if errors:
        raise CliError(f"{path}:{errors[0]} (the preflight found {len(errors)} error(s); see `armtwin check`)")
    if rep.plan is None or rep.q is None:
        raise CliError(f"{path}: the program has no motion")
    # streamed in chunks: a long program (or dwell) never needs memory in proportion to its time
    traj = ControlTrajectory(rep, spec, period)
    traj.check()
    return traj.q_at, float(traj.duration)


def run(args: argparse.Namespace) -> int:
    from ..envs.rig import (Direction, RigLink, RigLinkError, LinkConfig, SyncConfig, TwinLog, TwinSync,
                            smooth_motion)
    from ..controllers import rigproto as rp
    from ..envs.sim import PhysicsConfig, World
    spec = get_robot(args.robot)
    joints = parse_joints(args.joints, spec)
    try:
        direction = Direction.parse(args.direction)
    except ValueError as exc:
        raise CliError(f"--direction: {exc}") from None
    if args.seconds is not None and not args.seconds > 0:
        raise CliError(f"--seconds {args.seconds}: must be > 0")
    if args.samples is not None and args.samples < 1:
        raise CliError(f"--samples {args.samples}: must be >= 1")
    if not 1 <= args.rate <= 5000:
        raise CliError(f"--rate {args.rate}: must be between 1 and 5000 Hz")
    if args.connect_timeout is not None and not 0 <= args.connect_timeout <= 600:  # also refuses nan
        raise CliError(f"--connect-timeout {args.connect_timeout}: must be between 0 and 600 s")
    if args.program:
        check_outputs(args.program, {"--log": args.log})
    if _same_file(args.log, args.port):
        raise CliError(f"--log {args.log}: is the serial port itself")
    output_file(args.log, "--log")
    from ..envs.sim import JointMode
    try:
        joint_mode = JointMode.parse(args.joint_mode)
    except ValueError as exc:
        raise CliError(f"--joint-mode: {exc}") from None
    cfg = SyncConfig(joints, direction, rate_hz=args.rate, local_demo=args.demo)
    source = None  # checked before anything is opened
    seconds = args.seconds
    if direction is Direction.VIRTUAL_TO_REAL:
        if args.program:
            source, duration = _program_source(args.program, spec, 1.0 / args.rate)
            if seconds is None and args.samples is None:
                seconds = duration + 1.0  # the program, then a 1 s hold
        else:
            source = smooth_motion(spec, joints)
    elif args.program:
        raise CliError("--program drives the simulated robot: it needs --direction virtual-to-real")
    try:
        link = RigLink(args.port, LinkConfig(baudrate=args.baud)).open()
    except RigLinkError as exc:
        raise CliError(str(exc)) from None
    world = World(PhysicsConfig(dt=1.0 / args.rate))
    log = None
    stop = threading.Event()
    old = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        robot = world.add_robot(spec, mode=joint_mode)
        if source is not None and args.program:
            robot.reset(source(0.0))  # the program's start pose
        give_up = args.connect_timeout
        if give_up is None:  # a sync without an end must not wait forever for a rig that is not there
            give_up = 5.0 if seconds is None and args.samples is None else 0.0
        wait = give_up if give_up > 0 else 3.0
        if link.request_hello(timeout=wait) is None:  # an Arduino reboots when its port opens
            if link.stats.dropped_by_kind.get("version"):
                raise CliError(f"{args.port}: the rig speaks another protocol version (this host speaks "
                               f"version {rp.PROTOCOL_VERSION}; see docs/PROTOCOL.md)")
            if give_up > 0 and link.stats.states_rx == 0:
                print(f"armtwin: error: {args.port}: no answer from the rig within {wait:g} s (is it powered, "
                      f"on this port, at {args.baud} baud?); nothing was logged", file=sys.stderr)
                return 1
            print(f"armtwin: warning: no HELLO answer from {args.port}; continuing (the log's Fault column will tell)",
                  file=sys.stderr)
        log = TwinLog(args.log, joints)
        sync = TwinSync(robot, link, cfg, log)
        sched = {3000: False, 3150: True, 3600: False, 3750: True} if args.power_test else None
        last = {"t": -1.0}

        def progress(s):
            if s.time - last["t"] >= 1.0:
                last["t"] = s.time
                err = " ".join(f"{e:+7.2f}" for e in s.error_deg)
                print(f"\r  t={s.time:7.1f} s  STT={s.stt:7d}  ΔE deg [{err}]  latency {s.latency_ms:5.1f} ms  "
                      f"{s.faults.names():12s}", end="", file=sys.stderr, flush=True)

        rep = sync.run(seconds, source=source, stop=stop, power_schedule=sched, max_samples=args.samples,
                       on_sample=progress)
        print(file=sys.stderr)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if log is not None:
            log.close()
        link.close()
        world.close()
    st = link.stats
    p50 = st.latencies_ms.percentile(50)
    print(f"samples {rep.samples}  rate {rep.rate_hz:.1f} Hz  latency p50 {p50:.2f} ms  lost frames {st.lost}  "
          f"corrupt frames dropped {st.dropped}  skipped ticks {rep.ticks_skipped} in {rep.stalls} stalls  "
          f"reconnects {st.reconnects}/{st.reconnect_attempts} attempts"
          + ("  (interrupted)" if rep.interrupted else ""))
    for e in rep.events:
        print(f"  fault {e.fault:8s} {'ON ' if e.on else 'off'} at STT {e.stt} (t = {e.time:.3f} s)")
    print(args.log)
    # A twin that never heard the rig, or lost it and never got it back, is a failed run.
    link_down = False
    for e in rep.events:
        if e.fault == "LINK":
            link_down = e.on
    if st.states_rx == 0 or link_down:
        why = "no state ever came back from the rig" if st.states_rx == 0 else "the link to the rig was lost and not restored"
        print(f"armtwin: error: {args.port}: {why} (the log keeps every sample: {args.log})", file=sys.stderr)
        return 1
    return 0
