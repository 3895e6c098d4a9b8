"""The workpieces a program carries, in the collision check.

A pick-and-place program grips a workpiece (a vacuum cup or gripper switched on, M3, in touch
with it) and carries it until it lets go (M5). For the collision check the carried piece is part
of the robot: it must not hit a fixture, a wall, another piece or the arm on the way; it may
touch the work bodies (set down on the table) as the tool may; and once let go it stays where it
was set down, an obstacle for what follows. :func:`carried_contacts` splits the joint path where
the tool's output grips or lets go (the program's :class:`~armtwin.controllers.gcode.outputs.OutputTimeline`)
and checks each stretch with a :class:`~armtwin.envs.collision.CollisionModel` of the cell as it
is then: the pieces where they were last set down, the one carried riding on the tool.

What is gripped follows the grippers' rules: when the output switches on, a vacuum cup grips the
nearest movable piece within :data:`~armtwin.envs.gripper.GRIP_REACH` of the tool (an exact
distance query, :class:`~armtwin.envs.gripper.VacuumGripper`); a parallel gripper the piece that
stands between its open jaws (:class:`~armtwin.envs.gripper.ParallelGripper`'s jaws close on it). The check is kinematic: a piece is carried exactly with the tool
and rests where it was let go (one let go in the air is assumed to stay there; ``armtwin run``
shows it fall).

Units: m, s inside.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..controllers.tools import ToolKind
from ..robots.workcell import Cell, ShapeKind
from .collision import TOOL_LINK, CollisionModel, Contact
from .gripper import GRIP_REACH

__all__ = ["Carry", "carried_contacts", "carries"]


@dataclass(frozen=True, eq=False)
class Carry:
    """One piece carried along a path.

    Attributes:
        piece: the cell body's name.
        start, end: the samples it is held on (indices into the path; ``end`` is where it is let go).
        grip: (4, 4) its pose in the tool's frame, m.
    """

    piece: str
    start: int
    end: int
    grip: np.ndarray


class _Cells:
    """Collision models of a cell with its pieces moved, made once per arrangement (closed together)."""

    def __init__(self, base: CollisionModel) -> None:
        self.base = base
        self._made: dict[tuple, CollisionModel] = {}

    def model(self, poses: dict[str, np.ndarray], held: tuple[str, np.ndarray] | None) -> CollisionModel:
        cell = self.base.cell
        assert cell is not None
        moved = {name: T for name, T in poses.items() if not np.array_equal(T, cell.body(name).pose)}
        if held is None and not moved:
            return self.base
        key = (tuple(sorted((k, v.tobytes()) for k, v in moved.items())), None if held is None else (held[0], held[1].tobytes()))
        m = self._made.get(key)
        if m is None:
            bodies = tuple(replace(b, pose=poses.get(b.name, b.pose)) for b in cell.bodies
                           if held is None or b.name != held[0])
            carried = None if held is None else (cell.body(held[0]), held[1])
            m = CollisionModel(self.base.spec, replace(cell, bodies=bodies), tool=self.base.tool,
                               self_collision=self.base.self_collision,
                               clearance=self.base.clearance, held=carried)
            self._made[key] = m
        return m

    def close(self) -> None:
        for m in self._made.values():
            m.close()
        self._made.clear()


def _stretches(grips: np.ndarray) -> list[tuple[int, int, bool]]:
    """(first, last, gripping) sample indices of the runs of equal ``grips``."""
    change = (np.flatnonzero(np.diff(grips.astype(np.int8))) + 1).tolist()
    bounds = [0, *change, len(grips)]
    return [(a, b - 1, bool(grips[a])) for a, b in zip(bounds[:-1], bounds[1:])]


def _gripped(model: CollisionModel, q: np.ndarray, names: list[str]) -> tuple[str, np.ndarray] | None:
    """The piece the tool grips at joints ``q`` — the nearest of ``names`` within the grip reach —
    and its pose in the tool's frame, or None."""
    if model.tool is None or np.isnan(q).any():
        return None
    poses = model.link_poses(q[None])[0]
    tool = model.link_names.index(TOOL_LINK)
    best, dist = None, GRIP_REACH
    if model.tool.kind is ToolKind.GRIPPER:        # the jaws close on what stands between them
        points = poses[tool] @ _jaw_span(model.tool)
        for name in names:
            inside = _inside(model.cell.body(name), model.body_pose(name), points)    # type: ignore[union-attr]
            if inside.any():
                best = name
                break
    else:
        for name in names:
            d = model.body_distance(tool, name, q, GRIP_REACH + 1e-3)
            if d <= dist:
                best, dist = name, d
    if best is None:
        return None
    return best, np.linalg.inv(poses[tool]) @ model.body_pose(best)


def _jaw_span(tool) -> np.ndarray:
    """(4, P) homogeneous points of the space between a gripper's open jaws, in the flange frame
    (a grid over the inner faces' gap and the jaws' length, on their mid-plane)."""
    from ..robots.tooling import JAW_THICK, jaw_boxes, jaw_offset
    inner = jaw_offset(tool) - JAW_THICK / 2
    (_, _, z), (_, _, length) = jaw_boxes(tool)[0]
    X, Z = np.meshgrid(np.linspace(-inner, inner, 9), np.linspace(z - length / 2, z + length / 2, 9))
    return np.stack([X.ravel(), np.zeros(X.size), Z.ravel(), np.ones(X.size)])


def _inside(body, pose: np.ndarray, points: np.ndarray) -> np.ndarray:
    """(P,) which of the world ``points`` (4, P) lie inside a box, cylinder or sphere body at
    ``pose`` (a mesh: none — the check does not grip meshes with jaws)."""
    local = (np.linalg.inv(pose) @ points)[:3]
    size = np.asarray(body.size, dtype=float)
    if body.shape is ShapeKind.BOX:
        return np.all(np.abs(local) <= size[:, None] / 2, axis=0)
    if body.shape is ShapeKind.CYLINDER:
        return (np.hypot(local[0], local[1]) <= size[0]) & (np.abs(local[2]) <= size[1] / 2)
    if body.shape is ShapeKind.SPHERE:
        return np.linalg.norm(local, axis=0) <= size[0]
    return np.zeros(points.shape[1], dtype=bool)


def carries(model: CollisionModel, Q: np.ndarray, grips: np.ndarray) -> list[Carry]:
    """The pieces the path carries: where the tool grips (``grips`` (K,) bool per sample) with a
    movable piece of ``model``'s cell within reach. Pieces let go stay where they were set down."""
    return _walk(model, np.asarray(Q, dtype=float), np.asarray(grips, dtype=bool), None)[1]


def carried_contacts(model: CollisionModel, Q: np.ndarray, times: np.ndarray, lines: np.ndarray,
                     grips: np.ndarray) -> list[Contact]:
    """:meth:`CollisionModel.check` of a path that carries workpieces: the first contact of each
    pair, the carried pieces part of the robot while held and obstacles where they were set down
    (see the module docstring). ``grips``: (K,) the tool's output grips at each sample."""
    Q = np.asarray(Q, dtype=float)
    grips = np.asarray(grips, dtype=bool)
    cell = model.cell
    if cell is None or model.tool is None or not grips.any() or not any(b.mass > 0 for b in cell.bodies):
        return model.check(Q, times, lines)
    return _walk(model, Q, grips, (np.asarray(times, dtype=float), np.asarray(lines)))[0]


def _walk(model: CollisionModel, Q: np.ndarray, grips: np.ndarray, timing) -> tuple[list[Contact], list[Carry]]:
    """Follow the path's stretches of gripping and not: the pieces carried and, with ``timing``
    ((times, lines) of the samples), every stretch checked in the cell as it is then (the first
    contact of each pair over all stretches)."""
    cell: Cell | None = model.cell
    if cell is None or model.tool is None:
        return (model.check(Q, *timing) if timing is not None else []), []
    movable = [b.name for b in cell.bodies if b.mass > 0]
    poses = {name: cell.body(name).pose for name in movable}
    cells = _Cells(model)
    found: dict[tuple[str, str], Contact] = {}
    carried: list[Carry] = []
    try:
        for a, b, on in _stretches(grips):
            held = _gripped(cells.model(poses, None), Q[a], movable) if on else None
            # an output changes at a sample (the node where its line stands): the interval after a
            # sample moves in that sample's state, so a stretch's last interval ends at the next one
            end = min(b + 1, len(Q) - 1)
            if timing is not None:
                m = cells.model(poses, held)
                for c in m.check(Q[a:end + 1], timing[0][a:end + 1], timing[1][a:end + 1]):
                    key = (c.link, c.other)
                    if key not in found or c.time < found[key].time:
                        found[key] = c
            if held is not None:
                name, rel = held
                carried.append(Carry(name, a, end, rel))
                last = end                               # let go at the next stretch's first sample
                while last > a and np.isnan(Q[last]).any():
                    last -= 1
                tool_pose = model.link_poses(Q[last][None])[0][model.link_names.index(TOOL_LINK)]
                poses[name] = tool_pose @ rel           # let go: it stays where it was set down
    finally:
        cells.close()
    return sorted(found.values(), key=lambda c: (c.time, c.link, c.other)), carried
