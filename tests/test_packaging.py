"""What a user installs: a non-editable install finds its examples, firmware, manuals and the robots'
meshes, and every manual the code and the README cite is in the repository (in armtwin's own docs/)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _sources() -> list[Path]:
    files = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("firmware/**/*.md")]
    for folder in ("controllers", "envs", "robots", "scripts", "firmware"):
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".cpp", ".h", ".ino", ".c")]
    return files


def test_every_manual_the_code_and_readme_cite_is_in_docs():
    cited: dict[str, list[str]] = {}
    for path in _sources():
        text = path.read_text(errors="replace")
        for name in re.findall(r"\bdocs/([A-Za-z0-9_]+\.md)", text):
            cited.setdefault(name, []).append(str(path.relative_to(ROOT)))
        assert "SPEC.md" not in text, f"{path.relative_to(ROOT)} cites SPEC.md, which is not part of the repository"
    missing = {n: where for n, where in cited.items() if not (ROOT / "docs" / n).is_file()}
    assert not missing, missing
    assert {"GCODE.md", "PROTOCOL.md", "ROBOTS.md", "JOINT_MODELS.md", "RIG.md"} <= set(cited)


def test_every_image_the_manuals_show_is_tracked_by_git():
    """An image the README or a manual shows must be in the repository: a *.gif ignore rule once
    kept the README's GIFs out of every clone while the README showed them."""
    shown = set()
    for path in [ROOT / "README.md", *ROOT.glob("docs/*.md")]:
        for ref in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", path.read_text()):
            if "://" not in ref:
                shown.add(str((path.parent / ref).resolve().relative_to(ROOT)))
    assert shown, "no images found: the pattern no longer matches the README"
    tracked = set(subprocess.run(["git", "ls-files", *sorted(shown)], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout.split())
    assert shown <= tracked, f"shown but not in git: {sorted(shown - tracked)}"


def test_a_non_editable_install_finds_examples_firmware_and_docs(tmp_path):
    target = tmp_path / "site"
    had_build = (ROOT / "build").exists()
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--target", str(target), str(ROOT)], capture_output=True, text=True, timeout=300)
    if not had_build:              # setuptools builds in the source tree: leave it as it was
        import shutil
        shutil.rmtree(ROOT / "build", ignore_errors=True)
    assert p.returncode == 0, p.stderr
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(target)!r})
        import armtwin
        from pathlib import Path
        assert Path(armtwin.__file__).parent == Path({str(target / "armtwin")!r}), armtwin.__file__
        from armtwin.envs import examples_dir
        from armtwin.envs.rig import FIRMWARE_DIR
        progs = sorted(p.name for p in examples_dir().glob("*.ngc"))
        fw = sorted(p.name for p in Path(FIRMWARE_DIR).iterdir())
        docs = sorted(p.name for p in (Path(armtwin.__file__).parent / "docs").glob("*.md"))
        from armtwin import robots
        from armtwin.robots.urdfcheck import check_urdf
        for name in robots.names():      # every mesh a URDF names is a file next to it
            check_urdf(robots.get(name).urdf_path)
        meshes = len(list((Path(armtwin.__file__).parent / "robots" / "urdf" / "meshes").rglob("*.obj")))
        print(len(progs), "rig_core.cpp" in fw, "GCODE.md" in docs, meshes)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    n, fw, docs, meshes = out.stdout.split()
    assert int(n) == len(list((ROOT / "examples").glob("*.ngc"))) and fw == "True" and docs == "True"
    assert int(meshes) == len(list((ROOT / "robots" / "urdf" / "meshes").rglob("*.obj"))) > 0
