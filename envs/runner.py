"""Run a preflighted G-code program in a simulated :class:`~armtwin.envs.sim.World`.

The timed path of the plan is sampled at the control period; joints come from IK at every
control sample: of every IK branch's solution the one nearest the preflight's continuous joint
path (interpolated in path length) is taken, and it must lie within the preflight's continuity
step (:data:`~armtwin.controllers.gcode.preflight.MAX_JOINT_STEP`) of that path and inside the
joint ranges — the same branch tracking as the preflight, so no configuration can flip. A
control sample that fails raises :class:`ControlTrajectoryError` naming the program line (a
clean preflight should make that impossible). Velocities come from the timed joint path; each
control period ends in ``SimRobot.command(q, qd)`` and one :meth:`World.step` (the physics may
take several substeps per control period). The run logs one CSV row per control period and
optionally renders a video with the programmed path and the path actually followed drawn in.

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

from ..controllers.gcode.preflight import MAX_JOINT_STEP, PreflightReport
from ..controllers.ik import solve_batch
from .sim import JointMode, PhysicsConfig, World

__all__ = ["RunResult", "RunConfig", "run_program", "control_trajectory", "log_columns", "CAMERAS",
           "ControlTrajectoryError"]

#: Camera presets of :func:`~armtwin.envs.sim.cameras_for` a run can film with.
CAMERAS = ("iso", "front", "side", "top")


class ControlTrajectoryError(ValueError):
    """A control sample of a preflighted program has no joint solution on the followed branch.

    A ``ValueError`` (the report cannot be run), so CLI entry points turn it into one line.

    Attributes:
        line: program line of the first failing sample.
        time: its time, s.
        position: (3,) its flange position, m (base frame).
        count: number of failing control samples.
    """

    def __init__(self, message: str, line: int, time: float, position, count: int) -> None:
        super().__init__(message)
        self.line, self.time, self.position, self.count = line, time, np.asarray(position, float), count


@dataclass(frozen=True)
class RunConfig:
    """Settings of a run.

    Attributes:
        mode: joint model (:class:`JointMode`, or its name: "kinematic", "hinge", "articulation").
        physics_step: longest physics step, s (the control period is split into substeps).
        video_fps: frames per second of the video (independent of the control rate).
        video_size: (width, height) pixels, even (yuv420p), 16x16 to 7680x4320.
        camera: camera preset name (:data:`CAMERAS`: "iso", "front", "side", "top").

    Raises:
        ValueError: an unknown mode or camera, a non-positive physics step or frame rate, or a
            bad video size.
    """

    mode: JointMode = JointMode.KINEMATIC
    physics_step: float = 1.0 / 1000.0
    video_fps: float = 30.0
    video_size: tuple[int, int] = (640, 480)
    camera: str = "iso"

    def __post_init__(self) -> None:
        """Checks every field (ValueError naming it); ``mode`` may be given as text."""
        object.__setattr__(self, "mode", JointMode.parse(self.mode))
        if not isinstance(self.camera, str) or self.camera.strip().lower() not in CAMERAS:
            raise ValueError(f"unknown camera {self.camera!r}; choose one of: {', '.join(CAMERAS)}")
        object.__setattr__(self, "camera", self.camera.strip().lower())
        for name in ("physics_step", "video_fps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
                raise ValueError(f"RunConfig.{name} must be a positive number, got {v!r}")
        if self.video_fps > 240:
            raise ValueError(f"RunConfig.video_fps must be at most 240, got {self.video_fps!r}")
        size = tuple(self.video_size) if isinstance(self.video_size, (tuple, list)) else ()
        if (len(size) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in size)
                or any(v % 2 for v in size) or not (16 <= size[0] <= 7680 and 16 <= size[1] <= 4320)):
            raise ValueError(f"RunConfig.video_size must be (width, height): even whole numbers of pixels "
                             f"from 16x16 to 7680x4320, got {self.video_size!r}")
        object.__setattr__(self, "video_size", size)


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
    """Commanded samples at the control period, on the preflight's branch.

    IK is solved at every control sample (every branch at once); of the branch solutions the
    one nearest the preflight's continuous joint path (interpolated in path length) is taken.
    It must be within :data:`MAX_JOINT_STEP` (rad; prismatic joints not counted) of that path —
    the preflight's own continuity rule between neighbouring samples — and inside the joint
    ranges. Nothing is filled in silently: any failing sample raises.

    Args:
        report: a clean preflight report (``q`` without NaN).
        spec: the robot the report was made for.
        period: control period, s.

    Returns:
        (PathSamples, q (K, n) rad / m, qd (K, n) rad/s / m/s).

    Raises:
        ValueError: the report has no (complete) joint path.
        ControlTrajectoryError: a control sample has no solution on the followed branch; the
            message names the program line, the time and the point.
    """
    plan = report.plan
    gs, qg = report.samples, report.q
    if plan is None or gs is None or qg is None or not np.isfinite(qg).all():
        raise ValueError("the preflight report has no complete joint path (was the program clean?)")
    ps = plan.sample_every(period)
    q_near = np.column_stack([np.interp(ps.s, gs.s, qg[:, j]) for j in range(qg.shape[1])])
    b = solve_batch(spec, ps.poses(), q_near)
    rev = ~spec.prismatic
    sol = b.solutions                                                  # (K, B, n)
    dist = np.where(rev, np.abs(sol - q_near[:, None, :]), 0.0).max(axis=2)   # (K, B), NaN: no solution
    dist = np.where(np.isnan(dist), np.inf, dist)
    k = np.argmin(dist, axis=1)
    rows = np.arange(len(k))
    q = sol[rows, k].copy()
    near = dist[rows, k]
    bad = ~(near <= MAX_JOINT_STEP) | ~spec.within_limits(q, tol=1e-9)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        if not np.isfinite(near[i]):
            why = "no IK solution"
        elif near[i] > MAX_JOINT_STEP:
            why = (f"the nearest solution is {math.degrees(float(near[i])):.1f} deg away from the checked joint "
                   f"path (limit {math.degrees(MAX_JOINT_STEP):.0f} deg): the branch would change")
        else:
            j = int(np.argmax(np.maximum(q[i] - spec.upper, spec.lower - q[i])))
            why = f"J{j + 1} outside its range ({spec.to_display(q[i])[j]:.2f} {spec.display_units()[j]})"
        p = ", ".join(f"{v * 1000:.3f}" for v in ps.position[i])
        raise ControlTrajectoryError(
            f"line {int(ps.line[i])}: control sample at t = {ps.t[i]:.3f} s, ({p}) mm: {why} "
            f"({int(bad.sum())} failing control sample(s); the preflight passed them — please report)",
            int(ps.line[i]), float(ps.t[i]), ps.position[i], int(bad.sum()))
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
        ValueError: the report is not clean or has no motion, or was made for another robot.
        ControlTrajectoryError: a control sample has no joint solution on the followed branch
            (see :func:`control_trajectory`).
    """
    if not report.clean() or report.plan is None or report.samples is None:
        raise ValueError("the program did not pass the preflight; refusing to run it")
    t_wall = time.perf_counter()
    period = report.machine.control_period
    if spec.name != report.robot:
        raise ValueError(f"the report was made for {report.robot}, not {spec.name}")
    ps, q, qd = control_trajectory(report, spec, period)
    K = len(ps)
    mode = config.mode
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
