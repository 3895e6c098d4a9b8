"""``armtwin bench log [--json] [--seconds 5] [--outage 5]``: the telemetry's costs, measured.

Three figures (issue 22), each from one run on this machine:

1. **MCAP vs CSV at the rig's 500 Hz loop, side by side in one run.** A virtual→real sync over
   the emulated 115200-baud rig writes every sample to the CSV twin log *and* the MCAP twin log
   (their order alternating sample by sample); each write is timed, and so is the CPU time of
   MCAP's writer thread (encoding, chunking, compressing).
   Both files are read back: rows lost = samples − rows read (target 0). Two overheads, as shares
   of the 2 ms period: the *loop time* (MCAP's queueing − the CSV's write, what the control loop
   itself spends; target ≤ 5 %) and the *CPU* (also counting the writer thread, which runs beside
   the loop and competes with it only for the interpreter lock).
2. **File size per minute of a 6-axis run at 250 Hz**: ``examples/irb120_square.ngc`` on the
   IRB120 (articulation joints) run with ``--log`` as CSV and as MCAP with zstd, lz4 and no
   compression; bytes per minute of program time.
3. **MQTT at 10 Hz across a broker outage**: a local mosquitto (``apt-get install mosquitto``),
   a persistent-session subscriber, and a :class:`~armtwin.envs.telemetry.records.TwinPublisher`
   fed at 500 Hz; the broker is stopped for ``--outage`` s in the middle. Records lost (target 0),
   repeated, out of order, and the latency from record to subscriber (p50 of all records and of
   those made while the broker was up).

A figure that could not be measured is ``n/a`` with the reason (``null`` in JSON, under ``notes``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .cli import add_json_flag, print_json, require_telemetry
from .cmd_rig import check_range

TARGETS = {"overhead_pct": 5.0, "rows_lost": 0, "mqtt_lost": 0}
RATE_HZ = 500.0


def register(sub) -> None:
    p = sub.add_parser("log", help="telemetry: MCAP vs CSV at the 500 Hz rig loop, MCAP size, MQTT across an outage")
    p.add_argument("--seconds", type=float, default=5.0, help="rig sync duration, 1..60 s (default 5)")
    p.add_argument("--outage", type=float, default=5.0, help="MQTT broker outage, 1..30 s (default 5)")
    add_json_flag(p)
    p.set_defaults(func=run)


class _Timed:
    """The CSV and the MCAP twin log side by side: every sample to both, each write timed (s)."""

    def __init__(self, csv_log, mcap_log) -> None:
        self.csv, self.mcap = csv_log, mcap_log
        self.t_csv: list[float] = []
        self.t_mcap: list[float] = []

    def write(self, s) -> None:
        pc = time.perf_counter
        pairs = ((self.csv, self.t_csv), (self.mcap, self.t_mcap))
        for log, out in (pairs if s.stt % 2 == 0 else pairs[::-1]):
            t0 = pc()
            log.write(s)
            out.append(pc() - t0)

    def close(self) -> None:
        self.csv.close()
        self.mcap.close()


def measure_rig(seconds: float, folder: Path) -> dict:
    """Figure 1 (see the module docstring)."""
    from ..envs.rig.emulator import Emulator
    from ..envs.rig.link import LinkConfig, RigLink
    from ..envs.rig.log import TwinLog, read_twin_log
    from ..envs.rig.sync import SyncConfig, TwinSync, smooth_motion
    from ..envs.sim import PhysicsConfig, World
    from ..envs.telemetry.twinlog import TwinMcapLog
    from ..robots import get
    spec, joints = get("irb120"), (0, 1)
    csv_path, mcap_path = folder / "twin.csv", folder / "twin.mcap"
    with Emulator(115200) as emu, World(PhysicsConfig(dt=1.0 / RATE_HZ)) as world:
        robot = world.add_robot(spec)
        link = RigLink(emu.device, LinkConfig(baudrate=115200)).open()
        try:
            link.request_hello(timeout=1.0)
            mcap_log = TwinMcapLog(mcap_path, spec, joints)
            timed = _Timed(TwinLog(csv_path, joints), mcap_log)
            sync = TwinSync(robot, link, SyncConfig(joints, rate_hz=RATE_HZ), timed)
            rep = sync.run(seconds, source=smooth_motion(spec, joints))
        finally:
            link.close()
    timed.close()
    n = rep.samples
    csv_rows = len(read_twin_log(csv_path)["STT"])
    mcap_rows = len(read_twin_log(mcap_path)["STT"])
    period_us = 1e6 / RATE_HZ
    csv_us = float(np.mean(timed.t_csv) * 1e6)
    put_us = float(np.mean(timed.t_mcap) * 1e6)
    thread_us = mcap_log.file.thread_cpu_s / max(n, 1) * 1e6
    return {
        "rig_samples": n, "rig_rate_hz": rep.rate_hz, "rig_ticks_skipped": rep.ticks_skipped,
        "csv_write_us": csv_us, "csv_write_p99_us": float(np.percentile(timed.t_csv, 99) * 1e6),
        "mcap_put_us": put_us, "mcap_put_p99_us": float(np.percentile(timed.t_mcap, 99) * 1e6),
        "mcap_thread_cpu_us": thread_us,
        "csv_pct_of_period": csv_us / period_us * 100, "mcap_pct_of_period": (put_us + thread_us) / period_us * 100,
        "overhead_pct": (put_us - csv_us) / period_us * 100,
        "cpu_overhead_pct": (put_us + thread_us - csv_us) / period_us * 100,
        "csv_rows_lost": n - csv_rows, "mcap_rows_lost": n - mcap_rows,
        "csv_bytes": os.path.getsize(csv_path), "mcap_bytes": os.path.getsize(mcap_path),
    }


def measure_size(folder: Path) -> dict:
    """Figure 2 (see the module docstring)."""
    from ..controllers.gcode import compile_program
    from ..controllers.gcode.parser import split_lines
    from ..envs import examples_dir
    from ..envs.runner import RunConfig, run_program
    from ..robots import get
    from .cmd_check import read_program
    spec = get("irb120")
    prog = examples_dir() / "irb120_square.ngc"
    program = compile_program(read_program(str(prog)), spec)
    lines = split_lines(prog.read_bytes())
    out: dict = {"size_program": prog.name}
    for name, suffix, comp in (("csv", ".csv", "zstd"), ("mcap_zstd", ".mcap", "zstd"), ("mcap_lz4", ".mcap", "lz4"),
                               ("mcap_none", ".mcap", "none")):
        path = folder / f"run_{name}{suffix}"
        res = run_program(program, spec, RunConfig(mode="articulation", log_compression=comp), log_path=str(path),
                          source_lines=lines, name=prog.name)
        out[f"{name}_bytes_per_min"] = os.path.getsize(path) / res.program_time * 60.0
        out["size_rate_hz"] = (res.samples - 1) / res.program_time
        out["size_samples"] = res.samples
    return out


def measure_mqtt(outage_s: float, folder: Path, before_s: float = 3.0, after_s: float = 3.0) -> dict:
    """Figure 3 (see the module docstring)."""
    import paho.mqtt.client as mqtt

    from ..controllers import rigproto as rp
    from ..envs.rig.log import SyncSample
    from ..envs.telemetry.broker import Broker
    from ..envs.telemetry.mqtt import MqttStore, MqttTarget
    from ..envs.telemetry.records import TwinPublisher
    broker = Broker(folder).start()
    got: list[tuple[float, dict]] = []
    ready = []
    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="armtwin-bench-sub", clean_session=False)
    sub.reconnect_delay_set(1, 1)
    sub.on_connect = lambda c, u, f, rc, p: (c.subscribe("bench/twin", qos=1), ready.append(1))
    sub.on_message = lambda c, u, m: got.append((time.time(), json.loads(m.payload)))
    try:
        sub.connect("127.0.0.1", broker.port)
        sub.loop_start()
        t_end = time.monotonic() + 5
        while not ready and time.monotonic() < t_end:
            time.sleep(0.01)
        time.sleep(0.2)
        pub = TwinPublisher(MqttStore(MqttTarget("127.0.0.1", broker.port, "bench/twin"), reconnect_s=(1, 1)), (0, 1), 10.0)
        total = before_s + outage_s + after_s
        t0 = time.monotonic()
        down = up = None
        k = 0
        while True:
            t = time.monotonic() - t0
            if t >= total:
                break
            if down is None and t >= before_s:
                broker.stop()
                down = time.time()
            if up is None and t >= before_s + outage_s:
                broker.start()
                up = time.time()
            v = np.array([math.sin(t), math.cos(t)]) * 20
            pub.write(SyncSample(k, t, v, v - 0.1, np.full(2, 0.1), 4.0, rp.Fault.NONE))
            k += 1
            time.sleep(max(0.0, t0 + k / RATE_HZ - time.monotonic()))
        rep = pub.close(30.0)
        t_wait = time.monotonic() + 20
        while len({m["seq"] for _, m in got}) < rep.queued and time.monotonic() < t_wait:
            time.sleep(0.05)
    finally:
        sub.disconnect()
        sub.loop_stop()
        broker.stop()
    seqs = [m["seq"] for _, m in got]
    unique = sorted(set(seqs))
    first_seen = list(dict.fromkeys(seqs))
    lat = np.array([(t - m["stamp"]) * 1e3 for t, m in got])
    made_up = np.array([not (down <= m["stamp"] < up + 1.0) for _, m in got]) if got else np.zeros(0, bool)
    return {
        "mqtt_records": rep.queued, "mqtt_received": len(unique), "mqtt_lost": rep.queued - len(unique),
        "mqtt_repeated": len(seqs) - len(unique), "mqtt_in_order": first_seen == unique,
        "mqtt_dropped_by_queue": rep.dropped, "mqtt_acked": rep.acked, "mqtt_unsent": rep.unsent,
        "mqtt_missing_seq": [q for q in range(rep.queued) if q not in set(unique)][:20], "mqtt_reconnects": rep.reconnects, "mqtt_outage_s": float(up - down),
        "mqtt_latency_p50_ms": float(np.median(lat)) if lat.size else math.nan,
        "mqtt_latency_p50_up_ms": float(np.median(lat[made_up])) if made_up.any() else math.nan,
        "mqtt_latency_max_ms": float(lat.max()) if lat.size else math.nan,
    }


def _fmt(v, spec: str) -> str:
    return f"{v:{spec}}" if isinstance(v, (int, float)) and math.isfinite(v) else "n/a"


def run(args: argparse.Namespace) -> int:
    check_range(args.seconds, "--seconds", 1.0, 60.0, "s")
    check_range(args.outage, "--outage", 1.0, 30.0, "s")
    require_telemetry("mcap", "mcap_ros2", "paho")
    notes: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="armtwin-bench-log-") as tmp:
        folder = Path(tmp)
        print(f"armtwin: bench log: {args.seconds:g} s rig sync at 500 Hz with CSV and MCAP side by side…",
              file=sys.stderr)
        r = measure_rig(args.seconds, folder)
        print("armtwin: bench log: MCAP size of a 6-axis run at 250 Hz…", file=sys.stderr)
        r.update(measure_size(folder))
        from ..envs.telemetry.broker import have_mosquitto
        if have_mosquitto():
            print(f"armtwin: bench log: MQTT at 10 Hz across a {args.outage:g} s broker outage…", file=sys.stderr)
            (folder / "mqtt").mkdir()
            r.update(measure_mqtt(args.outage, folder / "mqtt"))
        else:
            notes.update(dict.fromkeys(("mqtt_lost", "mqtt_latency_p50_ms"),
                                       "mosquitto is not installed (apt-get install mosquitto)"))
    r["load_avg_1min"] = os.getloadavg()[0]
    r["targets"] = TARGETS
    if args.json:
        print_json({**{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}, "notes": notes})
        return 0
    print(f"telemetry costs (machine load {r['load_avg_1min']:.1f} on {os.cpu_count()} CPUs)")
    print(f"1. rig loop at 500 Hz, {r['rig_samples']} samples ({r['rig_rate_hz']:.1f} Hz, "
          f"{r['rig_ticks_skipped']} ticks skipped), CSV and MCAP twin logs side by side:")
    print(f"   {'':34s} {'CSV':>10s} {'MCAP':>10s}  target")
    print(f"   {'write in the loop, µs (mean)':34s} {r['csv_write_us']:10.1f} {r['mcap_put_us']:10.1f}")
    print(f"   {'write in the loop, µs (p99)':34s} {r['csv_write_p99_us']:10.1f} {r['mcap_put_p99_us']:10.1f}")
    print(f"   {'writer thread CPU per row, µs':34s} {'-':>10s} {r['mcap_thread_cpu_us']:10.1f}")
    print(f"   {'CPU per row, share of 2 ms period':34s} {r['csv_pct_of_period']:9.2f}% {r['mcap_pct_of_period']:9.2f}%")
    print(f"   {'loop-time overhead vs CSV':34s} {'':>10s} {r['overhead_pct']:+9.2f}%  <= 5 %")
    print(f"   {'CPU overhead vs CSV (with thread)':34s} {'':>10s} {r['cpu_overhead_pct']:+9.2f}%")
    print(f"   {'rows lost':34s} {r['csv_rows_lost']:10d} {r['mcap_rows_lost']:10d}  0")
    print(f"   {'file size, bytes':34s} {r['csv_bytes']:10d} {r['mcap_bytes']:10d}")
    mb = lambda k: r[k] / 1e6  # noqa: E731
    print(f"2. file size per minute, 6-axis {r['size_program']} at {r['size_rate_hz']:.0f} Hz "
          f"({r['size_samples']} control periods):")
    print(f"   CSV {mb('csv_bytes_per_min'):.2f} MB/min; MCAP zstd "
          f"{mb('mcap_zstd_bytes_per_min'):.2f}, lz4 {mb('mcap_lz4_bytes_per_min'):.2f}, none "
          f"{mb('mcap_none_bytes_per_min'):.2f} MB/min (MCAP carries velocities, efforts, TF and poses too)")
    if "mqtt_lost" in r:
        print(f"3. MQTT at 10 Hz across a {r['mqtt_outage_s']:.1f} s broker outage: {r['mqtt_records']} records, "
              f"lost {r['mqtt_lost']} (target 0), repeated {r['mqtt_repeated']}, in order: "
              f"{'yes' if r['mqtt_in_order'] else 'NO'}, dropped by the queue {r['mqtt_dropped_by_queue']}")
        print(f"   latency record → subscriber: p50 {_fmt(r['mqtt_latency_p50_ms'], '.1f')} ms "
              f"(made while the broker was up: p50 {_fmt(r['mqtt_latency_p50_up_ms'], '.1f')} ms), "
              f"max {_fmt(r['mqtt_latency_max_ms'], '.0f')} ms")
    else:
        print(f"3. MQTT: n/a ({notes['mqtt_lost']})")
    return 0
