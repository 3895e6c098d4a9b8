"""The type check: the modules listed here pass mypy (annotations that lie fail CI).

The repository is the package ``armtwin`` (setup.cfg maps it onto the top level), so mypy runs
on a folder where ``armtwin`` is a link to the repository. Extend :data:`TYPED` as modules are
made clean; the goal is every module of ``controllers/`` and the configuration vocabulary.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: modules (or packages) that must pass, relative to the repository
TYPED = [
    "controllers/choices.py",
    "controllers/gcode",          # the G-code package: parser, interpreter, planner, preflight, trajectory
    "controllers/ik",              # the whole IK package (its modules also ask for typed defs, inline)
    "controllers/kinematics.py",
    "controllers/transforms.py",
    "controllers/dynamics.py",
    "controllers/ident.py",
    "controllers/virtual_rig.py",
    "controllers/tools.py",
    "controllers/tcp.py",
    "controllers/torque_budget.py",
    "envs/config.py",
    "envs/camera.py",
    "envs/errors.py",
    "envs/runner.py",
    "envs/workpieces.py",
    "envs/gripper.py",
    "envs/hinge_fit.py",
    "envs/drive_fit.py",
    "envs/articulation_fit.py",
    "envs/gym_options.py",
    "envs/hyperparams.py",
    "envs/randomize.py",
    "envs/marking.py",
    "envs/interference.py",
    "envs/sweep.py",
    "robots/bodies.py",
    "robots/gains.py",
    "robots/reference.py",
    "robots/urdfcheck.py",
    "robots/tooling.py",
    "robots/shapes.py",
    "robots/meshgen.py",
    "scripts/options.py",
    "scripts/cmd_torque.py",
    "scripts/cmd_fit.py",
    "scripts/rig_identify.py",
    "scripts/bench_fit.py",
    "scripts/placing.py",
]


def test_the_typed_modules_pass_mypy(tmp_path):
    if shutil.which("mypy", path=str(Path(sys.executable).parent)) is None and not _has_mypy():
        pytest.fail("mypy is not installed: it is in the 'test' extra (pip install -e \".[test]\")")
    (tmp_path / "armtwin").symlink_to(ROOT, target_is_directory=True)
    # --check-untyped-defs: the bodies of functions without annotations are checked too
    cmd = [sys.executable, "-m", "mypy", "--ignore-missing-imports", "--follow-imports=silent", "--check-untyped-defs",
           "--cache-dir", str(tmp_path / ".mypy_cache"), *[f"armtwin/{m}" for m in TYPED]]
    p = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "MYPY_FORCE_COLOR": "0"})
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]


def _has_mypy() -> bool:
    try:
        import mypy  # noqa: F401
        return True
    except ImportError:
        return False


def test_every_typed_module_exists():
    assert [m for m in TYPED if not ((ROOT / m).is_file() or (ROOT / m / "__init__.py").is_file())] == []
