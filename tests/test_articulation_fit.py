"""armtwin fit --model articulation: the articulation model's drive fitted to a run log
(envs/articulation_fit.py), and ``armtwin run --articulation-drive`` using it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.tools import default_tools
from armtwin.envs.articulation_fit import fit_articulation, read_articulation_drive, write_articulation_drive
from armtwin.envs.drive_fit import read_run_log
from armtwin.scripts.cli import main

PROGRAM = "examples/irb120_pick_place.ngc"
#: a drive the IRB120's data file does not have: soft gains, and J3's force limit (60 N·m rated) below the
#: 8.3 N·m the program needs, so the drive saturates there
SOFT_WEAK = {"position_gain": 0.04, "velocity_gain": 0.5, "effort_j3": 7.5}


def _run(tmp, name: str, *extra: str) -> str:
    path = tmp / name
    assert main(["run", PROGRAM, "--robot", "irb120", "--joint-mode", "articulation", "--log", str(path), *extra]) == 0
    return str(path)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """The pick-and-place program run with the data file's drive and with the soft, weak one."""
    tmp = tmp_path_factory.mktemp("articulation")
    spec = robots.get("irb120")
    rated = [j.effort for j in spec.joints]
    drive = dict(position_gain=SOFT_WEAK["position_gain"], velocity_gain=SOFT_WEAK["velocity_gain"],
                 effort=tuple(SOFT_WEAK["effort_j3"] if j == 2 else e for j, e in enumerate(rated)))
    from dataclasses import replace
    write_articulation_drive(tmp / "soft.toml", replace(spec.drive, **drive), robot="irb120")
    return {"nominal": _run(tmp, "nominal.csv"), "soft": _run(tmp, "soft.csv", "--articulation-drive", str(tmp / "soft.toml")),
            "dir": tmp}


@pytest.mark.slow
def test_fit_recovers_a_soft_weak_drive_and_names_what_the_log_cannot_tell(logs):
    """Fitted on the first 4 s: the gains and J3's force limit within 5 % of the drive that made the log
    (measured: 0.04002, 0.5007, 7.500), the joints whose drive never reached its limit in that time have
    their force limits reported not identifiable and kept at the rated value, and the held-out error
    falls (max 8.1 deg with the data file's drive)."""
    spec = robots.get("irb120")
    trace = read_run_log(logs["soft"], spec)
    assert trace.tool == 4
    rep = fit_articulation(spec, trace, tool=default_tools()[trace.tool], max_fit_seconds=4.0)
    f = rep.fitted
    print("fitted", f.position_gain, f.velocity_gain, f.effort, rep.ci95_factor, rep.not_identifiable)
    assert rep.improved
    assert f.position_gain == pytest.approx(SOFT_WEAK["position_gain"], rel=0.05)
    assert f.velocity_gain == pytest.approx(SOFT_WEAK["velocity_gain"], rel=0.05)
    assert f.effort[2] == pytest.approx(SOFT_WEAK["effort_j3"], rel=0.05)
    for key in ("position_gain", "velocity_gain"):
        assert math.isfinite(rep.ci95_factor[key][0]) and key not in rep.not_identifiable
    assert math.isfinite(rep.ci95_factor["effort"][2])
    rated = [j.effort for j in spec.joints]
    for j in (0, 3, 4, 5):   # J1 and J4 do not move; J5 and J6 need a few N·m of 20 and 10
        assert f"effort J{j + 1}" in rep.not_identifiable
        assert rep.ci95_factor["effort"][j] == math.inf and f.effort[j] == rated[j]
    assert "joint_damping J1" in rep.not_identifiable and f.joint_damping[0] == spec.drive.joint_damping[0]
    assert rep.max_fit_held < 0.2 * rep.max_nominal_held
    assert np.sqrt(np.mean(rep.rms_fit ** 2)) < 0.05 * np.sqrt(np.mean(rep.rms_nominal ** 2))


def test_a_drive_that_never_saturates_leaves_every_force_limit_not_identifiable(logs):
    """The data file's drive on this program stays far under every force limit: the fit says so for
    each instead of returning a number, and finds the gains that made the log (a noise-free log shows
    even a stiff drive's micro-degree lag)."""
    spec = robots.get("irb120")
    trace = read_run_log(logs["nominal"], spec)
    rep = fit_articulation(spec, trace, tool=default_tools()[trace.tool], max_fit_seconds=2.0, max_evaluations=120)
    assert [f"effort J{j + 1}" for j in range(6)] == [k for k in rep.not_identifiable if k.startswith("effort")]
    assert rep.fitted.effort == tuple(float(j.effort) for j in spec.joints)
    assert rep.fitted.position_gain == pytest.approx(spec.drive.position_gain, rel=0.05)
    assert rep.fitted.velocity_gain == pytest.approx(spec.drive.velocity_gain, rel=0.05)


def test_cli_fit_articulation_saves_a_drive_run_uses(logs, tmp_path, capsys):
    """``fit --model articulation --save`` then ``run --articulation-drive``: the run with the fitted drive
    follows the soft drive's log closer than the data file's drive does."""
    saved = tmp_path / "fitted.toml"
    assert main(["fit", logs["soft"], "--model", "articulation", "--robot", "irb120", "--max-fit-seconds", "2",
                 "--save", str(saved), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "articulation" and out["tool"] == 4 and out["saved"] == str(saved)
    assert "effort J1" in out["not_identifiable"] and out["ci95_factor"]["effort"][0] is None
    spec = robots.get("irb120")
    drive = read_articulation_drive(saved, spec)
    assert drive.position_gain == pytest.approx(out["fitted"]["position_gain"])
    assert drive.effort == pytest.approx(out["fitted"]["effort"])
    rerun = _run(tmp_path, "rerun.csv", "--articulation-drive", str(saved))
    target = read_run_log(logs["soft"], spec)
    err = lambda path: float(np.abs(read_run_log(path, spec).q - target.q).max())  # noqa: E731
    assert err(rerun) < 0.2 * err(logs["nominal"])


def test_cli_refuses_bad_articulation_input_in_one_line(logs, tmp_path, capsys):
    other = tmp_path / "scara.toml"
    scara = robots.get("scara")
    from dataclasses import replace
    write_articulation_drive(other, replace(scara.drive, effort=tuple(j.effort for j in scara.joints)), robot="scara")
    broken = tmp_path / "broken.toml"
    broken.write_text('robot = "irb120"\nposition_gain = 3.0\nvelocity_gain = 1.0\n'
                      'joint_damping = [0, 0, 0, 0, 0, 0]\neffort = [1, 1, 1, 1, 1, 1]\n')
    soft = str(logs["dir"] / "soft.toml")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(bytes(range(256)) * 4)
    cases = ((["fit", str(binary), "--model", "articulation", "--robot", "irb120"], "binary.csv: not a run log"),
             (["fit", logs["soft"], "--model", "articulation"], "--model articulation needs --robot"),
             (["fit", logs["soft"], "--model", "articulation", "--robot", "scara"], "scara has 4"),
             (["fit", logs["soft"], "--model", "articulation", "--robot", "irb120", "--joints", "j1"],
              "--joints belongs to --model motor"),
             (["fit", logs["soft"], "--tools", "x.toml"], "--tools belongs to --model hinge or articulation"),
             (["run", PROGRAM, "--robot", "irb120", "--joint-mode", "hinge", "--articulation-drive", soft],
              "add --joint-mode articulation"),
             (["run", PROGRAM, "--robot", "irb120", "--joint-mode", "articulation", "--articulation-drive", str(other)],
              "fitted for 'scara', not for irb120"),
             (["run", PROGRAM, "--robot", "irb120", "--joint-mode", "articulation", "--articulation-drive", str(broken)],
              "position_gain must be in (0, 2]"),
             (["run", PROGRAM, "--robot", "irb120", "--joint-mode", "articulation", "--articulation-drive", soft,
               "--hinge-gains", soft], "give one"))
    for argv, msg in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and msg in err[0], (argv, err)


# ----- randomised twins around the fitted drive ------------------------------------------------------

def _drive_file(tmp_path, robot: str = "irb120"):
    """A drive file with known values and factors: the position gain known to ×/÷ 1.2, the velocity gain
    not identifiable, every joint's damping to ×/÷ 1.5, J3's force limit to ×/÷ 1.1 and the others not."""
    from dataclasses import replace
    spec = robots.get(robot)
    n = spec.dof
    drive = replace(spec.drive, position_gain=0.2, velocity_gain=0.8,
                    effort=tuple(7.5 if j == 2 else float(spec.joints[j].effort) for j in range(n)))
    ci = {"position_gain": (1.2,), "velocity_gain": (math.inf,), "joint_damping": (1.5,) * n,
          "effort": tuple(1.1 if j == 2 else math.inf for j in range(n))}
    path = tmp_path / "drive.toml"
    write_articulation_drive(path, drive, robot=robot, ci95_factor=ci)
    return path, drive


def test_an_articulation_env_draws_its_drive_around_the_fitted_one(tmp_path):
    """``randomize={"fitted": FILE}`` with an articulation drive file: every episode's drive is drawn
    within the file's intervals (log-normal, clipped at ``fitted_sigma`` of them); the values the log
    could not tell keep the file's value; the robot drives with exactly the drawn (and reported) values;
    the same seed draws the same twin."""
    from armtwin.envs.gym_envs import ReachEnv
    path, drive = _drive_file(tmp_path)
    env = ReachEnv("irb120", randomize={"fitted": str(path), "fitted_sigma": 1.0})
    try:
        gains, efforts, damping = [], [], []
        for seed in range(40):
            _, info = env.reset(seed=seed)
            drawn = info["randomization"]["fitted"]
            d = env.robot.drive
            assert d.position_gain == pytest.approx(min(1.0, drawn["position_gain"]))
            assert d.velocity_gain == drawn["velocity_gain"] == drive.velocity_gain     # not identifiable: kept
            assert tuple(d.effort) == drawn["effort"] and tuple(d.joint_damping) == drawn["joint_damping"]
            for j in (0, 1, 3, 4, 5):
                assert drawn["effort"][j] == drive.effort[j]                           # not identifiable: kept
            gains.append(drawn["position_gain"])
            efforts.append(drawn["effort"][2])
            damping.append(drawn["joint_damping"][1])
        g, e = np.log(np.array(gains) / 0.2), np.log(np.array(efforts) / 7.5)
        assert np.abs(g).max() <= math.log(1.2) + 1e-9 and np.abs(e).max() <= math.log(1.1) + 1e-9
        assert np.ptp(g) > 0.5 * math.log(1.2) and np.ptp(e) > 0.5 * math.log(1.1)     # the episodes differ
        assert abs(np.mean(g)) < 0.4 * math.log(1.2)                                    # centred on the fitted
        assert np.ptp(np.log(damping)) > 0.3
        first = env.reset(seed=3)[1]["randomization"]
        assert env.reset(seed=3)[1]["randomization"] == first
    finally:
        env.close()


def test_an_articulation_drive_file_needs_the_articulation_model_and_its_robot(tmp_path):
    from armtwin.envs.gym_envs import ReachEnv
    from armtwin.envs.randomize import Randomization
    path, _ = _drive_file(tmp_path)
    for mode in ("hinge", "kinematic"):
        with pytest.raises(ValueError, match=f"only in the articulation joint model; this env's joint model is {mode}"):
            ReachEnv("irb120", joint_mode=mode, randomize={"fitted": str(path)})
    with pytest.raises(ValueError, match=r"articulation drive fitted for irb120 \(6 joints\); this env's robot is scara"):
        ReachEnv("scara", randomize={"fitted": str(path)})
    no_ci = tmp_path / "no_ci.toml"
    write_articulation_drive(no_ci, read_articulation_drive(path, robots.get("irb120")), robot="irb120")
    with pytest.raises(ValueError, match="no confidence intervals.*--model articulation --save"):
        Randomization.of({"fitted": str(no_ci)})


# ----- fitted to the servo rig's twin log -----------------------------------------------------------

@pytest.fixture(scope="module")
def twin_log(tmp_path_factory):
    """A twin log of the servo rig standing for the IRB120's J2 (the firmware's loop and motor of
    ``controllers.ident.virtual_rig_log``) through a 20 s identification excitation with power cuts."""
    from armtwin.controllers.ident import excitation, virtual_rig_log
    exc = excitation(20.0, rate_hz=500.0, amplitude_deg=30.0, max_speed_deg_s=250.0, max_accel_deg_s2=5000.0)
    tr = virtual_rig_log(exc, label="j2")
    path = tmp_path_factory.mktemp("twin") / "twin.csv"
    with open(path, "w") as f:
        f.write("STT,Time,Error_j2,Virtual_j2,Servo_j2,Latency_ms,Fault\n")
        for k in range(len(tr.t)):
            f.write(f"{k},{tr.t[k]:.6f},{tr.virtual[k] - tr.servo[k]:.4f},{tr.virtual[k]:.4f},{tr.servo[k]:.4f},3.0,"
                    f"{'OK' if tr.powered[k] else 'POWER'}\n")
    return path, tr


def test_a_joint_model_fitted_to_the_rigs_twin_log_predicts_the_rig(twin_log, capsys, tmp_path):
    """``fit TWIN.csv --model articulation``: the model commanded with the log's virtual J2 follows the
    rig's measured J2 over the longest stretch without a power cut; only J2 counts (the other joints
    are not measured: no error, their values not identifiable), and the held-out prediction error
    falls well below the data file's rigid drive's (measured on 30 s: 0.56 -> 0.15 deg RMS)."""
    from armtwin.envs.drive_fit import run_trace_of_twin
    from armtwin.envs.rig import read_twin_log
    path, tr = twin_log
    spec = robots.get("irb120")
    trace, start = run_trace_of_twin(read_twin_log(path), spec)
    cut = np.flatnonzero(~tr.powered)
    assert trace.measured == (False, True, False, False, False, False)
    assert start == 0.0 and trace.t[-1] < tr.t[cut[0]]                   # the stretch before the first power cut
    assert np.all(trace.q_cmd[:, 0] == spec.home[0]) and np.all(trace.q[:, 2:] == np.asarray(spec.home)[2:])
    png = path.with_suffix(".png")
    assert main(["fit", str(path), "--model", "articulation", "--robot", "irb120", "--max-fit-seconds", "3",
                 "--plot", str(png), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["twin_log_from_s"] == 0.0 and out["improved"] and out["plot"] == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    held = out["rms_held_out"]
    assert held["fitted"][1] < 0.5 * held["nominal"][1], held
    assert all(held[k][j] is None for k in ("fitted", "nominal") for j in (0, 2, 3, 4, 5))     # not measured
    assert "joint_damping J1" in out["not_identifiable"] and "effort J2" in out["not_identifiable"]
    assert out["fitted"]["position_gain"] < 0.1 * out["nominal"]["position_gain"]      # the rig lags; the drive is softer
    assert main(["fit", str(path), "--model", "articulation", "--robot", "irb120", "--tools", "x.toml"]) == 2
    assert "carries no tool" in capsys.readouterr().err
