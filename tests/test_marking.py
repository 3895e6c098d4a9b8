"""Marks on a work surface: where an active tool touches, what it measures, what the renderer draws."""

from __future__ import annotations

import math

import numpy as np
import pytest

from armtwin import robots
from armtwin.envs.camera import Camera
from armtwin.envs.marking import MERGE_EVERY, MarkStyle, SurfaceMarker, ribbon_mesh
from armtwin.envs.sim import PhysicsConfig, World

Z = 0.05          # the surface, m


def _square(n=200, side=0.04, z=Z):
    s = np.linspace(0, 4, n, endpoint=False)
    pts = []
    for v in s:
        k, f = int(v), v - int(v)
        corners = [(0, 0), (1, 0), (1, 1), (0, 1), (0, 0)]
        a, b = np.array(corners[k]), np.array(corners[k + 1])
        x, y = side * (a + f * (b - a)) - side / 2
        pts.append((0.4 + x, y, z))
    return np.array(pts + [pts[0]])


def test_an_active_tool_on_the_surface_marks_its_path_and_measures_it():
    m = SurfaceMarker(None, (0, 0, Z))
    for p in _square():
        assert m.update(p, True)
    rep = m.close()
    assert rep.strokes == 1 and rep.length == pytest.approx(0.16, rel=1e-3)
    assert rep.area == pytest.approx(0.16 * MarkStyle().width, rel=1e-3)


@pytest.mark.parametrize("how", ["off", "lifted", "below", "outside"])
def test_nothing_is_marked_when_the_tool_is_off_lifted_or_off_the_surface(how):
    m = SurfaceMarker(None, (0.4, 0, Z), bounds=((0.4, 0, Z), (0.01, 0.01)))
    for p in _square():
        q = p + {"lifted": (0, 0, 0.0006), "below": (0, 0, -0.002)}.get(how, (0, 0, 0))
        if how == "outside":
            q = q + (0.1, 0, 0)
        assert not m.update(q, how != "off")
    assert m.close().strokes == 0 and m.report.length == 0.0


def test_lifting_the_pen_ends_a_stroke_and_a_touch_is_a_dot():
    m = SurfaceMarker(None, (0, 0, Z))
    line = [(0.3 + 0.001 * k, 0, Z) for k in range(11)]
    for p in line:
        m.update(p, True)
    m.update((0.31, 0, Z + 0.01), True)                 # lifted: the stroke ends
    for p in line:
        m.update(np.add(p, (0, 0.01, 0)), True)
    m.update((0.5, 0, Z + 0.01), True)
    m.update((0.5, 0, Z), True)                         # one touch: a dot
    m.update((0.5, 0, Z + 0.01), True)
    rep = m.close()
    assert rep.strokes == 3 and rep.length == pytest.approx(0.02, rel=1e-6)


def test_the_ribbon_lies_flat_on_the_surface_and_has_the_width():
    pts = np.array([[0, 0, Z], [0.01, 0, Z], [0.01, 0.01, Z]])
    v, t = ribbon_mesh(pts, 0.002, np.array([0, 0, 1.0]))
    assert v.shape == (8, 3) and t.shape == (4, 3) and np.allclose(v[:, 2], Z)
    assert np.ptp(v[:4, 1]) == pytest.approx(0.002)        # across the first segment
    n = np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]])
    assert np.all(n[:, 2] > 0)                               # facing up: seen from the tool's side


def _ink_pixels(img: np.ndarray) -> int:
    r, g, b = (img[..., k].astype(int) for k in range(3))
    return int(np.sum((b > r + 60) & (b > g + 40) & (r < 80)))   # the default ink is dark blue


@pytest.mark.parametrize("renderer", ["tiny", "egl"])
def test_marks_are_drawn_in_the_world_and_the_arm_hides_them(renderer):
    try:
        w = World(PhysicsConfig(dt=0.01), renderer=renderer, ground=False)
    except Exception as exc:  # noqa: BLE001 - no EGL on this machine
        pytest.skip(f"{renderer}: {exc}")
    with w:
        cam = Camera((0.4, 0.0, Z), 0.35, azimuth=-90, elevation=70)
        m = SurfaceMarker(w, (0, 0, Z), style=MarkStyle(width=0.002))
        assert _ink_pixels(w.render(cam, 320, 240)) == 0
        for k, p in enumerate(_square()):
            m.update(p, True)
            if k % 5 == 0:
                m.flush()
        m.close()
        assert len(m.bodies) == 1                             # merged every MERGE_EVERY flushes
        seen = _ink_pixels(w.render(cam, 320, 240))
        assert seen > 100                                     # 160 mm x 2 mm at ~0.74 px/mm
        # an opaque body between the camera and the ink hides it (the marks are in the scene, not painted over it)
        cover = w.add_visual_mesh([[0.37, -0.03, Z + 0.02], [0.43, -0.03, Z + 0.02], [0.43, 0.03, Z + 0.02],
                                   [0.37, 0.03, Z + 0.02]], [[0, 1, 2], [0, 2, 3]], color=(0.9, 0.5, 0.1, 1))
        hidden = _ink_pixels(w.render(cam, 320, 240))
        assert hidden < 0.1 * seen
        w.remove_body(cover)
        assert _ink_pixels(w.render(cam, 320, 240)) == seen


def test_many_flushes_are_merged_into_few_bodies():
    with World(PhysicsConfig(dt=0.01), ground=False) as w:
        m = SurfaceMarker(w, (0, 0, Z))
        for k in range(3 * MERGE_EVERY + 5):
            m.update((0.3 + 0.0005 * k, 0, Z), True)
            m.flush()
        assert len(m.bodies) <= MERGE_EVERY            # never more bodies than that
        assert m.close().length == pytest.approx(0.0005 * (3 * MERGE_EVERY + 4), rel=1e-6)
        assert math.isfinite(m.report.area)


def test_a_bad_style_or_surface_is_refused():
    for bad in ({"width": 0}, {"width": -1}, {"contact": float("nan")}, {"lift": 1.0}):
        with pytest.raises(ValueError):
            MarkStyle(**bad)
    with pytest.raises(ValueError):
        SurfaceMarker(None, (0, 0, float("inf")))
    with pytest.raises(ValueError):
        SurfaceMarker(None, (0, 0, 0), normal=(0, 0, 0))
    with World(ground=False) as w, pytest.raises(ValueError, match="robot"):
        r = w.add_robot(robots.get("scara"))
        w.remove_body(r.body)
