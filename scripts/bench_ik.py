"""``armtwin bench ik``: closed-form IK (batch and single) against PyBullet's numerical IK.

All run in one process on the same seeded random IRB120 poses (FK of joint vectors drawn
uniformly inside the joint ranges, so every pose is reachable in range), each seeded from the
home pose. Success means the FK of the answer is within 0.1 mm and 0.1° of the target.

What is timed (per pose):
  batch   ``solve_batch``: every branch of every pose (8 on the IRB120) and the choice.
  single  ``solve(spec, T, home)``: the weighted shortest-travel choice over every branch;
          branches whose partial travel already loses are skipped (exactly: the result is the
          same), and ``IKResult.solutions`` is not built.
  single + all solutions  the same, then reading ``.solutions`` (every branch and 2π
          equivalent as IKSolution objects), on the first 2,000 poses.
  pybullet  ``calculateInverseKinematics`` (``armtwin.envs.sim.pybullet_ik``).

Every armtwin time is the best of ``--repeat`` runs, wall clock and process CPU time
(``time.process_time``) side by side, each the best of its own; on a shared machine the CPU time
is the better measure of the code and the wall time says what the load allows. The load average
at the start is printed with them.
"""

from __future__ import annotations

import argparse
import os
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
    p.add_argument("--pybullet-n", type=int, default=None,
                   help="how many of them PyBullet solves (default: all --n, the same poses as armtwin)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the poses (default 0)")
    p.add_argument("--robot", default="irb120", help="robot id (default irb120)")
    p.add_argument("--repeat", type=int, default=5,
                   help="runs of each armtwin timing; the best wall and the best CPU time are kept (default 5)")
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
    """(result of the last run, best wall s, best process-CPU s) over ``repeats`` runs."""
    best_w = best_c = np.inf
    out = None
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        out = f()
        c1, w1 = time.process_time(), time.perf_counter()
        best_w = min(best_w, w1 - w0)
        best_c = min(best_c, c1 - c0)
    return out, best_w, best_c


def run(args: argparse.Namespace) -> int:
    from ..controllers.ik import branch_labels, solve, solve_batch
    from ..controllers.kinematics import chain_of, fk_batch
    from .cli import get_robot
    if args.pybullet_n is None:
        args.pybullet_n = args.n
    if args.n < 1 or args.pybullet_n < 0 or args.repeat < 1:
        raise CliError("--n and --repeat must be >= 1 and --pybullet-n >= 0")
    if args.pybullet_n > args.n:
        raise CliError(f"--pybullet-n {args.pybullet_n}: PyBullet solves some of the --n {args.n} poses; at most {args.n}")
    spec = get_robot(args.robot)
    chain = chain_of(spec)
    rng = np.random.default_rng(args.seed)
    Qtrue = rng.uniform(spec.lower, spec.upper, (args.n, spec.dof))
    T = fk_batch(chain, Qtrue)
    home = spec.home
    n = args.n

    def log(msg: str) -> None:
        print(f"armtwin bench ik: {msg}", file=sys.stderr, flush=True)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    log(f"{n} random in-range {spec.name} poses (seed {args.seed}), best of {args.repeat} runs; armtwin batch ...")
    solve_batch(spec, T[:100], home)  # warm-up
    b, bw, bc = _timed(lambda: solve_batch(spec, T, home), args.repeat)
    bdp, bda = _errors(chain, b.q, T)
    log("armtwin single ...")
    poses = list(T)   # the caller's (4, 4) arrays, as a control loop holds them
    for t in poses[:200]:
        solve(spec, t, home)  # warm-up
    # keep only the answers (a control loop drops the IKResult)
    bests, sw, sc = _timed(lambda: [solve(spec, t, home).best for t in poses], args.repeat)
    qs = np.array([np.full(spec.dof, np.nan) if q is None else q for q in bests])
    sdp, sda = _errors(chain, qs, T)
    m_all = min(n, 2000)
    n_sol, aw, ac = _timed(lambda: sum(len(solve(spec, t, home).solutions) for t in poses[:m_all]), args.repeat)

    res = {
        "robot": spec.name, "n": n, "seed": args.seed, "repeat": args.repeat, "load_average_1min": load,
        "armtwin_batch_us": bw / n * 1e6, "armtwin_batch_cpu_us": bc / n * 1e6,
        "armtwin_batch_poses_per_s": n / bw, "armtwin_batch_cpu_poses_per_s": n / bc,
        "armtwin_single_us": sw / n * 1e6, "armtwin_single_cpu_us": sc / n * 1e6,
        "armtwin_single_all_solutions_n": m_all, "armtwin_single_all_solutions_us": aw / m_all * 1e6,
        "armtwin_single_all_solutions_cpu_us": ac / m_all * 1e6, "armtwin_solutions_per_pose": n_sol / m_all,
    }
    sb, ss = _summary(bdp, bda), _summary(sdp, sda)
    res.update({"armtwin_success": min(sb["success"], ss["success"]), "armtwin_batch_success": sb["success"],
                "armtwin_single_success": ss["success"], "armtwin_max_err_mm": max(sb["max_err_mm"] or 0, ss["max_err_mm"] or 0),
                "armtwin_max_err_deg": max(sb["max_err_deg"] or 0, ss["max_err_deg"] or 0),
                "batch_equals_single": bool(np.allclose(b.q, qs, atol=1e-9, equal_nan=True))})

    m = min(args.pybullet_n, n)
    if m:
        from ..envs.sim import PyBulletIKSettings, pybullet_ik
        settings = PyBulletIKSettings()
        log(f"pybullet.calculateInverseKinematics on the first {m} poses ({settings}) ...")
        c0 = time.process_time()
        qp, pw = pybullet_ik(spec, T[:m], home, settings)
        pc = time.process_time() - c0
        if m > 1:   # CPU time without the client's start-up (connect, URDF): subtract a 1-pose run
            c0 = time.process_time()
            pybullet_ik(spec, T[:1], home, settings)
            pc = max(pc - (time.process_time() - c0), 0.0) * m / (m - 1)
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
            "speedup_batch_vs_pybullet_cpu": (pc / m) / (bc / n),
            "speedup_single_vs_pybullet_cpu": (pc / m) / (sc / n),
        })
    res["speedup_batch_vs_single"] = (sw / n) / (bw / n)
    res["speedup_batch_vs_single_cpu"] = (sc / n) / (bc / n)

    if args.json:
        print_json(res)
        return 0
    print(f"IK benchmark, {spec.title}: {n} random reachable in-range poses (seed {args.seed}), seeded from home")
    print(f"success = FK of the answer within {POS_TOL * 1000:.1f} mm and {np.degrees(ROT_TOL):.1f}° of the target; "
          f"armtwin times: best of {args.repeat} runs" + ("" if load is None else f", load average {load:.2f}"))
    print(f"{'solver':<40}{'µs/pose':>10}{'CPU µs':>9}{'success':>10}{'max err mm':>12}{'max err °':>11}")
    B = len(branch_labels(spec))
    rows = [(f"armtwin batch (all {B} branches + choice)", res["armtwin_batch_us"], res["armtwin_batch_cpu_us"], sb),
            ("armtwin single (choice over all branches)", res["armtwin_single_us"], res["armtwin_single_cpu_us"], ss),
            (f"  + .solutions listed ({m_all} poses)", res["armtwin_single_all_solutions_us"],
             res["armtwin_single_all_solutions_cpu_us"], None)]
    if m:
        rows.append((f"pybullet ({m} poses)", res["pybullet_us"], res["pybullet_cpu_us"], sp))
    for name, us, cpu, s in rows:
        if s is None:
            print(f"{name:<40}{us:>10.2f}{cpu:>9.2f}{'':>10}{'':>12}{'':>11}")
            continue
        err_mm = "-" if s["max_err_mm"] is None else f"{s['max_err_mm']:.2e}"
        err_deg = "-" if s["max_err_deg"] is None else f"{s['max_err_deg']:.2e}"
        print(f"{name:<40}{us:>10.2f}{cpu:>9.2f}{s['success'] * 100:>9.1f}%{err_mm:>12}{err_deg:>11}")
    print(f"armtwin batch: {res['armtwin_batch_poses_per_s']:,.0f} poses/s wall, "
          f"{res['armtwin_batch_cpu_poses_per_s']:,.0f} poses/s CPU; batch == single: {res['batch_equals_single']}")
    if m:
        print(f"pybullet answers inside the joint ranges and on target: {res['pybullet_success_within_limits'] * 100:.1f}% "
              f"(damping {settings.damping:g}, {settings.max_iterations} iterations, residual {settings.residual_threshold:g} m, seeded from home)")
        print(f"speed-up vs pybullet: batch {res['speedup_batch_vs_pybullet']:.0f}x, single "
              f"{res['speedup_single_vs_pybullet']:.0f}x (CPU time: {res['speedup_batch_vs_pybullet_cpu']:.0f}x, "
              f"{res['speedup_single_vs_pybullet_cpu']:.0f}x)")
    print(f"batch vs single: {res['speedup_batch_vs_single']:.1f}x (CPU time: {res['speedup_batch_vs_single_cpu']:.1f}x)")
    return 0
