"""armtwin fit --model hinge: the hinge model's gains fitted to a run log (envs/hinge_fit.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from armtwin import robots
from armtwin.envs.hinge_fit import Target, fit_hinge, project_to_margin, read_run_log
from armtwin.scripts.cli import main


@pytest.fixture(scope="module")
def articulation_log(tmp_path_factory):
    """The IRB120 pick-and-place program run with the articulation model, logged."""
    path = tmp_path_factory.mktemp("hinge") / "art.csv"
    assert main(["run", "examples/irb120_pick_place.ngc", "--robot", "irb120", "--joint-mode", "articulation",
                 "--log", str(path)]) == 0
    return path


@pytest.mark.slow
@pytest.mark.parametrize("target", list(Target))
def test_fitted_hinge_tracks_no_worse_than_the_gain_rule_and_keeps_its_margin(articulation_log, target):
    """Fitted on the log's first 2 s, checked on the remaining 23 s: every joint's held-out RMS
    tracking error is no worse than the rule's in all (measured, both targets: J6 20.2 -> 6.9 deg,
    J3 0.31 -> 0.27, J5 0.20 -> 0.17, J2 0.115 -> 0.117), and the gains keep the rule's stability
    margin."""
    spec = robots.get("irb120")
    trace = read_run_log(articulation_log, spec)
    rep = fit_hinge(spec, trace, target=target, max_fit_seconds=2.0, max_evaluations=40)
    print(target.value, "held-out RMS rule", np.round(rep.rms_rule_held, 3), "fitted", np.round(rep.rms_fit_held, 3))
    assert rep.improved
    total = lambda e: float(np.sqrt(np.mean(np.square(e))))  # noqa: E731
    assert total(rep.rms_fit) < total(rep.rms_rule)
    assert total(rep.rms_fit_held) <= total(rep.rms_rule_held)
    assert rep.max_fit_held <= rep.max_rule_held
    assert rep.eigen_fit <= 2.0 + 1e-9 and rep.eigen_rule <= 2.0 + 0.05
    assert rep.fitted != rep.rule


def test_projection_scales_unstable_gains_back_to_the_rules_margin():
    from armtwin.envs.hinge_fit import StabilityMargin
    spec = robots.get("scara")
    margin = StabilityMargin(spec)
    from dataclasses import replace
    hot = replace(spec.drive, stiffness=tuple(10 * k for k in spec.drive.stiffness))
    back = project_to_margin(hot, margin)
    assert margin.eigenvalue(hot) > 4.0
    assert margin.eigenvalue(back) == pytest.approx(2.0)
    assert project_to_margin(spec.drive, margin) == spec.drive


def test_cli_fit_hinge_reports_saves_and_refuses_bad_input(articulation_log, tmp_path, capsys):
    code = main(["fit", str(articulation_log), "--model", "hinge", "--robot", "irb120", "--max-fit-seconds", "1",
                 "--save", str(tmp_path / "hinge.toml"), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "hinge" and len(out["fitted"]["stiffness"]) == 6
    import tomllib
    saved = tomllib.loads((tmp_path / "hinge.toml").read_text())
    assert saved["stiffness"] == pytest.approx(out["fitted"]["stiffness"])
    assert all(math.isfinite(v) and v > 0 for v in saved["stiffness"])
    for argv, msg in ((["--model", "hinge"], "--robot"), (["--model", "hinge", "--robot", "scara"], "scara has 4"),
                      (["--model", "hinge", "--robot", "irb120", "--max-fit-seconds", "0"], "--max-fit-seconds"),
                      (["--robot", "irb120"], "--robot belongs to --model hinge")):
        assert main(["fit", str(articulation_log), *argv]) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and msg in err[0], (argv, err)


def test_run_with_the_fitted_hinge_gains_follows_the_path_no_worse_than_the_rule(articulation_log, tmp_path, capsys):
    """The gains ``fit --model hinge --save`` wrote, used by ``armtwin run --hinge-gains``: the whole
    program's flange path error is no worse than with the rule's gains."""
    assert main(["fit", str(articulation_log), "--model", "hinge", "--robot", "irb120", "--max-fit-seconds", "1",
                 "--save", str(tmp_path / "hinge.toml"), "--json"]) == 0
    capsys.readouterr()
    err = {}
    for name, extra in (("rule", []), ("fitted", ["--hinge-gains", str(tmp_path / "hinge.toml")])):
        assert main(["run", "examples/irb120_pick_place.ngc", "--robot", "irb120", "--joint-mode", "hinge", *extra,
                     "--json"]) == 0
        err[name] = json.loads(capsys.readouterr().out)["rms_error_mm"]
    print("path error RMS, mm:", err)
    assert err["fitted"] <= err["rule"]
    (tmp_path / "bad.toml").write_text("stiffness = [1, 2]\ndamping = [1, 2]\njoint_damping = [0, 0]\n")
    for extra, msg in ((["--joint-mode", "hinge", "--hinge-gains", str(tmp_path / "bad.toml")], "6 finite values"),
                       (["--hinge-gains", str(tmp_path / "hinge.toml")], "--joint-mode hinge")):
        assert main(["run", "examples/irb120_pick_place.ngc", "--robot", "irb120", *extra]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert msg in lines[-1], lines
