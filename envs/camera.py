"""Cameras of the simulated world: look-at cameras and the presets that frame a robot or a path.

Pure numpy (no PyBullet): :class:`Camera` gives the view and projection matrices that
:meth:`armtwin.envs.sim.World.render` hands to PyBullet and that the video recorder uses to
project tool paths onto frames. Angles in degrees, distances in metres, world frame.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..controllers.kinematics import chain_of, fk_frames
from ..robots import RobotSpec

__all__ = ["Camera", "cameras_for", "camera_for_path"]


@dataclass(frozen=True)
class Camera:
    """A look-at camera. Angles in degrees, distances in metres.

    Attributes:
        target: point looked at, world frame (m).
        distance: eye to target (m).
        azimuth: eye direction measured from world +x, counter-clockwise (deg).
        elevation: eye height angle above the horizontal plane (deg).
        fov: vertical field of view (deg).
    """

    target: tuple[float, float, float]
    distance: float
    azimuth: float = 45.0
    elevation: float = 25.0
    fov: float = 50.0
    near: float = 0.02
    far: float = 20.0

    @property
    def eye(self) -> np.ndarray:
        az, el = np.radians(self.azimuth), np.radians(self.elevation)
        d = np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
        return np.asarray(self.target, dtype=float) + self.distance * d

    def view_matrix(self) -> np.ndarray:
        """(4, 4) world-to-camera (OpenGL convention, camera looks along −z)."""
        return self._view.copy()

    @functools.cached_property
    def _view(self) -> np.ndarray:  # the camera is frozen: computed once (frames and trails ask per frame)
        eye, tgt = self.eye, np.asarray(self.target, dtype=float)
        f = tgt - eye
        f /= np.linalg.norm(f)
        up = np.array([0.0, 0.0, 1.0])
        s = np.cross(f, up)
        s /= np.linalg.norm(s)
        u = np.cross(s, f)
        m = np.eye(4)
        m[0, :3], m[1, :3], m[2, :3] = s, u, -f
        m[:3, 3] = -m[:3, :3] @ eye
        return m

    def projection_matrix(self, aspect: float) -> np.ndarray:
        """(4, 4) OpenGL perspective projection."""
        t = 1.0 / np.tan(np.radians(self.fov) / 2)
        n, f = self.near, self.far
        return np.array([[t / aspect, 0, 0, 0], [0, t, 0, 0],
                         [0, 0, (f + n) / (n - f), 2 * f * n / (n - f)], [0, 0, -1, 0]])

    def gl_matrices(self, width: int, height: int) -> tuple[list[float], list[float]]:
        """(view, projection) as PyBullet's flat column-major lists for an image of this size."""
        key = (int(width), int(height))
        cache = self.__dict__.setdefault("_gl_cache", {})  # frozen dataclass: cache beside the fields
        m = cache.get(key)
        if m is None:
            m = cache[key] = (self._view.T.reshape(-1).tolist(),
                              self.projection_matrix(width / height).T.reshape(-1).tolist())
        return m

    def project(self, points: np.ndarray, width: int, height: int) -> np.ndarray:
        """Pixel coordinates (N, 2) (x right, y down) of world points (N, 3); NaN behind the eye."""
        pts = np.atleast_2d(np.asarray(points, dtype=float))
        P = self.projection_matrix(width / height) @ self._view
        clip = pts @ P[:, :3].T + P[:, 3]
        w = clip[:, 3:4]
        ndc = np.where(w > 1e-9, clip[:, :2] / np.where(w > 1e-9, w, 1.0), np.nan)
        return np.c_[(ndc[:, 0] + 1) * 0.5 * width, (1 - ndc[:, 1]) * 0.5 * height]


def cameras_for(spec: RobotSpec, position=(0.0, 0.0, 0.0)) -> dict[str, Camera]:
    """Named camera presets that frame a robot standing at ``position`` (world, m).

    The frame is sized from the robot's data: its horizontal reach and the height of
    its links in the ``home`` pose (analytic FK), so that the arm fills a good part of a
    4:3 image while it sweeps its workspace.

    Returns:
        ``{"iso", "front", "side", "top"}`` -> :class:`Camera`. ``iso`` looks from the
        front-right and above, ``front`` along +y, ``side`` along −x, ``top`` straight down.
    """
    r = float(spec.reach)
    frames = spec.report_frame.matrix @ fk_frames(chain_of(spec), spec.home)
    height = max(float(np.max(frames[:, 2, 3])), 0.5 * r)  # m, top of the arm at home
    base = np.asarray(position, dtype=float)
    tgt = tuple(base + np.array([0.1 * r, 0.0, 0.5 * height]))
    radius = 0.5 * np.hypot(1.5 * r, 1.1 * height)  # m, half the diagonal of the box to show
    dist = 0.95 * radius / np.tan(np.radians(Camera.fov / 2))
    top_tgt = tuple(base + np.array([0.15 * r, 0.0, 0.0]))
    return {
        "iso": Camera(tgt, dist, azimuth=-55.0, elevation=24.0),
        "front": Camera(tgt, dist, azimuth=-90.0, elevation=10.0),
        "side": Camera(tgt, dist, azimuth=0.0, elevation=10.0),
        "top": Camera(top_tgt, 0.95 * r / np.tan(np.radians(Camera.fov / 2)), azimuth=-90.0, elevation=89.0),
    }


def camera_for_path(points, base=(0.0, 0.0, 0.0), *, min_size: float = 0.25, margin: float = 1.8) -> Camera:
    """A camera that frames a tool path (the "work" view of a run).

    It looks down at 50° onto the middle of the path from the side of the line from the robot's
    base to the work (from −y for work straight ahead along +x), so the arm reaches in from the
    left and does not stand in front of the work, and text written in the x–y plane reads the
    right way round. The path's bounding box (at least ``min_size`` m across, so that the wrist
    and forearm are in the picture too) fills about 1/``margin`` of the picture's height: a
    60 mm word is about 65 px wide in a 640×480 frame. The flange stands above the point it
    draws and may hide the path; the recorder draws the tool paths over the robot.

    Args:
        points: (N, 3) path points, world frame (m); non-finite rows are ignored.
        base: where the robot stands (world, m).

    Raises:
        ValueError: no finite point.
    """
    pts = np.asarray(points, dtype=float).reshape(-1, 3)
    pts = pts[np.isfinite(pts).all(axis=1)]
    if len(pts) == 0:
        raise ValueError("camera_for_path needs at least one finite point")
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    centre = 0.5 * (lo + hi)
    size = max(float(np.linalg.norm(hi - lo)), min_size)
    away = centre[:2] - np.asarray(base, dtype=float)[:2]
    ahead = np.degrees(np.arctan2(away[1], away[0])) if np.hypot(*away) > 1e-6 else 0.0
    dist = 0.5 * margin * size / np.tan(np.radians(Camera.fov / 2))
    return Camera(tuple(centre), dist, azimuth=float(ahead - 90.0), elevation=50.0)
