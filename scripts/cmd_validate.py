"""``armtwin validate [ROBOT …]``: FK tables and IK round trips, like the published validation tables.

Per robot: the flange pose (mm, URDF RPY in degrees, quaternion x y z w) for a set of joint
vectors (the named poses and three fixed in-range vectors); then, for each of them, every
closed-form IK solution of that pose with its branch, whether it is inside the joint ranges,
its FK error, and which one the shortest-travel rule picks from the home pose, and whether
that choice is singular (which singularity, which joints were kept). Exit code 0 when every
solution reproduces its pose (1e-9 m, 1e-9 rad) and the original joints (exactly, to 1e-9; wide
joints like the IRB120's J6 and the SCARA's J4 are not compared modulo 2π) are among the
solutions; 1 otherwise.
"""

from __future__ import annotations

import argparse

import numpy as np

from .cli import add_json_flag, get_robot, print_json

POS_TOL = 1e-9   # m
ROT_TOL = 1e-9   # rad

# Published check: ABB's IRB120 at all-zero joints has its flange at (374, 0, 630) mm (docs/ROBOTS.md).
PUBLISHED = {"irb120": [((0, 0, 0, 0, 0, 0), (374.0, 0.0, 630.0))]}


def register(sub) -> None:
    p = sub.add_parser("validate", help="FK tables and IK round trips for every robot (like the published tables)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("robots", nargs="*", metavar="ROBOT", help="robot ids (default: all)")
    add_json_flag(p)
    p.set_defaults(func=run)


def test_vectors(spec) -> list[tuple[str, np.ndarray]]:
    """Named poses plus three fixed in-range joint vectors (seeded), rad / m."""
    out = [(name, spec.pose(name)) for name in spec.named_poses]
    rng = np.random.default_rng(20240601)
    mid, half = (spec.upper + spec.lower) / 2, (spec.upper - spec.lower) / 2
    for k in range(3):
        out.append((f"test{k + 1}", mid + half * rng.uniform(-0.7, 0.7, spec.dof)))
    return out


def _pose_error(spec, Ta, Tb) -> tuple[float, float]:
    from ..controllers.transforms import rotation_angle
    dp = float(np.linalg.norm(Ta[:3, 3] - Tb[:3, 3]))
    if spec.roll_only:
        ra, rb = np.arctan2(Ta[1, 0], Ta[0, 0]), np.arctan2(Tb[1, 0], Tb[0, 0])
        return dp, float(abs(np.remainder(ra - rb + np.pi, 2 * np.pi) - np.pi))
    return dp, float(rotation_angle(Ta[:3, :3], Tb[:3, :3]))


def validate_robot(spec) -> dict:
    """FK rows and IK round trips of one robot (plain data, display units)."""
    from ..controllers.ik import solve
    from ..controllers.kinematics import chain_of, fk
    from ..controllers.transforms import matrix_to_quat, matrix_to_rpy
    chain = chain_of(spec)
    fk_rows, ik_rows = [], []
    passed = True
    for name, q in test_vectors(spec):
        T = fk(chain, q)
        fk_rows.append({"name": name, "joints": spec.to_display(q).tolist(), "position_mm": (T[:3, 3] * 1000).tolist(),
                        "rpy_deg": np.degrees(matrix_to_rpy(T[:3, :3])).tolist(), "quaternion_xyzw": matrix_to_quat(T[:3, :3]).tolist()})
        r = solve(spec, T, spec.home)
        sols = []
        found = False
        for s in r.solutions:
            dp, da = _pose_error(spec, fk(chain, s.q), T)
            same = bool(np.allclose(s.q, q, rtol=0.0, atol=1e-9))
            found |= same
            reach = dp <= POS_TOL and da <= ROT_TOL
            passed &= reach
            sols.append({"joints": spec.to_display(s.q).tolist(), "branch": s.branch, "within_limits": bool(s.within_limits),
                         "chosen": bool(r.best is not None and np.array_equal(s.q, r.best)), "original": same,
                         "err_pos_m": dp, "err_rot_rad": da})
        passed &= found
        ik_rows.append({"name": name, "status": r.status.value, "best_branch": r.best_branch,
                        "singular": bool(r.singular), "free_joints": [j + 1 for j in r.free_joints],
                        "reason": r.reason, "original_found": found, "solutions": sols})
    published = []
    for q_deg, xyz in PUBLISHED.get(spec.name, []):
        got = fk(chain, np.radians(q_deg))[:3, 3] * 1000
        ok = bool(np.allclose(got, xyz, atol=1e-6))
        passed &= ok
        published.append({"joints": list(q_deg), "expected_mm": list(xyz), "got_mm": got.tolist(), "ok": ok})
    return {"robot": spec.name, "title": spec.title, "passed": bool(passed), "fk": fk_rows, "ik": ik_rows, "published": published}


def _fmt(values, width=8, prec=2) -> str:
    v = np.asarray(values, dtype=float)
    v = np.where(np.abs(v) < 0.5 * 10 ** -prec, 0.0, v)
    return " ".join(f"{x:{width}.{prec}f}" for x in v)


def _print(spec, rep: dict) -> None:
    units = ", ".join(f"J{i + 1} {u}" for i, u in enumerate(spec.display_units()))
    print(f"== {rep['title']} ({rep['robot']}) ==")
    print(f"FK, flange tool0 in the base frame ({units}; position mm; URDF RPY deg; quaternion x y z w)")
    w = 9 * spec.dof
    print(f"  {'pose':<7} {'joints':<{w}} {'x':>9} {'y':>9} {'z':>9}   {'roll':>8} {'pitch':>8} {'yaw':>8}   quaternion")
    for row in rep["fk"]:
        print(f"  {row['name']:<7} {_fmt(row['joints']):<{w}} {_fmt(row['position_mm'], 9, 2)}   {_fmt(row['rpy_deg'], 8, 2)}   {_fmt(row['quaternion_xyzw'], 7, 4)}")
    for p in rep["published"]:
        print(f"  published: joints {p['joints']} -> flange {p['expected_mm']} mm; got {_fmt(p['got_mm'], 0, 3)}: {'OK' if p['ok'] else 'MISMATCH'}")
    print("IK round trips from the home pose (* chosen by the shortest-travel rule, = the original joints, ✓ inside the ranges)")
    for row in rep["ik"]:
        n_in = sum(s["within_limits"] for s in row["solutions"])
        print(f"  {row['name']}: {len(row['solutions'])} solutions, {n_in} inside the ranges; "
              f"status {row['status']}; original {'found' if row['original_found'] else 'NOT FOUND'}")
        if row["singular"]:
            print(f"    singular: {row['reason'].partition('; singular: ')[2] or row['reason']}")
        for s in row["solutions"]:
            mark = ("*" if s["chosen"] else " ") + ("=" if s["original"] else " ") + ("✓" if s["within_limits"] else "✗")
            print(f"    {mark} {s['branch']:<18} {_fmt(s['joints'])}   err {s['err_pos_m'] * 1000:.1e} mm {np.degrees(s['err_rot_rad']):.1e}°")
    print(f"  => {'PASS' if rep['passed'] else 'FAIL'} (every solution within {POS_TOL:g} m / {ROT_TOL:g} rad; original found)")
    print()


def run(args: argparse.Namespace) -> int:
    from ..robots import names
    specs = [get_robot(n) for n in (args.robots or names())]
    reports = [validate_robot(s) for s in specs]
    if args.json:
        print_json({"passed": all(r["passed"] for r in reports), "robots": reports})
    else:
        for s, r in zip(specs, reports):
            _print(s, r)
        print("validate: " + ", ".join(f"{r['robot']} {'PASS' if r['passed'] else 'FAIL'}" for r in reports))
    return 0 if all(r["passed"] for r in reports) else 1
