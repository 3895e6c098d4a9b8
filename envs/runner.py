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
from typing import Callable

import numpy as np

from ..controllers.gcode.preflight import PreflightReport
from ..controllers.ik import solve_batch
from .sim import Camera, JointMode, PhysicsConfig, World, cameras_for

__all__ = ["RunResult", "RunConfig", "run_program", "control_trajectory", "log_columns", "draw_path"]


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


def draw_path(img: np.ndarray, pix: np.ndarray, color, width: int = 2) -> None:
    """Draw a polyline (N, 2) of pixel coordinates into ``img`` (H, W, 3) in place (NaN breaks it)."""
    h, w = img.shape[:2]
    col = np.asarray(color, dtype=np.uint8)
    if len(pix) < 2:
        return
    a, b = pix[:-1], pix[1:]
    good = np.all(np.isfinite(a), axis=1) & np.all(np.isfinite(b), axis=1)
    a, b = a[good], b[good]
    if not len(a):
        return
    n = np.maximum(1, np.ceil(np.abs(b - a).max(axis=1)).astype(int))
    n = np.minimum(n, 4 * (w + h))
    idx = np.repeat(np.arange(len(a)), n + 1)
    first = np.concatenate(([0], np.cumsum(n + 1)[:-1]))
    f = (np.arange(len(idx)) - first[idx]) / n[idx]
    pts = a[idx] + f[:, None] * (b[idx] - a[idx])
    r = width // 2
    for dx in range(-r, r + 1):
        for dy in range(-r, r + 1):
            x = np.round(pts[:, 0]).astype(int) + dx
            y = np.round(pts[:, 1]).astype(int) + dy
            ok = (x >= 0) & (x < w) & (y >= 0) & (y < h)
            img[y[ok], x[ok]] = col


def _video_frame(world: World, camera: Camera, size, programmed_world: np.ndarray, followed_world: np.ndarray) -> np.ndarray:
    """One video frame: the rendered world plus the programmed (wide, blue) and followed (thin, red) paths."""
    w, h = size
    img = world.render(camera, w, h).copy()
    draw_path(img, camera.project(programmed_world, w, h), (60, 120, 240), 5)
    if len(followed_world) > 1:
        draw_path(img, camera.project(followed_world, w, h), (220, 30, 30), 1)
    return img


def run_program(report: PreflightReport, spec, config: RunConfig = RunConfig(), *, log_path: str | None = None,
                video_path: str | None = None, progress: Callable[[float], None] | None = None) -> RunResult:
    """Run a clean preflight report's plan in a new world.

    Args:
        report: a preflight report with a plan (its program must be clean).
        spec: the robot.
        config: joint model, physics step, video settings.
        log_path: CSV file (one row per control period), or None.
        video_path: MP4 (or GIF) file, or None.
        progress: called with the finished fraction 0..1 now and then.

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
    world = World(PhysicsConfig(dt=period, substeps=substeps))
    try:
        robot = world.add_robot(spec, mode, q0=report.program.q_start)
        to_world = robot.world_T_report
        disp_pr = spec.prismatic
        actual = np.full((K, 3), np.nan)
        q_act = np.full((K, spec.dof), np.nan)
        writer = fh = None
        if log_path:
            fh = open(log_path, "w", newline="")
            writer = csv.writer(fh)
            writer.writerow(log_columns(spec))
        frames_writer = None
        cam = size = prog_w = None
        next_frame_t = 0.0
        if video_path:
            import imageio.v2 as imageio
            cam = cameras_for(spec).get(config.camera) or cameras_for(spec)["iso"]
            size = config.video_size
            prog_w = (to_world[:3, :3] @ ps.position.T).T + to_world[:3, 3]
            frames_writer = imageio.get_writer(video_path, fps=config.video_fps) if not str(video_path).endswith(".gif") \
                else imageio.get_writer(video_path, duration=1.0 / config.video_fps)
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
            if frames_writer is not None and ps.t[k] >= next_frame_t - 1e-9:
                fol = (to_world[:3, :3] @ actual[:k + 1].T).T + to_world[:3, 3]
                frames_writer.append_data(_video_frame(world, cam, size, prog_w, fol))
                next_frame_t += 1.0 / config.video_fps
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
        if frames_writer is not None:
            frames_writer.close()
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
