"""Collision preflight: a joint path checked against a workcell and against the robot itself.

:class:`CollisionModel` holds the robot's links (the very cylinders and spheres its URDF collides
with, :func:`~armtwin.robots.urdfgen.link_pieces`, and a tool's cylinder), the cell's bodies and
the robot's allowed-collision matrix (:func:`allowed_pairs`), and checks a joint path — the
preflight's IK samples, joints varying linearly between them as the control loop commands them —
without stepping any physics. It reports the **first contact of each distinct pair** (link–body
or link–link): when, on which G-code line, and how deep (:class:`Contact`).

How it is sure to miss nothing between samples (conservative advancement):

* for every pair and every interval between two neighbouring samples it knows a **lower bound
  of their distance** at each end — separating-axis projections of the link's shapes against
  the body's (box axes, the cylinder axes, the line between centres), all samples at once in
  numpy — and an **upper bound of how far any point of the link moves** across the interval:
  ``D = Σ_j |Δq_j| · ρ_j`` (ρ_j: how far the link's shapes are from joint j's axis at the
  interval's start, plus how far the later joints' changes can carry them away from it — bounded
  by the chain's reach in any configuration; 1 for a prismatic joint);
* the pair cannot touch inside the interval when the two ends' distances add up to more than
  ``D`` (each point moves at most ``D``, and from one end or the other it is less than half
  way): then nothing more is done;
* otherwise, against a box (or a mesh's bounding box), a **second-order bound** may still clear
  it: a point's signed distance to a face's plane is linear in the point, so along the interval it
  stays within ``M/8`` of the chord between its ends, M bounding any point's acceleration as the
  joints move linearly (:meth:`CollisionModel._bend`); the link's least distance to one face's
  plane at both ends, less ``M/8``, bounds its distance to the box over the whole interval. This
  is what a tool sliding on a work surface needs — the first-order ``D`` is as large as the step,
  the second-order term is some µm;
* otherwise the interval is split in two at its middle — the bound at all such middles at
  once, and where it allows an overlap the exact distance, PyBullet's ``getClosestPoints``
  (GJK/EPA: the signed distance, negative when the shapes overlap) in a collision-only DIRECT
  client of its own — down to intervals in which nothing moves more than
  :data:`REFINE_TOLERANCE`. A contact deeper than half that tolerance cannot hide between two
  samples. Where a bound at a sample allows an overlap, the sample is measured exactly too.

PyBullet rather than python-fcl or trimesh: it is already a dependency, its distance queries are
exact for the URDF's own primitives (a cylinder is a cylinder, not a mesh), it reads the cell's
STL/OBJ meshes as concave triangle meshes, and the numpy broad phase above leaves it only the
few (sample, pair) queries near contact (~12 µs each), so a faster narrow phase would not show.

The end effector (:func:`~armtwin.robots.workcell.end_effector_links`, and a tool) may touch
**work** bodies, pressing in at most the cell's ``touch`` — the tool as deep as the larger of that and
its ``cut`` (a cutter's flute length); everything else is a collision.
Units: m, rad, s inside; the messages in mm and s.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..controllers.gcode.errors import ErrorCode
from ..controllers.kinematics import chain_of, link_frames_batch
from ..controllers.tools import Tool, ToolKind
from ..robots.tooling import tool_pieces
from ..robots.urdfgen import link_pieces
from ..robots.workcell import BodyRole, Cell, CellBody, ShapeKind, end_effector_links
from .sim import World
from .workcell import body_shapes

if TYPE_CHECKING:
    from ..controllers.gcode.preflight import CheckPass, Findings, PathCheck

__all__ = ["Contact", "CollisionModel", "allowed_pairs", "collision_pass", "timed_collision_pass", "clearance_pass", "REFINE_TOLERANCE", "CONTACT_EPS",
           "CHUNK"]

#: intervals are split until no point of a link moves more than this across one, m
REFINE_TOLERANCE = 5e-5
#: overlaps shallower than this count as touching, not as a contact, m
CONTACT_EPS = 1e-5
#: samples whose link poses and bounds are computed at once
CHUNK = 20_000
#: random configurations sampled to generate the allowed-collision matrix
ACM_SAMPLES = 400
#: a pair touching in at least this share of them always touches: allowed
ACM_ALWAYS = 0.95
TOOL_LINK = "tool"
#: how a carried workpiece's name ends as a link of the robot ("box (carried)")
CARRIED = " (carried)"


@dataclass(frozen=True)
class Contact:
    """The first contact of one pair along a path.

    Attributes:
        link: the robot's link (URDF name; ``tool`` for a tool on the flange).
        other: the cell body's name, or the other link for a self-collision.
        self_collision: ``other`` is a link of the robot.
        time: program time of the first contact, s.
        line: its G-code line (0 for a path given without lines).
        depth: how deep they overlap, m: the deepest along the first contact's line.
        q: (n,) the joints at the first contact, rad / m.
        allowed: how deep the pair may overlap, m (the cell's ``touch`` for the end effector on a
            work body, else 0).
    """

    link: str
    other: str
    self_collision: bool
    time: float
    line: int
    depth: float
    q: np.ndarray
    allowed: float = 0.0

    def to_dict(self) -> dict:
        return {"link": self.link, "other": self.other, "self_collision": self.self_collision,
                "time_s": self.time, "line": self.line, "depth_mm": self.depth * 1000,
                "allowed_mm": self.allowed * 1000}

    def describe(self) -> str:
        what = "touches" if not self.self_collision else "touches link"
        allowed = f" (it may press {self.allowed * 1000:g} mm into this work)" if self.allowed > 0 else ""
        return (f"{self.link} {what} {self.other} at t = {self.time:.3f} s, up to "
                f"{self.depth * 1000:.1f} mm deep on this line{allowed}")


@dataclass(frozen=True)
class _Piece:
    link: int          # index into the model's links
    center: np.ndarray  # (3,) m, link frame
    axis: np.ndarray    # (3,) unit, link frame
    half: float         # half length along the axis, m (0: a sphere)
    radius: float       # m


@dataclass(frozen=True)
class _Obstacle:
    name: str
    kind: str               # "box" | "cylinder" | "sphere"
    rotation: np.ndarray    # (3, 3) world
    center: np.ndarray      # (3,) world
    half: np.ndarray        # box: (3,) half extents; cylinder: (radius, half length, 0); sphere: (radius, 0, 0)
    work: bool


@dataclass(frozen=True)
class _Pair:
    a: int               # link index
    b: int               # obstacle index (environment pair) or link index (self pair)
    self_pair: bool
    limit: float         # the pair touches when its distance is below this, m (−touch for the end effector on work)


class CollisionModel:
    """A robot in a workcell, for collision queries along joint paths (see the module docstring).

    Args:
        spec: the robot.
        cell: its workcell (the robot stands at ``cell.mount``); None: no bodies, self-collision only.
        tool: a tool on the flange (its collision cylinder is part of the robot), or None.
        self_collision: also check the robot against itself.
        clearance: m; more than 0: find where pairs come closer than this instead of where they
            touch (near misses: :func:`clearance_pass`); the end effector on work bodies, which
            it is meant to touch, is left out then.
        held: a workpiece the tool carries, and its pose in the tool's frame: part of the robot
            (a link of its own after the tool, :data:`CARRIED` in its name), touching the tool and
            the end effector freely, the work bodies as the tool may, everything else not at all.
            Leave it out of ``cell`` (:mod:`armtwin.envs.carrying` does both).
    """

    def __init__(self, spec, cell: Cell | None = None, *, tool: Tool | None = None,
                 self_collision: bool = True, clearance: float = 0.0,
                 held: tuple[CellBody, np.ndarray] | None = None) -> None:
        if not (np.isfinite(clearance) and 0 <= clearance <= 0.1):
            raise ValueError(f"clearance must be 0 to 100 mm, got {clearance * 1000:g} mm")
        self.clearance = float(clearance)
        self.self_collision = bool(self_collision)
        self.spec = spec
        self.cell = cell
        self.tool = tool if tool is not None and tool.kind is not ToolKind.NONE else None
        self._chain = chain_of(spec)
        self._mount = np.eye(4) if cell is None else cell.mount
        n = spec.dof
        self.link_names: list[str] = [lk.name for lk in spec.links] + ([TOOL_LINK] if self.tool else [])
        self._pieces: list[_Piece] = []
        for i in range(len(spec.links)):
            for p in link_pieces(spec, i):
                self._pieces.append(_Piece(i, p.center, p.rotation[:, 2].copy(), p.length / 2, p.radius))
        if self.tool is not None:
            for centre, half, r in tool_pieces(self.tool):
                self._pieces.append(_Piece(n + 1, np.array(centre), np.array([0.0, 0.0, 1.0]), half, r))
        self._ee = {self.link_names.index(x) for x in end_effector_links(spec)} | ({n + 1} if self.tool else set())
        self._world = World(ground=False)
        self.held = held
        self._attach = len(self.link_names) - 1        # the link a carried piece rides on: the tool (or the flange)
        if held is not None:
            body, rel = held
            self.link_names.append(f"{body.name}{CARRIED}")
            self._pieces.append(self._held_piece(len(self.link_names) - 1, body, np.asarray(rel, dtype=float)))
            self._ee.add(len(self.link_names) - 1)
        self._rho = self._displacement_coefficients()
        self._link_bodies = [self._world.add_shapes(self._link_shapes(i), mass=1.0, visual=False)
                             for i in range(len(self.link_names))]
        self._obstacles: list[_Obstacle] = []
        self._obstacle_bodies: list[int] = []
        for body in (cell.bodies if cell is not None else ()):
            bid = self._world.add_shapes(body_shapes(body), body.pose, visual=False)
            self._obstacle_bodies.append(bid)
            self._obstacles.append(self._bounding(body, bid))
        moving = range(1, len(self.link_names))          # the base link never moves
        touch = cell.touch if cell is not None else 0.0
        # the tool itself may go as deep as its cutter's flutes (a milling program cuts below Z0)
        depth = {a: max(touch, self.tool.cut) if self.tool is not None and a == n + 1 else touch for a in self._ee}
        c = self.clearance
        pairs = [_Pair(a, k, False, -depth[a] if (ob.work and a in self._ee) else c)
                 for a in moving for k, ob in enumerate(self._obstacles) if not (c > 0 and ob.work and a in self._ee)]
        self.allowed: frozenset[tuple[str, str]] = frozenset()
        if self_collision:
            self.allowed = allowed_pairs(spec, self.tool)
            if held is not None:        # the carried piece rests on the tool: it may touch the end effector
                self.allowed |= {(self.link_names[e], self.link_names[-1]) for e in self._ee}
            for a in range(len(self.link_names)):
                for b in range(a + 1, len(self.link_names)):
                    if (self.link_names[a], self.link_names[b]) not in self.allowed:
                        pairs.append(_Pair(a, b, True, c))
        self.pairs = pairs
        self._by_link: dict[int, list[int]] = {}
        for k, pc in enumerate(self._pieces):
            self._by_link.setdefault(pc.link, []).append(k)

    def close(self) -> None:
        self._world.close()

    def __enter__(self) -> "CollisionModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ----- geometry --------------------------------------------------------------------------
    def _held_piece(self, link: int, body: CellBody, rel: np.ndarray) -> _Piece:
        """The bound of a carried piece (its pose ``rel`` in the tool's frame): the cylinder or sphere
        around it (a box: the cylinder along its longest edge) — the exact shape is the narrow phase's."""
        R, c = rel[:3, :3], rel[:3, 3]
        if body.shape is ShapeKind.SPHERE:
            return _Piece(link, c.copy(), R[:, 2].copy(), 0.0, body.size[0])
        if body.shape is ShapeKind.CYLINDER:
            return _Piece(link, c.copy(), R[:, 2].copy(), body.size[1] / 2, body.size[0])
        if body.shape is ShapeKind.BOX:
            half, centre = np.asarray(body.size) / 2, np.zeros(3)
        else:                   # a mesh: the box around it in its own frame
            bid = self._world.add_shapes(body_shapes(body), np.eye(4), visual=False)
            lo, hi = self._world.aabb(bid)
            self._world.remove_body(bid)
            half, centre = (hi - lo) / 2, (hi + lo) / 2
        k = int(np.argmax(half))
        return _Piece(link, R @ centre + c, R[:, k].copy(), float(half[k]), float(np.linalg.norm(np.delete(half, k))))

    def _link_shapes(self, i: int) -> list:
        if self.held is not None and i == len(self.link_names) - 1:      # the carried piece, exactly
            body, rel = self.held
            return [(kind, size, np.asarray(rel, dtype=float) @ local) for kind, size, local in body_shapes(body)]
        out = []
        for p in self._pieces:
            if p.link != i:
                continue
            local = np.eye(4)
            z = p.axis
            helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
            x = np.cross(helper, z)
            x /= np.linalg.norm(x)
            local[:3, :3] = np.column_stack([x, np.cross(z, x), z])
            local[:3, 3] = p.center
            out.append(("sphere", (p.radius,), local) if p.half <= 0 else ("cylinder", (p.radius, 2 * p.half), local))
        return out

    def _bounding(self, body, bid: int) -> _Obstacle:
        work = body.role is BodyRole.WORK
        R, c = body.pose[:3, :3].copy(), body.pose[:3, 3].copy()
        if body.shape is ShapeKind.BOX:
            return _Obstacle(body.name, "box", R, c, np.asarray(body.size) / 2, work)
        if body.shape is ShapeKind.CYLINDER:
            return _Obstacle(body.name, "cylinder", R, c, np.array([body.size[0], body.size[1] / 2, 0.0]), work)
        if body.shape is ShapeKind.SPHERE:
            return _Obstacle(body.name, "sphere", R, c, np.array([body.size[0], 0.0, 0.0]), work)
        lo, hi = self._world.aabb(bid)            # a mesh: its world bounding box bounds it
        return _Obstacle(body.name, "box", np.eye(3), (lo + hi) / 2, (hi - lo) / 2, work)

    def _displacement_coefficients(self) -> np.ndarray:
        """(n, L): how far a point of link l can move per unit motion of joint j (m/rad, or 1 for
        a prismatic joint): the chain's joint offsets from joint j to link l, the prismatic strokes
        between, and the link's own shapes' extent — a bound for every configuration."""
        spec, n = self.spec, self.spec.dof
        L = len(self.link_names)
        extent = np.zeros(L)
        for p in self._pieces:
            extent[p.link] = max(extent[p.link], float(np.linalg.norm(p.center)) + p.half + p.radius)
        offset = [float(np.linalg.norm(spec.joints[k].origin.xyz)) for k in range(n)]   # joint k in link k's frame
        stroke = [max(abs(spec.lower[k]), abs(spec.upper[k])) if spec.prismatic[k] else 0.0 for k in range(n)]
        flange = float(np.linalg.norm(spec.tool.xyz))
        rho = np.zeros((n, L))
        for link in range(1, L):
            chain_link = min(link, n)            # the tool rides on the last link
            for j in range(chain_link):          # joint j (0-based) moves links j+1 ..
                if spec.prismatic[j]:
                    rho[j, link] = 1.0
                    continue
                reach = sum(offset[k] + stroke[k] for k in range(j + 1, chain_link)) + stroke[j]
                if link > n:                     # the tool, a carried piece: beyond the flange
                    reach += flange
                rho[j, link] = reach + extent[link]
        return rho

    def link_poses(self, Q: np.ndarray) -> np.ndarray:
        """(K, L, 4, 4) every link's frame in the world (base, links 1..n, the tool) for joints (K, n)."""
        Q = np.atleast_2d(Q)
        K = len(Q)
        frames = link_frames_batch(self._chain, Q)                 # in the mounting frame
        out = np.empty((K, len(self.link_names), 4, 4))
        out[:, 0] = self._mount
        out[:, 1:self.spec.dof + 1] = self._mount @ frames
        if self.tool is not None:
            out[:, self.spec.dof + 1] = out[:, self.spec.dof] @ self.spec.tool.matrix
        if self.held is not None:
            out[:, -1] = out[:, self._attach]
        return out

    # ----- bounds ----------------------------------------------------------------------------
    def _piece_world(self, poses: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        C, U = [], []
        for p in self._pieces:
            T = poses[:, p.link]
            R = T[:, :3, :3]
            C.append(np.einsum("kij,j->ki", R, p.center) + T[:, :3, 3])
            U.append(np.einsum("kij,j->ki", R, p.axis))
        return C, U

    @staticmethod
    def _extent(U: np.ndarray, a: np.ndarray, half: float, radius: float) -> np.ndarray:
        """Half extent of a cylinder (axis U (K, 3), half length, radius) projected on unit axes a."""
        c = np.abs(np.einsum("kj,kj->k", U, a)) if a.ndim == 2 else np.abs(U @ a)
        return half * c + radius * np.sqrt(np.clip(1.0 - c * c, 0.0, 1.0))

    def _bound_obstacle(self, C, U, p: _Piece, ob: _Obstacle) -> np.ndarray:
        d = C - ob.center
        best = np.full(len(C), -np.inf)
        if ob.kind == "box":
            axes = [ob.rotation[:, i] for i in range(3)]
            for a, e in zip(axes, ob.half):
                best = np.maximum(best, np.abs(d @ a) - self._extent(U, a, p.half, p.radius) - e)
            if p.half > 0:     # the piece's own axis
                box = sum(e * np.abs(U @ a) for a, e in zip(axes, ob.half))
                best = np.maximum(best, np.abs(np.einsum("kj,kj->k", d, U)) - p.half - box)
            local = d @ ob.rotation                          # towards the box's nearest point
            near = local - np.clip(local, -ob.half, ob.half)
            g = np.linalg.norm(near, axis=1)
            ok = g > 1e-12
            if ok.any():
                a = (near[ok] / g[ok, None]) @ ob.rotation.T  # world
                box = np.abs(a @ ob.rotation) @ ob.half
                s = np.einsum("kj,kj->k", d[ok], a) - self._extent(U[ok], a, p.half, p.radius) - box
                best[ok] = np.maximum(best[ok], s)
            return best
        r_ob = ob.half[0]
        if ob.kind == "sphere":
            g = np.linalg.norm(d, axis=1)
            a = d / np.maximum(g, 1e-12)[:, None]
            return g - self._extent(U, a, p.half, p.radius) - r_ob
        w, hh = ob.rotation[:, 2], ob.half[1]
        best = np.abs(d @ w) - self._extent(U, w, p.half, p.radius) - hh
        radial = d - np.outer(d @ w, w)
        g = np.linalg.norm(radial, axis=1)
        a = radial / np.maximum(g, 1e-12)[:, None]
        best = np.maximum(best, g - self._extent(U, a, p.half, p.radius) - r_ob)
        return best

    def _bound_pieces(self, Ca, Ua, pa: _Piece, Cb, Ub, pb: _Piece) -> np.ndarray:
        d = Cb - Ca
        g = np.linalg.norm(d, axis=1)
        a = d / np.maximum(g, 1e-12)[:, None]
        best = g - self._extent(Ua, a, pa.half, pa.radius) - self._extent(Ub, a, pb.half, pb.radius)
        for ax, own in ((Ua, pa), (Ub, pb)):
            if own.half > 0:
                other = pb if own is pa else pa
                Uo = Ub if own is pa else Ua
                s = (np.abs(np.einsum("kj,kj->k", d, ax)) - own.half
                     - self._extent(Uo, ax, other.half, other.radius))
                best = np.maximum(best, s)
        return best

    def lower_bounds(self, poses: np.ndarray) -> np.ndarray:
        """(K, P) a lower bound of each pair's signed distance at each sample, m."""
        C, U = self._piece_world(poses)
        K = len(poses)
        out = np.full((K, len(self.pairs)), np.inf)
        by_link: dict[int, list[int]] = {}
        for k, p in enumerate(self._pieces):
            by_link.setdefault(p.link, []).append(k)
        for i, pr in enumerate(self.pairs):
            for ka in by_link.get(pr.a, ()):
                pa = self._pieces[ka]
                if pr.self_pair:
                    for kb in by_link.get(pr.b, ()):
                        b = self._bound_pieces(C[ka], U[ka], pa, C[kb], U[kb], self._pieces[kb])
                        np.minimum(out[:, i], b, out=out[:, i])
                else:
                    b = self._bound_obstacle(C[ka], U[ka], pa, self._obstacles[pr.b])
                    np.minimum(out[:, i], b, out=out[:, i])
        return out

    def pair_bound(self, poses: np.ndarray, pair: int) -> np.ndarray:
        """(K,) the lower bound of one pair's signed distance (:meth:`lower_bounds`'s column), m —
        the bisection asks for one pair per interval."""
        pr = self.pairs[pair]
        out = np.full(len(poses), np.inf)
        for ka in self._by_link.get(pr.a, ()):
            pa = self._pieces[ka]
            Ca, Ua = self._piece_at(poses, pa)
            if pr.self_pair:
                for kb in self._by_link.get(pr.b, ()):
                    pb = self._pieces[kb]
                    Cb, Ub = self._piece_at(poses, pb)
                    np.minimum(out, self._bound_pieces(Ca, Ua, pa, Cb, Ub, pb), out=out)
            else:
                np.minimum(out, self._bound_obstacle(Ca, Ua, pa, self._obstacles[pr.b]), out=out)
        return out

    @staticmethod
    def _piece_at(poses: np.ndarray, p: _Piece) -> tuple[np.ndarray, np.ndarray]:
        T = poses[:, p.link]
        R = T[:, :3, :3]
        return np.einsum("kij,j->ki", R, p.center) + T[:, :3, 3], np.einsum("kij,j->ki", R, p.axis)

    def reach(self, poses: np.ndarray) -> np.ndarray:
        """(K, n, L): how far each link's shapes are from each joint's axis at the samples, m (the
        farthest piece's centre plus its half length and radius; 0 for links the joint does not move)."""
        K, n, L = len(poses), self.spec.dof, len(self.link_names)
        out = np.zeros((K, n, L))
        C, _ = self._piece_world(poses)
        for j in range(n):
            if self.spec.prismatic[j]:
                continue
            T = poses[:, j + 1]                               # link j+1 turns about joint j's axis
            o, a = T[:, :3, 3], T[:, :3, :3] @ self._chain.axes[j]
            for k, pc in enumerate(self._pieces):
                if pc.link < j + 1:
                    continue
                r = np.linalg.norm(np.cross(C[k] - o, a), axis=1) + pc.half + pc.radius
                np.maximum(out[:, j, pc.link], r, out=out[:, j, pc.link])
        return out

    def displacement(self, dQ: np.ndarray, reach: np.ndarray | None = None) -> np.ndarray:
        """(K, P) bound of the pair's relative motion (m) across intervals whose joints change by
        dQ (K, n) linearly.

        Every point of link l moves at most ``Σ_j |Δq_j| ρ_jl``, ρ_jl its largest distance from
        joint j's axis during the interval. Without ``reach`` ρ is the chain's bound for any
        configuration; with ``reach`` ((K, n, L) at the intervals' starts, :meth:`reach`) it is that
        distance plus how far the joints after j can carry the link away from the axis,
        ``Σ_{i>j} |Δq_i| ρ_il`` — much tighter where the arm is not stretched.
        """
        a = np.abs(dQ)
        if reach is None:
            move = a @ self._rho                               # (K, L)
        else:
            n = self.spec.dof
            later = np.zeros_like(reach)                       # Σ_{i>j} |Δq_i| ρ_il
            for j in range(n - 2, -1, -1):
                later[:, j] = later[:, j + 1] + a[:, j + 1, None] * self._rho[j + 1]
            rho = np.where(self.spec.prismatic[None, :, None], 1.0, np.minimum(reach + later, self._rho[None]))
            move = np.einsum("kj,kjl->kl", a, rho)
        out = np.empty((len(dQ), len(self.pairs)))
        for i, pr in enumerate(self.pairs):
            out[:, i] = move[:, pr.a] + (move[:, pr.b] if pr.self_pair else 0.0)
        return out

    # ----- exact distances -------------------------------------------------------------------
    def distance(self, pair: int, q: np.ndarray, within: float) -> float:
        """The exact signed distance of a pair at joints q (m; ``within`` when farther)."""
        pr = self.pairs[pair]
        poses = self.link_poses(q[None])[0]
        self._world.set_body_pose(self._link_bodies[pr.a], poses[pr.a])
        if pr.self_pair:
            self._world.set_body_pose(self._link_bodies[pr.b], poses[pr.b])
            other = self._link_bodies[pr.b]
        else:
            other = self._obstacle_bodies[pr.b]
        return self._world.distance(self._link_bodies[pr.a], other, within)

    def body_distance(self, link: int, body: str, q: np.ndarray, within: float) -> float:
        """The exact signed distance of link ``link`` (an index into :attr:`link_names`) at joints
        ``q`` to the cell body called ``body`` (m; ``within`` when farther)."""
        k = next(i for i, ob in enumerate(self._obstacles) if ob.name == body)
        self._world.set_body_pose(self._link_bodies[link], self.link_poses(np.asarray(q, float)[None])[0][link])
        return self._world.distance(self._link_bodies[link], self._obstacle_bodies[k], within)

    def body_pose(self, body: str) -> np.ndarray:
        """(4, 4) where the cell body called ``body`` stands in this model, m."""
        assert self.cell is not None
        return np.array(self.cell.body(body).pose)

    def pair_index(self, link: str, other: str) -> int:
        """The index of the pair (``link``, ``other``) in :attr:`pairs` (KeyError when it is not checked)."""
        for i in range(len(self.pairs)):
            if self.pair_names(i) == (link, other):
                return i
        raise KeyError((link, other))

    def pair_names(self, pair: int) -> tuple[str, str]:
        pr = self.pairs[pair]
        return self.link_names[pr.a], (self.link_names[pr.b] if pr.self_pair else self._obstacles[pr.b].name)

    # ----- the check -------------------------------------------------------------------------
    def check(self, Q: np.ndarray, times: np.ndarray | None = None, lines: np.ndarray | None = None) -> list[Contact]:
        """The first contact of each pair along the joint path ``Q`` (K, n) — joints linear between
        rows; rows with NaN (no IK) are skipped together with the intervals at their sides.

        Args:
            Q: (K, n) joints, rad / m.
            times: (K,) s (default: the row index).
            lines: (K,) the G-code line of each row; an interval belongs to the line of its end.

        Returns:
            One :class:`Contact` per pair that touches, in time order; its depth is the deepest
            overlap at the samples of the first contact's line.
        """
        Q = np.asarray(Q, dtype=float)
        K = len(Q)
        times = np.arange(K, dtype=float) if times is None else np.asarray(times, dtype=float)
        lines = np.zeros(K, dtype=np.int64) if lines is None else np.asarray(lines)
        found: dict[int, Contact] = {}
        valid = ~np.isnan(Q).any(axis=1)
        for c0 in range(0, max(K - 1, 1), CHUNK):
            c1 = min(c0 + CHUNK + 1, K)            # chunks overlap by one sample: every interval is seen
            self._check_chunk(Q[c0:c1], times[c0:c1], lines[c0:c1], valid[c0:c1], found)
        return sorted(found.values(), key=lambda c: (c.time, c.link, c.other))

    def _check_chunk(self, q, t, lines, ok, found: dict[int, Contact]) -> None:
        P = len(self.pairs)
        m = len(q)
        limit = np.array([p.limit for p in self.pairs])
        Lb = np.full((m, P), np.inf)
        reach = np.zeros((m, self.spec.dof, len(self.link_names)))
        poses = np.full((m, len(self.link_names), 4, 4), np.nan)
        if ok.any():
            known = self.link_poses(q[ok])
            poses[ok] = known
            Lb[ok] = self.lower_bounds(known) - limit
            reach[ok] = self.reach(known)
        # exact distances where the bound allows an overlap: the samples in contact
        first = np.full(P, m)                       # each pair's first sample in contact
        contact_d: dict[tuple[int, int], float] = {}
        for k, p in zip(*np.nonzero(Lb < -CONTACT_EPS)):
            if p in found:
                continue
            d = self.distance(int(p), q[k], 0.01 + limit[p]) - limit[p]
            Lb[k, p] = max(Lb[k, p], d)
            if d < -CONTACT_EPS:
                contact_d[(int(k), int(p))] = d
                first[p] = min(first[p], k)
        # intervals that may hide a contact: bisected, all of them level by level
        both = ok[:-1] & ok[1:]
        ka, pa = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        if m > 1 and both.any():
            D = np.zeros((m - 1, P))
            # the bound holds from either end: the nearer axis distances of the two ends serve
            D[both] = self.displacement(np.diff(q, axis=0)[both], np.minimum(reach[:-1], reach[1:])[both])
            pos = np.maximum(Lb, 0.0)
            sus = both[:, None] & (pos[:-1] + pos[1:] <= D) & (Lb[:-1] >= -CONTACT_EPS)
            sus &= np.arange(m - 1)[:, None] < first[None, :]          # nothing after a first contact matters
            for p in found:
                sus[:, p] = False
            ka, pa = np.nonzero(sus)
            clear = self._face_clear(q, poses, ka, pa, limit)
            ka, pa = ka[~clear], pa[~clear]
        s0, s1 = np.zeros(len(ka)), np.ones(len(ka))
        d0, d1 = np.maximum(Lb[ka, pa], 0.0), np.maximum(Lb[ka + 1, pa], 0.0)
        span = D[ka, pa] if len(ka) else np.zeros(0)
        hits: list[tuple[float, int, int, float, np.ndarray]] = []     # (time, pair, interval, distance, q)
        while len(ka):
            keep = (d0 + d1 <= span) & (span >= REFINE_TOLERANCE)
            ka, pa, s0, s1, d0, d1, span = (x[keep] for x in (ka, pa, s0, s1, d0, d1, span))
            if not len(ka):
                break
            sm = 0.5 * (s0 + s1)
            qm = q[ka] + sm[:, None] * (q[ka + 1] - q[ka])
            mid_poses = self.link_poses(qm)
            dm = np.empty(len(ka))
            for p in np.unique(pa):                   # each interval's own pair only
                rows = pa == p
                dm[rows] = self.pair_bound(mid_poses[rows], int(p)) - limit[p]
            for e in np.flatnonzero(dm < REFINE_TOLERANCE):            # the bound allows a contact: measure
                dm[e] = max(dm[e], self.distance(int(pa[e]), qm[e], 0.01 + limit[pa[e]]) - limit[pa[e]])
            hit = dm < -CONTACT_EPS
            for e in np.flatnonzero(hit):
                tm = t[ka[e]] + sm[e] * (t[ka[e] + 1] - t[ka[e]])
                hits.append((float(tm), int(pa[e]), int(ka[e]), float(dm[e]), qm[e]))
            dmp = np.maximum(dm, 0.0)
            # the earlier half always; the later half only where the middle is not a contact
            later = ~hit
            ka = np.concatenate([ka, ka[later]])
            pa = np.concatenate([pa, pa[later]])
            s0, s1 = np.concatenate([s0, sm[later]]), np.concatenate([sm, s1[later]])
            d0, d1 = np.concatenate([d0, dmp[later]]), np.concatenate([dmp, d1[later]])
            span = np.concatenate([span / 2, span[later] / 2])
        # each pair's first contact: the earliest of the bisection's and the samples'
        for p in range(P):
            if p in found:
                continue
            cands = [(h[0], int(lines[h[2] + 1]), h[3], h[4]) for h in hits if h[1] == p]
            if first[p] < m:
                k = int(first[p])
                cands.append((float(t[k]), int(lines[k]), contact_d[(k, p)], q[k]))
            if not cands:
                continue
            tm, line, d, qc = min(cands, key=lambda h: h[0])
            deepest = min([d] + [dd for (kk, pp), dd in contact_d.items() if pp == p and lines[kk] == line])
            self._record(found, p, qc, tm, line, d)
            found[p] = replace(found[p], depth=float(-deepest - limit[p]))

    def _face_clear(self, q: np.ndarray, poses: np.ndarray, ka: np.ndarray, pa: np.ndarray,
                    limit: np.ndarray) -> np.ndarray:
        """Which intervals (start sample ``ka``, pair ``pa``) a face of a box obstacle proves free of
        contact, without bisecting them.

        A point's signed distance to a plane is linear in the point, so along the interval it is
        the chord between its ends less at most ``M/8`` (:meth:`_bend`: M bounds the point's
        acceleration as the joints move linearly). The link's distance to the face's plane — the
        least over its shapes, at both ends — less ``M/8`` is then a lower bound of its distance to
        the box over the whole interval (the box lies behind each of its faces). This is what
        makes a tool that slides along a work surface cheap: the first-order bound (any point
        moves at most D) would have to be halved down to the refine tolerance there.
        """
        clear = np.zeros(len(ka), dtype=bool)
        for p in np.unique(pa):
            pr = self.pairs[p]
            if pr.self_pair or self._obstacles[pr.b].kind != "box":
                continue
            ob = self._obstacles[pr.b]
            rows = np.flatnonzero(pa == p)
            k = ka[rows]
            ends = []
            for idx in (k, k + 1):
                g = np.full((len(idx), 6), np.inf)
                for kp in self._by_link[pr.a]:
                    pc = self._pieces[kp]
                    C, U = self._piece_at(poses[idx], pc)
                    d = C - ob.center
                    for i in range(3):
                        a = ob.rotation[:, i]
                        s = d @ a
                        ext = self._extent(U, a, pc.half, pc.radius) + ob.half[i]
                        np.minimum(g[:, 2 * i], s - ext, out=g[:, 2 * i])
                        np.minimum(g[:, 2 * i + 1], -s - ext, out=g[:, 2 * i + 1])
                ends.append(g)
            face = np.max(np.minimum(ends[0], ends[1]), axis=1)
            clear[rows] = face - self._bend(q[k + 1] - q[k], pr.a) / 8 - limit[p] >= 0.0
        return clear

    def _bend(self, dQ: np.ndarray, link: int) -> np.ndarray:
        """(K,) a bound of how fast any point of ``link`` accelerates, m per unit interval², while
        the joints change by dQ (K, n) linearly.

        With ω_j joint j's axis, o_j a point on it, δ_j its change and R_j ≥ |p − o_j| (the chain's
        bound, :meth:`_displacement_coefficients`): p' = Σ δ_j ω_j × (p − o_j) (revolute) + Σ δ_j ω_j
        (prismatic); the axes turn at most A_j = Σ_{i<j} |δ_i| (revolute i), and p − o_j changes at
        most A_j R_j + B_j + P_j (B_j = Σ_{i≥j} |δ_i| R_i revolute, P_j = Σ_{i≥j} |δ_i| prismatic),
        so |p''| ≤ Σ_rev |δ_j| (2 A_j R_j + B_j + P_j) + Σ_pri |δ_j| A_j.
        """
        n = self.spec.dof
        pri = self.spec.prismatic
        a = np.abs(dQ) * (np.arange(n) < min(link, n))          # only the joints that move the link
        ar, ap = np.where(pri, 0.0, a), np.where(pri, a, 0.0)
        R = np.where(pri, 0.0, self._rho[:, link])
        A = np.cumsum(ar, axis=1) - ar                           # Σ_{i<j}
        B = np.cumsum((ar * R)[:, ::-1], axis=1)[:, ::-1]        # Σ_{i≥j}
        Pj = np.cumsum(ap[:, ::-1], axis=1)[:, ::-1]
        return np.sum(ar * (2 * A * R + B + Pj) + ap * A, axis=1)

    def _record(self, found: dict, p: int, q: np.ndarray, t: float, line, d: float) -> None:
        a, b = self.pair_names(p)
        c = Contact(a, b, self.pairs[p].self_pair, float(t), int(line), float(-d - self.pairs[p].limit),
                    np.asarray(q, float).copy(), max(0.0, float(-self.pairs[p].limit)))
        if p not in found or c.time < found[p].time:
            found[p] = c

    def distances(self, Q: np.ndarray, within: float = 0.01) -> np.ndarray:
        """(K, P) every pair's exact signed distance at every row of ``Q`` (K, n) by a plain loop of
        engine queries (``within`` where farther), m — no bounds, no refinement: the brute force
        that :meth:`check` is measured against (``armtwin bench collision``)."""
        Q = np.atleast_2d(np.asarray(Q, dtype=float))
        poses = self.link_poses(Q)
        out = np.empty((len(Q), len(self.pairs)))
        w = self._world
        for k in range(len(Q)):
            for i, body in enumerate(self._link_bodies):
                w.set_body_pose(body, poses[k, i])
            for p, pr in enumerate(self.pairs):
                other = self._link_bodies[pr.b] if pr.self_pair else self._obstacle_bodies[pr.b]
                out[k, p] = w.distance(self._link_bodies[pr.a], other, within)
        return out

    def contacts_at(self, q: np.ndarray) -> list[tuple[str, str, float]]:
        """Every pair in contact at the joints ``q`` (brute force, exact): (link, other, overlap m)
        — for the end effector on work, only when it presses in deeper than the cell allows."""
        out = []
        for p, pr in enumerate(self.pairs):
            d = self.distance(p, np.asarray(q, float), 0.01 + pr.limit) - pr.limit
            if d < -CONTACT_EPS:
                out.append((*self.pair_names(p), -(d + pr.limit)))
        return out

    def touching(self, q: np.ndarray) -> list[tuple[int, float]]:
        """The pairs in contact at the joints ``q`` (n,) by :meth:`contacts_at`'s rule, as
        ``(pair index, overlap m)`` in pair order: the per-solution check of collision-aware IK
        (:mod:`armtwin.envs.interference`). One exact query per pair after placing every link once
        (:meth:`distances`): for a single configuration that is faster than the numpy bounds,
        whose cost is per call, not per sample."""
        d = self.distances(np.asarray(q, dtype=float)[None], 0.001 + max((p.limit for p in self.pairs), default=0.0))[0]
        return [(p, float(-d[p])) for p, pr in enumerate(self.pairs) if d[p] - pr.limit < -CONTACT_EPS]


@functools.lru_cache(maxsize=16)
def _allowed(spec_name: str, tool_key: tuple | None) -> frozenset[tuple[str, str]]:
    from .. import robots
    spec = robots.get(spec_name)
    tool = None
    if tool_key is not None:
        number, kind, tcp, width = tool_key
        tool = Tool(number, "tool", kind, np.array(tcp).reshape(4, 4), width=width)
    model = CollisionModel(spec, None, tool=tool, self_collision=False)
    try:
        names = model.link_names
        L = len(names)
        parent = {i: i - 1 for i in range(1, spec.dof + 1)}
        if tool is not None:
            parent[L - 1] = spec.dof
        allowed = set()
        for a in range(1, L):               # neighbours, and links one link apart (the maker's stops)
            b = parent[a]
            allowed.add((names[min(a, b)], names[max(a, b)]))
            if b in parent:
                c = parent[b]
                allowed.add((names[min(a, c)], names[max(a, c)]))
        rest = [(a, b) for a in range(L) for b in range(a + 1, L) if (names[a], names[b]) not in allowed]
        model.pairs = [_Pair(a, b, True, 0.0) for a, b in rest]
        rng = np.random.default_rng(0)
        Q = rng.uniform(spec.lower, spec.upper, size=(ACM_SAMPLES, spec.dof))
        Q = np.vstack([spec.home, Q])
        Lb = model.lower_bounds(model.link_poses(Q))
        hits = np.zeros((len(Q), len(rest)), dtype=bool)
        for p in range(len(rest)):
            for k in np.flatnonzero(Lb[:, p] <= CONTACT_EPS):
                hits[k, p] = model.distance(p, Q[k], 0.01) < -CONTACT_EPS
        for p, (a, b) in enumerate(rest):
            if hits[0, p] or hits[1:, p].mean() >= ACM_ALWAYS:
                allowed.add((names[a], names[b]))
        return frozenset(allowed)
    finally:
        model.close()


def allowed_pairs(spec, tool: Tool | None = None) -> frozenset[tuple[str, str]]:
    """The robot's allowed-collision matrix: the pairs of links (names, in chain order) that are
    never checked against each other, generated as MoveIt's setup assistant does:

    * neighbours in the chain (a tool is the last link's neighbour);
    * links one link apart (the upper arm and the forearm across the elbow): the one or two joints
      between them decide alone whether they meet, and their ranges are the maker's mechanical
      stops against exactly that contact. armtwin's links are coaxial drawing cylinders where the
      real castings are offset: the IRB120's upper arm and forearm overlap in about half of all
      poses within the ranges (at J3 beyond +40° or −45°), though the real arm folds through J3's
      whole range;
    * pairs that touch in the home pose, and pairs that touch in at least :data:`ACM_ALWAYS` of
      :data:`ACM_SAMPLES` random configurations within the ranges (seeded: the same every time).

    Pairs that merely never touched in the samples are still checked."""
    key = None
    if tool is not None and tool.kind is not ToolKind.NONE:
        key = (tool.number, tool.kind.value, tuple(np.asarray(tool.tcp).ravel()), tool.width)
    return _allowed(spec.name, key)


#: the fault codes of :func:`collision_pass` and of :func:`clearance_pass`
COLLISION_FAULTS = (ErrorCode.COLLISION, ErrorCode.SELF_COLLISION)
CLEARANCE_FAULTS = (ErrorCode.NEAR_MISS,)


def _path_contacts(model: CollisionModel, path: "PathCheck") -> list[Contact]:
    """The contacts along a preflight's joint path, the workpieces it carries part of the robot
    while the tool grips them (:func:`armtwin.envs.carrying.carried_contacts`)."""
    from ..controllers.gcode.outputs import program_outputs
    from .carrying import carried_contacts
    gs = path.samples
    grips = program_outputs(path.program, path.plan, path.machine).grips_at(gs.t)
    return carried_contacts(model, path.track.q, gs.t, gs.line, grips)


def collision_pass(model: CollisionModel, sink: list[Contact] | None = None) -> "CheckPass":
    """A preflight :class:`~armtwin.controllers.gcode.preflight.CheckPass` that checks the
    program's joint path with ``model``: one COLLISION (110) or SELF_COLLISION (111) fault per
    line naming the pairs that first touch on it; every :class:`Contact` is also appended to
    ``sink`` (for ``--json``)."""
    from ..controllers.gcode.preflight import CheckPass

    def run(path: "PathCheck", findings: "Findings") -> None:
        contacts = _path_contacts(model, path)
        if sink is not None:
            sink.extend(contacts)
        by_line: dict[tuple[bool, int], list[Contact]] = {}
        for c in contacts:
            by_line.setdefault((c.self_collision, c.line), []).append(c)
        for (self_pair, line), cs in sorted(by_line.items(), key=lambda kv: kv[0][1]):
            code = ErrorCode.SELF_COLLISION if self_pair else ErrorCode.COLLISION
            findings.add(code, line, "; ".join(c.describe() for c in cs))

    return CheckPass("collisions", run, COLLISION_FAULTS)


def timed_collision_pass(model: CollisionModel, record) -> "CheckPass":
    """:func:`collision_pass` that also measures its CPU time: ``record`` (anything with
    ``contacts`` (a list) and ``seconds`` attributes, e.g. ``armtwin check``'s record) gets both."""
    import time
    inner = collision_pass(model, record.contacts)

    def run(path: "PathCheck", findings: "Findings") -> None:
        t0 = time.process_time()
        inner.run(path, findings)
        record.seconds += time.process_time() - t0

    return replace(inner, run=run)


def clearance_pass(model: CollisionModel, contacts: list[Contact], sink: list[Contact] | None = None) -> "CheckPass":
    """A preflight pass that warns where pairs come closer than ``model.clearance`` without
    touching (NEAR_MISS, 112, a warning: a fault only with ``--strict``): one per line, naming each
    pair's first approach and its smallest distance on that line. Pairs that touch — those in
    ``contacts``, filled by the :func:`collision_pass` that runs before it — are left out (their
    collision is reported already). Near misses are appended to ``sink``."""
    from ..controllers.gcode.errors import Severity
    from ..controllers.gcode.preflight import CheckPass
    if model.clearance <= 0:
        raise ValueError("a clearance pass needs a model made with clearance > 0")

    def run(path: "PathCheck", findings: "Findings") -> None:
        touching = {(c.link, c.other) for c in contacts}
        near = [c for c in _path_contacts(model, path) if (c.link, c.other) not in touching]
        if sink is not None:
            sink.extend(near)
        by_line: dict[int, list[Contact]] = {}
        for c in near:
            by_line.setdefault(c.line, []).append(c)
        for line, cs in sorted(by_line.items()):
            findings.add(ErrorCode.NEAR_MISS, line, "; ".join(
                f"{c.link} comes within {max(-c.depth, 0.0) * 1000:.1f} mm of {'link ' if c.self_collision else ''}"
                f"{c.other} (clearance {model.clearance * 1000:g} mm) at t = {c.time:.3f} s" for c in cs),
                Severity.WARNING)

    return CheckPass("clearance", run, CLEARANCE_FAULTS)
