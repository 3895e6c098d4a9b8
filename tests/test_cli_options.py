"""The shared command-line vocabulary: config without PyBullet, one option per concept, one-line errors."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from armtwin.envs.config import CameraPreset, JointMode, Renderer, VideoSettings, parse_size
from armtwin.scripts.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent


def test_the_config_vocabulary_and_the_cli_options_import_without_pybullet():
    code = ("import sys, armtwin.envs.config, armtwin.scripts.options, armtwin.scripts.cli as c; c.build_parser(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pybullet', 'pybullet_data')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.strip().replace("'", '"')) == []


def _subparsers():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices


def _option(p, flag):
    return next((a for a in p._actions if flag in a.option_strings), None)


def test_every_joint_model_option_offers_exactly_the_enum_and_takes_both_spellings():
    cmds = _subparsers()
    found = []
    for name, p in cmds.items():
        a = _option(p, "--joint-mode")
        if a is None:
            assert _option(p, "--mode") is None, f"{name} has a --mode that is not the shared joint-model option"
            continue
        found.append(name)
        assert set(a.choices) == {m.value for m in JointMode}
        assert "--mode" in a.option_strings and a.dest == "joint_mode"
        for m in JointMode:
            assert m.value in a.help
    assert {"run", "show", "sync", "ui"} <= set(found)


def test_every_camera_option_offers_enum_members_only():
    for name, p in _subparsers().items():
        a = _option(p, "--camera")
        if a is not None:
            assert set(a.choices) <= {c.value for c in CameraPreset}, name
            assert set(a.choices) >= {c.value for c in CameraPreset.robot_views()}, name


@pytest.mark.parametrize("cmd", ["run", "show", "replay"])
def test_every_video_writing_command_has_size_and_fps(cmd):
    p = _subparsers()[cmd]
    assert _option(p, "--size") is not None and _option(p, "--fps") is not None


def test_video_settings_validate_once_with_the_rule_named():
    assert VideoSettings(fps=24, size=(1280, 720), camera="work").camera is CameraPreset.WORK
    assert VideoSettings(renderer="EGL").renderer is Renderer.EGL
    for bad in ({"fps": 0.5}, {"fps": float("nan")}, {"fps": 121}, {"fps": True}, {"size": (641, 480)},
                {"size": (8, 8)}, {"size": (8000, 480)}, {"size": (640.0, 480)}, {"camera": "fisheye"}):
        with pytest.raises(ValueError):
            VideoSettings(**bad)
    assert parse_size("1280x720") == (1280, 720)
    for text in ("1280", "axb", "641x480", "-640x480", ""):
        with pytest.raises(ValueError, match="video size"):
            parse_size(text)


def _private_cross_command_imports() -> list[str]:
    """``from .cmd_x import _y`` (or bench_) inside scripts/, and any import of a private name of
    another module of the package."""
    bad = []
    for path in sorted(ROOT.glob("**/*.py")):
        if {".venv", "tests", "build", "dist", ".git"} & set(path.relative_to(ROOT).parts):
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        bad.append(f"{path.relative_to(ROOT)}: from {'.' * node.level}{node.module or ''} import {alias.name}")
    return bad


def test_no_module_imports_a_private_helper_of_another_module():
    assert _private_cross_command_imports() == []


def test_numeric_options_take_negative_numbers_as_armtwin_prints_them(capsys):
    # `armtwin fk --json` prints quaternions such as -7.7e-05; ik must take them back
    assert main(["ik", "irb120", "374", "137.47", "479.39", "--quat", "-7.7e-05", "0.7071", "1.3e-05", "0.7071"]) == 0
    assert "best" in capsys.readouterr().out
    assert main(["fk", "irb120", "-1E1", "-.5", "0", "0", "-2.5e+01", "0"]) == 0


@pytest.mark.parametrize("argv, words", [
    (["bogus"], "invalid choice: 'bogus'"),
    (["show", "irb120"], "show: the following arguments are required: --video"),
    (["run", "x.ngc", "--robot", "irb120", "--joint-mode", "springy"], "run: argument --joint-mode/--mode: invalid choice"),
    (["fk", "irb120", "0", "0", "0", "0", "0", "0", "--nonsense"], "unrecognized arguments: --nonsense"),
])
def test_usage_errors_are_one_line_with_exit_code_2(argv, words):
    p = subprocess.run([sys.executable, "-m", "armtwin", *argv], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("armtwin: error: ") and words in p.stderr, p.stderr
    assert "usage:" not in p.stderr and "Traceback" not in p.stderr


def test_armtwin_robots_shows_the_joint_ranges_and_speeds_it_promises(capsys):
    from armtwin import robots
    assert main(["robots"]) == 0
    out = capsys.readouterr().out
    assert "J3 -110…70 deg (250 deg/s)" in out and "J3 0…200 mm" in out
    for name in robots.names():
        spec = robots.get(name)
        row = next(ln for ln in out.splitlines()[5:] if ln.startswith(name))
        assert row.count(" J") + row.startswith("J") == spec.dof
