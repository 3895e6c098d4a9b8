"""Write the robots' visual meshes (``robots/urdf/meshes/<robot>/``) from their shells.

Each link's :class:`~armtwin.robots.shapes.Shell` objects (drawn in the root frame at the zero
pose, :attr:`LinkSpec.visual <armtwin.robots.spec.LinkSpec>`) are swept into triangles, moved into
the link's frame and written as one Wavefront OBJ file per link and colour, with a material file
per robot; :mod:`armtwin.robots.urdfgen` refers to them as the links' ``<visual>`` geometry (the
``<collision>`` geometry stays the simple primitives). Pure numpy and deterministic text (fixed
decimals, 0.1 mm and 0.001 of a normal), so a test regenerates the files and compares them with
the committed ones: run ``python -m armtwin.robots.urdfgen`` (it writes these too) after changing
a robot's shells.

Why OBJ with normals: PyBullet, yourdfpy/trimesh and viser all read it; per-vertex normals give
smooth shading on the TinyRenderer (without them every facet is lit flat), and shared vertices
keep the three robots' meshes a few hundred kilobytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .shapes import Paint, Shell
from .spec import URDF_DIR, RobotSpec

__all__ = ["MESH_DIR", "Mesh", "shell_mesh", "link_meshes", "mesh_files", "zero_pose_frames", "sync"]

MESH_DIR = URDF_DIR / "meshes"
#: profile corners sharper than this (deg) get a crease (separate vertices, each face's own normal)
CREASE_DEG = 35.0


@dataclass(frozen=True)
class Mesh:
    """Triangles with per-vertex normals.

    Attributes:
        vertices: (n, 3) m.
        normals: (n, 3) unit.
        faces: (m, 3) vertex indices, counter-clockwise seen from outside.
    """

    vertices: np.ndarray
    normals: np.ndarray
    faces: np.ndarray

    def transformed(self, t: np.ndarray) -> "Mesh":
        """The mesh moved by the (4, 4) rigid transform ``t``."""
        return Mesh(self.vertices @ t[:3, :3].T + t[:3, 3], self.normals @ t[:3, :3].T, self.faces)

    @staticmethod
    def join(meshes: list["Mesh"]) -> "Mesh":
        offsets = np.cumsum([0] + [len(m.vertices) for m in meshes[:-1]])
        return Mesh(np.concatenate([m.vertices for m in meshes]), np.concatenate([m.normals for m in meshes]),
                    np.concatenate([m.faces + o for m, o in zip(meshes, offsets)]))


def shell_mesh(shell: Shell) -> Mesh:
    """Sweep ``shell``'s profile around its outline (see :class:`~armtwin.robots.shapes.Shell`)."""
    axis, e1 = np.array(shell.axis), np.array(shell.ref)
    e2 = np.cross(axis, e1)
    th = 2 * np.pi * np.arange(shell.segments) / shell.segments
    u = np.outer(np.cos(th), e1) + np.outer(np.sin(th), e2)                      # (S, 3)
    circ = np.array(shell.circles, dtype=float)
    support = np.outer(np.cos(th), circ[:, 0]) + np.outer(np.sin(th), circ[:, 1]) + circ[:, 2]
    pick = np.argmax(support, axis=1)                                           # outermost circle per direction
    centre = np.array(shell.origin) + np.outer(circ[pick, 0], e1) + np.outer(circ[pick, 1], e2)
    radius = circ[pick, 2]
    prof = [np.array(p, dtype=float) for p in shell.profile]
    prof = [p for k, p in enumerate(prof) if k == 0 or np.linalg.norm(p - prof[k - 1]) > 1e-9]
    seg_n = []
    for a, b in zip(prof[:-1], prof[1:]):
        t = (b - a) / np.linalg.norm(b - a)
        seg_n.append(np.array([-t[1], t[0]]))                                   # (n_s, n_rho), outward

    verts: list[np.ndarray] = []
    norms: list[np.ndarray] = []
    faces: list[np.ndarray] = []

    def ring(p: np.ndarray, n2: np.ndarray) -> np.ndarray:
        """Vertex indices of the outline at profile point p with profile normal n2 ((1,) for a point)."""
        pts = centre + p[0] * axis + (radius + p[1])[:, None] * u
        nrm = n2[0] * axis + n2[1] * u
        nrm /= np.linalg.norm(nrm, axis=1, keepdims=True)
        start = sum(len(v) for v in verts)
        if np.ptp(pts, axis=0).max() < 1e-9:                                     # an apex
            verts.append(pts[:1])
            norms.append(np.sign(n2[0]) * axis[None, :] if n2[0] != 0 else nrm[:1])
            return np.array([start])
        verts.append(pts)
        norms.append(nrm)
        return start + np.arange(len(pts))

    def band(a: np.ndarray, b: np.ndarray) -> None:
        if len(a) == 1 and len(b) == 1:
            return
        if len(a) == 1:
            faces.append(np.column_stack([np.full(len(b), a[0]), np.roll(b, -1), b]))
        elif len(b) == 1:
            faces.append(np.column_stack([a, np.roll(a, -1), np.full(len(a), b[0])]))
        else:
            a1, b1 = np.roll(a, -1), np.roll(b, -1)
            faces.append(np.column_stack([a, a1, b1]))
            faces.append(np.column_stack([a, b1, b]))

    def cap(p: np.ndarray, sign: float) -> None:
        pts = centre + p[0] * axis + (radius + p[1])[:, None] * u
        if np.ptp(pts, axis=0).max() < 1e-9:
            return
        start = sum(len(v) for v in verts)
        verts.append(np.vstack([pts.mean(axis=0), pts]))
        norms.append(np.tile(sign * axis, (len(pts) + 1, 1)))
        r = start + 1 + np.arange(len(pts))
        c = np.full(len(pts), start)
        faces.append(np.column_stack([c, np.roll(r, -1), r] if sign < 0 else [c, r, np.roll(r, -1)]))

    cos_crease = np.cos(np.radians(CREASE_DEG))
    cap(prof[0], -1.0)
    prev = ring(prof[0], seg_n[0])
    for k in range(len(seg_n)):
        end_n = seg_n[k]
        last = k == len(seg_n) - 1
        if not last and seg_n[k] @ seg_n[k + 1] >= cos_crease:
            end_n = seg_n[k] + seg_n[k + 1]
            end_n = end_n / np.linalg.norm(end_n)
            cur = ring(prof[k + 1], end_n)
            band(prev, cur)
            prev = cur
        else:
            cur = ring(prof[k + 1], end_n)
            band(prev, cur)
            if not last:
                prev = ring(prof[k + 1], seg_n[k + 1])
    cap(prof[-1], 1.0)
    return Mesh(np.concatenate(verts), np.concatenate(norms), np.concatenate(faces).astype(np.int64))


def zero_pose_frames(spec: RobotSpec) -> list[np.ndarray]:
    """(4, 4) frame of every link (base first) in the root frame at the zero pose."""
    frames = [np.eye(4)]
    for j in spec.joints:
        frames.append(frames[-1] @ j.origin.matrix)
    return frames


def link_meshes(spec: RobotSpec, i: int) -> list[tuple[Paint, Mesh]]:
    """Link ``i``'s shells in its own frame, one mesh per paint, in the order the paints first appear."""
    shells = spec.links[i].visual
    if not shells:
        return []
    to_link = np.linalg.inv(zero_pose_frames(spec)[i])
    out: dict[str, tuple[Paint, list[Mesh]]] = {}
    for s in shells:
        out.setdefault(s.paint.name, (s.paint, []))[1].append(shell_mesh(s).transformed(to_link))
    return [(paint, Mesh.join(meshes)) for paint, meshes in out.values()]


def mesh_name(spec: RobotSpec, i: int, paint: Paint) -> str:
    """File name of link ``i``'s mesh in ``paint``, relative to the URDF's folder."""
    return f"meshes/{spec.name}/{spec.links[i].name}_{paint.name}.obj"


def _num(x: float, digits: int) -> str:
    s = f"{x:.{digits}f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def obj_text(spec: RobotSpec, i: int, paint: Paint, mesh: Mesh) -> str:
    """Wavefront OBJ text of one mesh: shared vertices and normals (rounded), faces v//vn."""
    vkeys: dict[str, int] = {}
    nkeys: dict[str, int] = {}
    tri = []
    for face in mesh.faces:
        idx = []
        for k in face:
            v = " ".join(_num(c, 4) for c in mesh.vertices[k])
            n = mesh.normals[k] / np.linalg.norm(mesh.normals[k])
            vn = " ".join(_num(c, 3) for c in n)
            idx.append((vkeys.setdefault(v, len(vkeys) + 1), nkeys.setdefault(vn, len(nkeys) + 1)))
        if len({a for a, _ in idx}) == 3:                                        # drop faces that rounding collapsed
            tri.append(" ".join(f"{a}//{b}" for a, b in idx))
    head = [f"# {spec.name} {spec.links[i].name}, {paint.name}: generated by armtwin.robots.meshgen from "
            f"robots/{spec.name}.py; do not edit by hand.", f"mtllib {spec.name}.mtl", f"usemtl {paint.name}"]
    return "\n".join(head + [f"v {v}" for v in vkeys] + [f"vn {n}" for n in nkeys] + [f"f {t}" for t in tri]) + "\n"


def mtl_text(spec: RobotSpec, paints: list[Paint]) -> str:
    """The robot's material file: one diffuse colour per paint (for readers that take colours from it)."""
    out = [f"# {spec.name} paints: generated by armtwin.robots.meshgen; do not edit by hand."]
    for p in paints:
        r, g, b, a = p.rgba
        out += [f"newmtl {p.name}", f"Kd {_num(r, 3)} {_num(g, 3)} {_num(b, 3)}", f"d {_num(a, 3)}"]
    return "\n".join(out) + "\n"


def mesh_files(spec: RobotSpec) -> dict[str, str]:
    """Every mesh file of ``spec``: path relative to the URDF folder -> text (empty: no shells)."""
    files: dict[str, str] = {}
    paints: dict[str, Paint] = {}
    for i in range(len(spec.links)):
        for paint, mesh in link_meshes(spec, i):
            paints.setdefault(paint.name, paint)
            files[mesh_name(spec, i, paint)] = obj_text(spec, i, paint, mesh)
    if files:
        files[f"meshes/{spec.name}/{spec.name}.mtl"] = mtl_text(spec, list(paints.values()))
    return files


def sync(specs: list[RobotSpec], *, check: bool = False, root: Path = URDF_DIR) -> list[str]:
    """Write (or with ``check`` only compare) the robots' mesh files; returns the stale paths.

    Mesh files under ``meshes/<robot>/`` that the robot no longer has are stale too (and removed).
    """
    stale = []
    for spec in specs:
        want = mesh_files(spec)
        folder = root / "meshes" / spec.name
        have = {str(p.relative_to(root)) for p in folder.glob("*") if p.suffix in (".obj", ".mtl")} if folder.is_dir() else set()
        for rel in sorted(have - set(want)):
            stale.append(rel)
            if not check:
                (root / rel).unlink()
        for rel, text in want.items():
            path = root / rel
            if not path.is_file() or path.read_text() != text:
                stale.append(rel)
                if not check:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text)
    return stale
