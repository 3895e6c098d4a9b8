"""Forward kinematics from a robot's geometry (pure numpy, no PyBullet).

The chain is the same data the URDF is generated from: per joint a fixed origin
transform then a motion about (revolute) or along (prismatic) the joint axis.
Poses are expressed in the robot's reporting base frame, for the flange ``tool0``.

Shapes: ``q`` is (n,) rad / m; a batch ``Q`` is (N, n); transforms are (4, 4) or
(N, 4, 4) in metres.
"""
# mypy: disallow-untyped-defs, check-untyped-defs

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from .transforms import invert

if TYPE_CHECKING:   # the robots package builds on this one; the spec is only a type here
    from ..robots.spec import RobotSpec

__all__ = ["Chain", "chain_of", "fk", "fk_batch", "fk_frames", "link_frames_batch"]


@dataclass(frozen=True, eq=False)
class Chain:
    """Numeric kinematic chain.

    Attributes:
        origins: (n, 4, 4) joint origins in the parent link frame (first one in the root link).
        axes: (n, 3) unit joint axes in the child frame.
        prismatic: (n,) bool.
        base: (4, 4) root (mount) link in the reporting frame.
        tool: (4, 4) flange frame in the last link frame.
    """

    origins: np.ndarray
    axes: np.ndarray
    prismatic: np.ndarray
    base: np.ndarray
    tool: np.ndarray

    @property
    def dof(self) -> int:
        return len(self.axes)


def chain_of(spec: RobotSpec) -> Chain:
    """The numeric chain of a :class:`~armtwin.robots.RobotSpec` (built once, kept with the spec)."""
    return spec.derived(_build_chain)


def _build_chain(spec: RobotSpec) -> Chain:
    origins = np.array([j.origin.matrix for j in spec.joints])
    axes = np.array([j.axis for j in spec.joints], dtype=float)
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    chain = Chain(origins, axes, spec.prismatic.copy(), invert(spec.report_frame.matrix), spec.tool.matrix)
    for a in (chain.origins, chain.axes, chain.prismatic, chain.base, chain.tool):
        a.setflags(write=False)
    return chain


def _motions(chain: Chain, Q: np.ndarray) -> np.ndarray:
    """(N, n, 4, 4) joint motion transforms for a batch of joint vectors (N, n)."""
    N, n = Q.shape
    m = np.zeros((N, n, 4, 4))
    m[..., 3, 3] = 1.0
    k = chain.axes  # (n, 3)
    # Rodrigues for revolute joints: R = I + sin(q) K + (1 - cos(q)) K^2
    K = np.zeros((n, 3, 3))
    K[:, 0, 1], K[:, 0, 2] = -k[:, 2], k[:, 1]
    K[:, 1, 0], K[:, 1, 2] = k[:, 2], -k[:, 0]
    K[:, 2, 0], K[:, 2, 1] = -k[:, 1], k[:, 0]
    K2 = K @ K
    rev = ~chain.prismatic
    qr = np.where(rev, Q, 0.0)[..., None, None]
    m[..., :3, :3] = np.eye(3) + np.sin(qr) * K + (1.0 - np.cos(qr)) * K2
    qp = np.where(chain.prismatic, Q, 0.0)[..., None]
    m[..., :3, 3] = qp * k
    return m


def fk_frames(chain: Chain, q: ArrayLike) -> np.ndarray:
    """Frames of every link after its joint, and the flange, in the reporting frame.

    Args:
        chain: the robot's chain (:func:`chain_of`).
        q: (n,) joint vector, rad / m.

    Returns:
        (n + 1, 4, 4): link frames 1..n, then the flange.
    """
    qa = np.asarray(q, dtype=float).reshape(1, -1)
    if qa.shape[1] != chain.dof:
        raise ValueError(f"expected {chain.dof} joint values, got {qa.shape[1]}")
    m = _motions(chain, qa)[0]
    out = np.empty((chain.dof + 1, 4, 4))
    t = chain.base
    for i in range(chain.dof):
        t = t @ chain.origins[i] @ m[i]
        out[i] = t
    out[-1] = t @ chain.tool
    return out


def link_frames_batch(chain: Chain, Q: ArrayLike) -> np.ndarray:
    """Frames of every link after its joint in the root (mounting) link's frame, for a batch.

    Args:
        chain: the robot's chain.
        Q: (N, n) joint vectors, rad / m.

    Returns:
        (N, n, 4, 4): link frames 1..n (the chain's ``base`` and ``tool`` are not applied).
    """
    Q = np.atleast_2d(np.asarray(Q, dtype=float))
    if Q.shape[1] != chain.dof:
        raise ValueError(f"expected {chain.dof} joint values per row, got {Q.shape[1]}")
    m = _motions(chain, Q)
    out = np.empty((len(Q), chain.dof, 4, 4))
    t = np.broadcast_to(np.eye(4), (len(Q), 4, 4))
    for i in range(chain.dof):
        t = t @ (chain.origins[i] @ m[:, i])
        out[:, i] = t
    return out


def fk(chain: Chain, q: ArrayLike) -> np.ndarray:
    """Flange pose (4, 4) in the reporting frame for one joint vector (n,) rad / m."""
    return fk_frames(chain, q)[-1]


def fk_batch(chain: Chain, Q: ArrayLike) -> np.ndarray:
    """Flange poses (N, 4, 4) for a batch of joint vectors (N, n), vectorised."""
    Qa = np.atleast_2d(np.asarray(Q, dtype=float))
    if Qa.shape[1] != chain.dof:
        raise ValueError(f"expected {chain.dof} joint values per row, got {Qa.shape[1]}")
    m = _motions(chain, Qa)
    t = np.broadcast_to(chain.base, (len(Qa), 4, 4))
    for i in range(chain.dof):
        t = t @ (chain.origins[i] @ m[:, i])
    return t @ chain.tool
