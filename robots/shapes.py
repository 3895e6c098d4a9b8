"""Visual shells of a robot's links as data: swept profiles in the makers' colours.

The primitives the physics collides with (cylinders and spheres, :mod:`armtwin.robots.urdfgen`)
make a robot recognisable only to its programmer. What people recognise is the maker's shape: the
IRB120's flat upper arm and round wrist, the AUBO-i5's joint modules with their coloured caps, the
SCARA's white arm covers and chrome quill. Each such part is a :class:`Shell`: a profile swept
around a base outline — a circle (a body of revolution: joint modules, tubes, caps, a quill) or the
convex hull of several circles (a rounded plate: arm covers, housings) — written as meshes by
:mod:`armtwin.robots.meshgen`. The shells are drawn from the robots' published dimensions (no
maker's CAD is copied) and are pictures only: mass, inertia and collision keep the primitives.

Coordinates: metres, **in the robot's root (mount) frame at the zero pose** (all joints 0), which
is how a maker's dimension drawing shows the arm; :mod:`armtwin.robots.meshgen` moves each shell
into its link's frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["Paint", "Shell", "lathe", "cylinder", "slab", "sphere"]

Vec3 = tuple[float, float, float]


@dataclass(frozen=True)
class Paint:
    """A named colour of a maker's scheme.

    Attributes:
        name: a word used in file names (``abb_orange``); letters, digits and ``_``.
        rgba: 0..1.
    """

    name: str
    rgba: tuple[float, float, float, float]

    def __post_init__(self) -> None:
        if not self.name or not all(c.isalnum() or c == "_" for c in self.name):
            raise ValueError(f"Paint.name must be letters, digits and _, got {self.name!r}")
        v = tuple(float(x) for x in self.rgba)
        if len(v) != 4 or not all(0.0 <= x <= 1.0 for x in v):
            raise ValueError(f"Paint.rgba must be four numbers in 0..1, got {self.rgba}")
        object.__setattr__(self, "rgba", v)


def _vec3(v: ArrayLike) -> Vec3:
    x, y, z = (float(c) for c in np.asarray(v, dtype=float).reshape(3))
    return (x, y, z)


def _unit(v, what: str) -> np.ndarray:
    a = np.asarray(v, dtype=float)
    n = float(np.linalg.norm(a))
    if a.shape != (3,) or not np.isfinite(n) or n < 1e-12:
        raise ValueError(f"{what} must be a non-zero 3-vector, got {v}")
    return a / n


@dataclass(frozen=True)
class Shell:
    """A closed surface: ``profile`` swept along ``axis`` around the outline of ``circles``.

    A point of the surface is ``origin + s·axis + c + (r + ρ)·u(θ)`` for each profile point (s, ρ)
    and outline direction u(θ) = cos θ·``ref`` + sin θ·(``axis`` × ``ref``), where (c, r) is the
    circle furthest out along u(θ) (so the outline is the circles' convex hull, grown by ρ). One
    circle of radius 0 makes a body of revolution whose profile's ρ is simply the radius. An
    open end of the profile is closed by a flat cap.

    Attributes:
        origin: (3,) m, zero-pose root frame.
        axis: (3,) unit sweep direction.
        ref: (3,) unit vector perpendicular to ``axis``: the outline's first coordinate.
        circles: ((a, b, r), ...) m: centres in (``ref``, ``axis`` × ``ref``) coordinates and radii.
        profile: ((s, ρ), ...) m, in sweep order; ρ ≥ −min(r).
        paint: its colour.
        segments: points around the outline.
    """

    origin: Vec3
    axis: Vec3
    ref: Vec3
    circles: tuple[tuple[float, float, float], ...]
    profile: tuple[tuple[float, float], ...]
    paint: Paint
    segments: int = 32

    def __post_init__(self) -> None:
        axis = _unit(self.axis, "Shell.axis")
        ref = np.asarray(self.ref, dtype=float)
        ref = _unit(ref - (ref @ axis) * axis, "Shell.ref (its part across the axis)")
        object.__setattr__(self, "axis", _vec3(axis))
        object.__setattr__(self, "ref", _vec3(ref))
        object.__setattr__(self, "origin", _vec3(self.origin))
        if len(self.profile) < 2 or not self.circles or self.segments < 8:
            raise ValueError("a Shell needs two profile points, a circle and at least 8 segments")
        rmin = min(c[2] for c in self.circles)
        if min(c[2] for c in self.circles) < 0 or any(p[1] < -rmin - 1e-12 for p in self.profile):
            raise ValueError(f"Shell profile goes inside its outline (ρ < −{rmin})")


def _perpendicular(axis: np.ndarray) -> np.ndarray:
    helper = np.array([0.0, 0.0, 1.0]) if abs(axis[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    return np.cross(axis, np.cross(helper, axis))


def _segments(radius: float) -> int:
    """Points around an outline of ``radius`` m: about one per 12 mm of circumference, 12 to 24
    (smooth normals hide the facets; more points only make the files and the frames heavier)."""
    return int(np.clip(round(2 * np.pi * radius / 0.012), 12, 24))


def lathe(start: ArrayLike, end: ArrayLike, profile: Sequence[tuple[float, float]], paint: Paint,
          ref: ArrayLike | None = None) -> Shell:
    """A body of revolution about the line ``start`` → ``end``.

    Args:
        start, end: (3,) m; the profile's s runs from 0 at ``start`` along that direction (s is in
            metres, not a fraction, so a profile may run past ``end``).
        profile: ((s, radius), ...) m.
        paint: its colour.
        ref: where the outline starts (only matters for the seam), default any perpendicular.
    """
    a, b = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    axis = _unit(b - a, "lathe end - start")
    r = max(p[1] for p in profile)
    return Shell(_vec3(a), _vec3(axis), _vec3(_perpendicular(axis) if ref is None else ref), ((0.0, 0.0, 0.0),),
                 tuple((float(s), float(rho)) for s, rho in profile), paint, _segments(r))


def _steps(fillet: float) -> int:
    """Points on a quarter-circle rim of ``fillet`` m: a bevel below 6 mm (smooth normals round it)."""
    return 1 if fillet < 0.006 else 2


def rounded_profile(length: float, radius: float, fillet: float, *, start: float = 0.0, dome: float = 0.0,
                    end_radius: float | None = None, steps: int | None = None) -> list[tuple[float, float]]:
    """Profile (s, ρ) of a cylinder (or cone to ``end_radius``) from ``start`` with rounded rims.

    ``dome`` > 0 bulges the far end outwards by that much (a cap); the rims are quarter circles of
    ``fillet``.
    """
    r0, r1 = radius, radius if end_radius is None else end_radius
    f = min(fillet, 0.49 * length, 0.99 * min(r0, r1))
    steps = _steps(f) if steps is None else steps
    pts = [(start, r0 - f)]
    for k in range(1, steps + 1):
        t = 0.5 * np.pi * k / steps
        pts.append((start + f - f * np.cos(t), r0 - f + f * np.sin(t)))
    for k in range(steps + 1):
        t = 0.5 * np.pi * k / steps
        pts.append((start + length - f + f * np.sin(t), r1 - f + f * np.cos(t)))
    if dome > 0:
        inner = r1 - f
        for k in range(1, 3):
            t = 0.25 * np.pi * k
            pts.append((start + length + dome * np.sin(t), inner * np.cos(t)))
    return pts


def cylinder(start: ArrayLike, end: ArrayLike, radius: float, paint: Paint, *, fillet: float = 0.0,
             dome: float = 0.0, end_radius: float | None = None) -> Shell:
    """A cylinder (or cone to ``end_radius``) from ``start`` to ``end`` with rounded rims and an optional dome."""
    a, b = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    length = float(np.linalg.norm(b - a))
    if fillet <= 0:
        r1 = radius if end_radius is None else end_radius
        prof = [(0.0, radius), (length, r1)]
        if dome > 0:
            prof += [(length + dome * np.sin(t), r1 * np.cos(t)) for t in np.linspace(0, np.pi / 2, 3)[1:]]
        return lathe(a, b, prof, paint)
    return lathe(a, b, rounded_profile(length, radius, fillet, dome=dome, end_radius=end_radius), paint)


def sphere(center: ArrayLike, radius: float, paint: Paint) -> Shell:
    """A sphere (a lathe of a half circle)."""
    c = np.asarray(center, dtype=float)
    t = np.linspace(-np.pi / 2, np.pi / 2, 9)
    return lathe(c - (0, 0, radius), c + (0, 0, radius), [(radius + radius * np.sin(v), radius * np.cos(v)) for v in t],
                 paint)


def slab(origin: ArrayLike, ref: ArrayLike, up: ArrayLike,
         circles: Sequence[tuple[float, float, float]], thickness: float, paint: Paint, *, fillet: float = 0.0,
         steps: int | None = None) -> Shell:
    """A rounded plate: the convex hull of ``circles`` ((a, b, r): centre ``origin`` + a·``ref`` +
    b·``up``, radius r; m) extruded ``thickness`` m across that plane, centred on it, its rims rounded
    with ``fillet`` m.
    """
    ref_u, up_u = _unit(ref, "slab ref"), _unit(up, "slab up")
    n = _unit(np.cross(ref_u, up_u), "slab ref x up")
    f = min(fillet, 0.49 * thickness, 0.99 * min(c[2] for c in circles))
    h = 0.5 * thickness
    steps = _steps(f) if steps is None else steps
    if f <= 0:
        prof = [(-h, 0.0), (h, 0.0)]
    else:
        prof = [(-h, -f)]
        prof += [(-h + f - f * np.cos(t), -f + f * np.sin(t)) for t in np.linspace(0, np.pi / 2, steps + 1)[1:]]
        prof += [(h - f + f * np.sin(t), -f + f * np.cos(t)) for t in np.linspace(0, np.pi / 2, steps + 1)]
    return Shell(_vec3(origin), _vec3(n), _vec3(ref_u),
                 tuple((float(a), float(b), float(rr)) for a, b, rr in circles), tuple(prof), paint,
                 max(20, _segments(max(c[2] for c in circles))))
