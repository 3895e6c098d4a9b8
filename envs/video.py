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

Drawing: the programmed path (``add_planned_path``) in cyan and the followed flange path
in magenta are projected with :meth:`Camera.project` and rasterised as anti-aliased
polylines (numpy, sub-pixel splats); they are drawn over the scene (no occlusion). The
overlay is drawn with Pillow: time, G-code line, joint values (deg; mm for prismatic
joints) and the flange pose (mm, URDF RPY deg) in the robot's reporting frame.

Encoding runs in a background thread (imageio with the imageio-ffmpeg plugin: H.264,
yuv420p, so width and height are made even; GIF with Pillow, palette per frame). The
simulation thread only renders (PyBullet: EGL when the world loaded it, else
TinyRenderer) and hands the image over. A progress bar goes to stderr.

This module does not import PyBullet; it uses :meth:`World.render` and :class:`Camera`.
"""

from __future__ import annotations

import math
import queue
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..controllers.transforms import matrix_to_rpy
from .sim import Camera, SimRobot, World, cameras_for

__all__ = ["VIDEO_SUFFIXES", "TrailStyle", "VideoRecorder", "VideoResult", "camera_for_robot", "draw_polyline"]

#: file suffixes the recorder writes
VIDEO_SUFFIXES = (".mp4", ".gif")


@dataclass(frozen=True)
class TrailStyle:
    """How a path is drawn.

    Attributes:
        color: RGB 0..255.
        width: line width, pixels.
        opacity: 0..1.
    """

    color: tuple[int, int, int]
    width: float = 2.0
    opacity: float = 1.0


PLANNED_STYLE = TrailStyle((40, 200, 255), 1.6, 0.9)
FOLLOWED_STYLE = TrailStyle((235, 30, 200), 2.4, 1.0)   # magenta: apart from every robot colour and the floor


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


# ----- anti-aliased polylines ---------------------------------------------------------------

def draw_polyline(alpha: np.ndarray, pts: np.ndarray, width: float = 2.0, *, closed: bool = False,
                  bbox: list[int] | None = None) -> None:
    """Rasterise a polyline into a coverage layer, in place.

    The line is sampled every half pixel; each sample covers the pixels around it with
    ``clip(width/2 + 0.5 - distance, 0, 1)``, and the layer keeps the maximum coverage,
    which gives smooth (anti-aliased) edges of the requested width.

    Args:
        alpha: (H, W) float32 coverage layer 0..1, updated in place.
        pts: (N, 2) pixel coordinates (x right, y down); rows with NaN break the line.
        width: line width, pixels.
        closed: join the last point to the first.
        bbox: if given, a list [x0, y0, x1, y1] enlarged in place to contain what was drawn.
    """
    pts = np.asarray(pts, dtype=np.float64).reshape(-1, 2)
    if closed and len(pts) > 2:
        pts = np.vstack([pts, pts[:1]])
    h, w = alpha.shape
    if len(pts) == 0:
        return
    if len(pts) == 1:
        a, b = pts, pts
    else:
        a, b = pts[:-1], pts[1:]
    ok = np.all(np.isfinite(a), axis=1) & np.all(np.isfinite(b), axis=1)
    # drop segments far outside the image (points near the eye plane project to huge values)
    lim = 4.0 * max(w, h)
    ok &= np.all(np.abs(a - [w / 2, h / 2]) < lim, axis=1) & np.all(np.abs(b - [w / 2, h / 2]) < lim, axis=1)
    a, b = a[ok], b[ok]
    if len(a) == 0:
        return
    seg = b - a
    n = np.maximum(np.ceil(np.hypot(seg[:, 0], seg[:, 1]) * 2.0).astype(int), 1) + 1  # samples per segment
    idx = np.repeat(np.arange(len(a)), n)
    start = np.cumsum(n) - n
    t = (np.arange(int(n.sum())) - np.repeat(start, n)) / np.repeat(np.maximum(n - 1, 1), n)
    s = a[idx] + seg[idx] * t[:, None]  # (M, 2) samples
    r = 0.5 * float(width)
    k = int(math.ceil(r + 0.5))
    inside = (s[:, 0] > -k) & (s[:, 0] < w + k) & (s[:, 1] > -k) & (s[:, 1] < h + k)
    s = s[inside]
    if len(s) == 0:
        return
    base = np.floor(s).astype(np.int64)
    offs = np.arange(-k + 1, k + 1)
    ox, oy = np.meshgrid(offs, offs)
    px = base[:, 0:1] + ox.reshape(1, -1)  # (M, K)
    py = base[:, 1:2] + oy.reshape(1, -1)
    d = np.hypot(px + 0.5 - s[:, 0:1], py + 0.5 - s[:, 1:2])
    cov = np.clip(r + 0.5 - d, 0.0, 1.0).astype(np.float32)
    m = (cov > 0) & (px >= 0) & (px < w) & (py >= 0) & (py < h)
    if not np.any(m):
        return
    flat = py[m] * w + px[m]
    np.maximum.at(alpha.reshape(-1), flat, cov[m])
    if bbox is not None:
        x0, x1 = int(px[m].min()), int(px[m].max()) + 1
        y0, y1 = int(py[m].min()), int(py[m].max()) + 1
        bbox[0], bbox[1] = min(bbox[0], x0), min(bbox[1], y0)
        bbox[2], bbox[3] = max(bbox[2], x1), max(bbox[3], y1)


class _Layer:
    """A coloured coverage layer composited over frames.

    Only its covered pixels are blended (a trail is a thin line: a few thousand pixels, where
    its bounding box can be most of the frame). Coverage only grows until the layer is
    replaced, so each draw adds the pixels it newly covered inside its own small box.
    """

    def __init__(self, w: int, h: int, style: TrailStyle) -> None:
        self.alpha = np.zeros((h, w), np.float32)
        self.style = style
        self.bbox = [w, h, 0, 0]
        self.color = np.asarray(style.color, np.float32)
        self._w = w
        self._covered = np.zeros((h, w), bool)
        self._idx = np.empty(0, np.int64)  # flat indices of covered pixels
        self._a = np.empty((0, 1), np.float32)  # their blend weights (coverage x opacity)

    def draw(self, px: np.ndarray) -> None:
        """Add the polyline ``px`` ((k, 2) pixels) to the layer."""
        box = [self._w, self.alpha.shape[0], 0, 0]
        draw_polyline(self.alpha, px, self.style.width, bbox=box)
        x0, y0, x1, y1 = box
        if x1 <= x0 or y1 <= y0:
            return
        b = self.bbox
        b[0], b[1], b[2], b[3] = min(b[0], x0), min(b[1], y0), max(b[2], x1), max(b[3], y1)
        yy, xx = np.nonzero((self.alpha[y0:y1, x0:x1] > 0) & ~self._covered[y0:y1, x0:x1])
        if len(yy):
            self._covered[yy + y0, xx + x0] = True
            self._idx = np.concatenate([self._idx, (yy + y0) * self._w + (xx + x0)])
        self._a = (self.alpha.reshape(-1)[self._idx] * np.float32(self.style.opacity))[:, None]

    def composite(self, img: np.ndarray) -> None:
        if not len(self._idx):
            return
        if not img.flags.c_contiguous:  # a reshape would copy: blend the box
            x0, y0, x1, y1 = self.bbox
            region = img[y0:y1, x0:x1, :3].astype(np.float32)
            region += (self.color - region) * (self.alpha[y0:y1, x0:x1, None] * np.float32(self.style.opacity))
            img[y0:y1, x0:x1, :3] = region.astype(np.uint8)
            return
        pix = img.reshape(-1, img.shape[2])
        sub = pix[self._idx, :3].astype(np.float32)
        sub += (self.color - sub) * self._a
        pix[self._idx, :3] = sub.astype(np.uint8)


# ----- overlay --------------------------------------------------------------------------

class _Overlay:
    """Text rows on a translucent strip at the bottom of the frame.

    Glyphs are rendered once with Pillow (its default FreeType font, or the bitmap font
    on old Pillow) into an atlas of coverage masks; each frame composes its rows from
    the atlas with numpy, which costs a fraction of drawing text anew.
    """

    def __init__(self, w: int, h: int) -> None:
        from PIL import Image, ImageDraw, ImageFont
        self.size = max(10, int(round(h / 34)))
        try:
            font = ImageFont.load_default(size=self.size)
        except (TypeError, OSError, ImportError):  # old Pillow or no FreeType: the bitmap font
            font = ImageFont.load_default()
        self.line_h = self.size + 4
        self.w, self.h = w, h
        self._glyphs: dict[str, np.ndarray] = {}
        self._font = font
        self._draw_cls = (Image, ImageDraw)
        self._rows_cache: dict[str, np.ndarray] = {}

    def _glyph(self, ch: str) -> np.ndarray:
        g = self._glyphs.get(ch)
        if g is None:
            Image, ImageDraw = self._draw_cls
            adv = max(1, int(round(self._font.getlength(ch))))
            if ch == " ":  # rounded per glyph, a small font's space (~3 px) vanishes between letters
                adv = max(adv, int(round(0.4 * self.size)))
            im = Image.new("L", (adv + 2, self.line_h), 0)
            ImageDraw.Draw(im).text((0, 1), ch, fill=255, font=self._font)
            g = np.asarray(im, dtype=np.float32)[:, :adv] / 255.0
            self._glyphs[ch] = g
        return g

    def _row_mask(self, text: str) -> np.ndarray:
        m = self._rows_cache.get(text)
        if m is None:
            parts = [self._glyph(c) for c in text] or [np.zeros((self.line_h, 1), np.float32)]
            m = np.concatenate(parts, axis=1)
            if len(self._rows_cache) > 64:
                self._rows_cache.clear()
            self._rows_cache[text] = m
        return m

    def _put(self, region: np.ndarray, text: str, x: int, y: int, color) -> int:
        m = self._row_mask(text)
        hh, ww = region.shape[:2]
        x0, y0 = max(x, 0), max(y, 0)
        x1, y1 = min(x + m.shape[1], ww), min(y + m.shape[0], hh)
        if x1 <= x0 or y1 <= y0:
            return m.shape[1]
        a = m[y0 - y:y1 - y, x0 - x:x1 - x, None]
        sub = region[y0:y1, x0:x1, :3].astype(np.float32)
        sub += (np.asarray(color, np.float32) - sub) * a
        region[y0:y1, x0:x1, :3] = sub.astype(np.uint8)
        return m.shape[1]

    def _strip_mask(self, rows: list[str], strip_h: int) -> np.ndarray:
        """(strip_h, w) uint8 coverage (0..255) of the white text rows on the strip."""
        mask = np.zeros((strip_h, self.w), np.uint16)
        for i, text in enumerate(rows):
            m = self._row_mask8(text)
            y, x = 4 + i * self.line_h, 8
            hh, ww = min(m.shape[0], strip_h - y), min(m.shape[1], self.w - x)
            if hh > 0 and ww > 0:
                mask[y:y + hh, x:x + ww] = m[:hh, :ww]
        return mask

    def _row_mask8(self, text: str) -> np.ndarray:
        key = "\0" + text  # the same cache, its own key space
        m = self._rows_cache.get(key)
        if m is None:
            m = np.rint(self._row_mask(text) * 255.0).astype(np.uint16)
            self._rows_cache[key] = m
        return m

    def draw(self, img: np.ndarray, rows: Sequence[str], legend: Sequence[tuple[str, tuple[int, int, int]]]) -> None:
        rows = list(rows)
        strip_h = min(self.h, self.line_h * len(rows) + 8)
        # darken the strip to 37.5 % (all channels of a contiguous block: the writers drop
        # alpha), then blend white text only where the glyphs cover
        strip = img[self.h - strip_h:]
        dim = strip if strip.flags.c_contiguous else strip[..., :3]
        dim >>= 1
        dim -= dim >> 2
        mask = self._strip_mask(rows, strip_h).reshape(-1)
        on = np.flatnonzero(mask)
        if len(on):
            pix = strip.reshape(-1, strip.shape[-1]) if strip.flags.c_contiguous else None
            if pix is None:
                yy, xx = np.divmod(on, self.w)
                d = strip[yy, xx, :3].astype(np.uint16)
                strip[yy, xx, :3] = d + ((255 - d) * mask[on, None] + 127) // 255
            else:
                d = pix[on, :3].astype(np.uint16)
                pix[on, :3] = d + ((255 - d) * mask[on, None] + 127) // 255
        if legend:  # top-right corner, on its own dark box
            widths = [self._row_mask(t).shape[1] for t, _ in legend]
            box_w = sum(widths) + 14 * (len(legend) - 1) + 12
            box = img[4:4 + self.line_h + 4, max(self.w - box_w - 4, 0):self.w - 4, :3]
            box >>= 1
            box -= box >> 2
            x = box.shape[1] - 6
            for (text, color), tw in zip(reversed(list(legend)), reversed(widths)):
                x -= tw
                self._put(box, text, x, 2, color)
                x -= 14


# ----- the recorder -----------------------------------------------------------------------

@dataclass
class _Job:
    image: np.ndarray
    repeat: int
    rows: list[str]
    trail: np.ndarray  # (k, 3) new followed points, world frame
    planned: list = field(default_factory=list)  # (k, 2) pixel polylines of programmed paths to add
    clear: bool = False  # wipe both trails before this frame


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
        threaded: draw and encode in a background thread.

    Raises:
        ValueError: bad path suffix, size, fps or camera name.
    """

    def __init__(self, world: World, robot: SimRobot, path: str | Path, *, camera: str | Camera = "iso",
                 fps: float = 30.0, size: tuple[int, int] = (640, 480), overlay: bool = True, trail: bool = True,
                 gif: bool = False, expected_duration: float | None = None, progress: bool = True,
                 title: str | None = None, quality: float = 7.0, threaded: bool = True) -> None:
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
        self.world, self.robot = world, robot
        self.camera = camera_for_robot(robot, camera)
        self.fps = float(fps)
        self.size = (w, h)
        self.overlay = overlay
        self.trail = trail
        self.quality = float(quality)
        self.paths: tuple[Path, ...] = (path,) if (suffix == ".gif" or not gif) else (path, path.with_suffix(".gif"))
        self.title = title or f"{robot.spec.title}  ·  {robot.mode.value} joints"
        self._t0 = world.time
        self._k = 0  # next frame index
        self._frames = 0
        self._closed = False
        self._started = time.monotonic()
        self._planned = _Layer(w, h, PLANNED_STYLE)
        self._followed = _Layer(w, h, FOLLOWED_STYLE)
        self._last_trail_px: np.ndarray | None = None
        self._pending_trail: list[np.ndarray] = []
        self._pending_planned: list[np.ndarray] = []
        self._pending_clear = False
        self._last_trail_pt: np.ndarray | None = None
        self._text = _Overlay(w, h) if overlay else None
        self._units = robot.spec.display_units()
        self._progress = _Progress(expected_duration, progress, f"recording {path.name}")
        self._progress.tty = bool(progress) and sys.stderr.isatty()
        self._error: BaseException | None = None
        self._writers = [self._open_writer(p) for p in self.paths]
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        if threaded:
            self._queue = queue.Queue(maxsize=6)
            self._thread = threading.Thread(target=self._worker, name="armtwin-video", daemon=True)
            self._thread.start()
        self.result: VideoResult | None = None
        #: (h, w, 3) uint8 view of the last frame handed to the encoder (as drawn, before compression)
        self.last_frame: np.ndarray | None = None

    # ----- public API -------------------------------------------------------------------
    def add_planned_path(self, points: np.ndarray, *, frame: str = "report") -> None:
        """Add a programmed tool path to draw (may be called several times; each is one polyline).

        Args:
            points: (N, 3) positions, m.
            frame: "report" (the robot's reporting base frame, as IK and G-code use) or "world".
        """
        pts = np.asarray(points, dtype=float).reshape(-1, 3)
        if frame == "report":
            pts = (self.robot.world_T_report @ np.c_[pts, np.ones(len(pts))].T).T[:, :3]
        elif frame != "world":
            raise ValueError(f"frame must be 'report' or 'world', got {frame!r}")
        if not self.trail or len(pts) == 0:
            return
        # drawn by the encoding side with the next frame, in order with the frames before it
        self._pending_planned.append(self.camera.project(pts, *self.size))

    def clear_trails(self) -> None:
        """Wipe the programmed and followed paths from the next frame on (e.g. a new episode)."""
        self._pending_planned = []
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

    def maybe_capture(self, info: Mapping[str, Any] | None = None) -> int:
        """Call once per control step: captures when frames are due; returns how many were written."""
        self._check()
        if self.trail:
            self._sample_trail()
        due = int(math.floor((self.world.time - self._t0) * self.fps + 1e-6)) + 1 - self._k
        if due <= 0:
            return 0
        self._emit(due, info)
        return due

    def capture(self, info: Mapping[str, Any] | None = None) -> None:
        """Write one frame now, whatever the time."""
        self._check()
        if self.trail:
            self._sample_trail()
        self._emit(1, info)

    def close(self) -> VideoResult:
        """Finish the files; returns (and stores in :attr:`result`) what was written. Idempotent."""
        if self._closed:
            return self.result  # type: ignore[return-value]
        self._closed = True
        try:
            if self._frames == 0 and self._error is None:
                self._emit(1, None)  # never leave an empty file
            if self._thread is not None:
                self._queue.put(None)
                self._thread.join()
        finally:
            for wr in self._writers:
                try:
                    wr.close()
                except Exception as exc:  # noqa: BLE001 - report the first failure below
                    self._error = self._error or exc
            self._progress.update(self.world.time - self._t0, self._frames, force=True)
            self._progress.done()
        if self._error is not None:
            raise RuntimeError(f"video encoding failed: {self._error}") from self._error
        self.result = VideoResult(self.paths, self._frames, self.fps, self.size, self.world.time - self._t0,
                                  self.world.renderer, time.monotonic() - self._started)
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
            raise RuntimeError(f"video encoding failed: {self._error}") from self._error

    def _sample_trail(self) -> None:
        p = self.robot.world_T_report @ self.robot.flange_pose()
        x = p[:3, 3]
        if self._last_trail_pt is None or np.linalg.norm(x - self._last_trail_pt) > 5e-4:
            self._pending_trail.append(x.reshape(1, 3).copy())
            self._last_trail_pt = x

    def _rows(self, info: Mapping[str, Any] | None) -> list[str]:
        if self._text is None:
            return []
        spec = self.robot.spec
        q = spec.to_display(self.robot.q)
        T = self.robot.flange_pose()
        rpy = np.degrees(matrix_to_rpy(T[:3, :3]))
        xyz = T[:3, 3] * 1000.0
        t = self.world.time - self._t0
        info = dict(info or {})
        label = info.pop("label", None)
        rows = [f"t = {t:7.3f} s   {self.title}" + (f"   {label}" if label else "")]
        line = info.pop("line", None)
        if line is not None:
            rows.append(f"G-code: {str(line).strip()[:90]}")
        joints = "  ".join(f"J{i + 1} {v:7.1f}{' mm' if u == 'mm' else '°'}" for i, (v, u) in enumerate(zip(q, self._units)))
        rows.append(joints)
        rows.append(f"tool  x {xyz[0]:7.1f}  y {xyz[1]:7.1f}  z {xyz[2]:7.1f} mm   "
                    f"rpy {rpy[0]:6.1f}  {rpy[1]:6.1f}  {rpy[2]:6.1f}°")
        for k, v in info.items():
            rows.append(f"{k}: {v}"[:100])
        return rows

    def _emit(self, repeat: int, info: Mapping[str, Any] | None) -> None:
        image = self.world.render(self.camera, *self.size, rgba=True)
        trail = np.concatenate(self._pending_trail) if self._pending_trail else np.empty((0, 3))
        self._pending_trail = []
        job = _Job(image, repeat, self._rows(info), trail, self._pending_planned, self._pending_clear)
        self._pending_planned, self._pending_clear = [], False
        self._k += repeat
        self._frames += repeat
        if self._queue is not None:
            while True:  # wait for room, but notice a dead worker
                try:
                    self._queue.put(job, timeout=0.5)
                    break
                except queue.Full:
                    if self._error is not None or not self._thread.is_alive():
                        self._check()
                        raise RuntimeError("the video encoding thread stopped")
        else:
            self._process(job)
        self._progress.update(self.world.time - self._t0, self._frames)

    def _worker(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            if self._error is not None:
                continue  # drain
            try:
                self._process(job)
            except BaseException as exc:  # noqa: BLE001 - handed to the simulation thread
                self._error = exc

    def _process(self, job: _Job) -> None:
        img = job.image
        if self.trail:
            if job.clear:
                self._planned = _Layer(*self.size, PLANNED_STYLE)
                self._followed = _Layer(*self.size, FOLLOWED_STYLE)
                self._last_trail_px = None
            for px in job.planned:
                self._planned.draw(px)
            if len(job.trail):
                pts = job.trail
                px = np.full((len(pts), 2), np.nan)
                fin = np.all(np.isfinite(pts), axis=1)
                if np.any(fin):
                    px[fin] = self.camera.project(pts[fin], *self.size)
                if self._last_trail_px is not None:
                    px = np.vstack([self._last_trail_px, px])
                self._followed.draw(px)
                self._last_trail_px = px[-1:]
            self._planned.composite(img)
            self._followed.composite(img)
        if self._text is not None:
            legend = [("programmed", PLANNED_STYLE.color), ("followed", FOLLOWED_STYLE.color)] if self.trail else []
            self._text.draw(img, job.rows, legend)
        for wr in self._writers:
            wr.append(img, job.repeat)
        self.last_frame = img[:, :, :3]

    def _open_writer(self, path: Path) -> _Writer:
        if path.suffix.lower() == ".gif":
            return _GifWriter(path, self.fps)
        return _Mp4Writer(path, self.fps, self.size, self.quality)


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


class _Writer:
    def append(self, img: np.ndarray, repeat: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class _Mp4Writer(_Writer):
    """H.264 in MP4 through imageio's FFMPEG plugin (imageio-ffmpeg's ffmpeg binary)."""

    def __init__(self, path: Path, fps: float, size: tuple[int, int], quality: float) -> None:
        import imageio.v2 as imageio
        try:
            self._w = imageio.get_writer(str(path), format="FFMPEG", mode="I", fps=fps, codec="libx264",
                                         pixelformat="yuv420p", quality=quality, macro_block_size=2,
                                         ffmpeg_log_level="error", ffmpeg_params=["-preset", "ultrafast", "-threads", "1"])
        except (ImportError, RuntimeError) as exc:
            raise RuntimeError(f"cannot write {path}: ffmpeg is not available ({exc}); install imageio-ffmpeg") from None

    def append(self, img: np.ndarray, repeat: int) -> None:
        for _ in range(repeat):
            self._w.append_data(img)

    def close(self) -> None:
        self._w.close()


class _GifWriter(_Writer):
    """Animated GIF with Pillow: each frame quantised to its own 256-colour palette."""

    def __init__(self, path: Path, fps: float) -> None:
        self.path = path
        self.frames: list = []
        self.durations: list[int] = []
        self.fps = fps
        self._clock = 0.0  # ms of video written, to keep GIF's 10 ms ticks from drifting

    def append(self, img: np.ndarray, repeat: int) -> None:
        from PIL import Image
        start = round(self._clock, -1)
        self._clock += 1000.0 * repeat / self.fps
        dur = int(round(self._clock, -1) - start)
        if dur <= 0 and self.durations:
            return  # shorter than GIF's 10 ms tick: dropped (the next frame starts on time)
        self.frames.append(Image.fromarray(np.ascontiguousarray(img[:, :, :3])).quantize(colors=256, method=Image.Quantize.FASTOCTREE))
        self.durations.append(max(dur, 10))

    def close(self) -> None:
        if not self.frames:
            return
        self.frames[0].save(str(self.path), save_all=True, append_images=self.frames[1:], duration=self.durations,
                            loop=0, optimize=False, disposal=1)
        self.frames = []
