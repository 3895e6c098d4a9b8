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
  ``D = Σ_j |Δq_j| · ρ_j`` (ρ_j: the farthest the link's shapes can be from joint j's axis,
  summed along the chain — a bound, whatever the configuration; 1 for a prismatic joint);
* the pair cannot touch inside the interval when the two ends' distances add up to more than
  ``D`` (each point moves at most ``D``, and from one end or the other it is less than half
  way): then nothing more is done;
* otherwise the interval is split in two at its middle and the exact distance is measured
  there — PyBullet's ``getClosestPoints`` (GJK/EPA: the signed distance, negative when the
  shapes overlap) in a collision-only DIRECT client of its own — down to intervals in which
  nothing moves more than :data:`REFINE_TOLERANCE`. A contact deeper than half that tolerance
  cannot hide between two samples.

PyBullet rather than python-fcl or trimesh: it is already a dependency, its distance queries are
exact for the URDF's own primitives (a cylinder is a cylinder, not a mesh), it reads the cell's
STL/OBJ meshes as concave triangle meshes, and the numpy broad phase above leaves it only the
few (sample, pair) queries near contact (~12 µs each), so a faster narrow phase would not show.

The end effector (:func:`~armtwin.robots.workcell.end_effector_links`, and a tool) may touch
**work** bodies, pressing in at most the cell's ``touch``; everything else is a collision.
Units: m, rad, s inside; the messages in mm and s.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..controllers.kinematics import chain_of, link_frames_batch
from ..controllers.tools import Tool, ToolKind
from ..robots.tooling import tool_collision
from ..robots.urdfgen import link_pieces
from ..robots.workcell import BodyRole, Cell, ShapeKind, end_effector_links
from .sim import World
from .workcell import body_shapes

if TYPE_CHECKING:
    from ..controllers.gcode.preflight import CheckPass, Findings, PathCheck

__all__ = ["Contact", "CollisionModel", "allowed_pairs", "collision_pass", "timed_collision_pass", "REFINE_TOLERANCE", "CONTACT_EPS",
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
    """

    def __init__(self, spec, cell: Cell | None = None, *, tool: Tool | None = None,
                 self_collision: bool = True) -> None:
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
            r, length = tool_collision(self.tool)
            self._pieces.append(_Piece(n + 1, np.array([0.0, 0.0, length / 2]), np.array([0.0, 0.0, 1.0]),
                                       length / 2, r))
        self._ee = {self.link_names.index(x) for x in end_effector_links(spec)} | ({n + 1} if self.tool else set())
        self._rho = self._displacement_coefficients()
        self._world = World(ground=False)
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
        pairs = [_Pair(a, k, False, -touch if (ob.work and a in self._ee) else 0.0)
                 for a in moving for k, ob in enumerate(self._obstacles)]
        self.allowed: frozenset[tuple[str, str]] = frozenset()
        if self_collision:
            self.allowed = allowed_pairs(spec, self.tool)
            for a in range(len(self.link_names)):
                for b in range(a + 1, len(self.link_names)):
                    if (self.link_names[a], self.link_names[b]) not in self.allowed:
                        pairs.append(_Pair(a, b, True, 0.0))
        self.pairs = pairs

    def close(self) -> None:
        self._world.close()

    def __enter__(self) -> "CollisionModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ----- geometry --------------------------------------------------------------------------
    def _link_shapes(self, i: int) -> list:
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
                if link == n + 1:
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
            out[:, -1] = out[:, self.spec.dof] @ self.spec.tool.matrix
        return out

    # ----- bounds ----------------------------------------------------------------------------
    def _piece_world(self, poses: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        C, U = [], []
        for p in self._pieces:
            T = poses[:, p.link]
            C.append(T[:, :3, :3] @ p.center + T[:, :3, 3])
            U.append(T[:, :3, :3] @ p.axis)
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

    def displacement(self, dQ: np.ndarray) -> np.ndarray:
        """(K, P) bound of the pair's relative motion for joint changes dQ (K, n), m."""
        move = np.abs(dQ) @ self._rho                       # (K, L)
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
    def check(self, Q: np.ndarray, times: np.ndarray | None = None, lines: np.ndarray | None = None,
              *, first_only: bool = True) -> list[Contact]:
        """The first contact of each pair along the joint path ``Q`` (K, n) — joints linear between
        rows; rows with NaN (no IK) are skipped together with the intervals at their sides.

        Args:
            Q: (K, n) joints, rad / m.
            times: (K,) s (default: the row index).
            lines: (K,) the G-code line of each row; an interval belongs to the line of its end.
            first_only: stop checking a pair at its first contact (else: its first contact
                still, but every interval is examined — for tests).

        Returns:
            One :class:`Contact` per pair that touches, in time order.
        """
        Q = np.asarray(Q, dtype=float)
        K = len(Q)
        times = np.arange(K, dtype=float) if times is None else np.asarray(times, dtype=float)
        lines = np.zeros(K, dtype=np.int64) if lines is None else np.asarray(lines)
        P = len(self.pairs)
        found: dict[int, Contact] = {}
        limit = np.array([p.limit for p in self.pairs])
        valid = ~np.isnan(Q).any(axis=1)
        prev_L = None
        for c0 in range(0, K, CHUNK):
            c1 = min(c0 + CHUNK + 1, K)            # chunks overlap by one sample: every interval is seen
            q = Q[c0:c1]
            ok = valid[c0:c1]
            Lb = np.full((c1 - c0, P), np.inf)
            if ok.any():
                Lb[ok] = self.lower_bounds(self.link_poses(q[ok])) - limit
            if prev_L is not None:
                Lb[0] = prev_L
            prev_L = Lb[-1].copy()
            exact: dict[tuple[int, int], float] = {}

            def d_at(k: int, p: int, within: float) -> float:
                """A lower bound of the pair's distance (to its limit) at sample k: exact up to
                ``within`` (the engine's answer, or ``within`` when it is farther)."""
                if Lb[k, p] > within:
                    return float(Lb[k, p])
                if (k, p) not in exact:
                    exact[(k, p)] = self.distance(p, q[k], within + limit[p]) - limit[p]
                return exact[(k, p)]

            # samples whose bound says they may touch, and intervals that may hide a contact
            D = np.zeros((c1 - c0 - 1, P)) if c1 - c0 > 1 else np.zeros((0, P))
            both = ok[:-1] & ok[1:]
            if len(D):
                D[both] = self.displacement(np.diff(q, axis=0)[both])
            span = np.where(both[:, None], Lb[:-1] + Lb[1:] <= D, False) if len(D) else np.zeros((0, P), bool)
            here = Lb < -CONTACT_EPS
            for p in range(P):
                if first_only and p in found:
                    continue
                cand_s = np.flatnonzero(here[:, p])
                cand_i = np.flatnonzero(span[:, p])
                events = sorted([(int(k), 0) for k in cand_s] + [(int(k), 1) for k in cand_i])
                for k, kind in events:
                    if first_only and p in found:
                        c = found[p]                # the deepest point of the first contact's line
                        if kind == 0 and lines[c0 + k] == c.line and times[c0 + k] > c.time:
                            d = d_at(k, p, 1.0)
                            if -d - limit[p] > c.depth:
                                found[p] = replace(c, depth=float(-d - limit[p]))
                            continue
                        if lines[c0 + k] != c.line:
                            break
                        continue
                    if kind == 0:
                        if c0 > 0 and k == 0:
                            continue                # seen as the previous chunk's last sample
                        d = d_at(k, p, 1.0)
                        if d < -CONTACT_EPS:
                            self._record(found, p, q[k], times[c0 + k], lines[c0 + k], d)
                        continue
                    wa = float(D[k, p]) + 0.01
                    da, db = d_at(k, p, wa), d_at(k + 1, p, wa)
                    if da < -CONTACT_EPS:
                        continue                    # its start sample reported it
                    # a contact at its end sample may begin earlier, inside the interval
                    hit = self._refine(p, q[k], q[k + 1], da, max(db, 0.0), float(D[k, p]), limit[p])
                    if hit is not None:
                        s, d = hit
                        t = times[c0 + k] + s * (times[c0 + k + 1] - times[c0 + k])
                        self._record(found, p, q[k] + s * (q[k + 1] - q[k]), t, lines[c0 + k + 1], d)
        return sorted(found.values(), key=lambda c: (c.time, c.link, c.other))

    def _record(self, found: dict, p: int, q: np.ndarray, t: float, line, d: float) -> None:
        a, b = self.pair_names(p)
        c = Contact(a, b, self.pairs[p].self_pair, float(t), int(line), float(-d - self.pairs[p].limit),
                    np.asarray(q, float).copy(), max(0.0, float(-self.pairs[p].limit)))
        if p not in found or c.time < found[p].time:
            found[p] = c

    def _refine(self, p: int, qa, qb, da: float, db: float, D: float, limit: float):
        """Bisect an interval with no contact at its ends: ``(fraction, distance)`` of its first
        contact, or None when it has none (distances relative to the pair's limit)."""
        stack = [(0.0, 1.0, da, db, D)]
        while stack:
            s0, s1, d0, d1, span = stack.pop()
            if d0 + d1 > span or span < REFINE_TOLERANCE:
                continue
            sm = 0.5 * (s0 + s1)
            qm = qa + sm * (qb - qa)
            dm = self.distance(p, qm, span + 0.01 + limit) - limit
            if dm < -CONTACT_EPS:
                # a contact: look for an earlier one in the first half before reporting this one
                earlier = self._refine(p, qa + s0 * (qb - qa), qm, d0, max(dm, 0.0), span / 2, limit) \
                    if span / 2 >= REFINE_TOLERANCE else None
                if earlier is not None:
                    return s0 + earlier[0] * (sm - s0), earlier[1]
                return sm, dm
            stack.append((sm, s1, dm, d1, span / 2))   # later half examined after the earlier one
            stack.append((s0, sm, d0, dm, span / 2))
        return None

    def contacts_at(self, q: np.ndarray) -> list[tuple[str, str, float]]:
        """Every pair in contact at the joints ``q`` (brute force, exact): (link, other, overlap m)
        — for the end effector on work, only when it presses in deeper than the cell allows."""
        out = []
        for p, pr in enumerate(self.pairs):
            d = self.distance(p, np.asarray(q, float), 0.01 + pr.limit) - pr.limit
            if d < -CONTACT_EPS:
                out.append((*self.pair_names(p), -(d + pr.limit)))
        return out


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


def collision_pass(model: CollisionModel, sink: list[Contact] | None = None) -> "CheckPass":
    """A preflight :class:`~armtwin.controllers.gcode.preflight.CheckPass` that checks the
    program's joint path with ``model``: one COLLISION (110) or SELF_COLLISION (111) fault per
    line naming the pairs that first touch on it; every :class:`Contact` is also appended to
    ``sink`` (for ``--json``)."""
    from ..controllers.gcode.errors import ErrorCode
    from ..controllers.gcode.preflight import CheckPass

    def run(path: "PathCheck", findings: "Findings") -> None:
        gs = path.samples
        contacts = model.check(path.track.q, gs.t, gs.line)
        if sink is not None:
            sink.extend(contacts)
        by_line: dict[tuple[bool, int], list[Contact]] = {}
        for c in contacts:
            by_line.setdefault((c.self_collision, c.line), []).append(c)
        for (self_pair, line), cs in sorted(by_line.items(), key=lambda kv: kv[0][1]):
            code = ErrorCode.SELF_COLLISION if self_pair else ErrorCode.COLLISION
            findings.add(code, line, "; ".join(c.describe() for c in cs))

    return CheckPass("collisions", run, (ErrorCode.COLLISION, ErrorCode.SELF_COLLISION))


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
