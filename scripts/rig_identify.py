"""``armtwin rig identify``: drive the rig through the identification excitation, log it, fit its motors.

    armtwin rig identify --port PORT --robot R [--joints 1,2] [--seconds 60] --log identify.csv
                         [--save motor.toml] [--max-speed DEG/S] [--max-accel DEG/S2] [--amplitude DEG]

What the rig is asked to do, per motor (:func:`armtwin.controllers.ident.excitation`): two passes
(the fitted part, then the checked part), each a chirp (0.2 → 3 Hz), ramps at ±5/15/60 °/s, small
steps, and coast-downs with the motor supply cut for up to 1 s at speed (``POWER`` messages,
``--power-cuts``; the rig then coasts on friction and is caught again by its position loop when
the supply returns). Everything stays within ``--amplitude`` of a centre, at or below the joint's
speed limit (``--max-speed``, default: the robot joint's) and acceleration limit (``--max-accel``,
default: that speed reached in 0.05 s), sample to sample. The centre is where the rig *is* when it
first reports, moved just enough that the whole excitation fits in the joint's range; the rig is
ramped there from its measured position (``armtwin sync``'s ramp, a quarter of the speed limit)
— never a step — and the excitation starts after the ramp.

The run is logged as ``armtwin sync --log`` logs (a twin log), from the ramp on it is fitted with
:func:`armtwin.controllers.ident.fit_motor` on the first pass and checked on the second, and the
fitted motor of each joint is written as a parameter file (``--save``, default the log's name
with ``.toml``; ``_j1``, ``_j2`` … added with two joints) that ``armtwin rig emulate
--motor-params`` and ``armtwin sync --motor-params`` read. ``--no-fit`` only drives and logs.

Exit codes: 0 identified (or logged, with ``--no-fit``); 1 the rig did not answer, or the link
was lost; 2 bad input (options, the ``fit`` extra missing); 130/143 interrupted by Ctrl-C /
SIGTERM (the log is kept, the rig's power restored, nothing fitted).
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .cli import CliError, add_json_flag, get_robot, missing_extra, output_file, print_json
from .options import BAUD_MAX, BAUD_MIN, check_baud, check_log_file, open_log, parse_joints

if TYPE_CHECKING:
    import numpy as np

#: the default acceleration limit reaches the speed limit in this long, s
ACCEL_TIME_S = 0.05
#: the rig's motor does 145 rpm = 870 °/s at 12 V; no excitation asks for more than this, °/s
RIG_SPEED_MAX = 600.0
#: seconds an identification run may last
SECONDS_MIN, SECONDS_MAX = 20.0, 600.0


def register(rs) -> None:
    """Add ``identify`` to the ``armtwin rig`` actions ``rs``."""
    p = rs.add_parser("identify", help="drive the rig through a safe excitation, log it and fit its motor model")
    p.add_argument("--port", required=True, help="pyserial URL: /dev/ttyUSB0, the emulator's pty, socket://host:port")
    p.add_argument("--robot", required=True, help="robot id whose joints the rig's motors stand for (their ranges "
                                                  "and speed limits bound the excitation)")
    p.add_argument("--joints", default="1,2", help="robot joints (1-based) mapped to rig motors 1,2 (default 1,2)")
    p.add_argument("--seconds", type=float, default=60.0,
                   help=f"length of the excitation, s ({SECONDS_MIN:g} to {SECONDS_MAX:g}, default 60); the ramp "
                        f"to its start comes before")
    p.add_argument("--rate", type=float, default=500.0, help="sample rate, Hz (50 to 2000, default 500)")
    p.add_argument("--baud", type=int, default=115200, help=f"serial speed, {BAUD_MIN}..{BAUD_MAX} bit/s (default 115200)")
    p.add_argument("--amplitude", type=float, default=45.0, metavar="DEG",
                   help="largest excursion from the centre, deg (1 to 90, default 45; less where a range is smaller)")
    p.add_argument("--max-speed", type=float, default=None, metavar="DEG/S",
                   help=f"speed limit, deg/s (default: each joint's, at most {RIG_SPEED_MAX:g})")
    p.add_argument("--max-accel", type=float, default=None, metavar="DEG/S2",
                   help=f"acceleration limit, deg/s² (default: the speed limit reached in {ACCEL_TIME_S:g} s)")
    p.add_argument("--power-cuts", type=int, default=3, metavar="N",
                   help="coast-downs with the motor supply cut in the fitted pass (0 to 5, default 3; the checked "
                        "pass has one when N > 0). Without them the fit cannot separate inertia, friction and "
                        "motor constant")
    p.add_argument("--log", required=True, help="twin log of the run (a .csv name; an existing file is replaced)")
    p.add_argument("--save", default=None, metavar="FILE.toml",
                   help="fitted motor parameter file (default: the log's name with .toml; FILE_j1.toml, "
                        "FILE_j2.toml with two joints)")
    p.add_argument("--generations", type=int, default=60, metavar="N",
                   help="generations of the fit's derivative-free search (0 to 500, default 60)")
    p.add_argument("--no-fit", action="store_true", help="drive and log only (fit later with `armtwin fit LOG`)")
    add_json_flag(p)
    p.set_defaults(func=run)


@dataclass(frozen=True)
class JointPlan:
    """The excitation of one rig motor.

    Attributes:
        joint: the robot joint, 0-based.
        measured_deg: where the rig reported it before anything moved, deg.
        centre_deg: the excitation's centre, deg.
        amplitude_deg: its largest excursion from the centre, deg.
        max_speed_deg_s: its speed limit, deg/s.
        max_accel_deg_s2: its acceleration limit, deg/s².
    """

    joint: int
    measured_deg: float
    centre_deg: float
    amplitude_deg: float
    max_speed_deg_s: float
    max_accel_deg_s2: float


def plan_joint(spec, j: int, measured_deg: float, amplitude_deg: float, max_speed: float | None,
               max_accel: float | None) -> JointPlan:
    """The excitation's limits and centre for robot joint ``j``: the amplitude within 45 % of the
    range, the centre the measured angle moved just enough that centre ± amplitude fits within
    the range (less 5 % at each end)."""
    lo, hi = math.degrees(spec.lower[j]), math.degrees(spec.upper[j])
    margin = 0.05 * (hi - lo)
    amp = min(amplitude_deg, 0.45 * (hi - lo))
    centre = min(max(measured_deg, lo + margin + amp), hi - margin - amp)
    v = min(math.degrees(spec.max_velocity[j]), RIG_SPEED_MAX)
    if max_speed is not None:
        v = min(v, max_speed)
    a = v / ACCEL_TIME_S if max_accel is None else max_accel
    return JointPlan(j, measured_deg, centre, amp, v, a)


def _check(args: argparse.Namespace) -> None:
    if not (math.isfinite(args.seconds) and SECONDS_MIN <= args.seconds <= SECONDS_MAX):
        raise CliError(f"--seconds {args.seconds:g}: must be from {SECONDS_MIN:g} to {SECONDS_MAX:g} s")
    if not (50.0 <= args.rate <= 2000.0):
        raise CliError(f"--rate {args.rate:g}: must be from 50 to 2000 Hz")
    check_baud(args.baud)
    if not (1.0 <= args.amplitude <= 90.0):
        raise CliError(f"--amplitude {args.amplitude:g}: must be from 1 to 90 deg")
    if args.max_speed is not None and not (1.0 <= args.max_speed <= RIG_SPEED_MAX):
        raise CliError(f"--max-speed {args.max_speed:g}: must be from 1 to {RIG_SPEED_MAX:g} deg/s")
    if args.max_accel is not None and not (10.0 <= args.max_accel <= 1e5):
        raise CliError(f"--max-accel {args.max_accel:g}: must be from 10 to 100000 deg/s²")
    if not (0 <= args.power_cuts <= 5):
        raise CliError(f"--power-cuts {args.power_cuts}: must be from 0 to 5")
    if not (0 <= args.generations <= 500):
        raise CliError(f"--generations {args.generations}: must be from 0 to 500")


def save_paths(save: str, labels: list[str]) -> list[Path]:
    """The parameter file of each joint: ``save`` itself for one, ``<stem>_<label>.toml`` for several."""
    p = Path(save)
    return [p] if len(labels) == 1 else [p.with_name(f"{p.stem}_{label}{p.suffix}") for label in labels]


def run(args: argparse.Namespace) -> int:
    _check(args)
    spec = get_robot(args.robot)
    joints = parse_joints(args.joints, spec)
    check_log_file(args.log, "--log", args.port)
    save = args.save or str(Path(args.log).with_suffix(".toml"))
    output_file(save, "--save", (".toml",))
    if not args.no_fit:     # before the rig moves: a missing extra must not waste the run
        try:
            import numba  # noqa: F401
            import scipy  # noqa: F401
        except ModuleNotFoundError as exc:
            raise missing_extra(exc.name or "scipy", "fit") from None
    from ..envs.rig.link import LinkConfig, RigLink, RigLinkError
    from ..envs.rig.sync import RigNoAnswer, connect
    from .cli import EXIT_INTERRUPTED, EXIT_TERMINATED
    say = (lambda *a: None) if args.json else (lambda msg: print(f"armtwin: identify: {msg}", file=sys.stderr, flush=True))
    settings = Settings(args.seconds, args.rate, args.amplitude, args.max_speed, args.max_accel, args.power_cuts)
    try:
        link = RigLink(args.port, LinkConfig(baudrate=args.baud)).open()
    except RigLinkError as exc:
        raise CliError(str(exc)) from None
    log = None
    stopped_by: list[int] = []
    stop = threading.Event()
    old: dict = {}

    def on_signal(signum, _frame):
        stopped_by.append(signum)
        stop.set()

    try:
        try:
            connect(link, 5.0, bounded=True)
        except RigLinkError as exc:
            print(f"armtwin: error: {exc}; nothing was logged", file=sys.stderr)
            return 1 if isinstance(exc, RigNoAnswer) else 2
        old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        log = open_log(args.log, joints, "--log")
        try:
            _, rep, times = drive(link, spec, joints, settings, log, stop=stop, say=say)
        except RigLinkError as exc:
            print(f"armtwin: error: {args.port}: {exc}; nothing was logged", file=sys.stderr)
            return 1
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
        if log is not None:
            log.close()
        link.close()
    if rep.power_restored:
        say("the rig's power was cut when the run ended; it has been restored")
    if stopped_by:
        print(f"armtwin: identify: interrupted; the log so far is kept in {args.log}, nothing fitted", file=sys.stderr)
        return EXIT_TERMINATED if stopped_by[0] == signal.SIGTERM else EXIT_INTERRUPTED
    why = rep.link_failure(link.stats.states_rx)
    if why:
        print(f"armtwin: error: {args.port}: {why} (the log keeps every sample: {args.log})", file=sys.stderr)
        return 1
    if args.no_fit:
        if args.json:
            print_json({"log": args.log, "samples": rep.samples, "fitted": False, "ramp": _ramp_dict(rep.ramp)})
        else:
            print(args.log)
        return 0
    from ..controllers.ident import write_params_file
    from .cmd_fit import print_report, report_dict
    try:
        reports = fit_log(args.log, rep, settings, args.generations, times=times, say=say)
    except ValueError as exc:
        raise CliError(f"{args.log}: {exc}", 1) from None
    timing = run_timing(args.log, rep, times.received, times.sent)
    paths = save_paths(save, [r.label for r in reports])
    for r, path in zip(reports, paths):
        write_params_file(path, r.fitted, comment=f"identified by armtwin rig identify on {args.port}, joint "
                                                  f"{r.label} (log {args.log})")
    if args.json:
        print_json({"log": args.log, "samples": rep.samples, "fitted": True, "ramp": _ramp_dict(rep.ramp),
                    "joints": [report_dict(r) for r in reports], "saved": [str(p) for p in paths],
                    "timing": {**asdict(timing), "disturbed": timing.disturbed}})
        return 0
    for r in reports:
        print_report(r)
    print(f"timing: {timing.describe()}")
    for p in paths:
        print(f"wrote {p}")
    return 0


@dataclass(frozen=True)
class Settings:
    """The excitation of an identification run (the command's options, SI-free: s, Hz, deg).

    Attributes:
        seconds: the excitation's length, s.
        rate: sample rate, Hz.
        amplitude: largest excursion from the centre, deg.
        max_speed: speed limit, deg/s (None: each joint's, at most :data:`RIG_SPEED_MAX`).
        max_accel: acceleration limit, deg/s² (None: the speed limit in :data:`ACCEL_TIME_S`).
        power_cuts: coast-downs in the fitted pass.
    """

    seconds: float = 60.0
    rate: float = 500.0
    amplitude: float = 45.0
    max_speed: float | None = None
    max_accel: float | None = None
    power_cuts: int = 3


def drive(link, spec, joints, settings: Settings, log, *, stop: threading.Event | None = None,
          say=lambda msg: None):
    """Drive the rig on ``link`` (open, answering) through the excitation, logging every sample.

    Waits up to 5 s for the rig's first state, plans each joint from it (:func:`plan_joint`) and
    runs :meth:`~armtwin.envs.rig.TwinSync.run` with the excitation as its source (the ramp from the
    measured joints first) and the power cuts at the excitation's times.

    Returns:
        (the joints' plans, the run's :class:`~armtwin.envs.rig.SyncReport`, its :class:`RunTimes`).

    Raises:
        RigLinkError: no state came within 5 s (nothing logged).
    """
    import numpy as np

    from ..controllers.ident import excitation
    from ..envs.rig.link import RigLinkError
    from ..envs.rig.sync import SyncConfig, TwinSync
    from ..envs.sim import PhysicsConfig, World
    with World(PhysicsConfig(dt=1.0 / settings.rate)) as world:
        robot = world.add_robot(spec)
        sync = TwinSync(robot, link, SyncConfig(tuple(joints), rate_hz=settings.rate))
        sync.start()
        deadline = time.monotonic() + 5.0
        while (state := link.latest()) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if state is None:
            raise RigLinkError("the rig answered but sent no state within 5 s")
        plans = [plan_joint(spec, j, float(state.degrees[k]), settings.amplitude, settings.max_speed, settings.max_accel)
                 for k, j in enumerate(joints)]
        excs = [excitation(settings.seconds, rate_hz=settings.rate, amplitude_deg=p.amplitude_deg,
                           max_speed_deg_s=p.max_speed_deg_s, max_accel_deg_s2=p.max_accel_deg_s2,
                           power_cuts=settings.power_cuts) for p in plans]
        power = {float(excs[0].t[i]): on for i, on in excs[0].power.items()}  # the supply is the rig's: one schedule
        home = np.asarray(spec.home, dtype=float).copy()

        def source(t: float) -> np.ndarray:
            q = home.copy()
            for p, e in zip(plans, excs):
                q[p.joint] = math.radians(p.centre_deg + float(np.interp(t, e.t, e.angle)))
            return q

        robot.reset(source(0.0))
        for p in plans:
            say(f"J{p.joint + 1}: measured {p.measured_deg:+.1f}°, excitation {p.centre_deg:+.1f}° ± "
                f"{p.amplitude_deg:.1f}°, at most {p.max_speed_deg_s:.0f}°/s and {p.max_accel_deg_s2:.0f}°/s²")
        sync.log = log
        say(f"driving the rig for {settings.seconds:g} s ({len(power) // 2} power cuts); logging to {log.path}")
        received: list[float] = []
        rig_us: list[float] = []
        sent: list[bool] = []
        stamps: list[float] = []
        skipped = [link.stats.targets_skipped]
        link.last_target_stamp_us = None

        def on_sample(s) -> None:
            st = s.rig_state
            received.append(math.nan if st is None else st.t - sync.clock_origin)
            rig_us.append(math.nan if st is None else float(st.t_us))
            sent.append(link.stats.targets_skipped == skipped[0])  # the link skipped this sample's targets?
            skipped[0] = link.stats.targets_skipped
            stamp = link.last_target_stamp_us  # this sample's timed target (None: none sent, or untimed)
            stamps.append(math.nan if stamp is None else float(stamp))
            link.last_target_stamp_us = None

        rep = sync.run(settings.seconds, source=source, stop=stop, source_power=power,
                       on_ramp=lambda r: say(r.describe()), on_sample=on_sample)
    from ..controllers import rigproto as rp
    wire = rp.wire_bytes(rp.MsgType.JOINT_STATES) * 10.0 / link.config.baudrate
    stamp_us = np.array(stamps) if np.isfinite(stamps).any() else None
    return plans, rep, RunTimes(np.array(received), np.array(rig_us), wire, np.array(sent, dtype=bool), stamp_us)


@dataclass(frozen=True)
class RunTimes:
    """The timing of an identification run that its log does not keep, one value per log row.

    Attributes:
        received: when each sample's rig state reached the host, s on the samples' clock (NaN:
            none yet).
        rig_us: that state's time on the rig's own clock, µs (NaN: none).
        state_wire_s: a state frame's time on the wire, s.
        sent: whether each sample's targets went out (the link skips targets while its wire is still
            busy after a host stall; the log keeps every sample's row).
        stamp_us: timed targets (firmware 2.1): the time on the rig's clock each sample's target
            was stamped for, µs (NaN: not sent, or untimed); None: untimed run.
    """

    received: np.ndarray
    rig_us: np.ndarray
    state_wire_s: float
    sent: np.ndarray
    stamp_us: np.ndarray | None = None


#: a run whose states' age at the samples varies by more than this (s, standard deviation) had its
#: timing disturbed: a 500 Hz state stream alone gives 0.6 ms
AGE_SD_MAX = 1.5e-3


@dataclass(frozen=True)
class Timing:
    """How well the host kept time during an identification run (the fit assumes it did).

    Attributes:
        age_mean_ms, age_sd_ms, age_max_ms: age of the state each sample showed (sample time −
            the state's arrival), ms.
        ticks_skipped: control ticks the sync loop skipped after host stalls.
    """

    age_mean_ms: float
    age_sd_ms: float
    age_max_ms: float
    ticks_skipped: int
    targets_skipped: int = 0

    @property
    def disturbed(self) -> bool:
        return self.ticks_skipped > 0 or not (self.age_sd_ms <= 1e3 * AGE_SD_MAX)

    def describe(self) -> str:
        text = (f"states {self.age_mean_ms:.1f} ms old on average at the samples (sd {self.age_sd_ms:.1f} ms, "
                f"max {self.age_max_ms:.1f} ms), {self.ticks_skipped} ticks skipped, {self.targets_skipped} targets "
                f"skipped by the link (the fit leaves them out)")
        if self.disturbed:
            text += (" — the host's timing was disturbed (a busy machine?): the fit's confidence intervals assume it "
                     "was not; rerun on a quiet machine before trusting the values")
        return text


def run_timing(log_path, rep, received, sent=None) -> Timing:
    """The :class:`Timing` of a run from its log's sample times, ``received`` (``RunTimes.received``)
    and ``sent`` (``RunTimes.sent``: the targets skipped after the ramp are counted)."""
    import numpy as np

    from ..envs.rig import read_twin_log
    t = np.asarray(read_twin_log(log_path)["Time"], dtype=float)
    start = rep.ramp.stt if rep.ramp is not None else 0
    age = (t - np.asarray(received, dtype=float))[start:] if len(received) == len(t) else np.array([math.nan])
    age = age[np.isfinite(age)] * 1e3
    skipped = 0 if sent is None else int(np.count_nonzero(~np.asarray(sent, dtype=bool)[start:]))
    if age.size == 0:
        return Timing(math.nan, math.nan, math.nan, rep.ticks_skipped, skipped)
    return Timing(float(age.mean()), float(age.std()), float(age.max()), rep.ticks_skipped, skipped)


def fit_log(log_path, rep, settings: Settings, generations: int, *, times: RunTimes | None = None,
            say=lambda msg: None) -> list:
    """Fit every joint of an identification run's log from the ramp on (before it no target went
    out): the excitation's first pass fitted, the second checked. ``times`` (from :func:`drive`)
    puts the run on the rig's own clock (:func:`~armtwin.controllers.ident.rig_time_base`): the
    tick each servo angle was taken at (a state can be up to a state period older than its sample,
    and its arrival jitters), the time each timed target applied at, and the samples mapped onto
    it; the model then ticks on the rig's own ticks.

    Returns:
        One :class:`~armtwin.controllers.ident.FitReport` per joint.

    Raises:
        ValueError: the log is too short to fit.
    """
    from dataclasses import replace

    import numpy as np

    from ..controllers.ident import fit_motor, rig_time_base, traces_of
    from ..envs.rig import read_twin_log
    start = rep.ramp.stt if rep.ramp is not None else 0
    log = read_twin_log(log_path)
    traces = traces_of(log)
    if times is not None and len(times.received) == len(log["Time"]) == len(traces[0].t):
        # the model ticks on the rig's clock: the states' and timed targets' own times, the samples mapped
        base = rig_time_base(traces[0].t, times.received, times.rig_us, times.stamp_us, wire_s=times.state_wire_s)
        if base is None:
            traces = [replace(tr, sent=times.sent) for tr in traces]
        else:
            t_rig, taken, apply = base
            # timed: a sample without a stamp sent no target (before the rig's first state)
            sent = times.sent if apply is None else times.sent & np.isfinite(apply)
            traces = [replace(tr, t=t_rig, t_taken=taken, sent=sent, t_apply=apply) for tr in traces]
    traces = [tr.cut(int(start), len(tr.t)) for tr in traces]
    ramp_s = rep.ramp.duration_s if rep.ramp is not None else 0.0
    reports = []
    for tr in traces:
        t0, t1 = float(tr.t[0]), float(tr.t[-1])
        frac = min(max((ramp_s + 0.7 * settings.seconds) / max(t1 - t0, 1e-9), 0.1), 0.95)
        say(f"fitting {tr.label}: {len(tr.t)} samples over {t1 - t0:.1f} s …")
        reports.append(fit_motor(tr, fit_fraction=frac, generations=generations))
    return reports


def _ramp_dict(ramp) -> dict | None:
    """The ramp from the measured joints as JSON data (None: the rig never reported)."""
    if ramp is None:
        return None
    return {"joints": list(ramp.joints), "from_deg": [float(v) for v in ramp.from_deg],
            "to_deg": [float(v) for v in ramp.to_deg], "duration_s": ramp.duration_s, "stt": ramp.stt}
