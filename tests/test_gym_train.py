"""``armtwin train`` and ``armtwin bench env`` as smoke tests."""

from __future__ import annotations

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
                 "--gif", "--out", str(out), "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["her"] is True and summary["steps"] == 250
    assert 0.0 <= summary["success_rate"] <= 1.0
    assert summary["files"]["gif"] == str(out / "eval.gif")
    for name in ("policy.zip", "learning_curve.png", "eval.mp4", "eval.gif", "summary.json", "monitor.csv"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    import imageio.v2 as imageio
    frames = imageio.mimread(out / "eval.mp4")
    assert len(frames) == 26  # reset frame + 25 steps (the video's rate is the control rate)
    # drawn by the recorder: the overlay strip darkens the bottom rows, the goal cross is cyan
    f = frames[-1].astype(int)
    assert f[-10:].mean() < 0.6 * f[: f.shape[0] // 2].mean()
    cyan = (np.abs(f - np.array([40, 200, 255])).max(axis=2) < 60).sum()
    assert cyan >= 10, cyan
    import zipfile
    assert "policy.pth" in zipfile.ZipFile(out / "policy.zip").namelist()


def test_train_without_stable_baselines3_names_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "stable_baselines3", None)  # import fails
    assert main(["train", "armtwin/ScaraReach-v0", "--steps", "10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rl extra" in err[0] and "stable-baselines3" in err[0]


@pytest.mark.parametrize("argv,needle", [
    (["train", "armtwin/NoSuch-v0"], "unknown environment"),
    (["train", "armtwin/ScaraReach-v0", "--steps", "0"], "--steps"),
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
    assert main(["bench", "env", "--steps", "8", "--frames", "1", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["armtwin"]["steps"] == 8 and res["armtwin"]["steps_per_s_cpu"] > 0
    assert res["armtwin"]["control"] == "cartesian" and res["armtwin"]["joint_mode"] == "articulation"
    assert res["armtwin"]["render"]["width"] == 320 and res["armtwin"]["render"]["fps_cpu"] > 0
    if res["panda_gym"] is not None:
        assert res["panda_gym"]["steps"] == 8
        assert res["ratio_vs_panda_gym"] == pytest.approx(
            res["armtwin"]["steps_per_s_cpu"] / res["panda_gym"]["steps_per_s_cpu"])
    else:
        assert res["ratio_vs_panda_gym"] is None and res["panda_gym_error"]
