"""Tools on the flange: what they are, where their tool centre point (TCP) is, what they weigh.

A tool table maps tool numbers (the ``T`` word of G-code) to :class:`Tool` entries: a name, a
:class:`ToolKind` (spindle, laser, pen, vacuum gripper, parallel gripper, none), the TCP as a
transform from the flange (position in mm and orientation as roll–pitch–yaw in degrees at the
edge, SI inside), the tool's mass and centre of mass (a payload for the dynamic joint models),
and what its ``S`` word means. IK, preflight, runs, videos, Gym envs and the pendant work at the
TCP: the flange pose is ``T_flange = T_tcp · tcp⁻¹``.

Tables are TOML files (docs/GCODE.md, "Tools")::

    [tool.1]
    name = "spindle, 6 mm end mill"
    kind = "spindle"
    tcp = [0, 0, 120]        # mm, in the flange frame (z out of the flange)
    rpy = [0, 0, 0]          # deg, the TCP frame's orientation in the flange frame
    mass = 1.4               # kg
    com = [0, 0, 55]         # mm, in the flange frame
    s_max = 24000            # the S word's largest value (rpm for a spindle, power units for a laser)
    width = 6                # mm: what the tool marks or cuts across (pen line, laser spot, cutter)
    output = 2               # optional: the digital output (M62–M65 P2) that works it, not M3/M5
    cut = 20                 # mm: how deep it may go into work (a cutter's flute length)

Without a file the built-in table :func:`default_tools` holds T0 (no tool: the TCP is the
flange) and one tool of each kind. Pure numpy: no PyBullet.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .choices import Choice
from .transforms import rpy_to_matrix

__all__ = ["ToolKind", "Tool", "ToolTable", "ToolTableError", "default_tools", "load_tools", "tool_from_entry",
           "MAX_TOOL_NUMBER", "MAX_TCP_MM", "MAX_TOOL_MASS",
           "MAX_DIGITAL_OUTPUT", "MAX_CUT_MM"]

#: the largest tool number (LinuxCNC's pocket numbers go higher; a robot's rack does not)
MAX_TOOL_NUMBER = 9999
#: the farthest a TCP may be from the flange, mm
MAX_TCP_MM = 2000.0
#: the highest digital output number (M62–M65 P n), LinuxCNC's motion.digital-out-NN
MAX_DIGITAL_OUTPUT = 31
#: the deepest a tool may go into work (a cutter's flute length), mm
MAX_CUT_MM = 200.0
#: the heaviest tool, kg (beyond any of armtwin's robots' payload, so a payload study can exceed it)
MAX_TOOL_MASS = 50.0


class ToolKind(Choice):
    """What a tool does, and so what ``M3``/``M4``/``M5`` and ``S`` mean for it."""

    __label__ = "tool kind"

    NONE = "none"                  # the bare flange
    SPINDLE = "spindle"            # M3/M4: turn cw/ccw at S rpm
    LASER = "laser"                # M3: constant power S; M4: power scaled with speed, off in G0
    PEN = "pen"                    # M3: pen down, M5: pen up
    VACUUM = "vacuum"              # M3 (or its digital output): suction on, holds what it touches
    GRIPPER = "gripper"            # parallel jaws: M3 closes, M5 opens (or digital outputs)

    @property
    def marks(self) -> bool:
        """Whether the tool leaves marks on a surface it touches while on (pen, laser)."""
        return self in (ToolKind.PEN, ToolKind.LASER)

    @property
    def grips(self) -> bool:
        """Whether the tool holds objects while on (vacuum, gripper)."""
        return self in (ToolKind.VACUUM, ToolKind.GRIPPER)


class ToolTableError(ValueError):
    """A tool table that cannot be used; the message names the file, the key and why."""


@dataclass(frozen=True)
class Tool:
    """One tool. SI inside.

    Attributes:
        number: the T number (0: no tool).
        name: what people call it.
        kind: :class:`ToolKind`.
        tcp: (4, 4) the TCP frame in the flange frame (m).
        mass: kg.
        com: (3,) centre of mass in the flange frame, m.
        s_max: the S word's largest value (rpm, or the laser's power scale); 0: S not used.
        width: what the tool marks or cuts across, m.
        output: the digital output (M62–M65 P n) that works the tool — the valve of a vacuum cup,
            a gripper's solenoid — instead of the tool output M3/M5; None: M3/M4 on, M5 off.
        cut: how deep the tool may go into work bodies, m — a cutter's flute length: a milling
            program whose Z0 is the stock's top cuts below it. The collision check lets the tool
            press into work as deep as the larger of this and the cell's ``touch``.
    """

    number: int
    name: str
    kind: ToolKind = ToolKind.NONE
    tcp: np.ndarray = field(default_factory=lambda: np.eye(4))
    mass: float = 0.0
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    s_max: float = 0.0
    width: float = 0.0
    output: int | None = None
    cut: float = 0.0

    def __post_init__(self) -> None:
        tcp = np.array(self.tcp, dtype=float)
        com = np.array(self.com, dtype=float).reshape(3)
        if tcp.shape != (4, 4) or not np.all(np.isfinite(tcp)) or not np.allclose(tcp[3], [0, 0, 0, 1]):
            raise ValueError(f"tool {self.number}: tcp must be a finite (4, 4) transform")
        if not np.allclose(tcp[:3, :3] @ tcp[:3, :3].T, np.eye(3), atol=1e-9):
            raise ValueError(f"tool {self.number}: the TCP's rotation is not a rotation")
        tcp.flags.writeable = False
        com.flags.writeable = False
        object.__setattr__(self, "tcp", tcp)
        object.__setattr__(self, "com", com)
        object.__setattr__(self, "kind", ToolKind.parse(self.kind))
        if not (math.isfinite(self.cut) and 0.0 <= self.cut <= MAX_CUT_MM / 1000.0):
            raise ValueError(f"tool {self.number}: cut must be 0 to {MAX_CUT_MM:g} mm, got {self.cut * 1000:g} mm")
        if self.output is not None and not (isinstance(self.output, int) and 0 <= self.output <= MAX_DIGITAL_OUTPUT):
            raise ValueError(f"tool {self.number}: output must be a digital output 0 to {MAX_DIGITAL_OUTPUT}, "
                             f"got {self.output!r}")

    @property
    def offset(self) -> np.ndarray:
        """(3,) the TCP's position in the flange frame, m."""
        return self.tcp[:3, 3].copy()

    @property
    def length(self) -> float:
        """The TCP's distance along the flange's z axis, m (the tool length G43 applies)."""
        return float(self.tcp[2, 3])

    def flange_of(self, T_tcp: np.ndarray) -> np.ndarray:
        """The flange pose ((..., 4, 4)) that puts this tool's TCP at ``T_tcp`` ((..., 4, 4))."""
        return np.asarray(T_tcp, dtype=float) @ _inverse(self.tcp)

    def tcp_of(self, T_flange: np.ndarray) -> np.ndarray:
        """The TCP pose ((..., 4, 4)) of a flange pose ((..., 4, 4))."""
        return np.asarray(T_flange, dtype=float) @ self.tcp


def _inverse(T: np.ndarray) -> np.ndarray:
    R, p = T[:3, :3], T[:3, 3]
    out = np.eye(4)
    out[:3, :3] = R.T
    out[:3, 3] = -R.T @ p
    return out


NO_TOOL = Tool(0, "no tool (the flange)")


@dataclass(frozen=True)
class ToolTable(Mapping[int, Tool]):
    """Tools by number; ``table[0]`` is always the bare flange. ``source``: the file, or "built-in"."""

    tools: Mapping[int, Tool]
    source: str = "built-in"

    def __post_init__(self) -> None:
        tools = dict(self.tools)
        tools.setdefault(0, NO_TOOL)
        object.__setattr__(self, "tools", dict(sorted(tools.items())))

    def __getitem__(self, number: int) -> Tool:
        return self.tools[number]

    def __iter__(self) -> Iterator[int]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)


def default_tools() -> ToolTable:
    """The built-in table: T0 the flange, and one tool of each kind (lengths along the flange's z axis)."""
    def t(n, name, kind, length_mm, mass, com_mm, s_max=0.0, width_mm=0.0):
        tcp = np.eye(4)
        tcp[2, 3] = length_mm / 1000.0
        return Tool(n, name, kind, tcp, mass, np.array([0.0, 0.0, com_mm / 1000.0]), s_max, width_mm / 1000.0)
    return ToolTable({
        1: t(1, "pen holder, 0.5 mm pen", ToolKind.PEN, 100.0, 0.15, 45.0, 0.0, 0.6),
        2: replace(t(2, "spindle, 6 mm end mill", ToolKind.SPINDLE, 120.0, 1.4, 55.0, 24000.0, 6.0), cut=0.02),
        3: t(3, "diode laser, 5 W", ToolKind.LASER, 80.0, 0.45, 35.0, 1000.0, 0.2),
        4: t(4, "vacuum cup, 30 mm", ToolKind.VACUUM, 90.0, 0.25, 40.0, 0.0, 30.0),
        5: t(5, "parallel gripper, 40 mm stroke", ToolKind.GRIPPER, 140.0, 0.8, 50.0, 0.0, 40.0),
    })


_KEYS = {"name", "kind", "tcp", "rpy", "mass", "com", "s_max", "width", "output", "cut"}


def load_tools(path: str | Path) -> ToolTable:
    """Read a tool table (TOML, see the module docstring).

    Raises:
        ToolTableError: naming the file, the key (e.g. ``tool.3.tcp``) and why (a ValueError:
            one line at the command line).
        OSError: the file cannot be read.
    """
    source = str(path)
    with open(path, "rb") as f:
        try:
            data = tomllib.load(f)
        except tomllib.TOMLDecodeError as exc:
            raise ToolTableError(f"{source}: not valid TOML: {exc}") from None
    for key in data:
        if key != "tool":
            raise ToolTableError(f"{source}: {key}: unknown key; a tool table has [tool.N] tables")
    table = data.get("tool", {})
    if not isinstance(table, dict) or not table:
        raise ToolTableError(f"{source}: no [tool.N] table")
    tools: dict[int, Tool] = {}
    for key, entry in table.items():
        where = f"{source}: tool.{key}"
        if not (key.isascii() and key.isdigit()):
            raise ToolTableError(f"{where}: a tool number is a whole number, got {key!r}")
        number = int(key)
        if not 0 <= number <= MAX_TOOL_NUMBER:
            raise ToolTableError(f"{where}: tool numbers go from 0 to {MAX_TOOL_NUMBER}")
        if not isinstance(entry, dict):
            raise ToolTableError(f"{where}: must be a table")
        tools[number] = tool_from_entry(entry, number, where)
    return ToolTable(tools, source)


def tool_from_entry(entry: Mapping, number: int, where: str) -> Tool:
    """One tool from a mapping with a tool table entry's keys and units (mm, deg, kg: see the module
    docstring), for tools given in code (the Gym envs' ``tool={"tcp": [0, 0, 100], "mass": 0.3}``).

    Raises:
        ToolTableError: an unknown key or a bad value, naming ``where`` and the key (``tool.tcp: …``).
    """
    if not isinstance(entry, Mapping):
        raise ToolTableError(f"{where}: a tool entry is a mapping of {', '.join(sorted(_KEYS))}")
    for k in entry:
        if k not in _KEYS:
            raise ToolTableError(f"{where}.{k}: unknown key; a tool has {', '.join(sorted(_KEYS))}")
    return _tool(number, entry, where)


def _vector(entry: Mapping, key: str, where: str, default, limit: float) -> np.ndarray:
    v = entry.get(key, default)
    if (not isinstance(v, list) or len(v) != 3
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)):
        raise ToolTableError(f"{where}.{key}: three numbers, got {v!r}")
    a = np.array(v, dtype=float)
    if not (np.all(np.isfinite(a)) and np.all(np.abs(a) <= limit)):
        raise ToolTableError(f"{where}.{key}: numbers must be finite and within ±{limit:g}, got {v!r}")
    return a


def _number(entry: Mapping, key: str, where: str, default: float, lo: float, hi: float, unit: str) -> float:
    v = entry.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and lo <= v <= hi):
        raise ToolTableError(f"{where}.{key}: a number from {lo:g} to {hi:g} {unit}, got {v!r}")
    return float(v)


def _tool(number: int, entry: Mapping, where: str) -> Tool:
    name = entry.get("name", f"tool {number}")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise ToolTableError(f"{where}.name: a text of 1 to 200 characters")
    try:
        kind = ToolKind.parse(entry.get("kind", "none"))
    except ValueError as exc:
        raise ToolTableError(f"{where}.kind: {exc}") from None
    xyz = _vector(entry, "tcp", where, [0, 0, 0], MAX_TCP_MM) / 1000.0
    rpy = _vector(entry, "rpy", where, [0, 0, 0], 360.0)
    com = _vector(entry, "com", where, [0, 0, 0], MAX_TCP_MM) / 1000.0
    mass = _number(entry, "mass", where, 0.0, 0.0, MAX_TOOL_MASS, "kg")
    s_max = _number(entry, "s_max", where, 0.0, 0.0, 1e6, "")
    width = _number(entry, "width", where, 0.0, 0.0, 500.0, "mm") / 1000.0
    cut = _number(entry, "cut", where, 0.0, 0.0, MAX_CUT_MM, "mm") / 1000.0
    output = entry.get("output")
    if output is not None and (isinstance(output, bool) or not isinstance(output, int)
                               or not 0 <= output <= MAX_DIGITAL_OUTPUT):
        raise ToolTableError(f"{where}.output: the number of a digital output (M62–M65 P), a whole number "
                             f"from 0 to {MAX_DIGITAL_OUTPUT}, got {output!r}")
    tcp = np.eye(4)
    tcp[:3, :3] = rpy_to_matrix(np.radians(rpy))
    tcp[:3, 3] = xyz
    return Tool(number, name.strip(), kind, tcp, mass, com, s_max, width, output, cut)
