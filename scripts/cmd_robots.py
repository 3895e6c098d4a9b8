"""``armtwin robots``: list the robots with their axes, reach, payload, joint ranges and speeds."""

from __future__ import annotations

import argparse

import numpy as np

from .cli import add_json_flag, print_json


def register(sub) -> None:
    p = sub.add_parser("robots", help="list the robots (axes, reach, payload, joint ranges and speeds)")
    add_json_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .. import robots
    rows = []
    for name in robots.names():
        s = robots.get(name)
        rows.append({
            "id": s.name, "title": s.title, "maker": s.maker, "axes": s.dof,
            "joints": "".join("P" if p else "R" for p in s.prismatic),
            "reach_mm": round(s.reach * 1000, 1), "payload_kg": s.payload,
            "ranges": [f"{lo:g}…{hi:g} {u}" for lo, hi, u in zip(np.round(s.to_display(s.lower), 3), np.round(s.to_display(s.upper), 3), s.display_units())],
            "speeds": [f"{v:g} {u}/s" for v, u in zip(np.round(s.to_display(s.max_velocity), 2), s.display_units())],
        })
    if args.json:
        print_json(rows)
        return 0
    print(f"{'id':<9} {'robot':<32} {'axes':>4} {'type':<7} {'reach mm':>9} {'payload kg':>10}")
    for r in rows:
        print(f"{r['id']:<9} {r['title']:<32} {r['axes']:>4} {r['joints']:<7} {r['reach_mm']:>9.0f} {r['payload_kg']:>10g}")
    print()
    print("joint ranges (max speed)")
    for r in rows:
        joints = "  ".join(f"J{i + 1} {rng} ({spd})" for i, (rng, spd) in enumerate(zip(r["ranges"], r["speeds"])))
        print(f"{r['id']:<9} {joints}")
    return 0
