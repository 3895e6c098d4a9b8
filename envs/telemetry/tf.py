"""The robot's TF tree from its joints, as ROS's robot_state_publisher computes it.

One edge per URDF joint (``base_link`` → ``link_1`` → … → ``tool0``, the link names of the
robot's URDF, so a viewer that loaded the URDF draws each link on its frame), plus
``world`` → ``base_link`` (where the robot stands) and ``base_link`` → ``base`` (the reporting
frame that tool poses are given in; the identity for most robots, the controller's base frame
for the AUBO-i5). Pure kinematics from the spec (:mod:`armtwin.controllers.kinematics`): no
simulator is asked, so a twin log computes it on its writer thread.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ...controllers.kinematics import chain_of
from .rosmsg import Transform

__all__ = ["RobotFrames", "WORLD", "REPORT_FRAME", "quat_of"]

#: the fixed frame of every log
WORLD = "world"
#: the frame tool poses are reported in (the spec's ``report_frame`` in the root link)
REPORT_FRAME = "base"


def _quat(m) -> tuple[float, float, float, float]:
    """Quaternion (x, y, z, w), w >= 0, of a 3×3 rotation (Shepperd's method, plain floats: the
    numpy version costs ~100 µs a call on 3×3 arrays, this one ~2 µs)."""
    (a, b, c), (d, e, f), (g, h, i) = ((float(v) for v in row) for row in m)
    tr = a + e + i
    if tr > 0:
        s = math.sqrt(tr + 1.0) * 2
        x, y, z, w = (h - f) / s, (c - g) / s, (d - b) / s, s / 4
    elif a > e and a > i:
        s = math.sqrt(1.0 + a - e - i) * 2
        x, y, z, w = s / 4, (b + d) / s, (c + g) / s, (h - f) / s
    elif e > i:
        s = math.sqrt(1.0 + e - a - i) * 2
        x, y, z, w = (b + d) / s, s / 4, (f + h) / s, (c - g) / s
    else:
        s = math.sqrt(1.0 + i - a - e) * 2
        x, y, z, w = (c + g) / s, (f + h) / s, s / 4, (d - b) / s
    if w < 0:
        x, y, z, w = -x, -y, -z, -w
    n = math.sqrt(x * x + y * y + z * z + w * w)
    return x / n, y / n, z / n, w / n


def _qmul(p, q) -> tuple[float, float, float, float]:
    """Hamilton product p ⊗ q of (x, y, z, w) quaternions."""
    px, py, pz, pw = p
    qx, qy, qz, qw = q
    return (pw * qx + px * qw + py * qz - pz * qy, pw * qy - px * qz + py * qw + pz * qx,
            pw * qz + px * qy - py * qx + pz * qw, pw * qw - px * qx - py * qy - pz * qz)


def _rotate(q, v) -> tuple[float, float, float]:
    """Vector ``v`` rotated by the unit quaternion ``q`` (x, y, z, w)."""
    x, y, z, w = q
    tx, ty, tz = 2 * (y * v[2] - z * v[1]), 2 * (z * v[0] - x * v[2]), 2 * (x * v[1] - y * v[0])
    return (v[0] + w * tx + y * tz - z * ty, v[1] + w * ty + z * tx - x * tz, v[2] + w * tz + x * ty - y * tx)


class RobotFrames:
    """The TF edges of one robot.

    Each joint edge is the joint's origin (fixed) followed by its motion: a rotation by q about
    the axis (revolute) or a shift by q along it (prismatic), composed as quaternions in plain
    floats (a 6-axis robot's edges in ~30 µs, cheap enough for every sample of a 500 Hz log).

    Args:
        spec: the robot.
        base_position: where its root link stands in the world, m (3,).
    """

    def __init__(self, spec, base_position: Sequence[float] = (0.0, 0.0, 0.0)) -> None:
        self.spec = spec
        chain = chain_of(spec)
        names = [link.name for link in spec.links]
        #: (parent, child) of every moving joint, in chain order
        self.edges = list(zip(names[:-1], names[1:]))
        self.root = names[0]
        self._joints = [(p, c, tuple(float(v) for v in o[:3, 3]), _quat(o[:3, :3]), tuple(float(v) for v in ax),
                         bool(pr), o[:3, :3] @ ax)
                        for (p, c), o, ax, pr in zip(self.edges, chain.origins, chain.axes, chain.prismatic)]
        self._tool = self._edge(names[-1], "tool0", spec.tool.matrix)
        self._static = [Transform(WORLD, self.root, tuple(float(v) for v in base_position), (0.0, 0.0, 0.0, 1.0)),
                        self._edge(self.root, REPORT_FRAME, spec.report_frame.matrix)]

    @staticmethod
    def _edge(parent: str, child: str, m: np.ndarray) -> Transform:
        return Transform(parent, child, tuple(float(v) for v in m[:3, 3]), _quat(m[:3, :3]))

    @property
    def static(self) -> list[Transform]:
        """The edges that never move: world → root link, root link → ``base``, last link → ``tool0``."""
        return [*self._static, self._tool]

    def moving(self, q) -> list[Transform]:
        """The joint edges at joints ``q`` (n,), rad / m: each child link in its parent."""
        out = []
        for (parent, child, t, r, ax, prismatic, ax_parent), v in zip(self._joints, q):
            v = float(v)
            if prismatic:
                out.append(Transform(parent, child, (t[0] + ax_parent[0] * v, t[1] + ax_parent[1] * v,
                                                     t[2] + ax_parent[2] * v), r))
            else:
                s = math.sin(v / 2)
                out.append(Transform(parent, child, t, _qmul(r, (ax[0] * s, ax[1] * s, ax[2] * s, math.cos(v / 2)))))
        return out

    def flange(self, q) -> tuple[tuple[float, float, float], tuple[float, float, float, float]]:
        """The flange (tool0) at joints ``q`` in the reporting frame ``base``: position m, quaternion."""
        rep = self._static[1]
        r = (-rep.rotation[0], -rep.rotation[1], -rep.rotation[2], rep.rotation[3])   # base -> root link
        t = _rotate(r, (-rep.translation[0], -rep.translation[1], -rep.translation[2]))
        for e in (*self.moving(q), self._tool):
            d = _rotate(r, e.translation)
            t, r = (t[0] + d[0], t[1] + d[1], t[2] + d[2]), _qmul(r, e.rotation)
        return t, r

    def all(self, q) -> list[Transform]:
        """Every edge at joints ``q``: the static ones and the joints'."""
        return [*self.static, *self.moving(q)]


def quat_of(m: np.ndarray) -> tuple[float, float, float, float]:
    """Quaternion (x, y, z, w), w >= 0, of the rotation of ``m`` (3×3 or 4×4), in plain floats."""
    return _quat(np.asarray(m)[:3, :3])
