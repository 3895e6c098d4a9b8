"""Run a preflighted G-code program in a simulated :class:`~armtwin.envs.sim.World`.

The timed path of the plan is sampled at the control period; joints come from IK at every
control sample: of every IK branch's solution the one nearest the preflight's continuous joint
path (interpolated in path length) is taken, and it must lie within the preflight's continuity
step (:data:`~armtwin.controllers.gcode.preflight.MAX_JOINT_STEP`) of that path and inside the
joint ranges — the same branch tracking as the preflight, so no configuration can flip. A
control sample that fails raises :class:`ControlTrajectoryError` naming the program line (a
clean preflight should make that impossible). The samples are made lazily, a chunk at a time,
and dwells hold one pose without per-sample arrays (:class:`ControlTrajectory`), so memory
does not grow with the program time. Velocities come from the timed joint path; each
control period ends in ``SimRobot.command(q, qd)`` and one :meth:`World.step` (the physics may
take several substeps per control period). The run logs one CSV row per control period and
optionally renders a video with the programmed path and the path actually followed drawn in.

No PyBullet here: everything goes through the facade in :mod:`.sim`.
"""

from __future__ import annotations

import bisect
import csv
import math
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np

from ..controllers.gcode.planner import PathSamples
from ..controllers.gcode.preflight import MAX_JOINT_STEP, PreflightReport
from ..controllers.ik import solve_batch
from .sim import JointMode, PhysicsConfig, World, camera_for_path

__all__ = ["RunResult", "RunConfig", "run_program", "control_trajectory", "ControlTrajectory", "MotionPiece",
           "HoldPiece", "log_columns", "RunLog", "CAMERAS", "ControlTrajectoryError", "MAX_ARRAY_SAMPLES"]

#: Cameras a run can film with: "work" frames the program's path (:func:`~armtwin.envs.sim.camera_for_path`),
#: the others are the robot's presets of :func:`~armtwin.envs.sim.cameras_for`.
CAMERAS = ("work", "iso", "front", "side", "top")


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


#: control samples evaluated (IK) at once
CHUNK_SAMPLES = 4096
#: control samples the validation pass keeps for the run (larger runs solve them again); ~0.3 kB each
CACHE_SAMPLES = 200_000
#: most control samples :func:`control_trajectory` returns as whole arrays (use :class:`ControlTrajectory` beyond)
MAX_ARRAY_SAMPLES = 1_000_000


@dataclass(frozen=True, eq=False)
class MotionPiece:
    """Consecutive control samples ``start … start + len - 1`` of a moving stretch.

    Attributes:
        start: index of the first control sample.
        samples: the path at those samples (K of them).
        q: (K, n) commanded joints, rad / m.
        qd: (K, n) commanded joint velocities, rad/s / m/s.
    """

    start: int
    samples: PathSamples
    q: np.ndarray
    qd: np.ndarray

    def __len__(self) -> int:
        return len(self.q)

    @property
    def stop(self) -> int:
        return self.start + len(self.q)


@dataclass(frozen=True, eq=False)
class HoldPiece:
    """Control samples ``start … stop - 1`` inside a dwell (G4): the robot holds one pose.

    Nothing per sample is stored: sample k is at ``k · period`` s, commands ``q`` with zero
    velocity and is logged under ``line``.

    Attributes:
        start, stop: control sample range (stop exclusive).
        line: program line of the dwell.
        position: (3,) flange position held, m.
        q: (n,) joints held, rad / m.
    """

    start: int
    stop: int
    line: int
    position: np.ndarray
    q: np.ndarray

    def __len__(self) -> int:
        return self.stop - self.start


class ControlTrajectory:
    """The commanded control samples of a clean preflight report, made lazily in chunks.

    Sample k is at ``k · period`` s (plus one last sample at the program's end when the
    duration is not a whole number of periods), as :meth:`Plan.sample_every` would give.
    Moving stretches are evaluated :data:`CHUNK_SAMPLES` at a time (path, IK on the
    preflight's branch, velocities); dwells are :class:`HoldPiece` objects without per-sample
    arrays. Memory is bounded whatever the program time.

    IK at every sample solves every branch at once; of the branch solutions the one nearest the
    preflight's continuous joint path (interpolated in path length) is taken. It must be within
    :data:`MAX_JOINT_STEP` (rad; prismatic joints not counted) of that path — the preflight's own
    continuity rule between neighbouring samples — and inside the joint ranges. Nothing is filled
    in silently: :meth:`check` raises on any failing sample.

    Args:
        report: a clean preflight report (``q`` without NaN).
        spec: the robot the report was made for.
        period: control period, s (default the report's ``machine.control_period``).
        chunk: samples evaluated at once.

    Raises:
        ValueError: the report has no (complete) joint path, or a bad period.
    """

    def __init__(self, report: PreflightReport, spec, period: float | None = None, *,
                 chunk: int = CHUNK_SAMPLES) -> None:
        plan = report.plan
        gs, qg = report.samples, report.q
        if plan is None or gs is None or qg is None or not np.isfinite(qg).all():
            raise ValueError("the preflight report has no complete joint path (was the program clean?)")
        period = report.machine.control_period if period is None else float(period)
        if not (math.isfinite(period) and period > 0):
            raise ValueError(f"control period must be > 0 s, got {period}")
        self.report, self.spec, self.plan, self.period = report, spec, plan, period
        self.chunk = max(1, int(chunk))
        #: number of control samples
        self.count: int = plan.sample_count(period)
        #: program time, s
        self.duration: float = float(plan.duration)
        self._regular = int(math.floor(plan.duration / period + 1e-9)) + 1
        self._gs_s, self._qg = gs.s, qg
        self._layout = self._make_layout()
        self._starts = [e[1] for e in self._layout]
        self._cache: list | None = None
        self._cache_starts: list[int] = []
        self._recent: list = []

    # ----- layout ----------------------------------------------------------------------------
    def _make_layout(self) -> list[tuple]:
        """[("move", a, b) | ("hold", a, b, h)] covering samples 0 … count - 1 in order."""
        h0, h1, _ = self.plan.hold_intervals()
        p, n = self.period, self._regular
        out: list[tuple] = []
        k = 0
        for h in range(len(h0)):
            lo = int(math.floor(h0[h] / p)) + 1          # first k with k·p > t0
            while lo > 0 and (lo - 1) * p > h0[h]:
                lo -= 1
            while lo * p <= h0[h]:
                lo += 1
            hi = int(math.ceil(h1[h] / p))               # first k with k·p >= t1
            while hi > 0 and (hi - 1) * p >= h1[h]:
                hi -= 1
            while hi * p < h1[h]:
                hi += 1
            lo, hi = max(lo, k), min(hi, n)
            if hi <= lo:
                continue
            if lo > k:
                out.append(("move", k, lo))
            out.append(("hold", lo, hi, h))
            k = hi
        if k < self.count:
            out.append(("move", k, self.count))
        return out

    def _ranges(self):
        """(kind, a, b, h) with moving stretches split into chunks."""
        for e in self._layout:
            if e[0] == "hold":
                yield e
            else:
                for a in range(e[1], e[2], self.chunk):
                    yield ("move", a, min(a + self.chunk, e[2]), -1)

    # ----- evaluation --------------------------------------------------------------------------
    def _solve(self, ps: PathSamples):
        """(q (K, n), bad (K,) bool, why(i) -> str) of the samples ``ps``."""
        spec, qg = self.spec, self._qg
        q_near = np.column_stack([np.interp(ps.s, self._gs_s, qg[:, j]) for j in range(qg.shape[1])])
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

        def why(i: int) -> str:
            if not np.isfinite(near[i]):
                return "no IK solution"
            if near[i] > MAX_JOINT_STEP:
                return (f"the nearest solution is {math.degrees(float(near[i])):.1f} deg away from the checked "
                        f"joint path (limit {math.degrees(MAX_JOINT_STEP):.0f} deg): the branch would change")
            j = int(np.argmax(np.maximum(q[i] - spec.upper, spec.lower - q[i])))
            return f"J{j + 1} outside its range ({spec.to_display(q[i])[j]:.2f} {spec.display_units()[j]})"
        return q, bad, why

    def _evaluate(self, r) -> tuple[MotionPiece | HoldPiece, tuple | None, int]:
        """The piece of range ``r``, its first failure (line, t, position, why) or None, and the failure count."""
        kind, a, b, h = r
        plan = self.plan
        if kind == "hold":
            h0, _, hline = plan.hold_intervals()
            ps = plan.sample(np.array([h0[h]]))
            q, bad, why = self._solve(ps)
            line = int(hline[h])
            piece = HoldPiece(a, b, line, ps.position[0].copy(), q[0].copy())
            fail = (line, float(h0[h]), ps.position[0], why(0)) if bad[0] else None
            return piece, fail, (b - a) if bad[0] else 0
        lo, hi = max(a - 1, 0), min(b + 1, self.count)     # neighbours for the velocity at the ends
        ps = plan.sample(plan.sample_times(self.period, lo, hi))
        q, bad, why = self._solve(ps)
        qd = np.gradient(q, ps.t, axis=0) if len(q) > 1 else np.zeros_like(q)
        i0, i1 = a - lo, a - lo + (b - a)
        cut = PathSamples(*(getattr(ps, f)[i0:i1] for f in ("t", "s", "position", "rotation", "speed", "segment",
                                                            "block", "line")))
        piece = MotionPiece(a, cut, q[i0:i1], qd[i0:i1])
        badc = bad[i0:i1]
        fail = None
        if badc.any():
            i = int(np.flatnonzero(badc)[0])
            fail = (int(cut.line[i]), float(cut.t[i]), cut.position[i], why(i0 + i))
        return piece, fail, int(badc.sum())

    @staticmethod
    def _error(fail: tuple, count: int) -> ControlTrajectoryError:
        line, t, pos, why = fail
        p = ", ".join(f"{v * 1000:.3f}" for v in pos)
        return ControlTrajectoryError(
            f"line {line}: control sample at t = {t:.3f} s, ({p}) mm: {why} "
            f"({count} failing control sample(s); the preflight passed them — please report)",
            line, t, pos, count)

    # ----- public API ----------------------------------------------------------------------------
    def check(self, *, keep: bool = False) -> None:
        """Evaluate every sample once; raise on any failure, before anything moves.

        Keeps the pieces for the run when they hold at most :data:`CACHE_SAMPLES` moving samples
        (or always with ``keep``), so a normal program is solved once.

        Raises:
            ControlTrajectoryError: a control sample has no solution on the followed branch; the
                message names the program line, the time and the point, and counts the failures.
        """
        first, count = None, 0
        pieces: list | None = []
        moving = 0
        for r in self._ranges():
            piece, fail, n_bad = self._evaluate(r)
            if fail is not None and first is None:
                first = fail
            count += n_bad
            if pieces is not None:
                if isinstance(piece, MotionPiece):
                    moving += len(piece)
                if keep or moving <= CACHE_SAMPLES:
                    pieces.append(piece)
                else:
                    pieces = None
        if first is not None:
            raise self._error(first, count)
        self._cache = pieces
        self._cache_starts = [p.start for p in pieces] if pieces is not None else []

    def __iter__(self) -> Iterator[MotionPiece | HoldPiece]:
        """The pieces in time order (from :meth:`check`'s cache, else evaluated now).

        Raises:
            ControlTrajectoryError: at a piece with a failing sample (call :meth:`check` first to
                fail before anything moves).
        """
        if self._cache is not None:
            yield from self._cache
            return
        for r in self._ranges():
            piece, fail, n_bad = self._evaluate(r)
            if fail is not None:
                raise self._error(fail, n_bad)
            yield piece

    def time_of(self, k: int) -> float:
        """Time of control sample ``k``, s."""
        return float(self.plan.sample_times(self.period, k, k + 1)[0])

    def _piece_at(self, k: int) -> MotionPiece | HoldPiece:
        for piece in self._recent:
            if piece.start <= k < piece.stop:
                return piece
        if self._cache is not None:
            return self._cache[bisect.bisect_right(self._cache_starts, k) - 1]
        e = self._layout[bisect.bisect_right(self._starts, k) - 1]
        if e[0] == "hold":
            r = e
        else:
            a = e[1] + (k - e[1]) // self.chunk * self.chunk
            r = ("move", a, min(a + self.chunk, e[2]), -1)
        piece, fail, n_bad = self._evaluate(r)
        if fail is not None:
            raise self._error(fail, n_bad)
        self._recent = [piece] + self._recent[:1]
        return piece

    def sample_q(self, k: int) -> np.ndarray:
        """(n,) commanded joints of control sample ``k`` (clipped to the range), rad / m."""
        k = min(max(int(k), 0), self.count - 1)
        piece = self._piece_at(k)
        return piece.q.copy() if isinstance(piece, HoldPiece) else piece.q[k - piece.start].copy()

    def q_at(self, t: float) -> np.ndarray:
        """(n,) joints at time ``t`` (s), linear between control samples; the end pose after the end.

        For consumers that run at their own clock (the rig sync): evaluates only the chunks it
        needs (two are kept), so memory does not grow with the program time.
        """
        if not t > 0:
            return self.sample_q(0)
        if t >= self.duration:
            return self.sample_q(self.count - 1)
        k = min(int(math.floor(t / self.period)), self.count - 2)
        t0, t1 = self.time_of(k), self.time_of(k + 1)
        u = 0.0 if t1 <= t0 else min(max((t - t0) / (t1 - t0), 0.0), 1.0)
        q0 = self.sample_q(k)
        return q0 + u * (self.sample_q(k + 1) - q0)

    def planned_path(self) -> np.ndarray:
        """(M, 3) the commanded path as a polyline (chord end points), m — M grows with the program, not its time."""
        return np.vstack([self.plan.p0, self.plan.p1[-1:]])

    def work_points(self) -> np.ndarray:
        """(M, 3) end points of the feed moves' chords (G1/G2/G3: the work, not the rapids
        around it), m; of every chord when the program has no feed move."""
        from ..controllers.gcode.interpreter import MotionKind
        feed = np.array([m.kind is not MotionKind.RAPID for m in self.plan.motions], dtype=bool)
        mask = feed[self.plan.block] if len(self.plan.block) else feed[:0]
        if not mask.any():
            mask = np.ones(len(self.plan.p0), dtype=bool)
        return np.vstack([self.plan.p0[mask], self.plan.p1[mask]])

    def arrays(self, max_samples: int = MAX_ARRAY_SAMPLES) -> tuple[PathSamples, np.ndarray, np.ndarray]:
        """Every control sample as arrays: (PathSamples, q (K, n), qd (K, n)).

        Raises:
            ValueError: more than ``max_samples`` samples (the message gives the program time);
                use the pieces (iteration) or :meth:`q_at` instead.
            ControlTrajectoryError: as :meth:`check`.
        """
        if self.count > max_samples:
            raise ValueError(f"the program takes {self.duration:.1f} s: {self.count} control samples of "
                             f"{self.period * 1000:g} ms are more than the {max_samples} this call returns as "
                             f"arrays (iterate a ControlTrajectory instead)")
        self.check(keep=True)
        parts = []
        for piece in self._cache:
            if isinstance(piece, MotionPiece):
                parts.append((piece.samples, piece.q, piece.qd))
                continue
            m = len(piece)
            t = self.plan.sample_times(self.period, piece.start, piece.stop)
            ref = self.plan.sample(t[:1])
            ps = PathSamples(t, np.repeat(ref.s, m), np.repeat(piece.position[None], m, axis=0),
                             np.repeat(ref.rotation, m, axis=0), np.zeros(m), np.repeat(ref.segment, m),
                             np.repeat(ref.block, m), np.full(m, piece.line, dtype=np.int64))
            parts.append((ps, np.repeat(piece.q[None], m, axis=0), np.zeros((m, len(piece.q)))))
        fields = ("t", "s", "position", "rotation", "speed", "segment", "block", "line")
        ps = PathSamples(*(np.concatenate([getattr(p[0], f) for p in parts]) for f in fields))
        return ps, np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])


def control_trajectory(report: PreflightReport, spec, period: float):
    """Every commanded control sample as arrays, on the preflight's branch (see :class:`ControlTrajectory`).

    Args:
        report: a clean preflight report (``q`` without NaN).
        spec: the robot the report was made for.
        period: control period, s.

    Returns:
        (PathSamples, q (K, n) rad / m, qd (K, n) rad/s / m/s); dwell samples are included
        (labelled with the G4's line, zero velocity).

    Raises:
        ValueError: the report has no (complete) joint path, or the program has more than
            :data:`MAX_ARRAY_SAMPLES` control samples (iterate a :class:`ControlTrajectory`,
            or use its :meth:`~ControlTrajectory.q_at`, for those).
        ControlTrajectoryError: a control sample has no solution on the followed branch; the
            message names the program line, the time and the point.
    """
    return ControlTrajectory(report, spec, period).arrays()


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


def run_program(report: PreflightReport, spec, config: RunConfig = RunConfig(), *, log_path: str | None = None,
                video_path: str | None = None, progress: Callable[[float], None] | None = None,
                source_lines: Sequence[str] | None = None, stop: threading.Event | None = None) -> RunResult:
    """Run a clean preflight report's plan in a new world.

    The control samples come from a :class:`ControlTrajectory`: checked completely before
    anything moves, then stepped through chunk by chunk (dwells without per-sample arrays), so
    memory does not grow with the program time; the log is written as the run goes, a whole row
    at a time (:class:`RunLog`). The log, the video and the world are closed on every path out
    (an exception included), so an interrupted run keeps every row it wrote and a playable video.

    Args:
        report: a preflight report with a plan (its program must be clean).
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
        ValueError: the report is not clean or has no motion, or was made for another robot.
        ControlTrajectoryError: a control sample has no joint solution on the followed branch
            (see :class:`ControlTrajectory`).
    """
    if not report.clean() or report.plan is None or report.samples is None:
        raise ValueError("the program did not pass the preflight; refusing to run it")
    t_wall = time.perf_counter()
    period = report.machine.control_period
    if spec.name != report.robot:
        raise ValueError(f"the report was made for {report.robot}, not {spec.name}")
    traj = ControlTrajectory(report, spec, period)
    traj.check()                      # every sample solves on the branch: before anything moves
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
    from ..controllers.gcode.interpreter import Dwell, Stop, StopKind
    err_sq, err_max, err_n = err
    finished = done == traj.count
    lines = lines | {b.line for b in report.program.blocks
                     if isinstance(b, Dwell) and (finished or (done and b.line <= last_line))}
    pauses = tuple(b.line for b in report.program.blocks if isinstance(b, Stop) and b.kind is StopKind.PAUSE
                   and (finished or (done and b.line <= last_line)))
    return RunResult(len(lines), float(t_done), done, math.sqrt(err_sq / err_n) if err_n else 0.0,
                     err_max if err_n else 0.0, log_path, video_path, not message, message,
                     time.perf_counter() - t_wall, pauses, interrupted)
