"""``armtwin bench ik``: closed-form IK (batch and single) against PyBullet's numerical IK.

All three run in one process on the same seeded random IRB120 poses (FK of joint vectors drawn
uniformly inside the joint ranges, so every pose is reachable in range). Success means the FK of
the answer is within 0.1 mm and 0.1° of the target. Times are wall-clock (best of a few repeats
for the batch) with the CPU time of this thread beside them, since the machine may be shared.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from .cli import CliError, add_json_flag, print_json

POS_TOL = 1e-4                # m (0.1 mm)
ROT_TOL = np.radians(0.1)     # rad


def register(sub) -> None:
    p = sub.add_parser("ik", help="closed-form IK (batch, single) vs pybullet.calculateInverseKinematics on IRB120 poses",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=10000, help="random reachable in-range poses (default 10000)")
    p.add_argument("--pybullet-n", type=int, default=1000,
                   help="how many of them PyBullet solves (default 1000; it is ~100x slower)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the poses (default 0)")
    p.add_argument("--robot", default="irb120", help="robot id (default irb120)")
    add_json_flag(p)
    p.set_defaults(func=run)


def _errors(chain, Q, T) -> tuple[np.ndarray, np.ndarray]:
    """Position (m) and orientation (rad) errors of FK(Q) against T; inf where Q has NaN."""
    from ..controllers.kinematics import fk_batch
    from ..controllers.transforms import rotation_angle
    bad = ~np.all(np.isfinite(Q), axis=1)
    F = fk_batch(chain, np.where(bad[:, None], 0.0, Q))
    dp = np.linalg.norm(F[:, :3, 3] - T[:, :3, 3], axis=1)
    da = rotation_angle(F[:, :3, :3], T[:, :3, :3])
    dp[bad] = np.inf
    da[bad] = np.inf
    return dp, da


def _summary(dp, da) -> dict:
    ok = (dp <= POS_TOL) & (da <= ROT_TOL)
    fin = np.isfinite(dp)
    return {"success": float(ok.mean()), "max_err_mm": float(dp[fin].max() * 1000) if fin.any() else None,
            "max_err_deg": float(np.degrees(da[fin].max())) if fin.any() else None}


def _timed(f, repeats: int):
    """(result, best wall s, best thread-CPU s) over ``repeats`` runs."""
    best_w = best_c = np.inf
    out = None
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.thread_time()
        out = f()
        best_w = min(best_w, time.perf_counter() - w0)
        best_c = min(best_c, time.thread_time() - c0)
    return out, best_w, best_c


def run(args: argparse.Namespace) -> int:
    from ..controllers.ik import solve, solve_batch
    from ..controllers.kinematics import chain_of, fk_batch
    from .cli import get_robot
    if args.n < 1 or args.pybullet_n < 0:
        raise CliError("--n must be >= 1 and --pybullet-n >= 0")
    spec = get_robot(args.robot)
    chain = chain_of(spec)
    rng = np.random.default_rng(args.seed)
    Qtrue = rng.uniform(spec.lower, spec.upper, (args.n, spec.dof))
    T = fk_batch(chain, Qtrue)
    home = spec.home
    n = args.n

    def log(msg: str) -> None:
        print(f"armtwin bench ik: {msg}", file=sys.stderr, flush=True)

    log(f"{n} random in-range {spec.name} poses (seed {args.seed}); armtwin batch ...")
    solve_batch(spec, T[:100], home)  # warm-up
    b, bw, bc = _timed(lambda: solve_batch(spec, T, home), 5)
    bdp, bda = _errors(chain, b.q, T)
    log("armtwin single ...")
    for i in range(min(n, 200)):
        solve(spec, T[i], home)  # warm-up

    def single():
        out = np.full((n, spec.dof), np.nan)
        for i in range(n):
            r = solve(spec, T[i], home)
            if r.best is not None:
                out[i] = r.best
        return out
    qs, sw, sc = _timed(single, 2)
    sdp, sda = _errors(chain, qs, T)

    res = {
        "robot": spec.name, "n": n, "seed": args.seed,
        "armtwin_batch_us": bw / n * 1e6, "armtwin_batch_cpu_us": bc / n * 1e6,
        "armtwin_batch_poses_per_s": n / bw,
        "armtwin_single_us": sw / n * 1e6, "armtwin_single_cpu_us": sc / n * 1e6,
    }
    sb, ss = _summary(bdp, bda), _summary(sdp, sda)
    res.update({"armtwin_success": min(sb["success"], ss["success"]), "armtwin_batch_success": sb["success"],
                "armtwin_single_success": ss["success"], "armtwin_max_err_mm": max(sb["max_err_mm"] or 0, ss["max_err_mm"] or 0),
                "armtwin_max_err_deg": max(sb["max_err_deg"] or 0, ss["max_err_deg"] or 0),
                "batch_equals_single": bool(np.allclose(b.q, qs, atol=1e-9, equal_nan=True))})

    m = min(args.pybullet_n, n)
    if m:
        from ..envs.ik_reference import PyBulletIKSettings, pybullet_ik
        settings = PyBulletIKSettings()
        log(f"pybullet.calculateInverseKinematics on the first {m} poses ({settings}) ...")
        c0 = time.thread_time()
        qp, pw = pybullet_ik(spec, T[:m], home, settings)
        pc = time.thread_time() - c0
        pdp, pda = _errors(chain, qp, T[:m])
        sp = _summary(pdp, pda)
        ok = (pdp <= POS_TOL) & (pda <= ROT_TOL)
        res.update({
            "pybullet_n": m, "pybullet_us": pw / m * 1e6, "pybullet_cpu_us": pc / m * 1e6,
            "pybullet_success": sp["success"], "pybullet_max_err_mm": sp["max_err_mm"], "pybullet_max_err_deg": sp["max_err_deg"],
            "pybullet_success_within_limits": float((ok & spec.within_limits(qp)).mean()),
            "pybullet_settings": {"damping": settings.damping, "max_iterations": settings.max_iterations,
                                  "residual_threshold": settings.residual_threshold, "null_space": settings.null_space,
                                  "seed": "home"},
            "speedup_batch_vs_pybullet": (pw / m) / (bw / n),
            "speedup_single_vs_pybullet": (pw / m) / (sw / n),
        })
    res["speedup_batch_vs_single"] = (sw / n) / (bw / n)

    if args.json:
        print_json(res)
        return 0
    print(f"IK benchmark, {spec.title}: {n} random reachable in-range poses (seed {args.seed})")
    print(f"success = FK of the answer within {POS_TOL * 1000:.1f} mm and {np.degrees(ROT_TOL):.1f}° of the target")
    print(f"{'solver':<34}{'µs/pose':>10}{'CPU µs':>9}{'success':>10}{'max err mm':>12}{'max err °':>11}")
    rows = [("armtwin batch (all 8 branches)", res["armtwin_batch_us"], res["armtwin_batch_cpu_us"], sb),
            ("armtwin single", res["armtwin_single_us"], res["armtwin_single_cpu_us"], ss)]
    if m:
        rows.append((f"pybullet ({m} poses)", res["pybullet_us"], res["pybullet_cpu_us"], sp))
    for name, us, cpu, s in rows:
        err_mm = "-" if s["max_err_mm"] is None else f"{s['max_err_mm']:.2e}"
        err_deg = "-" if s["max_err_deg"] is None else f"{s['max_err_deg']:.2e}"
        print(f"{name:<34}{us:>10.2f}{cpu:>9.2f}{s['success'] * 100:>9.1f}%{err_mm:>12}{err_deg:>11}")
    print(f"armtwin batch: {res['armtwin_batch_poses_per_s']:,.0f} poses/s; batch == single: {res['batch_equals_single']}")
    if m:
        print(f"pybullet answers inside the joint ranges and on target: {res['pybullet_success_within_limits'] * 100:.1f}% "
              f"(damping {settings.damping:g}, {settings.max_iterations} iterations, residual {settings.residual_threshold:g} m, seeded from home)")
        print(f"speed-up vs pybullet: batch {res['speedup_batch_vs_pybullet']:.0f}x, single {res['speedup_single_vs_pybullet']:.0f}x")
    print(f"batch vs single: {res['speedup_batch_vs_single']:.1f}x")
    return 0
