"""``armtwin plot LOG [--out LOG.png]``: a twin log's virtual vs servo joints, twin error and latency;
a run or compare MCAP log's joints and tracking error.

Twin logs (``sync --log``, CSV or MCAP): fault windows (rows whose Fault is not ``OK``) are
shaded, one colour per fault kind. Run and compare logs (``run --log x.mcap``, ``compare --log
x.mcap``): the commanded joints, and per joint model the joint error (measured − commanded) over
time with its RMS and maximum in the legend.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from .cli import CliError, output_file
from .options import same_file

#: image files the plot can be written to
PLOT_SUFFIXES = (".png", ".svg", ".pdf")

_COLOURS = {"POWER": "#d62728", "LINK": "#7f7f7f", "WATCHDOG": "#ff7f0e", "STALL": "#9467bd", "RANGE": "#8c564b",
            "RX_ERROR": "#e377c2", "LATE": "#17becf"}


def register(sub) -> None:
    p = sub.add_parser("plot", help="plot a log to PNG, SVG or PDF: a twin log (joints, error, latency, "
                                       "faults) or a run/compare MCAP log (joints, tracking error per joint model)")
    p.add_argument("log", help="twin log written by `armtwin sync --log` (.csv or .mcap), or an MCAP log of "
                               "`armtwin run --log` or `armtwin compare --log`")
    p.add_argument("--out", default=None, help="image file: .png, .svg or .pdf (default: the log's name with .png)")
    p.set_defaults(func=run)


def read_log(path: str):
    """The checked columns of a twin log, CSV or MCAP (:func:`armtwin.envs.rig.read_twin_log`:
    ``Fault`` as a list of str, the rest as arrays); CliError on a file that cannot be read or is
    not a valid log."""
    from ..envs.rig.log import read_twin_log
    return _read(read_twin_log, path)


def _read(reader, path: str):
    """``reader(path)``, with a file that cannot be read or is not a valid log as CliError (an
    MCAP file needs the telemetry extra)."""
    from ..envs.rig.log import TwinLogError
    if path.lower().endswith(".mcap"):
        from .cli import require_telemetry
        require_telemetry()
    try:
        return reader(path)
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except TwinLogError as exc:
        raise CliError(str(exc)) from None


def fault_windows(times: np.ndarray, faults: list[str]) -> list[tuple[str, float, float]]:
    """(kind, t_start, t_end) for each run of samples carrying fault ``kind``."""
    out = []
    kinds = sorted({k for f in faults if f != "OK" for k in f.split("|")})
    for k in kinds:
        on = np.array([k in f.split("|") for f in faults])
        edges = np.flatnonzero(np.diff(np.r_[0, on.astype(int), 0]))
        for a, b in zip(edges[::2], edges[1::2]):
            out.append((k, float(times[a]), float(times[min(b, len(times) - 1)])))
    return out


def run(args: argparse.Namespace) -> int:
    out = args.out or os.path.splitext(args.log)[0] + ".png"
    output_file(out, "--out", PLOT_SUFFIXES)
    if same_file(out, args.log):
        raise CliError(f"--out {out}: is the log itself; give another file name")
    if args.log.lower().endswith(".mcap"):
        runs = read_runs(args.log)
        if not runs.twin:
            return _save(plot_runs(runs, os.path.basename(args.log)), out)
    d = read_log(args.log)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t = d["Time"]
    joints = [c[len("Virtual_"):] for c in d if c.startswith("Virtual_")]
    fig, ax = plt.subplots(3, 1, figsize=(11, 8), sharex=True, gridspec_kw={"height_ratios": [2, 1.2, 1]})
    for k, j in enumerate(joints):
        c = f"C{k}"
        ax[0].plot(t, d[f"Virtual_{j}"], color=c, lw=1.4, label=f"{j.upper()} virtual")
        ax[0].plot(t, d[f"Servo_{j}"], color=c, lw=1.0, ls="--", label=f"{j.upper()} servo")
        ax[1].plot(t, d[f"Error_{j}"], color=c, lw=1.0, label=f"ΔE {j.upper()}")
    ax[2].plot(t, d["Latency_ms"], color="k", lw=0.8, label="latency")
    ax[0].set_ylabel("joint, deg")
    ax[1].set_ylabel("ΔE = virtual − servo, deg")
    ax[2].set_ylabel("latency, ms")
    ax[2].set_xlabel("time, s")
    seen = set()
    for kind, a, b in fault_windows(t, d["Fault"]):
        for x in ax:
            x.axvspan(a, b, color=_COLOURS.get(kind, "#bcbd22"), alpha=0.18, lw=0,
                      label=f"fault {kind}" if (x is ax[0] and kind not in seen) else None)
        seen.add(kind)
    for x in ax:
        x.grid(alpha=0.3)
        x.legend(loc="upper right", fontsize=8, ncol=2)
    lat = d["Latency_ms"][np.isfinite(d["Latency_ms"])]
    n = len(t)
    title = f"{os.path.basename(args.log)}: {n} sample{'s' if n != 1 else ''}"
    if n > 1 and t[-1] > t[0]:
        title += f", {(n - 1) / (t[-1] - t[0]):.0f} Hz"
    if lat.size:
        title += f", latency p50 {np.median(lat):.2f} ms"
    ax[0].set_title(title)
    return _save(fig, out)


def _save(fig, out: str) -> int:
    """Write ``fig`` to ``out``, close it and print the path."""
    import matplotlib.pyplot as plt
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=110)
    except OSError as exc:
        raise CliError(f"--out {out}: cannot write it: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
    print(out)
    return 0


def read_runs(path: str):
    """The joint runs of an MCAP log (:func:`armtwin.envs.telemetry.reader.read_joint_runs`); CliError
    on a file that cannot be read or holds no joints."""
    from .cli import require_telemetry
    require_telemetry()                 # before the reader's module, which imports mcap
    from ..envs.telemetry.reader import read_joint_runs
    return _read(read_joint_runs, path)


def plot_runs(runs, name: str):
    """The figure of a run or compare log: commanded joints (deg / mm) above, and per joint model the
    largest joint error over the joints at each period (revolute in deg; prismatic in mm below)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    pris = np.array(runs.prismatic, dtype=bool)
    scale = np.where(pris, 1e3, np.degrees(1.0))            # rad → deg, m → mm
    groups = [(g, lab) for g, lab in ((~pris, "joint error, deg"), (pris, "joint error, mm")) if g.any()]
    fig, ax = plt.subplots(1 + len(groups), 1, figsize=(11, 3 + 2.6 * len(groups)), sharex=True)
    first = next(iter(runs.runs.values()))
    ref = first.q_ref if np.isfinite(first.q_ref).any() else first.q
    for j, jn in enumerate(runs.names):
        ax[0].plot(first.t, ref[:, j] * scale[j], lw=1.2, label=f"{jn} ({'mm' if pris[j] else 'deg'})")
    ax[0].set_ylabel("commanded joints\n" + ("deg / mm" if pris.any() else "deg"))
    for k, (model, run) in enumerate(runs.runs.items()):
        err = np.abs(run.q - run.q_ref) * scale
        for a, (g, lab) in zip(ax[1:], groups):
            e = np.max(err[:, g], axis=1)
            ok = e[np.isfinite(e)]
            stats = f"RMS {np.sqrt(np.mean(ok ** 2)):.3g}, max {ok.max():.3g}" if ok.size else "no commanded joints"
            a.plot(run.t, e, color=f"C{k}", lw=1.1, label=f"{model or 'run'}: {stats}")
            a.set_ylabel(f"largest {lab}")
    ax[-1].set_xlabel("time, s")
    for a in ax:
        a.grid(alpha=0.3)
        a.legend(loc="upper right", fontsize=8, ncol=2 if a is ax[0] else 1)
    models = [m or "run" for m in runs.runs]
    ax[0].set_title(f"{name}: {', '.join(models)}; {len(first.t)} periods over {first.t[-1] - first.t[0]:.2f} s")
    return fig
