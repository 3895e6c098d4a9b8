"""`armtwin sweep`: sweep files checked in one line, every job run or reported, a real Ray cluster."""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from armtwin.envs.sweep import JobKind, SweepSpecError, load_spec, run_sweep

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _spec(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("text, words", [
    ("kind = 'bake'\n", "kind: unknown job kind 'bake'"),
    ("name = 'x'\n", "kind: missing"),
    ("kind = 'check'\ncolour = 1\n", "colour: unknown key"),
    ("kind = 'check'\n[base]\nrobot = 'irb120'\nspeed = 3\n[grid]\nprogram = ['../*.ngc']\n", "speed: not a parameter"),
    ("kind = 'check'\n[base]\nrobot = 'irb120'\n", "program: a check job needs it"),
    ("kind = 'check'\n[base]\nrobot = 'irb120'\n[grid]\nprogram = []\n", "grid.program: must be a non-empty list"),
    ("kind = 'check'\n[base]\nrobot = 'irb120'\n[grid]\nprogram = ['nothing_*.ngc']\n", "matches no file"),
    ("kind = 'compare'\n[base]\nrobot = 'irb120'\nmode = 'hinge'\n[grid]\ndt = [0.001]\npayload = [0.0]\n"
     "gains = " + str(list(range(200))) + "\nmotion = " + str(["pick-place"] * 60) + "\n", "jobs; a sweep may have at most"),
    ("kind = 'compare'\nretries = 99\n[base]\nrobot = 'irb120'\nmode = 'hinge'\n", "retries: a whole number"),
    ("kind = 'compare'\ntimeout_s = -1\n[base]\nrobot = 'irb120'\nmode = 'hinge'\n", "timeout_s"),
    ("kind = = 'check'\n", "not valid TOML"),
])
def test_a_bad_sweep_file_is_named_in_one_line(tmp_path, text, words):
    (tmp_path / "sub").mkdir()
    p = tmp_path / "sub" / "s.toml"
    p.write_text(text)
    with pytest.raises(SweepSpecError, match=None) as e:
        load_spec(p)
    assert words in str(e.value) and str(p) in str(e.value) and "\n" not in str(e.value)


def test_the_grid_is_the_cartesian_product_in_order_with_globs_expanded():
    spec = load_spec(EXAMPLES / "sweeps" / "check_examples.toml")
    jobs = spec.jobs()
    programs = sorted(str(p) for p in EXAMPLES.glob("irb120_*.ngc"))
    assert [j.params["program"] for j in jobs] == programs
    assert spec.kind is JobKind.CHECK and all(j.params["robot"] == "irb120" for j in jobs)
    spec = load_spec(EXAMPLES / "sweeps" / "compare_dt_payload.toml")
    pts = [(j.params["dt"], j.params["payload"]) for j in spec.jobs()]
    assert pts == [(d, p) for d in (0.002, 0.004, 0.006, 0.008) for p in (0.0, 1.5, 3.0)]


def test_local_sweep_runs_every_job_and_reports_failures_after_retries(tmp_path):
    (tmp_path / "ok.ngc").write_text("G21 G90\nG1 X10 F600\nG1 Y10\n")
    (tmp_path / "faulty.ngc").write_text("G21 G90\nG1 X10\n")            # no feed rate: a finding, not a failure
    spec = load_spec(_spec(tmp_path, "kind = 'check'\nretries = 2\n[base]\nrobot = 'irb120'\n"
                                     "[grid]\nprogram = ['ok.ngc', 'faulty.ngc', 'gone.ngc']\n"))
    seen = []
    rep = run_sweep(spec, executor="local", progress=lambda d, n, r: seen.append((d, n, r.job.index)))
    assert [r.job.index for r in rep.results] == [0, 1, 2] and seen == [(1, 3, 0), (2, 3, 1), (3, 3, 2)]
    ok, faulty, gone = rep.results
    assert ok.ok and ok.results["clean"] and ok.results["program_time_s"] > 0 and ok.attempts == 1
    assert faulty.ok and not faulty.results["clean"] and faulty.results["faults"] == 1
    assert not gone.ok and gone.attempts == 3 and "gone.ngc" in gone.error     # retried, then reported
    assert rep.failed == [gone]


def test_sweep_command_writes_the_table_and_the_plot_and_exits_1_on_a_failed_job(tmp_path):
    (tmp_path / "a.ngc").write_text("G21 G90\nG1 X10 F600\n")
    (tmp_path / "b.ngc").write_text("G21 G90\nG1 X20 F600\nG1 Y5\n")
    spec = _spec(tmp_path, "kind = 'check'\nretries = 0\n[base]\nrobot = 'irb120'\n"
                           "[grid]\nprogram = ['*.ngc', 'missing.ngc']\n")
    p = subprocess.run([sys.executable, "-m", "armtwin", "sweep", str(spec), "--executor", "local", "--out",
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    assert "2 of 3 jobs finished" in p.stdout and "missing.ngc" in p.stdout
    rows = list(csv.DictReader(open(tmp_path / "out" / "results.csv")))
    assert [r["ok"] for r in rows] == ["True", "True", "False"]
    assert float(rows[1]["program_time_s"]) > float(rows[0]["program_time_s"]) > 0
    assert (tmp_path / "out" / "program_time_s.png").stat().st_size > 5000
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["failed"] == 1 and data["jobs"] == 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """A real local Ray cluster on 127.0.0.1 (`ray start --head`), stopped afterwards."""
    pytest.importorskip("ray")
    ray_exe = str(Path(sys.executable).parent / "ray")
    port = _free_port()
    tmp = tmp_path_factory.mktemp("ray")
    # Ray >= 2.52 authenticates clients with a token: one for this cluster, given to every client
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN": os.urandom(16).hex()}
    start = [ray_exe, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=2",
             "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={tmp}"]
    p = subprocess.run(start, capture_output=True, text=True, timeout=180, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    try:
        yield f"127.0.0.1:{port}", env
    finally:
        subprocess.run([ray_exe, "stop", "--force"], capture_output=True, timeout=120, env=env)


def test_a_sweep_runs_on_a_ray_cluster_through_its_address(ray_cluster, tmp_path):
    address, env = ray_cluster
    spec = _spec(tmp_path, "kind = 'compare'\nretries = 1\n[base]\nrobot = 'scara'\nmotion = 'pick-place'\n"
                           "[grid]\nmode = ['kinematic', 'articulation']\ndt = [0.01, 0.02]\n")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "armtwin", "sweep", str(spec), "--address", address, "--out",
                        str(tmp_path / "out"), "--json"], capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout)
    assert summary["jobs"] == 4 and summary["failed"] == 0 and summary["workers"] == 2
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    rows = data["results"]
    assert [(r["mode"], r["dt"]) for r in rows] == [("kinematic", 0.01), ("kinematic", 0.02),
                                                    ("articulation", 0.01), ("articulation", 0.02)]
    assert all(r["ok"] and r["stable"] for r in rows)
    kin = [r for r in rows if r["mode"] == "kinematic"]
    assert all(r["rms_flange_err_mm"] < 1e-6 for r in kin)            # kinematic is exact
    assert {r["pid"] for r in rows} - {os.getpid()}                    # ran in Ray's workers, not here
    assert time.monotonic() - t0 < 600
