"""``armtwin fk ROBOT J1 … Jn``: flange pose from joint values (deg; mm for prismatic)."""

from __future__ import annotations

import argparse

import numpy as np

from .cli import add_json_flag, get_robot, parse_joints_display, print_json


def register(sub) -> None:
    p = sub.add_parser("fk", help="forward kinematics: flange pose for joint values (deg, mm)")
    p.add_argument("robot", help="robot id (see `armtwin robots`)")
    p.add_argument("joints", nargs="+", metavar="J", help="joint values: degrees (mm for the SCARA's J3)")
    add_json_flag(p)
    p.set_defaults(func=run)


def pose_report(T: np.ndarray) -> dict:
    """Position (mm), quaternion (x, y, z, w), rotation matrix and URDF RPY (deg) of a pose."""
    from ..controllers.transforms import matrix_to_quat, matrix_to_rpy
    T = np.asarray(T, dtype=float) + 0.0  # no "-0.000" in reports
    T[np.abs(T) < 1e-12] = 0.0
    return {
        "position_mm": (T[:3, 3] * 1000).tolist(),
        "quaternion_xyzw": matrix_to_quat(T[:3, :3]).tolist(),
        "rotation": T[:3, :3].tolist(),
        "rpy_deg": np.degrees(matrix_to_rpy(T[:3, :3])).tolist(),
    }


def run(args: argparse.Namespace) -> int:
    from ..controllers.kinematics import chain_of, fk
    spec = get_robot(args.robot)
    q = parse_joints_display(spec, args.joints)
    rep = pose_report(fk(chain_of(spec), q))
    if args.json:
        print_json({"robot": spec.name, "joints": spec.to_display(q).tolist(), **rep})
        return 0
    x, y, z = rep["position_mm"]
    print(f"{spec.title} flange (tool0) in the base frame")
    print(f"  position   mm   x={x:10.3f}  y={y:10.3f}  z={z:10.3f}")
    qx, qy, qz, qw = rep["quaternion_xyzw"]
    print(f"  quaternion xyzw {qx:9.6f} {qy:9.6f} {qz:9.6f} {qw:9.6f}")
    r, p_, yw = rep["rpy_deg"]
    print(f"  rpy deg    (URDF fixed-axis X, Y, Z) {r:9.4f} {p_:9.4f} {yw:9.4f}")
    print("  rotation")
    for row in rep["rotation"]:
        print("    " + " ".join(f"{v:10.6f}" for v in row))
    return 0
