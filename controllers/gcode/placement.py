"""Placing a job: the work origins at which a whole program runs clean (``armtwin check --place``).

CAM programs put their zero at a corner of the stock; an arm user must put the job somewhere in
the arm's workspace. :func:`place_program` searches work origins (translations of the program in
the base frame; the tool keeps its programmed orientation) at which the **whole preflight is
clean** — IK along the path, joint ranges, joint speeds, program time — and returns the one with
the largest **joint margin**.

Joint margin (:func:`joint_margin`): along the checked path of the *job* (the moves that follow
the work origin; not the approach from the robot's home, which is the same wherever the job is),
the smallest distance of any joint to the nearer end of its range, as a fraction of that joint's
range (0: a joint touches a limit; 0.5: every joint stays at the middle of its range all the
time). A fraction makes a prismatic joint (the SCARA's Z) and the revolute joints comparable and
does not favour a joint with a wide range.

The search, bounded in time:

1. the program is interpreted at two origins; the moves whose start and end follow the origin are
   the *job* (the approach from the robot's home, and moves fixed to the robot by G53, G28 or a
   G92 at the start, do not move with the origin). A program none of whose moves follows the
   origin in z but whose moves follow it in x and y (a laser or plotter job that never writes Z:
   it runs at the robot's height) is a *flat* job: the origin's z is then not searched;
2. **coarse**: a grid of ``grid`` values per free axis over every origin that keeps the job's
   flange path within the arm's horizontal reach (``spec.reach`` from the base axis) and its tool path above
   the base plane (z ≥ 0, where the robot stands); a constraint (``--place z=…``) fixes an axis.
   Up to ``points`` representative points of the job (its extreme points and points evenly along
   it) are solved for every candidate in one batch IK: a candidate is *feasible* when every point
   has a solution inside the joint ranges on the arm configuration (shoulder/elbow) the robot
   starts in; its coarse margin is the smallest of the points' best margins;
3. **refine**: around the best feasible candidates, finer grids (half the step, ``refine`` times);
4. **verify**: the best candidates (origins rounded to whole millimetres) go through the full
   preflight (:func:`~.preflight.preflight`) until ``verify`` of them are clean or ``budget``
   seconds have passed; the best clean one wins (one without warnings before one with).

Pure numpy (no PyBullet). Units: m, rad inside.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..ik import branch_labels, branch_of, solve_batch
from .blocks import Motion
from .config import MachineConfig
from .errors import Fault, Severity
from .interpreter import load_program
from .planner import plan
from .preflight import CheckPass, PreflightReport, preflight

__all__ = ["PlaceConstraint", "Placement", "PlaceResult", "place_program", "joint_margin", "parse_constraint"]

#: test shift of the origin that tells the moves that follow it from those that do not, m
_PROBE = np.array([0.0131, -0.0173, 0.0157])
#: poses solved per IK batch of the coarse search
_IK_BATCH = 50_000


@dataclass(frozen=True)
class PlaceConstraint:
    """Fixed coordinates of the work origin, base frame, m (None: free)."""

    x: float | None = None
    y: float | None = None
    z: float | None = None

    def __post_init__(self) -> None:
        for k in "xyz":
            v = getattr(self, k)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v)):
                raise ValueError(f"{k}={v!r}: needs a finite number")

    @property
    def fixed(self) -> tuple[float | None, float | None, float | None]:
        return (self.x, self.y, self.z)


def parse_constraint(text: str) -> PlaceConstraint:
    """``"z=150,x=300"`` (mm, comma-separated, each axis at most once; "" for none) -> a constraint in m.

    Raises:
        ValueError: with a message naming the part at fault.
    """
    vals: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, eq, num = part.partition("=")
        key = key.strip().lower()
        if not eq or key not in ("x", "y", "z"):
            raise ValueError(f"{part!r}: expected x=MM, y=MM or z=MM (comma-separated)")
        if key in vals:
            raise ValueError(f"{key} is given twice")
        try:
            v = float(num)
        except ValueError:
            raise ValueError(f"{part!r}: {num.strip()!r} is not a number (mm)") from None
        if not math.isfinite(v) or abs(v) > 10_000.0:
            raise ValueError(f"{part!r}: needs a finite number within ±10000 mm")
        vals[key] = v / 1000.0
    return PlaceConstraint(**vals)


def joint_margin(spec, q: np.ndarray) -> tuple[float, int, float]:
    """The joint margin of a joint path (see the module docstring).

    Args:
        spec: the robot.
        q: (K, n) joints, rad / m (rows with NaN are ignored).

    Returns:
        (margin as a fraction of the joint's range, the limiting joint's index, its distance to
        the limit in rad / m); (-inf, -1, nan) for a path without a solved row.
    """
    q = np.asarray(q, dtype=float)
    q = q[~np.isnan(q).any(axis=1)]
    if not len(q):
        return -math.inf, -1, math.nan
    lo, hi = spec.lower, spec.upper
    dist = np.minimum(q - lo, hi - q).min(axis=0)          # (n,) rad / m
    frac = dist / (hi - lo)
    j = int(np.argmin(frac))
    return float(frac[j]), j, float(dist[j])


@dataclass(frozen=True)
class Placement:
    """A work origin at which the program checks clean.

    Attributes:
        origin: the work origin, base frame, m.
        margin: its joint margin along the whole checked path (fraction of a joint's range).
        joint: the joint (0-based) that sets the margin.
        joint_distance: that joint's smallest distance to its limit, rad / m.
        report: the full preflight at this origin (clean).
    """

    origin: tuple[float, float, float]
    margin: float
    joint: int
    joint_distance: float
    report: PreflightReport

    @property
    def warnings(self) -> int:
        return sum(f.severity is Severity.WARNING for f in self.report.faults)


@dataclass(frozen=True)
class PlaceResult:
    """What :func:`place_program` found.

    Attributes:
        best: the best placement, or None when the program fits nowhere.
        tried: candidate origins considered (coarse grid and refinements).
        feasible: of those, the ones at which every representative point solves within the ranges.
        verified: candidates checked with the full preflight.
        clean: of those, the clean ones.
        seconds: wall time of the search, s.
        reason: why nothing was found ("" when ``best`` is set).
        faults: the program's own errors (parser, interpreter), which no placement fixes; then
            nothing was searched.
    """

    best: Placement | None
    tried: int
    feasible: int
    verified: int
    clean: int
    seconds: float
    reason: str = ""
    faults: tuple[Fault, ...] = ()


def _arm_part(label: str) -> str:
    """The shoulder/elbow part of a branch label (the part the preflight keeps along a path)."""
    parts = label.split("/")
    return "/".join(parts[:2]) if len(parts) >= 3 else label


@dataclass(frozen=True, eq=False)
class _Job:
    """The moves that follow the work origin, relative to it.

    flange: (M, 4, 4) representative flange poses at origin 0, m; lo/hi: (3,) the box of all job
    flange positions; tcp_z_min: lowest TCP z of the job, m; lines: the program lines of its moves;
    flat: a job that follows the origin in x and y only (a laser or plotter program that never
    writes Z: its height is the robot's, the origin's z does nothing to it and is not searched)."""

    flange: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    tcp_z_min: float
    lines: np.ndarray
    flat: bool = False


def _job(text, spec, machine: MachineConfig, points: int) -> _Job | str | list[Fault]:
    """The job of a program (see :class:`_Job`); the program's errors, or why there is no job (str)."""
    o0 = machine.origin_array
    prog0 = load_program(text, spec, machine)
    errs = [f for f in prog0.faults if f.severity is Severity.ERROR]
    if errs:
        return errs
    pl0 = plan(prog0.blocks, machine)
    if pl0.segment_count == 0:
        return "the program does not move the robot"
    prog1 = load_program(text, spec, replace(machine, origin=tuple(o0 + _PROBE)))
    m0 = [b for b in prog0.blocks if isinstance(b, Motion)]
    m1 = [b for b in prog1.blocks if isinstance(b, Motion)]
    index = {id(m): k for k, m in enumerate(m0)}
    follows = np.zeros((len(pl0.motions), 3), dtype=bool)     # per block and axis
    if len(m0) == len(m1):
        for b, m in enumerate(pl0.motions):
            k = index.get(id(m))
            if k is not None:
                d0 = np.subtract(m1[k].start, m.start) - _PROBE
                d1 = np.subtract(m1[k].end, m.end) - _PROBE
                follows[b] = np.maximum(np.abs(d0), np.abs(d1)) < 1e-9
    gs = pl0.geometric_samples(machine.sample_spacing)
    flat = False
    idx = np.flatnonzero(follows[gs.block].all(axis=1))
    if not len(idx):      # a 2-D job (no Z word): it follows the origin in x and y only
        idx = np.flatnonzero(follows[gs.block][:, :2].all(axis=1))
        flat = bool(len(idx))
    if not len(idx):
        return ("no move of the program follows the work origin (a G92 at its start, G53 or G28 ties it "
                "to the robot's position)")
    tcp = np.zeros((len(idx), 4, 4))         # the poses of the job's samples only
    tcp[:, :3, :3] = gs.rotation[idx]
    tcp[:, :3, 3] = gs.position[idx]
    tcp[:, 3, 3] = 1.0
    fl = tcp @ gs.flange_of_block[gs.block[idx]] if gs.flange_of_block is not None else tcp
    fl[:, :3, 3] -= o0
    p = fl[:, :3, 3]
    extreme = np.concatenate([p.argmin(axis=0), p.argmax(axis=0)])
    even = np.linspace(0, len(p) - 1, max(1, points - len(extreme))).round().astype(int)
    rep = np.unique(np.concatenate([extreme, even]))
    return _Job(fl[rep], p.min(axis=0), p.max(axis=0), float(gs.position[idx, 2].min() - o0[2]),
                np.unique(gs.line[idx]), flat)


class _Coarse:
    """Batch-IK margins of candidate origins for one job."""

    def __init__(self, spec, job: _Job, q_start: np.ndarray) -> None:
        self.spec, self.job, self.q_start = spec, job, q_start
        labels = branch_labels(spec)
        start = _arm_part(branch_of(spec, q_start))
        self.cand = [k for k, lab in enumerate(labels) if _arm_part(lab) == start]
        self.cache: dict[tuple[float, float, float], float] = {}

    def margins(self, origins: np.ndarray) -> np.ndarray:
        """(C,) coarse margin of each origin (C, 3) m; -inf where infeasible."""
        out = np.full(len(origins), -np.inf)
        todo = []
        for c, o in enumerate(origins):
            key = tuple(np.round(o, 6))
            if key in self.cache:
                out[c] = self.cache[key]
            else:
                todo.append(c)
        F = self.job.flange
        M = len(F)
        reach = self.spec.reach
        lo, hi = self.spec.lower, self.spec.upper
        span = hi - lo
        per = max(1, _IK_BATCH // M)
        for a in range(0, len(todo), per):
            cs = todo[a:a + per]
            O = origins[cs]                                         # (c, 3)
            T = np.broadcast_to(F, (len(cs), M, 4, 4)).copy()
            T[..., :3, 3] += O[:, None, :]
            # spec.reach is the wrist's horizontal reach: farther from the base axis, no IK
            far = np.linalg.norm(T[..., :2, 3], axis=2).max(axis=1) > reach
            near = np.flatnonzero(~far)
            m = np.full(len(cs), -np.inf)
            if len(near):
                b = solve_batch(self.spec, T[near].reshape(-1, 4, 4), self.q_start)
                S = b.solutions[:, self.cand, :]                     # (cM, C, n)
                ok = b.within[:, self.cand]
                with np.errstate(invalid="ignore"):
                    frac = (np.minimum(S - lo, hi - S) / span).min(axis=2)
                frac = np.where(ok & ~np.isnan(frac), frac, -np.inf).max(axis=1).reshape(len(near), M)
                m[near] = frac.min(axis=1)
            for c, v in zip(cs, m):
                out[c] = v
                self.cache[tuple(np.round(origins[c], 6))] = float(v)
        return out


def _axes(job: _Job, reach: float, fixed, grid: int) -> list[np.ndarray] | None:
    axes = []
    for k in range(3):
        if fixed[k] is not None:
            axes.append(np.array([fixed[k]]))
            continue
        lo, hi = -reach - job.lo[k], reach - job.hi[k]
        if k == 2:
            lo = max(lo, -job.tcp_z_min)    # the tool path stays above the base plane
        if lo > hi:
            return None
        axes.append(np.linspace(lo, hi, grid))
    return axes


def place_program(text, spec, machine: MachineConfig, constraint: PlaceConstraint = PlaceConstraint(), *,
                  grid: int = 9, points: int = 48, refine: int = 3, verify: int = 4,
                  budget: float = 30.0, passes: Sequence[CheckPass] = ()) -> PlaceResult:
    """Search a work origin at which ``text`` checks clean for ``spec`` (see the module docstring).

    Args:
        text: the program (str, bytes or lines).
        spec: the robot (the program starts at its home pose).
        machine: the other settings (tools, speeds); its origin is only the starting guess.
        constraint: origin coordinates that are fixed.
        grid: coarse grid values per free axis.
        points: representative points of the job solved per candidate.
        refine: rounds of refinement around the best candidates (each halves the step).
        verify: stop after this many clean full preflights.
        budget: wall time after which no further full preflight is started, s (at least one runs
            when there is a feasible candidate).
        passes: extra preflight passes a candidate must also pass (a workcell's collision checks,
            ``--cell``); the coarse search does not know them, the full preflight does.

    Returns:
        A :class:`PlaceResult` (``best`` None and ``reason`` when nothing fits).
    """
    t0 = time.perf_counter()
    fixed = constraint.fixed
    job = _job(text, spec, machine, points)
    if isinstance(job, str):
        return PlaceResult(None, 0, 0, 0, 0, time.perf_counter() - t0, job)
    if isinstance(job, list):
        return PlaceResult(None, 0, 0, 0, 0, time.perf_counter() - t0, f"the program has {len(job)} error(s) that "
                           f"no placement fixes (first: {job[0]})", tuple(job))
    if job.flat:          # the job's height is the robot's: the origin's z is kept where it is
        fixed = (fixed[0], fixed[1], float(machine.origin_array[2]) if fixed[2] is None else fixed[2])
    axes = _axes(job, spec.reach, fixed, grid)
    if axes is None:
        return PlaceResult(None, 0, 0, 0, 0, time.perf_counter() - t0,
                           "the job is larger than the arm's reach")
    coarse = _Coarse(spec, job, np.asarray(spec.home, dtype=float))
    origins = np.array(list(itertools.product(*axes)))
    margins = coarse.margins(origins)
    step = np.array([(a[1] - a[0]) if len(a) > 1 else 0.0 for a in axes])
    for _ in range(refine):
        step = step / 2
        best = origins[np.argsort(-margins)[:3]][np.isfinite(np.sort(-margins)[:3])]
        if not len(best):
            break
        offs = np.array(list(itertools.product(*[(-s, 0.0, s) if s > 0 else (0.0,) for s in step])))
        new = (best[:, None, :] + offs[None]).reshape(-1, 3)
        origins = np.concatenate([origins, new])
        margins = np.concatenate([margins, coarse.margins(new)])
    tried = len(coarse.cache)
    feasible = sum(np.isfinite(v) for v in coarse.cache.values())
    if not feasible:
        return PlaceResult(None, tried, 0, 0, 0, time.perf_counter() - t0,
                           f"no work origin keeps every point of the program within the arm's reach and joint "
                           f"ranges ({tried} tried)")
    order = np.argsort(-margins)
    seen: set[tuple[float, float, float]] = set()
    found: list[Placement] = []
    verified = 0
    for c in order:
        if not np.isfinite(margins[c]) or len(found) >= verify:
            break
        if verified and time.perf_counter() - t0 > budget:
            break
        x, y, z = (float(v) / 1000.0 if f is None else f for v, f in zip(np.round(origins[c] * 1000.0), fixed))
        o = (x, y, z)
        if o in seen:
            continue
        seen.add(o)
        verified += 1
        rep = preflight(text, spec, replace(machine, origin=o), passes=passes)
        if rep.clean() and rep.q is not None and rep.samples is not None:
            on_job = np.isin(rep.samples.line, job.lines)
            found.append(Placement(o, *joint_margin(spec, rep.q[on_job]), rep))
    seconds = time.perf_counter() - t0
    if not found:
        return PlaceResult(None, tried, feasible, verified, 0, seconds,
                           f"none of the {verified} best of {feasible} feasible origins checks clean "
                           f"({tried} tried)")
    best_p = max(found, key=lambda p: (p.warnings == 0, p.margin))
    return PlaceResult(best_p, tried, feasible, verified, len(found), seconds)
