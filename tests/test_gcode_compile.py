"""The one program -> control trajectory service (issue 16.1): compile_program, without PyBullet,
and every consumer — the runner, the teach pendant, the Gym Track env — commanding the same joints."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.gcode import ErrorCode, compile_program, machine_for

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.ngc"))
IRB = robots.get("irb120")


def _robot_of(path: Path) -> str:
    return "aubo_i5" if path.name.startswith("aubo_i5") else path.name.split("_")[0]


def test_the_compile_service_needs_no_pybullet():
    code = ("import sys; from armtwin import robots; from armtwin.controllers.gcode import compile_program; "
            "c = compile_program('G21 G90\\nG1 X5 F600\\n', robots.get('irb120')); "
            "assert c.ok and c.trajectory.count > 10; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('pybullet', 'pybullet_data') "
            "or m.startswith('armtwin.envs')]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_program_that_cannot_run_is_a_result_naming_its_first_fault():
    c = compile_program("G21 G90\nG1 X5000 F600\nG1 E1\n", IRB)
    assert not c.ok and c.trajectory is None
    assert [f.code for f in c.errors] == [ErrorCode.UNREACHABLE, ErrorCode.UNSUPPORTED_WORD]
    assert c.refusal.startswith("line 2") and "and 1 more" in c.refusal
    empty = compile_program("(nothing)\n", IRB)
    assert not empty.ok and "error 106" in empty.refusal


def test_strict_counts_warnings_and_the_period_is_honoured():
    near = "G21 G90 G0 X-340 Y0 Z200\n"        # ends with the wrist centre almost above the base: a warning
    assert compile_program(near, IRB).ok
    strict = compile_program(near, IRB, strict=True)
    assert not strict.ok and "103" in strict.refusal
    c = compile_program("G21 G90\nG1 X10 F600\n", IRB, period=0.01)
    assert c.trajectory.period == 0.01 and c.trajectory.checked
    t = c.trajectory.plan.sample_times(0.01, 0, c.trajectory.count)
    assert np.allclose(np.diff(t)[:-1], 0.01) and t[-1] == pytest.approx(c.report.duration)
    with pytest.raises(ValueError, match="period"):
        compile_program("G1 X1 F600\n", IRB, period=0.0)


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_runner_pendant_and_track_env_command_the_same_joints(path, tmp_path):
    """For every example program: the joints the runner logs, the pendant queues and TrackEnv
    commands with a zero action are one and the same trajectory (the one compile_program made)."""
    import gymnasium as gym

    import armtwin.envs  # noqa: F401  (registers the envs)
    from armtwin.envs.pendant import PendantConfig, PendantCore
    from armtwin.envs.runner import RunConfig, run_program

    spec = robots.get(_robot_of(path))
    period = machine_for(spec).control_period
    text = path.read_text()
    compiled = compile_program(text, spec)
    assert compiled.ok, compiled.refusal
    _, q, _ = compiled.trajectory.arrays()
    K = len(q)
    fmt = lambda Q: [[f"{v:.4f}" for v in spec.to_display(row)] for row in Q]   # noqa: E731 - as the log

    # the runner: one logged command per control period
    log = tmp_path / "run.csv"
    res = run_program(compiled, spec, RunConfig(), log_path=str(log))
    assert res.samples == K
    with open(log, newline="") as fh:
        rows = list(csv.reader(fh))
    n = spec.dof
    cmd = [r[8:8 + n] for r in rows[1:]]
    assert cmd == fmt(q)

    # the pendant: the robot stands at home, where programs start: no lead-in, then every sample
    core = PendantCore(spec, config=PendantConfig(dt=period))
    try:
        planned = core.plan_program(text)
    finally:
        core.close()
    assert not isinstance(planned, str), planned
    assert np.array_equal(np.array([p[0] for p in planned]), q)

    # TrackEnv with the program: a zero action commands the next sample's joints, exactly
    env = gym.make(f"armtwin/{ {'scara': 'Scara', 'irb120': 'IRB120', 'aubo_i5': 'AuboI5'}[spec.name] }Track-v1",
                   program=str(path), control="joint", joint_mode="kinematic", control_freq=1.0 / period)
    try:
        _, _ = env.reset(seed=0)
        base = env.unwrapped
        np.testing.assert_allclose(base.robot.q, q[0], rtol=0, atol=1e-12)     # it starts on sample 0
        refs, sent = [], []
        for k in range(K - 1):
            refs.append(base.task.reference(k)[1].copy())      # the feed-forward the action adds to
            _, _, terminated, truncated, _ = env.step(np.zeros(env.action_space.shape, np.float32))
            sent.append(base.controller.q_ref.copy())         # the command given to SimRobot.command
            if terminated or truncated:
                break
    finally:
        env.close()
    assert len(sent) == K - 1
    assert np.array_equal(np.array(refs), q[1:])
    # the joint-delta controller re-adds the step to its last command (q_ref + (q - q_ref)): round-off only
    np.testing.assert_allclose(np.array(sent), q[1:], rtol=0, atol=1e-15)
