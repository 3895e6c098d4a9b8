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


def cameras_for_work(spec: RobotSpec, work_points, base=(0.0, 0.0, 0.0), *, close_size: float = 0.08,
                     aspect: float = 4 / 3) -> tuple[Camera, Camera]:
    """The two cameras of a run's default video: the whole arm with its work, and a close-up of the work.

    The **scene** camera looks from the side of the line from the robot's base to the work (from
    −y for work straight ahead along +x), a little from the front and above, so the arm reaches
    from the left and the work lies beside it, text in the x–y plane reading the right way round;
    it is placed far enough to hold the arm's reach around its base and the work. The
    **close-up** looks down at 45° onto the work from the same side, framing its bounding box (at
    least ``close_size`` m across) — the wrist stands above the point it works on and hides the
    part of the work beyond it, not what was just made.

    Args:
        spec: the robot.
        work_points: (N, 3) the work (e.g. the program's feed moves), world frame, m.
        base: where the robot stands (world, m).
        aspect: width / height of the picture.

    Returns:
        (scene, close_up).

    Raises:
        ValueError: no finite work point.
    """
    pts = np.asarray(work_points, dtype=float).reshape(-1, 3)
    pts = pts[np.isfinite(pts).all(axis=1)]
    if len(pts) == 0:
        raise ValueError("cameras_for_work needs at least one finite point")
    base = np.asarray(base, dtype=float)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    centre = 0.5 * (lo + hi)
    away = centre[:2] - base[:2]
    ahead = float(np.degrees(np.arctan2(away[1], away[0]))) if np.hypot(*away) > 1e-6 else 0.0
    # the scene: the reach around the base (at the height of the arm) and the work
    r = float(spec.reach)
    frames = spec.report_frame.matrix @ fk_frames(chain_of(spec), spec.home)
    top = max(float(np.max(frames[:, 2, 3])), 0.4 * r)
    box = np.vstack([pts, base + [0.0, 0.0, top], base + [0.0, 0.0, 0.0],
                     base + [0.35 * r * np.cos(np.radians(ahead)), 0.35 * r * np.sin(np.radians(ahead)), 0.6 * top]])
    blo, bhi = box.min(axis=0), box.max(axis=0)
    target = 0.5 * (blo + bhi)
    fov = 40.0
    span = float(np.linalg.norm(bhi - blo))
    dist = 0.62 * span / np.tan(np.radians(fov / 2)) / min(1.0, aspect / (4 / 3))
    scene = Camera(tuple(target), dist, azimuth=ahead - 75.0, elevation=22.0, fov=fov)
    size = max(float(np.linalg.norm((hi - lo)[:2])), close_size)
    close_fov = 30.0
    close = Camera(tuple(centre), 0.75 * size / np.tan(np.radians(close_fov / 2)), azimuth=ahead - 90.0,
                   elevation=45.0, fov=close_fov, near=0.005)
    return scene, close
