"""CLI: robots and fk commands, and bad input."""

import json

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.kinematics import chain_of, fk
from armtwin.scripts.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_robots_lists_all(capsys):
    code, out, _ = run(capsys, "robots", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["id"] for r in rows] == list(robots.names())
    irb = next(r for r in rows if r["id"] == "irb120")
    assert irb["axes"] == 6 and irb["payload_kg"] == 3.0 and irb["reach_mm"] == 580


@pytest.mark.parametrize("name", robots.names())
def test_fk_json_matches_analytic_fk(capsys, name):
    spec = robots.get(name)
    rng = np.random.default_rng(4)
    q = rng.uniform(spec.lower, spec.upper)
    disp = spec.to_display(q)
    code, out, _ = run(capsys, "fk", name, *[repr(float(v)) for v in disp], "--json")
    assert code == 0
    data = json.loads(out)
    T = fk(chain_of(spec), q)
    assert np.allclose(data["position_mm"], T[:3, 3] * 1000, atol=1e-9)
    assert np.allclose(data["rotation"], T[:3, :3], atol=1e-12)
    from armtwin.controllers.transforms import quat_to_matrix
    assert np.allclose(quat_to_matrix(data["quaternion_xyzw"]), T[:3, :3], atol=1e-9)


def test_fk_irb120_zero_text(capsys):
    code, out, _ = run(capsys, "fk", "irb120", "0", "0", "0", "0", "0", "0")
    assert code == 0 and "374.000" in out and "630.000" in out


@pytest.mark.parametrize("argv,needle", [
    (["fk", "ur5", "0"], "unknown robot 'ur5'"),
    (["fk", "irb120", "0", "0"], "has 6 joints"),
    (["fk", "irb120", "0", "0", "0", "0", "130", "0"], "J5 = 130 deg is outside its range [-120, 120]"),
    (["fk", "scara", "0", "0", "250", "0"], "J3 = 250 mm is outside its range [0, 200]"),
    (["fk", "irb120", "0", "0", "x", "0", "0", "0"], "must be numbers"),
    (["fk", "irb120", "0", "0", "nan", "0", "0", "0"], "finite"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_console_script_runs():
    """The installed ``armtwin`` entry point (setup.cfg), next to the interpreter running the tests."""
    import subprocess
    import sys
    from pathlib import Path
    exe = Path(sys.executable).with_name("armtwin")
    assert exe.exists(), f"the console script is not installed next to {sys.executable}: pip install -e ."
    r = subprocess.run([str(exe), "fk", "irb120", "0", "0", "0", "0", "0", "0", "--json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["position_mm"] == pytest.approx([374.0, 0.0, 630.0])


def _subcommands():
    from armtwin.scripts.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    names = [n for n in sub.choices if n != "bench"]
    bench = next(a for a in sub.choices["bench"]._actions if a.dest == "bench")
    return [[n] for n in names] + [["bench", b] for b in bench.choices]


@pytest.mark.parametrize("argv", _subcommands(), ids=" ".join)
def test_every_command_has_working_help(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    assert "usage: armtwin" in capsys.readouterr().out


def test_ik_rejects_current_joints_outside_the_ranges(capsys):
    code, _, err = run(capsys, "ik", "irb120", "400", "0", "300", "--rpy", "180", "0", "180", "--near", "0", "0", "0", "0", "0", "999")
    assert code == 2 and "J6 = 999 deg is outside its range" in err


def test_train_refuses_a_her_warmup_shorter_than_an_episode(capsys, tmp_path):
    code, _, err = run(capsys, "train", "armtwin/ScaraReach-v0", "--steps", "10", "--learning-starts", "0",
                       "--out", str(tmp_path / "run"))
    assert code == 2 and "--learning-starts must exceed the episode length" in err


@pytest.mark.parametrize("argv", [["show", "scara", "--seconds", "1", "--video", "/proc/armtwin.mp4"],
                                  ["run", "examples/scara_square.ngc", "--robot", "scara", "--video", "/proc/armtwin.mp4"]])
def test_unwritable_video_path_is_one_line_before_anything_runs(capsys, argv):
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    argv = [str(root / a) if a.startswith("examples/") else a for a in argv]
    code, _, err = run(capsys, *argv)
    assert code == 2 and "--video /proc/armtwin.mp4: cannot write in /proc" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("argv, package, extra", [
    (["bench", "gcode", "--lines", "100"], "gcodeparser", "bench"),
])
def test_a_missing_optional_package_is_one_line_naming_its_extra(monkeypatch, capsys, argv, package, extra):
    monkeypatch.setitem(__import__("sys").modules, package, None)  # import now raises ModuleNotFoundError
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert package in err and f".[{extra}]" in err


def test_output_options_are_checked_before_anything_runs(tmp_path, capsys):
    f = tmp_path / "a_file"
    f.write_text("keep me")
    # a file where a folder is expected, a folder where a file is expected: one line, exit 2
    assert main(["compare", "scara", "--out", str(f), "--no-sweeps"]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    (tmp_path / "v.mp4").mkdir()
    assert main(["show", "scara", "--video", str(tmp_path / "v.mp4")]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert f.read_text() == "keep me"


def test_an_unwritable_output_folder_is_found_before_the_run(tmp_path, capsys, monkeypatch):
    import tempfile

    def refuse(*_a, **_k):
        raise OSError(30, "Read-only file system")
    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)  # what a read-only mount answers
    assert main(["compare", "scara", "--out", str(tmp_path / "cmp"), "--no-sweeps"]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "Read-only file system" in err
    assert not (tmp_path / "cmp" / "metrics.csv").exists()
