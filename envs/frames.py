"""Drawing and encoding of video frames, in the recorder's process or in a helper process.

:mod:`armtwin.envs.video` renders frames with PyBullet; this module draws the tool-path
trails and the text overlay on them and encodes them (MP4 through imageio-ffmpeg, GIF with
Pillow). It imports neither PyBullet nor the rest of armtwin, so that it can run as its own
small process:

* :class:`Compositor` does the work for one output (trails, overlay, writers).
* :class:`EncoderProcess` runs a Compositor in a helper process. PyBullet keeps the GIL
  while it renders, so drawing in a thread of the simulation process would stop the
  simulation for as long as it draws; in a helper process it runs beside it. Frames go
  through a ring of shared-memory slots (one copy each), everything else (the overlay's
  numbers, trail pixels) through a pipe; the helper acknowledges each slot when it is done
  with it, which is also how its errors come back. The helper runs at idle CPU priority
  (Linux ``SCHED_IDLE``; it and its ffmpeg child), so it uses the CPU the renderer leaves
  free instead of delaying the next frame; the simulation waits for it only when all slots
  are full.
"""

from __future__ import annotations

import dataclasses
import errno
import math
import mmap
import os
import pickle
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FOLLOWED_STYLE", "PLANNED_STYLE", "TRAVEL_STYLE", "Compositor", "EncoderProcess", "FrameSettings",
           "TrailStyle", "ViewData", "draw_polyline", "format_rows"]


@dataclass(frozen=True)
class TrailStyle:
    """How a path is drawn.

    Attributes:
        color: RGB 0..255.
        width: line width, pixels.
        opacity: 0..1.
        dash: (on, off) lengths in pixels for a dashed line, or None for a solid one.
    """

    color: tuple[int, int, int]
    width: float = 2.0
    opacity: float = 1.0
    dash: tuple[float, float] | None = None


PLANNED_STYLE = TrailStyle((40, 200, 255), 1.6, 0.9)
#: the programmed travel (G0) moves: dimmed and dashed, so the work stands out
TRAVEL_STYLE = TrailStyle((150, 150, 160), 1.2, 0.55, dash=(6.0, 5.0))
FOLLOWED_STYLE = TrailStyle((235, 30, 200), 2.4, 1.0)   # magenta: apart from every robot colour and the floor


def dashes(px: np.ndarray, on: float, off: float, phase: float = 0.0) -> list[np.ndarray]:
    """The "on" pieces of a dashed polyline ((k, 2) pixels; NaN rows break it), ``on``/``off`` pixels long."""
    px = np.asarray(px, dtype=np.float64).reshape(-1, 2)
    out: list[np.ndarray] = []
    period = on + off
    for piece in np.split(px, np.flatnonzero(~np.all(np.isfinite(px), axis=1))):
        piece = piece[np.all(np.isfinite(piece), axis=1)]
        if len(piece) < 2:
            continue
        seg = np.hypot(*np.diff(piece, axis=0).T)
        s = np.r_[0.0, np.cumsum(seg)]
        start = -phase
        while start < s[-1]:
            a, b = max(start, 0.0), min(start + on, s[-1])
            if b > a:
                inner = (s > a) & (s < b)
                pts = np.vstack([[np.interp(a, s, piece[:, 0]), np.interp(a, s, piece[:, 1])], piece[inner],
                                 [np.interp(b, s, piece[:, 0]), np.interp(b, s, piece[:, 1])]])
                out.append(pts)
            start += period
    return out


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

    A layer belongs to a view: its canvas is the view's rectangle ``rect`` (x, y, w, h) of a
    frame ``frame_w`` pixels wide, and pixels inside the ``exclude`` rectangles (views drawn on
    top of it, such as a picture-in-picture) are never covered.
    """

    def __init__(self, rect: tuple[int, int, int, int], frame_w: int, style: TrailStyle,
                 exclude: Sequence[tuple[int, int, int, int]] = ()) -> None:
        self.x0, self.y0, w, h = rect
        self.alpha = np.zeros((h, w), np.float32)
        self.style = style
        self.bbox = [w, h, 0, 0]
        self.color = np.asarray(style.color, np.float32)
        self._w = w
        self._frame_w = frame_w
        self._exclude = tuple(exclude)
        self._covered = np.zeros((h, w), bool)
        self._idx = np.empty(0, np.int64)  # flat indices of covered pixels, in the frame
        self._a = np.empty((0, 1), np.float32)  # their blend weights (coverage x opacity)
        self._yx = (np.empty(0, np.int64), np.empty(0, np.int64))   # the same pixels, in the canvas
        self._phase = 0.0

    def draw(self, px: np.ndarray) -> None:
        """Add the polyline ``px`` ((k, 2) pixels of the view) to the layer."""
        if self.style.dash is not None:
            on, off = self.style.dash
            for piece in dashes(px, on, off, self._phase):
                self._draw(piece)
            return
        self._draw(px)

    def _draw(self, px: np.ndarray) -> None:
        box = [self._w, self.alpha.shape[0], 0, 0]
        draw_polyline(self.alpha, px, self.style.width, bbox=box)
        x0, y0, x1, y1 = box
        if x1 <= x0 or y1 <= y0:
            return
        b = self.bbox
        b[0], b[1], b[2], b[3] = min(b[0], x0), min(b[1], y0), max(b[2], x1), max(b[3], y1)
        yy, xx = np.nonzero((self.alpha[y0:y1, x0:x1] > 0) & ~self._covered[y0:y1, x0:x1])
        yy, xx = yy + y0, xx + x0
        self._covered[yy, xx] = True
        fy, fx = yy + self.y0, xx + self.x0
        keep = np.ones(len(yy), bool)
        for ex, ey, ew, eh in self._exclude:
            keep &= ~((fx >= ex) & (fx < ex + ew) & (fy >= ey) & (fy < ey + eh))
        if np.any(keep):
            self._idx = np.concatenate([self._idx, fy[keep] * self._frame_w + fx[keep]])
            self._yx = (np.concatenate([self._yx[0], yy[keep]]), np.concatenate([self._yx[1], xx[keep]]))
        self._a = (self.alpha[self._yx] * np.float32(self.style.opacity))[:, None]

    def composite(self, img: np.ndarray) -> None:
        if not len(self._idx):
            return
        if not img.flags.c_contiguous:  # a reshape would copy: blend pixel by pixel
            yy, xx = self._yx[0] + self.y0, self._yx[1] + self.x0
            sub = img[yy, xx, :3].astype(np.float32)
            sub += (self.color - sub) * self._a
            img[yy, xx, :3] = sub.astype(np.uint8)
            return
        pix = img.reshape(-1, img.shape[2])
        sub = pix[self._idx, :3].astype(np.float32)
        sub += (self.color - sub) * self._a
        pix[self._idx, :3] = sub.astype(np.uint8)


class _View:
    """The trail layers of one view (the whole frame, a picture-in-picture, a tile)."""

    def __init__(self, rect: tuple[int, int, int, int], frame_w: int, exclude: Sequence[tuple[int, int, int, int]]):
        self.rect, self.frame_w, self.exclude = rect, frame_w, tuple(exclude)
        self.clear()

    def clear(self) -> None:
        self.planned = _Layer(self.rect, self.frame_w, PLANNED_STYLE, self.exclude)
        self.travel = _Layer(self.rect, self.frame_w, TRAVEL_STYLE, self.exclude)
        self.followed = _Layer(self.rect, self.frame_w, FOLLOWED_STYLE, self.exclude)
        self.last: np.ndarray | None = None

    def draw(self, data: "ViewData") -> None:
        trail_px, planned_px, travel_px = data
        for px in planned_px:
            self.planned.draw(px)
        for px in travel_px:
            self.travel.draw(px)
        if len(trail_px):
            px = trail_px if self.last is None else np.vstack([self.last, trail_px])
            self.followed.draw(px)
            self.last = px[-1:]

    def composite(self, img: np.ndarray) -> None:
        self.travel.composite(img)
        self.planned.composite(img)
        self.followed.composite(img)


#: per view: (followed-path pixels (k, 2), programmed paths [(k, 2)], programmed travel paths [(k, 2)])
ViewData = tuple


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
        self._rows_cache: dict[Any, Any] = {}  # row text -> mask, ("legend", items) -> pixels

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

    def _strip_mask(self, rows: list[str], strip_h: int) -> np.ndarray:
        """(strip_h, w) uint8 coverage (0..255) of the white text rows on the strip."""
        mask = np.zeros((strip_h, self.w), np.uint16)
        for i, text in enumerate(rows):
            y, x = 4 + i * self.line_h, 8
            m = self._row_mask8(self.fitted(text, self.w - x - 4))
            hh, ww = min(m.shape[0], strip_h - y), min(m.shape[1], self.w - x)
            if hh > 0 and ww > 0:
                mask[y:y + hh, x:x + ww] = m[:hh, :ww]
        return mask

    def fitted(self, text: str, width: int) -> str:
        """``text`` as drawn in ``width`` pixels: whole, or cut at a glyph and ended with "…" (a long
        program name or robot title is shortened, not clipped through a letter)."""
        ends = np.cumsum([self._glyph(c).shape[1] for c in text])
        if not len(ends) or ends[-1] <= width:
            return text
        k = int(np.searchsorted(ends, width - self._glyph("\u2026").shape[1], side="right"))
        return text[:k].rstrip() + "\u2026"

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
            x0, y0, x1, y1, yy, xx, cov, col = self._legend(tuple(legend))
            box = img[y0:y1, x0:x1, :3]
            box >>= 1
            box -= box >> 2
            d = box[yy, xx].astype(np.uint16)
            box[yy, xx] = d + ((col - d) * cov + 127) // 255

    def label(self, img: np.ndarray, x: int, y: int, text: str, color: tuple[int, int, int] = (255, 255, 255)) -> None:
        """``text`` in ``color`` on a dark box whose top-left corner is (x, y), clipped to the frame."""
        m = self._row_mask8(text)
        h, w = m.shape[0] + 4, m.shape[1] + 10
        x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + w, self.w), min(y + h, self.h)
        if x1 <= x0 or y1 <= y0:
            return
        box = img[y0:y1, x0:x1, :3]
        box >>= 1
        box -= box >> 2
        cov = np.zeros((y1 - y0, x1 - x0), np.uint16)
        mh, mw = min(m.shape[0], y1 - y0 - 2), min(m.shape[1], x1 - x0 - 5)
        if mh > 0 and mw > 0:
            cov[2:2 + mh, 5:5 + mw] = m[:mh, :mw]
        yy, xx = np.nonzero(cov)
        d = box[yy, xx].astype(np.uint16)
        box[yy, xx] = d + ((np.asarray(color, np.uint16) - d) * cov[yy, xx][:, None] + 127) // 255

    def _legend(self, legend: tuple) -> tuple:
        """The legend's box (x0, y0, x1, y1) and its coloured text pixels (rows, cols, coverage, colour), cached."""
        cached = self._rows_cache.get(("legend", legend))
        if cached is None:
            widths = [self._row_mask(t).shape[1] for t, _ in legend]
            box_w = sum(widths) + 14 * (len(legend) - 1) + 12
            x0, y0, x1, y1 = max(self.w - box_w - 4, 0), 4, self.w - 4, 4 + self.line_h + 4
            cov = np.zeros((y1 - y0, x1 - x0), np.uint16)
            col = np.zeros((y1 - y0, x1 - x0, 3), np.uint16)
            x = (x1 - x0) - 6
            for (text, color), tw in zip(reversed(legend), reversed(widths)):
                x -= tw
                m = self._row_mask8(text)
                a, b = max(x, 0), min(x + tw, x1 - x0)
                if b > a:
                    h = min(m.shape[0], cov.shape[0] - 2)
                    cov[2:2 + h, a:b] = m[:h, a - x:b - x]
                    col[2:2 + h, a:b] = color
                x -= 14
            yy, xx = np.nonzero(cov)
            cached = (x0, y0, x1, y1, yy, xx, cov[yy, xx][:, None], col[yy, xx])
            self._rows_cache[("legend", legend)] = cached
        return cached


class _Card:
    """A title card: a few centred lines in a large font over the darkened frame."""

    def __init__(self, w: int, h: int, lines: Sequence[str]) -> None:
        from PIL import Image, ImageDraw, ImageFont
        size = max(12, int(round(h / 16)))
        fonts = []
        for k, _ in enumerate(lines):
            sz = size if k == 0 else max(10, int(round(size * 0.62)))
            try:
                fonts.append(ImageFont.load_default(size=sz))
            except (TypeError, OSError, ImportError):
                fonts.append(ImageFont.load_default())
        im = Image.new("L", (w, h), 0)
        d = ImageDraw.Draw(im)
        heights = [int(f.size * 1.45) if hasattr(f, "size") else 14 for f in fonts]
        y = (h - sum(heights)) // 2
        for text, f, lh in zip(lines, fonts, heights):
            tw = d.textlength(text, font=f)
            d.text(((w - tw) / 2, y), text, fill=255, font=f)
            y += lh
        self.mask = np.asarray(im, dtype=np.uint16)

    def draw(self, img: np.ndarray) -> None:
        rgb = img[..., :3]
        rgb >>= 2
        on = self.mask > 0
        d = rgb[on].astype(np.uint16)
        rgb[on] = d + ((255 - d) * self.mask[on][:, None] + 127) // 255


def _write_error(path: Path, exc: BaseException) -> VideoWriteError:
    """The one-line :class:`VideoWriteError` for a failure while writing ``path``.

    ffmpeg reports a failed write to its own output only as a broken pipe to its input; the real
    cause (a full disk, a file-size limit, a quota) is found by writing to the same file here."""
    code = getattr(exc, "errno", None)
    if code in (None, errno.EPIPE):
        code = _probe_write(path) or code
    why = os.strerror(code) if isinstance(code, int) else ""
    if not why:
        text = str(exc).strip().splitlines()
        why = text[0][:200] if text else type(exc).__name__
    return VideoWriteError(code, why, str(path))


def _probe_write(path: Path, nbytes: int = 1 << 20) -> int | None:
    """The errno of appending ``nbytes`` to ``path`` (ENOSPC, EFBIG, EDQUOT, ...), or None when it works."""
    try:
        with open(path, "ab") as f:
            f.write(bytes(nbytes))
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        return e.errno
    return None


class _Writer:
    """One output file. ``close`` returns whether the file holds a video (it is removed when it
    does not: no frame was written, or writing failed)."""

    path: Path
    frames = 0

    def append(self, img: np.ndarray, repeat: int) -> None:
        raise NotImplementedError

    def close(self) -> bool:
        raise NotImplementedError

    def discard(self) -> None:
        """Remove the (partial) file."""
        try:
            self.path.unlink()
        except OSError:
            pass


class _Mp4Writer(_Writer):
    """H.264 in MP4: frames piped to imageio-ffmpeg's ffmpeg binary (``imageio_ffmpeg.write_frames``).

    With ``background`` the ffmpeg process runs at the lowest CPU priority (Linux
    ``SCHED_IDLE``): PyBullet's software renderer keeps both cores busy in bursts, and an
    encoder at normal priority that wakes up inside a burst delays the frame being rendered;
    at idle priority it fills the gaps between bursts instead. Other busy processes can slow
    the encoder down (the recorder then waits for it) but never stop it for good.
    """

    def __init__(self, path: Path, fps: float, size: tuple[int, int], quality: float, background: bool = True) -> None:
        ffmpeg_exe(path)
        import imageio_ffmpeg
        self.path = path
        self.size = size
        self._failed = False
        self._gen = imageio_ffmpeg.write_frames(
            str(path), size, pix_fmt_in="rgba", pix_fmt_out="yuv420p", fps=fps, quality=quality, codec="libx264",
            macro_block_size=2, ffmpeg_log_level="error", output_params=["-preset", "ultrafast", "-threads", "1"])
        start = lambda: self._gen.send(None)  # noqa: E731 - launches ffmpeg
        try:
            if background:
                _run_at_idle_priority(start)
            else:
                start()
        except Exception as exc:  # noqa: BLE001 - named in one line
            err = _write_error(path, exc)
            self.discard()
            raise err from None

    def append(self, img: np.ndarray, repeat: int) -> None:
        if img.shape != (self.size[1], self.size[0], 4) or img.dtype != np.uint8 or not img.flags.c_contiguous:
            raise ValueError(f"MP4 frames must be contiguous {self.size[1]}x{self.size[0]}x4 uint8, got {img.shape} {img.dtype}")
        try:
            for _ in range(repeat):
                self._gen.send(img)
                self.frames += 1
        except Exception as exc:  # noqa: BLE001 - a full disk, a killed ffmpeg: one line, no partial file
            self._failed = True
            self._quiet_close()
            err = _write_error(self.path, exc)       # finds the cause by writing to the file: before removing it
            self.discard()
            raise err from None

    def _quiet_close(self) -> None:
        try:
            self._gen.close()
        except Exception:  # noqa: BLE001 - the failure is reported by the caller
            pass

    def close(self) -> bool:
        if self._failed:
            return False
        try:
            self._gen.close()  # closes ffmpeg's input and waits for it to finish the file
        except Exception as exc:  # noqa: BLE001
            err = _write_error(self.path, exc)
            self.discard()
            raise err from None
        if self.frames == 0:   # ffmpeg wrote a header without a stream: no video, no file
            self.discard()
            return False
        return True


def _is_gif(path: str | Path) -> bool:
    """Whether ``path`` is written as a GIF (by its suffix); anything else is an MP4 through ffmpeg."""
    return Path(path).suffix.lower() == ".gif"


def ffmpeg_exe(path: str | Path) -> str:
    """imageio-ffmpeg's ffmpeg binary; RuntimeError naming ``path`` if there is none."""
    try:
        import imageio_ffmpeg
        return imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError) as exc:
        raise RuntimeError(f"cannot write {path}: ffmpeg is not available ({exc}); install imageio-ffmpeg") from None


def _run_at_idle_priority(start) -> None:
    """Call ``start()`` (which launches a process) from a short-lived thread at idle CPU priority.

    A process inherits the scheduling policy of the thread that forks it, so the child
    runs at idle priority while the caller's threads keep theirs (an unprivileged thread
    cannot raise its priority again, hence the throw-away thread). Where ``SCHED_IDLE`` does
    not exist (not Linux) or is refused, the child runs at normal priority.
    """
    failure: list[BaseException] = []

    def body() -> None:
        try:
            if hasattr(os, "SCHED_IDLE"):
                try:
                    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
                except OSError:
                    pass
            start()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failure.append(exc)

    t = threading.Thread(target=body, name="armtwin-video-start", daemon=True)
    t.start()
    t.join()
    if failure:
        raise failure[0]


class _GifWriter(_Writer):
    """Animated GIF with Pillow: each frame quantised to its own 256-colour palette."""

    def __init__(self, path: Path, fps: float) -> None:
        self.path = path
        self.images: list = []
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
        self.images.append(Image.fromarray(np.ascontiguousarray(img[:, :, :3])).quantize(colors=256, method=Image.Quantize.FASTOCTREE))
        self.durations.append(max(dur, 10))
        self.frames += repeat

    def close(self) -> bool:
        if not self.images:
            return False
        try:
            self.images[0].save(str(self.path), save_all=True, append_images=self.images[1:], duration=self.durations,
                                loop=0, optimize=False, disposal=1)
        except Exception as exc:  # noqa: BLE001
            err = _write_error(self.path, exc)
            self.discard()
            raise err from None
        finally:
            self.images = []
        return True


# ----- one output: trails, overlay, writers -------------------------------------------------

def format_rows(title: str, units: Sequence[str], t: float, q: Sequence[float], xyz: Sequence[float],
                rpy: Sequence[float], info: Mapping[str, str]) -> list[str]:
    """The overlay's text rows.

    Args:
        title: first row's title.
        units: per joint "deg" or "mm".
        t: time, s.
        q: joint values in display units (deg / mm).
        xyz: flange position, mm; rpy: flange URDF roll/pitch/yaw, deg.
        info: ``"label"`` (appended to the title), ``"line"`` (G-code line), others as ``key: value``.
    """
    info = dict(info)
    label = info.pop("label", None)
    rows = [f"t = {t:7.3f} s   {title}" + (f"   {label}" if label else "")]
    line = info.pop("line", None)
    if line is not None:
        rows.append(f"G-code: {str(line).strip()[:90]}")
    rows.append("  ".join(f"J{i + 1} {v:7.1f}{' mm' if u == 'mm' else '°'}" for i, (v, u) in enumerate(zip(q, units))))
    rows.append(f"tool  x {xyz[0]:7.1f}  y {xyz[1]:7.1f}  z {xyz[2]:7.1f} mm   "
                f"rpy {rpy[0]:6.1f}  {rpy[1]:6.1f}  {rpy[2]:6.1f}°")
    for k, v in info.items():
        rows.append(f"{k}: {v}"[:100])
    return rows


@dataclass(frozen=True)
class FrameSettings:
    """What a :class:`Compositor` needs to know (picklable: it is sent to the helper process).

    Attributes:
        views: the rectangles (x, y, w, h) whose trails are drawn, in drawing order: the first is
            the whole frame, a later one (a picture-in-picture) covers the earlier ones.
        labels: (x, y, text) boxed labels (a picture-in-picture's caption, the tiles' names).
        card: lines of a title card shown for ``card_frames`` frames before the first frame (over it,
            darkened); the video is that much longer than the simulated time.
    """

    paths: tuple[str, ...]
    fps: float
    size: tuple[int, int]
    quality: float
    overlay: bool
    trail: bool
    title: str
    units: tuple[str, ...]
    views: tuple[tuple[int, int, int, int], ...] = ()
    labels: tuple[tuple[int, int, str], ...] = ()
    card: tuple[str, ...] = ()
    card_frames: int = 0


class Compositor:
    """Draws trails and overlay on RGBA frames and hands them to the writers of ``settings.paths``."""

    def __init__(self, settings: FrameSettings) -> None:
        self.s = settings
        w, h = settings.size
        rects = settings.views or ((0, 0, w, h),)
        self._views = [_View(r, w, rects[k + 1:]) for k, r in enumerate(rects)]
        self._text = _Overlay(w, h) if settings.overlay or settings.labels else None
        self._legend = ([("programmed", PLANNED_STYLE.color), ("travel", TRAVEL_STYLE.color),
                         ("followed", FOLLOWED_STYLE.color)] if settings.trail else [])
        self._card = _Card(w, h, settings.card) if settings.card and settings.card_frames > 0 else None
        self._frames = 0
        self._writers: list[_Writer] = []
        try:
            for p in settings.paths:
                path = Path(p)
                self._writers.append(_GifWriter(path, settings.fps) if _is_gif(path)
                                     else _Mp4Writer(path, settings.fps, settings.size, settings.quality))
        except BaseException:
            self.close()
            raise

    def process(self, img: np.ndarray, repeat: int, state: tuple | None, views: Sequence[ViewData],
                clear: bool) -> None:
        """Draw on ``img`` ((h, w, 4) uint8, in place) and write it ``repeat`` times.

        Args:
            state: ``(t, q, xyz, rpy, info)`` for :func:`format_rows`, or None without overlay.
            views: per view of the settings (:data:`ViewData`): the new followed-path pixels (NaN
                rows break the line), and the programmed and travel paths to add, in the view's
                own pixels.
            clear: wipe every path first.
        """
        if self.s.trail:
            for view, data in zip(self._views, views):
                if clear:
                    view.clear()
                view.draw(data)
                view.composite(img)
        if self._text is not None:
            if self.s.overlay and state is not None:
                self._text.draw(img, format_rows(self.s.title, self.s.units, *state), self._legend)
            for x, y, text in self.s.labels:
                self._text.label(img, x, y, text)
        if self._card is not None and self._frames == 0:   # the title card, before the first frame
            card = img.copy()
            self._card.draw(card)
            for wr in self._writers:
                wr.append(card, self.s.card_frames)
        self._frames += repeat
        for wr in self._writers:
            wr.append(img, repeat)

    def close(self) -> tuple[str, ...]:
        """Finish every file; returns the files that hold a video (a file without a frame is
        removed). Raises the first failure after trying them all."""
        first: BaseException | None = None
        written = []
        for wr in self._writers:
            try:
                if wr.close():
                    written.append(str(wr.path))
            except Exception as exc:  # noqa: BLE001 - the others still get closed
                first = first or exc
        self._writers = []
        if first is not None:
            raise first
        return tuple(written)


# ----- the helper process ------------------------------------------------------------------

class EncoderError(OSError):
    """The video encoder failed (its helper process stopped, ffmpeg failed); the message says why.

    An ``OSError``: the output could not be made, like a file that cannot be written, so command
    line entry points end with one line naming it."""

    def __str__(self) -> str:
        return f"video encoding failed: {self.strerror or (self.args[0] if self.args else '')}"


class VideoWriteError(EncoderError):
    """A video file could not be written (a full disk, a file too large, ffmpeg failed): one line
    naming the file and why. The file is removed: a video is playable or absent."""

    def __str__(self) -> str:
        return f"cannot write the video {self.filename}: {self.strerror}"


class EncoderProcess:
    """A :class:`Compositor` in a helper process (see the module docstring).

    Args:
        settings: what to draw and write.
        slots: frames that may be in flight (shared-memory slots).

    Raises:
        EncoderError: the helper did not start or its writers did not open (the message says why).
    """

    def __init__(self, settings: FrameSettings, slots: int = 4) -> None:
        w, h = settings.size
        self.frame_bytes = w * h * 4
        self.slots = int(slots)
        self._next = 0
        self._inflight: deque[int] = deque()
        self._last_slot: int | None = None
        self._closed = False
        self._failure: BaseException | None = None
        self._proc: subprocess.Popen | None = None
        self._fd, self._mm = _shared_frames(self.frame_bytes * self.slots)   # no name: nothing can be left behind
        self._buf = np.frombuffer(self._mm, np.uint8).reshape(self.slots, h, w, 4)
        code = ("import importlib.util as u, sys; s = u.spec_from_file_location('armtwin_frames', sys.argv[1]); "
                "m = u.module_from_spec(s); sys.modules[s.name] = m; s.loader.exec_module(m); m._serve()")

        def start() -> None:
            # its own session: a Ctrl-C at the terminal reaches the simulation only, which then closes
            # the video properly (ffmpeg stopped by the same Ctrl-C would leave a file without its index)
            self._proc = subprocess.Popen([sys.executable, "-c", code, str(Path(__file__).resolve())],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=(self._fd,),
                                          start_new_session=True)
        self._ready = False  # the helper's "ready" is read with its first reply, not waited for here
        try:
            for p in settings.paths:  # the usual failure, named before anything starts
                if not _is_gif(p):
                    ffmpeg_exe(p)
            _run_at_idle_priority(start)
            # plain values only: the helper loads this file by path, not as armtwin.envs.frames
            self._send(("init", dataclasses.asdict(settings), self._fd, self.slots))
        except BaseException:
            self._kill()
            raise

    def submit(self, img: np.ndarray, repeat: int, state: tuple | None, views: Sequence[ViewData], clear: bool) -> None:
        """Queue one frame (copied into a free slot; waits while all slots are in use)."""
        if len(self._inflight) >= self.slots:
            self._expect("done")
        slot = self._next
        self._next = (self._next + 1) % self.slots
        np.copyto(self._buf[slot], img)
        self._send(("frame", slot, repeat, state, list(views), clear))
        self._inflight.append(slot)
        self._last_slot = slot

    def last_frame(self) -> np.ndarray | None:
        """(h, w, 3) copy of the last frame as drawn (waits for the helper to finish it)."""
        while self._inflight:
            self._expect("done")
        return None if self._last_slot is None else self._buf[self._last_slot, :, :, :3].copy()

    def close(self) -> tuple[str, ...]:
        """Finish the files and stop the helper; returns the files that hold a video (see
        :meth:`Compositor.close`). EncoderError (or VideoWriteError) if it failed. Idempotent."""
        if self._closed:
            return self._written
        self._closed = True
        self._written: tuple[str, ...] = ()
        try:
            if self._failure is not None:
                raise self._failure
            self._send(("close",))
            while self._inflight:
                self._expect("done")
            self._written = tuple(self._expect("closed"))
            self._proc.wait()
        finally:
            self._kill()
        return self._written

    # ----- internals
    def _send(self, msg: tuple) -> None:
        try:
            pickle.dump(msg, self._proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            while self._inflight:  # the helper is gone: read what it said before it went
                self._expect("done")  # raises its own error, or "stopped" at the end of its output
            self._expect("end of output")  # raises: "the video encoding process stopped"

    def _expect(self, kind: str):
        """Read the helper's next message; it must be ``kind`` ("done" pops a slot). Returns its value."""
        if self._failure is not None:
            raise self._failure
        if not self._ready:  # its first message: it started, mapped the frames and opened the files
            self._ready = True
            self._read("ready")
        return self._read(kind)

    def _read(self, kind: str):
        try:
            msg = pickle.load(self._proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError):
            code = self._proc.poll()
            msg = ("error", "the video encoding process stopped" + (f" (exit code {code})" if code is not None else ""))
        if msg[0] != kind:
            if msg[0] == "error" and len(msg) >= 4 and msg[3]:      # a file that could not be written
                self._failure = VideoWriteError(msg[2], msg[1], msg[3])
            elif msg[0] == "error":
                self._failure = EncoderError(None, msg[1])
            else:
                self._failure = EncoderError(None, f"the video encoding process said {msg[0]!r}, expected {kind!r}")
            raise self._failure
        if kind == "done":
            self._inflight.popleft()
        return msg[1] if len(msg) > 1 else None

    def _kill(self) -> None:
        if self._proc is not None:
            for f in (self._proc.stdin, self._proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            if self._proc.poll() is None:
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
        self._buf = None
        try:
            self._mm.close()
        except (BufferError, ValueError):
            pass  # a caller still holds a view; the mapping goes with it
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _shared_frames(nbytes: int) -> tuple[int, mmap.mmap]:
    """A file descriptor of ``nbytes`` of shared memory without a name in any folder (Linux
    ``memfd_create``; elsewhere a temporary file unlinked at once), and its mapping. The helper
    process gets the descriptor (``pass_fds``); the memory goes when both have closed it, however
    they end (a SIGKILL included)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("armtwin-frames", 0)
    else:
        folder = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        fd, path = tempfile.mkstemp(prefix="armtwin-frames-", dir=folder)
        os.unlink(path)
    try:
        os.ftruncate(fd, nbytes)
        return fd, mmap.mmap(fd, nbytes)
    except BaseException:
        os.close(fd)
        raise


def _serve() -> None:
    """The helper process: frames from the pipe on stdin, acknowledgements on stdout."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the simulation, which then closes us cleanly
    inp = sys.stdin.buffer
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # stray prints must not corrupt the acknowledgements

    def reply(*msg) -> None:
        pickle.dump(msg, out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()

    comp: Compositor | None = None
    frames: np.ndarray | None = None  # (slots, h, w, 4) view of the shared frames
    try:
        while True:
            try:
                msg = pickle.load(inp)
            except (EOFError, pickle.UnpicklingError):  # the recorder stopped without closing (or died)
                return
            try:
                if msg[0] == "frame":
                    _, slot, repeat, state, views, clear = msg
                    comp.process(frames[slot], repeat, state, views, clear)
                    reply("done", slot)
                elif msg[0] == "init":
                    _, fields, fd, slots = msg
                    settings = FrameSettings(**fields)
                    w, h = settings.size
                    mm = mmap.mmap(fd, w * h * 4 * slots)
                    os.close(fd)
                    frames = np.frombuffer(mm, np.uint8).reshape(slots, h, w, 4)
                    comp = Compositor(settings)
                    reply("ready")
                elif msg[0] == "close":
                    comp, done = None, comp
                    reply("closed", done.close() if done is not None else ())
                    return
            except (BrokenPipeError, ConnectionError):
                raise                   # the recorder is gone: finish below
            except Exception as exc:  # noqa: BLE001 - reported to the recorder, which raises it
                if isinstance(exc, OSError) and exc.filename:
                    reply("error", exc.strerror or str(exc), exc.errno, exc.filename)
                else:
                    reply("error", str(exc) or type(exc).__name__)
    except OSError:
        return  # the recorder is gone (a broken pipe): finish below
    finally:
        # however the recorder went (closed without "close", killed by any signal, gone between two
        # messages): keep what was written as a playable file, remove a file without a frame
        if comp is not None:
            try:
                comp.close()
            except Exception:  # noqa: BLE001 - nobody is left to tell
                pass


if __name__ == "__main__":
    _serve()
