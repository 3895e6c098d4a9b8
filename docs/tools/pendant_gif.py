#!/usr/bin/env python3
"""GIF of the browser teach pendant (``armtwin ui ROBOT``) driven the way a person drives it.

Usage (in the venv; the default ``--out`` is the repository's ``docs/img/pendant.gif``)::

    python docs/tools/pendant_gif.py --robot irb120 --out docs/img/pendant.gif --size 800x600 --fps 5

What it does:

1. Starts ``armtwin ui ROBOT --port 0`` (a free port on 127.0.0.1; the robot in its default
   workcell, the table) and reads the page's address from the line the command prints.
2. Opens the page in headless Chromium (Debian's ``/usr/bin/chromium``, or ``ARMTWIN_CHROMIUM``;
   software WebGL) through Playwright, at the window size ``--size``, as
   ``tests/test_ui_browser.py`` does. The 3D view's camera comes from the page's address
   (viser's ``initialCameraPosition``/``LookAt``/``Fov``): it looks as the robot's ``iso`` view
   does (:func:`armtwin.envs.camera.cameras_for`), placed so that the table and the robot's
   meshes in every pose of step 3 fill the part of the view left of the control panel. The
   "software WebGL" notice is closed with its close button.
3. Only through the page: presses the jog buttons "J1 +" seven times, "J2 +" five times and
   "J3 −" five times (the pendant's joint step, 5°; the sliders and the readout follow), then
   scrolls to "IK target", types a position above the table's centre into the X/Y/Z
   boxes, presses "go to XYZ" and scrolls back to the readout. After each step it waits until
   the page's readout shows the new joints (or tool position) and the 3D view has stopped
   changing, then takes a screenshot: one frame per step.
4. Writes the frames as a looping GIF with imageio: one shared 255-colour palette and no
   dithering, so what does not move is the same pixels in every frame and compresses well.
   The first frame, the typed target and the last frame are held longer (``--hold``).
5. Stops the pendant (SIGTERM, which it takes as Ctrl-C) and Chromium, also on an error or
   Ctrl-C (or SIGTERM), and prints the path written (on stdout; the steps go to stderr).

Options: ``--frames N`` keeps only the first N frames (a quick check); ``--low-graphics`` as
``armtwin ui`` (no shadows: faster on software WebGL); ``--keep-frames DIR`` also saves each
frame as PNG. Needs the ``ui`` and ``test`` extras (viser, playwright: ``pip install -e
".[test]"``) and ``apt-get install chromium``; no ``playwright install``. Takes one to two minutes
(Chromium starting, and software WebGL drawing each step). The README's GIF was made with the
command above; ``tests/test_pendant_gif.py`` runs a short one.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("ARMTWIN_CHROMIUM", "/usr/bin/chromium")
# the flags of tests/test_ui_browser.py: headless, software WebGL, nothing fetched from the network
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--use-gl=swiftshader", "--enable-unsafe-swiftshader",
                 "--ignore-gpu-blocklist", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
START = 90.0   # s: bounds the pendant starting and the page connecting (software WebGL on a loaded machine)
STEP = 60.0    # s: bounds one step (the server applying it, the page showing it, the 3D view settling)
MIN_WIDTH = 600  # px: below 576 px the page shows its phone layout (the panel a sheet over the view)
NUM = r"(-?\d+(?:\.\d+)?)"


class GifError(RuntimeError):
    """A step the page did not take (timed out, refused): the message says which."""


def _wait(cond, what: str, timeout: float = STEP, interval: float = 0.05):
    """Poll ``cond`` until it returns something other than None; return that."""
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v is not None:
            return v
        if time.monotonic() > end:
            raise GifError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


# ----- the pendant ------------------------------------------------------------------------------

class PendantProcess:
    """``armtwin ui ROBOT --port 0`` in a process of its own; :meth:`url` once it serves.

    Its own session, so a Ctrl-C at the terminal reaches this script only, which then stops the
    pendant itself: SIGTERM, which ``armtwin ui`` takes as Ctrl-C (SIGINT may be ignored in a
    process started in the background), then SIGKILL if it has not ended after 20 s.
    """

    def __init__(self, robot: str, *, low_graphics: bool, save_dir: str):
        cmd = [sys.executable, "-m", "armtwin", "ui", robot, "--port", "0", "--host", "127.0.0.1",
               "--save-dir", save_dir]
        if low_graphics:
            cmd.append("--low-graphics")
        self.lines: list[str] = []
        self._url: str | None = None
        self._got_url = threading.Event()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     cwd=save_dir, start_new_session=True)
        self._reader = threading.Thread(target=self._read, name="pendant-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # until the process ends
            self.lines.append(line.rstrip())
            m = re.search(r"open (http://\S+)", line)
            if m and self._url is None:
                self._url = m.group(1)
                self._got_url.set()
        self._got_url.set()

    def url(self, timeout: float = START) -> str:
        self._got_url.wait(timeout)
        if self._url is None:
            why = "ended" if self.proc.poll() is not None else f"printed no address in {timeout:g} s"
            tail = "\n".join(self.lines[-10:])
            raise GifError(f"armtwin ui {why}:\n{tail}")
        return self._url

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)


# ----- the page -----------------------------------------------------------------------------------

@dataclass
class Readout:
    joints: np.ndarray  # display units (deg, mm)
    tool: np.ndarray    # mm


class Page:
    """The pendant's page in Chromium: the steps a person takes, and screenshots."""

    def __init__(self, page, dof: int):
        self.page, self.dof = page, dof
        self._panel_x: int | None = None

    # what the page shows
    def readout(self) -> Readout | None:
        text = self.page.locator("p", has_text="tool x").first.inner_text().replace("\n", " ")
        joints = re.findall(r"J(\d) " + NUM + "(?:°|mm)", text)
        tool = re.search(r"tool x " + NUM + " y " + NUM + " z " + NUM + " mm", text)
        if len(joints) != self.dof or tool is None:
            return None
        return Readout(np.array([float(v) for _, v in joints]), np.array([float(v) for v in tool.groups()]))

    def status(self) -> str:
        return self.page.locator("p", has_text="status:").first.inner_text()

    def dismiss_notices(self) -> None:
        """Close the notices the page shows (viser's "software WebGL" one) with their close buttons."""
        buttons = self.page.locator(".mantine-Notification-closeButton")

        def closed():
            shown = [b for b in buttons.all() if b.is_visible()]
            for b in shown:
                b.dispatch_event("click")  # a click that waits for no animation to settle
            return None if shown else True
        _wait(closed, "the notices to close", timeout=20.0, interval=0.5)

    def grab(self) -> np.ndarray:
        import imageio.v3 as iio
        return iio.imread(self.page.screenshot(type="png"), extension=".png")[..., :3]

    def view_part(self, img: np.ndarray) -> np.ndarray:
        """The part of a screenshot that is 3D view only: left of the control panel."""
        if self._panel_x is None:
            box = self.page.get_by_text("Connected", exact=True).first.bounding_box()
            self._panel_x = max(int(box["x"]) - 60, 1) if box else img.shape[1]
        return img[:, :self._panel_x]

    def settled(self, before: np.ndarray | None, what: str, still: float = 0.15) -> np.ndarray:
        """A screenshot once the 3D view differs from ``before`` (when given) and has held still
        for ``still`` seconds."""
        def cond():
            a = self.grab()
            time.sleep(still)
            b = self.grab()
            va, vb = self.view_part(a), self.view_part(b)
            if not np.array_equal(va, vb):
                return None
            if before is not None and np.array_equal(vb, self.view_part(before)):
                return None
            return b
        return _wait(cond, f"the 3D view to show {what}", interval=0.1)

    # what a person does
    def jog(self, k: int, sign: int) -> None:
        """Press joint ``k``'s jog button, "Jk +" or "Jk −" (the pendant's joint step, 5 by default)."""
        button = self.page.get_by_text(f"J{k + 1} {'+' if sign > 0 else '−'}", exact=True).first
        button.scroll_into_view_if_needed()
        button.click()

    def type_target(self, xyz_mm: np.ndarray) -> None:
        """Type a target position into the X/Y/Z boxes (mm), each followed by Tab."""
        boxes = [self.page.get_by_label(f"target {a} (mm)") for a in "XYZ"]
        boxes[0].scroll_into_view_if_needed()
        self.page.get_by_text("go to XYZ", exact=True).first.scroll_into_view_if_needed()
        for box, v in zip(boxes, xyz_mm):
            box.fill(f"{v:.1f}")
            box.press("Tab")

    def target_boxes(self) -> np.ndarray:
        return np.array([float(self.page.get_by_label(f"target {a} (mm)").input_value() or "nan") for a in "XYZ"])

    def go_xyz(self) -> None:
        self.page.get_by_text("go to XYZ", exact=True).first.click()

    def scroll_to_readout(self) -> None:
        self.page.locator("p", has_text="tool x").first.scroll_into_view_if_needed()


# ----- the steps ----------------------------------------------------------------------------------

@dataclass
class Frame:
    image: np.ndarray
    hold: int  # frame periods shown
    what: str


JOG_STEP = 5.0  # deg or mm: the pendant's default joint step


def _jog_plan(spec, start: np.ndarray) -> list[tuple[int, int, int]]:
    """(joint, direction, presses) of the jog buttons: J1 +35, J2 +25 and J3 −25 display units
    (deg, mm) in :data:`JOG_STEP` steps, towards the other side where the joint's range has no room."""
    lo, hi = spec.to_display(spec.lower), spec.to_display(spec.upper)
    plan = []
    for k, (presses, sign) in enumerate(((7, 1), (5, 1), (5, -1))[:spec.dof]):
        if not lo[k] <= start[k] + sign * presses * JOG_STEP <= hi[k]:
            sign = -sign
        plan.append((k, sign, presses))
    return plan


def record(page: Page, spec, max_frames: int | None, hold: int, log) -> list[Frame]:
    frames: list[Frame] = []

    def done() -> bool:
        return max_frames is not None and len(frames) >= max_frames

    def shoot(before, what: str, n: int = 1, still: float = 0.15) -> np.ndarray:
        page.dismiss_notices()
        img = page.settled(before, what, still)
        frames.append(Frame(img, n, what))
        log(f"frame {len(frames)}: {what}")
        return img

    r0 = _wait(page.readout, "the page's readout")
    last = shoot(None, "the start pose", hold, still=1.0)  # the meshes have come and are drawn
    for k, sign, presses in _jog_plan(spec, r0.joints):
        want = r0.joints[k]
        for _ in range(presses):
            if done():
                return frames
            page.jog(k, sign)
            want = want + sign * JOG_STEP
            _wait(lambda: True if (r := page.readout()) is not None and abs(r.joints[k] - want) < 0.051 else None,
                  f"the readout to show J{k + 1} {want:.1f}")
            last = shoot(last, f"J{k + 1} {'+' if sign > 0 else '−'} pressed: J{k + 1} {want:.1f}")
    if done():
        return frames

    # the IK target: a point above the table's centre (the default work origin), typed
    goal = _goal_mm(spec)
    r1 = _wait(page.readout, "the page's readout")
    # the boxes show the tool's position once the server's echo of the last jog is in
    _wait(lambda: True if np.allclose(page.target_boxes(), r1.tool, atol=0.051) else None,
          "the target boxes to show the tool's position")
    for _attempt in range(3):
        page.type_target(goal)
        time.sleep(0.5)
        if np.allclose(page.target_boxes(), goal, atol=0.051):
            break
    else:
        raise GifError(f"the target boxes show {page.target_boxes()}, typed {goal}")
    last = shoot(None, f"target {goal[0]:.0f} {goal[1]:.0f} {goal[2]:.0f} mm typed", hold, still=0.5)  # scrolled
    if done():
        return frames
    page.go_xyz()
    try:
        _wait(lambda: True if (r := page.readout()) is not None and np.allclose(r.tool, goal, atol=0.051) else None,
              f"the tool to reach {goal} mm", timeout=10.0)
    except GifError as exc:
        raise GifError(f"{exc}; the page says {page.status()!r}") from None
    last = shoot(last, "go to XYZ pressed: the tool above the table", hold)
    if done():
        return frames
    page.scroll_to_readout()
    shoot(None, "scrolled back: the readout and the sliders after the IK move", 2 * hold, still=0.5)
    return frames


# ----- the GIF ------------------------------------------------------------------------------------

def write_gif(frames: list[Frame], path: Path, fps: float) -> None:
    """One 255-colour palette for all frames, no dithering; imageio (Pillow) writes it, looping.

    The palette is Pillow's fast octree of every frame (halved): median cut left too few
    colours for the soft shadow on the table and drew it pink."""
    import imageio.v3 as iio
    from PIL import Image
    sample = np.concatenate([f.image[::2, ::2] for f in frames], axis=0)
    palette = Image.fromarray(np.ascontiguousarray(sample)).quantize(
        colors=255, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    images = [np.asarray(Image.fromarray(f.image).quantize(palette=palette, dither=Image.Dither.NONE).convert("RGB"))
              for f in frames]
    durations = [1000.0 / fps * f.hold for f in frames]
    path.parent.mkdir(parents=True, exist_ok=True)
    iio.imwrite(path, np.stack(images), extension=".gif", duration=durations, loop=0, optimize=True)


# ----- main ---------------------------------------------------------------------------------------

def _size(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)x(\d+)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: WIDTHxHEIGHT in pixels, e.g. 800x600")
    w, h = int(m.group(1)), int(m.group(2))
    if w < MIN_WIDTH or h < 300 or w > 3840 or h > 2160:
        raise argparse.ArgumentTypeError(f"{text}: {MIN_WIDTH}-3840 by 300-2160 pixels "
                                         f"(narrower, the page shows its phone layout)")
    return w, h


PANEL = 345  # px: the control panel and its margin, at the window's right edge
MARGIN = 36  # px: kept free around the scene in the view


def _goal_mm(spec) -> np.ndarray:
    """The typed IK target: 60 mm above the default work origin, the centre of the table's top."""
    return np.round(np.asarray(spec.workcell.origin, float) * 1000.0) + np.array([0.0, 0.0, 60.0])


def scene_points(spec) -> np.ndarray:
    """(n, 3) world points the view must show: the table's corners, the robot's drawn meshes
    (the convex hull of their vertices, from its URDF as the page draws it) in every pose the jog
    buttons take it to, and room for the target's handles around the tool there and at the IK
    target."""
    from functools import partial

    import yourdfpy
    from armtwin.controllers.kinematics import chain_of, fk_frames
    from armtwin.robots.workcell import default_cell
    cell = default_cell(spec)
    world_report = cell.mount @ spec.report_frame.matrix
    pts = []
    for body in cell.bodies:
        half = np.asarray(body.size, float)[:3] / 2 if len(body.size) >= 3 else np.full(3, float(body.size[0]))
        for c in np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).reshape(3, -1).T:
            pts.append(body.pose[:3, :3] @ (c * half) + body.pose[:3, 3])
    path = Path(spec.urdf_path)
    urdf = yourdfpy.URDF.load(path, build_scene_graph=True, load_meshes=True,
                              filename_handler=partial(yourdfpy.filename_handler_magic, dir=path.parent))
    order = [list(spec.joint_names).index(n) for n in urdf.actuated_joint_names]
    disp = spec.to_display(spec.home)
    poses = [disp.copy()]
    for k, sign, presses in _jog_plan(spec, disp):
        for _ in range(presses):
            disp[k] += sign * JOG_STEP
            poses.append(disp.copy())
    handles = 0.08 * np.vstack([np.eye(3), -np.eye(3)])  # m: the target's rings and arrows around the tool
    for d in poses:
        q = spec.from_display(d)
        urdf.update_cfg(q[order])
        hull = urdf.scene.to_geometry().convex_hull.vertices  # the URDF's root: the mounting face
        pts.extend(hull @ cell.mount[:3, :3].T + cell.mount[:3, 3])
        pts.extend((world_report @ fk_frames(chain_of(spec), q)[-1])[:3, 3] + handles)
    goal = (world_report @ np.append(_goal_mm(spec) / 1000.0, 1.0))[:3]
    pts.extend(goal + handles)
    return np.array(pts)


def camera_query(spec, width: int, height: int) -> str:
    """viser's URL parameters for a camera looking as the robot's ``iso`` view does
    (:func:`armtwin.envs.camera.cameras_for`), placed so that :func:`scene_points` fill the part of
    the view left of the control panel."""
    from armtwin.envs.camera import cameras_for
    cam = cameras_for(spec)["iso"]
    eye, target = cam.eye, np.asarray(cam.target, float)
    forward = (target - eye) / np.linalg.norm(target - eye)
    right = np.cross(forward, (0.0, 0.0, 1.0))
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    pts = scene_points(spec)
    tan = np.tan(np.radians(cam.fov) / 2)
    region = np.array([MARGIN, MARGIN, width - PANEL - MARGIN, height - MARGIN], float)  # x0 y0 x1 y1, px
    dist = cam.distance
    for _ in range(50):  # move the camera in its image plane and along its axis until the points fit
        rel = pts - (target - forward * dist)
        depth = rel @ forward
        px = (1 + (rel @ right) / (depth * tan * width / height)) * width / 2
        py = (1 - (rel @ up) / (depth * tan)) * height / 2
        box = np.array([px.min(), py.min(), px.max(), py.max()])
        m_per_px = 2 * dist * tan / height  # at the target's depth
        target = target + right * ((box[0] + box[2]) - (region[0] + region[2])) / 2 * m_per_px \
            - up * ((box[1] + box[3]) - (region[1] + region[3])) / 2 * m_per_px
        dist *= max((box[2] - box[0]) / (region[2] - region[0]), (box[3] - box[1]) / (region[3] - region[1])) ** 0.5
    eye = target - forward * dist
    vec = lambda v: ",".join(f"{x:.3f}" for x in v)  # noqa: E731
    return (f"?initialCameraPosition={vec(eye)}&initialCameraLookAt={vec(target)}"
            f"&initialCameraFov={np.radians(cam.fov):.4f}")


def _drive(args, spec, width: int, height: int, log) -> list[Frame]:
    """Start the pendant, open it in Chromium, record the frames; both are stopped on the way out."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright
    with tempfile.TemporaryDirectory(prefix="pendant_gif_") as tmp:
        pendant = PendantProcess(args.robot, low_graphics=args.low_graphics, save_dir=tmp)
        try:
            url = pendant.url()
            log(f"pendant at {url}")
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
                try:
                    pg = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
                    pg.goto(url + camera_query(spec, width, height))
                    pg.get_by_text("Connected").first.wait_for(timeout=START * 1000)
                    pg.get_by_text("go to XYZ", exact=True).first.wait_for(state="attached", timeout=START * 1000)
                    try:  # the software-WebGL notice comes once the 3D view has its context
                        pg.locator(".mantine-Notification-closeButton").first.wait_for(timeout=10_000)
                    except PlaywrightError:  # a GPU: no notice
                        pass
                    return record(Page(pg, spec.dof), spec, args.frames, args.hold, log)
                finally:
                    try:
                        browser.close()
                    except PlaywrightError:  # the driver already gone (a Ctrl-C at the terminal reaches it too)
                        pass
        except PlaywrightError as exc:  # Chromium did not start, a time-out of the page: one line
            raise GifError(f"the browser: {str(exc).strip().splitlines()[0]}") from None
        finally:
            pendant.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default="irb120", help="robot id (default irb120)")
    ap.add_argument("--out", default=str(REPO / "docs" / "img" / "pendant.gif"),
                    help="GIF to write (default the repository's docs/img/pendant.gif)")
    ap.add_argument("--size", type=_size, default=(800, 600), help="window size WIDTHxHEIGHT (default 800x600)")
    ap.add_argument("--fps", type=float, default=5.0, help="frames per second (default 5)")
    ap.add_argument("--hold", type=int, default=5, help="frame periods the first, typed-target and IK frames are "
                                                        "shown (the last one twice that; default 5)")
    ap.add_argument("--frames", type=int, default=None, help="keep only the first N frames (a quick check)")
    ap.add_argument("--low-graphics", action="store_true", help="no shadows (armtwin ui --low-graphics)")
    ap.add_argument("--keep-frames", default=None, metavar="DIR", help="also save each frame as DIR/frame_NN.png")
    ap.add_argument("--quiet", action="store_true", help="print only the path written")
    args = ap.parse_args(argv)
    if not 0.5 <= args.fps <= 50:
        ap.error(f"--fps {args.fps:g}: 0.5 to 50")
    if args.frames is not None and args.frames < 1:
        ap.error("--frames must be at least 1")
    if args.hold < 1:
        ap.error("--hold must be at least 1")
    from armtwin import robots
    try:
        spec = robots.get(args.robot)
    except robots.UnknownRobotError as exc:
        ap.error(str(exc))
    if not Path(CHROMIUM).is_file():
        print(f"pendant_gif: no Chromium at {CHROMIUM}: apt-get install chromium, or point ARMTWIN_CHROMIUM "
              "at a Chromium binary", file=sys.stderr)
        return 2
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        print(f"pendant_gif: {exc}: pip install -e '.[test]' (playwright)", file=sys.stderr)
        return 2
    log = (lambda _m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    width, height = args.size
    out = Path(args.out)

    def _terminate(_signum, _frame):
        raise KeyboardInterrupt  # SIGTERM cleans up as Ctrl-C does
    old = signal.signal(signal.SIGTERM, _terminate)
    try:
        frames = _drive(args, spec, width, height, log)
    except GifError as exc:
        print(f"pendant_gif: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pendant_gif: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, old)
    if args.keep_frames:
        import imageio.v3 as iio
        d = Path(args.keep_frames)
        d.mkdir(parents=True, exist_ok=True)
        for i, f in enumerate(frames):
            iio.imwrite(d / f"frame_{i:02d}.png", f.image)
    write_gif(frames, out, args.fps)
    log(f"{len(frames)} frames, {out.stat().st_size / 1e6:.2f} MB")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
