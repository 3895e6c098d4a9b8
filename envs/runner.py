"""Run a compiled G-code program in a simulated :class:`~armtwin.envs.sim.World`: the run loop.

The joints come from the program's control trajectory
(:func:`~armtwin.controllers.gcode.compile_program`, the one service every consumer of a
program uses): each control period ends in ``SimRobot.command(q, qd)`` and one
:meth:`World.step` (the physics may take several substeps per control period). The run logs one
CSV row per control period (:class:`RunLog`, every row handed to the OS whole) and optionally
renders a video with the programmed path and the path actually followed drawn in. A stop
request (SIGINT/SIGTERM in ``armtwin run``) ends the run after the row being written; the log,
the video and the world are closed on every path out.

No PyBullet here: everything goes through the facade in :mod:`.sim`.
"""

from __future__ import annotations

import csv
import math
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..controllers.gcode.compile import CompiledProgram
from ..controllers.gcode.interpreter import Dwell, Stop, StopKind
from ..controllers.gcode.preflight import PreflightReport
from ..controllers.gcode.trajectory import ControlTrajectory, HoldPiece
from .sim import JointMode, PhysicsConfig, World, camera_for_path

__all__ = ["RunResult", "RunConfig", "run_program", "log_columns", "RunLog", "CAMERAS"]

#: Cameras a run can film with: "work" frames the program's path (:func:`~armtwin.envs.sim.camera_for_path`),
#: the others are the robot's presets of :func:`~armtwin.envs.sim.cameras_for`.
CAMERAS = ("work", "iso", "front", "side", "top")


@dataclass(frozen=True)
class RunConfig:
    """Settings of a run.

    Attributes:
        mode: joint model (:class:`JointMode`, or its name: "kinematic", "hinge", "articulation").
        physics_step: longest physics step, s (the control period is split into substeps).
        video_fps: frames per second of the video (independent of the control rate).
        video_size: (width, height) pixels, even (yuv420p), 16x16 to 7680x4320.
        camera: camera name (:data:`CAMERAS`): "work" (default) frames the program's feed moves
            from beyond them; "iso", "front", "side", "top" frame the whole robot.

    Raises:
        ValueError: an unknown mode or camera, a non-positive physics step or frame rate, or a
            bad video size.
    """

    mode: JointMode = JointMode.KINEMATIC
    physics_step: float = 1.0 / 1000.0
    video_fps: float = 30.0
    video_size: tuple[int, int] = (640, 480)
    camera: str = "work"

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
        interrupted: the run was stopped (``run_program``'s ``stop`` was set) before the end;
            everything up to ``samples`` was logged.
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
    interrupted: bool = False

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def log_columns(spec) -> list[str]:
    """CSV header of the run log."""
    n = spec.dof
    return (["time_s", "line", "x_cmd_mm", "y_cmd_mm", "z_cmd_mm", "x_mm", "y_mm", "z_mm"]
            + [f"j{i + 1}_cmd" for i in range(n)] + [f"j{i + 1}" for i in range(n)])


class RunLog:
    """The run's CSV log: one row per control period, each handed to the OS whole as it is written.

    Every row is written with one ``write`` of the complete row (a 64 KiB buffer, flushed after
    each row), so a process killed at any moment (SIGKILL) leaves a file whose rows all parse:
    at most the row being written is missing, never half a row. Flushing every row costs about
    1 µs per row (measured against a flush every 250 rows), against the tens of µs of a control
    period's physics and IK.

    Args:
        path: the ``.csv`` file (replaced if it exists).
        spec: the robot (columns: :func:`log_columns`).
    """

    def __init__(self, path: str, spec) -> None:
        self.path = path
        self._f = open(path, "w", newline="", buffering=1 << 16)
        self._w = csv.writer(self._f)
        self.rows = 0
        self._w.writerow(log_columns(spec))
        self._f.flush()

    def write(self, row: Sequence) -> None:
        """Append one row and hand it to the OS."""
        self._w.writerow(row)
        self._f.flush()
        self.rows += 1

    def close(self) -> None:
        """Close the file (idempotent)."""
        if not self._f.closed:
            self._f.close()


def run_program(program: CompiledProgram, spec, config: RunConfig = RunConfig(), *, log_path: str | None = None,
                video_path: str | None = None, progress: Callable[[float], None] | None = None,
                source_lines: Sequence[str] | None = None, stop: threading.Event | None = None) -> RunResult:
    """Run a compiled program in a new world.

    The control samples come from the program's
    :class:`~armtwin.controllers.gcode.trajectory.ControlTrajectory` (checked completely when it
    was compiled, before anything moves), stepped through chunk by chunk (dwells without
    per-sample arrays), so memory does not grow with the program time; the log is written as the
    run goes, a whole row at a time (:class:`RunLog`). The log, the video and the world are
    closed on every path out (an exception included), so an interrupted run keeps every row it
    wrote and a playable video.

    Args:
        program: the compiled program (it must be able to run: ``program.ok``); its control
            period is the run's.
        spec: the robot.
        config: joint model, physics step, video settings.
        log_path: CSV file (one row per control period), or None.
        video_path: MP4 (or GIF) file, or None; drawn by :class:`~armtwin.envs.video.VideoRecorder`
            with the programmed path, the followed path and the current line in the overlay.
        progress: called with the finished fraction 0..1 now and then.
        source_lines: the program's text lines, shown in the video overlay (optional).
        stop: when it is set (e.g. by a SIGINT or SIGTERM handler) the run ends after the row
            being written, closes its files and returns with ``interrupted`` True; set before the
            run starts, nothing is written.

    Raises:
        ValueError: the program cannot run (``program.refusal`` says why), or was compiled for
            another robot.
    """
    traj, report = program.trajectory, program.report
    if traj is None:
        raise ValueError(f"refusing to run the program: {program.refusal}")
    if spec.name != report.robot:
        raise ValueError(f"the program was compiled for {report.robot}, not {spec.name}")
    t_wall = time.perf_counter()
    period = traj.period
    traj.check()                      # done when it was compiled: every sample solves on the branch
    stopped = stop.is_set if stop is not None else (lambda: False)
    K = traj.count
    mode = config.mode
    substeps = 1 if mode is JointMode.KINEMATIC else max(1, int(math.ceil(period / config.physics_step - 1e-9)))
    disp_pr = spec.prismatic
    n = spec.dof
    err_sq, err_max, err_n = 0.0, 0.0, 0
    lines: set[int] = set()
    done = 0
    t_done, last_line = 0.0, 0
    message = ""
    zero_qd = np.zeros(n)
    stable = True
    with ExitStack() as closing:
        if stopped():
            return _run_result(report, traj, lines, 0, 0.0, 0, (0.0, 0.0, 0), None, None, "", t_wall, True)
        # EGL (when it loads) renders about twice as fast as TinyRenderer; it must be chosen before any body.
        world = World(PhysicsConfig(dt=period, substeps=substeps), renderer="auto" if video_path else "tiny")
        closing.callback(world.close)
        robot = world.add_robot(spec, mode, q0=report.program.q_start)
        log = None
        if log_path:
            log = RunLog(log_path, spec)
            closing.callback(log.close)
        recorder = None
        if video_path:
            from .video import VideoRecorder
            camera = config.camera
            if camera == "work":
                wp = traj.work_points()
                wp = (robot.world_T_report @ np.c_[wp, np.ones(len(wp))].T).T[:, :3]
                camera = camera_for_path(wp, base=robot.base_position)
            recorder = closing.enter_context(VideoRecorder(
                world, robot, video_path, camera=camera, fps=config.video_fps, size=config.video_size,
                expected_duration=traj.duration, progress=False))
            recorder.add_planned_path(traj.planned_path())
        step_report = max(1, K // 100)

        def step(k: int, t: float, line: int, pos: np.ndarray, q: np.ndarray, qd: np.ndarray,
                 cmd_text: tuple[list[str], list[str]] | None) -> bool:
            """One control period; False when the dynamic model became unstable."""
            nonlocal err_sq, err_max, err_n, message
            robot.command(q, qd)
            world.step(1)
            a = robot.flange_pose()[:3, 3]
            e = float(np.linalg.norm(a - pos)) * 1000.0
            if math.isfinite(e):
                err_sq += e * e
                err_max = max(err_max, e)
                err_n += 1
            if log is not None:
                qa = robot.q
                if cmd_text is None:
                    cmd_text = ([f"{v * 1000:.4f}" for v in pos],
                                [f"{v:.4f}" for v in np.where(disp_pr, q * 1000, np.degrees(q))])
                log.write([f"{t:.4f}", line] + cmd_text[0] + [f"{v * 1000:.4f}" for v in a]
                          + cmd_text[1] + [f"{v:.4f}" for v in np.where(disp_pr, qa * 1000, np.degrees(qa))])
            if recorder is not None:
                text = source_lines[line - 1].strip() if source_lines and 0 < line <= len(source_lines) else ""
                recorder.maybe_capture({"line": f"{line}: {text}" if text else str(line)})
            if progress is not None and k % step_report == 0:
                progress(k / K)
            if not robot.stable:
                message = robot.instability.message
                return False
            return True

        for piece in traj:
            if isinstance(piece, HoldPiece):
                lines.add(piece.line)
                held = ([f"{v * 1000:.4f}" for v in piece.position],
                        [f"{v:.4f}" for v in np.where(disp_pr, piece.q * 1000, np.degrees(piece.q))])
                for k in range(piece.start, piece.stop):
                    t = k * period
                    stable = step(k, t, piece.line, piece.position, piece.q, zero_qd, held)
                    done, t_done, last_line = k + 1, t, piece.line
                    if not stable or stopped():
                        break
            else:
                ps = piece.samples
                for i in range(len(piece)):
                    ln = int(ps.line[i])
                    lines.add(ln)
                    stable = step(piece.start + i, float(ps.t[i]), ln, ps.position[i], piece.q[i], piece.qd[i], None)
                    done, t_done, last_line = piece.start + i + 1, float(ps.t[i]), ln
                    if not stable or stopped():
                        break
            if not stable or (done < K and stopped()):
                break
        interrupted = done < K and stable
        if progress is not None and not interrupted:
            progress(1.0)
    return _run_result(report, traj, lines, done, t_done, last_line, (err_sq, err_max, err_n), log_path,
                       video_path, message, t_wall, interrupted)


def _run_result(report: PreflightReport, traj: ControlTrajectory, lines: set[int], done: int, t_done: float,
                last_line: int, err: tuple[float, float, int], log_path: str | None, video_path: str | None,
                message: str, t_wall: float, interrupted: bool) -> RunResult:
    err_sq, err_max, err_n = err
    finished = done == traj.count
    lines = lines | {b.line for b in report.program.blocks
                     if isinstance(b, Dwell) and (finished or (done and b.line <= last_line))}
    pauses = tuple(b.line for b in report.program.blocks if isinstance(b, Stop) and b.kind is StopKind.PAUSE
                   and (finished or (done and b.line <= last_line)))
    return RunResult(len(lines), float(t_done), done, math.sqrt(err_sq / err_n) if err_n else 0.0,
                     err_max if err_n else 0.0, log_path, video_path, not message, message,
                     time.perf_counter() - t_wall, pauses, interrupted)
