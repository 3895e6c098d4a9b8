"""G-code for taught points: what the teach pendant saves (``armtwin ui``, "save as G-code")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ...robots import RobotSpec
    from ..tools import Tool

__all__ = ["gcode_for_points"]


def gcode_for_points(spec: RobotSpec, poses: list[np.ndarray], *, feed_mm_min: float = 3000.0,
                     origin_m=None, title: str = "", tool: Tool | None = None) -> str:
    """G-code (RS-274/NGC, as armtwin's interpreter reads it) visiting taught poses of the controlled point.

    Conventions (armtwin's G-code): units mm (G21), absolute (G90), XY plane (G17), feed in
    mm/min; X Y Z relative to the work origin (the robot's default :func:`machine_for` origin
    unless ``origin_m`` is given); A B C in degrees (orientation ``Rz(C) Ry(B) Rx(A) Rx(180°)``);
    the SCARA takes C only. The first move is a rapid (G0), the others linear (G1).

    With ``tool`` the poses are its TCP's: the program says so in its header and makes that TCP
    the controlled point with ``G43 H n`` before the first move, so run with the same tool
    (``armtwin run --tool n``, and ``--tools FILE`` when n comes from a file) the tool tip
    visits the taught poses.

    Args:
        spec: the robot.
        poses: (4, 4) poses of the controlled point (``tool``'s TCP, else the flange) in the
            reporting base frame, m.
        feed_mm_min: feed of the G1 moves, mm/min.
        origin_m: (3,) work origin in the base frame, m.
        title: a comment put in the header.
        tool: the tool whose TCP the poses are (None or T0: the flange).
    """
    from .config import machine_for
    from .interpreter import abc_of
    origin = np.asarray(machine_for(spec).origin if origin_m is None else origin_m, float)
    scara = spec.roll_only
    o_mm = origin * 1000.0
    lines = [f"(armtwin teach pendant: {spec.name}, {len(poses)} point{'s' if len(poses) != 1 else ''}{', ' + title if title else ''})",
             f"(work origin X{o_mm[0]:.3f} Y{o_mm[1]:.3f} Z{o_mm[2]:.3f} mm in the base frame; XYZ below are relative to it)",
             "G21 G90 G17 G94"]
    if tool is not None and tool.number != 0:
        tcp = " ".join(f"{v * 1000:.3f}" for v in tool.offset)
        lines[-1:-1] = [f"(the points are the TCP of T{tool.number} {_comment(tool.name)}, {tcp} mm from the "
                        f"flange: run with --tool {tool.number})"]
        lines.append(f"G43 H{tool.number}")
    for k, T in enumerate(poses):
        p = (np.asarray(T)[:3, 3] - origin) * 1000.0
        a, b, c = abc_of(np.asarray(T)[:3, :3])
        words = f"X{p[0]:.3f} Y{p[1]:.3f} Z{p[2]:.3f}"
        words += f" C{c:.3f}" if scara else f" A{a:.3f} B{b:.3f} C{c:.3f}"
        if k == 0:
            lines.append(f"N{10 * (k + 1)} G0 {words}")
        else:
            lines.append(f"N{10 * (k + 1)} G1 {words}" + (f" F{feed_mm_min:.0f}" if k == 1 else ""))
    lines.append("M2")
    return "\n".join(lines).replace("-0.000", "0.000") + "\n"


def _comment(text: str) -> str:
    """``text`` fit for a ( ) comment: no parentheses, ASCII only."""
    return "".join(c if c.isascii() and c not in "()" and c.isprintable() else "_" for c in text)
