"""Marks a tool leaves on a flat work surface: a pen's ink, a laser's burn.

A :class:`SurfaceMarker` watches the tool tip (the TCP) of a run. Where the tool is on (pen
down, laser firing) and the tip is within :attr:`MarkStyle.contact` of the surface, it leaves
a stroke; the strokes become thin ribbons lying on the surface in the simulated world
(:meth:`~armtwin.envs.sim.World.add_visual_mesh`), so every renderer draws them with the right
occlusion — the arm passes in front of the ink, not behind it. The marker also measures what
was made: stroke count, length (m) and area (m²) for the run report.

Geometry is made lazily: :meth:`SurfaceMarker.flush` turns the new stroke pieces into one mesh
body (call it before a video frame is rendered); every :data:`MERGE_EVERY` bodies are merged
into one, so a long program does not slow the renderer down with thousands of bodies.

No PyBullet here: the world's facade makes the bodies. Units: metres, world frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["MarkStyle", "SurfaceMarker", "MarkReport", "ribbon_mesh", "MERGE_EVERY"]

#: flushed bodies merged into one when this many have accumulated
MERGE_EVERY = 40


@dataclass(frozen=True)
class MarkStyle:
    """How marks look and when the tool touches.

    Attributes:
        width: stroke width, m (a 0.5 mm pen draws about 0.6 mm).
        color: RGBA 0..1.
        contact: the tip touches when it is at most this far from the surface (either side), m.
        lift: the ribbon lies this far above the surface (so the surface does not hide it), m.
        spacing: points of a stroke closer than this are merged, m.
    """

    width: float = 0.0012
    color: tuple[float, float, float, float] = (0.05, 0.08, 0.35, 1.0)
    contact: float = 0.0005
    lift: float = 0.0002
    spacing: float = 0.0002

    def __post_init__(self) -> None:
        for name in ("width", "contact", "lift", "spacing"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and 0 <= v <= 0.1):
                raise ValueError(f"MarkStyle.{name} must be a length from 0 to 0.1 m, got {v!r}")
        if self.width <= 0:
            raise ValueError("MarkStyle.width must be more than 0")


@dataclass(frozen=True)
class MarkReport:
    """What the tool left on the surface: ``strokes`` (pieces of contact), ``length`` (m) and
    ``area`` (m², length × width)."""

    strokes: int
    length: float
    area: float


def ribbon_mesh(points: np.ndarray, width: float, normal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A flat ribbon along a polyline: one quad (two triangles) per segment, facing ``normal``.

    Args:
        points: (k, 3) the polyline, m (k >= 2).
        width: m.
        normal: (3,) unit normal of the surface the ribbon lies on.

    Returns:
        (vertices (4(k-1), 3), triangles (2(k-1), 3)).
    """
    p = np.asarray(points, dtype=float)
    a, b = p[:-1], p[1:]
    d = b - a
    side = np.cross(normal, d)
    length = np.linalg.norm(side, axis=1, keepdims=True)
    side = side / np.maximum(length, 1e-12) * (0.5 * width)
    along = d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12) * (0.5 * width)  # overlap joints
    v = np.stack([a - side - along, b - side + along, b + side + along, a + side - along], axis=1).reshape(-1, 3)
    base = 4 * np.arange(len(a))[:, None]
    tri = np.concatenate([base + [0, 1, 2], base + [0, 2, 3]], axis=1).reshape(-1, 3)
    return v, tri


class SurfaceMarker:
    """Ink on a flat surface where an active tool touches it (see the module docstring).

    Args:
        world: the world the marks are drawn in (None: only measure).
        point: (3,) a point of the surface, m, world frame.
        normal: (3,) the surface's normal (pointing to the side the tool comes from).
        bounds: the surface's extent as (centre (3,), half sizes (2,) along two in-plane axes
            (u, v)) — a tip outside it marks nothing; None: unbounded.
        style: :class:`MarkStyle`.
    """

    def __init__(self, world, point, normal=(0.0, 0.0, 1.0), *, bounds=None, style: MarkStyle = MarkStyle()) -> None:
        self.world = world
        self.point = np.asarray(point, dtype=float).reshape(3)
        n = np.asarray(normal, dtype=float).reshape(3)
        if not (np.all(np.isfinite(self.point)) and np.linalg.norm(n) > 1e-9):
            raise ValueError("a marking surface needs a finite point and a non-zero normal")
        self.normal = n / np.linalg.norm(n)
        u = np.cross(self.normal, [1.0, 0.0, 0.0] if abs(self.normal[0]) < 0.9 else [0.0, 1.0, 0.0])
        self._u = u / np.linalg.norm(u)
        self._v = np.cross(self.normal, self._u)
        self.bounds = bounds
        self.style = style
        self._stroke: list[np.ndarray] = []    # points of the stroke being drawn (on the surface)
        self._pending: list[np.ndarray] = []   # finished or growing polylines not yet in the world
        self._bodies: list[int] = []
        self._merged: list[tuple[np.ndarray, np.ndarray]] = []   # meshes of the bodies, for merging
        self._strokes = 0
        self._length = 0.0
        self._from = 0                          # index in _stroke from which the next flush draws

    # ----- feeding --------------------------------------------------------------------------
    def _inside(self, q: np.ndarray) -> bool:
        if self.bounds is None:
            return True
        centre, half = self.bounds
        d = q - np.asarray(centre, dtype=float)
        return abs(d @ self._u) <= half[0] + 1e-12 and abs(d @ self._v) <= half[1] + 1e-12

    def update(self, tip, active: bool) -> bool:
        """Feed the tool tip's position (m, world frame) and whether the tool is on; returns
        whether it marked."""
        tip = np.asarray(tip, dtype=float).reshape(3)
        h = float((tip - self.point) @ self.normal)
        touching = bool(active) and np.all(np.isfinite(tip)) and abs(h) <= self.style.contact
        q = tip - h * self.normal + self.style.lift * self.normal if touching else None
        if q is None or not self._inside(q):
            self._end_stroke()
            return False
        if not self._stroke:
            self._strokes += 1
            self._stroke.append(q)
            return True
        step = float(np.linalg.norm(q - self._stroke[-1]))
        if step >= self.style.spacing:
            self._stroke.append(q)
            self._length += step
        return True

    def _end_stroke(self) -> None:
        if len(self._stroke) - self._from >= 2:
            self._pending.append(np.array(self._stroke[self._from:]))
        elif len(self._stroke) == 1 and self._from == 0:     # a dot: a tiny mark of one width
            p = self._stroke[0]
            self._pending.append(np.array([p - 0.25 * self.style.width * self._u, p + 0.25 * self.style.width * self._u]))
        self._stroke, self._from = [], 0

    # ----- geometry -------------------------------------------------------------------------
    def flush(self) -> int:
        """Put the marks made since the last flush into the world (one body); returns how many
        stroke pieces it drew."""
        pieces = list(self._pending)
        self._pending = []
        if len(self._stroke) - self._from >= 2:     # the stroke being drawn, up to now
            pieces.append(np.array(self._stroke[self._from:]))
            self._from = len(self._stroke) - 1
        if self.world is None or not pieces:
            return len(pieces)
        verts, tris, n0 = [], [], 0
        for poly in pieces:
            v, t = ribbon_mesh(poly, self.style.width, self.normal)
            verts.append(v)
            tris.append(t + n0)
            n0 += len(v)
        mesh = (np.concatenate(verts), np.concatenate(tris))
        self._bodies.append(self.world.add_visual_mesh(*mesh, color=self.style.color))
        self._merged.append(mesh)
        if len(self._bodies) >= MERGE_EVERY:
            self._merge()
        return len(pieces)

    def _merge(self) -> None:
        v = np.concatenate([m[0] for m in self._merged])
        offsets = np.cumsum([0] + [len(m[0]) for m in self._merged[:-1]])
        t = np.concatenate([m[1] + o for m, o in zip(self._merged, offsets)])
        for b in self._bodies:
            self.world.remove_body(b)
        self._bodies = [self.world.add_visual_mesh(v, t, color=self.style.color)]
        self._merged = [(v, t)]

    def close(self) -> MarkReport:
        """End the stroke being drawn, put everything into the world, and report."""
        self._end_stroke()
        self.flush()
        return self.report

    @property
    def report(self) -> MarkReport:
        """Strokes, length (m) and area (m²) marked so far."""
        return MarkReport(self._strokes, self._length, self._length * self.style.width)

    @property
    def bodies(self) -> tuple[int, ...]:
        """The world's bodies that hold the marks."""
        return tuple(self._bodies)
