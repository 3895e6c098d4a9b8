"""Smoke tests of `armtwin ik`, `armtwin validate` and `armtwin bench ik` through the CLI entry point."""

from __future__ import annotations

import json

import numpy as np
import pytest
from armtwin import robots
from armtwin.controllers.kinematics import chain_of, fk
from armtwin.controllers.transforms import matrix_to_quat
from armtwin.scripts.cli import main


def test_ik_json_irb120_zero_pose(capsys):
    assert main(["ik", "irb120", "374", "0", "630", "--rpy", "0", "90", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "solved"
    assert np.allclose(out["best"], [0, 0, 0, 0, 0, 0], atol=1e-9)
    chosen = [s for s in out["solutions"] if s["chosen"]]
    assert len(chosen) == 1 and chosen[0]["branch"] == "front/up/noflip" and chosen[0]["within_limits"]
    assert {"joints_deg", "branch", "within_limits"} <= set(out["solutions"][0])
    # all-zero joints: J5 = 0, the wrist is singular; J4 is kept (1-based in the CLI)
    assert out["singular"] is True and out["free_joints"] == [4] and "wrist singular" in out["reason"]


def test_ik_singular_text_and_regular_json(capsys):
    assert main(["ik", "irb120", "374", "0", "630", "--rpy", "0", "90", "0"]) == 0
    out = capsys.readouterr().out
    assert "singular: wrist singular" in out and "J4 kept at 0.0°" in out
    assert main(["ik", "irb120", "300", "100", "400", "--rpy", "180", "0", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "solved" and out["singular"] is False and out["free_joints"] == []


def test_ik_singular_status_on_a_merged_branch(capsys):
    # near: wrist flipped (J5 < 0); target: all-zero joints (J5 = 0), where flip and no flip coincide
    code = main(["ik", "irb120", "374", "0", "630", "--rpy", "0", "90", "0", "--near", "0", "0", "0", "0", "-5", "0",
                 "--stay-on-branch", "--json"])
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert code == 4 and out["status"] == "singular" and out["best"] is None and out["singular"]
    assert "merges with front/up/noflip" in cap.err and len(cap.err.strip().splitlines()) == 1


def test_ik_scara_lists_j4_equivalents(capsys):
    assert main(["ik", "scara", "400", "100", "300", "--rpy", "180", "0", "30", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    j4 = sorted(round(s["joints_deg"][3], 6) for s in out["solutions"] if s["branch"] == "right")
    assert len(j4) == 2 and j4[1] - j4[0] == pytest.approx(360.0)


def test_ik_json_solutions_reach_the_target(capsys):
    spec = robots.get("aubo_i5")
    q = np.radians([20, -10, 70, 15, 80, -30])
    T = fk(chain_of(spec), q)
    quat = matrix_to_quat(T[:3, :3])
    args = ["ik", "aubo_i5", *map(str, T[:3, 3] * 1000), "--quat", *map(str, quat), "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    for s in out["solutions"]:
        Ts = fk(chain_of(spec), np.radians(s["joints_deg"]))
        assert np.allclose(Ts[:3, 3], T[:3, 3], atol=1e-6)


def test_ik_scara_uses_mm_for_j3_and_the_roll(capsys):
    assert main(["ik", "scara", "400", "100", "300", "--rpy", "180", "0", "30", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    spec = robots.get("scara")
    z0_mm = spec.geometry.z0 * 1000
    for s in out["solutions"]:
        j1, j2, j3, j4 = s["joints_deg"]
        assert j3 == pytest.approx(z0_mm - 300.0)
        assert abs((j1 + j2 + j4 - 30.0 + 180.0) % 360.0 - 180.0) < 1e-9


def test_ik_text_all_lists_every_solution(capsys):
    assert main(["ik", "irb120", "300", "100", "400", "--rpy", "180", "0", "0", "--all"]) == 0
    out = capsys.readouterr().out
    assert "best (" in out and "front/up/noflip" in out and "back/" in out


def test_ik_unreachable_exit_code_and_message(capsys):
    code = main(["ik", "irb120", "1000", "0", "630", "--rpy", "0", "90", "0"])
    err = capsys.readouterr().err
    assert code == 3
    assert len(err.strip().splitlines()) == 1 and "out of reach" in err and "mm" in err


def test_ik_out_of_range_exit_code(capsys):
    code = main(["ik", "scara", "400", "100", "50", "--json"])
    cap = capsys.readouterr()
    assert code == 4
    assert json.loads(cap.out)["status"] == "out_of_range" and json.loads(cap.out)["best"] is None
    assert "J3" in cap.err


@pytest.mark.parametrize("argv", [
    ["ik", "irb120", "300", "0", "400"],                                  # no orientation
    ["ik", "irb120", "x", "0", "400", "--rpy", "0", "0", "0"],            # not a number
    ["ik", "irb120", "300", "0", "400", "--quat", "0", "0", "0", "0"],    # zero quaternion
    ["ik", "nosuchrobot", "300", "0", "400", "--rpy", "0", "0", "0"],
    ["ik", "irb120", "300", "0", "400", "--rpy", "0", "0", "0", "--near", "1", "2"],
])
def test_ik_bad_input_is_one_line_exit_2(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_validate_passes(capsys):
    assert main(["validate", "irb120", "scara"]) == 0
    out = capsys.readouterr().out
    assert "374.00" in out and "630.00" in out          # the published zero pose
    assert "irb120 PASS" in out and "scara PASS" in out


def test_validate_json(capsys):
    assert main(["validate", "aubo_i5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rep = out["robots"][0]
    assert out["passed"] and rep["robot"] == "aubo_i5"
    for row in rep["ik"]:
        assert row["original_found"]
        assert row["singular"] == ("singular" in row["reason"]) and isinstance(row["free_joints"], list)
        assert sum(s["chosen"] for s in row["solutions"]) == (1 if row["status"] == "solved" else 0)
    assert any(row["singular"] and row["free_joints"] == [6] for row in rep["ik"])   # the zero pose: J5 = 0


def test_bench_ik_json_small(capsys):
    assert main(["bench", "ik", "--n", "200", "--pybullet-n", "5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("armtwin_batch_us", "armtwin_single_us", "pybullet_us", "armtwin_success", "pybullet_success",
                "speedup_batch_vs_pybullet"):
        assert key in out
    assert out["armtwin_success"] == 1.0
    assert out["batch_equals_single"]


@pytest.mark.parametrize("rpy, note", [(("180", "0", "30"), False), (("0", "0", "30"), True), (("90", "0", "30"), True)])
def test_ik_scara_says_when_it_ignores_a_tilt(capsys, rpy, note):
    # the SCARA's tool always points down: a tilted or upward orientation keeps only its roll
    assert main(["ik", "scara", "400", "0", "250", "--rpy", *rpy, "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["best"]
    assert main(["ik", "scara", "400", "0", "250", "--rpy", *rpy]) == 0
    assert ("only the roll about z" in capsys.readouterr().out) == note
    T = fk(chain_of(robots.get("scara")), robots.get("scara").from_display(np.array(best)))
    assert T[2, 2] == pytest.approx(-1.0)  # tool down, with the roll asked for
    assert np.degrees(np.arctan2(T[1, 0], T[0, 0])) == pytest.approx(30.0, abs=1e-3)


@pytest.mark.parametrize("argv, what", [
    (["1e308", "0", "300", "--rpy", "180", "0", "180"], "X Y Z"),
    (["400", "0", "300", "--rpy", "1e308", "0", "0"], "--rpy"),
    (["400", "0", "300", "--quat", "0", "0", "0", "0"], "--quat"),
])
def test_ik_refuses_absurd_numbers_in_one_line(capsys, argv, what):
    assert main(["ik", "irb120", *argv]) == 2
    err = capsys.readouterr().err
    assert what in err and len(err.strip().splitlines()) == 1


def test_ik_huge_quaternion_is_normalised_without_overflow(capsys, recwarn):
    assert main(["ik", "irb120", "400", "0", "300", "--quat", "1e308", "1e308", "0", "0", "--json"]) == 0
    same = json.loads(capsys.readouterr().out)["best"]
    assert main(["ik", "irb120", "400", "0", "300", "--quat", "1", "1", "0", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["best"] == same
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
