"""``armtwin plot twin.csv [--out twin.png]``: virtual vs servo joints, twin error and latency.

Fault windows (rows whose Fault is not ``OK``) are shaded, one colour per fault kind.
"""

from __future__ import annotations

import argparse
import csv
import os

import numpy as np

from .cli import CliError

_COLOURS = {"POWER": "#d62728", "LINK": "#7f7f7f", "WATCHDOG": "#ff7f0e", "STALL": "#9467bd", "RANGE": "#8c564b",
            "RX_ERROR": "#e377c2", "LATE": "#17becf"}


def register(sub) -> None:
    p = sub.add_parser("plot", help="plot a twin CSV log (joints, error, latency, faults) to PNG")
    p.add_argument("log", help="CSV written by `armtwin sync --log`")
    p.add_argument("--out", default=None, help="PNG path (default: the log's name with .png)")
    p.set_defaults(func=run)


def read_log(path: str) -> dict:
    """Columns of a twin log as arrays (``Fault`` as a list of str); CliError on a bad file."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, csv.Error):
        raise CliError(f"{path}: not a twin log (not a text CSV file)") from None
    if not rows or rows[0][:2] != ["STT", "Time"] or rows[0][-1] != "Fault":
        raise CliError(f"{path}: not a twin log (expected a header STT, Time, …, Fault)")
    head = rows[0]
    body = [r for r in rows[1:] if len(r) == len(head)]  # a row cut by a crash is skipped
    if not body:
        raise CliError(f"{path}: the log has no samples")
    out: dict = {}
    for i, name in enumerate(head):
        col = [r[i] for r in body]
        if name == "Fault":
            out[name] = col
        else:
            try:
                out[name] = np.array([float(v) for v in col])
            except ValueError:
                raise CliError(f"{path}: column {name} has a non-number") from None
    return out


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
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    d = read_log(args.log)
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
    rate = (n - 1) / (t[-1] - t[0]) if n > 1 and t[-1] > t[0] else float("nan")
    title = f"{os.path.basename(args.log)}: {n} samples, {rate:.0f} Hz"
    if lat.size:
        title += f", latency p50 {np.median(lat):.2f} ms"
    ax[0].set_title(title)
    fig.tight_layout()
    out = args.out or os.path.splitext(args.log)[0] + ".png"
    try:
        fig.savefig(out, dpi=110)
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
    print(out)
    return 0
