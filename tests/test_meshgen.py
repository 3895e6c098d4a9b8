"""The robots' visual meshes (issue 23.2): generated from the shells in the robots' data, committed,
closed and outward-facing, small, loaded and drawn by PyBullet; collision stays the primitives."""

from __future__ import annotations

import colorsys
import xml.etree.ElementTree as ET

import numpy as np
import pybullet
import pytest
import trimesh

from armtwin import robots
from armtwin.robots import meshgen, urdfgen
from armtwin.robots.shapes import Paint, cylinder, slab

ALL = robots.names()
#: all three robots' mesh files together stay below this many bytes (they ship in the wheel)
MAX_BYTES = 1_000_000


@pytest.mark.parametrize("name", ALL)
def test_committed_meshes_are_what_the_generator_writes(name):
    spec = robots.get(name)
    want = meshgen.mesh_files(spec)
    assert want, f"{name} has no visual shells"
    folder = meshgen.MESH_DIR / name
    have = {str(p.relative_to(meshgen.URDF_DIR)) for p in folder.iterdir()}
    assert have == set(want), "run: python -m armtwin.robots.urdfgen"
    for rel, text in want.items():
        assert (meshgen.URDF_DIR / rel).read_text() == text, f"{rel} is stale: run python -m armtwin.robots.urdfgen"


def test_the_meshes_are_small():
    total = sum(p.stat().st_size for p in meshgen.MESH_DIR.rglob("*") if p.is_file())
    assert 0 < total < MAX_BYTES, f"{total:,} bytes of meshes"


@pytest.mark.parametrize("name", ALL)
def test_every_mesh_is_closed_and_faces_outwards(name):
    spec = robots.get(name)
    for i in range(len(spec.links)):
        for paint, mesh in meshgen.link_meshes(spec, i):
            for shell in (s for s in spec.links[i].visual if s.paint == paint):
                m = meshgen.shell_mesh(shell)
                t = trimesh.Trimesh(m.vertices, m.faces, process=True)       # merges the creases' twin vertices
                assert t.is_watertight and t.is_winding_consistent, (spec.links[i].name, paint.name)
                assert t.volume > 0, (spec.links[i].name, paint.name)        # faces wound outwards
                raw = trimesh.Trimesh(m.vertices, m.faces, process=False)
                along = np.einsum("ij,ij->i", raw.face_normals, m.normals[m.faces].mean(axis=1))
                assert np.all(along[raw.area_faces > 1e-10] > 0), "vertex normals must point the faces' way"
            loaded = trimesh.load(meshgen.MESH_DIR.parent / meshgen.mesh_name(spec, i, paint), force="mesh")
            assert len(loaded.faces) > 0


def test_shell_volume_matches_the_solid_it_draws():
    paint = Paint("test", (1, 1, 1, 1))
    shell = cylinder((0, 0, 0), (0, 0.1, 0), 0.05, paint)
    m = meshgen.shell_mesh(shell)
    # an n-gon prism of circumradius 0.05: its volume, not the circle's
    n = shell.segments
    assert trimesh.Trimesh(m.vertices, m.faces).volume == pytest.approx(0.5 * n * 0.05 ** 2 * np.sin(2 * np.pi / n) * 0.1)
    s = meshgen.shell_mesh(slab((0, 0, 0), (1, 0, 0), (0, 1, 0), [(0, 0, 0.05), (0.3, 0, 0.05)], 0.02, paint))
    box = trimesh.Trimesh(s.vertices, s.faces)
    assert box.bounds[0] == pytest.approx([-0.05, -0.05, -0.01], abs=1e-3)
    assert box.bounds[1] == pytest.approx([0.35, 0.05, 0.01], abs=2e-3)   # polygon points on the far circle
    assert box.volume == pytest.approx((0.3 * 0.1 + np.pi * 0.05 ** 2) * 0.02, rel=0.03)   # polygon arcs: a bit less


@pytest.mark.parametrize("name", ALL)
def test_shells_sit_on_their_own_links(name):
    """Each collision primitive's box overlaps its link's visual mesh's box: a shell put on the wrong
    link, or moved by a wrong frame, fails (a side offset such as the IRB120's upper arm does not)."""
    spec = robots.get(name)
    for i in range(len(spec.links)):
        meshes = meshgen.link_meshes(spec, i)
        assert meshes, spec.links[i].name
        v = np.concatenate([m.vertices for _, m in meshes])
        lo, hi = v.min(axis=0), v.max(axis=0)
        for p in urdfgen.link_pieces(spec, i):
            half = np.abs(p.rotation) @ np.array([p.radius, p.radius, max(p.length / 2, p.radius)])
            assert np.all((p.center + half >= lo) & (p.center - half <= hi)), (spec.links[i].name, p.center, lo, hi)


@pytest.mark.parametrize("name", ALL)
def test_urdf_visuals_are_the_meshes_and_collisions_the_primitives(name):
    spec = robots.get(name)
    root = ET.fromstring(spec.urdf_path.read_text())
    for link in root.findall("link"):
        if link.get("name") == "tool0":
            continue
        visuals = [v.find("geometry/mesh") for v in link.findall("visual")]
        assert visuals and all(m is not None for m in visuals), link.get("name")
        for m in visuals:
            assert (spec.urdf_path.parent / m.get("filename")).is_file()
        collisions = link.findall("collision/geometry/*")
        assert collisions and {c.tag for c in collisions} <= {"cylinder", "sphere"}, link.get("name")


@pytest.mark.parametrize("name", ALL)
def test_pybullet_loads_the_meshes_in_their_paints(name):
    spec = robots.get(name)
    c = pybullet.connect(pybullet.DIRECT)
    try:
        body = pybullet.loadURDF(str(spec.urdf_path), useFixedBase=True, physicsClientId=c)
        shapes = pybullet.getVisualShapeData(body, physicsClientId=c)
        meshes = [s for s in shapes if s[2] == pybullet.GEOM_MESH]
        paints = {p.rgba for link in spec.links for p in (s.paint for s in link.visual)}
        assert len(meshes) == sum(len(meshgen.link_meshes(spec, i)) for i in range(len(spec.links)))
        assert {tuple(round(x, 3) for x in s[7]) for s in meshes} == {tuple(round(x, 3) for x in p) for p in paints}
        assert all(s[4].decode().endswith(".obj") for s in meshes)
    finally:
        pybullet.disconnect(c)


def _hue_pixels(img: np.ndarray, rgba, tol_deg: float = 15.0) -> np.ndarray:
    """(h, w) bool: saturated pixels within ``tol_deg`` of the hue of ``rgba`` (0..1)."""
    hue = 360.0 * colorsys.rgb_to_hsv(*rgba[:3])[0]
    rgb = img[..., :3].astype(float) / 255.0
    mx, mn = rgb.max(axis=2), rgb.min(axis=2)
    c = np.where(mx - mn > 1e-9, mx - mn, 1.0)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    h = np.where(mx == r, ((g - b) / c) % 6, np.where(mx == g, (b - r) / c + 2, (r - g) / c + 4)) * 60.0
    d = np.abs((h - hue + 180.0) % 360.0 - 180.0)
    return (d < tol_deg) & ((mx - mn) / np.maximum(mx, 1e-9) > 0.5) & (mx > 0.3)


@pytest.mark.parametrize("name,paint", [("irb120", "abb_orange"), ("aubo_i5", "aubo_blue")])
def test_the_tiny_renderer_draws_the_makers_colours(name, paint):
    """Headless TinyRenderer frame of the arm alone: it covers a good part of the picture and its
    signature colour (the IRB120's orange wrist, the AUBO's blue joint caps) is there."""
    from armtwin.envs.sim import World
    from armtwin.envs.video import camera_for_robot

    spec = robots.get(name)
    rgba = next(s.paint.rgba for link in spec.links for s in link.visual if s.paint.name == paint)
    with World(ground=False, renderer="tiny") as w:
        robot = w.add_robot(spec, q0=spec.home)
        img = w.render(camera_for_robot(robot, "iso"), 160, 120)
    background = np.all(img == img[0, 0], axis=2)
    assert 0.04 < 1 - background.mean() < 0.9
    assert _hue_pixels(img, rgba).sum() >= 20


def test_shapes_reject_bad_data_when_built():
    with pytest.raises(ValueError, match="Paint.name"):
        Paint("abb orange", (1, 0.5, 0, 1))
    with pytest.raises(ValueError, match="Paint.rgba"):
        Paint("orange", (255, 128, 0, 1))
    with pytest.raises(ValueError, match="inside its outline"):
        slab((0, 0, 0), (1, 0, 0), (0, 1, 0), [(0, 0, -0.01)], 0.02, Paint("p", (1, 1, 1, 1)))
    with pytest.raises(ValueError, match="non-zero"):
        cylinder((0, 0, 0), (0, 0, 0), 0.05, Paint("p", (1, 1, 1, 1)))
