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
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from ..controllers.gcode.compile import CompiledProgram
from ..controllers.gcode.interpreter import Dwell, Stop, StopKind
from ..controllers.gcode.outputs import OUTPUT_COLUMNS, OutputTimeline, move_feeds
from ..controllers.gcode.preflight import PreflightReport
from ..controllers.gcode.trajectory import ControlTrajectory, HoldPiece
from ..robots.spec import DriveGains
from ..robots.workcell import Cell
from .sim import Camera, JointMode, PhysicsConfig, World
from .telemetry.mcapfile import Compression
from .telemetry.runlog import output_values
from .workpieces import PieceEnd, PieceEvent, RunWorkpieces, simulated_jaws

if TYPE_CHECKING:
    from .rig.log import SampleLog

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
        drive: drive data overriding the robot's (e.g. hinge gains fitted by ``armtwin fit
            --model hinge``), or None.
        log_compression: chunk compression of an MCAP log (zstd, lz4, none; or its name).

    Raises:
        ValueError: an unknown mode or camera, a non-positive physics step or frame rate, or a
            bad video size.
    """

    mode: JointMode = JointMode.KINEMATIC
    physics_step: float = 1.0 / 1000.0
    video_fps: float = 30.0
    video_size: tuple[int, int] = (640, 480)
    camera: str = "work"
    drive: DriveGains | None = None
    log_compression: Compression = Compression.ZSTD

    def __post_init__(self) -> None:
        """Checks every field (ValueError naming it); ``mode`` and ``log_compression`` may be given as text."""
        object.__setattr__(self, "mode", JointMode.parse(self.mode))
        object.__setattr__(self, "log_compression", Compression.parse(self.log_compression))
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
        lines_executed: distinct program lines that moved the robot or dwelt.
        program_time: s of simulated time.
        samples: control periods run.
        rms_error_mm, max_error_mm: distance between the actual controlled point (the active
            tool's TCP on the engine's flange) and the commanded point, mm.
        log_path, video_path: files written, or None.
        stable: False if the dynamic model became unstable (the run stopped there).
        message: the instability, or "".
        wall_time: s.
        pauses: lines of M0 program pauses passed (the simulation does not wait at them).
        tool_changes: lines of M6 tool changes passed (the arm rests; the simulation does not wait).
        interrupted: the run was stopped (``run_program``'s ``stop`` was set) before the end;
            everything up to ``samples`` was logged.
        blocks_executed: motion and dwell blocks run, each pass of a loop or subroutine call
            counted (equal to ``lines_executed`` for a program without O-word flow).
        grip_events: what the vacuum cup did to the cell's workpieces, in order
            (:class:`~armtwin.envs.workpieces.PieceEvent`: grip, release, drop, with the line).
        pieces: where each of the cell's workpieces ended, with its target
            (:class:`~armtwin.envs.workpieces.PieceEnd`); empty without a cell or workpieces.
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
    tool_changes: tuple[int, ...] = ()
    blocks_executed: int = 0
    grip_events: tuple[PieceEvent, ...] = ()
    pieces: tuple[PieceEnd, ...] = ()

    def to_dict(self) -> dict:
        """The result for JSON: the events and pieces in mm and degrees."""
        out = dict(self.__dict__)
        out["grip_events"] = [e.to_dict() for e in self.grip_events]
        out["pieces"] = [p.to_dict() for p in self.pieces]
        return out


def log_columns(spec, held: bool = False) -> list[str]:
    """CSV header of the run log: time and line, the commanded and the actual controlled point
    (the active tool's TCP), the commanded and actual joints, the actual flange, the outputs
    (:data:`~armtwin.controllers.gcode.outputs.OUTPUT_COLUMNS`), and with ``held`` (a run in a
    cell with movable workpieces) last ``held``: the name of the workpiece the gripper holds
    (empty: none) — the only text column, so logs without workpieces stay all numbers."""
    n = spec.dof
    return (["time_s", "line", "x_cmd_mm", "y_cmd_mm", "z_cmd_mm", "x_mm", "y_mm", "z_mm"]
            + [f"j{i + 1}_cmd" for i in range(n)] + [f"j{i + 1}" for i in range(n)]
            + ["flange_x_mm", "flange_y_mm", "flange_z_mm", *OUTPUT_COLUMNS]
            + (["held"] if held else []))


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
        held: with the ``held`` column (the run has movable workpieces).
    """

    def __init__(self, path: str, spec, held: bool = False) -> None:
        self.path = path
        self._f = open(path, "w", newline="", buffering=1 << 16)
        self._w = csv.writer(self._f)
        self.rows = 0
        self._w.writerow(log_columns(spec, held))
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
                source_lines: Sequence[str] | None = None, stop: threading.Event | None = None,
                name: str = "", cell: Cell | None = None, publish: SampleLog | None = None,
                live=None) -> RunResult:
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
        name: the program's name, for the video's title card and overlay (e.g. its file name).
        publish: a sample log (``write(SyncSample)``, ``close()``; e.g. the remote store's
            :class:`~armtwin.envs.telemetry.records.TwinPublisher`) given every control period as a
            twin sample: virtual = the commanded joints, servo = the simulated ones (deg; mm for a
            prismatic joint); the caller closes it.
        live: a :class:`~armtwin.envs.telemetry.live.LiveServer` (``--live``) streaming the MCAP log's
            topics while the run goes (closed with the run); with a CSV log or none, the messages
            go to it alone.
        stop: when it is set (e.g. by a SIGINT or SIGTERM handler) the run ends after the row
            being written, closes its files and returns with ``interrupted`` True; set before the
            run starts, nothing is written.
        cell: a workcell (:class:`~armtwin.robots.workcell.Cell`): the robot stands at its mount
            and its bodies are in the world — colliding in the dynamic joint models, drawn in the
            video (:func:`~armtwin.envs.workcell.place_cell`); None: the robot alone on the floor.
            Its movable workpieces are gripped by a vacuum tool that the program switches with
            M3/M5 (:class:`~armtwin.envs.workpieces.RunWorkpieces`): the result lists the grip
            events and where each piece ended.

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
    traj.check()                      # done when it was compiled: every sample solves on the branch
    stopped = stop.is_set if stop is not None else (lambda: False)
    if stopped():
        return _RunLoop.result_of_nothing(report, traj, t_wall)
    with ExitStack() as closing:      # the world, the log and the video are closed on every path out
        loop = _RunLoop(traj, spec, config, closing, q0=report.program.q_start, log_path=log_path,
                        video_path=video_path, source_lines=source_lines, progress=progress, name=name,
                        outputs=program.outputs, tool=program.body_tool, cell=cell, live=live)
        loop.publish = publish
        loop.run(stopped)
    return loop.result(report, t_wall)


class _RunLoop:
    """The world, the robot and the outputs of one run, stepped one control period at a time.

    Opens the world, the log and the video when it is made and registers their closing with
    ``closing``; :meth:`run` steps through the trajectory; :meth:`result` sums it up.
    """

    def __init__(self, traj: ControlTrajectory, spec, config: RunConfig, closing: ExitStack, *, q0: np.ndarray,
                 log_path: str | None, video_path: str | None, source_lines: Sequence[str] | None,
                 progress: Callable[[float], None] | None, name: str = "", outputs: OutputTimeline | None = None,
                 tool=None, cell: Cell | None = None, live=None) -> None:
        self.traj, self.spec = traj, spec
        self.outputs = outputs
        plan = traj.plan
        #: per motion block the controlled point in the flange frame (None: the flange throughout)
        self.tcp_of_block = (None if plan.flange_of_block is None
                             else np.array([m.tcp for m in plan.motions]))
        self.feed_of_block, self.rapid_of_block = move_feeds(plan.motions, np.arange(len(plan.motions)))
        self.log_path, self.video_path = log_path, video_path
        self.source_lines, self.progress = source_lines, progress
        period = traj.period
        mode = config.mode
        substeps = 1 if mode is JointMode.KINEMATIC else max(1, int(math.ceil(period / config.physics_step - 1e-9)))
        # EGL (when it loads) renders about twice as fast as TinyRenderer; it must be chosen before any body.
        self.world = World(PhysicsConfig(dt=period, substeps=substeps), renderer="auto" if video_path else "tiny")
        closing.callback(self.world.close)
        self.pieces: RunWorkpieces | None = None      # the cell's workpieces and the gripper, with a cell
        self.piece_ends: tuple[PieceEnd, ...] = ()    # where they ended (taken before the world closes)
        if cell is None:
            self.robot = self.world.add_robot(spec, mode, q0=q0, tool=tool,    # the tool's mass is a payload
                                              drive=config.drive)
        else:
            from .workcell import mount_of, place_cell
            position, rotation = mount_of(cell)
            self.robot = self.world.add_robot(spec, mode, q0=q0, position=position, orientation=rotation, tool=tool,
                                              drive=config.drive, jaws=not (simulated_jaws(tool) and outputs is not None))
            placed = place_cell(self.world, cell, self.robot)
            #: the cell's bodies in the world, by name
            self.cell_bodies = placed.bodies
            self.pieces = RunWorkpieces(self.world, self.robot, placed, outputs)
        self.log: RunLog | None = None
        self.telemetry = None         # the MCAP log (``--log run.mcap``): ROS 2 messages instead of CSV rows
        mcap = log_path is not None and log_path.lower().endswith(".mcap")
        if mcap or live is not None:
            from .telemetry.runlog import RunMcapLog
            self.telemetry = RunMcapLog(log_path if mcap else None, spec, base_position=self.robot.base_position,
                                        program=name, source_lines=source_lines, mode=mode.value,
                                        compression=config.log_compression, live=live,
                                        planned_path=traj.planned_path())
            closing.callback(self.telemetry.close)
        if log_path and not mcap:
            self.log = RunLog(log_path, spec, held=self.pieces is not None and bool(self.pieces.parts))
            closing.callback(self.log.close)
        self.publish: SampleLog | None = None      # run_program's ``publish`` sample log
        self.recorder = None
        if video_path:
            from .camera import cameras_for_work
            from .video import VideoRecorder
            view: str | Camera = config.camera
            inset: Camera | None = None
            if config.camera == "work":   # the whole arm with its work, and a close-up of the work
                wp = traj.work_points()
                wp = (self.robot.world_T_report @ np.c_[wp, np.ones(len(wp))].T).T[:, :3]
                view, inset = cameras_for_work(spec, wp, self.robot.base_position,
                                               aspect=config.video_size[0] / config.video_size[1])
                if min(config.video_size) < 240:      # too small for a picture in the picture
                    view, inset = inset, None
            title = "  ·  ".join(t for t in (name, spec.title, f"{config.mode.value} joints") if t)
            self.recorder = closing.enter_context(VideoRecorder(
                self.world, self.robot, video_path, camera=view, fps=config.video_fps, size=config.video_size,
                expected_duration=traj.duration, progress=False, inset=inset, title=title,
                title_card=[spec.title, "  ·  ".join(t for t in (name, f"{config.mode.value} joints") if t), "armtwin"]))
            for points, travel in traj.planned_paths():     # travel dimmed and dashed, the work in full
                self.recorder.add_planned_path(points, travel=travel)
            self._rapid = traj.rapid_blocks()
        self.step_report = max(1, traj.count // 100)
        # what the run did so far
        self.err_sq, self.err_max, self.err_n = 0.0, 0.0, 0
        self.lines: set[int] = set()
        self.blocks: set[int] = set()          # motion blocks run (an index per executed block)
        self.done, self.t_done, self.last_line = 0, 0.0, 0
        self.message = ""
        self.interrupted = False

    def _joints_text(self, q: np.ndarray) -> list[str]:
        """Joints as the log writes them: deg, mm for prismatic joints."""
        return [f"{v:.4f}" for v in np.where(self.spec.prismatic, q * 1000, np.degrees(q))]

    def _block_at(self, t: float) -> int:
        """The motion block the path is on at ``t`` s (at a node: the one before it)."""
        plan = self.traj.plan
        seg = int(np.searchsorted(plan.t_start, t, side="right")) - 1
        return int(plan.block[min(max(seg, 0), plan.segment_count - 1)])

    def _output_text(self, t: float, level: float) -> tuple[list, str]:
        """The log's output columns and the overlay's text at ``t`` s."""
        if self.outputs is None:
            return [], ""
        st = self.outputs.at(t)
        tool = self.outputs.tools.get(st.tool)
        parts = [f"T{st.tool}" + (f" {tool.kind.value}" if tool is not None and st.tool else "")]
        if st.works(self.outputs.mounted(st)):
            parts.append(f"ON S{st.s:g}" + (f" {level * 100:.0f}%" if level < 0.9995 else ""))
        else:
            parts.append("off")
        if st.mist or st.flood:
            parts.append("+".join(n for n, on in (("M7", st.mist), ("M8", st.flood)) if on))
        if st.digital:
            parts.append("out " + ",".join(str(n) for n in sorted(st.digital)))
        return st.log_row(level), "  ".join(parts)

    def _publish(self, publish: SampleLog, k: int, t: float, q_cmd: np.ndarray, q: np.ndarray) -> None:
        """Control period ``k`` as a twin sample to ``publish`` (commanded vs simulated joints)."""
        from ..controllers import rigproto as rp
        from .rig.log import SyncSample
        to_disp = lambda v: np.where(self.spec.prismatic, v * 1000, np.degrees(v))  # noqa: E731
        virt, sim = to_disp(q_cmd), to_disp(q)
        publish.write(SyncSample(k, t, virt, sim, virt - sim, math.nan, rp.Fault.NONE))

    def step(self, k: int, t: float, line: int, pos: np.ndarray, q: np.ndarray, qd: np.ndarray,
             cmd_text: tuple[list[str], list[str]] | None, block: int = -1, level: float = 0.0) -> bool:
        """Control period ``k`` at ``t`` s: command, step the world, log, film; False when the dynamic
        model became unstable. ``block``: the motion block (-1: look it up), ``level``: the tool
        output's effective level."""
        robot = self.robot
        robot.command(q, qd)
        self.world.step(1)
        if self.pieces is not None:
            event = self.pieces.update(t, line)
            if event is not None and self.telemetry is not None:
                from .telemetry.rosmsg import LogLevel
                self.telemetry.note(t, LogLevel.INFO, event.text())
        F = robot.flange_pose()
        if self.tcp_of_block is None:
            a = F[:3, 3]
        else:
            a = (F @ self.tcp_of_block[block if block >= 0 else self._block_at(t)])[:3, 3]
        e = float(np.linalg.norm(a - pos)) * 1000.0
        if math.isfinite(e):
            self.err_sq += e * e
            self.err_max = max(self.err_max, e)
            self.err_n += 1
        out_row, out_text = self._output_text(t, level) if self.log is not None or self.recorder is not None else ([], "")
        if self.log is not None:
            if cmd_text is None:
                cmd_text = ([f"{v * 1000:.4f}" for v in pos], self._joints_text(q))
            self.log.write([f"{t:.4f}", line] + cmd_text[0] + [f"{v * 1000:.4f}" for v in a] + cmd_text[1]
                           + self._joints_text(robot.q) + [f"{v * 1000:.4f}" for v in F[:3, 3]] + out_row
                           + ([self.pieces.held] if self.pieces is not None and self.pieces.parts else []))
        if self.telemetry is not None:
            st = robot.state()
            self.telemetry.write(t, line, q, qd, st.q, st.qd, st.tau, F)
            if self.outputs is not None:      # /tool_outputs: at the start and on every change
                self.telemetry.outputs(t, output_values(self.outputs.at(t), level))
        if self.publish is not None:
            self._publish(self.publish, k, t, q, robot.q)
        if self.recorder is not None:
            src = self.source_lines
            text = src[line - 1].strip() if src and 0 < line <= len(src) else ""
            info = {"line": f"{line}: {text}" if text else str(line)}
            if out_text:
                info["tool"] = out_text
            b = block if block >= 0 else self._block_at(t)
            # the followed path is the work: a travel move (pen up, spindle clear) breaks it
            self.recorder.maybe_capture(info, trail=not (len(self._rapid) and self._rapid[b]))
        if self.progress is not None and k % self.step_report == 0:
            self.progress(k / self.traj.count)
        self.done, self.t_done, self.last_line = k + 1, t, line
        if not robot.stable:
            self.message = robot.instability.message if robot.instability is not None else "unstable"
            if self.telemetry is not None:
                from .telemetry.rosmsg import LogLevel
                self.telemetry.note(t, LogLevel.ERROR, f"STOPPED at line {line}: {self.message}")
            return False
        return True

    def run(self, stopped: Callable[[], bool]) -> None:
        """Step through every control sample (dwells as one held pose) until the end, an
        instability, or ``stopped()`` after a row."""
        self._steps(stopped)
        if self.pieces is not None:       # while the world is open
            self.piece_ends = self.pieces.ends()
        if self.telemetry is not None:
            from .telemetry.rosmsg import LogLevel
            if self.interrupted:
                self.telemetry.note(self.t_done, LogLevel.WARN, f"interrupted at t = {self.t_done:.3f} s "
                                    f"after {self.done} control periods")
            elif not self.message:
                self.telemetry.note(self.t_done, LogLevel.INFO, f"run ended: {self.done} control periods")
        if self.progress is not None and not self.interrupted:
            self.progress(1.0)

    def _steps(self, stopped: Callable[[], bool]) -> None:
        traj = self.traj
        zero_qd = np.zeros(self.spec.dof)
        for piece in traj:
            if isinstance(piece, HoldPiece):
                self.lines.add(piece.line)
                held = ([f"{v * 1000:.4f}" for v in piece.position], self._joints_text(piece.q))
                block = self._block_at(piece.start * traj.period)
                for k in range(piece.start, piece.stop):
                    level = 0.0
                    if self.outputs is not None:
                        level = float(self.outputs.levels([k * traj.period], [0.0], [self.feed_of_block[block]],
                                                          [self.rapid_of_block[block]])[0])
                    if not self.step(k, k * traj.period, piece.line, piece.position, piece.q, zero_qd, held, block,
                                     level):
                        return
                    if stopped():
                        break
            else:
                ps = piece.samples
                levels = (self.outputs.levels(ps.t, ps.speed, self.feed_of_block[ps.block],
                                              self.rapid_of_block[ps.block])
                          if self.outputs is not None else np.zeros(len(piece)))
                for i in range(len(piece)):
                    ln = int(ps.line[i])
                    self.lines.add(ln)
                    self.blocks.add(int(ps.block[i]))
                    if not self.step(piece.start + i, float(ps.t[i]), ln, ps.position[i], piece.q[i], piece.qd[i],
                                     None, int(ps.block[i]), float(levels[i])):
                        return
                    if stopped():
                        break
            if self.done < traj.count and stopped():
                self.interrupted = True
                return

    def result(self, report: PreflightReport, t_wall: float) -> RunResult:
        """The run summed up; the lines executed include the dwells and pauses passed."""
        finished = self.done == self.traj.count
        blocks = report.program.blocks
        passed = lambda b: finished or (self.done and b.line <= self.last_line)   # noqa: E731
        dwells = [b for b in blocks if isinstance(b, Dwell) and passed(b)]
        lines = self.lines | {b.line for b in dwells}
        pauses = tuple(b.line for b in blocks if isinstance(b, Stop) and b.kind is StopKind.PAUSE and passed(b))
        changes = tuple(b.line for b in blocks
                        if isinstance(b, Stop) and b.kind is StopKind.TOOL_CHANGE and passed(b))
        n = self.err_n
        pieces = self.pieces
        return RunResult(len(lines), float(self.t_done), self.done, math.sqrt(self.err_sq / n) if n else 0.0,
                         self.err_max if n else 0.0, self.log_path, self.video_path, not self.message, self.message,
                         time.perf_counter() - t_wall, pauses, self.interrupted, changes,
                         len(self.blocks) + len(dwells), tuple(pieces.events) if pieces is not None else (),
                         self.piece_ends)

    @staticmethod
    def result_of_nothing(report: PreflightReport, traj: ControlTrajectory, t_wall: float) -> RunResult:
        """The result of a run stopped before it started: nothing moved or written."""
        return RunResult(0, 0.0, 0, 0.0, 0.0, None, None, True, "", time.perf_counter() - t_wall, (), True)
