"""``armtwin bench fit``: the time to fit the rig's motor model to a 60 s, 500 Hz twin log.

The log comes from a simulated rig (:func:`armtwin.controllers.ident.virtual_rig_log`: the
firmware's loop with a DC motor whose parameters are drawn ±30 % around the data sheet from a
seed the fit does not see, a dead band and link delays) driven through the identification
excitation, two joints as on the rig. Measured side by side in one run: the least-squares stage
alone and the full fit (least squares, then the derivative-free search on the rig's exact
arithmetic) — time per joint and in all (target: ≤ 60 s for the log), the held-out prediction
error, and each motor parameter's error against the truth.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

from .cli import CliError, add_json_flag, print_json

#: the target fit time for the whole log, s
TARGET_S = 60.0


def register(sub) -> None:
    p = sub.add_parser("fit", help="fit time for a 60 s 500 Hz twin log (two joints): least squares vs the full fit")
    p.add_argument("--seconds", type=float, default=60.0, help="log length, s (20 to 600, default 60)")
    p.add_argument("--rate", type=float, default=500.0, help="log rate, Hz (50 to 2000, default 500)")
    p.add_argument("--seed", type=int, default=2026, help="seed of the simulated rig's motors (default 2026)")
    add_json_flag(p)
    p.set_defaults(func=run)


def write_virtual_log(path, traces) -> None:
    """Write joint traces with the same times as a twin log (``armtwin sync``'s CSV format)."""
    import numpy as np

    from ..controllers import rigproto as rp
    from ..envs.rig import SyncSample, TwinLog
    joints = [int(tr.label.lstrip("j")) - 1 for tr in traces]
    t = traces[0].t
    with TwinLog(path, joints) as log:
        for k in range(len(t)):
            v = np.array([tr.virtual[k] for tr in traces])
            s = np.array([tr.servo[k] for tr in traces])
            off = any(not tr.powered[k] for tr in traces)
            log.write(SyncSample(k, float(t[k]), v, s, v - s, float("nan"), rp.Fault.POWER if off else rp.Fault.NONE))


def virtual_rig(seconds: float, rate: float, seed: int):
    """(traces of j1 and j2, their true MotorFit) from the simulated rig."""
    import numpy as np

    from ..controllers.ident import MotorFit, excitation, virtual_rig_log
    from ..controllers.servo import RIG_MOTOR
    rng = np.random.default_rng(seed)
    exc = excitation(seconds, rate_hz=rate, max_speed_deg_s=360.0)
    traces, truths = [], []
    for label in ("j1", "j2"):
        f = lambda: float(rng.uniform(0.7, 1.3))  # noqa: E731
        motor = dataclasses.replace(RIG_MOTOR, rotor_inertia=RIG_MOTOR.rotor_inertia * f(),
                                    coulomb_friction=RIG_MOTOR.coulomb_friction * f(),
                                    viscous_friction=RIG_MOTOR.viscous_friction * f(), no_load_rpm=145.0 * f())
        dead, down, up = 0.3 * f(), 0.0015 * f(), 0.0015 * f()
        traces.append(virtual_rig_log(exc, motor, dead_band=dead, delay_down=down, delay_up=up, label=label))
        truths.append(MotorFit.of(motor, dead_band=dead, delay_down=down, delay_up=up))
    return traces, truths


def run(args: argparse.Namespace) -> int:
    if not 20.0 <= args.seconds <= 600.0:
        raise CliError(f"--seconds {args.seconds:g}: must be from 20 to 600")
    if not 50.0 <= args.rate <= 2000.0:
        raise CliError(f"--rate {args.rate:g}: must be from 50 to 2000")
    try:
        import numba  # noqa: F401
        import scipy  # noqa: F401
    except ModuleNotFoundError as exc:
        from .cli import missing_extra
        raise missing_extra(exc.name or "scipy", "fit") from None
    from ..controllers.ident import fit_motor, simulate_loop
    traces, truths = virtual_rig(args.seconds, args.rate, args.seed)
    simulate_loop(traces[0].cut(0, 100), truths[0].vector()[None], truths[0])  # compile before timing
    rows = {}
    for stage, generations in (("least squares", 0), ("full fit", 60)):
        per = []
        for tr, truth in zip(traces, truths):
            print(f"{stage}: {tr.label} …", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            rep = fit_motor(tr, generations=generations)
            wall = time.perf_counter() - t0
            errs = {p.name: (None if p.value is None else 100.0 * (p.value - getattr(truth, p.name)) / getattr(truth, p.name))
                    for p in rep.params if p.name in ("inertia", "viscous", "coulomb", "motor_constant", "dead_band")}
            total = truth.delay_down + truth.delay_up
            d = rep.param("delay_total").value
            per.append({"joint": tr.label, "seconds": wall, "held_out_rms_before": rep.rms_before,
                        "held_out_rms_after": rep.rms_after, "held_out_max_after": rep.max_after,
                        "error_percent": errs, "delay_error_ms": None if d is None else 1e3 * (d - total)})
        rows[stage] = per
    full = sum(r["seconds"] for r in rows["full fit"])
    if args.json:
        print_json({"log_seconds": args.seconds, "rate_hz": args.rate, "seed": args.seed, "stages": rows,
                    "full_fit_seconds": full, "target_seconds": TARGET_S})
        return 0
    print(f"{args.seconds:g} s twin log at {args.rate:g} Hz, two joints (simulated rig, seed {args.seed}):")
    for stage, per in rows.items():
        for r in per:
            e = ", ".join(f"{k} {'n/i' if v is None else f'{v:+.1f}%'}" for k, v in r["error_percent"].items())
            dl = "n/i" if r["delay_error_ms"] is None else f"{r['delay_error_ms']:+.2f} ms"
            print(f"  {stage:14s} {r['joint']}: {r['seconds']:6.1f} s, held-out RMS {r['held_out_rms_before']:.3f} -> "
                  f"{r['held_out_rms_after']:.3f} deg (max {r['held_out_max_after']:.3f}); {e}; delay {dl}")
    ls = sum(r["seconds"] for r in rows["least squares"])
    print(f"fit time for the log: full fit {full:.1f} s (target <= {TARGET_S:g} s), least squares alone {ls:.1f} s "
          f"({full / max(ls, 1e-9):.1f}x); n/i: reported as not identifiable")
    return 0
