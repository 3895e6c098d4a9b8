"""The versioned hyper-parameter file and ``armtwin train --seeds`` (issue 21 item 1)."""

from __future__ import annotations

import json

import pytest

from armtwin.envs import registration
from armtwin.envs.hyperparams import HYPERPARAMS_FILE, Algo, file_version, load_settings, parse_override
from armtwin.scripts.cli import CliError, main
from armtwin.scripts.cmd_train import parse_seeds


@pytest.mark.parametrize("algo", list(Algo))
@pytest.mark.parametrize("env_id", sorted(registration.ENV_IDS))
def test_the_repository_file_has_valid_settings_for_every_id(algo, env_id):
    s = load_settings(algo, env_id, goal_env=True)
    assert s.version == file_version() >= 1 and s.steps > 0
    assert s.her == (algo is Algo.SAC and s.her)
    assert s.algo_kwargs["policy_kwargs"]["net_arch"]


def test_env_tables_change_the_defaults_and_overrides_change_both(tmp_path):
    f = tmp_path / "hp.toml"
    f.write_text('version = 7\n[sac.default]\nsteps = 100\nlearning_rate = 1e-3\nher = true\nn_sampled_goal = 4\n'
                 '[sac."armtwin/ScaraReach-v0"]\nsteps = 200\nenv_kwargs = {control = "joint"}\n')
    s = load_settings("sac", "armtwin/ScaraReach-v0", path=f, goal_env=True)
    assert (s.version, s.steps, s.her, dict(s.env_kwargs)) == (7, 200, True, {"control": "joint"})
    assert s.algo_kwargs["replay_buffer_kwargs"] == {"n_sampled_goal": 4}
    o = load_settings("sac", "armtwin/ScaraReach-v0", path=f, overrides={"learning_rate": 3e-4, "her": False},
                      env_kwargs={"joint_mode": "hinge"}, goal_env=True)
    assert o.algo_kwargs["learning_rate"] == 3e-4 and not o.her and "replay_buffer_kwargs" not in o.algo_kwargs
    assert dict(o.env_kwargs) == {"control": "joint", "joint_mode": "hinge"}
    assert dict(o.overrides) == {"learning_rate": 3e-4, "her": False}
    assert not load_settings("sac", "armtwin/ScaraTrack-v1", path=f, goal_env=False).her   # HER needs a goal env


@pytest.mark.parametrize("text,match", [
    ('version = 1\n[sac.default]\nsteps = 10\nlerning_rate = 1e-3\n', "unknown sac hyper-parameter 'lerning_rate'"),
    ('version = 1\n[sac.default]\nsteps = 10\ngamma = 1.5\n', r"gamma must be a number in \(0, 1\]"),
    ('version = 1\n[sac.default]\nsteps = 0\n', "steps must be"),
    ('version = 1\n[ppo.default]\nsteps = 10\ntau = 0.1\n', "unknown ppo hyper-parameter 'tau'"),
    ('[sac.default]\nsteps = 10\n', "version"),
    ('version = 1\n[sac.default]\nsteps = 10\nexpert_noise = 2\n', r"expert_noise must be a number in \[0, 1\]"),
    ('version = 1\n[sac.default]\nsteps = 10\nbc_weight = -1\n', "bc_weight must be a number >= 0"),
    ('version = 1\n[sac.default]\nsteps = 10\nexpert_steps = 1.5\n', "expert_steps must be a whole number"),
    ('version = 1\n[sac.default\n', "not valid TOML"),
])
def test_a_bad_file_names_the_table_and_key(tmp_path, text, match):
    f = tmp_path / "hp.toml"
    f.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_settings("ppo" if "ppo" in text else "sac", "armtwin/ScaraReach-v0", path=f)


def test_overrides_are_read_as_toml_values_and_checked():
    assert parse_override("learning_rate=3e-4") == ("learning_rate", 3e-4)
    assert parse_override("net_arch=[256, 256]") == ("net_arch", [256, 256])
    assert parse_override("her=false") == ("her", False)
    assert parse_override("ent_coef=auto_0.1") == ("ent_coef", "auto_0.1")
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_override("nonsense")
    with pytest.raises(ValueError, match="--hp: batch_size must be"):
        load_settings("sac", "armtwin/ScaraReach-v0", overrides={"batch_size": -3})


@pytest.mark.parametrize("text,seeds", [("0-4", [0, 1, 2, 3, 4]), ("3", [3]), ("0,2,7", [0, 2, 7]),
                                        ("5-6,0", [0, 5, 6]), (" 1 - 2 ", [1, 2])])
def test_parse_seeds(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "a", "4-2", "0-1000", "-1", "1.5", "0-99999999999"])
def test_parse_seeds_refuses(text):
    with pytest.raises(CliError, match="--seeds"):
        parse_seeds(text)


@pytest.mark.parametrize("argv,needle", [
    (["--seed", "1", "--seeds", "0-1"], "not both"),
    (["--hp", "lerning_rate=1"], "unknown sac hyper-parameter"),
    (["--hp", "gamma=2"], "gamma must be"),
    (["--jobs", "0", "--seeds", "0-1"], "--jobs"),
    (["--env-kw", "control_freq=0"], "control_freq"),
])
def test_train_refuses_bad_options_in_one_line(capsys, tmp_path, argv, needle):
    assert main(["train", "armtwin/ScaraReach-v0", "--out", str(tmp_path / "r"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


@pytest.mark.slow
def test_train_seeds_runs_each_seed_in_its_folder_and_reports_mean_and_sd(tmp_path, capsys):
    out = tmp_path / "seeds"
    code = main(["train", "armtwin/ScaraReach-v0", "--seeds", "3-5", "--jobs", "2", "--steps", "120",
                 "--learning-starts", "30", "--env-kw", "control=\"joint\"", "--env-kw", "episode_steps=20",
                 "--eval-episodes", "2", "--video-episodes", "0", "--out", str(out), "--json"])
    assert code == 0
    res = json.loads(capsys.readouterr().out)
    assert res["seeds"] == [3, 4, 5] and res["complete_seeds"] == [3, 4, 5] and res["jobs"] == 2
    rates = [r["success_rate"] for r in res["runs"]]
    import numpy as np
    assert res["success_rate_mean"] == pytest.approx(np.mean(rates))
    assert res["success_rate_sd"] == pytest.approx(np.std(rates, ddof=1))
    for r in res["runs"]:
        s = json.loads((out / f"seed-{r['seed']}" / "summary.json").read_text())
        assert s["seed"] == r["seed"] and s["steps_done"] == 120 and s["hyperparams_version"] == res["hyperparams_version"]
    assert (out / "learning_curves.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((out / "seeds.json").read_text())["success_rate_mean"] == res["success_rate_mean"]
    assert len(res["curves"]["mean"]) == len(res["curves"]["steps"]) == 101
