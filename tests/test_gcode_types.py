"""The type check of the G-code package (issue 16): mypy passes on controllers/gcode (and the run
loop, envs/runner.py), with the
bodies of unannotated functions checked too, so an annotation that lies fails CI. The modules the
package imports (IK, kinematics) are read for their types; their own errors are the IK package's
business (issue 16.4)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import armtwin

REPO = Path(armtwin.__file__).resolve().parent


@pytest.mark.slow
def test_mypy_passes_on_the_gcode_package_and_the_run_loop(tmp_path):
    pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e \".[test]\"")
    # the repository is the package `armtwin` (package_dir armtwin = .): give mypy a folder of that name
    (tmp_path / "armtwin").symlink_to(REPO, target_is_directory=True)
    r = subprocess.run([sys.executable, "-m", "mypy", "-p", "armtwin.controllers.gcode", "-m", "armtwin.envs.runner",
                        "--check-untyped-defs",
                        "--follow-imports=silent",   # the modules it imports (IK, kinematics) are typed elsewhere
                        "--cache-dir", str(tmp_path / ".mypy_cache"), "--no-error-summary"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
