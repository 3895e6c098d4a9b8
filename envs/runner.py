"""Run a preflighted G-code program in a simulated :class:`~armtwin.envs.sim.World`.

The timed path of the plan is sampled at the control period; joints come from IK at every
control sample (started from the preflight's continuous joint path, so no branch can flip),
velocities from the timed path; each control period ends in ``SimRobot.command(q, qd)`` and
one :meth:`World.step` (the physics may take several substeps per control period). The run
logs one CSV row per control period and optionally renders a video with the programmed path
and the path actually followed drawn in.

No PyBullet here: everything goes through the facade in :mod:`.sim`.
"""

from __future__ import annotations

import csv
import math
import sys
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..controllers.gcode.preflight import PreflightReport
from ..controllers.ik import solve_batch
from .sim import JointMode, PhysicsConfig, World

__all__ = ["RunResult", "RunConfig", "run_program", "control_trajectory", "log_columns"]


@dataclass(frozen=True)
class RunConfig:
    """Settings of a run.

    Attributes:
        mode: joint model.
        physics_step: longest physics step, s (the control period is split into substeps).
        video_fps: frames per second of the video (independent of the control rate).
        video_size: (width, height) pixels.
        camera: camera preset name ("iso", "front", "side", "top").
    """

    mode: JointMode = JointMode.KINEMATIC
    physics_step: float = 1.0 / 1000.0
    video_fps: float = 30.0
    video_size: tuple[int, int] = (640, 480)
    camera: str = "iso"


@dataclass(frozen=True)
class RunResult:
    """Outcome of a run.

    Attributes:
        lines_executed: program lines that moved the robot or dwelt.
        program_time: s of simulated time.
        samples: control periods run.
        rms_error_mm, max_error_mm: distance between the actual flange (from the engine) and
            the commanded point, mm.
        log_path, video_path: files written, or None.
        stable: False if the dynamic model became unstable (the run stopped there).
        message: the instability, or "".
        wall_time: s.
        pauses: lines of M0 program pauses passed (the simulation does not wait at them).
    """

    lines_executed: int
    program_time: float
    samples: int
    rms_error_mm: float
    max_error_mm: float
    log_path: str | None
    video_path: str | None
    stable: bool
    message: str
    wall_time: float
    pauses: tuple[int, ...] = ()

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def control_trajectory(report: PreflightReport, spec, period: float):
    """Commanded samples at the control period: (PathSamples, q (K, n) rad / m, qd (K, n) rad/s / m/s).

    IK is solved at every sample, starting from the preflight's continuous joint path
    interpolated in path length, so that every sample stays on the followed branch.
    """
    plan = report.plan
    ps = plan.sample_every(period)
    gs, qg = report.samples, report.q
    q_near = np.column_stack([np.interp(ps.s, gs.s, qg[:, j]) for j in range(qg.shape[1])])
    b = solve_batch(spec, ps.poses(), q_near)
    q = np.where(b.ok[:, None], b.q, q_near)
    if len(q) > 1:
        qd = np.gradient(q, ps.t, axis=0)
    else:
        qd = np.zeros_like(q)
    return ps, q, qd


def log_columns(spec) -> list[str]:
    """CSV header of the run log."""
    n = spec.dof
    return (["time_s", "line", "x_cmd_mm", "y_cmd_mm", "z_cmd_mm", "x_mm", "y_mm", "z_mm"]
            + [f"j{i + 1}_cmd" for i in range(n)] + [f"j{i + 1}" for i in range(n)])


def run_program(report: PreflightReport, spec, config: RunConfig = RunConfig(), *, log_path: str | None = None,
                video_path: str | None = None, progress: Callable[[float], None] | None = None,
                source_lines: Sequence[str] | None = None) -> RunResult:
    """Run a clean preflight report's plan in a new world.

    Args:
        report: a preflight report with a plan (its program must be clean).
        spec: the robot.
        config: joint model, physics step, video settings.
        log_path: CSV file (one row per control period), or None.
        video_path: MP4 (or GIF) file, or None; drawn by :class:`~armtwin.envs.video.VideoRecorder`
            with the programmed path, the followed path and the current line in the overlay.
        progress: called with the finished fraction 0..1 now and then.
        source_lines: the program's text lines, shown in the video overlay (optional).

    Raises:
        ValueError: the report is not clean or has no motion.
    """
    if not report.clean() or report.plan is None or report.samples is None:
        raise ValueError("the program did not pass the preflight; refusing to run it")
    t_wall = time.perf_counter()
    period = report.machine.control_period
    if spec.name != report.robot:
        raise ValueError(f"the report was made for {report.robot}, not {spec.name}")
    ps, q, qd = control_trajectory(report, spec, period)
    K = len(ps)
    mode = JointMode.parse(config.mode)
    substeps = 1 if mode is JointMode.KINEMATIC else max(1, int(math.ceil(period / config.physics_step - 1e-9)))
    # EGL (when it loads) renders about twice as fast as TinyRenderer; it must be chosen before any body.
    world = World(PhysicsConfig(dt=period, substeps=substeps), renderer="auto" if video_path else "tiny")
    try:
        robot = world.add_robot(spec, mode, q0=report.program.q_start)
        disp_pr = spec.prismatic
        actual = np.full((K, 3), np.nan)
        q_act = np.full((K, spec.dof), np.nan)
        writer = fh = None
        if log_path:
            fh = open(log_path, "w", newline="")
            writer = csv.writer(fh)
            writer.writerow(log_columns(spec))
        recorder = None
        if video_path:
            from .video import VideoRecorder
            recorder = VideoRecorder(world, robot, video_path, camera=config.camera, fps=config.video_fps,
                                     size=config.video_size, expected_duration=float(ps.t[-1]), progress=False)
            recorder.add_planned_path(ps.position)
        done = K
        message = ""
        step_report = max(1, K // 100)
        for k in range(K):
            robot.command(q[k], qd[k])
            world.step(1)
            T = robot.flange_pose()
            actual[k] = T[:3, 3]
            qa = robot.q
            q_act[k] = qa
            if writer is not None:
                writer.writerow([f"{ps.t[k]:.4f}", int(ps.line[k])]
                                + [f"{v * 1000:.4f}" for v in ps.position[k]] + [f"{v * 1000:.4f}" for v in actual[k]]
                                + [f"{v:.4f}" for v in np.where(disp_pr, q[k] * 1000, np.degrees(q[k]))]
                                + [f"{v:.4f}" for v in np.where(disp_pr, qa * 1000, np.degrees(qa))])
                if k % 250 == 0:
                    fh.flush()
            if recorder is not None:
                ln = int(ps.line[k])
                text = source_lines[ln - 1].strip() if source_lines and 0 < ln <= len(source_lines) else ""
                recorder.maybe_capture({"line": f"{ln}: {text}" if text else str(ln)})
            if not robot.stable:
                message = robot.instability.message
                done = k + 1
                break
            if progress is not None and k % step_report == 0:
                progress(k / K)
        if progress is not None:
            progress(1.0)
        if fh is not None:
            fh.flush()
            fh.close()
        if recorder is not None:
            recorder.close()
    finally:
        world.close()
    err = np.linalg.norm(actual[:done] - ps.position[:done], axis=1) * 1000.0
    err = err[np.isfinite(err)]
    lines = set(int(v) for v in np.unique(ps.line[:done]))
    from ..controllers.gcode.interpreter import Dwell, Stop, StopKind
    t_done = ps.t[done - 1] if done else 0.0
    last_line = int(ps.line[done - 1]) if done else 0
    finished = done == K
    lines |= {b.line for b in report.program.blocks if isinstance(b, Dwell) and (finished or b.line <= last_line)}
    pauses = tuple(b.line for b in report.program.blocks if isinstance(b, Stop) and b.kind is StopKind.PAUSE
                   and (finished or b.line <= last_line))
    return RunResult(len(lines), float(t_done), done, float(np.sqrt(np.mean(err ** 2))) if len(err) else 0.0,
                     float(err.max()) if len(err) else 0.0, log_path, video_path, not message, message,
                     time.perf_counter() - t_wall, pauses)


def stderr_progress(label: str = "run") -> Callable[[float], None]:
    """A progress bar on stderr (updates in place)."""
    state = {"last": -1}

    def show(frac: float) -> None:
        pct = int(frac * 100)
        if pct == state["last"]:
            return
        state["last"] = pct
        bar = "#" * (pct // 4) + "-" * (25 - pct // 4)
        print(f"\r{label} [{bar}] {pct:3d}%", end="" if pct < 100 else "\n", file=sys.stderr, flush=True)
    return show
