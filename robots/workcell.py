"""The workcell a robot works in: where it is mounted and what stands around it (data + loader).

A :class:`Cell` is the robot's mounting pose and a list of static :class:`CellBody` items —
boxes, cylinders, spheres and meshes (STL/OBJ) with a pose, a size and a colour — each either
**work** (the tool may touch it: a table the pen draws on, a stock it mills) or an
**obstacle** (nothing of the robot may touch it: walls, fixtures, posts). The collision
preflight (:mod:`armtwin.envs.collision`) checks programs against it, and ``armtwin run``
puts its bodies into the simulated world and the video (:mod:`armtwin.envs.workcell`).

Cells are TOML files (docs/WORKCELL.md)::

    name = "IRB120 with a fixture"
    touch = 1.0                  # mm a tool may press into work bodies

    [robot]                      # where the robot's mounting face stands in the world
    xyz = [0, 0, 0]              # mm (the world's floor is z = 0)
    rpy = [0, 0, 0]              # deg, roll pitch yaw about the world's fixed x, y, z axes

    [[body]]
    name = "table"
    shape = "box"                # box | cylinder | sphere | mesh
    size = [300, 300, 200]       # mm: box x y z; cylinder [diameter, height]; sphere [diameter]
    xyz = [350, 0, 100]          # mm, the shape's centre (a mesh: its file's origin)
    rpy = [0, 0, 0]              # deg
    role = "work"                # work | obstacle (default obstacle)
    color = [0.55, 0.45, 0.35, 1]
    # mass = 0.2                 # kg: a movable workpiece (default 0: fixed); friction = 0.8
    # target = [380, 0, 215]     # mm: where a workpiece should end (the run reports how far off)
    # target_rpy = [0, 0, 90]    # deg (default: the body's rpy)

    [[body]]
    name = "bracket"
    shape = "mesh"
    file = "bracket.stl"         # relative to the cell file; coordinates in mm ...
    scale = 1.0                  # ... times this

Without a file each robot has :func:`default_cell`: the robot at the world's origin and a
table whose top is the program's Z0 plane under the default work origin (so the example
programs draw on it). Errors name the file and line (:class:`CellError`, one line at the
command line). Pure data: no PyBullet. Units: metres and radians inside, mm and degrees in files.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..controllers.choices import Choice
from ..controllers.transforms import rpy_to_matrix

__all__ = ["ShapeKind", "BodyRole", "CellBody", "Cell", "CellError", "default_cell", "load_cell", "end_effector_links",
           "MAX_PART_MASS", "DEFAULT_TOUCH", "MAX_CELL_BODIES", "MAX_CELL_MM", "TABLE_SIZE"]

#: how far a tool may press into a work body before it counts as a collision, m
DEFAULT_TOUCH = 0.001
#: most bodies in one cell
MAX_CELL_BODIES = 200
#: every coordinate and size of a cell lies within ±this, mm (a cell is a room, not a city)
MAX_CELL_MM = 20_000.0
#: the heaviest movable workpiece, kg
MAX_PART_MASS = 100.0
#: the default table's top, x by y, m (centred under the robot's default work origin)
TABLE_SIZE = (0.30, 0.30)
_TABLE_COLOR = (0.62, 0.52, 0.40, 1.0)
_BODY_COLOR = (0.55, 0.57, 0.60, 1.0)


class ShapeKind(Choice):
    """The shape of a cell body."""

    __label__ = "shape"

    BOX = "box"
    CYLINDER = "cylinder"
    SPHERE = "sphere"
    MESH = "mesh"


class BodyRole(Choice):
    """What the robot may do with a body."""

    __label__ = "body role"

    WORK = "work"            # the tool (end effector) may touch it, pressing in at most ``Cell.touch``
    OBSTACLE = "obstacle"    # nothing of the robot may touch it


class CellError(ValueError):
    """A cell that cannot be used: ``FILE:LINE: why`` (one line at the command line, exit 2)."""


@dataclass(frozen=True)
class CellBody:
    """One static body of a cell. SI inside.

    Attributes:
        name: unique in its cell; faults name it.
        shape: :class:`ShapeKind`.
        pose: (4, 4) the shape's frame in the world (a box's, cylinder's, sphere's centre; a
            mesh file's origin), m.
        size: box: (3,) edge lengths x y z; cylinder: (radius, length along its z); sphere:
            (radius,); mesh: () — all m.
        role: :class:`BodyRole`.
        color: RGBA 0..1.
        mesh: the mesh file (STL or OBJ) for MESH, else None.
        scale: mesh file coordinates times this are metres (1e-3: the file is in mm).
        mass: kg; 0: static (fixed in the cell); more: a movable workpiece, which the physics
            moves (gravity, contacts, a gripper) — the collision preflight checks it where it
            starts, as part of the robot while the program's tool grips it, and then where it
            was set down (:mod:`armtwin.envs.carrying`).
        friction: its Coulomb friction coefficient in the physics world.
        target: (4, 4) where a workpiece should end in the world (its frame as ``pose``), m; None:
            no target. ``armtwin run`` reports how far from it the piece ended (mm and deg).
    """

    name: str
    shape: ShapeKind
    pose: np.ndarray
    size: tuple[float, ...]
    role: BodyRole = BodyRole.OBSTACLE
    color: tuple[float, float, float, float] = _BODY_COLOR
    mesh: Path | None = None
    scale: float = 1e-3
    mass: float = 0.0
    friction: float = 0.8
    target: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", ShapeKind.parse(self.shape))
        if self.target is not None:
            target = np.array(self.target, dtype=float)
            if target.shape != (4, 4) or not np.all(np.isfinite(target)):
                raise ValueError(f"body {self.name}: target must be a finite (4, 4) transform")
            if self.mass <= 0:
                raise ValueError(f"body {self.name}: only a movable workpiece (mass > 0) has a target")
            target.flags.writeable = False
            object.__setattr__(self, "target", target)
        if not (math.isfinite(self.mass) and 0 <= self.mass <= MAX_PART_MASS):
            raise ValueError(f"body {self.name}: mass must be 0 to {MAX_PART_MASS:g} kg, got {self.mass}")
        if not (math.isfinite(self.friction) and 0 <= self.friction <= 10):
            raise ValueError(f"body {self.name}: friction must be 0 to 10, got {self.friction}")
        object.__setattr__(self, "role", BodyRole.parse(self.role))
        pose = np.array(self.pose, dtype=float)
        if pose.shape != (4, 4) or not np.all(np.isfinite(pose)):
            raise ValueError(f"body {self.name}: pose must be a finite (4, 4) transform")
        pose.flags.writeable = False
        object.__setattr__(self, "pose", pose)
        size = tuple(float(v) for v in self.size)
        want = {ShapeKind.BOX: 3, ShapeKind.CYLINDER: 2, ShapeKind.SPHERE: 1, ShapeKind.MESH: 0}[self.shape]
        if len(size) != want or not all(math.isfinite(v) and v > 0 for v in size):
            raise ValueError(f"body {self.name}: a {self.shape.value} needs {want} positive sizes, got {self.size}")
        object.__setattr__(self, "size", size)
        if (self.shape is ShapeKind.MESH) != (self.mesh is not None):
            raise ValueError(f"body {self.name}: a mesh file belongs to, and only to, a mesh body")

    @property
    def half_extents(self) -> np.ndarray:
        """(3,) half sizes of the shape's box in its own frame, m (a mesh: not known here — NaN)."""
        if self.shape is ShapeKind.BOX:
            return np.asarray(self.size) / 2
        if self.shape is ShapeKind.CYLINDER:
            r, h = self.size
            return np.array([r, r, h / 2])
        if self.shape is ShapeKind.SPHERE:
            return np.full(3, self.size[0])
        return np.full(3, np.nan)


@dataclass(frozen=True)
class Cell:
    """A robot's workcell.

    Attributes:
        name: what it is called (reports, the video's title).
        mount: (4, 4) the robot's mounting face in the world, m (the floor is the world's z = 0).
        bodies: the static bodies.
        touch: how far the tool may press into a work body, m (deeper: a collision).
        source: the file it came from, or "built-in".
    """

    name: str
    mount: np.ndarray = field(default_factory=lambda: np.eye(4))
    bodies: tuple[CellBody, ...] = ()
    touch: float = DEFAULT_TOUCH
    source: str = "built-in"

    def __post_init__(self) -> None:
        mount = np.array(self.mount, dtype=float)
        if mount.shape != (4, 4) or not np.all(np.isfinite(mount)):
            raise ValueError("the mount must be a finite (4, 4) transform")
        mount.flags.writeable = False
        object.__setattr__(self, "mount", mount)
        object.__setattr__(self, "bodies", tuple(self.bodies))
        names = [b.name for b in self.bodies]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"body names must be unique; repeated: {', '.join(dup)}")
        if not (math.isfinite(self.touch) and 0 <= self.touch <= 0.1):
            raise ValueError(f"touch must be 0 to 100 mm, got {self.touch * 1000:g} mm")

    def body(self, name: str) -> CellBody:
        """The body called ``name`` (KeyError when there is none)."""
        for b in self.bodies:
            if b.name == name:
                return b
        raise KeyError(name)


def _pose(xyz_m, rpy_rad) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = rpy_to_matrix(np.asarray(rpy_rad, dtype=float))
    T[:3, 3] = xyz_m
    return T


def default_cell(spec, mount: np.ndarray | None = None) -> Cell:
    """``spec``'s built-in cell: the robot at ``mount`` (default: the world's origin) and a table —
    a block from the floor up to the program's Z0 plane under the robot's default work origin,
    :data:`TABLE_SIZE` across, centred under the origin — that the tool may touch (work).

    When the Z0 plane is not above the floor (a robot mounted low), the table is a 20 mm slab
    under that plane instead.
    """
    mount = np.eye(4) if mount is None else np.asarray(mount, dtype=float)
    origin_report = np.append(np.asarray(spec.workcell.origin, dtype=float), 1.0)
    top = mount @ spec.report_frame.matrix @ origin_report          # the origin in the world
    height = float(top[2]) if top[2] > 0.02 else 0.02
    centre = np.array([top[0], top[1], top[2] - height / 2])
    table = CellBody("table", ShapeKind.BOX, _pose(centre, (0.0, 0.0, 0.0)), (*TABLE_SIZE, height),
                     BodyRole.WORK, _TABLE_COLOR)
    return Cell(f"{spec.name} default cell", mount, (table,))


# ----- the file format ------------------------------------------------------------------------

_TOP_KEYS = {"name", "touch", "robot", "body"}
_ROBOT_KEYS = {"xyz", "rpy"}
_BODY_KEYS = {"name", "shape", "size", "xyz", "rpy", "role", "color", "file", "scale", "mass", "friction", "target",
              "target_rpy"}
_MESH_SUFFIXES = (".stl", ".obj")


class _Lines:
    """Where keys stand in a TOML text, for messages (tomllib keeps no positions).

    Finds the line of ``key = …`` in the top level, in ``[robot]`` or in the k-th ``[[body]]``."""

    _HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\"' -]+?)\s*\]\]?")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_\-\"']+)\s*=")

    def __init__(self, text: str) -> None:
        self.where: dict[tuple[str, int, str], int] = {}   # (table, index, key) -> line
        self.headers: dict[tuple[str, int], int] = {}
        table, index, count = "", 0, {}
        for n, line in enumerate(text.splitlines(), 1):
            m = self._HEADER.match(line)
            if m:
                table = m.group(1).strip().strip("\"'")
                index = count.get(table, 0)
                count[table] = index + 1
                self.headers[(table, index)] = n
                continue
            k = self._KEY.match(line)
            if k:
                self.where.setdefault((table, index, k.group(1).strip("\"'")), n)

    def line(self, table: str, index: int = 0, key: str | None = None) -> int:
        if key is not None and (table, index, key) in self.where:
            return self.where[(table, index, key)]
        return self.headers.get((table, index), 0)


def load_cell(path: str | Path) -> Cell:
    """Read a cell file (TOML; see the module docstring and docs/WORKCELL.md).

    Raises:
        CellError: ``FILE:LINE: why`` for anything wrong in it (a ValueError).
        OSError: the file cannot be read.
    """
    path = Path(path)
    raw = path.read_bytes()
    source = str(path)
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise CellError(f"{source}:1: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        where = f"{m.group(1)}" if m else "1"
        why = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc)) or "bad TOML"
        raise CellError(f"{source}:{where}: not valid TOML: {why}") from None
    lines = _Lines(text)

    def fail(line: int, why: str) -> CellError:
        return CellError(f"{source}:{max(line, 1)}: {why}")

    for key in data:
        if key not in _TOP_KEYS:
            raise fail(lines.line("", 0, key) or lines.line(key), f"{key}: unknown key; a cell has "
                       f"{', '.join(sorted(_TOP_KEYS))}")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise fail(lines.line("", 0, "name"), "name: a text of 1 to 200 characters")
    touch = _number(data, "touch", DEFAULT_TOUCH * 1000, 0.0, 100.0, "mm",
                    lambda why: fail(lines.line("", 0, "touch"), why)) / 1000.0
    robot = data.get("robot", {})
    if not isinstance(robot, dict):
        raise fail(lines.line("", 0, "robot"), "robot: must be a table ([robot] with xyz and rpy)")
    for key in robot:
        if key not in _ROBOT_KEYS:
            raise fail(lines.line("robot", 0, key), f"robot.{key}: unknown key; [robot] has xyz (mm) and rpy (deg)")
    mount = _pose(_vector(robot, "xyz", [0, 0, 0], MAX_CELL_MM, lambda why: fail(lines.line("robot", 0, "xyz"), why),
                          "robot.xyz") / 1000.0,
                  np.radians(_vector(robot, "rpy", [0, 0, 0], 360.0,
                                     lambda why: fail(lines.line("robot", 0, "rpy"), why), "robot.rpy")))
    entries = data.get("body", [])
    if not isinstance(entries, list):
        raise fail(lines.line("", 0, "body"), "body: bodies are [[body]] tables")
    if len(entries) > MAX_CELL_BODIES:
        raise fail(lines.line("body", MAX_CELL_BODIES), f"more than {MAX_CELL_BODIES} bodies")
    bodies: list[CellBody] = []
    seen: dict[str, int] = {}
    for k, entry in enumerate(entries):
        body = _body(entry, k, path, lambda key, why, k=k: fail(lines.line("body", k, key), why))
        if body.name in seen:
            raise fail(lines.line("body", k, "name"), f"body {body.name!r}: the name is used already "
                       f"(line {lines.line('body', seen[body.name], 'name')})")
        seen[body.name] = k
        bodies.append(body)
    return Cell(name.strip(), mount, tuple(bodies), touch, source)


def _number(entry: dict, key: str, default: float, lo: float, hi: float, unit: str, fail, where: str = "") -> float:
    v = entry.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and lo <= v <= hi):
        raise fail(f"{where or key}: a number from {lo:g} to {hi:g} {unit}, got {v!r}".rstrip())
    return float(v)


def _vector(entry: dict, key: str, default, limit: float, fail, where: str, count: int = 3) -> np.ndarray:
    v = entry.get(key, default)
    if (not isinstance(v, list) or len(v) != count
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)):
        raise fail(f"{where}: {count} numbers, got {v!r}")
    a = np.array(v, dtype=float)
    if not (np.all(np.isfinite(a)) and np.all(np.abs(a) <= limit)):
        raise fail(f"{where}: numbers must be finite and within ±{limit:g}, got {v!r}")
    return a


def _body(entry, k: int, path: Path, fail) -> CellBody:
    if not isinstance(entry, dict):
        raise fail(None, f"body {k + 1}: must be a [[body]] table")
    for key in entry:
        if key not in _BODY_KEYS:
            raise fail(key, f"body {k + 1}: {key}: unknown key; a body has {', '.join(sorted(_BODY_KEYS))}")
    name = entry.get("name", f"body{k + 1}")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.\-]{1,60}", name):
        raise fail("name", f"body {k + 1}: name: 1 to 60 letters, digits, '_', '-' or '.', got {name!r}")
    where = f"body {name}"
    try:
        shape = ShapeKind.parse(entry.get("shape", ""))
    except ValueError as exc:
        raise fail("shape", f"{where}: shape: {exc}") from None
    try:
        role = BodyRole.parse(entry.get("role", "obstacle"))
    except ValueError as exc:
        raise fail("role", f"{where}: role: {exc}") from None
    xyz = _vector(entry, "xyz", [0, 0, 0], MAX_CELL_MM, lambda why: fail("xyz", why), f"{where}: xyz") / 1000.0
    rpy = np.radians(_vector(entry, "rpy", [0, 0, 0], 360.0, lambda why: fail("rpy", why), f"{where}: rpy"))
    color = entry.get("color", list(_TABLE_COLOR if role is BodyRole.WORK else _BODY_COLOR))
    if (not isinstance(color, list) or len(color) not in (3, 4)
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1 for x in color)):
        raise fail("color", f"{where}: color: 3 or 4 numbers from 0 to 1 (RGB or RGBA), got {color!r}")
    rgba = tuple(float(x) for x in color) + ((1.0,) if len(color) == 3 else ())
    mesh = None
    scale = 1e-3
    if shape is ShapeKind.MESH:
        if "size" in entry:
            raise fail("size", f"{where}: a mesh has no size: its file gives it (scale it with scale)")
        ref = entry.get("file")
        if not isinstance(ref, str) or not ref.strip():
            raise fail("file", f"{where}: a mesh needs file = \"NAME.stl\" (or .obj), relative to the cell file")
        mesh = (path.parent / ref).resolve()
        if mesh.suffix.lower() not in _MESH_SUFFIXES:
            raise fail("file", f"{where}: file {ref}: a mesh is an .stl or .obj file")
        if not mesh.is_file():
            raise fail("file", f"{where}: file {ref}: no such file ({mesh})")
        scale = _number(entry, "scale", 1.0, 1e-6, 1e6, "", lambda why: fail("scale", why), f"{where}: scale") * 1e-3
        size: tuple[float, ...] = ()
    else:
        for key in ("file", "scale"):
            if key in entry:
                raise fail(key, f"{where}: {key} belongs to mesh bodies only")
        want = {ShapeKind.BOX: 3, ShapeKind.CYLINDER: 2, ShapeKind.SPHERE: 1}[shape]
        what = {ShapeKind.BOX: "[x, y, z]", ShapeKind.CYLINDER: "[diameter, height]",
                ShapeKind.SPHERE: "[diameter]"}[shape]
        if "size" not in entry:
            raise fail(None, f"{where}: a {shape.value} needs size = {what} (mm)")
        v = _vector(entry, "size", None, MAX_CELL_MM, lambda why: fail("size", why), f"{where}: size {what}", want)
        if not np.all(v > 0):
            raise fail("size", f"{where}: size {what}: sizes must be more than 0 mm, got {entry['size']!r}")
        v = v / 1000.0
        size = tuple(float(x) for x in (v if shape is ShapeKind.BOX else
                                        (v[0] / 2, v[1]) if shape is ShapeKind.CYLINDER else (v[0] / 2,)))
    mass = _number(entry, "mass", 0.0, 0.0, MAX_PART_MASS, "kg", lambda why: fail("mass", why), f"{where}: mass")
    friction = _number(entry, "friction", 0.8, 0.0, 10.0, "", lambda why: fail("friction", why), f"{where}: friction")
    target = None
    if "target" in entry or "target_rpy" in entry:
        if mass <= 0:
            raise fail("target" if "target" in entry else "target_rpy",
                       f"{where}: a target belongs to a movable workpiece (give it a mass)")
        if "target" not in entry:
            raise fail("target_rpy", f"{where}: target_rpy needs target = [x, y, z] (mm)")
        txyz = _vector(entry, "target", None, MAX_CELL_MM, lambda why: fail("target", why), f"{where}: target") / 1000.0
        trpy = (np.radians(_vector(entry, "target_rpy", None, 360.0, lambda why: fail("target_rpy", why),
                                   f"{where}: target_rpy")) if "target_rpy" in entry else rpy)
        target = _pose(txyz, trpy)
    return CellBody(name, shape, _pose(xyz, rpy), size, role, rgba, mesh, scale,  # type: ignore[arg-type]
                    mass, friction, target)


def end_effector_links(spec) -> tuple[str, ...]:
    """The links of ``spec`` that count as its end effector — the ones that may touch work bodies.

    The last link, and up the chain every link that holds the flange point fixed (the joints after
    it turn about axes through that point) and whose shapes reach it (within 1 mm): the IRB120's
    ``link_6``; the AUBO-i5's wrist 2 and 3 links (wrist 2 carries J6's housing around the flange);
    the SCARA's quill and roll links. A tool mounted on the flange belongs to it too.
    """
    from ..controllers.kinematics import chain_of, fk_frames
    from .urdfgen import link_pieces
    ch = chain_of(spec)
    frames = fk_frames(ch, spec.home)            # link frames 1..n, then the flange (report frame)
    flange = frames[-1][:3, 3]
    out = [spec.links[-1].name]
    for i in range(spec.dof - 1, 0, -1):         # link i is moved by joints 1..i; joints i+1.. follow
        through = True
        for j in range(i, spec.dof):             # joint j+1 (0-based j) must turn about an axis through the flange
            if spec.prismatic[j]:
                through = False
                break
            axis_frame = frames[j]
            o, a = axis_frame[:3, 3], axis_frame[:3, :3] @ ch.axes[j]
            if np.linalg.norm(np.cross(flange - o, a)) > 1e-6:
                through = False
                break
        if not through:
            break
        T = frames[i - 1]
        p_local = T[:3, :3].T @ (flange - T[:3, 3])
        reach = min(_piece_distance(pc, p_local) for pc in link_pieces(spec, i))
        if reach > 1e-3:
            break
        out.append(spec.links[i].name)
    return tuple(reversed(out))


def _piece_distance(piece, p: np.ndarray) -> float:
    """Distance (m) from point ``p`` (link frame) to a drawing piece (a cylinder or sphere); 0 inside."""
    d = p - piece.center
    if piece.length <= 0:
        return max(0.0, float(np.linalg.norm(d)) - piece.radius)
    u = piece.rotation[:, 2]
    z = float(d @ u)
    rho = float(np.linalg.norm(d - z * u))
    dz = max(0.0, abs(z) - piece.length / 2)
    dr = max(0.0, rho - piece.radius)
    return math.hypot(dz, dr)
