"""``armtwin bench fit``: the time to fit the rig's motor model to a 60 s, 500 Hz twin log.

The log comes from a simulated rig (:func:`armtwin.controllers.ident.virtual_rig_log`: the
firmware's loop with a DC motor whose parameters are drawn ±30 % around the data sheet from a
seed the fit does not see, a dead band and link delays) driven through the identification
excitation, two joints as on the rig. Measured side by side in one run: the least-squares stage
alone and the full fit (least squares, then the derivative-free search on the rig's exact
arithmetic) — time per joint and in all (target: ≤ 60 s for the log), the held-out prediction
error, and each motor parameter's error against the truth. ``--seeds N`` fits the logs of N
seeds (``--seed`` and the next N − 1: 2N fits) and prints, per stage, each parameter's largest
error over them — the dead band's beside the others, and how close the rig lets any fit come to
it: the rig drives its motors in PWM steps (47 mV), every dead band within a step gives the same
log, so the middle of the true dead band's step is the best a fit can say
(:func:`armtwin.controllers.ident.dead_band_step`).

``--identify``: ``armtwin rig identify`` itself instead — the host emulator started with two
motors drawn from the seed (one file per motor), driven through the identification excitation in
real time (``--seconds``; its speed and acceleration limits, the IRB120's J1 and J2) and fitted as
the command fits it; printed per joint: the fit's time, the held-out prediction error, and each
motor parameter's error against the emulator's motor (n/i: reported as not identifiable).
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
    p.add_argument("--seeds", type=int, default=1, metavar="N",
                   help="fit the logs of N seeds, --seed and the next N-1 (two joints each), and print each "
                        "parameter's largest error over them (1 to 50, default 1; not with --identify)")
    p.add_argument("--identify", action="store_true",
                   help="time `armtwin rig identify` instead: the emulator with motors drawn from --seed, driven in "
                        "real time for --seconds, then fitted (generations 60, as the command)")
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


def drawn_motors(seed: int, count: int = 2):
    """``count`` motors drawn ±30 % around the data sheet (inertia, Coulomb and viscous friction,
    no-load speed), a 0.21–0.39 V dead band and 1–2 ms delays each way, from ``seed``: their MotorFit."""
    import numpy as np

    from ..controllers.ident import MotorFit
    from ..controllers.servo import RIG_MOTOR
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        f = lambda: float(rng.uniform(0.7, 1.3))  # noqa: E731
        motor = dataclasses.replace(RIG_MOTOR, rotor_inertia=RIG_MOTOR.rotor_inertia * f(),
                                    coulomb_friction=RIG_MOTOR.coulomb_friction * f(),
                                    viscous_friction=RIG_MOTOR.viscous_friction * f(), no_load_rpm=145.0 * f())
        dead, down, up = 0.3 * f(), 0.0015 * f(), 0.0015 * f()
        out.append(MotorFit.of(motor, dead_band=dead, delay_down=down, delay_up=up))
    return out


def virtual_rig(seconds: float, rate: float, seed: int):
    """(traces of j1 and j2, their true MotorFit) from the simulated rig."""
    from ..controllers.ident import excitation, virtual_rig_log
    exc = excitation(seconds, rate_hz=rate, max_speed_deg_s=360.0)
    truths = drawn_motors(seed)
    traces = [virtual_rig_log(exc, t.motor_params(), dead_band=t.dead_band, delay_down=t.delay_down,
                              delay_up=t.delay_up, label=label) for label, t in zip(("j1", "j2"), truths)]
    return traces, truths


def run(args: argparse.Namespace) -> int:
    if not 20.0 <= args.seconds <= 600.0:
        raise CliError(f"--seconds {args.seconds:g}: must be from 20 to 600")
    if not 50.0 <= args.rate <= 2000.0:
        raise CliError(f"--rate {args.rate:g}: must be from 50 to 2000")
    if not 1 <= args.seeds <= 50:
        raise CliError(f"--seeds {args.seeds}: must be from 1 to 50")
    if args.identify and args.seeds != 1:
        raise CliError("--seeds: not with --identify (it drives the emulator in real time, one seed)")
    try:
        import numba  # noqa: F401
        import scipy  # noqa: F401
    except ModuleNotFoundError as exc:
        from .cli import missing_extra
        raise missing_extra(exc.name or "scipy", "fit") from None
    if args.identify:
        return _identify(args)
    from ..controllers.ident import LoopConfig, fit_motor, simulate_loop
    seeds = list(range(args.seed, args.seed + args.seeds))
    rows: dict[str, list[dict]] = {"least squares": [], "full fit": []}
    compiled = False
    for seed in seeds:
        traces, truths = virtual_rig(args.seconds, args.rate, seed)
        if not compiled:
            simulate_loop(traces[0].cut(0, 100), truths[0].vector()[None], truths[0])  # compile before timing
            compiled = True
        for stage, generations in (("least squares", 0), ("full fit", 60)):
            for tr, truth in zip(traces, truths):
                print(f"{stage}: seed {seed} {tr.label} …", file=sys.stderr, flush=True)
                t0 = time.perf_counter()
                rep = fit_motor(tr, generations=generations)
                wall = time.perf_counter() - t0
                rows[stage].append(_row(seed, tr.label, wall, rep, truth))
    logs = len(seeds)
    full = sum(r["seconds"] for r in rows["full fit"]) / logs
    ls = sum(r["seconds"] for r in rows["least squares"]) / logs
    largest = {stage: _largest(per) for stage, per in rows.items()}
    limit = max(abs(r["dead_band_limit_percent"]) for r in rows["full fit"])
    if args.json:
        print_json({"log_seconds": args.seconds, "rate_hz": args.rate, "seed": args.seed, "seeds": seeds,
                    "stages": rows, "largest_error_percent": largest, "dead_band_limit_percent": limit,
                    "full_fit_seconds": full, "target_seconds": TARGET_S})
        return 0
    which = f"seed {args.seed}" if logs == 1 else f"seeds {seeds[0]}-{seeds[-1]}"
    print(f"{args.seconds:g} s twin log at {args.rate:g} Hz, two joints (simulated rig, {which}):")
    for stage, per in rows.items():
        for r in per:
            e = ", ".join(f"{k} {'n/i' if v is None else f'{v:+.1f}%'}"
                          + (f" ({r['dead_band_error_mv']:+.0f} mV)" if k == "dead_band" and v is not None else "")
                          for k, v in r["error_percent"].items())
            dl = "n/i" if r["delay_error_ms"] is None else f"{r['delay_error_ms']:+.2f} ms"
            tag = r["joint"] if logs == 1 else f"{r['seed']} {r['joint']}"
            print(f"  {stage:14s} {tag}: {r['seconds']:6.1f} s, held-out RMS {r['held_out_rms_before']:.3f} -> "
                  f"{r['held_out_rms_after']:.3f} deg (max {r['held_out_max_after']:.3f}); {e}; delay {dl}")
    for stage, big in largest.items():
        e = ", ".join(_largest_text(k, v) for k, v in big.items())
        print(f"  {stage:14s} largest error over {len(rows[stage])} fits: {e}")
    found = sum(r["dead_band_step_found"] for r in rows["full fit"])
    print(f"  dead band: the rig drives its motor in PWM steps of {1e3 * LoopConfig().pwm_step:.1f} mV and every dead band within "
          f"a step gives the same log; the full fit found the true one's step in {found} of {len(rows['full fit'])} fits, "
          f"and that step's middle (the best any fit can say) is up to {limit:.1f}% off here")
    print(f"fit time per log: full fit {full:.1f} s (target <= {TARGET_S:g} s), least squares alone {ls:.1f} s "
          f"({full / max(ls, 1e-9):.1f}x); n/i: reported as not identifiable")
    return 0


def _row(seed: int, label: str, wall: float, rep, truth) -> dict:
    """One fit's line: its time, held-out error and each parameter's error against the truth (%;
    None: reported not identifiable), the dead band's also in mV, and how far the middle of the true
    dead band's PWM step is from it (%: no fit can be closer for sure)."""
    from ..controllers.ident import dead_band_step
    errs = {n: (None if rep.param(n).value is None else 100.0 * (rep.param(n).value - getattr(truth, n)) / getattr(truth, n))
            for n in _COMPARED}
    values = {n: 100.0 * (getattr(rep.fitted, n) - getattr(truth, n)) / getattr(truth, n) for n in _COMPARED}
    total = truth.delay_down + truth.delay_up
    d = rep.param("delay_total").value
    lo, hi = dead_band_step(truth.dead_band)
    return {"seed": seed, "joint": label, "seconds": wall, "held_out_rms_before": rep.rms_before,
            "held_out_rms_after": rep.rms_after, "held_out_max_after": rep.max_after, "error_percent": errs,
            "fitted_value_error_percent": values, "delay_error_ms": None if d is None else 1e3 * (d - total),
            "dead_band_error_mv": 1e3 * (rep.fitted.dead_band - truth.dead_band),
            "dead_band_limit_percent": 100.0 * (0.5 * (lo + hi) - truth.dead_band) / truth.dead_band,
            "dead_band_step_found": _step_found(rep, truth)}


def _step_found(rep, truth) -> bool:
    """Whether the fit reports the dead band identifiable and in the true dead band's PWM step — all
    the rig can show of it (:func:`~armtwin.controllers.ident.dead_band_step`)."""
    from ..controllers.ident import dead_band_step
    v = rep.param("dead_band").value
    return v is not None and dead_band_step(v) == dead_band_step(truth.dead_band)


def _largest(per: list[dict]) -> dict:
    """Per parameter: the largest |error| over the fits that report it (%; None: none did) and how
    many fits reported it not identifiable."""
    out = {}
    for n in _COMPARED:
        known = [abs(r["error_percent"][n]) for r in per if r["error_percent"][n] is not None]
        out[n] = {"percent": max(known) if known else None, "not_identifiable": len(per) - len(known)}
    return out


def _largest_text(name: str, big: dict) -> str:
    if big["percent"] is None:
        return f"{name} n/i"
    return f"{name} {big['percent']:.1f}%" + (f" ({big['not_identifiable']} n/i)" if big["not_identifiable"] else "")


#: the motor parameters whose errors are reported
_COMPARED = ("inertia", "viscous", "coulomb", "motor_constant", "dead_band")


def _identify(args: argparse.Namespace) -> int:
    """``bench fit --identify``: rig identify against the emulator with drawn motors."""
    import tempfile
    from pathlib import Path

    from .. import robots
    from ..controllers.ident import write_params_file
    from ..envs.rig import Emulator, RigLink, RigLinkError, TwinLog, connect
    from .rig_identify import Settings, drive, fit_log, run_timing
    truths = drawn_motors(args.seed)
    spec = robots.get("irb120")
    settings = Settings(seconds=args.seconds, rate=args.rate)
    say = (lambda msg: None) if args.json else (lambda msg: print(f"bench fit: {msg}", file=sys.stderr, flush=True))
    with tempfile.TemporaryDirectory(prefix="armtwin-bench-fit-") as tmp:
        files = [Path(tmp) / f"truth_{k + 1}.toml" for k in range(2)]
        for f, t in zip(files, truths):
            write_params_file(f, t)
        log_path = str(Path(tmp) / "identify.csv")
        try:
            with Emulator(motor_params=files[0], motor2_params=files[1]) as emu, RigLink(emu.device) as link:
                connect(link, 5.0, bounded=True)
                with TwinLog(log_path, (0, 1)) as log:
                    t0 = time.perf_counter()
                    _, rep, times = drive(link, spec, (0, 1), settings, log, say=say)
                    drive_s = time.perf_counter() - t0
        except RigLinkError as exc:
            raise CliError(f"the rig emulator: {exc}", 1) from None
        t0, c0 = time.perf_counter(), time.process_time()
        reports = fit_log(log_path, rep, settings, 60, times=times, say=say)
        fit_s, fit_cpu = time.perf_counter() - t0, time.process_time() - c0
        timing = run_timing(log_path, rep, times.received, times.sent)
    rows = []
    for r, truth in zip(reports, truths):
        errs = {n: (None if r.param(n).value is None else 100.0 * (r.param(n).value - getattr(truth, n)) / getattr(truth, n))
                for n in _COMPARED}
        values = {n: 100.0 * (getattr(r.fitted, n) - getattr(truth, n)) / getattr(truth, n) for n in _COMPARED}
        rows.append({"joint": r.label, "fit_seconds": r.seconds, "held_out_rms_before": r.rms_before,
                     "held_out_rms_after": r.rms_after, "held_out_max_after": r.max_after,
                     "error_percent": errs, "fitted_value_error_percent": values,
                     "dead_band_step_found": _step_found(r, truth)})
    out = {"seconds": args.seconds, "rate_hz": args.rate, "seed": args.seed, "samples": rep.samples,
           "ticks_skipped": rep.ticks_skipped, "drive_seconds": drive_s, "fit_seconds": fit_s,
           "fit_cpu_seconds": fit_cpu, "joints": rows, "timing_disturbed": timing.disturbed,
           "state_age_sd_ms": timing.age_sd_ms, "targets_skipped": timing.targets_skipped}
    if args.json:
        print_json(out)
        return 0
    print(f"rig identify on the emulator (motors drawn from seed {args.seed}), {args.seconds:g} s at {args.rate:g} Hz: "
          f"drove {drive_s:.1f} s ({rep.samples} samples, {rep.ticks_skipped} ticks skipped), fitted in {fit_s:.1f} s "
          f"(CPU {fit_cpu:.1f} s, all threads)")
    for r in rows:
        e = ", ".join(f"{k} {'n/i' if v is None else f'{v:+.1f}%'} ({r['fitted_value_error_percent'][k]:+.1f}%)"
                      for k, v in r["error_percent"].items())
        print(f"  {r['joint']}: fit {r['fit_seconds']:.1f} s, held-out RMS {r['held_out_rms_before']:.3f} -> "
              f"{r['held_out_rms_after']:.3f} deg (max {r['held_out_max_after']:.3f}); {e}; dead band "
              f"{'in the true PWM step' if r['dead_band_step_found'] else 'NOT in the true PWM step'}")
    print("  parameter errors against the emulator's motors; n/i: reported as not identifiable (in brackets: the "
          "value the fitted model keeps)")
    print(f"  timing: {timing.describe()}")
    return 0
