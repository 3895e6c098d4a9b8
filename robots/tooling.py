"""A robot's URDF with a tool on its flange: the tool's body, mass and TCP frame as links.

:func:`urdf_with_tool` adds to the robot's generated URDF a ``tool`` link fixed to ``tool0``
(the flange) — its visual shape drawn from the tool's kind and length, a simple collision
shape, and its mass at its centre of mass, so the dynamic joint models carry it as a payload
with the right lever arm — and a massless ``tcp`` link at the tool centre point. Relative mesh
file names are made absolute, so the text can be loaded from anywhere.

Pure text processing (xml.etree): no PyBullet. Units: metres, kilograms.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from ..controllers.tools import Tool, ToolKind
from ..controllers.transforms import matrix_to_rpy

__all__ = ["urdf_with_tool", "tool_inertial", "tool_collision", "tool_pieces", "jaw_boxes", "jaw_offset", "TOOL_LINK", "TCP_LINK", "TCP_MASS", "TCP_INERTIA"]

TOOL_LINK = "tool"
TCP_LINK = "tcp"
#: the tcp link is a frame, not a body: a token mass (kg) and inertia (kg·m² per axis)
TCP_MASS = 1e-6
TCP_INERTIA = 1e-9

#: colours of the tools' bodies and tips, RGBA
_BODY = {ToolKind.SPINDLE: (0.72, 0.74, 0.78, 1.0), ToolKind.LASER: (0.12, 0.12, 0.14, 1.0),
         ToolKind.PEN: (0.15, 0.15, 0.17, 1.0), ToolKind.VACUUM: (0.25, 0.45, 0.75, 1.0),
         ToolKind.GRIPPER: (0.30, 0.31, 0.33, 1.0), ToolKind.NONE: (0.5, 0.5, 0.5, 1.0)}
_TIP = {ToolKind.SPINDLE: (0.85, 0.85, 0.88, 1.0), ToolKind.LASER: (0.95, 0.15, 0.10, 1.0),
        ToolKind.PEN: (0.10, 0.20, 0.65, 1.0), ToolKind.VACUUM: (0.08, 0.08, 0.08, 1.0),
        ToolKind.GRIPPER: (0.55, 0.56, 0.58, 1.0), ToolKind.NONE: (0.5, 0.5, 0.5, 1.0)}


def _f(v: float) -> str:
    return repr(float(v)) if abs(v) > 1e-15 else "0"


def _vec(v) -> str:
    return " ".join(_f(x) for x in v)


def _cylinder(parent: ET.Element, tag: str, xyz, radius: float, length: float, color=None, name: str = "") -> None:
    e = ET.SubElement(parent, tag)
    ET.SubElement(e, "origin", xyz=_vec(xyz), rpy="0 0 0")
    g = ET.SubElement(e, "geometry")
    ET.SubElement(g, "cylinder", radius=_f(radius), length=_f(length))
    if color is not None:
        m = ET.SubElement(e, "material", name=name)
        ET.SubElement(m, "color", rgba=_vec(color))


def _box(parent: ET.Element, tag: str, xyz, size, color=None, name: str = "") -> None:
    e = ET.SubElement(parent, tag)
    ET.SubElement(e, "origin", xyz=_vec(xyz), rpy="0 0 0")
    g = ET.SubElement(e, "geometry")
    ET.SubElement(g, "box", size=_vec(size))
    if color is not None:
        m = ET.SubElement(e, "material", name=name)
        ET.SubElement(m, "color", rgba=_vec(color))


def _tool_link(tool: Tool, jaws: bool = True) -> ET.Element:
    """The ``tool`` link in the flange frame: a body along the TCP's direction, its tip, its mass
    (``jaws``: draw a gripper's jaws, open; False where the physics moves them)."""
    link = ET.Element("link", name=TOOL_LINK)
    L = max(float(np.linalg.norm(tool.offset)), 0.01)
    # shapes are drawn along the flange's z axis up to the TCP's distance (an angled TCP keeps a
    # straight body: the shape is a picture; the TCP frame below is exact)
    body_r = _body_radius(tool)
    body_c, tip_c = _BODY[tool.kind], _TIP[tool.kind]
    if tool.kind is ToolKind.GRIPPER:
        palm = PALM * L
        _cylinder(link, "visual", (0, 0, palm / 2), body_r, palm, body_c, "tool_body")
        if jaws:
            for x, size in jaw_boxes(tool):
                _box(link, "visual", x, size, tip_c, "tool_jaw")
    elif tool.kind is ToolKind.VACUUM:
        _cylinder(link, "visual", (0, 0, (L - 0.01) / 2), body_r, L - 0.01, body_c, "tool_body")
        cup = max(tool.width / 2, 0.006)
        _cylinder(link, "visual", (0, 0, L - 0.005), cup, 0.01, tip_c, "tool_cup")
    else:
        tip = min(0.25 * L, 0.03)
        _cylinder(link, "visual", (0, 0, (L - tip) / 2), body_r, L - tip, body_c, "tool_body")
        _cylinder(link, "visual", (0, 0, L - tip / 2), max(0.25 * body_r, 0.002), tip, tip_c, "tool_tip")
    for centre, half, r in tool_pieces(tool):
        _cylinder(link, "collision", centre, r, 2 * half)
    inertial = ET.SubElement(link, "inertial")
    m, com, inertia = tool_inertial(tool)
    ET.SubElement(inertial, "origin", xyz=_vec(com), rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=_f(m))
    ET.SubElement(inertial, "inertia", ixx=_f(inertia[0, 0]), ixy="0", ixz="0", iyy=_f(inertia[1, 1]), iyz="0",
                  izz=_f(inertia[2, 2]))
    return link


#: a gripper's palm ends at this fraction of the TCP's distance; its jaws take the rest
PALM = 0.6
#: a gripper jaw's thickness (along the closing axis) and width, m
JAW_THICK, JAW_WIDTH = 0.008, 0.02


def jaw_boxes(tool: Tool) -> list[tuple[tuple[float, float, float], tuple[float, float, float]]]:
    """A gripper's two jaws, open: (centre, box size) in the flange frame, m. They close along
    the flange's x axis; open, their inner faces stand ``width / 2 + 2 mm`` from the axis, and
    they reach from the palm to the TCP."""
    L = max(float(np.linalg.norm(tool.offset)), 0.01)
    x = jaw_offset(tool)
    length = (1.0 - PALM) * L
    return [((s * x, 0.0, L - length / 2), (JAW_THICK, JAW_WIDTH, length)) for s in (-1.0, 1.0)]


def jaw_offset(tool: Tool) -> float:
    """The open jaws' centres' distance from the flange's z axis, m."""
    return max(tool.width, 0.01) / 2 + 0.002 + JAW_THICK / 2


def tool_pieces(tool: Tool) -> list[tuple[tuple[float, float, float], float, float]]:
    """The tool's collision shape as cylinders along the flange's z axis: (centre (3,) m in the
    flange frame, half length m, radius m) each — what its URDF link collides as and what the
    collision check tests. One cylinder from the flange to the TCP's distance, wide enough for a
    cup; a gripper: its palm and each open jaw (three thin cylinders across the jaw's width), so a
    piece between its open jaws touches nothing."""
    L = max(float(np.linalg.norm(tool.offset)), 0.01)
    if tool.kind is not ToolKind.GRIPPER:
        r, length = tool_collision(tool)
        return [((0.0, 0.0, length / 2), length / 2, r)]
    out = [((0.0, 0.0, PALM * L / 2), PALM * L / 2, _body_radius(tool))]
    r = JAW_THICK / 2
    for (x, _, z), (_, _, length) in jaw_boxes(tool):
        for y in (-(JAW_WIDTH / 2 - r), 0.0, JAW_WIDTH / 2 - r):
            out.append(((x, y, z), length / 2, r))
    return out


def tool_collision(tool: Tool) -> tuple[float, float]:
    """(radius, length) m of the tool's collision cylinder: along the flange's z axis from the
    flange to the TCP's distance, wide enough for its jaws or cup (what its URDF link collides as)."""
    L = max(float(np.linalg.norm(tool.offset)), 0.01)
    r = _body_radius(tool)
    if tool.kind is ToolKind.GRIPPER:
        r = max(r, max(tool.width, 0.01) / 2 + 0.006 + 0.004)
    elif tool.kind is ToolKind.VACUUM:
        r = max(r, max(tool.width / 2, 0.006))
    return r, L


def _body_radius(tool: Tool) -> float:
    """Radius of the tool's drawn body, m."""
    return {ToolKind.SPINDLE: 0.032, ToolKind.LASER: 0.022, ToolKind.PEN: 0.012, ToolKind.VACUUM: 0.012,
            ToolKind.GRIPPER: 0.03}.get(tool.kind, 0.015)


def tool_inertial(tool: Tool) -> tuple[float, np.ndarray, np.ndarray]:
    """The ``tool`` link's mass properties in the flange frame, as its URDF writes them.

    Returns:
        (mass kg — at least 10⁻⁴, centre of mass (3,) m, inertia about it (3, 3) kg·m²: a solid
        cylinder of the drawn body's radius and the TCP's distance, along the flange's z).
    """
    L = max(float(np.linalg.norm(tool.offset)), 0.01)
    m = max(tool.mass, 1e-4)
    r = _body_radius(tool)
    ixx = m * (3 * r * r + L * L) / 12.0
    return m, np.asarray(tool.com, dtype=float), np.diag([ixx, ixx, 0.5 * m * r * r])


def urdf_with_tool(urdf_path: str | Path, tool: Tool, *, jaws: bool = True) -> str:
    """The URDF text of ``urdf_path`` with ``tool`` on its flange (see the module docstring).
    ``jaws``: draw a gripper's jaws (open) on the tool link; False when the physics world moves
    them as bodies of their own (:class:`~armtwin.envs.gripper.ParallelGripper`).

    Raises:
        ValueError: the URDF has no ``tool0`` link or already has a ``tool``/``tcp`` link.
    """
    path = Path(urdf_path).resolve()
    root = ET.fromstring(path.read_bytes())
    names = {e.get("name") for e in root.findall("link")}
    if "tool0" not in names:
        raise ValueError(f"{path}: no tool0 link to mount a tool on")
    if names & {TOOL_LINK, TCP_LINK}:
        raise ValueError(f"{path}: already has a {TOOL_LINK!r} or {TCP_LINK!r} link")
    for mesh in root.iter("mesh"):
        ref = mesh.get("filename") or ""
        if ref and not ref.startswith(("package://", "/", "file://")):
            mesh.set("filename", str(path.parent / ref))
    if tool.kind is not ToolKind.NONE:
        root.append(_tool_link(tool, jaws))
        j = ET.SubElement(root, "joint", name="tool_joint", type="fixed")
        ET.SubElement(j, "parent", link="tool0")
        ET.SubElement(j, "child", link=TOOL_LINK)
        ET.SubElement(j, "origin", xyz="0 0 0", rpy="0 0 0")
    tcp = ET.SubElement(root, "link", name=TCP_LINK)
    inertial = ET.SubElement(tcp, "inertial")
    ET.SubElement(inertial, "origin", xyz="0 0 0", rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=_f(TCP_MASS))
    ET.SubElement(inertial, "inertia", ixx=_f(TCP_INERTIA), ixy="0", ixz="0", iyy=_f(TCP_INERTIA), iyz="0",
                  izz=_f(TCP_INERTIA))
    j = ET.SubElement(root, "joint", name="tcp_joint", type="fixed")
    ET.SubElement(j, "parent", link="tool0")
    ET.SubElement(j, "child", link=TCP_LINK)
    ET.SubElement(j, "origin", xyz=_vec(tool.offset), rpy=_vec(matrix_to_rpy(tool.tcp[:3, :3])))
    comment = f" {tool.name} (T{tool.number}, {tool.kind.value}) added by armtwin.robots.tooling "
    root.insert(0, ET.Comment(comment.replace("--", "-")))
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode")
