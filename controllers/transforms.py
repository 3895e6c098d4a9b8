"""Rigid-body transform helpers (pure numpy).

Conventions used throughout armtwin:
    * Homogeneous transforms are (4, 4) float arrays (or (N, 4, 4) batches), metres.
    * Quaternions are (x, y, z, w), as PyBullet and ROS order them.
    * RPY angles (radians) follow URDF/ROS: fixed axes X, then Y, then Z, i.e.
      ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)``.
"""
# mypy: disallow-untyped-defs, check-untyped-defs

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "rot_x", "rot_y", "rot_z", "transform", "rpy_to_matrix", "matrix_to_rpy",
    "quat_to_matrix", "matrix_to_quat", "invert", "rotation_angle",
]


def rot_x(a: float) -> np.ndarray:
    """(3, 3) rotation about x by ``a`` radians."""
    c, s = np.cos(a), np.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def rot_y(a: float) -> np.ndarray:
    """(3, 3) rotation about y by ``a`` radians."""
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def rot_z(a: float) -> np.ndarray:
    """(3, 3) rotation about z by ``a`` radians."""
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def transform(rotation: ArrayLike | None = None, translation: ArrayLike = (0.0, 0.0, 0.0)) -> np.ndarray:
    """(4, 4) homogeneous transform from a (3, 3) rotation and a translation (metres)."""
    t = np.eye(4)
    if rotation is not None:
        t[:3, :3] = rotation
    t[:3, 3] = translation
    return t


def rpy_to_matrix(rpy: ArrayLike) -> np.ndarray:
    """Rotation matrix of URDF roll-pitch-yaw angles (radians); batch-aware: (..., 3) -> (..., 3, 3)."""
    a = np.asarray(rpy, dtype=float)
    r, p, y = a[..., 0], a[..., 1], a[..., 2]
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    m = np.empty(a.shape[:-1] + (3, 3))
    m[..., 0, 0] = cy * cp
    m[..., 0, 1] = cy * sp * sr - sy * cr
    m[..., 0, 2] = cy * sp * cr + sy * sr
    m[..., 1, 0] = sy * cp
    m[..., 1, 1] = sy * sp * sr + cy * cr
    m[..., 1, 2] = sy * sp * cr - cy * sr
    m[..., 2, 0] = -sp
    m[..., 2, 1] = cp * sr
    m[..., 2, 2] = cp * cr
    return m


def matrix_to_rpy(m: ArrayLike) -> np.ndarray:
    """URDF roll-pitch-yaw (radians) of a rotation matrix; batch-aware: (..., 3, 3) -> (..., 3).

    At pitch = ±90° (gimbal lock) roll is set to 0 and the whole rotation goes to yaw.
    """
    r = np.asarray(m, dtype=float)
    sp = np.clip(-r[..., 2, 0], -1.0, 1.0)
    pitch = np.arcsin(sp)
    cp = np.sqrt(r[..., 0, 0] ** 2 + r[..., 1, 0] ** 2)
    locked = cp < 1e-9
    roll = np.where(locked, 0.0, np.arctan2(r[..., 2, 1], r[..., 2, 2]))
    yaw = np.where(locked, np.arctan2(-r[..., 0, 1], r[..., 1, 1]), np.arctan2(r[..., 1, 0], r[..., 0, 0]))
    return np.stack([roll, pitch, yaw], axis=-1)


def quat_to_matrix(q: ArrayLike) -> np.ndarray:
    """Rotation matrix of a quaternion (x, y, z, w); normalised first; batch-aware."""
    qa = np.asarray(q, dtype=float)
    n = np.linalg.norm(qa, axis=-1, keepdims=True)
    if np.any(n < 1e-12):
        raise ValueError("quaternion has zero length")
    x, y, z, w = np.moveaxis(qa / n, -1, 0)
    m = np.empty(qa.shape[:-1] + (3, 3))
    m[..., 0, 0] = 1 - 2 * (y * y + z * z)
    m[..., 0, 1] = 2 * (x * y - z * w)
    m[..., 0, 2] = 2 * (x * z + y * w)
    m[..., 1, 0] = 2 * (x * y + z * w)
    m[..., 1, 1] = 1 - 2 * (x * x + z * z)
    m[..., 1, 2] = 2 * (y * z - x * w)
    m[..., 2, 0] = 2 * (x * z - y * w)
    m[..., 2, 1] = 2 * (y * z + x * w)
    m[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return m


def matrix_to_quat(m: ArrayLike) -> np.ndarray:
    """Quaternion (x, y, z, w) with w >= 0 of a rotation matrix; batch-aware: (..., 3, 3) -> (..., 4)."""
    r = np.asarray(m, dtype=float)
    if r.shape == (3, 3):
        return _matrix_to_quat_one(r)
    tr = r[..., 0, 0] + r[..., 1, 1] + r[..., 2, 2]
    # Four candidate forms; pick the numerically largest denominator per element.
    cands = np.stack([
        1 + tr,
        1 + r[..., 0, 0] - r[..., 1, 1] - r[..., 2, 2],
        1 - r[..., 0, 0] + r[..., 1, 1] - r[..., 2, 2],
        1 - r[..., 0, 0] - r[..., 1, 1] + r[..., 2, 2],
    ], axis=-1)
    k = np.argmax(cands, axis=-1)
    s = np.sqrt(np.maximum(np.take_along_axis(cands, k[..., None], -1)[..., 0], 1e-300)) * 2
    q = np.empty(r.shape[:-2] + (4,))
    w_ = np.stack([s / 4, (r[..., 2, 1] - r[..., 1, 2]) / s, (r[..., 0, 2] - r[..., 2, 0]) / s, (r[..., 1, 0] - r[..., 0, 1]) / s], -1)
    x_ = np.stack([(r[..., 2, 1] - r[..., 1, 2]) / s, s / 4, (r[..., 0, 1] + r[..., 1, 0]) / s, (r[..., 0, 2] + r[..., 2, 0]) / s], -1)
    y_ = np.stack([(r[..., 0, 2] - r[..., 2, 0]) / s, (r[..., 0, 1] + r[..., 1, 0]) / s, s / 4, (r[..., 1, 2] + r[..., 2, 1]) / s], -1)
    z_ = np.stack([(r[..., 1, 0] - r[..., 0, 1]) / s, (r[..., 0, 2] + r[..., 2, 0]) / s, (r[..., 1, 2] + r[..., 2, 1]) / s, s / 4], -1)
    wxyz = np.choose(k[..., None], [w_, x_, y_, z_])
    q[..., 0], q[..., 1], q[..., 2], q[..., 3] = wxyz[..., 1], wxyz[..., 2], wxyz[..., 3], wxyz[..., 0]
    q *= np.where(q[..., 3:4] < 0, -1.0, 1.0)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def _matrix_to_quat_one(r: np.ndarray) -> np.ndarray:
    """:func:`matrix_to_quat` of one (3, 3) matrix in scalar arithmetic, the same choices and results
    (a body pose set per query — the collision checks, a Gym step in a cell — is otherwise dominated
    by the batch form's array set-up: 190 µs against some µs)."""
    (a, b, c), (d, e, f), (g, h, i) = r.tolist()
    cands = (1 + a + e + i, 1 + a - e - i, 1 - a + e - i, 1 - a - e + i)
    k = max(range(4), key=cands.__getitem__)        # the first largest, as np.argmax
    s = math.sqrt(max(cands[k], 1e-300)) * 2
    if k == 0:
        w, x, y, z = s / 4, (h - f) / s, (c - g) / s, (d - b) / s
    elif k == 1:
        w, x, y, z = (h - f) / s, s / 4, (b + d) / s, (c + g) / s
    elif k == 2:
        w, x, y, z = (c - g) / s, (b + d) / s, s / 4, (f + h) / s
    else:
        w, x, y, z = (d - b) / s, (c + g) / s, (f + h) / s, s / 4
    sign = -1.0 if w < 0 else 1.0
    n = math.sqrt(x * x + y * y + z * z + w * w)
    return np.array([x, y, z, w]) * (sign / n)


def invert(t: ArrayLike) -> np.ndarray:
    """Inverse of a (…, 4, 4) rigid transform."""
    a = np.asarray(t, dtype=float)
    out = np.zeros_like(a)
    rt = np.swapaxes(a[..., :3, :3], -1, -2)
    out[..., :3, :3] = rt
    out[..., :3, 3] = -np.einsum("...ij,...j->...i", rt, a[..., :3, 3])
    out[..., 3, 3] = 1.0
    return out


def rotation_angle(r1: np.ndarray, r2: np.ndarray) -> np.ndarray:
    """Angle (radians) of the rotation taking r1 to r2; batch-aware (…, 3, 3) -> (…)."""
    r = np.einsum("...ji,...jk->...ik", r1, r2)
    c = (np.trace(r, axis1=-2, axis2=-1) - 1.0) / 2.0
    # arccos is ill-conditioned near 0; use the skew part for a precise small angle.
    skew = np.stack([r[..., 2, 1] - r[..., 1, 2], r[..., 0, 2] - r[..., 2, 0], r[..., 1, 0] - r[..., 0, 1]], -1)
    s = np.linalg.norm(skew, axis=-1) / 2.0
    return np.arctan2(s, np.clip(c, -1.0, 1.0))
