"""Randomised twins sampled around the hinge gains fitted to the rig (issue 21 item 2, its last clause):
``randomize={"fitted": FILE, "fitted_sigma": s}`` (envs/randomize.py, envs/hinge_fit.py)."""

from __future__ import annotations

import dataclasses
import json
import math
import pickle

import numpy as np
import pytest

from armtwin import robots
from armtwin.envs.gym_envs import ReachEnv
from armtwin.envs.hinge_fit import FIT_KEYS, read_hinge_file, read_hinge_gains, write_hinge_gains
from armtwin.envs.randomize import Randomization
from armtwin.scripts.cli import main

#: the 95 % confidence factors of the test's fitted gains, per joint (the IRB120 has 6)
STIFFNESS_F = (1.10, 1.20, 1.30, 1.15, 1.25, 1.05)
DAMPING_F = (1.25, 1.10, 1.20, 1.30, 1.15, 1.40)


def _fitted_drive(spec, scale: float = 0.5):
    """Known 'fitted' gains: the rule's times ``scale`` (0.5: well inside the stability margin, so no
    draw at sigma <= 2 is pulled back), the damping pair's split changed so it is not the rule's."""
    r = spec.drive
    return dataclasses.replace(r, stiffness=tuple(scale * v for v in r.stiffness),
                               damping=tuple(scale * 0.8 * v for v in r.damping),
                               joint_damping=tuple(scale * 1.5 * v for v in r.joint_damping))


@pytest.fixture(scope="module")
def fitted_file(tmp_path_factory):
    """An IRB120 gains file written by the project's own writer (as ``fit --save`` writes it)."""
    spec = robots.get("irb120")
    path = tmp_path_factory.mktemp("fitted") / "irb120_hinge.toml"
    write_hinge_gains(path, _fitted_drive(spec), comment="known values for the tests", robot=spec.name,
                      ci95_factor={"stiffness": STIFFNESS_F, "damping": DAMPING_F})
    return path


def _twin(path, sigma=1.0):
    r = Randomization.of({"fitted": str(path), "fitted_sigma": sigma})
    return r, r.fitted_twin(robots.get("irb120"), "hinge")


def _logs(path, sigma: float, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """(n, dof) logarithms of drawn / fitted, per key, from ``n`` draws of one generator."""
    r, twin = _twin(path, sigma)
    fitted = read_hinge_file(path).gains
    rng = np.random.default_rng(seed)
    draws = [r.sample(rng, 1, twin).fitted for _ in range(n)]
    return {k: np.log(np.array([d[k] for d in draws]) / np.array(fitted[k])) for k in ("stiffness", "damping",
                                                                                       "joint_damping")}


def _clipped_normal_std(a: float = 1.96) -> float:
    """Standard deviation of a standard normal clipped to [-a, a]."""
    phi = math.exp(-a * a / 2) / math.sqrt(2 * math.pi)
    tail = 0.5 * math.erfc(a / math.sqrt(2))
    return math.sqrt((1 - 2 * tail) - 2 * a * phi + 2 * a * a * tail)


# ----- the file ------------------------------------------------------------------------------------

def test_the_gains_file_round_trips_robot_gains_and_factors(fitted_file):
    f = read_hinge_file(fitted_file)
    drive = _fitted_drive(robots.get("irb120"))
    assert f.robot == "irb120" and f.dof == 6
    assert f.gains["stiffness"] == drive.stiffness and f.gains["joint_damping"] == drive.joint_damping
    assert f.ci95_factor == {"stiffness": STIFFNESS_F, "damping": DAMPING_F}
    # armtwin run --hinge-gains reads the same file, and refuses it for another robot, naming both
    assert read_hinge_gains(fitted_file, robots.get("irb120")).stiffness == drive.stiffness
    with pytest.raises(ValueError, match="fitted for irb120, not for aubo_i5"):
        read_hinge_gains(fitted_file, robots.get("aubo_i5"))


# ----- the draws -----------------------------------------------------------------------------------

def test_the_same_seed_draws_the_same_twins_and_each_episode_a_new_one(fitted_file):
    kw = dict(joint_mode="hinge", randomize={"fitted": str(fitted_file)})
    a, b = ReachEnv("irb120", **kw), ReachEnv("irb120", **kw)
    try:
        _, ia = a.reset(seed=11)
        _, ib = b.reset(seed=11)
        assert ia["randomization"]["fitted"] == ib["randomization"]["fitted"]
        assert a.step(np.zeros(3, np.float32))[4]["randomization"] == ia["randomization"]   # in every step's info
        draws = [ia["randomization"]["fitted"]] + [a.reset()[1]["randomization"]["fitted"] for _ in range(3)]
        assert len({d["stiffness"] for d in draws}) == 4
        _, ic = a.reset(seed=11)
        assert ic["randomization"]["fitted"] == ia["randomization"]["fitted"]
    finally:
        a.close()
        b.close()


def test_the_draws_centre_on_the_fitted_values_within_their_intervals(fitted_file):
    """The logarithm of each drawn gain is normal about the fitted one's, std ln(f) / 1.96 (clipped to
    the interval): the mean of N draws lies within 4 standard errors, ln(f) / 1.96 / sqrt(N), of it."""
    n = 1500
    logs = _logs(fitted_file, 1.0, n)
    for key, factors in (("stiffness", STIFFNESS_F), ("damping", DAMPING_F), ("joint_damping", DAMPING_F)):
        c = np.log(factors)
        y = logs[key]
        assert np.all(np.abs(y) <= c + 1e-12), key                               # inside [value / f, value * f]
        tolerance = 4 * (c / 1.96) / math.sqrt(n)
        assert np.all(np.abs(y.mean(axis=0)) < tolerance), (key, y.mean(axis=0), tolerance)
        # about 5 % of the draws are clipped to an end of the interval (a normal beyond 1.96 std)
        at_end = np.mean(np.abs(y) > c - 1e-9, axis=0)
        assert np.all((at_end > 0.02) & (at_end < 0.09)), (key, at_end)
    # the damping pair moves by one multiplier: its split is the fitted one's
    np.testing.assert_allclose(logs["damping"], logs["joint_damping"], atol=1e-12)


def test_the_width_scales_with_fitted_sigma(fitted_file):
    n = 1500
    base = _logs(fitted_file, 1.0, n)
    kappa = _clipped_normal_std()
    for sigma in (0.5, 2.0):
        wider = _logs(fitted_file, sigma, n)
        for key in FIT_KEYS:
            # the same generator: every draw is sigma times the sigma = 1 draw (nothing reaches the fit's range)
            np.testing.assert_allclose(wider[key], sigma * base[key], rtol=1e-9, atol=1e-12)
            # and its spread is sigma ln(f) / 1.96 of a clipped normal, within 5 standard errors of a std
            want = sigma * np.log(STIFFNESS_F if key == "stiffness" else DAMPING_F) / 1.96 * kappa
            assert np.all(np.abs(wider[key].std(axis=0) / want - 1) < 5 / math.sqrt(2 * n)), (key, sigma)
    zero = _logs(fitted_file, 0.0, 5)
    assert all(np.all(v == 0) for v in zero.values())                             # sigma 0: the fitted gains


def test_draws_that_would_leave_the_stability_margin_are_pulled_back(tmp_path):
    """The rule's own gains (on the margin) with wide intervals: every drawn twin keeps the rule's
    eigenvalue 2, draws beyond it are pulled back towards the fitted gains, a joint drawn softer keeps
    its draw, and a gain the log cannot tell (inf) is drawn over the fit's whole range."""
    spec = robots.get("irb120")
    path = tmp_path / "edge.toml"
    write_hinge_gains(path, spec.drive, robot="irb120", ci95_factor={"stiffness": (3.0,) * 6, "damping": (math.inf,) * 6})
    _, twin = _twin(path, 1.0)
    raw = _twin(path, 1.0)[1]
    raw._inside = lambda fitted, drawn: drawn                                   # the same draws, not pulled back
    rng, rng_raw = np.random.default_rng(5), np.random.default_rng(5)
    fitted = {k: np.array(getattr(spec.drive, k)) for k in ("stiffness", "damping", "joint_damping")}
    pulled, damping = 0, []
    for _ in range(40):
        d, r = twin.draw(rng, 1.0), raw.draw(rng_raw, 1.0)
        assert twin.eigenvalue(d) <= twin.cap + 1e-9 and twin.cap == pytest.approx(2.0)
        h = twin._margin.h
        a = {k: h * h * np.array(x["stiffness"]) + 2 * h * (np.array(x["damping"]) + np.array(x["joint_damping"]))
             for k, x in (("r", r), ("f", fitted))}
        softer = a["r"] <= a["f"]
        for key in ("stiffness", "damping"):
            np.testing.assert_array_equal(np.array(d[key])[softer], np.array(r[key])[softer])
        if twin.eigenvalue(r) > twin.cap:
            pulled += 1
            assert np.any(np.array(d["stiffness"]) != np.array(r["stiffness"]))
        assert all(1 / 3 - 1e-9 <= d["stiffness"][j] / spec.drive.stiffness[j] <= 3 + 1e-9 for j in range(6))
        damping.append(np.array(r["damping"]) / np.array(spec.drive.damping))
    assert pulled > 5
    m = np.log(np.array(damping))                                               # uniform in log over 1/20 .. 20
    assert m.min() > -math.log(20) - 1e-9 and m.max() < math.log(20) + 1e-9 and m.min() < -2 and m.max() > 2


# ----- in the env ----------------------------------------------------------------------------------

def test_the_env_steps_with_the_drawn_gains(fitted_file):
    """The robot's hinge drive is the drawn one, and the physics shows it: at rest under gravity each
    joint sags until its spring holds the load, so K_drawn x sag is the same torque in every episode
    while the sag itself follows 1 / K_drawn."""
    env = ReachEnv("irb120", joint_mode="hinge", control="joint", randomize={"fitted": str(fitted_file),
                                                                             "fitted_sigma": 2.0})
    try:
        held, sags, ks = [], [], []
        for seed in range(3):
            _, info = env.reset(seed=seed)
            drawn = info["randomization"]["fitted"]
            for key in ("stiffness", "damping", "joint_damping"):
                assert tuple(getattr(env.robot.drive, key)) == drawn[key]
            for _ in range(50):
                env.step(np.zeros(6, np.float32))
            q_cmd, _ = env.robot.commanded
            sag = (q_cmd - env.robot.q)[2]                                       # J3 holds the forearm
            k = drawn["stiffness"][2]
            held.append(k * sag)
            sags.append(sag)
            ks.append(k)
        assert max(ks) / min(ks) > 1.1                                           # the episodes differ
        assert np.ptp(held) < 0.03 * abs(np.mean(held))                          # one torque holds the arm
        assert np.ptp(sags) > 0.05 * abs(np.mean(sags))                          # ... with different sags
    finally:
        env.close()


def test_a_pickled_env_or_randomization_keeps_the_fitted_twin(fitted_file):
    env = ReachEnv("irb120", joint_mode="hinge", randomize={"fitted": str(fitted_file)})
    try:
        copy = pickle.loads(pickle.dumps(env))
        try:
            assert env.reset(seed=4)[1]["randomization"] == copy.reset(seed=4)[1]["randomization"]
        finally:
            copy.close()
    finally:
        env.close()
    r = Randomization.of({"fitted": str(fitted_file), "fitted_sigma": 0.5})
    back = pickle.loads(pickle.dumps(r))
    assert back == r and back.fitted_gains == r.fitted_gains and back.dynamic


# ----- what is refused -----------------------------------------------------------------------------

def test_a_file_fitted_for_another_robot_is_refused_naming_both(fitted_file):
    with pytest.raises(ValueError, match=r"fitted for irb120 \(6 joints\); this env's robot is aubo_i5") as e:
        ReachEnv("aubo_i5", joint_mode="hinge", randomize={"fitted": str(fitted_file)})
    assert str(fitted_file) in str(e.value)
    with pytest.raises(ValueError, match="fitted for irb120.*scara"):
        ReachEnv("scara", joint_mode="hinge", randomize={"fitted": str(fitted_file)})


@pytest.mark.parametrize("mode", ["kinematic", "articulation"])
def test_fitted_hinge_gains_need_the_hinge_model(fitted_file, mode):
    with pytest.raises(ValueError, match=f"only in the hinge joint model; this env's joint model is {mode}"):
        ReachEnv("irb120", joint_mode=mode, randomize={"fitted": str(fitted_file)})


def test_a_bad_or_missing_file_is_one_value_error_naming_it_and_why(tmp_path):
    from armtwin.controllers.ident import NOMINAL, write_params_file
    spec = robots.get("irb120")
    motor = tmp_path / "motor.toml"
    write_params_file(motor, NOMINAL)
    old = tmp_path / "old.toml"
    write_hinge_gains(old, spec.drive)                                           # as fit --save wrote it before
    no_ci = tmp_path / "no_ci.toml"
    write_hinge_gains(no_ci, spec.drive, robot="irb120")
    text = tmp_path / "text.toml"
    text.write_text("stiffness = [1, 2\n")
    half = tmp_path / "half.toml"
    half.write_text((no_ci.read_text() + "stiffness_ci95_factor = [1.1, 1.1, 1.1, 1.1, 1.1, 1.1]\n"))
    shrink = tmp_path / "shrink.toml"
    write_hinge_gains(shrink, spec.drive, robot="irb120", ci95_factor={"stiffness": (0.5,) * 6, "damping": (1.1,) * 6})
    cases = [(tmp_path / "none.toml", "cannot read it"), (motor, "motor parameter file"), (old, "names no robot"),
             (no_ci, "no confidence intervals"), (text, "not a hinge gains file"), (half, "together"),
             (shrink, "factors >= 1")]
    for path, why in cases:
        with pytest.raises(ValueError) as e:
            Randomization.of({"fitted": str(path)})
        assert str(path) in str(e.value) and why in str(e.value), (path, str(e.value))
        assert "\n" not in str(e.value)
    for value, match in (({"fitted_sigma": 1.0}, "give randomize.fitted"),
                         ({"fitted": str(no_ci), "fitted_sigma": -1}, "fitted_sigma must be from 0"),
                         ({"fitted": 3}, "path of a hinge gains or articulation drive file"), ({"fitted_gains": None}, "unknown field")):
        with pytest.raises(ValueError, match=match):
            Randomization.of(value)


# ----- end to end: a log the project makes, fitted by the project's fit ----------------------------

@pytest.mark.slow
def test_the_gains_armtwin_fit_saves_randomise_a_twin(tmp_path, capsys):
    """``armtwin run --log`` (the SCARA's square, articulation model) -> ``armtwin fit --model hinge
    --save``: the file names the robot and a confidence factor per gain, and a hinge env draws around it."""
    log, saved = tmp_path / "square.csv", tmp_path / "scara_hinge.toml"
    assert main(["run", "examples/scara_square.ngc", "--robot", "scara", "--joint-mode", "articulation",
                 "--log", str(log)]) == 0
    capsys.readouterr()
    assert main(["fit", str(log), "--model", "hinge", "--robot", "scara", "--max-fit-seconds", "1",
                 "--save", str(saved), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    f = read_hinge_file(saved)
    assert f.robot == "scara" and f.ci95_factor is not None
    for key in FIT_KEYS:
        assert len(f.ci95_factor[key]) == 4 and all(v >= 1 for v in f.ci95_factor[key])
        assert out["ci95_factor"][key] == [None if v == math.inf else pytest.approx(v) for v in f.ci95_factor[key]]
    assert any(1 < v < 20 for v in f.ci95_factor["stiffness"])                  # the log tells some stiffness
    env = ReachEnv("scara", joint_mode="hinge", randomize={"fitted": str(saved)})
    try:
        for seed in range(3):
            _, info = env.reset(seed=seed)
            drawn = info["randomization"]["fitted"]
            assert tuple(env.robot.drive.stiffness) == drawn["stiffness"]
            for j, (k, fac) in enumerate(zip(f.gains["stiffness"], f.ci95_factor["stiffness"])):
                assert k / fac - 1e-9 <= drawn["stiffness"][j] <= k * fac + 1e-9
            for _ in range(20):
                *_, trunc, info = env.step(env.action_space.sample())
                assert not info["unstable"], info.get("instability")
                if trunc:
                    break
    finally:
        env.close()
