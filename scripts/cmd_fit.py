"""``armtwin fit LOG.csv``: fit the servo rig's motor model to a twin log, and check it on the rest.

For every joint of the log (or ``--joints``): the motor's inertia, viscous and Coulomb friction,
motor constant, the H-bridge's dead band and the link's delays are fitted (SciPy; the firmware's
loop simulated from the logged commands, :mod:`armtwin.controllers.ident`) on the first
``--fit-fraction`` of the log, and the rest is predicted with the data-sheet motor and with the
fitted one. Printed per joint: each parameter (data sheet, fitted, 95 % confidence) or *not
identifiable* when the log cannot tell it, the held-out prediction error before and after (RMS
and max, deg), and the fit's time. ``--save FILE.toml`` writes the fitted motor in the format
``rig_emulator --motor-params`` reads (a "virtual rig" that predicts the real one); ``--plot``
draws measured against predicted.

A log for it comes from ``armtwin sync`` driving the rig through an excitation (chirps, ramps,
steps, power cuts: :func:`armtwin.controllers.ident.excitation`); ``armtwin bench fit`` makes
one on a simulated rig.

``--model hinge`` and ``--model articulation`` (with ``--robot``) fit a joint model's drive instead
(:mod:`armtwin.envs.hinge_fit`, :mod:`armtwin.envs.articulation_fit`): the hinge model's stiffness
and damping per joint, or the articulation model's two gains and per joint its damping and force
limit, to a run log of ``armtwin run --log`` (simulated again with the tool its flange carried: the
log's first tool, looked up in ``--tools`` or the built-in table) or to the servo rig's twin log
(``armtwin sync --log``: the model commanded with the log's virtual joints follows the rig's measured
ones, over the log's longest stretch without a fault; the joints the rig does not stand for stay at
home). Values the log cannot tell are reported as not identifiable and keep the data file's value; a
fit that predicts the held-out part worse than the unfitted model is flagged.

Exit codes: 0 fitted; 2 bad input (not a twin log, too short, an unknown joint, bad options).
Needs the ``fit`` extra (SciPy, Numba).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from ..envs.drive_fit import Target
from .cli import CliError, add_json_flag, missing_extra, output_file, print_json

#: the joint models whose drive is fitted to a run log
JOINT_MODELS = ("hinge", "articulation")

_UNITS = {"inertia": ("kg·m²", 1.0), "viscous": ("N·m·s/rad", 1.0), "coulomb": ("mN·m", 1e3),
          "motor_constant": ("mV·s/rad", 1e3), "dead_band": ("V", 1.0), "delay_down": ("ms", 1e3),
          "delay_up": ("ms", 1e3), "delay_total": ("ms", 1e3), "resistance": ("Ω", 1.0)}


def register(sub) -> None:
    p = sub.add_parser("fit", help="fit the servo rig's motor model to a twin log, or a joint model's drive to a "
                                   "run log; report on a held-out part")
    p.add_argument("log", help="twin log (.csv, .mcap) from `armtwin sync --log` (every --model) or run log from "
                               "`armtwin run --log` (--model hinge|articulation)")
    p.add_argument("--model", choices=["motor", *JOINT_MODELS], default="motor",
                   help="what to fit: motor (the rig's DC motor, H-bridge and link delays, from a twin log; default), "
                        "hinge (the hinge joint model's stiffness and damping per joint, from a run log) or "
                        "articulation (the articulation model's position and velocity gains, and per joint its damping "
                        "and force limit, from a run log)")
    p.add_argument("--robot", help="--model hinge|articulation: the robot of the run log (required)")
    p.add_argument("--tools", metavar="FILE.toml",
                   help="--model hinge|articulation: the tool table of the run (its first tool's mass is simulated; "
                        "default the built-in table)")
    p.add_argument("--target", choices=[t.value for t in Target], default=Target.MEASURED.value,
                   help="--model hinge|articulation: follow the run's joints (measured: e.g. a run of the articulation model; "
                        "default) or its commanded trajectory (commanded: the reference)")
    p.add_argument("--max-fit-seconds", type=float, default=6.0, metavar="S",
                   help="--model hinge|articulation: fit at most the log's first S seconds (1 to 60, default 6; every candidate "
                        "is simulated)")
    p.add_argument("--joints", metavar="J1,J2", help="joint labels of the log to fit (default: all), e.g. j1,j2")
    p.add_argument("--fit-fraction", type=float, default=0.7, metavar="F",
                   help="fit the first F of the log's time, check on the rest (0.5 to 0.9, default 0.7)")
    p.add_argument("--generations", type=int, default=60, metavar="N",
                   help="generations of the derivative-free search (0 to 500; 0: least squares only; default 60)")
    p.add_argument("--save", metavar="FILE.toml", help="write the fitted motor (per joint: FILE_<joint>.toml with "
                                                         "several), or the fitted hinge gains or articulation "
                                                         "drive with the robot's name and their 95 %% confidence "
                                                         "factors (for run --hinge-gains / --articulation-drive; "
                                                         "hinge gains also for randomize={\"fitted\": FILE})")
    p.add_argument("--plot", metavar="FILE.png", help="plot measured and predicted servo angles (--model motor) or "
                                                      "joints (--model hinge|articulation)")
    add_json_flag(p)
    p.set_defaults(func=run)


def _save_path(path: str, label: str, many: bool) -> Path:
    p = Path(path)
    return p.with_name(f"{p.stem}_{label}{p.suffix}") if many else p


def run(args: argparse.Namespace) -> int:
    if not (0.5 <= args.fit_fraction <= 0.9):
        raise CliError(f"--fit-fraction {args.fit_fraction:g}: must be from 0.5 to 0.9")
    if not (0 <= args.generations <= 500):
        raise CliError(f"--generations {args.generations}: must be from 0 to 500")
    if args.save:
        output_file(args.save, "--save", (".toml",))
    if args.plot:
        output_file(args.plot, "--plot", (".png",))
    if args.model in JOINT_MODELS:
        return _run_joint_model(args)
    for opt, given in (("--robot", args.robot), ("--target", args.target != Target.MEASURED.value),
                       ("--max-fit-seconds", args.max_fit_seconds != 6.0), ("--tools", args.tools)):
        if given:
            raise CliError(f"{opt} belongs to --model hinge or articulation")
    try:
        import numba  # noqa: F401
        import scipy  # noqa: F401
    except ModuleNotFoundError as exc:
        raise missing_extra(exc.name or "scipy", "fit") from None
    from ..controllers.ident import fit_motor, simulate_loop, traces_of, write_params_file
    from ..envs.rig import read_twin_log
    log = read_twin_log(args.log)
    labels = [s.strip() for s in args.joints.split(",")] if args.joints else None
    try:
        traces = traces_of(log, labels)
    except ValueError as exc:
        raise CliError(f"{args.log}: {exc}") from None
    reports = []
    for tr in traces:
        if not args.json:
            print(f"fitting {tr.label}: {len(tr.t)} samples over {tr.t[-1] - tr.t[0]:.1f} s …", file=sys.stderr, flush=True)
        try:
            reports.append(fit_motor(tr, fit_fraction=args.fit_fraction, generations=args.generations))
        except ValueError as exc:
            raise CliError(f"{args.log}: {exc}") from None
    saved = []
    if args.save:
        for rep in reports:
            path = _save_path(args.save, rep.label, len(reports) > 1)
            write_params_file(path, rep.fitted, comment=f"fitted by armtwin fit to {args.log}, joint {rep.label}")
            saved.append(str(path))
    if args.plot:
        _plot(args.plot, traces, reports, simulate_loop)
    if args.json:
        print_json({"log": args.log, "model": args.model, "joints": [report_dict(r) for r in reports],
                    "saved": saved, "plot": args.plot})
        return 0
    for rep in reports:
        print_report(rep)
    for name in saved:
        print(f"wrote {name}")
    if args.plot:
        print(f"wrote {args.plot}")
    return 0


def report_dict(rep) -> dict:
    """One joint's :class:`~armtwin.controllers.ident.FitReport` as JSON data (also ``rig identify``'s)."""
    return {"joint": rep.label, "fit_seconds": rep.seconds, "simulations": rep.evaluations,
            "split_time_s": rep.split_time,
            "held_out_deg": {"rms_before": rep.rms_before, "max_before": rep.max_before,
                             "rms_after": rep.rms_after, "max_after": rep.max_after},
            "fit_rms_deg": rep.rms_fit,
            "parameters": {p.name: {"value": p.value, "ci95": p.ci95, "start": p.start, "identifiable": p.identifiable,
                                    "fixed": p.fixed} for p in rep.params},
            "not_identifiable": rep.not_identifiable}


def _fmt(v: float | None, factor: float) -> str:
    if v is None or not math.isfinite(v):
        return "—"
    return f"{v * factor:.4g}"


def print_report(rep) -> None:
    """One joint's fit for people: each parameter, then the held-out prediction (also ``rig identify``'s)."""
    print(f"joint {rep.label}: fitted on t <= {rep.split_time:.1f} s in {rep.seconds:.1f} s ({rep.evaluations} simulations)")
    print(f"  {'parameter':15s} {'unit':>10s} {'data sheet':>11s} {'fitted':>11s} {'± 95 %':>10s}")
    for p in rep.params:
        unit, f = _UNITS[p.name]
        fitted = "fixed" if p.fixed else ("not identifiable" if p.value is None else _fmt(p.value, f))
        print(f"  {p.name:15s} {unit:>10s} {_fmt(p.start, f):>11s} {fitted:>11s} {_fmt(p.ci95, f):>10s}")
    if rep.not_identifiable:
        print(f"  not identifiable: {rep.not_identifiable}")
    print(f"  held-out prediction (t > {rep.split_time:.1f} s): RMS {rep.rms_before:.3f} -> {rep.rms_after:.3f} deg, "
          f"max {rep.max_before:.3f} -> {rep.max_after:.3f} deg (data sheet -> fitted)")


def _plot(path: str, traces, reports, simulate_loop) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    fig, axes = plt.subplots(2 * len(traces), 1, figsize=(11, 4.2 * len(traces)), sharex=True, squeeze=False)
    for k, (tr, rep) in enumerate(zip(traces, reports)):
        pred = simulate_loop(tr, np.vstack([[p.start for p in rep.params[:7]], rep.fitted.vector()]), rep.fitted,
                             exact=True)
        a, b = axes[2 * k, 0], axes[2 * k + 1, 0]
        a.plot(tr.t, tr.virtual, color="0.6", lw=0.8, label="commanded")
        a.plot(tr.t, tr.servo, color="k", lw=1.0, label="measured")
        a.plot(tr.t, pred[1], color="tab:red", lw=0.8, ls="--", label="predicted (fitted)")
        a.set_ylabel(f"{tr.label} (deg)")
        b.plot(tr.t, pred[0] - tr.servo, color="tab:blue", lw=0.6, label=f"data sheet (held-out RMS {rep.rms_before:.3f}°)")
        b.plot(tr.t, pred[1] - tr.servo, color="tab:red", lw=0.6, label=f"fitted (held-out RMS {rep.rms_after:.3f}°)")
        b.set_ylabel("predicted − measured (deg)")
        for ax in (a, b):
            ax.axvline(rep.split_time, color="k", ls=":", lw=1)
            ax.legend(loc="upper right", fontsize=8)
        a.set_title(f"{tr.label}: fitted left of the dotted line, checked right of it")
        unpowered = ~tr.powered
        if unpowered.any():
            a.fill_between(tr.t, *a.get_ylim(), where=unpowered, color="orange", alpha=0.2, lw=0)
    axes[-1, 0].set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----- --model hinge ------------------------------------------------------------------------------

def _run_joint_model(args: argparse.Namespace) -> int:
    """``armtwin fit RUN.csv --model hinge|articulation --robot R``: a joint model's drive fitted to a run log."""
    from .cli import get_robot
    model = args.model
    if not args.robot:
        raise CliError(f"--model {model} needs --robot (the robot of the run log)")
    if not (1.0 <= args.max_fit_seconds <= 60.0):
        raise CliError(f"--max-fit-seconds {args.max_fit_seconds:g}: must be from 1 to 60")
    for opt, given in (("--joints", args.joints), ("--generations", args.generations != 60)):
        if given:
            raise CliError(f"{opt} belongs to --model motor")
    spec = get_robot(args.robot)
    try:
        import scipy  # noqa: F401
    except ModuleNotFoundError as exc:
        raise missing_extra(exc.name or "scipy", "fit") from None
    from ..envs.drive_fit import is_twin_log, read_run_log
    twin = is_twin_log(args.log)
    try:
        trace, stretch = _twin_trace(args.log, spec) if twin else (read_run_log(args.log, spec), None)
    except OSError as exc:
        raise CliError(f"{args.log}: cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if twin and args.tools:
        raise CliError("--tools: a twin log is the servo rig's, which carries no tool")
    tool = _run_tool(args, trace.tool)
    if not args.json:
        what = (f"the rig's joints from t = {stretch:.2f} s ({trace.t[-1]:.1f} s without a fault)" if twin
                else f"{args.target} joints" + (f", T{tool.number} on the flange" if tool is not None else ""))
        print(f"fitting the {model} model's drive of {spec.name} to {args.log} ({what}) …", file=sys.stderr, flush=True)
    fit, write, as_dict, show = _JOINT_MODEL_FITS[model]()
    try:
        rep = fit(spec, trace, target=args.target, fit_fraction=args.fit_fraction,
                  max_fit_seconds=args.max_fit_seconds, tool=tool)
    except ValueError as exc:
        raise CliError(f"{args.log}: {exc}") from None
    if args.save:
        write(args.save, rep.fitted, comment=f"{model} drive of {spec.name} fitted by armtwin fit to "
                                             f"{args.log} ({args.target} joints)",
              robot=spec.name, ci95_factor=rep.ci95_factor)
    if args.plot:
        _plot_joint_model(args.plot, spec, trace, rep, model, twin)
    if args.json:
        print_json({"log": args.log, "model": model, "robot": spec.name, "tool": 0 if tool is None else tool.number,
                    "twin_log_from_s": stretch, **as_dict(rep), "saved": args.save, "plot": args.plot})
        return 0
    show(spec, rep)
    if rep.improved and _held_worse(rep):
        print(f"  warning: the fitted drive predicts the held-out part worse than the {model} model's own; fit a "
              f"longer part of the log (--max-fit-seconds) before using it")
    if args.save:
        print(f"wrote {args.save}")
    if args.plot:
        print(f"wrote {args.plot}")
    return 0


def _plot_joint_model(path: str, spec, trace, rep, model: str, twin: bool) -> None:
    """Per joint the log measured and moved: the commanded, measured and fitted model's joint over time,
    and the unfitted and fitted model's error against the measured one; the fit/held-out split dotted."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    unit = np.where(spec.prismatic, 1e3, 180.0 / math.pi)
    goal = trace.q if rep.target.value == "measured" else trace.q_cmd
    seen = np.ones(spec.dof, dtype=bool) if trace.measured is None else np.asarray(trace.measured, dtype=bool)
    rows = [j for j in range(spec.dof) if seen[j] and np.ptp(trace.q_cmd[:, j]) > 1e-9] or [int(np.argmax(seen))]
    before, after = rep.predicted
    fig, axes = plt.subplots(len(rows), 2, figsize=(12, 2.6 * len(rows) + 0.6), sharex=True, squeeze=False)
    names = ("the data file's", "fitted") if model == "articulation" else ("the rule's", "fitted")
    for r, j in enumerate(rows):
        a, b = axes[r]
        u, what = unit[j], ("mm" if spec.prismatic[j] else "deg")
        a.plot(trace.t, trace.q_cmd[:, j] * u, color="0.6", lw=0.8, label="commanded")
        a.plot(trace.t, goal[:, j] * u, color="k", lw=1.0, label="rig (measured)" if twin else rep.target.value)
        if after is not None:
            a.plot(trace.t, after[:, j] * u, color="tab:red", lw=0.8, ls="--", label=f"{model} model, fitted")
        a.set_ylabel(f"J{j + 1} ({what})")
        for q, name, color in ((before, names[0], "tab:blue"), (after, names[1], "tab:red")):
            if q is not None:
                b.plot(trace.t, (q[:, j] - goal[:, j]) * u, color=color, lw=0.6, label=f"{name} drive")
        b.set_ylabel(f"model − {rep.target.value} ({what})")
        for ax in (a, b):
            ax.axvline(rep.split_time, color="k", ls=":", lw=1)
            ax.legend(loc="upper right", fontsize=7)
    axes[0, 0].set_title(f"{spec.name}, {model} model: fitted left of the dotted line, checked right of it")
    for ax in axes[-1]:
        ax.set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _twin_trace(path: str, spec):
    """A servo rig's twin log as a run of ``spec`` (:func:`~armtwin.envs.drive_fit.run_trace_of_twin`)
    and the log time its fault-free stretch starts at."""
    from ..envs.drive_fit import run_trace_of_twin
    from ..envs.rig import TwinLogError, read_twin_log
    try:
        log = read_twin_log(path)
    except TwinLogError as exc:
        raise ValueError(str(exc)) from None
    try:
        return run_trace_of_twin(log, spec)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _held_worse(rep) -> bool:
    """Whether a fit's held-out RMS error over all joints is above the unfitted model's."""
    after = rep.rms_fit_held
    before = getattr(rep, "rms_nominal_held", getattr(rep, "rms_rule_held", None))
    total = lambda e: math.sqrt(sum(float(v) ** 2 for v in e if math.isfinite(float(v))))  # noqa: E731
    return before is not None and total(after) > total(before)


def _run_tool(args: argparse.Namespace, number: int):
    """The tool of the run log's flange (``number``, 0: none) from ``--tools`` or the built-in table."""
    if number == 0:
        if args.tools:
            raise CliError(f"--tools: the run log's flange carried no tool ({args.log})")
        return None
    from .options import tool_settings
    tools = tool_settings(argparse.Namespace(tools=args.tools, tool=0))["tools"]
    if number not in tools:
        raise CliError(f"{args.log}: the run's flange carried T{number}, which the tool table ({tools.source}) does "
                       f"not hold; give the run's table with --tools")
    return tools[number]


def _hinge_fit():
    from ..envs.hinge_fit import fit_hinge, write_hinge_gains
    return fit_hinge, write_hinge_gains, hinge_dict, _print_hinge


def _articulation_fit():
    from ..envs.articulation_fit import fit_articulation, write_articulation_drive
    return fit_articulation, write_articulation_drive, articulation_dict, _print_articulation


_JOINT_MODEL_FITS = {"hinge": _hinge_fit, "articulation": _articulation_fit}


def hinge_dict(rep) -> dict:
    """A :class:`~armtwin.envs.hinge_fit.HingeFitReport` as JSON data."""
    lst = lambda a: [None if not math.isfinite(float(v)) else float(v) for v in a]  # noqa: E731
    return {"target": rep.target.value, "split_time_s": rep.split_time, "fit_seconds": rep.seconds,
            "simulations": rep.simulations, "improved": rep.improved,
            "rule": {n: list(getattr(rep.rule, n)) for n in ("stiffness", "damping", "joint_damping")},
            "fitted": {n: list(getattr(rep.fitted, n)) for n in ("stiffness", "damping", "joint_damping")},
            "ci95_factor": {n: lst(v) for n, v in rep.ci95_factor.items()},
            "rms_fit_part": {"rule": lst(rep.rms_rule), "fitted": lst(rep.rms_fit)},
            "rms_held_out": {"rule": lst(rep.rms_rule_held), "fitted": lst(rep.rms_fit_held)},
            "max_held_out": {"rule": rep.max_rule_held, "fitted": rep.max_fit_held},
            "stability_eigenvalue": {"rule": rep.eigen_rule, "fitted": rep.eigen_fit}}


def _print_hinge(spec, rep) -> None:
    print(f"{spec.name}: hinge gains fitted to the {rep.target.value} joints on t <= {rep.split_time:.2f} s in "
          f"{rep.seconds:.1f} s ({rep.simulations} simulations)"
          + ("" if rep.improved else " — no better than the rule: the rule's gains are kept"))
    print(f"  {'joint':5s} {'K rule':>9s} {'K fitted':>9s} {'×/÷ 95 %':>9s} {'D+d rule':>9s} {'D+d fit':>9s} "
          f"{'×/÷ 95 %':>9s}   {'RMS fitted part':>17s}   {'RMS held out':>17s}   (deg; mm prismatic; rule -> fitted)")
    ci = rep.ci95_factor or {n: (math.nan,) * spec.dof for n in ("stiffness", "damping")}
    for j in range(spec.dof):
        c0 = rep.rule.damping[j] + rep.rule.joint_damping[j]
        c1 = rep.fitted.damping[j] + rep.fitted.joint_damping[j]
        print(f"  J{j + 1:<4d} {rep.rule.stiffness[j]:9.4g} {rep.fitted.stiffness[j]:9.4g} {_pm(ci['stiffness'][j]):>9s} "
              f"{c0:9.4g} {c1:9.4g} {_pm(ci['damping'][j]):>9s}   {rep.rms_rule[j]:7.3f} -> {rep.rms_fit[j]:7.3f}   "
              f"{rep.rms_rule_held[j]:7.3f} -> {rep.rms_fit_held[j]:7.3f}")
    print(f"  held out (t > {rep.split_time:.2f} s), all joints: max {rep.max_rule_held:.3f} -> {rep.max_fit_held:.3f}; "
          f"stability eigenvalue at the rule's step {rep.eigen_rule:.2f} -> {rep.eigen_fit:.2f} (limit 4)")


def _pm(v: float) -> str:
    """A confidence factor for the table: ``open`` when the interval spans the fit's whole search range
    (the log cannot tell the gain)."""
    from ..envs.hinge_fit import FIT_RANGE
    return "—" if math.isnan(v) else ("open" if v >= FIT_RANGE ** 2 else f"{v:.3g}")


def _finite(a) -> list:
    return [None if not math.isfinite(float(v)) else float(v) for v in a]


def articulation_dict(rep) -> dict:
    """An :class:`~armtwin.envs.articulation_fit.ArticulationFitReport` as JSON data (a factor that is
    not finite, a value the log cannot tell, is null and named in ``not_identifiable``)."""
    from ..envs.articulation_fit import DRIVE_KEYS

    def values(d) -> dict:
        return {k: (getattr(d, k) if k in ("position_gain", "velocity_gain") else list(getattr(d, k))) for k in DRIVE_KEYS}

    return {"target": rep.target.value, "split_time_s": rep.split_time, "fit_seconds": rep.seconds,
            "simulations": rep.simulations, "improved": rep.improved,
            "nominal": values(rep.nominal), "fitted": values(rep.fitted),
            "ci95_factor": {k: _finite(v) for k, v in rep.ci95_factor.items()},
            "not_identifiable": rep.not_identifiable,
            "rms_fit_part": {"nominal": _finite(rep.rms_nominal), "fitted": _finite(rep.rms_fit)},
            "rms_held_out": {"nominal": _finite(rep.rms_nominal_held), "fitted": _finite(rep.rms_fit_held)},
            "max_held_out": {"nominal": rep.max_nominal_held, "fitted": rep.max_fit_held}}


def _print_articulation(spec, rep) -> None:
    ci = rep.ci95_factor
    print(f"{spec.name}: articulation drive fitted to the {rep.target.value} joints on t <= {rep.split_time:.2f} s in "
          f"{rep.seconds:.1f} s ({rep.simulations} simulations)"
          + ("" if rep.improved else " — no better than the data file's: its drive is kept"))
    for key in ("position_gain", "velocity_gain"):
        print(f"  {key:13s} {getattr(rep.nominal, key):9.4g} -> {getattr(rep.fitted, key):9.4g}  {_ni(ci[key][0])}")
    print(f"  {'joint':5s} {'damping':>9s} {'fitted':>9s} {'×/÷ 95 %':>17s} {'force lim':>9s} {'fitted':>9s} "
          f"{'×/÷ 95 %':>17s}   {'RMS fitted part':>17s}   {'RMS held out':>17s}   (deg; mm prismatic)")
    for j in range(spec.dof):
        print(f"  J{j + 1:<4d} {rep.nominal.joint_damping[j]:9.4g} {rep.fitted.joint_damping[j]:9.4g} "
              f"{_ni(ci['joint_damping'][j]):>17s} {rep.nominal.effort[j]:9.4g} {rep.fitted.effort[j]:9.4g} "
              f"{_ni(ci['effort'][j]):>17s}   {rep.rms_nominal[j]:7.4f} -> {rep.rms_fit[j]:7.4f}   "
              f"{rep.rms_nominal_held[j]:7.4f} -> {rep.rms_fit_held[j]:7.4f}")
    print(f"  held out (t > {rep.split_time:.2f} s), all joints: max {rep.max_nominal_held:.4f} -> {rep.max_fit_held:.4f}")
    if rep.not_identifiable:
        print(f"  not identifiable from this log (kept at the data file's value): {', '.join(rep.not_identifiable)}")


def _ni(factor: float) -> str:
    """A 95 % factor, or *not identifiable*."""
    return f"{factor:.3g}" if math.isfinite(factor) else "not identifiable"
