"""Motion planning: blocks -> chords -> trapezoidal timing with junction deviation -> samples.

Knows nothing of G-code (grbl's split): it sees motion blocks in metres of the base frame.
:func:`plan` works in stages, each a function with its own result type: the sequence of
motions, dwells and stops → the orientation of every block (:class:`BlockFrames`) → the chords
(:class:`Chords`) → nominal speeds → the chord ends (junction limits, rests, dwell times:
:class:`Nodes`) → the dwells (:class:`Holds`) → the speed profiles (:func:`retime`,
:class:`Timing`); the :class:`Plan` holds them, built by keyword.

1. **Geometry.** Lines stay lines; arcs are split into chords no farther than
   ``arc_tolerance`` from the circle (as grbl's ``mc_arc``). Orientation is interpolated along
   each block (rotation about one axis, proportional to the block's path fraction). Chords of
   zero length (a block to where the tool already is) are dropped; a block may have none and a
   plan may have no chord at all (then only its dwells take time). At most
   ``max_path_samples`` chords (the interpreter stops well before, fault 105).
2. **Timing.** Each chord gets a trapezoidal speed profile with acceleration ``acceleration``
   and cruise speed F (G0: the rapid speed; arcs also at most sqrt(a·r), so the centripetal
   acceleration stays within a). Corner speeds follow grbl's junction deviation:
   v² = a·δ·sin(θ/2)/(1 − sin(θ/2)). The backward and forward passes of grbl's planner are
   done in closed form with cumulative minima over the whole program (vectorised).
   Tool rotation counts in the move length as ``rotation_scale`` metres per radian.
   Dwells and stops bring the tool to rest.
3. **Sampling.** :meth:`Plan.sample` evaluates the timed path at any times (the control
   period is independent of the physics step; :meth:`Plan.sample_times` gives any slice of the
   control samples without making the others, :meth:`Plan.hold_intervals` the dwells);
   :meth:`Plan.geometric_samples` gives points at most ``sample_spacing`` apart (for the
   preflight IK) with their times.

Memory: chords and samples of a long program are built and evaluated :data:`EVAL_CHUNK` at a
time into arrays made once, and the timing passes work in place, so planning a program needs
little more than the plan itself (no (N, 3) or (N, 3, 3) temporaries of the whole path).

Units: m, s, rad; speeds m/s; accelerations m/s².
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import NamedTuple

import numpy as np

from .blocks import FLANGE, Block, Dwell, Motion, MotionKind, Stop, StopKind
from .config import MachineConfig

__all__ = ["Plan", "PathSamples", "Chords", "BlockFrames", "Nodes", "Holds", "Timing", "plan", "retime",
           "junction_speed_sq"]

#: path points evaluated (and chords built) per chunk: bounds the temporaries of long programs
EVAL_CHUNK = 65_536


def junction_speed_sq(d_prev: np.ndarray, d_next: np.ndarray, acceleration: float, deviation: float) -> np.ndarray:
    """grbl's junction speed² (m²/s²) between unit directions (N, k) and (N, k)."""
    cos_t = -np.einsum("ij,ij->i", d_prev, d_next)
    cos_t = np.clip(np.nan_to_num(cos_t, nan=1.0), -1.0, 1.0)   # no direction (NaN): stop there
    sin_h = np.sqrt(0.5 * (1.0 - cos_t))
    with np.errstate(divide="ignore"):
        v2 = acceleration * deviation * sin_h / (1.0 - sin_h)
    v2[cos_t > 0.999999] = 0.0           # full reversal
    v2[cos_t < -0.999999] = np.inf       # straight on
    return v2


@dataclass(frozen=True)
class PathSamples:
    """Points of the timed path.

    Attributes:
        t: (K,) times, s.
        s: (K,) path parameter (cumulative move length, m; rotation counted by rotation_scale).
        position: (K, 3) positions of the controlled point (the active tool's TCP), m.
        rotation: (K, 3, 3) its orientations.
        speed: (K,) path speed, m/s.
        segment: (K,) chord index.
        block: (K,) motion-block index.
        line: (K,) program line.
        flange_of_block: (B, 4, 4) per motion block, the flange frame in the controlled point's
            frame (the inverse of its TCP), or None when every block moves the flange itself.
    """

    t: np.ndarray
    s: np.ndarray
    position: np.ndarray
    rotation: np.ndarray
    speed: np.ndarray
    segment: np.ndarray
    block: np.ndarray
    line: np.ndarray
    flange_of_block: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.t)

    def tcp_poses(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """(K, 4, 4) homogeneous poses of the controlled point (of the samples ``start … stop - 1``, default all)."""
        sl = slice(start, stop)
        rot = self.rotation[sl]
        T = np.zeros((len(rot), 4, 4))
        T[:, :3, :3] = rot
        T[:, :3, 3] = self.position[sl]
        T[:, 3, 3] = 1.0
        return T

    def poses(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """(K, 4, 4) homogeneous flange poses (what IK solves for) of the samples ``start … stop - 1``:
        the controlled point's poses with its TCP taken off."""
        T = self.tcp_poses(start, stop)
        if self.flange_of_block is not None:
            T = T @ self.flange_of_block[self.block[start:stop]]
        return T


@dataclass(frozen=True, eq=False)
class Chords:
    """The straight pieces the path is made of (S of them), from :func:`plan`'s geometry stage.

    Attributes:
        p0, p1: (S, 3) chord end points, m.
        f0, f1: (S,) path fraction of the chord ends within their block.
        block: (S,) motion-block index of each chord.
        length: (S,) chord length, m, tool rotation included (``rotation_scale`` m per rad).
    """

    p0: np.ndarray
    p1: np.ndarray
    f0: np.ndarray
    f1: np.ndarray
    block: np.ndarray
    length: np.ndarray


@dataclass(frozen=True, eq=False)
class BlockFrames:
    """The tool orientation along each motion block (B of them).

    Attributes:
        rot0: (B, 3, 3) orientation at the block's start.
        axis: (B, 3) rotation axis over the block, in the start frame.
        angle: (B,) rotation angle over the block, rad (spread evenly along the block).
        lines: (B,) program line of each block.
    """

    rot0: np.ndarray
    axis: np.ndarray
    angle: np.ndarray
    lines: np.ndarray


@dataclass(frozen=True, eq=False)
class Nodes:
    """The chord ends (S + 1 of them: node i is where chord i starts).

    Attributes:
        rest: (S + 1,) bool, the tool must be at rest there (program start and end, after a
            dwell or a stop).
        delay: (S + 1,) dwell time before the node, s.
        junction: (S + 1,) grbl's junction speed² limit there, m²/s².
    """

    rest: np.ndarray
    delay: np.ndarray
    junction: np.ndarray


@dataclass(frozen=True, eq=False)
class Holds:
    """The dwells (G4 with P > 0, H of them), in program order.

    Attributes:
        node: (H,) node (0..S) each dwell is taken at.
        seconds: (H,) dwell durations, s.
        line: (H,) program line of each dwell.
    """

    node: np.ndarray
    seconds: np.ndarray
    line: np.ndarray


@dataclass(frozen=True, eq=False)
class Timing:
    """The trapezoidal speed profiles of the chords (S of them), from :func:`retime`.

    Attributes:
        v_nominal: (S,) cruise speed limit, m/s (after rapid scaling).
        v_entry, v_exit: (S,) speeds at the chord ends, m/s.
        v_cruise: (S,) peak speed reached, m/s.
        t_start: (S,) time the chord starts, s (after any dwell before it).
        t_acc, t_cruise, t_dec: (S,) phase durations, s.
        duration: total program time, s (dwells included).
        rapid_scale: (B,) factor applied to each block's nominal speed (1 = as programmed).
    """

    v_nominal: np.ndarray
    v_entry: np.ndarray
    v_exit: np.ndarray
    v_cruise: np.ndarray
    t_start: np.ndarray
    t_acc: np.ndarray
    t_cruise: np.ndarray
    t_dec: np.ndarray
    duration: float
    rapid_scale: np.ndarray


@dataclass(frozen=True, eq=False)
class Plan:
    """A timed path: chords with trapezoidal speed profiles, made by :func:`plan` in stages.

    Attributes:
        motions: the motion blocks (B of them), in order.
        chords: the geometry (:class:`Chords`, S chords).
        frames: the tool orientation along each block (:class:`BlockFrames`).
        nodes: rest, dwell time and junction speed limit at every chord end (:class:`Nodes`).
        holds: the dwells (:class:`Holds`).
        base_nominal: (S,) cruise speed limit of each chord before rapid scaling, m/s.
        acceleration: m/s².
        timing: the speed profiles (:class:`Timing`).

    The arrays of the stages are also attributes of the plan itself (``p0`` … ``length`` of the
    chords, ``v_nominal`` … ``rapid_scale`` of the timing, ``lines`` of the frames).
    """

    motions: tuple[Motion, ...]
    chords: Chords
    frames: BlockFrames
    nodes: Nodes
    holds: Holds
    base_nominal: np.ndarray
    acceleration: float
    timing: Timing

    @cached_property
    def flange_of_block(self) -> np.ndarray | None:
        """(B, 4, 4) per motion block the inverse of its TCP (the flange in the controlled point's
        frame), or None when every block moves the flange itself."""
        if all(m.tcp is FLANGE for m in self.motions):
            return None
        out = np.empty((len(self.motions), 4, 4))
        for i, m in enumerate(self.motions):
            R, p = m.tcp[:3, :3], m.tcp[:3, 3]
            out[i] = np.eye(4)
            out[i, :3, :3] = R.T
            out[i, :3, 3] = -R.T @ p
        return out

    # ----- the stages' arrays ----------------------------------------------------------------
    @property
    def p0(self) -> np.ndarray:
        """(S, 3) chord start points, m."""
        return self.chords.p0

    @property
    def p1(self) -> np.ndarray:
        """(S, 3) chord end points, m."""
        return self.chords.p1

    @property
    def f0(self) -> np.ndarray:
        """(S,) path fraction of the chord starts within their block."""
        return self.chords.f0

    @property
    def f1(self) -> np.ndarray:
        """(S,) path fraction of the chord ends within their block."""
        return self.chords.f1

    @property
    def block(self) -> np.ndarray:
        """(S,) motion-block index of each chord."""
        return self.chords.block

    @property
    def length(self) -> np.ndarray:
        """(S,) chord length incl. rotation, m."""
        return self.chords.length

    @property
    def v_nominal(self) -> np.ndarray:
        """(S,) cruise speed limit, m/s."""
        return self.timing.v_nominal

    @property
    def v_entry(self) -> np.ndarray:
        """(S,) speed at the chord starts, m/s."""
        return self.timing.v_entry

    @property
    def v_exit(self) -> np.ndarray:
        """(S,) speed at the chord ends, m/s."""
        return self.timing.v_exit

    @property
    def v_cruise(self) -> np.ndarray:
        """(S,) peak speed reached, m/s."""
        return self.timing.v_cruise

    @property
    def t_start(self) -> np.ndarray:
        """(S,) time the chord starts, s."""
        return self.timing.t_start

    @property
    def t_acc(self) -> np.ndarray:
        """(S,) acceleration phase, s."""
        return self.timing.t_acc

    @property
    def t_cruise(self) -> np.ndarray:
        """(S,) cruise phase, s."""
        return self.timing.t_cruise

    @property
    def t_dec(self) -> np.ndarray:
        """(S,) deceleration phase, s."""
        return self.timing.t_dec

    @property
    def duration(self) -> float:
        """Total program time, s (dwells included)."""
        return self.timing.duration

    @property
    def rapid_scale(self) -> np.ndarray:
        """(B,) factor on each block's nominal speed."""
        return self.timing.rapid_scale


    @property
    def segment_count(self) -> int:
        return len(self.length)

    @property
    def s_start(self) -> np.ndarray:
        """(S,) path parameter at the start of each chord, m."""
        return np.concatenate(([0.0], np.cumsum(self.length)[:-1])) if len(self.length) else np.zeros(0)

    @property
    def t_end(self) -> np.ndarray:
        return self.t_start + self.t_acc + self.t_cruise + self.t_dec

    @property
    def lines(self) -> np.ndarray:
        """(B,) program line of every motion block."""
        return self.frames.lines

    def hold_intervals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The dwells (G4) on the time line: (t0 (H,), t1 (H,), line (H,)), s, in time order.

        The tool is at rest during each interval [t0, t1] (dwells bring it to rest); consecutive
        dwells at one place follow each other.
        """
        node = self.holds.node
        if len(node) == 0:
            z = np.zeros(0)
            return z, z, np.zeros(0, dtype=np.int64)
        sec = self.holds.seconds
        delay = self.nodes.delay
        arrive = np.append(self.t_start - delay[:-1], self.duration - delay[-1])
        before = np.cumsum(sec) - sec                                   # dwell time before each hold
        first = np.searchsorted(node, node, side="left")               # first hold at the same node
        t0 = arrive[node] + (before - before[first])
        return t0, t0 + sec, self.holds.line

    # ----- evaluation ---------------------------------------------------------------------
    def _s_of_t(self, seg: np.ndarray, tau: np.ndarray):
        a = self.acceleration
        v0, v1, vc = self.v_entry[seg], self.v_exit[seg], self.v_cruise[seg]
        ta, tc, td = self.t_acc[seg], self.t_cruise[seg], self.t_dec[seg]
        T = ta + tc + td
        tau = np.clip(tau, 0.0, T)
        L = self.length[seg]
        acc = tau < ta
        dec = tau > ta + tc
        da = (vc * vc - v0 * v0) / (2 * a)
        s = np.where(acc, v0 * tau + 0.5 * a * tau * tau, da + vc * (tau - ta))
        r = np.maximum(T - tau, 0.0)
        s = np.where(dec, L - (v1 * r + 0.5 * a * r * r), s)
        v = np.where(acc, v0 + a * tau, np.where(dec, v1 + a * r, vc))
        return np.clip(s, 0.0, L), v

    def _t_of_s(self, seg: np.ndarray, s: np.ndarray) -> np.ndarray:
        a = self.acceleration
        v0, v1, vc = self.v_entry[seg], self.v_exit[seg], self.v_cruise[seg]
        ta, tc, td = self.t_acc[seg], self.t_cruise[seg], self.t_dec[seg]
        L = self.length[seg]
        da = (vc * vc - v0 * v0) / (2 * a)
        dd = (vc * vc - v1 * v1) / (2 * a)
        t_acc = (np.sqrt(np.maximum(v0 * v0 + 2 * a * s, 0.0)) - v0) / a
        with np.errstate(divide="ignore", invalid="ignore"):
            t_cru = ta + (s - da) / vc
        r = np.maximum(L - s, 0.0)
        t_dec = ta + tc + td - (np.sqrt(np.maximum(v1 * v1 + 2 * a * r, 0.0)) - v1) / a
        return np.where(s <= da, t_acc, np.where(s >= L - dd, t_dec, t_cru))

    def _points(self, seg: np.ndarray, s: np.ndarray):
        L = self.length[seg]
        u = np.where(L > 0, s / np.where(L > 0, L, 1.0), 0.0)
        pos = self.p0[seg] + u[:, None] * (self.p1[seg] - self.p0[seg])
        b = self.block[seg]
        f = self.f0[seg] + u * (self.f1[seg] - self.f0[seg])
        rot = self.rotation_at(b, f)
        return pos, rot

    def rotation_at(self, block: np.ndarray, fraction: np.ndarray) -> np.ndarray:
        """(K, 3, 3) orientations at path fractions (K,) of motion blocks (K,)."""
        R0 = self.frames.rot0[block]
        ang = self.frames.angle[block] * fraction
        if not np.any(ang):
            return R0.copy()
        k = self.frames.axis[block]
        K = np.zeros((len(ang), 3, 3))
        K[:, 0, 1], K[:, 0, 2] = -k[:, 2], k[:, 1]
        K[:, 1, 0], K[:, 1, 2] = k[:, 2], -k[:, 0]
        K[:, 2, 0], K[:, 2, 1] = -k[:, 1], k[:, 0]
        s, c = np.sin(ang)[:, None, None], np.cos(ang)[:, None, None]
        Rr = np.eye(3) + s * K + (1 - c) * (K @ K)
        return R0 @ Rr

    def sample(self, times) -> PathSamples:
        """The path at ``times`` (K,) s (clipped to [0, duration]).

        Samples strictly inside a dwell (:meth:`hold_intervals`) carry the dwell's line.
        """
        t = np.clip(np.asarray(times, dtype=float), 0.0, self.duration)
        if self.segment_count == 0:
            raise ValueError("the plan has no motion")
        seg = np.clip(np.searchsorted(self.t_start, t, side="right") - 1, 0, self.segment_count - 1)
        s_loc, v = self._s_of_t(seg, t - self.t_start[seg])
        pos, rot = self._points(seg, s_loc)
        b = self.block[seg]
        line = self.frames.lines[b]
        h0, h1, hline = self.hold_intervals()
        if len(h0) and len(t):   # inside a dwell: the dwell's line
            h = np.searchsorted(h0, t, side="right") - 1
            hc = np.maximum(h, 0)
            inside = (h >= 0) & (t > h0[hc]) & (t < h1[hc])
            if inside.any():
                line = np.where(inside, hline[hc], line)
        return PathSamples(t, self.s_start[seg] + s_loc, pos, rot, v, seg, b, line, self.flange_of_block)

    def _regular_count(self, period: float) -> int:
        if not (period > 0 and math.isfinite(period)):
            raise ValueError(f"period must be > 0 s, got {period}")
        return int(math.floor(self.duration / period + 1e-9)) + 1

    def sample_count(self, period: float) -> int:
        """Number of samples :meth:`sample_every` gives for ``period`` (s), without making them."""
        n = self._regular_count(period)
        return n + (1 if (n - 1) * period < self.duration - 1e-12 else 0)

    def sample_times(self, period: float, start: int, stop: int) -> np.ndarray:
        """Times (s) of the samples ``start … stop - 1`` of :meth:`sample_every`, made lazily.

        Sample k is at ``k · period``; when the duration is not a whole number of periods one
        last sample is at the end.
        """
        n = self._regular_count(period)
        total = self.sample_count(period)
        k = np.arange(max(0, start), min(stop, total))
        t = k * period
        if total > n and len(k) and k[-1] == n:
            t[-1] = self.duration
        return t

    def sample_every(self, period: float) -> PathSamples:
        """Samples at 0, period, 2·period, … up to and including the end, s."""
        if not (period > 0 and math.isfinite(period)):
            raise ValueError(f"period must be > 0 s, got {period}")
        return self.sample(self.sample_times(period, 0, self.sample_count(period)))

    def geometric_samples(self, spacing: float) -> PathSamples:
        """Points along the path at most ``spacing`` (m) apart, every block end included, with times.

        The points lie on the chords (the path that is commanded); inside a block they are
        evenly spaced in path length.
        """
        B = len(self.motions)
        s_start = self.s_start
        seg_first = np.searchsorted(self.block, np.arange(B))
        seg_last = np.searchsorted(self.block, np.arange(B), side="right") - 1
        has = seg_last >= seg_first
        bl = np.flatnonzero(has)
        if not len(bl):   # nothing moves (every block of zero length)
            z = np.zeros(0)
            zi = np.zeros(0, dtype=np.int64)
            return PathSamples(z, z, np.zeros((0, 3)), np.zeros((0, 3, 3)), z, zi, zi, zi)
        b_s0 = s_start[seg_first[bl]]
        b_len = s_start[seg_last[bl]] + self.length[seg_last[bl]] - b_s0
        m = np.maximum(1, np.ceil(b_len / spacing - 1e-9).astype(np.int64))
        total = int(m.sum())
        which = np.repeat(np.arange(len(bl)), m)
        first = np.concatenate(([0], np.cumsum(m)[:-1]))
        k = np.arange(total) - first[which] + 1
        s_glob = b_s0[which] + b_len[which] * (k / m[which])
        s_glob = np.concatenate(([0.0], s_glob))
        blk = np.concatenate(([bl[0]], bl[which]))
        del which, first, k
        seg = np.searchsorted(s_start, s_glob, side="right") - 1
        np.clip(seg, seg_first[blk], seg_last[blk], out=seg)
        del blk
        # the points, in chunks: the temporaries of the evaluation stay small however long the path
        K = len(seg)
        t, v = np.empty(K), np.empty(K)
        pos, rot = np.empty((K, 3)), np.empty((K, 3, 3))
        for a in range(0, K, EVAL_CHUNK):
            sg = seg[a:a + EVAL_CHUNK]
            s_loc = np.clip(s_glob[a:a + EVAL_CHUNK] - s_start[sg], 0.0, self.length[sg])
            s_glob[a:a + EVAL_CHUNK] = s_start[sg] + s_loc
            t0 = self.t_start[sg]
            tt = t0 + self._t_of_s(sg, s_loc)
            t[a:a + EVAL_CHUNK] = tt
            pos[a:a + EVAL_CHUNK], rot[a:a + EVAL_CHUNK] = self._points(sg, s_loc)
            v[a:a + EVAL_CHUNK] = self._s_of_t(sg, tt - t0)[1]
        b = self.block[seg]
        return PathSamples(t, s_glob, pos, rot, v, seg, b, self.frames.lines[b], self.flange_of_block)

    def times_at(self, segment: np.ndarray, s: np.ndarray) -> np.ndarray:
        """(K,) times (s) of the path points at path parameter ``s`` (K,) m on chords ``segment`` (K,)."""
        out = np.empty(len(segment))
        s_start = self.s_start
        for a in range(0, len(segment), EVAL_CHUNK):
            sg = segment[a:a + EVAL_CHUNK]
            out[a:a + EVAL_CHUNK] = self.t_start[sg] + self._t_of_s(sg, s[a:a + EVAL_CHUNK] - s_start[sg])
        return out


# ----- building a plan ---------------------------------------------------------------------

def _axis_angle(R: np.ndarray) -> tuple[np.ndarray, float]:
    c = np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0)
    ang = math.acos(c)
    if ang < 1e-12:
        return np.array([0.0, 0.0, 1.0]), 0.0
    if ang > math.pi - 1e-6:
        # near 180°: axis from the symmetric part
        M = (R + np.eye(3)) / 2.0
        i = int(np.argmax(np.diag(M)))
        axis = M[:, i] / math.sqrt(max(M[i, i], 1e-300))
        return axis / np.linalg.norm(axis), ang
    axis = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]]) / (2.0 * math.sin(ang))
    return axis, ang


class _Sequence(NamedTuple):
    """The blocks of a program sorted for planning (stage 1)."""

    motions: list[Motion]
    delay_before: list[float]            # dwell time before motion block b, s
    rest_before: list[bool]              # the tool is at rest before motion block b
    holds: list[tuple[int, float, int]]  # (motion block it precedes — B: after the last, s, line)
    delay_after: float                   # dwell time after the last motion, s


def _sequence(blocks: Iterable[Block]) -> _Sequence:
    """Stage 1: the motions in order, with the dwells and stops between them (an END stop ends the plan)."""
    motions: list[Motion] = []
    delay_before: list[float] = []
    rest_before: list[bool] = []
    holds: list[tuple[int, float, int]] = []
    pending_delay, pending_rest = 0.0, True
    for blk in blocks:
        if isinstance(blk, Motion):
            motions.append(blk)
            delay_before.append(pending_delay)
            rest_before.append(pending_rest)
            pending_delay, pending_rest = 0.0, False
        elif isinstance(blk, Dwell):
            pending_delay += blk.seconds
            pending_rest = True
            if blk.seconds > 0:
                holds.append((len(motions), float(blk.seconds), int(blk.line)))
        elif isinstance(blk, Stop):
            pending_rest = True
            if blk.kind is StopKind.END:
                break
    return _Sequence(motions, delay_before, rest_before, holds, pending_delay)


def _frames(motions: list[Motion]) -> BlockFrames:
    """Stage 2: the orientation of every block: start, axis and angle (one rotation per block)."""
    B = len(motions)
    axis = np.zeros((B, 3))
    angle = np.zeros(B)
    for i, m in enumerate(motions):
        if m.rot_end is not m.rot_start:
            axis[i], angle[i] = _axis_angle(m.rot_start.T @ m.rot_end)
    rot0 = np.array([m.rot_start for m in motions]) if B else np.zeros((0, 3, 3))
    return BlockFrames(rot0=rot0, axis=axis, angle=angle, lines=np.array([m.line for m in motions], dtype=np.int64))


def _chords(motions: list[Motion], frames: BlockFrames, machine: MachineConfig) -> tuple[Chords, np.ndarray]:
    """Stage 3: the chords (arcs split within ``arc_tolerance``), zero-length ones dropped.

    Returns:
        (the chords, (S,) the rotation part of each chord's length, m).
    """
    B = len(motions)
    start = np.array([m.start for m in motions])
    end = np.array([m.end for m in motions])
    is_arc = np.array([m.kind is MotionKind.ARC for m in motions])
    # --- chords per block ---
    nseg = np.ones(B, dtype=np.int64)
    arc_idx = np.flatnonzero(is_arc)
    if len(arc_idx):
        r_max = np.array([max(motions[i].radius_start, motions[i].radius_end) for i in arc_idx])
        sweep = np.array([motions[i].sweep for i in arc_idx])
        tol = machine.arc_tolerance
        dth = np.where(tol < r_max, 2.0 * np.arccos(np.clip(1.0 - tol / r_max, -1.0, 1.0)), math.pi / 2)
        dth = np.minimum(dth, math.pi / 2)
        nseg[arc_idx] = np.maximum(1, np.ceil(np.abs(sweep) / dth - 1e-9)).astype(np.int64)
    S = int(nseg.sum())
    if S > machine.max_path_samples:   # the interpreter stops well before (fault 105); blocks made elsewhere
        over = int(np.searchsorted(np.cumsum(nseg), machine.max_path_samples, side="right"))
        raise ValueError(f"line {motions[over].line}: the path needs more than {machine.max_path_samples:,} "
                         f"chords (MachineConfig.max_path_samples)")
    seg_block = np.repeat(np.arange(B), nseg)
    first = np.concatenate(([0], np.cumsum(nseg)[:-1]))
    f0 = np.arange(S, dtype=float)
    f0 -= first[seg_block]
    f1 = f0 + 1.0
    den = nseg[seg_block].astype(float)
    f0 /= den
    f1 /= den
    del den, first
    p0, p1 = np.empty((S, 3)), np.empty((S, 3))
    if len(arc_idx):   # per block: plane axes, centre, radii, sweep, start angle
        planes = np.array([m.plane if m.kind is MotionKind.ARC else (0, 1, 2) for m in motions])      # (B, 3)
        centre = np.array([m.centre if m.centre is not None else m.start for m in motions])
        r0_b = np.array([m.radius_start if m.kind is MotionKind.ARC else 0.0 for m in motions])
        r1_b = np.array([m.radius_end if m.kind is MotionKind.ARC else 0.0 for m in motions])
        sw_b = np.array([m.sweep if m.kind is MotionKind.ARC else 0.0 for m in motions])
        bb = np.arange(B)
        phi0_b = np.arctan2(start[bb, planes[:, 1]] - centre[bb, planes[:, 1]],
                            start[bb, planes[:, 0]] - centre[bb, planes[:, 0]])
    delta = end - start
    # the chord end points, in chunks (small temporaries however many chords)
    for ca in range(0, S, EVAL_CHUNK):
        sb = seg_block[ca:ca + EVAL_CHUNK]
        st, dl = start[sb], delta[sb]
        for fr, P in ((f0[ca:ca + EVAL_CHUNK], p0), (f1[ca:ca + EVAL_CHUNK], p1)):
            P[ca:ca + EVAL_CHUNK] = st + fr[:, None] * dl
        if not len(arc_idx):
            continue
        rows = np.flatnonzero(is_arc[sb])
        if not len(rows):
            continue
        ab = sb[rows]
        i0, i1, ino = planes[ab, 0], planes[ab, 1], planes[ab, 2]
        rr = np.arange(len(rows))
        c, st_r, dl_r = centre[ab], st[rows], dl[rows]
        r0, r1, sw, phi0 = r0_b[ab], r1_b[ab], sw_b[ab], phi0_b[ab]
        for fr, P in ((f0[ca:ca + EVAL_CHUNK][rows], p0), (f1[ca:ca + EVAL_CHUNK][rows], p1)):
            phi = phi0 + fr * sw
            rad = r0 + fr * (r1 - r0)
            pts = np.empty((len(rows), 3))
            pts[rr, i0] = c[rr, i0] + rad * np.cos(phi)
            pts[rr, i1] = c[rr, i1] + rad * np.sin(phi)
            pts[rr, ino] = st_r[rr, ino] + fr * dl_r[rr, ino]
            P[ca + rows] = pts
        # exact end points (no round-off drift at block ends)
        last = rows[f1[ca:ca + EVAL_CHUNK][rows] == 1.0]
        p1[ca + last] = end[sb[last]]
    lin = np.empty(S)
    for ca in range(0, S, EVAL_CHUNK):
        dp = p1[ca:ca + EVAL_CHUNK] - p0[ca:ca + EVAL_CHUNK]
        lin[ca:ca + EVAL_CHUNK] = np.sqrt(np.einsum("ij,ij->i", dp, dp))
    rot_len = machine.rotation_scale * frames.angle[seg_block]
    rot_len *= f1 - f0
    length = lin * lin
    length += rot_len * rot_len
    np.sqrt(length, out=length)
    del lin
    keep = length > 1e-12
    if not np.all(keep):
        seg_block, f0, f1, p0, p1 = seg_block[keep], f0[keep], f1[keep], p0[keep], p1[keep]
        length, rot_len = length[keep], rot_len[keep]
    return Chords(p0=p0, p1=p1, f0=f0, f1=f1, block=seg_block, length=length), rot_len


def _nominal_speeds(motions: list[Motion], chords: Chords, machine: MachineConfig) -> np.ndarray:
    """Stage 4: the cruise speed limit of every chord, m/s: F (G0: the rapid speed), on arcs also
    at most sqrt(a·r) (the centripetal acceleration stays within a)."""
    is_rapid = np.array([m.kind is MotionKind.RAPID for m in motions])
    feed = np.array([m.feed for m in motions])
    v_nom = np.where(is_rapid, machine.rapid_speed, feed)[chords.block].copy()
    if any(m.kind is MotionKind.ARC for m in motions):
        rmin = np.array([min(m.radius_start, m.radius_end) if m.kind is MotionKind.ARC else np.inf for m in motions])
        v_nom = np.minimum(v_nom, np.sqrt(machine.acceleration * rmin[chords.block]))
    return v_nom


def _nodes(seq: _Sequence, chords: Chords, frames: BlockFrames, rot_len: np.ndarray,
           machine: MachineConfig) -> tuple[Nodes, np.ndarray]:
    """Stage 5: the chord ends — junction speed limits (grbl's junction deviation, with the tool
    rotation as three more directions), rest at the program's ends and after dwells and stops,
    dwell times.

    Returns:
        (the nodes, (B + 1,) the node of each block's first chord; B: the end).
    """
    S, B = len(chords.length), len(seq.motions)
    p0, p1, length, seg_block = chords.p0, chords.p1, chords.length, chords.block
    a = machine.acceleration
    # 6-D unit directions: translation and rotation (world axis, scaled)
    world_axis = np.einsum("bij,bj->bi", frames.rot0, frames.axis)
    J = np.zeros(S + 1)
    for c0 in range(0, S - 1, EVAL_CHUNK):   # junctions c0 + 1 … c1 (between chords c - 1 and c), in chunks
        c1 = min(c0 + EVAL_CHUNK, S - 1)
        sl = slice(c0, c1 + 1)
        d6 = np.concatenate([p1[sl] - p0[sl], world_axis[seg_block[sl]] * rot_len[sl, None]], axis=1)
        d6 /= length[sl, None]
        J[c0 + 1:c1 + 1] = junction_speed_sq(d6[:-1], d6[1:], a, machine.junction_deviation)
    rest = np.zeros(S + 1, dtype=bool)
    delay = np.zeros(S + 1)
    # node of each block's first chord; a block left without chords (zero length) hands its
    # dwell and rest on to the next node
    block_first_seg = np.append(np.searchsorted(seg_block, np.arange(B)), S)     # (B + 1,)
    rb = np.array(seq.rest_before)
    rest[block_first_seg[:B][rb]] = True
    np.add.at(delay, block_first_seg[:B], np.array(seq.delay_before))
    rest[0] = rest[S] = True
    delay[S] += seq.delay_after
    J[rest] = 0.0
    return Nodes(rest=rest, delay=delay, junction=J), block_first_seg


def _holds(seq: _Sequence, block_first_seg: np.ndarray) -> Holds:
    """Stage 6: the dwells, at the node of the motion block they precede."""
    return Holds(node=block_first_seg[np.array([h[0] for h in seq.holds], dtype=np.int64)],
                 seconds=np.array([h[1] for h in seq.holds], dtype=float),
                 line=np.array([h[2] for h in seq.holds], dtype=np.int64))


def _no_motion(seq: _Sequence, machine: MachineConfig) -> Plan:
    """The plan of a program without a motion block: only its dwells take time."""
    z = np.zeros(0)
    zi = np.zeros(0, dtype=np.int64)
    return Plan(motions=(), chords=Chords(p0=np.zeros((0, 3)), p1=np.zeros((0, 3)), f0=z, f1=z, block=zi, length=z),
                frames=BlockFrames(rot0=np.zeros((0, 3, 3)), axis=np.zeros((0, 3)), angle=z, lines=zi),
                nodes=Nodes(rest=np.ones(1, bool), delay=np.array([seq.delay_after]), junction=np.zeros(1)),
                holds=Holds(node=zi, seconds=z, line=zi), base_nominal=z, acceleration=machine.acceleration,
                timing=Timing(v_nominal=z, v_entry=z, v_exit=z, v_cruise=z, t_start=z, t_acc=z, t_cruise=z, t_dec=z,
                              duration=seq.delay_after, rapid_scale=np.ones(0)))


def plan(blocks: Iterable[Block], machine: MachineConfig, *, rapid_scale: np.ndarray | None = None) -> Plan:
    """Plan a sequence of :class:`Motion`, :class:`Dwell` and :class:`Stop` blocks, in stages:
    sequence (motions, dwells, stops) → orientation frames → chords → nominal speeds → junctions
    and rests → dwells → timing (:func:`retime`).

    Args:
        blocks: the program's blocks (an END stop ends the plan).
        machine: speeds, acceleration, tolerances.
        rapid_scale: (B,) factor on each motion block's nominal speed (used by the preflight to
            slow rapids that a joint could not follow); default all 1.

    Returns:
        The :class:`Plan` (possibly without chords when nothing moves).
    """
    seq = _sequence(blocks)
    B = len(seq.motions)
    if B == 0:
        return _no_motion(seq, machine)
    frames = _frames(seq.motions)
    chords, rot_len = _chords(seq.motions, frames, machine)
    v_nom = _nominal_speeds(seq.motions, chords, machine)
    nodes, block_first_seg = _nodes(seq, chords, frames, rot_len, machine)
    del rot_len
    p = Plan(motions=tuple(seq.motions), chords=chords, frames=frames, nodes=nodes, holds=_holds(seq, block_first_seg),
             base_nominal=v_nom, acceleration=machine.acceleration,
             timing=Timing(v_nominal=v_nom, v_entry=v_nom, v_exit=v_nom, v_cruise=v_nom, t_start=v_nom, t_acc=v_nom,
                           t_cruise=v_nom, t_dec=v_nom, duration=0.0, rapid_scale=np.ones(B)))
    return retime(p, rapid_scale if rapid_scale is not None else np.ones(B))


def retime(p: Plan, rapid_scale: np.ndarray) -> Plan:
    """The plan with its speed profiles recomputed with each block's nominal speed scaled (stage 7).

    Args:
        p: a plan from :func:`plan`.
        rapid_scale: (B,) factors in (0, 1] on each block's nominal speed.
    """
    return replace(p, timing=_timing(p, np.asarray(rapid_scale, dtype=float)))


def _timing(p: Plan, scale: np.ndarray) -> Timing:
    """grbl's planner passes in closed form over the whole program: junction and nominal speed
    limits, the backward (deceleration) and forward (acceleration) passes as cumulative minima,
    then each chord's trapezoid."""
    a = p.acceleration
    v_nom = p.base_nominal * scale[p.block]
    S = len(v_nom)
    if S == 0:   # no chord (nothing moves, or only zero-length moves): only the dwells take time
        z = np.zeros(0)
        return Timing(v_nominal=v_nom, v_entry=z, v_exit=z, v_cruise=z, t_start=z, t_acc=z, t_cruise=z, t_dec=z,
                      duration=float(np.sum(p.nodes.delay)), rapid_scale=scale)
    # in place where possible: long programs have millions of chords (same arithmetic, fewer temporaries)
    vn2 = v_nom * v_nom
    J = p.nodes.junction.copy()
    if S > 1:
        J[1:S] = np.minimum(J[1:S], np.minimum(vn2[:-1], vn2[1:]))
    J[0] = min(J[0], vn2[0])
    J[S] = min(J[S], vn2[-1])
    twoaL = 2.0 * a * p.length
    C = np.empty(S + 1)
    C[0] = 0.0
    np.cumsum(twoaL, out=C[1:])
    # backward pass: Bk[i] = min_{j >= i} (J[j] + C[j]) - C[i]
    J += C
    Bk = np.minimum.accumulate(J[::-1])[::-1]
    del J
    Bk -= C
    # forward pass: F[i] = C[i] + min_{j <= i} (Bk[j] - C[j])
    F = Bk - C
    np.minimum.accumulate(F, out=F)
    F += C
    del C
    np.minimum(F, Bk, out=F)
    del Bk
    np.clip(F, 0.0, None, out=F)
    F[p.nodes.rest] = 0.0
    sqrt_f = np.sqrt(F)
    v0 = sqrt_f[:-1]
    v1 = sqrt_f[1:]
    vc2 = twoaL + F[:-1]
    del twoaL
    vc2 += F[1:]
    vc2 /= 2.0
    np.minimum(vn2, vc2, out=vc2)
    del vn2
    np.maximum(vc2, np.maximum(F[:-1], F[1:]), out=vc2)
    vc = np.sqrt(vc2)
    da = vc2 - F[:-1]
    da /= 2 * a
    dd = vc2 - F[1:]
    dd /= 2 * a
    del vc2, F
    dc = p.length - da
    dc -= dd
    del da, dd
    np.maximum(dc, 0.0, out=dc)
    t_acc = vc - v0
    t_acc /= a
    t_dec = vc - v1
    t_dec /= a
    t_cru = np.divide(dc, vc, out=dc)
    dur = t_acc + t_cru
    dur += t_dec
    delay = p.nodes.delay
    t_start = np.cumsum(delay[:-1])
    t_start[1:] += np.cumsum(dur)[:-1]
    total = float(t_start[-1] + dur[-1] + delay[-1])
    return Timing(v_nominal=v_nom, v_entry=v0, v_exit=v1, v_cruise=vc, t_start=t_start, t_acc=t_acc, t_cruise=t_cru,
                  t_dec=t_dec, duration=total, rapid_scale=scale)
