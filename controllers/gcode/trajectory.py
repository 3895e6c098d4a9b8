"""The control trajectory of a preflighted program: the joints commanded every control period.

The timed path of the plan is sampled at the control period; joints come from IK at every
control sample: of every IK branch's solution the one nearest the preflight's continuous joint
path (interpolated in path length) is taken, and it must lie within the preflight's continuity
step (:data:`~.preflight.MAX_JOINT_STEP`) of that path and inside the joint ranges — the same
branch tracking as the preflight, so no configuration can flip. A control sample that fails
raises :class:`ControlTrajectoryError` naming the program line (a clean preflight should make
that impossible). The samples are made lazily, a chunk at a time, and dwells hold one pose
without per-sample arrays (:class:`ControlTrajectory`), so memory does not grow with the
program time. Velocities come from the timed joint path.

Every consumer of a program's joints (``armtwin run``, ``armtwin sync --program``, the teach
pendant, the Gym Track env) gets them from here, through :func:`~.compile.compile_program`.

Pure numpy (no PyBullet). Units: s, m, rad.
"""

from __future__ import annotations

import bisect
import enum
import math
from dataclasses import dataclass
from typing import Callable, Iterator, NamedTuple

import numpy as np

from ..ik import solve_batch
from .interpreter import MotionKind
from .planner import PathSamples
from .preflight import MAX_JOINT_STEP, PreflightReport

__all__ = ["ControlTrajectory", "ControlTrajectoryError", "MotionPiece", "HoldPiece", "SpanKind", "CHUNK_SAMPLES",
           "CACHE_SAMPLES", "MAX_ARRAY_SAMPLES"]


class ControlTrajectoryError(ValueError):
    """A control sample of a preflighted program has no joint solution on the followed branch.

    A ``ValueError`` (the report cannot be run), so CLI entry points turn it into one line.

    Attributes:
        line: program line of the first failing sample.
        time: its time, s.
        position: (3,) its position (the controlled point), m (base frame).
        count: number of failing control samples.
    """

    def __init__(self, message: str, line: int, time: float, position, count: int) -> None:
        super().__init__(message)
        self.line, self.time, self.position, self.count = line, time, np.asarray(position, float), count


class SpanKind(enum.Enum):
    """What the robot does over a stretch of control samples."""

    MOVE = "move"    # samples along the timed path (IK per sample)
    HOLD = "hold"    # a dwell: one pose held, nothing per sample


class _Span(NamedTuple):
    """Control samples ``start … stop - 1`` of one kind; ``hold``: the dwell's index (-1 for MOVE)."""

    kind: SpanKind
    start: int
    stop: int
    hold: int = -1


#: a failing control sample: (program line, time s, (3,) flange position m, why)
_Failure = tuple[int, float, np.ndarray, str]

#: the per-sample arrays of a PathSamples
_FIELDS = ("t", "s", "position", "rotation", "speed", "segment", "block", "line")
#: control samples evaluated (IK) at once
CHUNK_SAMPLES = 4096
#: control samples the validation pass keeps for the run (larger runs solve them again); ~0.3 kB each
CACHE_SAMPLES = 200_000
#: most control samples :meth:`ControlTrajectory.arrays` returns (iterate a :class:`ControlTrajectory` beyond)
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
        position: (3,) position of the controlled point held, m.
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
        if report.machine is None:
            raise ValueError("the preflight report has no machine settings")
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
        self._starts = [e.start for e in self._layout]
        #: every sample has been solved and passed (:meth:`check`)
        self.checked = False
        self._cache: list[MotionPiece | HoldPiece] | None = None
        self._cache_starts: list[int] = []
        self._recent: list[MotionPiece | HoldPiece] = []

    # ----- layout ----------------------------------------------------------------------------
    def _make_layout(self) -> list[_Span]:
        """Spans covering samples 0 … count - 1 in order: moving stretches and dwells."""
        h0, h1, _ = self.plan.hold_intervals()
        p, n = self.period, self._regular
        out: list[_Span] = []
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
                out.append(_Span(SpanKind.MOVE, k, lo))
            out.append(_Span(SpanKind.HOLD, lo, hi, h))
            k = hi
        if k < self.count:
            out.append(_Span(SpanKind.MOVE, k, self.count))
        return out

    def _ranges(self) -> Iterator[_Span]:
        """The layout with moving stretches split into chunks."""
        for e in self._layout:
            if e.kind is SpanKind.HOLD:
                yield e
            else:
                for a in range(e.start, e.stop, self.chunk):
                    yield _Span(SpanKind.MOVE, a, min(a + self.chunk, e.stop))

    # ----- evaluation --------------------------------------------------------------------------
    def _solve(self, ps: PathSamples) -> tuple[np.ndarray, np.ndarray, Callable[[int], str]]:
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

    def _evaluate(self, r: _Span) -> tuple[MotionPiece | HoldPiece, _Failure | None, int]:
        """The piece of span ``r``, its first failure (line, t, position, why) or None, and the failure count."""
        kind, a, b, h = r
        plan = self.plan
        piece: MotionPiece | HoldPiece
        fail: _Failure | None = None
        if kind is SpanKind.HOLD:
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
        cut = PathSamples(**{f: getattr(ps, f)[i0:i1] for f in _FIELDS}, flange_of_block=ps.flange_of_block)
        piece = MotionPiece(a, cut, q[i0:i1], qd[i0:i1])
        badc = bad[i0:i1]
        if badc.any():
            i = int(np.flatnonzero(badc)[0])
            fail = (int(cut.line[i]), float(cut.t[i]), cut.position[i], why(i0 + i))
        return piece, fail, int(badc.sum())

    @staticmethod
    def _error(fail: _Failure, count: int) -> ControlTrajectoryError:
        line, t, pos, why = fail
        p = ", ".join(f"{v * 1000:.3f}" for v in pos)
        return ControlTrajectoryError(
            f"line {line}: control sample at t = {t:.3f} s, ({p}) mm: {why} "
            f"({count} failing control sample(s); the preflight passed them — please report)",
            line, t, pos, count)

    # ----- public API ----------------------------------------------------------------------------
    def check(self, *, keep: bool = False, progress: Callable[[str, float], None] | None = None) -> None:
        """Evaluate every sample once; raise on any failure, before anything moves.

        Keeps the pieces for the run when they hold at most :data:`CACHE_SAMPLES` moving samples
        (or always with ``keep``), so a normal program is solved once; a second call with the
        pieces kept does nothing.

        Args:
            keep: keep the pieces whatever their number (for :meth:`arrays`).
            progress: called with ("control", fraction) now and then.

        Raises:
            ControlTrajectoryError: a control sample has no solution on the followed branch; the
                message names the program line, the time and the point, and counts the failures.
        """
        if self.checked and (self._cache is not None or not keep):
            return
        first: _Failure | None = None
        count = 0
        pieces: list[MotionPiece | HoldPiece] | None = []
        moving = 0
        for r in self._ranges():
            if progress is not None:
                progress("control", r.start / max(self.count, 1))
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
        self.checked = True
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
        if e.kind is SpanKind.HOLD:
            r = e
        else:
            a = e.start + (k - e.start) // self.chunk * self.chunk
            r = _Span(SpanKind.MOVE, a, min(a + self.chunk, e.stop))
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

    def rapid_blocks(self) -> np.ndarray:
        """(B,) bool per motion block: a travel move (G0)."""
        return np.array([m.kind is MotionKind.RAPID for m in self.plan.motions], dtype=bool)

    def planned_paths(self) -> list[tuple[np.ndarray, bool]]:
        """The commanded path as polylines, split where it changes between work (G1/G2/G3) and
        travel (G0): [((M, 3) chord end points in m, is travel)], in program order."""
        plan = self.plan
        if not len(plan.p0):
            return []
        rapid = self.rapid_blocks()[plan.block]
        cuts = np.r_[0, np.flatnonzero(np.diff(rapid)) + 1, len(rapid)]
        return [(np.vstack([plan.p0[a:b], plan.p1[b - 1:b]]), bool(rapid[a])) for a, b in zip(cuts[:-1], cuts[1:])]

    def work_points(self) -> np.ndarray:
        """(M, 3) end points of the feed moves' chords (G1/G2/G3: the work, not the rapids
        around it), m; of every chord when the program has no feed move."""
        feed = ~self.rapid_blocks()
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
        for piece in self._cache or ():
            if isinstance(piece, MotionPiece):
                parts.append((piece.samples, piece.q, piece.qd))
                continue
            m = len(piece)
            t = self.plan.sample_times(self.period, piece.start, piece.stop)
            ref = self.plan.sample(t[:1])
            ps = PathSamples(t, np.repeat(ref.s, m), np.repeat(piece.position[None], m, axis=0),
                             np.repeat(ref.rotation, m, axis=0), np.zeros(m), np.repeat(ref.segment, m),
                             np.repeat(ref.block, m), np.full(m, piece.line, dtype=np.int64), ref.flange_of_block)
            parts.append((ps, np.repeat(piece.q[None], m, axis=0), np.zeros((m, len(piece.q)))))
        ps = PathSamples(**{f: np.concatenate([getattr(p[0], f) for p in parts]) for f in _FIELDS},
                         flange_of_block=self.plan.flange_of_block)
        return ps, np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])
