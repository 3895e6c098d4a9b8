"""A torque budget: what a timed joint path asks of each joint's drive, per joint and per program line.

:class:`TorqueBudgetBuilder` takes the control samples of a path in time order, a chunk at a
time (time, program line, joint positions and velocities), differentiates the velocities once
more (central differences; one-sided at the two ends of the path), evaluates the inverse dynamics
``τ = M(q) q̈ + C(q, q̇) q̇ + g(q)`` (:mod:`armtwin.controllers.dynamics`, with whatever the
flange carries) plus, optionally, the drives' Coulomb and viscous friction, and keeps per joint
the peak (with its time and line) and the RMS, and per program line and joint the largest torque
beyond the effort limit. Memory does not grow with the number of samples, only with the number
of offending lines (capped at :data:`MAX_EXCESSES`).

Pure numpy. Units: s, rad (m), N·m (N for prismatic joints).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .dynamics import RigidBodies, inverse_dynamics

__all__ = ["JointBudget", "Excess", "TorqueBudget", "TorqueBudgetBuilder", "MAX_EXCESSES"]

#: most (line, joint) excesses a budget lists; the rest are counted
MAX_EXCESSES = 500


@dataclass(frozen=True)
class JointBudget:
    """What the path asks of one joint.

    Attributes:
        peak: largest |τ| (N·m, N); ``peak_torque`` keeps its sign.
        peak_torque: the torque at the peak, signed.
        peak_time: when, s.
        peak_line: program line of that sample.
        rms: root mean square of τ over all samples.
        limit: the effort limit it is compared with.
    """

    peak: float
    peak_torque: float
    peak_time: float
    peak_line: int
    rms: float
    limit: float

    @property
    def ratio(self) -> float:
        """peak / limit."""
        return self.peak / self.limit


@dataclass(frozen=True)
class Excess:
    """The largest torque beyond the limit of one joint on one program line.

    Attributes:
        line: program line.
        joint: joint index, 0-based.
        torque: the torque, signed, N·m (N).
        time: when, s.
        limit: the joint's effort limit.
    """

    line: int
    joint: int
    torque: float
    time: float
    limit: float


@dataclass(frozen=True)
class TorqueBudget:
    """The result of :class:`TorqueBudgetBuilder`.

    Attributes:
        joints: per joint.
        excesses: per (line, joint) over the limit, in program order (at most :data:`MAX_EXCESSES`).
        excess_lines: number of distinct program lines with an excess (all of them, listed or not).
        samples: control samples evaluated.
        duration: time of the last sample, s.
    """

    joints: tuple[JointBudget, ...]
    excesses: tuple[Excess, ...]
    excess_lines: int
    samples: int
    duration: float

    @property
    def within_limits(self) -> bool:
        return self.excess_lines == 0

    @property
    def truncated(self) -> bool:
        """Whether :attr:`excesses` lists fewer (line, joint) pairs than there are."""
        return self._listed_lines < self.excess_lines

    @property
    def _listed_lines(self) -> int:
        return len({e.line for e in self.excesses})


class TorqueBudgetBuilder:
    """Accumulates a :class:`TorqueBudget` from control samples given in time order.

    Args:
        bodies: the arm with its flange load.
        limits: (n,) effort limits, N·m (N).
        friction: (n,) Coulomb friction added as ``friction · sign(q̇)``, or None.
        viscous: (n,) viscous damping added as ``viscous · q̇``, or None.
    """

    def __init__(self, bodies: RigidBodies, limits, *, friction=None, viscous=None) -> None:
        n = bodies.dof
        self.bodies = bodies
        self.limits = _vector(limits, n, "limits")
        if np.any(self.limits <= 0):
            raise ValueError(f"effort limits must be > 0, got {self.limits}")
        self.friction = None if friction is None else _vector(friction, n, "friction")
        self.viscous = None if viscous is None else _vector(viscous, n, "viscous")
        self._tail: tuple[np.ndarray, ...] | None = None   # (t, line, q, qd) of the samples kept
        self._first = 0                                      # the first of them not yet evaluated
        self._count = 0
        self._sumsq = np.zeros(n)
        self._peak = np.zeros(n)
        self._peak_tau = np.zeros(n)
        self._peak_t = np.zeros(n)
        self._peak_line = np.zeros(n, dtype=np.int64)
        self._excess: dict[tuple[int, int], Excess] = {}
        self._excess_lines: set[int] = set()
        self._t_last = -math.inf
        self._finished = False

    def add(self, t, line, q, qd) -> None:
        """Append samples: ``t`` (K,) s, increasing; ``line`` (K,) program lines; ``q``, ``qd`` (K, n)."""
        if self._finished:
            raise RuntimeError("the budget is finished")
        n = self.bodies.dof
        t = np.asarray(t, dtype=float).reshape(-1)
        line = np.asarray(line, dtype=np.int64).reshape(-1)
        q = np.asarray(q, dtype=float).reshape(len(t), n)
        qd = np.asarray(qd, dtype=float).reshape(len(t), n)
        if len(t) == 0:
            return
        if len(line) != len(t):
            raise ValueError(f"{len(t)} times but {len(line)} lines")
        if not np.all(np.diff(t) > 0) or t[0] <= self._t_last:
            raise ValueError("sample times must increase")
        self._t_last = float(t[-1])
        buf: tuple[np.ndarray, ...] = (t, line, q, qd)
        first = 0
        if self._tail is not None:
            buf, first = tuple(np.concatenate([a, b]) for a, b in zip(self._tail, buf)), self._first
        last = len(buf[0]) - 2                 # the newest sample waits for its right neighbour
        if last >= first:
            self._evaluate(buf, first, last)
            first = last + 1
        keep = max(first - 1, 0)               # one evaluated sample stays as the left neighbour
        self._tail = tuple(a[keep:] for a in buf)
        self._first = first - keep

    def finish(self) -> TorqueBudget:
        """Evaluate the last sample and return the budget."""
        if not self._finished:
            self._finished = True
            if self._tail is not None:
                self._evaluate(self._tail, self._first, len(self._tail[0]) - 1)
        n = self.bodies.dof
        rms = np.sqrt(self._sumsq / max(self._count, 1))
        joints = tuple(JointBudget(float(self._peak[j]), float(self._peak_tau[j]), float(self._peak_t[j]),
                                   int(self._peak_line[j]), float(rms[j]), float(self.limits[j])) for j in range(n))
        ex = sorted(self._excess.values(), key=lambda e: (e.line, e.joint))
        return TorqueBudget(joints, tuple(ex), len(self._excess_lines), self._count,
                            self._t_last if self._count else 0.0)

    # ----- internals -------------------------------------------------------------------------
    def _evaluate(self, buf: tuple[np.ndarray, ...], a: int, b: int) -> None:
        """Evaluate buffer samples a..b (inclusive), each with its neighbours in the buffer."""
        t, line, q, qd = buf
        idx = np.arange(a, b + 1)
        lo = np.maximum(idx - 1, 0)
        hi = np.minimum(idx + 1, len(t) - 1)
        h1 = (t[idx] - t[lo])[:, None]
        h2 = (t[hi] - t[idx])[:, None]
        inner = (h1 > 0) & (h2 > 0)
        # second-order differences on the (possibly uneven) grid inside, first-order at the ends (as np.gradient)
        den = np.where(inner, h1 * h2 * (h1 + h2), np.where(h1 + h2 > 0, h1 + h2, 1.0))
        qdd = np.where(inner, h1 * h1 * qd[hi] - h2 * h2 * qd[lo] + (h2 * h2 - h1 * h1) * qd[idx],
                       qd[hi] - qd[lo]) / den
        tau = inverse_dynamics(self.bodies, q[idx], qd[idx], qdd)
        if self.friction is not None:
            tau = tau + self.friction * np.sign(qd[idx])
        if self.viscous is not None:
            tau = tau + self.viscous * qd[idx]
        self._accumulate(t[idx], line[idx], tau)

    def _accumulate(self, t: np.ndarray, line: np.ndarray, tau: np.ndarray) -> None:
        self._count += len(t)
        self._sumsq += np.einsum("kj,kj->j", tau, tau)
        mag = np.abs(tau)
        k = np.argmax(mag, axis=0)
        cols = np.arange(tau.shape[1])
        better = mag[k, cols] > self._peak
        self._peak = np.where(better, mag[k, cols], self._peak)
        self._peak_tau = np.where(better, tau[k, cols], self._peak_tau)
        self._peak_t = np.where(better, t[k], self._peak_t)
        self._peak_line = np.where(better, line[k], self._peak_line)
        over = mag > self.limits
        if not over.any():
            return
        rows, joints = np.nonzero(over)
        for r, j in zip(rows.tolist(), joints.tolist()):
            ln = int(line[r])
            self._excess_lines.add(ln)
            key = (ln, j)
            cur = self._excess.get(key)
            if cur is None and len(self._excess) >= MAX_EXCESSES:
                continue
            if cur is None or mag[r, j] > abs(cur.torque):
                self._excess[key] = Excess(ln, j, float(tau[r, j]), float(t[r]), float(self.limits[j]))


def _vector(v, n: int, what: str) -> np.ndarray:
    out = np.asarray(v, dtype=float).reshape(-1)
    if out.shape != (n,) or not np.all(np.isfinite(out)):
        raise ValueError(f"{what} needs {n} finite values, got {v}")
    return out
