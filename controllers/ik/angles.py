"""Angle helpers shared by the closed-form IK solvers (pure Python / numpy).

Three kinds, each as a scalar function (the single-pose solvers, plain floats) and, where the
batch solvers need it, an element-wise numpy twin that gives the same floats:

* Wrapping: :func:`wrap` / :func:`wrap_np` into (-pi, pi]; :func:`wrap_inplace` for angles
  known to lie in (-3 pi, 3 pi]; :func:`flip_half_turn` (a wrist flip's ``a -/+ pi``).
* Turns: :func:`turn_near`, the 2 pi equivalent of a joint nearest a reference that fits a
  range wider than a turn (IRB120 J6 ±400°, SCARA J4 ±360°).
* Angles a float pose determines badly: a stretched or folded two-link elbow
  (:func:`elbow_angle`, :func:`elbow_cos`) and a joint that is nearly free near a singularity
  (:func:`kept_angle`). Both keep the reference (``q_near``) value where the pose cannot tell,
  so a joint vector comes back from ``solve(spec, fk(q), q)`` as it went in.
"""
# mypy: disallow-untyped-defs, check-untyped-defs

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "ELBOW_SNAP",
    "KEEP_TOL",
    "TWO_PI",
    "elbow_angle",
    "elbow_angle_np",
    "elbow_cos",
    "elbow_cos_np",
    "flip_half_turn",
    "kept_angle",
    "kept_angle_np",
    "turn_near",
    "wrap",
    "wrap_inplace",
    "wrap_np",
]

TWO_PI = 2.0 * math.pi
_PI = math.pi

# Largest pose change (rad, and m per m of lever) accepted for keeping a near-free joint at
# its q_near value: 1000 times below the solvers' 1e-9 accuracy, ~1e4 float steps of a pose entry.
KEEP_TOL = 1e-12

# A two-link elbow is only known to ~sqrt(1e-16) = 1e-8 rad from a float pose when it is stretched
# or folded (cos beta = D near +-1, where d beta / d D is unbounded); so is the AUBO's shoulder
# angle asin(d2 / rho) near 1, which is snapped the same way. Within this much of +-1, D is
# taken as +-1 exactly: that moves the reached point by (1 - |D|) * a * b / (a + b) < 1e-15 m for
# these arms, and gives the stretched / folded solution with exact joints instead of rounding noise.
ELBOW_SNAP = 4e-15


# ----- wrapping ---------------------------------------------------------------------------

def wrap(a: float) -> float:
    """Angle wrapped into (-pi, pi], rad."""
    if -math.pi < a <= math.pi:
        return a
    a = math.fmod(a + math.pi, TWO_PI)
    if a <= 0.0:
        a += TWO_PI
    return a - math.pi


def wrap_np(a: np.ndarray) -> np.ndarray:
    """Angles wrapped into (-pi, pi] (vectorised, like :func:`wrap`): ``pi - (pi - a) % (2 pi)``.

    The floor modulo (~10 ns per element) runs only where ``pi - a`` is outside [0, 2 pi), where
    it is not the identity; the result is the same floats as the formula everywhere except where
    the modulo rounds up to 2 pi (``a`` a hair above an odd multiple of pi): the formula gives
    -pi there, outside the interval, and this gives pi.
    """
    x = math.pi - a
    np.remainder(x, TWO_PI, out=x, where=(x < 0.0) | (x >= TWO_PI))
    x = math.pi - x
    np.add(x, TWO_PI, out=x, where=x <= -math.pi)
    return x


def wrap_inplace(a: np.ndarray) -> np.ndarray:
    """Angles within (-3 pi, 3 pi] wrapped into (-pi, pi], IN PLACE; returns ``a``.

    The same floats as the scalar inline wraps of the solvers (``a - 2 pi`` / ``a + 2 pi`` only
    where needed, signed zeros kept); masked ufuncs instead of ``np.where``, which costs ~10 ns
    per element.
    """
    np.subtract(a, TWO_PI, out=a, where=a > math.pi)
    np.add(a, TWO_PI, out=a, where=a <= -math.pi)
    return a


def flip_half_turn(a: np.ndarray) -> np.ndarray:
    """``a - pi`` where ``a > 0``, else ``a + pi`` (the same floats; branch-free, unlike ``np.where``)."""
    return a - ((a > 0.0) * TWO_PI - math.pi)   # 2 pi - pi == pi and x - (-pi) == x + pi exactly


# ----- turns ------------------------------------------------------------------------------

def turn_near(v: float, ref: float, lo: float, hi: float) -> float:
    """2 pi equivalent of ``v`` nearest ``ref``, moved by a turn when that keeps it inside [lo, hi] (rad)."""
    d = ref - v
    if d > _PI or d < -_PI:
        v += TWO_PI * round(d / TWO_PI)
    if v > hi:
        if v - TWO_PI >= lo:
            v -= TWO_PI
    elif v < lo and v + TWO_PI <= hi:
        v += TWO_PI
    return v


# ----- angles a float pose determines badly ------------------------------------------------

def elbow_cos(D: float) -> float:
    """Cosine of a two-link elbow, clamped into [-1, 1] and snapped to +-1 within :data:`ELBOW_SNAP`."""
    if D >= 1.0 - ELBOW_SNAP:
        return 1.0
    if D <= ELBOW_SNAP - 1.0:
        return -1.0
    return D


def elbow_cos_np(D: np.ndarray) -> np.ndarray:
    """:func:`elbow_cos` element-wise."""
    return np.where(D >= 1.0 - ELBOW_SNAP, 1.0, np.where(D <= ELBOW_SNAP - 1.0, -1.0, D))


def elbow_angle(D: float, b_near: float) -> tuple[float, float]:
    """Elbow angle ``b`` in [0, pi] with ``cos b = D``, and its cosine.

    Where the pose cannot tell (``cos(b_near)`` equals ``D`` to :data:`ELBOW_SNAP`: a stretched or
    folded elbow is only known to ~1e-8 rad) the reference elbow ``b_near`` (from ``q_near``) is
    kept, so a joint vector comes back as it went in; else ``acos`` of :func:`elbow_cos`.

    Args:
        D: cosine of the elbow computed from the pose (may lie a little outside [-1, 1]).
        b_near: |elbow angle| of the reference joints, rad in [0, pi].
    """
    c = math.cos(b_near)
    if -ELBOW_SNAP <= c - D <= ELBOW_SNAP:
        return b_near, c
    D = elbow_cos(D)
    return math.acos(D), D


def elbow_angle_np(D: np.ndarray, b_near: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`elbow_angle` element-wise: (b, cos b)."""
    c = np.cos(b_near)
    keep = np.abs(c - D) <= ELBOW_SNAP
    D = elbow_cos_np(D)
    return np.where(keep, b_near, np.arccos(D)), np.where(keep, c, D)


def kept_angle(s: float, th: float, ref: float, period: float = TWO_PI) -> float | None:
    """The angle a nearly free joint keeps, or None.

    Near a singularity where the joint with angle ``th`` becomes free, replacing ``th`` by an
    angle ``ref + k * period`` (the partner joint absorbing the difference) changes the pose by
    at most ``s * |th - ref - k * period|`` (rad), ``s`` being the sine of the angle to the
    singular set. The nearest such angle is kept when that is at most :data:`KEEP_TOL`.
    ``period`` is pi where a wrist flip (theta4 + pi, -theta5) maps the joint onto itself.

    Args:
        s: distance to the singularity, |sin theta| (>= 0).
        th: the joint angle computed from the pose, rad.
        ref: its reference (``q_near``) angle, rad.
        period: 2 pi, or pi for a joint that flips with the wrist.

    Returns:
        ``ref`` itself (same float) or ``ref + k * period``, or None when the pose would change more.
    """
    k = round((th - ref) / period)
    if s * abs(th - ref - k * period) > KEEP_TOL:
        return None
    return ref if k == 0 else ref + k * period


def kept_angle_np(s: np.ndarray, th: np.ndarray, ref: np.ndarray,
                  period: float = TWO_PI) -> tuple[np.ndarray, np.ndarray]:
    """:func:`kept_angle` element-wise (broadcasting): (bool mask of kept, the kept angles)."""
    k = np.round((th - ref) / period)
    keep = s * np.abs(th - ref - k * period) <= KEEP_TOL
    return keep, np.where(k == 0, ref, ref + k * period)
