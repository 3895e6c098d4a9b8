"""``armtwin compare ROBOT``: the three joint models on the same trajectory, measured.

Runs the motion through KINEMATIC, HINGE and ARTICULATION (``envs/compare.py``), then a
payload sweep (0 … rated) and a time-step search (largest stable dt per dynamic mode).
Prints a table, writes ``metrics.csv`` and three PNG plots (and with ``--video`` an MP4
with the three models side by side) into ``--out`` (default ``./out/compare_<robot>``).
With ``--log compare.mcap`` the three main runs (at the last payload) also go into one MCAP
file, each model's joint states, reference, TF and flange pose under its own namespace
(``/hinge/joint_states`` …), for Foxglove (docs/TELEMETRY.md).
Progress goes to stderr; the paths written are printed.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

from .cli import CliError, add_json_flag, get_robot, output_file, output_folder, print_json, require_telemetry
from .cmd_check import add_cell_arg
from .options import add_frame_options, add_tool_options, frame_settings

MODE_COLORS = {"kinematic": "#444444", "hinge": "#d62728", "articulation": "#1f77b4"}


# The motions of envs/compare.py, named here so that building the parser does not load
# PyBullet (tests/test_compare.py checks the two lists agree).
MOTIONS = ("pick-place", "swing", "slow")
#: smallest --dt, s: 10 kHz physics (a 5 s motion is then 150,000 steps for the three models)
MIN_DT = 1e-4


def register(sub) -> None:
    p = sub.add_parser("compare", help="measure the kinematic, hinge and articulation joint models on one trajectory")
    p.add_argument("robot", help="robot id (see `armtwin robots`)")
    p.add_argument("--motion", default="pick-place", choices=MOTIONS, help="trajectory (default: pick-place)")
    p.add_argument("--payload", type=float, default=None, metavar="KG",
                   help="payload for the main table (default: both 0 and the rated payload)")
    p.add_argument("--dt", type=float, default=None, metavar="S", help="control/physics step, s (default 1/240)")
    p.add_argument("--out", default=None, metavar="DIR", help="output folder (default ./out/compare_<robot>)")
    p.add_argument("--quick", action="store_true", help="fewer sweep points (payload 0 and rated; coarser dt search)")
    p.add_argument("--no-sweeps", action="store_true", help="only the main table (no payload / dt sweeps)")
    p.add_argument("--video", action="store_true", help="also write compare.mp4: the three models side by side")
    p.add_argument("--gif", action="store_true", help="also write compare.gif (implies --video)")
    add_frame_options(p, size="1200x450")
    p.add_argument("--log", default=None, metavar="OUT.mcap",
                   help="also write the three main runs as ROS 2 messages in MCAP, each joint model under its own "
                        "namespace (/kinematic/joint_states, /hinge/joint_states, ...; 'telemetry' extra; "
                        "docs/TELEMETRY.md); an existing file is replaced")
    p.add_argument("--program", metavar="FILE",
                   help="compare the joint models on a G-code program instead of a built-in motion: its preflight "
                        "(with --cell), then one run per model at the program's control period — path error, and "
                        "where the cell's workpieces ended (a pick-and-place with its real payload)")
    p.add_argument("--origin", nargs=3, type=float, metavar=("X", "Y", "Z"),
                   help="with --program: its work origin in the robot base frame, mm (default: per robot)")
    add_cell_arg(p, "with --program: run it in this workcell and check it for collisions first", implicit=True)
    add_tool_options(p)
    add_json_flag(p)
    p.set_defaults(func=run)


def _progress(msg: str) -> None:
    print(f"[compare] {msg}", file=sys.stderr, flush=True)


def _fmt(v, nd=3) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "NO"
    if isinstance(v, float):
        if not np.isfinite(v):
            return "-"
        return f"{v:.{nd}f}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)


def print_table(spec, rows) -> None:
    """The main comparison table on stdout."""
    unit = "deg/mm" if spec.prismatic.any() else "deg"
    cols = [("mode", "mode", 12), ("payload", "kg", 7), ("rms_joint_err", f"rms joint {unit}", 14),
            ("max_joint_err", f"max joint {unit}", 14), ("rms_flange_err_mm", "rms flange mm", 13),
            ("max_flange_err_mm", "max flange mm", 13), ("overshoot", f"overshoot {unit}", 14),
            ("settling_s", "settle s", 8), ("peak_tau", "peak tau Nm", 11), ("rms_tau", "rms tau Nm", 10),
            ("energy_j", "work J", 8), ("steps_per_s", "steps/s", 8), ("stable", "stable", 6)]
    print("  ".join(h.rjust(w) for _, h, w in cols))
    for m in rows:
        r = m.row()
        cells = []
        for k, _, w in cols:
            v = r[k]
            cells.append((_fmt(v, 0) if k == "steps_per_s" else _fmt(v, 2 if k in ("peak_tau", "rms_tau", "energy_j") else 3)).rjust(w))
        print("  ".join(cells))
    for m in rows:
        if m.message:
            print(f"  {m.mode} @ {m.payload:g} kg: {m.message}")


def write_csv(path: Path, rows: list[dict]) -> None:
    """Every row of metrics; ``stable`` is the guard's verdict, ``settled_stable`` also needs the
    joints to settle after the motion (the dt search's criterion, :func:`~armtwin.envs.compare.stable_run`)."""
    keys = list(rows[0].keys())
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow(r)


def plot_tracking(path: Path, spec, traj, runs: dict, title: str) -> None:
    """Reference joints, joint error and flange error over time, one line per mode."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from ..envs.compare import flange_error_mm, joint_error
    fig, ax = plt.subplots(3, 1, figsize=(10, 8.5), sharex=True, gridspec_kw={"height_ratios": [1, 1.3, 1.3]})
    any_run = next(iter(runs.values()))
    scale = np.where(spec.prismatic, 1000.0, 180.0 / np.pi)
    for j in range(spec.dof):
        ax[0].plot(any_run.t, any_run.q_ref[:, j] * scale[j], lw=1.2, label=f"J{j + 1}")
    ax[0].set_ylabel("reference\njoints (deg / mm)")
    ax[0].legend(ncol=spec.dof, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    floor = 1e-4
    for mode, r in runs.items():
        c = MODE_COLORS[mode]
        e = np.max(np.abs(joint_error(spec, r)), axis=1)
        f = flange_error_mm(spec, r)
        if mode == "kinematic":
            ax[1].plot([], [], color=c, label="kinematic: 0 (exact)")
            ax[2].plot([], [], color=c, label="kinematic: 0 (exact)")
            continue
        ax[1].plot(r.t, np.maximum(e, floor), color=c, lw=1.0, label=mode)
        ax[2].plot(r.t, np.maximum(f, floor), color=c, lw=1.0, label=mode)
        if not r.stable:
            ax[1].axvline(r.t[-1], color=c, ls=":", lw=1)
            ax[1].text(r.t[-1], 1, " unstable", color=c, fontsize=8)
    for a, lab in ((ax[1], "max joint error\n(deg / mm, log)"), (ax[2], "flange position\nerror (mm, log)")):
        a.set_yscale("log")
        a.set_ylabel(lab)
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=8, loc="upper right")
    for seg in traj.segments:
        if seg.kind != "hold":
            for a in ax:
                a.axvspan(seg.t0, seg.t0 + seg.duration, color="#ffd27f" if seg.kind == "move" else "#c8e6c9", alpha=0.25, lw=0)
    fig.suptitle(title + "\n(shading: orange = fast joint swing, green = vertical approach, white = hold)", fontsize=10)
    ax[2].set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_payload(path: Path, spec, rows, title: str) -> None:
    """Flange error (RMS and max) and peak torque against the payload, per dynamic mode."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode in ("hinge", "articulation"):
        rs = sorted((m for m in rows if m.mode == mode), key=lambda m: m.payload)
        if not rs:
            continue
        x = [m.payload for m in rs]
        c = MODE_COLORS[mode]
        ax[0].plot(x, [m.rms_flange_err_mm for m in rs], "o-", color=c, label=f"{mode} RMS")
        ax[0].plot(x, [m.max_flange_err_mm for m in rs], "s--", color=c, alpha=0.6, label=f"{mode} max")
        ax[1].plot(x, [m.peak_tau for m in rs], "o-", color=c, label=f"{mode} peak")
        ax[1].plot(x, [m.rms_tau for m in rs], "s--", color=c, alpha=0.6, label=f"{mode} RMS")
    ax[0].set_ylabel("flange position error (mm, log)")
    ax[0].set_yscale("log")
    ax[1].set_ylabel("joint torque (N·m)")
    for a in ax:
        a.set_xlabel("payload at the flange (kg)")
        a.axvline(spec.payload, color="k", ls=":", lw=1)
        a.grid(True, alpha=0.3)
        a.legend(fontsize=8)
    ax[0].text(spec.payload, ax[0].get_ylim()[1] * 0.7, " rated", fontsize=8, va="top")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_dt(path: Path, searches, title: str) -> None:
    """RMS flange error against the time step, unstable tries marked, the stability limit drawn."""
    from ..envs.compare import stable_run
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 4.8))
    ymax = 1.0
    for s in searches:
        ok = sorted((m.dt, m.rms_flange_err_mm) for m in s.tried if stable_run(m))
        if ok:
            ymax = max(ymax, max(v for _, v in ok))
    for s in searches:
        mode = s.mode.value
        c = MODE_COLORS[mode]
        ok = sorted((m.dt, m.rms_flange_err_mm) for m in s.tried if stable_run(m))
        bad = sorted(m.dt for m in s.tried if not stable_run(m))
        if ok:
            ax.plot([d * 1000 for d, _ in ok], [max(v, 1e-4) for _, v in ok], "o-", color=c, label=f"{mode}: stable")
        if bad:
            ax.plot([d * 1000 for d in bad], [ymax * 3] * len(bad), "x", color=c, ms=9, mew=2, label=f"{mode}: unstable")
        if np.isfinite(s.largest_stable_dt):
            lab = f"{mode} largest stable dt = {s.largest_stable_dt * 1000:.1f} ms" + (" (search cap)" if s.capped else "")
            ax.axvline(s.largest_stable_dt * 1000, color=c, ls="--", lw=1.2, label=lab)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time step dt (ms)")
    ax.set_ylabel("RMS flange position error (mm)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title + "\n(x at the top: unstable runs: stopped by the stability guard, or never settling)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_video(path: Path, spec, traj, dt: float, payload: float, gif: bool = False,
                size: tuple[int, int] = (1200, 450), fps: float = 30.0) -> list[Path]:
    """The three models side by side in one world, each filmed by its own camera from the same
    place relative to its robot (so equal joints look equal), each third of the frame labelled."""
    from dataclasses import replace

    from ..envs.camera import cameras_for
    from ..envs.sim import JointMode, PhysicsConfig, World
    from ..envs.video import VideoRecorder
    gap = 8.0 * spec.reach + 1.0          # far enough apart that no arm enters another's view
    modes = (JointMode.KINEMATIC, JointMode.HINGE, JointMode.ARTICULATION)
    with World(PhysicsConfig(dt=dt)) as world:
        robots = [world.add_robot(spec, m, q0=traj.q0, payload=payload, position=(0.0, (i - 1) * gap, 0.0))
                  for i, m in enumerate(modes)]
        aspect = (size[0] / 3) / size[1]          # a tile is narrower than the presets' 4:3
        tiles = [(replace(cameras_for(spec, r.base_position)["iso"],
                          distance=cameras_for(spec, r.base_position)["iso"].distance * max(1.0, (4 / 3) / aspect)),
                  f"{m.value} joints") for r, m in zip(robots, modes)]
        n = int(np.ceil(traj.duration / dt - 1e-9))
        t = dt * np.arange(1, n + 1)
        q, qd, _ = traj.sample(t)
        with VideoRecorder(world, robots[1], path, camera=tiles[0][0], tiles=tiles, fps=fps, size=size, overlay=True,
                           gif=gif, expected_duration=traj.duration,
                           title=f"{spec.title}  ·  the same motion in three joint models  ·  payload {payload:g} kg") as rec:
            for k in range(n):
                for r in robots:
                    r.command(q[k], qd[k])
                world.step()
                rec.maybe_capture({"label": "kinematic | hinge | articulation", "payload": f"{payload:g} kg"})
        return [Path(p) for p in rec.result.paths]


def run(args: argparse.Namespace) -> int:
    from ..envs.compare import DYNAMIC_MODES, build_motion, dt_sweep, metrics, payload_sweep, run_motion
    from ..envs.sim import JointMode
    spec = get_robot(args.robot)
    if args.program is not None:
        return compare_program(args, spec)
    for name, given in (("--origin", args.origin), ("--cell", args.cell), ("--no-cell", args.no_cell or None),
                        ("--tools", args.tools),
                        ("--tool", args.tool or None), ("--pen-servo", args.pen_servo or None)):
        if given is not None:
            raise CliError(f"{name} belongs to --program (a G-code program's runs); the built-in motions have no program")
    if args.dt is None:
        args.dt = 1.0 / 240.0
    if not (np.isfinite(args.dt) and MIN_DT <= args.dt <= 0.1):
        raise CliError(f"--dt must be in [{MIN_DT:g}, 0.1] s (at most 10 kHz physics), got {args.dt:g}")
    if args.payload is not None and not (np.isfinite(args.payload) and 0 <= args.payload <= 10 * spec.payload):
        raise CliError(f"--payload must be in [0, {10 * spec.payload:g}] kg for {spec.name}, got {args.payload}")
    if args.log is not None:
        output_file(args.log, "--log", (".mcap",))
        require_telemetry()
    fps, size = frame_settings(args)
    out = output_folder(args.out or f"out/compare_{spec.name}", "--out")
    t_start = time.perf_counter()
    _progress(f"building the {args.motion} motion for {spec.title}")
    traj = build_motion(spec, args.motion)
    payloads = [args.payload] if args.payload is not None else [0.0, spec.payload]
    main, runs = [], {}
    for pl in payloads:
        for mode in JointMode:
            _progress(f"main run: {mode.value}, payload {pl:g} kg, dt {args.dt * 1000:.3g} ms")
            r = run_motion(spec, traj, mode, dt=args.dt, payload=pl)
            main.append(metrics(spec, traj, r))
            if pl == payloads[-1]:
                runs[mode.value] = r
    csv_rows = [{"experiment": "main", **m.row()} for m in main]
    sweep_rows, searches = [], []
    if not args.no_sweeps:
        fr = (0.0, 1.0) if args.quick else (0.0, 0.25, 0.5, 0.75, 1.0)
        sweep_rows = payload_sweep(spec, traj, [f * spec.payload for f in fr], dt=args.dt, progress=_progress)
        csv_rows += [{"experiment": "payload_sweep", **m.row()} for m in sweep_rows]
        for mode in DYNAMIC_MODES:
            s = dt_sweep(spec, traj, mode, dt0=args.dt, bisections=2 if args.quick else 4, progress=_progress)
            searches.append(s)
            csv_rows += [{"experiment": "dt_search", **m.row()} for m in s.tried]
    paths = {"csv": out / "metrics.csv", "tracking": out / "tracking_error.png"}
    write_csv(paths["csv"], csv_rows)
    title = f"{spec.title}: {args.motion}, dt = {args.dt * 1000:.3g} ms, payload {payloads[-1]:g} kg"
    plot_tracking(paths["tracking"], spec, traj, runs, title)
    if not args.no_sweeps:
        paths["payload"] = out / "error_vs_payload.png"
        paths["dt"] = out / "error_vs_dt.png"
        plot_payload(paths["payload"], spec, sweep_rows, f"{spec.title}: {args.motion}, dt = {args.dt * 1000:.3g} ms")
        plot_dt(paths["dt"], searches, f"{spec.title}: {args.motion}, payload 0 kg")
    if args.log is not None:
        from ..envs.telemetry.comparelog import write_compare_mcap
        _progress(f"writing {args.log}")
        try:
            write_compare_mcap(args.log, spec, runs, metadata={"motion": args.motion, "dt_s": f"{args.dt:g}",
                                                              "payload_kg": f"{payloads[-1]:g}"})
        except OSError as exc:
            raise CliError(f"--log {args.log}: cannot write it: {exc.strerror or exc}") from None
        paths["log"] = Path(args.log)
    if args.video or args.gif:
        _progress("rendering the side-by-side video")
        videos = write_video(out / "compare.mp4", spec, traj, args.dt, payloads[-1], gif=args.gif, size=size, fps=fps)
        paths["video"] = videos[0]
        if len(videos) > 1:
            paths["gif"] = videos[1]
    limits = {s.mode.value: {"largest_stable_dt_s": s.largest_stable_dt, "capped": s.capped,
                             "first_unstable_dt_s": s.first_unstable_dt} for s in searches}
    if args.json:
        print_json({"robot": spec.name, "motion": args.motion, "dt": args.dt, "main": [m.row() for m in main],
                    "payload_sweep": [m.row() for m in sweep_rows], "dt_limits": limits,
                    "files": {k: str(v) for k, v in paths.items()}})
    else:
        print(f"{spec.title}: {args.motion} motion ({traj.duration:.2f} s), dt = {args.dt * 1000:.3g} ms")
        print_table(spec, main)
        if searches:
            print("largest stable dt (not stopped by the stability guard, joints settle; payload 0 kg):")
            for s in searches:
                cap = " (search cap; no instability found)" if s.capped else f" (unstable at {s.first_unstable_dt * 1000:.2f} ms)"
                print(f"  {s.mode.value:13s} {s.largest_stable_dt * 1000:8.2f} ms{cap}")
        for v in paths.values():
            print(f"wrote {v}")
    _progress(f"done in {time.perf_counter() - t_start:.1f} s")
    return 0


def compare_program(args: argparse.Namespace, spec) -> int:
    """``compare ROBOT --program FILE [--cell C]``: the program's preflight (as ``armtwin check``, with
    the cell's collision check), then one run per joint model (as ``armtwin run``, in the cell) and
    a table of the runs: path error, and where each workpiece ended against its target."""
    from ..controllers.gcode.compile import compile_report
    from ..envs.runner import RunConfig, run_program
    from ..envs.sim import JointMode
    from .cmd_check import EXIT_FAULTY, check, print_report
    for name, given in (("--motion", args.motion != "pick-place" or None), ("--payload", args.payload),
                        ("--dt", args.dt), ("--quick", args.quick or None), ("--video", args.video or None),
                        ("--gif", args.gif or None), ("--log", args.log)):
        if given is not None:
            raise CliError(f"{name} is for the built-in motions; --program runs the program at its own control "
                           f"period and payload (armtwin run --video makes a program's video)")
    ns = argparse.Namespace(**vars(args))
    ns.robot, ns.optional_stop, ns.clearance, ns.place = spec.name, False, None, None
    spec, machine, rep = check(ns, quiet=args.json)
    if not rep.clean():
        print_report(args.program, rep, spec, machine, False, ns.cell_check)
        print(f"{args.program}: refused: the preflight found faults; nothing was run", file=sys.stderr)
        return EXIT_FAULTY
    if rep.plan is None or rep.samples is None:
        raise CliError(f"{args.program}: the program does not move the robot")
    program = compile_report(rep, spec, machine.control_period)
    cell = ns.cell_check.cell if ns.cell_check is not None else None
    runs = {}
    t0 = time.perf_counter()
    for mode in JointMode:
        _progress(f"{Path(args.program).name}: {mode.value} run")
        runs[mode.value] = run_program(program, spec, RunConfig(mode=mode), name=Path(args.program).name, cell=cell)
    out = output_folder(args.out or f"out/compare_{spec.name}", "--out")
    rows = [{"mode": m, "rms_error_mm": r.rms_error_mm, "max_error_mm": r.max_error_mm, "wall_s": r.wall_time,
             "stable": r.stable, "drops": sum(e.event.kind.value == "drop" for e in r.grip_events),
             "pieces": [p.to_dict() for p in r.pieces]} for m, r in runs.items()]
    flat = [{k: v for k, v in row.items() if k != "pieces"} | {
        f"{p['piece']}_{k}": p[k] for p in row["pieces"] for k in ("offset_mm", "angle_deg") if k in p} for row in rows]
    write_csv(out / "program_runs.csv", flat)
    if args.json:
        print_json({"robot": spec.name, "program": args.program, "cell": None if cell is None else cell.name,
                    "runs": rows, "files": {"csv": str(out / "program_runs.csv")}})
    else:
        where = f" in the cell {cell.name!r}" if cell is not None else ""
        print(f"{spec.title}: {args.program}{where}, program time {rep.duration:.2f} s, "
              f"control period {machine.control_period * 1000:.3g} ms")
        print(f"{'joint model':14s} {'path RMS mm':>12s} {'max mm':>9s} {'wall s':>7s}  workpieces")
        for row in rows:
            pieces = "; ".join(f"{p['piece']} {p['offset_mm']:.2f} mm, {p['angle_deg']:.2f}° from its target"
                               if "offset_mm" in p else f"{p['piece']} at {p['xyz_mm']} mm" for p in row["pieces"])
            note = "" if row["stable"] else "  STOPPED (unstable)"
            drops = f"  {row['drops']} drop(s)" if row["drops"] else ""
            print(f"{row['mode']:14s} {row['rms_error_mm']:12.4f} {row['max_error_mm']:9.4f} {row['wall_s']:7.1f}  "
                  f"{pieces or '-'}{drops}{note}")
        print(f"wrote {out / 'program_runs.csv'}")
    _progress(f"done in {time.perf_counter() - t0:.1f} s")
    return 0
