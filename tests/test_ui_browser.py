"""The teach pendant driven in a real browser (Debian's chromium through Playwright).

Starts the pendant server in-process on a free port, opens the page in headless Chromium
(software WebGL), waits for it to connect, drags a joint slider and presses a jog button,
and checks that the simulated robot's joints and the page's readout changed. A screenshot
is saved as ``artifacts/ui_browser.png``.

Needs: ``apt-get install chromium`` (/usr/bin/chromium), ``pip install playwright viser``
(no ``playwright install``: the system browser is used).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = os.environ.get("ARMTWIN_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
ARGS = ["--no-sandbox", "--headless", "--use-gl=swiftshader", "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]

if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)
playwright_sync = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
pytest.importorskip("viser", reason="viser is not installed (pip install viser)")


def _wait(cond, timeout: float, what: str):
    """Poll ``cond`` until it returns something other than None; return that."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v is not None:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture(scope="module")
def pendant():
    from armtwin.envs.pendant import Pendant, PendantConfig
    p = Pendant("irb120", port=0, config=PendantConfig(rate=20.0), low_graphics=True)
    yield p
    p.close()


@pytest.fixture(scope="module")
def page(pendant):
    with playwright_sync.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            pg = browser.new_page(viewport={"width": 960, "height": 680})
            pg.goto(pendant.url)
            pg.get_by_text("Connected").first.wait_for(timeout=60_000)
            pg.get_by_text("J2 +", exact=True).first.wait_for(timeout=60_000)
            yield pg
        finally:
            browser.close()


def _readout(page) -> str:
    return page.locator("p", has_text="tool x").first.inner_text()


def test_slider_and_jog_move_the_simulated_robot(pendant, page):
    spec = pendant.spec
    q0 = pendant.core.robot.q.copy()
    text0 = _wait(lambda: _readout(page) or None, 20, "the readout")

    # drag J1's slider to three quarters of its track
    track = page.locator(".mantine-Slider-track").first
    box = track.bounding_box()
    x0, y = box["x"] + box["width"] * 0.5, box["y"] + box["height"] / 2
    x1 = box["x"] + box["width"] * 0.75
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move(x1, y, steps=2)
    page.mouse.up()
    lo, hi = spec.to_display(spec.lower)[0], spec.to_display(spec.upper)[0]
    expected = lo + 0.75 * (hi - lo)  # deg, where the pointer let go
    tol = 0.05 * (hi - lo)  # deg: the pointer is not pixel-exact
    q1 = _wait(lambda: q if abs(np.degrees((q := pendant.core.robot.q)[0]) - expected) < tol else None, 20,
               f"J1 to follow the slider to {expected:.1f} deg")
    np.testing.assert_allclose(q1[1:], q0[1:], atol=1e-9)  # only J1 moved

    # press "J2 +" with the default step of 5 degrees (after J1 has settled)
    time.sleep(0.5)  # let the drag's last updates arrive
    _wait(lambda: True if np.allclose(pendant.core.robot.q, pendant.core.q_target, atol=1e-9) else None, 10, "J1 to settle")
    before = pendant.core.robot.q.copy()
    page.get_by_text("J2 +", exact=True).first.click()
    q2 = _wait(lambda: q if abs((q := pendant.core.robot.q)[1] - before[1]) > 1e-6 else None, 20, "J2 to jog")
    assert np.degrees(q2[1] - before[1]) == pytest.approx(5.0, abs=1e-6)
    np.testing.assert_allclose(np.delete(q2, 1), np.delete(before, 1), atol=1e-9)

    # the page's readout shows the new joints and tool pose
    j1 = f"J1 {np.degrees(q2[0]):.1f}°"
    j2 = f"J2 {np.degrees(q2[1]):.1f}°"
    text1 = _wait(lambda: t if j1 in (t := _readout(page)) and j2 in t else None, 20, f"the readout to show {j1}, {j2}")
    assert text1 != text0
    x_mm = pendant.core.tool_pose()[0, 3] * 1000
    assert f"tool x {x_mm:.1f}" in text1.replace("\n", " ")

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "ui_browser.png"))


def test_unreachable_target_is_shown_and_not_applied(pendant, page):
    q_before = pendant.core.q_target.copy()
    pendant.target.position = (3.0, 0.0, 0.5)  # far outside the reach: as if dragged there
    pendant._go_target()
    status = _wait(lambda: t if "not applied" in (t := page.locator("p", has_text="status:").first.inner_text()) else None,
                   20, "the status to report the unreachable target")
    assert "unreachable" in status or "reach" in status
    np.testing.assert_allclose(pendant.core.q_target, q_before)
    assert tuple(pendant.target_dot.color) == (230, 40, 40)
