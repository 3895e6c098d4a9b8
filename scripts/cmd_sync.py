"""``armtwin sync``: the twin between a simulated robot and the servo rig over a serial port.

    armtwin sync --port PORT --robot R --joints 1,2 --direction virtual-to-real|real-to-virtual
                 [--program P] [--seconds S] [--samples N] --log twin.csv

virtual-to-real: the simulated joints — driven by ``--program`` (a G-code file compiled as
``armtwin run`` compiles it, :func:`armtwin.controllers.gcode.compile_program`; a program that
cannot run exits 1, as in ``run`` and ``check``; the run lasts the program plus a 1 s hold unless ``--seconds`` or ``--samples`` is given) or else by a built-in
smooth joint motion (:func:`armtwin.envs.rig.smooth_motion`: the first joint to ±30°, the second to
∓18° around home, less where a range is smaller; 1.5 s moves, 1 s holds; the start message says
which) — command the rig. The rig is never sent a step: no target goes out before its first
state, then the rig and the simulated joints ramp from the rig's *measured* joints to the first
target within a quarter of each joint's speed limit (reached in at most 0.25 s) — the line
"ramping the rig from its measured joints …" says from where, to where and how long — and only
then does the motion start (``--seconds`` counts from there). real-to-virtual: the rig's
measured joints drive the simulated joints (``--demo``: the rig moves along its own built-in sine).
Every sample goes to the CSV log (a ``.csv`` name; every row flushed as it is written, so a
SIGKILL loses at most the row being written). Ctrl-C or SIGTERM ends the run cleanly — the log
complete, the rig idle, its power restored if the power test had cut it, the summary printed —
with exit code 130 (SIGINT) or 143 (SIGTERM); a rig that never answered or whose link was lost
and not restored gives exit code 1.
``--samples N`` stops after exactly N samples (N rows); with ``--seconds`` too, whichever comes
first. The summary line counts rig frames lost (sequence gaps), corrupt frames dropped and
control ticks skipped by host stalls (those samples carry ``LATE`` in the log's Fault column).
``--motor-params FILE [FILE2]`` (virtual-to-real) runs a virtual rig beside the real one — the
identified motors (``armtwin rig identify``) in the firmware's loop on the host
(:class:`armtwin.controllers.virtual_rig.VirtualRig`), started at the rig's first measured joints
and sent the same targets and power commands — and the summary says how well it predicted what
the rig reported (RMS and max, deg, per joint).
``--power-test`` needs a run of at least 3751 samples (its last restore is sent before sample
3750); a shorter ``--samples`` or ``--seconds`` is refused, and a run that ends early anyway
(Ctrl-C, host stalls) says so and restores the rig's power.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading

from .cli import CliError, get_robot
from .options import (BAUD_MAX, BAUD_MIN, add_joint_mode, add_live_options, add_motor_params, add_publish_options,
                      check_baud, check_live, check_log_file, check_outputs, check_publish, joint_mode, motor_params,
                      open_live, open_log, open_publisher, parse_joints, print_publish_report)

#: the published power test: {sample number: power on?}
POWER_TEST = {3000: False, 3150: True, 3600: False, 3750: True}
#: samples a run needs for the whole power test (the last POWER goes out just before sample 3750)
POWER_TEST_SAMPLES = max(POWER_TEST) + 1
#: longest --seconds, s (leave it out to run until Ctrl-C)
SECONDS_MAX = 7 * 86400.0


def register(sub) -> None:
    p = sub.add_parser("sync", help="twin sync with the servo rig over a serial port (CSV log)")
    p.add_argument("--port", required=True, help="pyserial URL: /dev/ttyUSB0, the emulator's pty, socket://host:port")
    p.add_argument("--robot", required=True, help="robot id (see `armtwin robots`)")
    p.add_argument("--joints", default="1,2", help="robot joints (1-based) mapped to rig motors 1,2 (default 1,2)")
    p.add_argument("--direction", default="virtual-to-real", help="virtual-to-real (default) or real-to-virtual")
    p.add_argument("--program", default=None,
                   help="G-code program driving the simulated robot (virtual-to-real). Without it the simulated "
                        "joints follow a built-in motion: the first to ±30°, the second to ∓18° around home (less "
                        "where a joint's range is smaller), 1.5 s moves and 1 s holds, repeated")
    p.add_argument("--seconds", type=float, default=None, help="duration, s (default: until Ctrl-C; at most a week)")
    p.add_argument("--samples", type=int, default=None,
                   help="stop after this many samples (log rows); with --seconds, whichever comes first")
    p.add_argument("--rate", type=float, default=500.0, help="loop rate, Hz (default 500)")
    p.add_argument("--baud", type=int, default=115200, help=f"serial speed, {BAUD_MIN}..{BAUD_MAX} bit/s (default 115200)")
    p.add_argument("--log", required=True,
                   help="twin log: a .csv name (CSV rows), or a .mcap name (ROS 2 messages for Foxglove and ros2 bag, "
                        "docs/TELEMETRY.md); an existing file is replaced")
    add_publish_options(p)
    add_live_options(p)
    p.add_argument("--connect-timeout", type=float, default=None, metavar="S",
                   help="give up (exit 1, nothing logged) when the rig has not answered within S seconds of opening "
                        "the port; 0: run on without an answer, every sample logged with LINK. Default: 5 s for a "
                        "sync without an end, 0 when --seconds, --samples or --program ends it "
                        "(an Arduino needs ~2 s to boot when its port opens)")
    p.add_argument("--power-test", action="store_true",
                   help="the published fault test: cut the rig's power at sample 3000, restore at 3150, cut at 3600, "
                        f"restore at 3750 (the run needs at least {POWER_TEST_SAMPLES} samples)")
    add_joint_mode(p, what="joint model of the simulated robot (real-to-virtual with a dynamic model shows how "
                            "the simulated joints lag the rig)")
    p.add_argument("--demo", action="store_true",
                   help="with --direction real-to-virtual: ask the rig to move along its built-in sine")
    add_motor_params(p, "virtual-to-real: run a virtual rig with these motors beside the real one and report how "
                        "well it predicts what the rig reports")
    p.set_defaults(func=run)


def motion_text(spec, joints, motion) -> str:
    """The built-in motion in words: ``J1 ±30°, J2 ∓18° around home`` (amplitudes as reduced to the ranges)."""
    import numpy as np
    first_hold = np.degrees(motion(1.5) - np.asarray(spec.home, dtype=float))  # the +A level (see smooth_motion)
    parts = [f"J{j + 1} {'±' if first_hold[j] >= 0 else '∓'}{abs(first_hold[j]):.0f}°" for j in joints]
    return f"{', '.join(parts)} around home, 1.5 s moves and 1 s holds"


def _check_power_test(args, seconds: float | None) -> None:
    """CliError when ``--power-test`` cannot complete within ``--samples`` / the run's duration."""
    need = POWER_TEST_SAMPLES
    what = (f"--power-test cuts the rig's power at samples 3000 and 3600 and restores it at 3150 and 3750: "
            f"it needs a run of at least {need} samples")
    if args.samples is not None and args.samples < need:
        raise CliError(f"{what}; --samples {args.samples} stops before")
    if seconds is not None and seconds * args.rate < need:
        got = (f"--seconds {args.seconds:g}" if args.seconds is not None
               else f"the program's {seconds:g} s (with its 1 s hold)")
        raise CliError(f"{what} (at --rate {args.rate:g}: --seconds of at least {math.ceil(need / args.rate * 10) / 10:g}); "
                       f"{got} gives {int(seconds * args.rate)}")


def _program_source(path: str, spec, period: float):
    """q(t) (rad, all joints) of a G-code program, compiled as ``armtwin run`` compiles it
    (:func:`armtwin.controllers.gcode.compile_program`: preflight, then the control trajectory).

    Returns (q(t), program duration in s). The last pose is held after the end. A program that
    cannot run is a CliError with exit code 1, as ``armtwin run`` and ``armtwin check`` give.
    """
    from ..controllers.gcode import ControlTrajectoryError, compile_program
    from .cmd_check import EXIT_FAULTY, read_program
    data = read_program(path)
    try:
        program = compile_program(data, spec, period=period)
    except ControlTrajectoryError as exc:
        raise CliError(f"{path}:{exc}", EXIT_FAULTY) from None
    if program.trajectory is None:
        raise CliError(f"{path}: {program.refusal}", EXIT_FAULTY)
    # streamed in chunks: a long program (or dwell) never needs memory in proportion to its time
    return program.trajectory.q_at, float(program.trajectory.duration)


def run(args: argparse.Namespace) -> int:
    from ..controllers.virtual_rig import VirtualRig
    from ..envs.rig.link import LinkConfig, RigLink, RigLinkError
    from ..envs.rig.log import TeeLog
    from ..envs.rig.sync import Direction, RigNoAnswer, SyncConfig, TwinSync, connect, smooth_motion
    from ..envs.sim import PhysicsConfig, World
    from .cli import EXIT_INTERRUPTED, EXIT_TERMINATED
    spec = get_robot(args.robot)
    joints = parse_joints(args.joints, spec)
    try:
        direction = Direction.parse(args.direction)
    except ValueError as exc:
        raise CliError(f"--direction: {exc}") from None
    if args.seconds is not None and not (0 < args.seconds <= SECONDS_MAX):  # also refuses nan and inf
        raise CliError(f"--seconds {args.seconds:g}: must be more than 0 and at most {SECONDS_MAX:g} s "
                       f"(leave it out to run until Ctrl-C)")
    if args.samples is not None and args.samples < 1:
        raise CliError(f"--samples {args.samples}: must be >= 1")
    if not 1 <= args.rate <= 5000:
        raise CliError(f"--rate {args.rate:g}: must be between 1 and 5000 Hz")
    check_baud(args.baud)
    if args.connect_timeout is not None and not 0 <= args.connect_timeout <= 600:  # also refuses nan
        raise CliError(f"--connect-timeout {args.connect_timeout}: must be between 0 and 600 s")
    if args.demo and direction is not Direction.REAL_TO_VIRTUAL:
        raise CliError("--demo makes the rig move by itself: it needs --direction real-to-virtual")
    if args.program and direction is not Direction.VIRTUAL_TO_REAL:
        raise CliError("--program drives the simulated robot: it needs --direction virtual-to-real")
    if args.program:
        check_outputs(args.program, {"--log": args.log})
    check_log_file(args.log, "--log", args.port)
    fits = motor_params(args, len(joints))
    if fits is not None and direction is not Direction.VIRTUAL_TO_REAL:
        raise CliError("--motor-params predicts what the rig does with the targets it is sent: it needs "
                       "--direction virtual-to-real")
    target = check_publish(args)
    check_live(args)
    mode = joint_mode(args)
    cfg = SyncConfig(joints, direction, rate_hz=args.rate, local_demo=args.demo)
    source = None  # checked before anything is opened
    seconds = args.seconds
    start_msg = None
    if direction is Direction.VIRTUAL_TO_REAL:
        if args.program:
            source, duration = _program_source(args.program, spec, 1.0 / args.rate)
            if seconds is None and args.samples is None:
                seconds = duration + 1.0  # the program, then a 1 s hold
            start_msg = f"the simulated {spec.name} runs {args.program} ({duration:.1f} s) and drives the rig"
        else:
            source = smooth_motion(spec, joints)
            start_msg = (f"no --program: the simulated {spec.name} follows the built-in motion "
                         f"({motion_text(spec, joints, source)}) and drives the rig")
    else:
        start_msg = (f"the rig drives the simulated {spec.name}"
                     + (" (the rig moves along its built-in sine)" if args.demo else ""))
    if args.power_test:
        _check_power_test(args, seconds)
    give_up = args.connect_timeout
    if give_up is None:  # a sync without an end must not wait forever for a rig that is not there
        give_up = 5.0 if seconds is None and args.samples is None else 0.0
    try:
        link = RigLink(args.port, LinkConfig(baudrate=args.baud)).open()
    except RigLinkError as exc:
        raise CliError(str(exc)) from None
    world = World(PhysicsConfig(dt=1.0 / args.rate))
    log = None
    sync = None
    publisher = None
    stopped_by: list[int] = []  # the signal that ended the run
    stop = threading.Event()
    old: dict = {}
    try:
        robot = world.add_robot(spec, mode=mode)
        if source is not None:
            robot.reset(source(0.0))  # the program's start pose (the ramp brings the rig there)
        try:
            if connect(link, give_up, bounded=seconds is not None or args.samples is not None) is None:
                print(f"armtwin: warning: no HELLO answer from {args.port}; continuing (the log's Fault column will "
                      f"tell; no target is sent before the rig's first state)", file=sys.stderr)
        except RigLinkError as exc:  # no answer (give up) or another protocol version
            code = 1 if isinstance(exc, RigNoAnswer) else 2
            print(f"armtwin: error: {exc}; nothing was logged", file=sys.stderr)
            return code
        def on_signal(signum, _frame):
            stopped_by.append(signum)
            stop.set()

        # from here on Ctrl-C / SIGTERM end the run at the next sample: the log closed, the summary printed
        old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        from ..envs.telemetry.topics import TWIN_TOPICS
        log = open_log(args.log, joints, "--log", spec, live=open_live(args, TWIN_TOPICS))
        publisher = open_publisher(target, joints, args.publish_hz)
        sync = TwinSync(robot, link, cfg, TeeLog(log, publisher) if publisher is not None else log,
                        virtual_rig=None if fits is None else VirtualRig(fits))
        sched = dict(POWER_TEST) if args.power_test else None
        print(f"armtwin: sync: {start_msg}; logging to {args.log}"
              + (f", publishing {args.publish_hz:g} records/s to {target.url}" if target else ""), file=sys.stderr)
        last = {"t": -1.0}

        def progress(s):
            if s.time - last["t"] >= 1.0:
                last["t"] = s.time
                err = " ".join(f"{e:+7.2f}" for e in s.error_deg)
                print(f"\r  t={s.time:7.1f} s  STT={s.stt:7d}  ΔE deg [{err}]  latency {s.latency_ms:5.1f} ms  "
                      f"{s.faults.names():12s}", end="", file=sys.stderr, flush=True)

        def on_ramp(r):
            print(f"\r\033[Karmtwin: sync: {r.describe()}", file=sys.stderr, flush=True)

        rep = sync.run(seconds, source=source, stop=stop, power_schedule=sched, max_samples=args.samples,
                       on_sample=progress, on_ramp=on_ramp)
        print(file=sys.stderr)
        if args.power_test and len(rep.power_commands) < len(POWER_TEST):
            print(f"armtwin: warning: the power test was cut short at sample {sync.stt}: {len(rep.power_commands)} "
                  f"of {len(POWER_TEST)} power commands sent", file=sys.stderr)
        if rep.power_restored:
            print("armtwin: warning: the rig's power was cut; it has been restored", file=sys.stderr)
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
        try:
            if log is not None:
                log.close()
        finally:
            print_publish_report(target, publisher)
            link.close()
            world.close()
    st = link.stats
    p50 = st.latencies_ms.percentile(50)
    print(f"samples {rep.samples}  rate {rep.rate_hz:.1f} Hz  latency p50 {p50:.2f} ms  lost frames {st.lost}  "
          f"corrupt frames dropped {st.dropped}  skipped ticks {rep.ticks_skipped} in {rep.stalls} stalls  "
          f"reconnects {st.reconnects}/{st.reconnect_attempts} attempts"
          + (f"  rig reboots {st.reboots}" if st.reboots else "")
          + ("  (interrupted)" if rep.interrupted else ""))
    for e in rep.events:
        print(f"  fault {e.fault:8s} {'ON ' if e.on else 'off'} at STT {e.stt} (t = {e.time:.3f} s)")
    if sync is not None and sync.virtual_rig is not None:
        parts = [f"J{j + 1} RMS {r:.3f} deg, max {m:.3f} deg ({n} samples)"
                 for j, (r, m, n) in zip(joints, sync.virtual_rig.errors())]
        print(f"virtual rig ({' and '.join(args.motor_params)}): predicted - measured: {'; '.join(parts)}")
    print(args.log)
    if stopped_by:  # Ctrl-C or SIGTERM: everything written is closed and kept (README: exit codes)
        return EXIT_TERMINATED if stopped_by[0] == signal.SIGTERM else EXIT_INTERRUPTED
    # A twin that never heard the rig, or lost it and never got it back, is a failed run.
    why = rep.link_failure(st.states_rx)
    if why:
        print(f"armtwin: error: {args.port}: {why} (the log keeps every sample: {args.log})", file=sys.stderr)
        return 1
    return 0
