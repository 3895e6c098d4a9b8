"""Videos of any run: MP4 (H.264) and GIF, with a tool-path trail and a text overlay.

The recorder watches a :class:`~armtwin.envs.sim.World` and one of its robots. Whatever
drives the robot (the G-code runner, ``armtwin show``, ``armtwin compare``, an RL
evaluation, a twin-sync replay) calls :meth:`VideoRecorder.maybe_capture` once per
control step; the recorder decides from the world's simulated time whether a video
frame is due, so the video frame rate is independent of the physics rate and one
second of video is one second of simulated time.

Usage::

    from armtwin.envs.video import VideoRecorder

    with VideoRecorder(world, robot, "out.mp4", camera="iso", fps=30, size=(640, 480),
                       overlay=True, gif=False, expected_duration=5.0) as rec:
        rec.add_planned_path(points)          # (N, 3) m, robot's reporting frame (optional)
        while running:
            robot.command(q)
            world.step()
            rec.maybe_capture({"line": "N20 G1 X300 Y0 Z400"})   # info: see below
    print(rec.result.paths)                   # after the block: the files written

``maybe_capture(info)`` keys (all optional): ``"line"`` the current G-code source line
(str), ``"label"`` a short title shown in the overlay's first row (e.g. the joint model);
any other key is shown as ``key: value``. ``capture(info)`` forces a frame now.

Frames: frame k shows the world at simulated time ``t0 + k / fps`` (``t0`` the world's
time when the recorder was made); when one control step spans several frame periods
the frame is repeated, so ``frames = floor(duration * fps) + 1``.

Drawing: the programmed path (``add_planned_path``) in cyan and the followed path of the tool
centre point (the flange without a tool) in magenta are projected with :meth:`Camera.project`
and rasterised as anti-aliased polylines (numpy, sub-pixel splats); they are drawn over the scene (no occlusion). The
overlay is drawn with Pillow: time, G-code line, joint values (deg; mm for prismatic
joints) and the tool centre point's pose (mm, URDF RPY deg) in the robot's reporting frame.

Drawing and encoding run in a helper process (:mod:`armtwin.envs.frames`: H.264 through
imageio-ffmpeg, yuv420p, so width and height are made even; GIF with Pillow, palette per
frame). The simulation thread only renders (PyBullet: EGL when the world loaded it, else
TinyRenderer) and copies the image into shared memory: PyBullet holds the GIL while it
renders, so drawing in a thread would stop the simulation while it draws. A progress bar
goes to stderr.

This module does not import PyBullet; it uses :meth:`World.render` and :class:`Camera`.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..controllers.transforms import matrix_to_rpy
from .frames import FOLLOWED_STYLE, PLANNED_STYLE, TRAVEL_STYLE, Compositor, EncoderError, EncoderProcess, FrameSettings
from .frames import TrailStyle, draw_polyline
from .sim import Camera, SimRobot, World, cameras_for

__all__ = ["FOLLOWED_STYLE", "PLANNED_STYLE", "TRAVEL_STYLE", "VIDEO_SUFFIXES", "TrailStyle", "VideoRecorder", "VideoResult",
           "camera_for_robot", "draw_polyline"]

#: how long a title card is shown before the first frame, s of video
TITLE_CARD_SECONDS = 1.5
#: file suffixes the recorder writes
VIDEO_SUFFIXES = (".mp4", ".gif")



@dataclass(frozen=True)
class VideoResult:
    """What a recorder wrote.

    Attributes:
        paths: files written (MP4 and/or GIF).
        frames: frames per file.
        fps: frames per second of video (= per simulated second).
        size: (width, height), pixels.
        duration: simulated time covered, s.
        renderer: "egl" or "tiny".
        wall_time: wall-clock time spent recording, s.
    """

    paths: tuple[Path, ...]
    frames: int
    fps: float
    size: tuple[int, int]
    duration: float
    renderer: str
    wall_time: float


def camera_for_robot(robot: SimRobot, camera: str | Camera) -> Camera:
    """A preset name from :func:`cameras_for` (for where ``robot`` stands) or a Camera as is."""
    if isinstance(camera, Camera):
        return camera
    presets = cameras_for(robot.spec, robot.base_position)
    if camera not in presets:
        raise ValueError(f"unknown camera {camera!r}; choose one of: {', '.join(presets)}")
    return presets[camera]


# ----- the recorder -----------------------------------------------------------------------

@dataclass
class _Progress:
    total: float | None
    enabled: bool
    label: str
    last: float = field(default=0.0)
    tty: bool = field(default=False)
    next_mark: float = field(default=0.25)
    printed: str = field(default="")

    def update(self, t: float, frames: int, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self.last < 0.2:
            return
        self.last = now
        if self.total and self.total > 0:
            f = min(max(t / self.total, 0.0), 1.0)
            bar = "#" * int(round(24 * f)) + "-" * (24 - int(round(24 * f)))
            msg = f"{self.label} [{bar}] {100 * f:3.0f}%  {t:6.2f}/{self.total:.2f} s  {frames} frames"
        else:
            f = None
            msg = f"{self.label} {t:6.2f} s  {frames} frames"
        if self.tty:
            print("\r" + msg, end="", file=sys.stderr, flush=True)
        elif (force and msg != self.printed) or (f is not None and f >= self.next_mark):
            self.printed = msg
            print(msg, file=sys.stderr, flush=True)
            if f is not None:
                while self.next_mark <= f:
                    self.next_mark += 0.25

    def done(self) -> None:
        if self.enabled and self.tty:
            print(file=sys.stderr, flush=True)



class VideoRecorder:
    """Record a robot in a world to MP4 and/or GIF. See the module docstring.

    Args:
        world: the world (its :meth:`World.render` draws the frames).
        robot: the robot whose joints, flange pose and path are shown.
        path: output file, ``.mp4`` (H.264) or ``.gif``.
        camera: a preset name of :func:`cameras_for` ("iso", "front", "side", "top") or a Camera.
        fps: video frames per simulated second.
        size: (width, height) pixels; rounded down to even numbers (yuv420p), at least 16.
        overlay: draw the text overlay.
        trail: draw the programmed and followed tool paths.
        gif: also write a GIF next to an MP4 (same name, ``.gif``).
        expected_duration: simulated seconds the run will take (for the progress bar), or None.
        progress: show progress on stderr.
        title: first overlay row (default: the robot's title and joint model).
        quality: H.264 quality 0..10 (imageio-ffmpeg's scale; 10 best).
        background: draw and encode in a helper process (:class:`~armtwin.envs.frames.EncoderProcess`)
            beside the simulation; False does it in this thread, frame by frame.
        inset: a second camera shown as a picture-in-picture in the top-left corner (a close-up of
            the work), with its own tool paths; None for none.
        inset_fraction: the inset's width and height as a fraction of the frame's.
        inset_label: its caption.
        tiles: instead of ``camera``: [(camera, label)] rendered side by side, each in its own
            strip of the frame with its label (one view per robot: ``armtwin compare``). Tiles
            draw no tool paths.
        title_card: lines of a title card shown for ``card_seconds`` before the first frame.

    Raises:
        ValueError: bad path suffix, size, fps or camera name.
        EncoderError: (an OSError) the encoder cannot start or a file cannot be opened (e.g. no ffmpeg).
    """

    def __init__(self, world: World, robot: SimRobot, path: str | Path, *, camera: str | Camera = "iso",
                 fps: float = 30.0, size: tuple[int, int] = (640, 480), overlay: bool = True, trail: bool = True,
                 gif: bool = False, expected_duration: float | None = None, progress: bool = True,
                 title: str | None = None, quality: float = 7.0, background: bool = True,
                 inset: Camera | None = None, inset_fraction: float = 0.42, inset_label: str = "close-up",
                 tiles: Sequence[tuple[Camera, str]] | None = None, title_card: Sequence[str] | None = None,
                 card_seconds: float = TITLE_CARD_SECONDS) -> None:
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in VIDEO_SUFFIXES:
            raise ValueError(f"video file {path} must end in {' or '.join(VIDEO_SUFFIXES)}")
        if not (np.isfinite(fps) and 0 < fps <= 240):
            raise ValueError(f"fps must be in (0, 240], got {fps}")
        w, h = (int(v) for v in size)
        w, h = w - w % 2, h - h % 2
        if w < 16 or h < 16 or w > 7680 or h > 4320:
            raise ValueError(f"video size must be between 16x16 and 7680x4320 pixels, got {size[0]}x{size[1]}")
        if path.parent and not path.parent.exists():
            raise ValueError(f"folder {path.parent} does not exist")
        _check_writable(path.with_suffix(".gif") if gif and suffix != ".gif" else path)
        _check_writable(path)
        if not (0.1 <= inset_fraction <= 0.7):
            raise ValueError(f"inset_fraction must be in [0.1, 0.7], got {inset_fraction}")
        if not (np.isfinite(card_seconds) and 0 <= card_seconds <= 10):
            raise ValueError(f"card_seconds must be in [0, 10], got {card_seconds}")
        self.world, self.robot = world, robot
        self.camera = camera_for_robot(robot, camera)
        self.fps = float(fps)
        self.size = (w, h)
        self.overlay = overlay
        self.tiles = tuple(tiles or ())
        self.trail = trail and not self.tiles
        # the views whose tool paths are drawn: (camera, (x, y, w, h)); the first is the whole frame
        self._views: list[tuple[Camera, tuple[int, int, int, int]]] = [(self.camera, (0, 0, w, h))]
        labels: list[tuple[int, int, str]] = []
        if inset is not None and not self.tiles:
            iw, ih = int(w * inset_fraction) // 2 * 2, int(h * inset_fraction) // 2 * 2
            self._views.append((inset, (6, 6, iw, ih)))
            labels.append((8, 8 + ih - 20 if ih > 60 else 8, inset_label))
        self._tile_rects: list[tuple[int, int]] = []
        if self.tiles:
            x = 0
            for k, (_, label) in enumerate(self.tiles):
                tw = (w - x) // (len(self.tiles) - k)
                self._tile_rects.append((x, tw))
                labels.append((x + 6, 6, label))
                x += tw
        self.quality = float(quality)
        self.paths: tuple[Path, ...] = (path,) if (suffix == ".gif" or not gif) else (path, path.with_suffix(".gif"))
        self.title = title or f"{robot.spec.title}  ·  {robot.mode.value} joints"
        self._t0 = world.time
        self._k = 0  # next frame index
        self._frames = 0
        self._closed = False
        self._started = time.monotonic()
        self._pending_trail: list[np.ndarray] = []
        self._pending_planned: list[list[np.ndarray]] = [[] for _ in self._views]
        self._pending_travel: list[list[np.ndarray]] = [[] for _ in self._views]
        self._pending_clear = False
        self._last_trail_pt: np.ndarray | None = None
        self._progress = _Progress(expected_duration, progress, f"recording {path.name}")
        self._progress.tty = bool(progress) and sys.stderr.isatty()
        self._error: BaseException | None = None
        self._last: np.ndarray | None = None
        card = tuple(title_card or ())
        settings = FrameSettings(tuple(str(p) for p in self.paths), self.fps, self.size, self.quality, overlay,
                                 self.trail, self.title, tuple(robot.spec.display_units()),
                                 views=tuple(r for _, r in self._views), labels=tuple(labels), card=card,
                                 card_frames=int(round(card_seconds * self.fps)) if card else 0)
        self._enc: EncoderProcess | None = None
        self._comp: Compositor | None = None
        try:
            if background:
                try:
                    self._enc = EncoderProcess(settings)
                except OSError:  # no helper process here (e.g. a frozen app): draw in this thread
                    background = False
            if not background:
                self._comp = Compositor(settings)
        except EncoderError:
            raise      # an OSError naming what failed (no ffmpeg, a file that cannot be written)
        self.result: VideoResult | None = None

    # ----- public API -------------------------------------------------------------------
    def add_planned_path(self, points: np.ndarray, *, frame: str = "report", travel: bool = False) -> None:
        """Add a programmed tool path to draw (may be called several times; each is one polyline).

        Args:
            points: (N, 3) positions, m.
            frame: "report" (the robot's reporting base frame, as IK and G-code use) or "world".
            travel: a travel (G0) move: drawn dimmed and dashed, so the work stands out.
        """
        pts = np.asarray(points, dtype=float).reshape(-1, 3)
        if frame == "report":
            pts = (self.robot.world_T_report @ np.c_[pts, np.ones(len(pts))].T).T[:, :3]
        elif frame != "world":
            raise ValueError(f"frame must be 'report' or 'world', got {frame!r}")
        if not self.trail or len(pts) == 0:
            return
        # drawn with the next frame, in order with the frames before it
        for k, (cam, (_, _, vw, vh)) in enumerate(self._views):
            (self._pending_travel if travel else self._pending_planned)[k].append(cam.project(pts, vw, vh))

    def clear_trails(self) -> None:
        """Wipe the programmed and followed paths from the next frame on (e.g. a new episode)."""
        self._pending_planned = [[] for _ in self._views]
        self._pending_travel = [[] for _ in self._views]
        self._pending_trail = []
        self._last_trail_pt = None
        self._pending_clear = True

    def break_trail(self) -> None:
        """Start a new piece of the followed path (e.g. after a reset/teleport)."""
        self._last_trail_pt = None
        self._pending_trail.append(np.full((1, 3), np.nan))

    @property
    def next_frame_time(self) -> float:
        """Simulated time (s) at which the next frame is due."""
        return self._t0 + self._k / self.fps

    @property
    def frames(self) -> int:
        """Frames handed to the encoder so far."""
        return self._frames

    @property
    def last_frame(self) -> np.ndarray | None:
        """(h, w, 3) uint8: the last frame as drawn, before compression (waits for it to be drawn)."""
        if self._enc is not None and not self._closed and self._error is None:
            return self._enc.last_frame()
        return self._last

    def maybe_capture(self, info: Mapping[str, Any] | None = None, *, trail: bool = True) -> int:
        """Call once per control step: captures when frames are due; returns how many were written.

        ``trail=False`` (a travel move, a pen up): the followed path is not drawn here.
        """
        self._check()
        pose = self._sample(trail)
        due = int(math.floor((self.world.time - self._t0) * self.fps + 1e-6)) + 1 - self._k
        if due <= 0:
            return 0
        self._emit(due, info, pose)
        return due

    def capture(self, info: Mapping[str, Any] | None = None) -> None:
        """Write one frame now, whatever the time."""
        self._check()
        self._emit(1, info, self._sample())

    def close(self) -> VideoResult:
        """Finish the files; returns (and stores in :attr:`result`) what was written. Idempotent."""
        if self._closed:
            return self.result  # type: ignore[return-value]
        try:
            if self._frames == 0 and self._error is None:
                self._emit(1, None, self.robot.tcp_pose())  # never leave an empty file
        except (RuntimeError, OSError):
            pass  # reported below
        finally:
            written: tuple[str, ...] = ()
            try:
                if self._enc is not None and self._error is None:
                    self._last = self._enc.last_frame() if self._frames else None
            except Exception as exc:  # noqa: BLE001 - reported below
                self._error = self._error or exc
            self._closed = True
            try:
                written = (self._enc or self._comp).close()
            except Exception as exc:  # noqa: BLE001 - reported below
                self._error = self._error or exc
            self._progress.update(self.world.time - self._t0, self._frames, force=True)
            self._progress.done()
        if self._error is not None:
            raise self._failure()
        # a file that never got a frame (interrupted at once) is removed: a video is playable or absent
        self.result = VideoResult(tuple(p for p in self.paths if str(p) in written), self._frames, self.fps, self.size,
                                  self.world.time - self._t0, self.world.renderer, time.monotonic() - self._started)
        return self.result

    def __enter__(self) -> VideoRecorder:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:  # the run failed: finish what we have without masking the error
            try:
                self.close()
            except Exception:  # noqa: BLE001
                pass

    # ----- internals ----------------------------------------------------------------------
    def _check(self) -> None:
        if self._closed:
            raise RuntimeError("the video recorder is closed")
        if self._error is not None:
            raise self._failure()

    def _failure(self) -> BaseException:
        """The error to raise for the encoder's failure: the OSError itself (one line for the
        command line), anything else as a RuntimeError naming it."""
        if isinstance(self._error, OSError):
            return self._error
        return RuntimeError(f"video encoding failed: {self._error}")

    def _sample(self, trail: bool = True) -> np.ndarray:
        """The tool centre point's pose now (report frame; the flange without a tool); adds its
        position to the followed path (or, with ``trail`` False, breaks it)."""
        T = self.robot.tcp_pose()
        if self.trail and not trail:
            if self._last_trail_pt is not None:
                self.break_trail()
        elif self.trail:
            W = self.robot.world_T_report
            x = W[:3, :3] @ T[:3, 3] + W[:3, 3]
            if self._last_trail_pt is None or np.linalg.norm(x - self._last_trail_pt) > 5e-4:
                self._pending_trail.append(x.reshape(1, 3))
                self._last_trail_pt = x
        return T

    def _render(self) -> np.ndarray:
        """The frame's picture: the main camera with the inset pasted in, or the tiles side by side."""
        w, h = self.size
        if self.tiles:
            img = np.empty((h, w, 4), np.uint8)
            for (cam, _), (x, tw) in zip(self.tiles, self._tile_rects):
                img[:, x:x + tw] = self.world.render(cam, tw, h, rgba=True)
            return img
        image = self.world.render(self.camera, w, h, rgba=True)
        for cam, (x, y, vw, vh) in self._views[1:]:
            if not image.flags.writeable:
                image = image.copy()
            image[y - 2:y + vh + 2, x - 2:x + vw + 2, :3] = 235            # a light frame around the inset
            image[y:y + vh, x:x + vw] = self.world.render(cam, vw, vh, rgba=True)
        return image

    def _emit(self, repeat: int, info: Mapping[str, Any] | None, pose: np.ndarray) -> None:
        image = self._render()
        views = []
        pts = np.concatenate(self._pending_trail) if self._pending_trail else np.empty((0, 3))
        fin = np.all(np.isfinite(pts), axis=1)
        for k, (cam, (_, _, vw, vh)) in enumerate(self._views):
            trail_px = np.full((len(pts), 2), np.nan)
            if np.any(fin):
                trail_px[fin] = cam.project(pts[fin], vw, vh)
            views.append((trail_px, self._pending_planned[k], self._pending_travel[k]))
        state = None
        if self.overlay:
            info = {k: (v if v is None else str(v)) for k, v in (info or {}).items()}
            state = (self.world.time - self._t0, self.robot.spec.to_display(self.robot.q), pose[:3, 3] * 1000.0,
                     np.degrees(matrix_to_rpy(pose[:3, :3])), info)
        frame = (image, repeat, state, views, self._pending_clear)
        self._pending_trail, self._pending_clear = [], False
        self._pending_planned = [[] for _ in self._views]
        self._pending_travel = [[] for _ in self._views]
        try:
            if self._enc is not None:
                self._enc.submit(*frame)
            else:
                self._comp.process(*frame)
                self._last = image[:, :, :3]
        except Exception as exc:  # noqa: BLE001 - the encoder's failure, named
            self._error = exc
            raise self._failure() from None
        self._k += repeat
        self._frames += repeat
        self._progress.update(self.world.time - self._t0, self._frames)


def _check_writable(path: Path) -> None:
    """ValueError naming ``path`` unless a file can be created there (before any simulation runs)."""
    existed = path.exists()
    try:
        with open(path, "ab"):
            pass
    except OSError as exc:
        raise ValueError(f"cannot write the video file {path}: {exc.strerror or exc}") from None
    if not existed:
        path.unlink(missing_ok=True)


