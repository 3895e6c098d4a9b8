"""Generate the URDF files under ``robots/urdf/`` from the robot specs.

Run ``python -m armtwin.robots.urdfgen`` after changing a spec; a test checks that the
committed files equal what this module generates. Collision shapes are primitives (cylinders
and spheres) placed along each link's path; a link's visual geometry is its shells' meshes
(:mod:`armtwin.robots.meshgen`, written by the same command) where it has shells, else the same
primitives in the link's colours.
Inertials are the link's data (:attr:`LinkSpec.inertial <armtwin.robots.spec.LinkSpec>`: a
maker's published centre of mass and inertia, turned into the link frame) where the robot has
them, with their source in a comment; otherwise they are computed from the drawing shapes at
uniform density per link, which makes them physically valid by construction (positive definite,
triangle inequality, centre of mass inside the body) — a plausible choice, not a fact.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from xml.sax.saxutils import escape

import numpy as np

from ..controllers.transforms import matrix_to_rpy
from . import meshgen
from .spec import JointType, RobotSpec

FLANGE_MASS = 1e-3  # kg, tool0 is a frame, not a body; payloads are attached to it at run time
FLANGE_INERTIA = 1e-8  # kg·m² per axis of that token body


@dataclass(frozen=True)
class Piece:
    """A primitive of a link: a cylinder (length > 0) or a sphere (length 0), in the link frame."""

    center: np.ndarray  # (3,) m
    rotation: np.ndarray  # (3, 3), cylinder axis = column z
    radius: float  # m
    length: float  # m
    accent: bool = False

    @property
    def volume(self) -> float:
        if self.length <= 0:
            return 4.0 / 3.0 * np.pi * self.radius ** 3
        return np.pi * self.radius ** 2 * self.length

    def inertia(self, mass: float) -> np.ndarray:
        """(3, 3) inertia about the piece's centre, link axes, kg·m²."""
        r, h = self.radius, self.length
        if h <= 0:
            return np.eye(3) * 0.4 * mass * r * r
        i_local = np.diag([mass * (3 * r * r + h * h) / 12, mass * (3 * r * r + h * h) / 12, mass * r * r / 2])
        return self.rotation @ i_local @ self.rotation.T


def _rotation_to(direction: np.ndarray) -> np.ndarray:
    """A rotation whose z column is ``direction`` (unit)."""
    z = direction / np.linalg.norm(direction)
    helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


def link_pieces(spec: RobotSpec, i: int) -> list[Piece]:
    """Primitives of link ``i`` (0 = base) in its own frame."""
    link = spec.links[i]
    if link.path:
        pts = [np.array(p, dtype=float) for p in link.path]
    else:
        nxt = spec.joints[i].origin if i < spec.dof else spec.tool
        pts = [np.zeros(3), np.array(nxt.xyz, dtype=float)]
    pieces = []
    for a, b in zip(pts[:-1], pts[1:]):
        length = float(np.linalg.norm(b - a))
        if length > 1e-6:
            pieces.append(Piece((a + b) / 2, _rotation_to(b - a), link.radius, length))
    if i > 0 and link.housing > 0:
        axis = np.array(spec.joints[i - 1].axis, dtype=float)
        pieces.append(Piece(np.zeros(3), _rotation_to(axis), link.radius * 1.2, link.housing, accent=True))
    if not pieces:
        pieces.append(Piece(np.zeros(3), np.eye(3), link.radius, 0.0))
    return pieces


def shape_inertial(spec: RobotSpec, i: int) -> tuple[np.ndarray, np.ndarray]:
    """(centre of mass (3,) m, inertia about it (3, 3) kg·m²) of link ``i``'s drawing shapes at uniform density."""
    pieces = link_pieces(spec, i)
    mass = spec.links[i].mass
    vols = np.array([p.volume for p in pieces])
    masses = mass * vols / vols.sum()
    com = sum(m * p.center for m, p in zip(masses, pieces)) / mass
    inertia = np.zeros((3, 3))
    for m, p in zip(masses, pieces):
        d = p.center - com
        inertia += p.inertia(m) + m * (d @ d * np.eye(3) - np.outer(d, d))
    return com, inertia


def link_inertial(spec: RobotSpec, i: int) -> tuple[np.ndarray, np.ndarray]:
    """(centre of mass (3,) m, inertia about it (3, 3) kg·m²) of link ``i`` (0 = base) in its frame.

    The link's :class:`~armtwin.robots.spec.Inertial` where it has one (a derived inertia there:
    the drawing shapes' about their own centre), else the drawing shapes' (:func:`shape_inertial`).
    """
    data = spec.links[i].inertial
    if data is None:
        return shape_inertial(spec, i)
    inertia = shape_inertial(spec, i)[1] if data.inertia is None else data.tensor
    return np.array(data.com), inertia


def inertial_source(spec: RobotSpec, i: int) -> str:
    """Where link ``i``'s inertial comes from, in words (written into the URDF)."""
    data = spec.links[i].inertial
    if data is None:
        return "derived from the drawing shapes at uniform density (no published data: a plausible choice)"
    return data.source


def _f(v: float) -> str:
    return repr(float(v)) if abs(v) > 1e-15 else "0"


def _vec(v) -> str:
    return " ".join(_f(x) for x in v)


def _geometry(p: Piece) -> str:
    if p.length <= 0:
        return f'<sphere radius="{_f(p.radius)}"/>'
    return f'<cylinder radius="{_f(p.radius)}" length="{_f(p.length)}"/>'


def _link_xml(spec: RobotSpec, i: int) -> str:
    link = spec.links[i]
    com, inertia = link_inertial(spec, i)
    out = [f'  <link name="{escape(link.name)}">']
    out.append(f"    <!-- inertial: {escape(inertial_source(spec, i)).replace('--', '-')} -->")
    out.append("    <inertial>")
    out.append(f'      <origin xyz="{_vec(com)}" rpy="0 0 0"/>')
    out.append(f'      <mass value="{_f(link.mass)}"/>')
    out.append('      <inertia ixx="{}" ixy="{}" ixz="{}" iyy="{}" iyz="{}" izz="{}"/>'.format(
        *(_f(inertia[a, b]) for a, b in ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)))))
    out.append("    </inertial>")
    shells = meshgen.link_meshes(spec, i)
    for paint, _ in shells:
        out.append('    <visual>\n      <origin xyz="0 0 0" rpy="0 0 0"/>\n'
                   f'      <geometry><mesh filename="{meshgen.mesh_name(spec, i, paint)}"/></geometry>\n'
                   f'      <material name="{paint.name}"><color rgba="{_vec(paint.rgba)}"/></material>\n    </visual>')
    for p in link_pieces(spec, i):
        origin = f'<origin xyz="{_vec(p.center)}" rpy="{_vec(matrix_to_rpy(p.rotation))}"/>'
        if not shells:
            accent = bool(p.accent and link.accent)
            material = f"{link.name}_accent" if accent else f"{link.name}_body"
            rgba = _vec(link.accent if accent else link.color)
            out.append(f"    <visual>\n      {origin}\n      <geometry>{_geometry(p)}</geometry>\n"
                       f'      <material name="{material}"><color rgba="{rgba}"/></material>\n    </visual>')
        out.append(f"    <collision>\n      {origin}\n      <geometry>{_geometry(p)}</geometry>\n    </collision>")
    out.append("  </link>")
    return "\n".join(out)


def urdf_text(spec: RobotSpec) -> str:
    """The URDF document of ``spec``."""
    out = ['<?xml version="1.0"?>',
           f"<!-- Generated by armtwin.robots.urdfgen from robots/{spec.name}.py; do not edit by hand. -->",
           f"<!-- {escape(spec.title)}: {escape(spec.reference)} -->",
           f'<robot name="{spec.name}">']
    # colours are written inside each visual: some URDF readers (viser's) ignore named top-level materials
    for i in range(len(spec.links)):
        out.append(_link_xml(spec, i))
    for i, j in enumerate(spec.joints):
        kind = "prismatic" if j.type is JointType.PRISMATIC else "revolute"
        out.append(f'  <joint name="{j.name}" type="{kind}">\n'
                   f'    <parent link="{spec.links[i].name}"/>\n    <child link="{spec.links[i + 1].name}"/>\n'
                   f'    <origin xyz="{_vec(j.origin.xyz)}" rpy="{_vec(j.origin.rpy)}"/>\n'
                   f'    <axis xyz="{_vec(j.axis)}"/>\n'
                   f'    <limit lower="{_f(j.lower)}" upper="{_f(j.upper)}" velocity="{_f(j.velocity)}" effort="{_f(j.effort)}"/>\n'
                   f"  </joint>")
    r = spec.links[-1].radius
    out.append('  <link name="tool0">\n    <inertial>\n      <origin xyz="0 0 0" rpy="0 0 0"/>\n'
               f'      <mass value="{_f(FLANGE_MASS)}"/>\n'
               f'      <inertia ixx="{_f(FLANGE_INERTIA)}" ixy="0" ixz="0" iyy="{_f(FLANGE_INERTIA)}" iyz="0" izz="{_f(FLANGE_INERTIA)}"/>\n    </inertial>\n'
               f'    <visual>\n      <origin xyz="{_f(r * 0.6)} 0 0" rpy="0 0 0"/>\n'
               f'      <geometry><sphere radius="{_f(r * 0.25)}"/></geometry>\n'
               '      <material name="tool0_mark"><color rgba="0.9 0.1 0.1 1"/></material>\n    </visual>\n  </link>')
    out.append(f'  <joint name="tool0_joint" type="fixed">\n    <parent link="{spec.links[-1].name}"/>\n'
               f'    <child link="tool0"/>\n    <origin xyz="{_vec(spec.tool.xyz)}" rpy="{_vec(spec.tool.rpy)}"/>\n  </joint>')
    out.append("</robot>\n")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Write every registered robot's URDF and visual meshes; ``--check`` only compares."""
    from . import get, names

    check = "--check" in (argv if argv is not None else sys.argv[1:])
    specs = [get(name) for name in names()]
    stale = []
    for spec in specs:
        text = urdf_text(spec)
        current = spec.urdf_path.read_text() if spec.urdf_path.exists() else None
        if current != text:
            stale.append(spec.urdf_path.name)
            if not check:
                spec.urdf_path.parent.mkdir(parents=True, exist_ok=True)
                spec.urdf_path.write_text(text)
                print(f"wrote {spec.urdf_path}")
    meshes = meshgen.sync(specs, check=check)
    if not check:
        for rel in meshes:
            print(f"{'wrote' if (meshgen.URDF_DIR / rel).exists() else 'removed'} {meshgen.URDF_DIR / rel}")
    stale += meshes
    if check and stale:
        print(f"stale robot files: {', '.join(stale)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
