"""Kinematics at a tool's centre point: FK and IK of the TCP instead of the flange.

The robots' kinematics (:mod:`.kinematics`) and IK (:mod:`.ik`) work at the flange ``tool0``.
A consumer that steers a tool — the Gymnasium envs with ``tool=``, the teach pendant with
``--tool`` — asks :class:`TcpKinematics` instead: its FK returns TCP poses
(``T_tcp = T_flange · tcp``) and its IK takes TCP poses (``T_flange = T_tcp · tcp⁻¹``, then the
flange IK), so the same code serves the bare flange (``tool`` None: exactly the flange
functions, bit for bit) and any tool. The G-code path does the same per motion block
(:attr:`~armtwin.controllers.gcode.planner.PathSamples.flange_of_block`).

Pure numpy (no PyBullet). Units: m, rad.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from . import ik
from .kinematics import Chain, chain_of, fk_batch
from .tools import Tool

if TYPE_CHECKING:
    from ..robots import RobotSpec

__all__ = ["TcpKinematics"]


@dataclass(frozen=True, eq=False)
class TcpKinematics:
    """FK and IK of ``spec`` at ``tool``'s TCP (the flange when ``tool`` is None).

    Attributes:
        spec: the robot.
        tool: the tool on the flange (:class:`~armtwin.controllers.tools.Tool`), or None.
    """

    spec: RobotSpec
    tool: Tool | None = None
    chain: Chain = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "chain", chain_of(self.spec))

    @property
    def tcp(self) -> np.ndarray:
        """(4, 4) the TCP frame in the flange frame (identity without a tool)."""
        return np.eye(4) if self.tool is None else self.tool.tcp.copy()

    @property
    def reach_extra(self) -> float:
        """How much farther from the flange the TCP is, m (0 without a tool)."""
        return 0.0 if self.tool is None else float(np.linalg.norm(self.tool.offset))

    # ----- forward ------------------------------------------------------------------------
    def fk_batch(self, Q: Any) -> np.ndarray:
        """TCP poses (N, 4, 4) of joint vectors (N, n), reporting frame."""
        T = fk_batch(self.chain, Q)
        return T if self.tool is None else T @ self.tool.tcp

    def fk(self, q: Any) -> np.ndarray:
        """TCP pose (4, 4) of one joint vector (n,)."""
        return self.fk_batch(np.asarray(q, dtype=float)[None])[0]

    def tcp_of(self, T_flange: np.ndarray) -> np.ndarray:
        """TCP poses (..., 4, 4) of flange poses (..., 4, 4)."""
        return np.asarray(T_flange, dtype=float) if self.tool is None else self.tool.tcp_of(T_flange)

    def flange_of(self, T_tcp: np.ndarray) -> np.ndarray:
        """Flange poses (..., 4, 4) that put the TCP at ``T_tcp`` (..., 4, 4)."""
        return np.asarray(T_tcp, dtype=float) if self.tool is None else self.tool.flange_of(T_tcp)

    # ----- inverse (armtwin's closed-form IK of the flange pose) --------------------------
    def solve(self, T_tcp: np.ndarray, q_near: Any = None, **kwargs: Any) -> ik.IKResult:
        """:func:`armtwin.controllers.ik.solve` for a TCP pose (4, 4); ``kwargs`` as there."""
        return ik.solve(self.spec, self.flange_of(T_tcp), q_near, **kwargs)

    def solve_batch(self, T_tcp: np.ndarray, q_near: Any = None, **kwargs: Any) -> ik.BatchIKResult:
        """:func:`armtwin.controllers.ik.solve_batch` for TCP poses (N, 4, 4)."""
        return ik.solve_batch(self.spec, self.flange_of(T_tcp), q_near, **kwargs)

    def solve_path(self, T_tcp: np.ndarray, q_start: Any, **kwargs: Any) -> ik.PathIKResult:
        """:func:`armtwin.controllers.ik.solve_path` along TCP poses (N, 4, 4)."""
        return ik.solve_path(self.spec, self.flange_of(T_tcp), q_start, **kwargs)
