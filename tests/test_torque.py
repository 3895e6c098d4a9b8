"""``armtwin torque``: the torque budget of a G-code program, checked against PyBullet's inverse dynamics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.dynamics import inverse_dynamics
from armtwin.controllers.gcode import machine_for
from armtwin.controllers.gcode.preflight import preflight
from armtwin.controllers.torque_budget import MAX_EXCESSES, TorqueBudgetBuilder
from armtwin.controllers.gcode.trajectory import ControlTrajectory
from armtwin.envs.sim import World
from armtwin.robots.bodies import rigid_bodies
from armtwin.scripts.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

#: reaches out and holds a part there: line 4 moves out, line 5 dwells at the far pose, line 6 comes back
HEAVY = """(reach out with a heavy part)
G21 G90
G0 X-100 Y0 Z100
G1 X180 Z-80 F6000
G4 P0.5
G1 X-100 Z100 F6000
M30
"""


def _json(capsys, *argv) -> tuple[int, dict]:
    code = main(["torque", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _pybullet_torques(spec, text: str, payload: float):
    """(lines (K,), times (K,), torques (K, n)) of every control sample, the independent way: the runner's
    control trajectory, np.gradient for the accelerations, PyBullet's calculateInverseDynamics."""
    rep = preflight(text.encode(), spec, machine_for(spec, None))
    assert rep.clean(False)
    ps, q, qd = ControlTrajectory(rep, spec, rep.machine.control_period).arrays()
    qdd = np.gradient(qd, ps.t, axis=0, edge_order=1)
    with World(ground=False) as w:
        r = w.add_robot(spec, "kinematic", payload=payload)
        tau = np.array([r.inverse_dynamics(a, b, c) for a, b, c in zip(q, qd, qdd)])
    return ps.line, ps.t, tau, q


def test_example_program_within_limits_matches_pybullet(capsys):
    spec = robots.get("irb120")
    path = EXAMPLES / "irb120_pick_place.ngc"
    code, out = _json(capsys, "irb120", "--program", str(path), "--payload", "3")
    assert code == 0 and out["within_limits"] and out["over_limit"] == [] and out["lines_over_limit"] == 0
    lines, t, tau, _ = _pybullet_torques(spec, path.read_text(), 3.0)
    assert out["samples"] == len(t)
    for j, row in enumerate(out["joints"]):
        k = int(np.argmax(np.abs(tau[:, j])))
        assert row["peak_abs"] == pytest.approx(abs(tau[k, j]), rel=1e-6, abs=1e-6)
        assert row["rms"] == pytest.approx(float(np.sqrt(np.mean(tau[:, j] ** 2))), rel=1e-6, abs=1e-9)
        assert row["limit"] == spec.max_effort[j]
    j2 = out["joints"][1]
    assert j2["peak_line"] == int(lines[np.argmax(np.abs(tau[:, 1]))])
    assert 20 < j2["peak_abs"] < 60          # the arm and 3 kg held out: tens of N·m, far below 120


def test_heavy_payload_is_flagged_on_the_lines_that_exceed(capsys, tmp_path):
    spec = robots.get("irb120")
    prog = tmp_path / "heavy.ngc"
    prog.write_text(HEAVY)
    code, out = _json(capsys, "irb120", "--program", str(prog), "--payload", "20")
    assert code == 1 and not out["within_limits"]
    lines, t, tau, q = _pybullet_torques(spec, HEAVY, 20.0)
    over = np.abs(tau) > spec.max_effort
    want = {(int(lines[k]), f"J{j + 1}") for k, j in zip(*np.nonzero(over))}
    got = {(e["line"], e["joint"]) for e in out["over_limit"]}
    assert got == want
    assert {ln for ln, _ in got} >= {4, 5} and (5, "J2") in got and 2 not in {ln for ln, _ in got}
    # the dwell (line 5) holds the far pose: its torque is the static gravity torque there, over J2's limit
    held = q[lines == 5][0]
    with World(ground=False) as w:
        g = w.add_robot(spec, "kinematic", payload=20.0).gravity_torque(held)
    dwell = next(e for e in out["over_limit"] if (e["line"], e["joint"]) == (5, "J2"))
    assert abs(g[1]) > spec.max_effort[1]
    assert abs(dwell["torque"]) >= abs(g[1]) * (1 - 1e-6)
    for e in out["over_limit"]:
        j = int(e["joint"][1:]) - 1
        worst = np.max(np.abs(tau[lines == e["line"], j]))
        assert abs(e["torque"]) == pytest.approx(worst, rel=1e-6)
    # the same program with a light part passes
    code, out = _json(capsys, "irb120", "--program", str(prog), "--payload", "2")
    assert code == 0 and out["within_limits"]


def test_text_report_names_the_lines_and_the_verdict(capsys, tmp_path):
    prog = tmp_path / "heavy.ngc"
    prog.write_text(HEAVY)
    assert main(["torque", "irb120", "--program", str(prog), "--payload", "20"]) == 1
    out = capsys.readouterr().out
    assert f"{prog}:5: J2 needs " in out and "over its limit of 120 N·m" in out
    assert "OVER the effort limits on 4 line(s)" in out
    assert "J2" in out and "peak/limit" in out


def test_friction_adds_the_drive_data(capsys):
    path = str(EXAMPLES / "scara_square.ngc")
    _, bare = _json(capsys, "scara", "--program", path)
    code, rough = _json(capsys, "scara", "--program", path, "--friction")
    assert code == 0 and rough["friction"] and not bare["friction"]
    assert rough["joints"][0]["rms"] != bare["joints"][0]["rms"]
    assert bare["joints"][2]["unit"] == "N"     # the quill
    # at a constant J1 speed nothing but friction loads J1 (vertical axis, no other joint moving)
    spec = robots.get("scara")
    t = np.arange(50) * 0.004
    qd = np.tile([0.5, 0, 0, 0], (50, 1))
    q = spec.home + qd * t[:, None]
    budgets = []
    for friction in (False, True):
        b = TorqueBudgetBuilder(rigid_bodies(spec), spec.max_effort, friction=spec.drive.friction if friction else None,
                                viscous=spec.drive.joint_damping if friction else None)
        b.add(t, np.ones(50), q, qd)
        budgets.append(b.finish().joints[0])
    assert budgets[0].peak < 1e-9
    assert budgets[1].peak == pytest.approx(spec.drive.friction[0] + 0.5 * spec.drive.joint_damping[0], rel=1e-9)
    assert budgets[1].rms == pytest.approx(budgets[1].peak, rel=1e-9)


@pytest.mark.parametrize("argv, msg", [
    (["irb120", "--program", "nope.ngc"], "nope.ngc: no such file"),
    (["ur5", "--program", "x.ngc"], "unknown robot"),
    (["irb120", "--program", "x.ngc", "--payload", "-1"], "--payload -1: must be a mass from 0 to 50 kg"),
    (["irb120", "--program", "x.ngc", "--payload", "nan"], "--payload nan"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, msg):
    assert main(["torque", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0]


def test_a_faulty_program_gets_its_preflight_faults_not_torques(capsys, tmp_path):
    prog = tmp_path / "far.ngc"
    prog.write_text("G21 G90\nG0 X2000 Y0 Z0\nM30\n")
    code, out = _json(capsys, "irb120", "--program", str(prog))
    assert code == 1 and out["torque"] is None and out["faults"] and out["faults"][0]["line"] == 2


# ----- the budget builder itself (pure numpy) ---------------------------------------------------
def test_chunked_samples_give_the_same_budget_as_one_batch():
    spec = robots.get("aubo_i5")
    bodies = rigid_bodies(spec, payload=2.0)
    t = np.arange(400) * 0.004
    q = spec.home + 0.4 * np.sin(np.outer(t, np.arange(1, 7)))
    qd = 0.4 * np.arange(1, 7) * np.cos(np.outer(t, np.arange(1, 7)))
    line = 1 + (np.arange(400) // 37)
    limits = np.full(6, 5.0)
    one = TorqueBudgetBuilder(bodies, limits)
    one.add(t, line, q, qd)
    a = one.finish()
    many = TorqueBudgetBuilder(bodies, limits)
    for lo, hi in ((0, 1), (1, 2), (2, 57), (57, 58), (58, 400)):
        many.add(t[lo:hi], line[lo:hi], q[lo:hi], qd[lo:hi])
    b = many.finish()
    assert (a.samples, a.excesses, a.excess_lines, a.duration) == (b.samples, b.excesses, b.excess_lines, b.duration)
    for ja, jb in zip(a.joints, b.joints):    # the sums add up in another order
        assert (ja.peak, ja.peak_time, ja.peak_line) == (jb.peak, jb.peak_time, jb.peak_line)
        assert ja.rms == pytest.approx(jb.rms, rel=1e-12)
    assert a.samples == 400
    qdd = np.gradient(qd, t, axis=0, edge_order=1)
    tau = inverse_dynamics(bodies, q, qd, qdd)
    np.testing.assert_allclose([j.rms for j in a.joints], np.sqrt(np.mean(tau ** 2, axis=0)), rtol=1e-12)
    assert not a.within_limits and {e.line for e in a.excesses} == set(line[np.any(np.abs(tau) > 5.0, axis=1)].tolist())


def test_excess_list_is_capped_and_says_so():
    spec = robots.get("irb120")
    b = TorqueBudgetBuilder(rigid_bodies(spec, payload=20.0), np.full(6, 1e-3))
    n = MAX_EXCESSES + 40
    t = np.arange(n) * 0.004
    b.add(t, np.arange(1, n + 1), np.tile(spec.pose("zero"), (n, 1)), np.zeros((n, 6)))
    out = b.finish()
    assert len(out.excesses) == MAX_EXCESSES and out.excess_lines == n and out.truncated
    with pytest.raises(ValueError, match="increase"):
        TorqueBudgetBuilder(rigid_bodies(spec), np.ones(6)).add([0.0, 0.0], [1, 1], np.zeros((2, 6)), np.zeros((2, 6)))
