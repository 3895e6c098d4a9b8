"""``armtwin train`` and ``armtwin bench env`` as smoke tests."""

from __future__ import annotations

import importlib.util
import json
import sys

import numpy as np
import pytest

from armtwin.scripts.cli import main


def _require_stable_baselines3() -> None:
    """Fail, not skip: the README's test command installs the rl extra, so its absence is a broken install."""
    try:
        import stable_baselines3  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"stable-baselines3 is not installed ({exc}): pip install -e '.[rl]' "
                    "(after the CPU build of torch; see the README's test command)", pytrace=False)


@pytest.mark.slow
def test_train_smoke_writes_policy_curve_video_and_summary(tmp_path, capsys):
    _require_stable_baselines3()
    out = tmp_path / "run"
    code = main(["train", "armtwin/ScaraReach-v0", "--steps", "250", "--learning-starts", "100", "--eval-episodes", "2",
                 "--video-episodes", "1", "--env-kw", "control=joint", "--env-kw", "episode_steps=25",
                 "--gif", "--mcap", "--size", "656x496", "--out", str(out), "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    _check_eval_mcap(out / "eval.mcap", summary, episodes=2, steps=25)
    assert summary["her"] is True and summary["steps"] == 250
    assert 0.0 <= summary["success_rate"] <= 1.0
    assert summary["files"]["gif"] == str(out / "eval.gif")
    for name in ("policy.zip", "learning_curve.png", "eval.mp4", "eval.gif", "summary.json", "monitor.csv"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    import imageio.v2 as imageio
    frames = imageio.mimread(out / "eval.mp4")
    assert len(frames) == 26  # reset frame + 25 steps (the video's rate is the control rate)
    assert frames[0].shape == (496, 656, 3)                  # --size
    # drawn by the recorder: the overlay strip darkens the bottom rows, the goal cross is cyan
    f = frames[-1].astype(int)
    assert f[-10:].mean() < 0.6 * f[: f.shape[0] // 2].mean()
    cyan = (np.abs(f - np.array([40, 200, 255])).max(axis=2) < 60).sum()
    assert cyan >= 10, cyan
    import zipfile
    assert "policy.pth" in zipfile.ZipFile(out / "policy.zip").namelist()


def _check_eval_mcap(path, summary, episodes: int, steps: int) -> None:
    """eval.mcap holds every evaluation episode (reset + each step) and its goal and outcome; the
    flange's last logged position is as far from the noted goal as the env said."""
    import re

    from armtwin.envs.telemetry.reader import iter_messages, read_joint_runs
    assert summary["files"]["log"] == str(path)
    msgs = list(iter_messages(path, ["/tool_pose", "/rosout", "/joint_states"]))
    poses = [(ns, np.array([d.pose.position.x, d.pose.position.y, d.pose.position.z])) for t, ns, d in msgs
             if t == "/tool_pose"]
    notes = [(ns, d.msg) for t, ns, d in msgs if t == "/rosout" and d.msg.startswith("episode")]
    assert len(poses) == episodes * (steps + 1) and len(notes) == 2 * episodes
    number = r"(-?[0-9.]+)"
    dists = []
    for ep in range(episodes):
        (_, start), (end_ns, end) = notes[2 * ep], notes[2 * ep + 1]
        goal = np.array(re.search(rf"goal \({number}, {number}, {number}\) mm", start).groups(), dtype=float)
        dist = float(re.search(rf"{number} mm from the goal", end).group(1))
        last = [p for ns, p in poses if ns <= end_ns][-1] * 1000
        assert abs(np.linalg.norm(last - goal) - dist) < 0.2, (ep, last, goal, dist)
        dists.append(dist)
    assert abs(np.mean(dists) - 1000 * summary["final_distance_mean_m"]) < 0.1
    run = read_joint_runs(path).runs[""]          # the commanded joints beside the measured, every step
    assert run.q.shape[0] == episodes * (steps + 1) and np.isfinite(run.q_ref).all()


def test_train_without_stable_baselines3_names_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "stable_baselines3", None)  # import fails
    assert main(["train", "armtwin/ScaraReach-v0", "--steps", "10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'rl' extra" in err[0] and 'pip install -e ".[rl]"' in err[0]


@pytest.mark.parametrize("argv,needle", [
    (["train", "armtwin/NoSuch-v0"], "unknown environment"),
    (["train", "armtwin/ScaraReach-v0", "--steps", "0"], "--steps"),
    (["train", "armtwin/ScaraReach-v0", "--size", "641x480"], "--size 641x480"),
    (["train", "armtwin/ScaraReach-v0", "--fps", "500"], "--fps 500"),
    (["train", "armtwin/ScaraReach-v0", "--env-kw", "nokeyvalue"], "KEY=VALUE"),
    (["train", "armtwin/ScaraReach-v0", "--env-kw", "render_mode=\"rgb_array\""], "render_mode"),
    (["train", "armtwin/ScaraTrack-v1", "--env-kw", "program=\"no_such_program.ngc\""], "no such file"),
])
def test_train_bad_input_is_one_line_exit_2(argv, needle, capsys):
    _require_stable_baselines3()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_bench_env_json(capsys):
    # panda-gym comes with the 'bench' extra, which the test install does not have: when it is
    # missing, bench env refuses (test_hardening_io tests that) unless told to measure armtwin alone.
    argv = ["bench", "env", "--steps", "8", "--frames", "1", "--num-envs", "4", "--image-size", "32", "--tool", "2",
            "--cell", "default", "--json"]
    if importlib.util.find_spec("panda_gym") is None:
        argv.append("--armtwin-only")
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    v = res["armtwin_vector"]
    assert v["num_envs"] == 4 and v["steps"] >= 8 and v["steps"] % 4 == 0   # whole vector steps
    assert res["vector_ratio_vs_single"] == pytest.approx(
        res["armtwin_vector"]["steps_per_s_cpu"] / res["armtwin"]["steps_per_s_cpu"])
    for key in ("engine_only", "engine_and_robot_calls"):   # the ceilings: the same env steps as bare engine calls
        e = v[key]
        assert e["steps"] == v["steps"] and e["steps_per_s_cpu"] > 0
        assert e["engine_calls"] == v["steps"] // v["num_envs"] * res["armtwin"]["physics_substeps"]
    assert res["armtwin_rgb"]["image_size"] == 32 and res["armtwin_rgb"]["steps"] == 4
    assert res["armtwin"]["steps"] == 8 and res["armtwin"]["steps_per_s_cpu"] > 0
    assert res["armtwin"]["control"] == "cartesian" and res["armtwin"]["joint_mode"] == "articulation"
    assert res["armtwin"]["render"]["width"] == 320 and res["armtwin"]["render"]["fps_cpu"] > 0
    assert res["armtwin_tool"]["tool"] == 2 and res["armtwin_tool"]["steps"] == 8
    assert res["tool_ratio_vs_flange"] == pytest.approx(
        res["armtwin_tool"]["steps_per_s_cpu"] / res["armtwin"]["steps_per_s_cpu"])
    assert res["armtwin_cell"]["cell"] == "irb120 default cell" and res["armtwin_cell"]["steps"] == 8
    assert res["cell_ratio_vs_alone"] == pytest.approx(
        res["armtwin_cell"]["steps_per_s_cpu"] / res["armtwin"]["steps_per_s_cpu"])
    if res["panda_gym"] is not None:
        assert res["panda_gym"]["steps"] == 8
        assert res["ratio_vs_panda_gym"] == pytest.approx(
            res["armtwin"]["steps_per_s_cpu"] / res["panda_gym"]["steps_per_s_cpu"])
    else:
        assert res["ratio_vs_panda_gym"] is None and res["panda_gym_error"]


# ----- interruption (issue 15 item 7): the policy so far, the curve and a summary are kept --------------

import re
import signal
import subprocess
import time
import zipfile
from pathlib import Path

_FAST = ["--env-kw", "control=\"joint\"", "--env-kw", "episode_steps=20", "--learning-starts", "40",
         "--eval-episodes", "2", "--video-episodes", "1"]


def _start_train(out: Path, steps: int, *extra: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "armtwin", "train", "armtwin/ScaraReach-v0", "--steps", str(steps), "--out", str(out),
            *_FAST, *extra]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_steps(proc: subprocess.Popen, steps: int, timeout: float = 120.0) -> None:
    """Read the child's stderr until its progress shows ``steps`` steps done (``train: N/…``)."""
    seen = ""
    t0 = time.monotonic()
    while not any(int(n) >= steps for n in re.findall(r"train: (\d+)/", seen)):
        ch = proc.stderr.read(1)
        if not ch:
            raise AssertionError(f"the run ended before {steps} steps: {seen[-500:]}")
        seen += ch
        assert time.monotonic() - t0 < timeout, seen[-500:]


def _wait_for(proc: subprocess.Popen, needle: str, timeout: float = 120.0) -> str:
    """Read the child's stderr until ``needle`` shows (progress lines end in \\r or \\n)."""
    seen = ""
    t0 = time.monotonic()
    while needle not in seen:
        ch = proc.stderr.read(1)
        if not ch:
            raise AssertionError(f"the run ended before {needle!r}: {seen[-500:]}")
        seen += ch
        assert time.monotonic() - t0 < timeout, seen[-500:]
    return seen


def _assert_kept(out: Path, err: str) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    for key, path in summary["files"].items():
        assert Path(path).is_file() and Path(path).stat().st_size > 0, key
    assert "policy.pth" in zipfile.ZipFile(out / "policy.zip").namelist()
    assert (out / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    if (out / "eval.mp4").exists():      # a video cut short is closed, so it plays
        import imageio.v2 as imageio
        assert len(imageio.mimread(out / "eval.mp4")) > 0
    assert "Traceback" not in err
    return summary


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_train_keeps_policy_curve_and_summary_and_says_so(tmp_path, sig):
    _require_stable_baselines3()
    out = tmp_path / "run"
    proc = _start_train(out, 20_000)
    try:
        _wait_for(proc, "train: 400/")              # training is under way (40 random steps, then learning)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig, err[-2000:]
    summary = _assert_kept(out, err)
    assert summary["interrupted"] is True and 400 <= summary["steps_done"] < 20_000
    assert summary["success_rate"] is None and summary["eval_episodes"] == 0   # no evaluation after a stop
    for name in ("policy.zip", "vecnormalize.pkl", "learning_curve.png", "monitor.csv", "summary.json"):
        assert (out / name).is_file(), name
    last = err.strip().splitlines()[-1]
    assert f"interrupted by {signal.Signals(sig).name}" in last
    for name in ("policy.zip", "vecnormalize.pkl", "learning_curve.png", "monitor.csv", "summary.json"):
        assert name in last, name
    # the policy so far is a working policy
    from stable_baselines3 import SAC
    import gymnasium as gym
    import armtwin.envs.registration  # noqa: F401
    env = gym.make("armtwin/ScaraReach-v0", control="joint", episode_steps=20)
    try:
        model = SAC.load(out / "policy.zip", env=env)
        obs, _ = env.reset(seed=0)
        action, _ = model.predict(obs, deterministic=True)
        assert env.action_space.contains(action)
    finally:
        env.close()


@pytest.mark.slow
def test_signals_at_random_moments_of_train_never_lose_what_was_written(tmp_path):
    """Seeded: SIGINT or SIGTERM at a random moment from start-up to evaluation. The run ends with
    0 (it had finished) or 128 + the signal, never a traceback; whatever summary.json lists exists
    and is whole; the policy is a valid archive; a video cut short still plays."""
    _require_stable_baselines3()
    rng = np.random.default_rng(2026)
    # one moment in each phase, measured from the run's own progress (not from the wall clock: a
    # busy machine would put every moment into start-up): early training, mid training, around the
    # end of training / the evaluation, and none (the run finishes)
    phases = [0, 100, 300, None]      # steps done when the signal is due; None: no signal
    outcomes = []
    for trial, marker in enumerate(phases):
        out = tmp_path / f"run{trial}"
        sig = [signal.SIGINT, signal.SIGTERM][int(rng.integers(2))]
        proc = _start_train(out, 300)
        try:
            _wait_for(proc, "Ctrl-C stops")          # handlers are installed before this line is printed
            if marker is not None:
                if marker:
                    _wait_steps(proc, marker)
                time.sleep(float(rng.uniform(0.0, 0.5)))
                if proc.poll() is None:
                    proc.send_signal(sig)
            _, err = proc.communicate(timeout=180)
        finally:
            proc.kill()
        assert proc.returncode in (0, 128 + sig), err[-2000:]
        summary = _assert_kept(out, err)
        assert summary["interrupted"] == (proc.returncode != 0)
        outcomes.append("finished" if proc.returncode == 0 else "stopped at %s" % (
            "evaluation" if summary["steps_done"] == 300 else "training"))
    assert outcomes[0] == "stopped at training" and outcomes[-1] == "finished", outcomes


# ----- the learning regression test (issue 21 item 1) -------------------------------------------------

@pytest.mark.slow
def test_sac_her_learns_the_easiest_reach_on_a_fixed_seed_set(tmp_path, capsys):
    """SAC + HER with the repository's hyper-parameters on IRB120Reach (kinematic joints, 5 cm goals),
    6,000 steps, seeds 0 and 1 side by side: about 40 s wall on 2 cores (seed 0 is the README's).

    Measured when written (hyperparams v2): 100 / 90 % evaluation success (seeds 2, 3: 85, 90 %).
    The test asks for every seed >= 60 % and a mean >= 80 %; an untrained policy scores 0-10 %.
    """
    _require_stable_baselines3()
    out = tmp_path / "learn"
    code = main(["train", "armtwin/IRB120Reach-v0", "--seeds", "0-1", "--jobs", "2", "--steps", "6000",
                 "--learning-starts", "500", "--env-kw", "joint_mode=\"kinematic\"", "--env-kw",
                 "distance_threshold=0.05", "--video-episodes", "0", "--out", str(out), "--json"])
    assert code == 0
    res = json.loads(capsys.readouterr().out)
    rates = [r["success_rate"] for r in res["runs"]]
    assert res["complete_seeds"] == [0, 1] and res["hyperparams_version"] >= 2
    assert min(rates) >= 0.6 and res["success_rate_mean"] >= 0.8, rates


@pytest.mark.slow
def test_expert_steps_put_the_scripted_pick_and_place_into_the_replay_buffer(tmp_path, capsys):
    """``expert_steps``: the first env steps are the env's scripted expert (PickPlaceExpert) — its
    episodes succeed in the training monitor — and the policy acts after them; an env without an
    expert refuses the setting in one line."""
    _require_stable_baselines3()
    from armtwin.envs.training import read_monitor
    out = tmp_path / "pp"
    code = main(["train", "armtwin/IRB120PickAndPlace-v0", "--steps", "700", "--learning-starts", "150",
                 "--hp", "expert_steps=400", "--hp", "expert_noise=0.02", "--hp", "batch_size=32",
                 "--hp", "bc_weight=1", "--env-kw", "episode_steps=80", "--eval-episodes", "1",
                 "--video-episodes", "0", "--out", str(out), "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["expert_steps"] == 400 and summary["expert_noise"] == 0.02 and summary["bc_weight"] == 1
    steps, _, success = read_monitor(out / "monitor.csv")
    assert success is not None and len(steps) >= 8
    expert = steps <= 400
    assert expert.sum() == 5 and success[expert].all()             # five demonstrations, every one a success
    # the behaviour-cloning steps pulled the actor towards the expert: on a fresh episode's states its
    # actions are nearer the expert's than an untrained actor's
    import gymnasium as gym
    import stable_baselines3 as sb3
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize
    env = gym.make("armtwin/IRB120PickAndPlace-v0", episode_steps=80)
    norm = VecNormalize.load(str(out / "vecnormalize.pkl"), DummyVecEnv([lambda: env]))
    trained = sb3.SAC.load(out / "policy.zip", env=norm, device="cpu")
    fresh = sb3.SAC("MultiInputPolicy", norm, seed=0, device="cpu", policy_kwargs={"net_arch": [64, 64]})
    expert_policy = env.unwrapped.expert()
    obs, _ = env.reset(seed=99)
    errors = {"trained": [], "fresh": []}
    for _ in range(80):
        a = expert_policy(obs)
        o = norm.normalize_obs({k: v[None] for k, v in obs.items()})
        for name, model in (("trained", trained), ("fresh", fresh)):
            errors[name].append(np.sum((model.predict(o, deterministic=True)[0][0] - a) ** 2))
        obs, *_ = env.step(a)
    env.close()
    assert np.mean(errors["trained"]) < 0.5 * np.mean(errors["fresh"]), errors
    # Push has an expert too (PushExpert): its demonstrations succeed in the monitor as well
    code = main(["train", "armtwin/IRB120Push-v0", "--steps", "260", "--learning-starts", "250",
                 "--hp", "expert_steps=200", "--hp", "batch_size=32", "--eval-episodes", "1",
                 "--video-episodes", "0", "--out", str(tmp_path / "push"), "--json"])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    steps, _, success = read_monitor(tmp_path / "push" / "monitor.csv")
    assert success is not None and (steps <= 200).sum() == 2 and success[steps <= 200].all()
    code = main(["train", "armtwin/IRB120Reach-v0", "--steps", "200", "--hp", "expert_steps=100",
                 "--out", str(tmp_path / "reach")])
    err = capsys.readouterr().err
    assert code == 2 and "expert_steps" in err and "no scripted expert" in err and "Traceback" not in err
