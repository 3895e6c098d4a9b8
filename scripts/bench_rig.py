"""``armtwin bench rig [--json] [--seconds 10]``: the twin over the emulated 115200-baud rig;
``armtwin bench rig --chip``: the firmware on a simulated ATmega328P, timed by the chip's clock.

Runs the rig emulator (firmware core on the host, bytes paced at 10 bits per byte) and a
virtual→real sync of an IRB120's J1, J2 along the built-in smooth motion, then prints the
loop rate, latency p50/p99, the steady-state twin error (max |ΔE| over the last 0.5 s of each
hold, after the move settled — the first such window ends 2.5 s in, so a shorter run shows
``n/a``), the samples lost, the control ticks skipped by host stalls, the share of the wire's
frame limit used, and the power-cut detection time (wall clock and rig clock) of a short power
test after the sync — beside the published rig's figures (165 Hz, 30 ms, ±2°). Wall-clock
figures live here, not in the tests.

Options are bounded so that a run always ends: --seconds 1..3600, --rate 10..2000 Hz,
--baud 300..4000000. A figure that could not be measured is ``n/a`` with the reason (``null``
in the JSON output, the reason under ``"notes"``).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

from ..envs.rig.link import RigLinkError
from .cli import CliError, add_json_flag, print_json
from .cmd_rig import SECONDS_MAX, check_range
from .options import BAUD_MAX, BAUD_MIN, check_baud, check_log_file, open_log

#: the joints the benchmark drives (J1, J2 of the IRB120), 0-based
BENCH_JOINTS = (0, 1)

PUBLISHED = {"rate_hz": 165.0, "latency_ms": 30.0, "error_deg": 2.0}
TARGETS = {"rate_hz": 500.0, "latency_p50_ms": 5.0, "error_deg": 0.5, "samples_lost": 0}
#: the built-in motion: 1.5 s moves, 1 s holds; the steady-state error is taken over the last
#: 0.5 s of each hold, so the first window ends this long after the start, s
MOVE_S, HOLD_S = 1.5, 1.0
STEADY_MIN_S = MOVE_S + HOLD_S
RATE_MIN, RATE_MAX = 10.0, 2000.0
SECONDS_MIN = 1.0
#: the power test after the sync: cut, restore and end this long after its start, s
#: (100, 250 and 400 samples at the default 500 Hz)
POWER_TEST_S = (0.2, 0.5, 0.8)


def register(sub) -> None:
    p = sub.add_parser("rig", help="emulated 115200-baud rig: loop rate, latency, twin error, wire share")
    p.add_argument("--seconds", type=float, default=10.0,
                   help=f"sync duration, {SECONDS_MIN:g}..{SECONDS_MAX:g} s (default 10; the steady-state error "
                        f"needs at least {STEADY_MIN_S:g} s)")
    p.add_argument("--baud", type=int, default=115200,
                   help=f"emulated serial speed, {BAUD_MIN}..{BAUD_MAX} bit/s (default 115200)")
    p.add_argument("--rate", type=float, default=500.0,
                   help=f"host loop rate, {RATE_MIN:g}..{RATE_MAX:g} Hz (default 500)")
    p.add_argument("--chip", action="store_true",
                   help="measure the firmware on a simulated ATmega328P instead (simavr, the chip's own clock; "
                        f"--seconds {CHIP_SECONDS_MIN:g}..{CHIP_SECONDS_MAX:g}, default {CHIP_SECONDS_DEFAULT:g}; "
                        f"--baud {', '.join(map(str, CHIP_BAUDS))})")
    p.add_argument("--log", default=None, metavar="OUT.csv|OUT.mcap",
                   help="also write the benchmark's samples (the timed sync, then the power test) as a twin log "
                        "that plot, replay and fit read; written after the measurement, so the log's writing is not "
                        "in the figures")
    add_json_flag(p)
    p.set_defaults(func=run)


def _rig_detection_ms(history, cmd, fault, present: bool) -> float:
    """Rig-clock detection of a POWER command, ms (an upper bound; NaN when not seen).

    t_us of the first state (after the command) whose ``fault`` flag is ``present``, minus
    t_us of the last state built before the rig had received the command (the states' echo,
    unwrapped from the last state received before the command was written, is older than its
    seq) — the cut was applied between the two.
    """
    if cmd.seq is None:
        return float("nan")
    b = max((i for i, s in enumerate(history) if s.t <= cmd.t_sent), default=None)
    if b is None:
        return float("nan")
    e = cmd.seq - (((cmd.seq - history[b].echo) & 0xFF) or 256)  # the echo unwrapped along the states
    i0 = None
    for i in range(b + 1, len(history)):
        e += (history[i].echo - history[i - 1].echo) & 0xFF
        if e >= cmd.seq:
            i0 = i
            break
    if not i0:
        return float("nan")
    for s in history[i0:]:
        if bool(s.faults & fault) == present:
            return ((s.t_us - history[i0 - 1].t_us) & 0xFFFFFFFF) / 1e3
    return float("nan")


def _log_detection_ms(samples, cmd, fault, present: bool) -> float:
    """Host wall clock: the first sample at/after the command with ``fault`` ``present``, ms after it."""
    for s in samples:
        if s.stt >= cmd.stt and bool(s.faults & fault) == present:
            return (s.time - cmd.time) * 1e3
    return float("nan")


def measure(seconds: float = 10.0, baud: int = 115200, rate: float = 500.0, keep: list | None = None) -> dict:
    """Run the benchmark and return the figures (keys as in the JSON output).

    After the timed sync, a short power test (cut 0.2 s in, restore 0.3 s later, end 0.3 s after
    that: 100, 250, 400 samples at 500 Hz) measures the power-fault detection on the host's wall
    clock (command sent -> flagged in the log) and on the rig's clock (cut applied -> state
    carrying the flag). Figures that could not be measured are NaN (see :func:`not_measured`).
    ``keep``: a list that receives every sample (:class:`~armtwin.envs.rig.SyncSample`), in order.
    """
    from ..controllers import rigproto as rp
    from ..envs.rig.emulator import Emulator
    from ..envs.rig.link import LinkConfig, RigLink
    from ..envs.rig.sync import SyncConfig, TwinSync, smooth_motion
    from ..envs.sim import PhysicsConfig, World
    from ..robots import get
    spec = get("irb120")
    joints = BENCH_JOINTS
    move_s, hold_s = MOVE_S, HOLD_S
    n_cut, n_restore, n_end = (max(round(x * rate), 2 * i + 1) for i, x in enumerate(POWER_TEST_S))
    samples, power_samples = [], []
    with Emulator(baud) as emu, World(PhysicsConfig(dt=1.0 / rate)) as world:
        robot = world.add_robot(spec)
        link = RigLink(emu.device, LinkConfig(baudrate=baud, keep_states=4096)).open()
        try:
            link.request_hello(timeout=1.0)
            sync = TwinSync(robot, link, SyncConfig(joints, rate_hz=rate))
            motion = smooth_motion(spec, joints, move_s=move_s, hold_s=hold_s)
            rep = sync.run(seconds, source=motion, on_sample=samples.append)
            st = link.stats
            lat = st.latencies_ms.values()  # the ring holds the whole window (capacity ≫ 10 s × 500 Hz)
            lat_count = st.latencies_ms.count
            lost, dropped, states_rx, frames_tx = st.lost, st.dropped, st.states_rx, st.frames_tx
            targets_skipped = st.targets_skipped
            n0 = sync.stt  # the power test
            hold = motion(0.0)
            prep = sync.run(None, source=lambda t: hold, max_samples=n0 + n_end,
                            power_schedule={n0 + n_cut: False, n0 + n_restore: True}, on_sample=power_samples.append)
            history = list(link.history)
        finally:
            link.close()
    if keep is not None:
        keep.extend(samples + power_samples)
    cut, restore = (prep.power_commands + [None, None])[:2]
    t = np.array([s.time for s in samples])
    err = np.array([s.error_deg for s in samples])
    seg = move_s + hold_s
    phase = np.mod(t, seg)
    steady = (phase >= seg - 0.5) & (t > 0.5)  # last 0.5 s of every hold
    ok_rows = np.array([not (s.faults & ~rp.Fault.RX_ERROR) for s in samples], dtype=bool)
    sel = steady & ok_rows & np.all(np.isfinite(err), axis=1) if len(samples) else np.zeros(0, dtype=bool)
    frame_limit = baud / 10.0 / rp.wire_bytes(rp.MsgType.JOINT_STATES)  # state frames/s the wire can carry
    states_rate = states_rx / rep.seconds if rep.seconds > 0 else 0.0
    P = rp.Fault.POWER
    return {
        "rate_hz": rep.rate_hz,
        "latency_p50_ms": float(np.percentile(lat, 50)) if lat.size else float("nan"),
        "latency_p99_ms": float(np.percentile(lat, 99)) if lat.size else float("nan"),
        "latency_samples": int(lat_count),
        "error_deg": float(np.max(np.abs(err[sel]))) if sel.any() else float("nan"),
        "samples_lost": int(lost + dropped),
        "frames_lost": int(lost),
        "frames_dropped": int(dropped),
        "ticks_skipped": rep.ticks_skipped,
        "stalls": rep.stalls,
        "max_sample_gap_ms": float(np.max(np.diff(t)) * 1e3) if t.size > 1 else float("nan"),
        "wire_share": states_rate / frame_limit,
        "wire_share_targets": (frames_tx / rep.seconds if rep.seconds > 0 else 0.0)
                              / (baud / 10.0 / rp.wire_bytes(rp.MsgType.JOINT_TARGETS)),
        "state_rate_hz": states_rate,
        "wire_frame_limit_hz": frame_limit,
        "samples": rep.samples,
        "targets_skipped": targets_skipped,
        "power_detect_ms": _log_detection_ms(power_samples, cut, P, True) if cut else float("nan"),
        "power_recover_ms": _log_detection_ms(power_samples, restore, P, False) if restore else float("nan"),
        "power_detect_rig_ms": _rig_detection_ms(history, cut, P, True) if cut else float("nan"),
        "power_recover_rig_ms": _rig_detection_ms(history, restore, P, False) if restore else float("nan"),
        "load_avg_1min": os.getloadavg()[0],
        "stale_samples": rep.stale_samples,
        "baud": baud,
        "seconds": rep.seconds,
        "seconds_asked": float(seconds),
        "published": PUBLISHED,
        "targets": TARGETS,
    }


def not_measured(r: dict) -> dict[str, str]:
    """{figure: why it is missing} for the figures of :func:`measure` that are NaN."""
    why = {}
    for k, v in r.items():
        if not (isinstance(v, float) and math.isnan(v)):
            continue
        if k == "error_deg":
            why[k] = (f"no steady-state window: the run is shorter than the {STEADY_MIN_S:g} s the first one needs"
                      if r.get("seconds_asked", STEADY_MIN_S) < STEADY_MIN_S
                      else "no fault-free sample in a steady-state window")
        elif k.startswith("latency"):
            why[k] = "no command was echoed back by the rig"
        elif k.startswith("power"):
            why[k] = "the power test's fault change was not seen"
        elif k == "max_sample_gap_ms":
            why[k] = "fewer than 2 samples"
        else:
            why[k] = "not measured"
    return why


def _fmt(v: float, spec: str, width: int = 10) -> str:
    """``v`` formatted, or ``n/a`` when it could not be measured."""
    return f"{v:{width}{spec}}" if isinstance(v, (int, float)) and math.isfinite(v) else f"{'n/a':>{width}s}"


def _ms(v: float) -> str:
    return f"{v:.1f} ms" if math.isfinite(v) else "n/a"


def run(args: argparse.Namespace) -> int:
    if args.chip:
        if args.log is not None:
            raise CliError(f"--log {args.log}: the chip benchmark keeps no twin log (it measures the firmware's own "
                           f"timing); use --log without --chip")
        return run_chip(args)
    check_range(args.seconds, "--seconds", SECONDS_MIN, SECONDS_MAX, "s")
    check_range(args.rate, "--rate", RATE_MIN, RATE_MAX, "Hz")
    check_baud(args.baud)
    if args.log is not None:
        check_log_file(args.log, "--log", os.devnull)
    print(f"armtwin: bench rig: emulator at {args.baud} baud, {args.seconds:g} s virtual→real sync at {args.rate:g} Hz…",
          file=sys.stderr)
    if args.seconds < STEADY_MIN_S:
        print(f"armtwin: bench rig: note: --seconds {args.seconds:g} is shorter than the {STEADY_MIN_S:g} s the first "
              f"steady-state window needs: the steady-state error will be n/a", file=sys.stderr)
    kept: list | None = [] if args.log is not None else None
    r = measure(args.seconds, args.baud, args.rate, keep=kept)
    if args.log is not None:
        _write_log(args.log, kept or [])
        r["log"] = args.log
    why = not_measured(r)
    if args.json:
        print_json({**{k: (None if k in why else v) for k, v in r.items()}, "notes": why})
        return 0
    p = PUBLISHED

    def note(*keys: str) -> str:
        reasons = list(dict.fromkeys(why[k] for k in keys if k in why))
        return f"  (n/a: {'; '.join(reasons)})" if reasons else ""

    lat = r["latency_p50_ms"]
    lat_ratio = f"{p['latency_ms'] / lat:.1f}x lower" if math.isfinite(lat) and lat > 0 else ""
    print(f"rig twin over an emulated {r['baud']}-baud serial link ({r['seconds']:.1f} s, {r['samples']} samples, "
          f"machine load {r['load_avg_1min']:.1f} on {os.cpu_count()} CPUs)")
    print(f"  {'':28s} {'armtwin':>10s} {'published':>10s} {'target':>8s}  ratio")
    print(f"  {'loop rate, Hz':28s} {_fmt(r['rate_hz'], '.1f')} {p['rate_hz']:10.0f} {'>= 500':>8s}  "
          f"{r['rate_hz'] / p['rate_hz']:.1f}x")
    print(f"  {'latency p50, ms':28s} {_fmt(lat, '.2f')} {p['latency_ms']:10.0f} {'<= 5':>8s}  {lat_ratio}"
          f"{note('latency_p50_ms')}")
    print(f"  {'latency p99, ms':28s} {_fmt(r['latency_p99_ms'], '.2f')} {'':>10s} {'':>8s}")
    print(f"  {'steady-state error, deg':28s} {_fmt(r['error_deg'], '.3f')} {p['error_deg']:10.1f} {'<= 0.5':>8s}"
          f"{note('error_deg')}")
    print(f"  {'samples lost':28s} {r['samples_lost']:10d} {'':>10s} {'0':>8s}")
    print(f"  {'ticks skipped (host stalls)':28s} {r['ticks_skipped']:10d} {'':>10s} {'0':>8s}  "
          f"({r['stalls']} stalls, longest gap between samples {_ms(r['max_sample_gap_ms'])})")
    print(f"  {'power cut detected, ms':28s} {_fmt(r['power_detect_ms'], '.1f')} {'':>10s} {'<= 50':>8s}  "
          f"(rig clock {_ms(r['power_detect_rig_ms'])}; recovery {_ms(r['power_recover_ms'])}, "
          f"rig clock {_ms(r['power_recover_rig_ms'])})"
          f"{note('power_detect_ms', 'power_detect_rig_ms', 'power_recover_ms', 'power_recover_rig_ms')}")
    print(f"  {'wire share (states)':28s} {r['wire_share']:10.1%} {'':>10s} {'':>8s}  "
          f"({r['state_rate_hz']:.0f} of {r['wire_frame_limit_hz']:.0f} state frames/s)")
    if args.log is not None:
        print(f"  samples written to {args.log}")
    return 0


def _write_log(path: str, samples: list) -> None:
    """The benchmark's samples as the twin log at ``path`` (CSV or MCAP, as ``sync --log`` writes it)."""
    from ..robots import get
    log = open_log(path, BENCH_JOINTS, "--log", get("irb120"))
    try:
        for s in samples:
            log.write(s)
    finally:
        log.close()


# ----- the firmware on the simulated chip ------------------------------------------------------

#: ``--chip`` run length per scenario (chip seconds; the simulation runs as fast as the PC can)
CHIP_SECONDS_MIN, CHIP_SECONDS_MAX, CHIP_SECONDS_DEFAULT = 1.0, 30.0, 3.0
#: the issue's figures at 115200 baud
CHIP_TARGETS = {"control_hz": 1000.0, "cpu_headroom": 0.30, "state_rate_hz": 480.0, "answered": 0.99,
                "latency_p50_ms": 4.0, "latency_p99_ms": 6.0, "watchdog_ms": 101.0, "flash_share": 0.5,
                "ram_share": 0.5}
#: the chip starts this long before its micros() wrap in the wrap scenario, µs
WRAP_LEAD_US = 500_000
_SETTLE_S = 0.2  # the host's HELLO and MODE: figures are taken after this much chip time


#: the serial rates the firmware supports (exact on a 16 MHz AVR; RIG_BAUD at build time)
CHIP_BAUDS = (115200, 250000, 500000, 1000000)


def measure_chip(seconds: float = CHIP_SECONDS_DEFAULT, baud: int = 115200) -> dict:
    """The firmware (Uno build) on simavr: four runs with the harness's built-in host on the chip's clock.

    1. JOINT_TARGETS at 500 Hz (a 1 Hz sine): control-tick rate, duration and the CPU busy share
       (ticks + interrupt handlers), targets answered and reply latency (end of the target frame →
       end of the state echoing it);
    2. MODE REAL_TO_VIRTUAL at 500 Hz (1000 Hz above 115200 baud): the state stream's rate;
    3. full-PWM targets, then silence: last host byte → both PWM 0 (the watchdog);
    4. the same across the micros() wrap (the chip started 0.5 s before 2^32 µs).
    Plus the flash / static RAM of the Uno image and the stack's low-water mark.
    """
    import tempfile

    from ..envs.rig.chip import build_firmware
    from ..envs.rig.simchip import SimChip, build_harness
    img = build_firmware("uno", defines=() if baud == 115200 else (f"RIG_BAUD={baud}",))
    stream_hz = 500 if baud == 115200 else 1000
    exe = build_harness()
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="armtwin-chip-") as tmp:
        def run_one(name: str, secs: float, **kw):
            chip = SimChip(img.elf, events=os.path.join(tmp, name), seconds=secs, fast=True, exe=exe, baud=baud,
                           **kw)
            chip.wait(timeout=600)
            return chip.read()

        ev = run_one("targets", seconds, drive={"targets": 500})
        per, dur = ev.tick_periods_ms(_SETTLE_S), ev.tick_durations_ms(_SETTLE_S)
        lat, n = ev.replies(_SETTLE_S)
        busy = ev.busy_share()
        out.update({
            "control_hz": 1000.0 / float(np.mean(per)) if per.size else float("nan"),  # ticks per second
            "tick_period_p99_ms": float(np.percentile(per, 99)) if per.size else float("nan"),
            "tick_ms_p50": float(np.median(dur)) if dur.size else float("nan"),
            "tick_ms_max": float(dur.max()) if dur.size else float("nan"),
            "cpu_busy": busy,
            "cpu_headroom": 1.0 - busy,
            "targets": n,
            "answered": len(lat) / n if n else float("nan"),
            "latency_p50_ms": float(np.percentile(lat, 50)) if lat.size else float("nan"),
            "latency_p99_ms": float(np.percentile(lat, 99)) if lat.size else float("nan"),
            "stack_bytes": 0x8FF - ev.sp_min if ev.sp_min else 0,
        })
        ev = run_one("stream", seconds, drive={"stream": stream_hz})
        out["stream_asked_hz"] = float(stream_hz)
        out["state_rate_hz"] = ev.state_rate_hz(_SETTLE_S + 0.1, seconds)

        def watchdog(name: str, **kw) -> float:
            e = run_one(name, 0.9, drive={"targets": 500, "far": True, "silent_at": 0.5}, **kw)
            last = e.last_rx_end()
            stop = e.stop_after(last)
            return (stop - last) / e.freq * 1e3 if stop is not None and max(map(abs, e.duty_at(last))) else float("nan")

        out["watchdog_ms"] = watchdog("watchdog")
        out["watchdog_wrap_ms"] = watchdog("wrap", start_us=2**32 - WRAP_LEAD_US)
    ram_free = img.spec.ram_max - img.ram
    out.update({"flash": img.flash, "flash_share": img.flash_share, "ram": img.ram, "ram_share": img.ram_share,
                "stack_headroom_bytes": ram_free - out["stack_bytes"], "board": img.board.value, "baud": baud,
                "seconds": float(seconds), "targets_issue": CHIP_TARGETS})
    return out


def run_chip(args: argparse.Namespace) -> int:
    seconds = CHIP_SECONDS_DEFAULT if args.seconds == 10.0 else args.seconds  # --seconds' default is the sync's
    check_range(seconds, "--seconds", CHIP_SECONDS_MIN, CHIP_SECONDS_MAX, "s", " (with --chip)")
    if args.baud not in CHIP_BAUDS:
        raise CliError(f"--baud {args.baud}: with --chip one of {', '.join(map(str, CHIP_BAUDS))} (the rates a "
                       f"16 MHz AVR makes exactly)")
    print(f"armtwin: bench rig --chip: the Uno firmware on simavr's ATmega328P, {seconds:g} s of chip time per run…",
          file=sys.stderr)
    try:
        r = measure_chip(seconds, args.baud)
    except RigLinkError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json(r)
        return 0
    t = CHIP_TARGETS
    print(f"rig firmware on a simulated ATmega328P at 16 MHz, {r['baud']} baud ({seconds:g} s per run, the chip's "
          f"clock; 500 targets/s)")
    print(f"  {'':30s} {'chip':>10s} {'target':>10s}")
    rows = [
        ("control loop, Hz", r["control_hz"], ".1f", f">= {t['control_hz']:g}"),
        ("CPU headroom", r["cpu_headroom"], ".1%", f">= {t['cpu_headroom']:.0%}"),
        ("  tick p50 / max, ms", r["tick_ms_p50"], ".3f", f"{r['tick_ms_max']:.3f}"),
        ("  tick period p99, ms", r["tick_period_p99_ms"], ".3f", ""),
        ("state stream, Hz", r["state_rate_hz"], ".1f",
         f">= {t['state_rate_hz']:g}" if r["baud"] == 115200 else ">= 1000"),
        ("targets answered", r["answered"], ".2%", f">= {t['answered']:.0%}"),
        ("reply latency p50, ms", r["latency_p50_ms"], ".2f",
         f"<= {t['latency_p50_ms']:g}" if r["baud"] == 115200 else "<= 1.5"),
        ("reply latency p99, ms", r["latency_p99_ms"], ".2f", f"<= {t['latency_p99_ms']:g}"),
        ("watchdog, ms", r["watchdog_ms"], ".2f", f"<= {t['watchdog_ms']:g}"),
        ("watchdog across the wrap, ms", r["watchdog_wrap_ms"], ".2f", f"<= {t['watchdog_ms']:g}"),
        ("flash (Uno)", r["flash_share"], ".1%", f"<= {t['flash_share']:.0%}"),
        ("static RAM (Uno)", r["ram_share"], ".1%", f"<= {t['ram_share']:.0%}"),
    ]
    for label, v, spec, target in rows:
        print(f"  {label:30s} {_fmt(v, spec)} {target:>10s}")
    print(f"  ({r['flash']} B flash, {r['ram']} B static RAM, stack peak {r['stack_bytes']} B, "
          f"{r['stack_headroom_bytes']} B of RAM never touched; {r['targets']} targets)")
    return 0
