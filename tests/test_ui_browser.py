"""The teach pendant driven in a real browser (Debian's chromium through Playwright).

Starts the pendant server in-process on a free port, opens the page in headless Chromium
(software WebGL) and waits for it to connect. Then, only through the page: drags a joint
slider and presses a jog button, and checks the simulated robot's joints and the numbers in
the page's readout; types a target position into the X/Y/Z inputs and presses "go to XYZ",
once reachable (the tool goes there) and once far out of reach (the page says unreachable
and the joints stay). A screenshot is saved as ``artifacts/ui_browser.png``.

Needs what the README's test command installs: ``apt-get install chromium`` (/usr/bin/chromium,
or set ARMTWIN_CHROMIUM) and ``pip install -e ".[test]"`` (playwright, viser). No
``playwright install``: the system browser is used. A missing piece fails the test (a broken
install), it is not skipped. Runtime about 15-20 s (most of it Chromium starting and the
page connecting).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = os.environ.get("ARMTWIN_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
ARGS = ["--no-sandbox", "--headless", "--use-gl=swiftshader", "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
HANG = 30.0  # s: bounds a hang only; every wait ends as soon as its condition holds
CONNECT = 60.0  # s: bounds Chromium starting and the page connecting (software WebGL on a loaded machine)
NUM = r"(-?\d+\.\d)"


def _wait(cond, what: str, timeout: float = HANG):
    """Poll ``cond`` until it returns something other than None; return that."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v is not None:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _wait_steady(read, ok, what: str, reads: int = 5, interval: float = 0.1, timeout: float = HANG):
    """Wait until ``read()`` gives the same value ``reads`` times in a row and ``ok(value)`` holds; return it."""
    end = time.monotonic() + timeout
    last, same = None, 0
    while time.monotonic() < end:
        v = read()
        same = same + 1 if last is not None and np.array_equal(v, last) else 1
        last = v
        if same >= reads and ok(v):
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last read {last})")


@pytest.fixture(scope="module")
def pendant():
    try:
        import viser  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"viser is not installed ({exc}): pip install -e '.[test]' (the README's test command)", pytrace=False)
    from armtwin.envs.pendant import Pendant, PendantConfig
    p = Pendant("irb120", port=0, config=PendantConfig(rate=20.0), low_graphics=True)
    yield p
    p.close()


@pytest.fixture(scope="module")
def page(pendant):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        pytest.fail(f"playwright is not installed ({exc}): pip install -e '.[test]' (the README's test command)", pytrace=False)
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install chromium (the README's test command), "
                    "or point ARMTWIN_CHROMIUM at a Chromium binary", pytrace=False)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            pg = browser.new_page(viewport={"width": 960, "height": 760})
            pg.goto(pendant.url)
            pg.get_by_text("Connected").first.wait_for(timeout=CONNECT * 1000)
            pg.get_by_text("J2 +", exact=True).first.wait_for(timeout=CONNECT * 1000)
            yield pg
        finally:
            browser.close()


def _readout(page) -> tuple[np.ndarray, np.ndarray] | None:
    """The joints (deg) and tool position (mm) the page's readout shows, or None if it shows none yet."""
    text = page.locator("p", has_text="tool x").first.inner_text().replace("\n", " ")
    joints = re.findall(r"J(\d) " + NUM + "°", text)
    tool = re.search(r"tool x " + NUM + " y " + NUM + " z " + NUM + " mm", text)
    if not joints or tool is None:
        return None
    assert [int(k) for k, _ in joints] == list(range(1, len(joints) + 1)), text
    return np.array([float(v) for _, v in joints]), np.array([float(v) for v in tool.groups()])


def _status(page) -> str:
    return page.locator("p", has_text="status:").first.inner_text()


def _wait_readout(page, q_deg: np.ndarray, tool_mm: np.ndarray, what: str):
    """Wait until the readout shows ``q_deg`` and ``tool_mm`` (to its 0.1 rounding)."""
    def cond():
        r = _readout(page)
        if r is None or r[0].shape != q_deg.shape:
            return None
        return r if np.all(np.abs(r[0] - q_deg) <= 0.051) and np.all(np.abs(r[1] - tool_mm) <= 0.051) else None
    return _wait(cond, f"the readout to show {what}")


def _type_target(page, pendant, xyz_mm) -> None:
    """Type a target position into the page's X/Y/Z inputs, wait for the server to have it, press "go to XYZ".

    A box whose value the server does not hold yet is typed again (typing can race the page's own
    update of the inputs on a loaded machine); the wait ends as soon as the server holds all three.
    """
    def server():
        return np.array([float(h.value) for h in pendant.target_xyz])

    end = time.monotonic() + CONNECT
    boxes = [page.get_by_label(f"target {axis} (mm)") for axis in "XYZ"]
    retype_at = 0.0
    while not np.allclose(server(), xyz_mm, atol=1e-6):
        now = time.monotonic()
        if now > end:
            shown = [b.input_value() for b in boxes]
            raise AssertionError(f"timed out after {CONNECT} s waiting for the server to receive the typed "
                                 f"target {xyz_mm}: the server holds {server()}, the page's boxes show {shown}")
        if now >= retype_at:  # every 3 s
            for box, want, have in zip(boxes, xyz_mm, server()):
                if abs(have - want) > 1e-6:
                    box.fill(f"{want:.1f}")
                    box.press("Tab")
            retype_at = now + 3.0
        time.sleep(0.05)
    page.get_by_text("go to XYZ", exact=True).first.click()


def test_slider_and_jog_move_the_simulated_robot(pendant, page):
    spec, core = pendant.spec, pendant.core
    q0 = core.joints()
    deg0 = np.degrees(q0)
    _wait_readout(page, deg0, core.tool_pose(q0)[:3, 3] * 1000, "the start joints")

    # drag J1's slider to three quarters of its track
    track = page.locator(".mantine-Slider-track").first
    thumb = page.get_by_role("slider").first
    before = thumb.get_attribute("aria-valuenow")
    lo, hi = spec.to_display(spec.lower)[0], spec.to_display(spec.upper)[0]
    expected = lo + 0.75 * (hi - lo)  # deg, where the pointer let go
    tol = 0.05 * (hi - lo)  # deg: the pointer is not pixel-exact
    shown = None
    for _attempt in range(3):  # a drag that lands while the panel still lays itself out is repeated
        track.scroll_into_view_if_needed()
        box = track.bounding_box()
        x0, y = box["x"] + box["width"] * 0.5, box["y"] + box["height"] / 2
        x1 = box["x"] + box["width"] * 0.75
        page.mouse.move(x0, y)
        page.mouse.down()
        page.mouse.move(x1, y, steps=4)
        page.mouse.up()
        # the slider's value as the page holds it, once the page has rendered the drag
        try:
            shown = float(_wait(lambda: v if (v := thumb.get_attribute("aria-valuenow")) != before else None,
                                "J1's slider to take the drag", timeout=3.0))
            break
        except AssertionError:
            continue
    assert shown is not None, f"three drags did not move J1's slider from {before}"
    assert abs(shown - expected) < tol, f"the slider shows {shown}, the pointer let go at {expected:.1f} deg"
    # the server has it once J1 equals it and stays there
    q1 = _wait_steady(core.joints, lambda q: abs(np.degrees(q[0]) - shown) < 1e-6,
                      f"J1 to follow the slider to {shown} deg and stay")
    assert float(thumb.get_attribute("aria-valuenow")) == shown  # no later value from the page
    np.testing.assert_allclose(q1[1:], q0[1:], atol=1e-9)  # only J1 moved
    _wait_readout(page, np.degrees(q1), core.tool_pose(q1)[:3, 3] * 1000, f"J1 {shown}")

    # press "J2 +" with the default step of 5 degrees
    page.get_by_text("J2 +", exact=True).first.click()
    q2 = _wait(lambda: q if abs((q := core.joints())[1] - q1[1]) > 1e-9 else None, "J2 to jog")
    assert np.degrees(q2[1] - q1[1]) == pytest.approx(5.0, abs=1e-6)
    np.testing.assert_allclose(np.delete(q2, 1), np.delete(q1, 1), atol=1e-9)  # J1 too: no late slider update

    # the page's readout shows the new joints and the tool position of those joints
    deg2 = np.degrees(q2)
    tool2 = core.tool_pose(q2)[:3, 3] * 1000
    assert abs(deg2[0] - deg0[0]) > 1.0 and abs(deg2[1] - deg0[1]) > 1.0  # so the readout has changed
    _wait_readout(page, deg2, tool2, f"J1 {deg2[0]:.1f}, J2 {deg2[1]:.1f} and the tool at {np.round(tool2, 1)} mm")
    # the page's J2 slider follows the jog
    j2 = page.get_by_role("slider").nth(1)
    _wait(lambda: True if abs(float(j2.get_attribute("aria-valuenow")) - deg2[1]) < 0.051 else None, "J2's slider to follow")

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "ui_browser.png"
    page.screenshot(path=str(shot))
    # the 3D view shows the arm in its makers' paints: the pixels that change when the robot's meshes
    # are hidden are the arm; most of them are light (ABB white, matte: when the meshes went to the
    # browser as metal, the white arm was drawn below 110 of 255), the wrist is ABB orange, the foot
    # graphite
    import imageio.v3 as iio
    img = iio.imread(shot)[..., :3].astype(int)
    pendant.urdf.show_visual = False
    try:
        bare_shot = ARTIFACTS / "ui_browser_no_robot.png"
        bare = _wait(lambda: b if np.abs((b := _shot(page, bare_shot)) - img).max() > 60 else None,
                     "the page to hide the robot")
    finally:
        pendant.urdf.show_visual = True
    h, w = img.shape[:2]
    box = (slice(int(0.1 * h), int(0.9 * h)), slice(int(0.2 * w), int(0.62 * w)))
    arm = np.abs(img[box] - bare[box]).max(axis=2) > 40
    px = img[box][arm]
    light = (px.mean(axis=1) > 150).mean()
    orange = int(((px[:, 0] > 180) & (px[:, 1] > 60) & (px[:, 1] < 170) & (px[:, 2] < 90)).sum())
    dark = int((px.mean(axis=1) < 90).sum())
    print(f"arm: {arm.mean():.1%} of the view, {light:.0%} light, {orange} orange and {dark} dark pixels")
    assert arm.mean() > 0.02, f"the 3D view shows no arm ({arm.sum()} pixels; see {shot})"
    assert light > 0.6, f"the arm is not drawn in ABB white ({light:.0%} light pixels; see {shot})"
    assert orange >= 10 and dark >= 10, f"no orange wrist ({orange}) or graphite foot ({dark}) in {shot}"


def _shot(page, path) -> np.ndarray:
    import imageio.v3 as iio
    page.screenshot(path=str(path))
    return iio.imread(path)[..., :3].astype(int)


def test_typed_reachable_target_moves_the_tool_there(pendant, page):
    core = pendant.core
    q0 = core.joints()
    goal = np.round(core.tool_pose(q0)[:3, 3] * 1000) + np.array([-40.0, 30.0, -50.0])  # mm, whole millimetres
    _type_target(page, pendant, goal)
    q1 = _wait(lambda: q if np.max(np.abs((q := core.joints()) - q0)) > 1e-6 else None, "the robot to move to the typed target")
    assert "IK ok" in _wait(lambda: t if "IK ok" in (t := _status(page)) else None, "the status to report the IK move")
    np.testing.assert_allclose(core.tool_pose(q1)[:3, 3] * 1000, goal, atol=1e-3)
    _wait_readout(page, np.degrees(q1), goal, f"the tool at {goal} mm")
    # the sliders show the new joints; the browser snapping them to the slider step moves nothing
    for k in range(core.spec.dof):
        s = page.get_by_role("slider").nth(k)
        _wait(lambda: True if abs(float(s.get_attribute("aria-valuenow")) - np.degrees(q1[k])) < 0.051 else None,
              f"J{k + 1}'s slider to show the IK joints")
    q_rest = _wait_steady(core.joints, lambda q: True, "the joints to rest")
    np.testing.assert_array_equal(q_rest, q1)


def test_typed_unreachable_target_is_shown_and_not_applied(pendant, page):
    core = pendant.core
    # the previous test's move is over: the joints are steady at their target
    q_before = _wait_steady(core.joints, lambda q: np.allclose(q, core.target_joints(), atol=1e-9), "the joints to rest")
    target_before = core.target_joints()
    _type_target(page, pendant, np.array([3000.0, 0.0, 500.0]))  # 3 m out: the IRB 120 reaches 0.58 m
    status = _wait(lambda: t if "not applied" in (t := _status(page)) else None, "the status to report the target")
    assert "unreachable" in status
    np.testing.assert_array_equal(core.target_joints(), target_before)
    np.testing.assert_array_equal(core.joints(), q_before)
    assert tuple(pendant.target_dot.color) == (230, 40, 40)
    _wait_readout(page, np.degrees(q_before), core.tool_pose(q_before)[:3, 3] * 1000, "the unchanged joints")
