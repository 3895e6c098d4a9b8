"""The rules of tools and outputs on a line: S, T, M6, M3–M5, M7–M9, M62–M65, M300, G43/G43.1/G49.

They run after F and before group 0 (RS-274/NGC's order of execution: S, T, M6, M3–M5, M7–M9,
…, G43/G49, …, motion), so ``T1 M6 M3 S9000 G43 H1 G0 Z5`` mounts tool 1, switches it on and
moves its TCP. :func:`check_tooling` records the line's meaning in a :class:`ToolEffect`;
:func:`apply_tooling` changes the working state and emits the blocks (a tool change is a
:class:`~.blocks.Stop` of kind TOOL_CHANGE: the arm rests; output changes are
:class:`~.blocks.OutputChange` blocks placed on the time axis by :mod:`.outputs`).

The controlled point: the program moves the controlled point, a frame fixed to the flange
(:attr:`~.modal.MachineState.tcp`). M6 makes the mounted tool's TCP the controlled point (as a
robot controller does: LinuxCNC would wait for G43), G43 H n tool n's TCP (without H: the
mounted tool's), G43.1 X Y Z an offset in the flange frame, G49 the flange itself. When it
changes the arm does not move: the flange stays where it is and the position of the controlled
point (and its A B C when the TCP frame is turned) is read anew.

Units: mm and degrees of the machine coordinates, as :mod:`.rules`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..tools import MAX_TOOL_NUMBER
from ..transforms import matrix_to_rpy, rot_x
from .blocks import FLANGE, OutputChange, Stop, StopKind
from .errors import ErrorCode
from .modal import Coolant, DigitalOutput, MachineState, NonModal, PenServo, SpindleMode, ToolLengthOffset
from .outputs import MAX_DIGITAL_OUTPUT, PEN_DOWN_BELOW, OutputState

if TYPE_CHECKING:   # the rule machinery imports this module
    from .parser import ParsedLine
    from .blocks import Block
    from .rules import Context, Fail, LineEffect

__all__ = ["ToolEffect", "WorkingState", "check_tooling", "apply_tooling", "TOOLING_FAULTS", "touches_tooling", "controlled_point"]

#: every fault code :func:`check_tooling` may raise
TOOLING_FAULTS = (ErrorCode.UNKNOWN_TOOL, ErrorCode.BAD_SPINDLE_SPEED, ErrorCode.BAD_OUTPUT_NUMBER,
                  ErrorCode.DIALECT_OPTION_OFF, ErrorCode.AXIS_WORDS_MISSING, ErrorCode.AXIS_COMMAND_CONFLICT)

_M_GROUPS = frozenset({"toolchange", "spindle", "coolant", "digital", "servo"})
_R_DOWN = rot_x(math.pi)


def touches_tooling(line: ParsedLine) -> bool:
    """The line has a word these rules read (cheap: most lines of a program do not)."""
    w, m = line.words, line.m
    return ("S" in w or "T" in w or "H" in w or "length" in line.g
            or (bool(m) and not _M_GROUPS.isdisjoint(m)))


class ToolEffect:
    """A line's checked meaning for tools and outputs.

    Attributes:
        selected: the tool the line selects (T), or None.
        change: the tool M6 mounts, or None.
        tcp: (4, 4) the new controlled point in the flange frame (m), or None (unchanged).
        outputs: the outputs after the line's immediate changes, or None (unchanged).
        digital: (output, on) switches of M64/M65 (immediate).
        sync: (output, on) switches of M62/M63 (with the next move).
    """

    __slots__ = ("selected", "change", "tcp", "outputs", "digital", "sync")

    def __init__(self) -> None:
        self.selected: int | None = None
        self.change: int | None = None
        self.tcp: np.ndarray | None = None
        self.outputs: OutputState | None = None
        self.digital: list[tuple[int, bool]] = []
        self.sync: list[tuple[int, bool]] = []


def _tool_number(line: ParsedLine, letter: str, ctx: Context, fail: Fail, what: str) -> int:
    v = line.words[letter]
    if v != int(v) or not 0 <= v <= MAX_TOOL_NUMBER:
        fail(ErrorCode.UNKNOWN_TOOL, f"{letter}{v:.12g}: {what} is a whole tool number 0..{MAX_TOOL_NUMBER}", letter)
    n = int(v)
    tools = ctx.machine.tools
    if n not in tools:
        fail(ErrorCode.UNKNOWN_TOOL, f"{letter}{v:.12g}: the tool table ({tools.source}) has no tool {n} "
             f"(it has T{', T'.join(str(k) for k in tools)})", letter)
    return n


def check_tooling(line: ParsedLine, state: MachineState, eff: LineEffect, ctx: Context, fail: Fail) -> None:
    """S, T, M6, M3–M5, M7–M9, M62–M65, M300 and G43/G43.1/G49 of one line (their order of execution)."""
    w, m, g = line.words, line.m, line.g
    te = ToolEffect()
    tools = ctx.machine.tools
    out = state.outputs if state.outputs is not None else OutputState(state.tool)
    new = out
    servo = "servo" in m
    # T: select; M6: mount
    if "T" in w:
        te.selected = _tool_number(line, "T", ctx, fail, "T")
        eff.used.add("T")
    mounted = state.tool
    if "toolchange" in m:
        mounted = te.selected if te.selected is not None else state.selected
        te.change = mounted
        te.tcp = tools[mounted].tcp
        new = replace(new, tool=mounted, mode=SpindleMode.OFF)
        eff.modal = replace(eff.modal, tool_length=ToolLengthOffset.TOOL)
    # S: the set-point (of M300: the servo angle)
    if "S" in w:
        s = w["S"]
        eff.used.add("S")
        if s < 0:
            fail(ErrorCode.BAD_SPINDLE_SPEED, f"S{s:.12g}: S cannot be negative", "S")
        if not servo:
            s_max = tools[mounted].s_max
            if s_max > 0 and s > s_max:
                fail(ErrorCode.BAD_SPINDLE_SPEED, f"S{s:.12g}: above the largest S of T{mounted} "
                     f"({tools[mounted].name}): {s_max:g}", "S")
            new = replace(new, s=float(s))
    if "spindle" in m:
        new = replace(new, mode=SpindleMode(m["spindle"]))
    if "coolant" in m:
        aux = Coolant(m["coolant"])
        new = replace(new, mist=False, flood=False) if aux is Coolant.OFF else \
            replace(new, mist=True) if aux is Coolant.MIST else replace(new, flood=True)
    if "digital" in m:
        code = DigitalOutput(m["digital"])
        if g.get("nonmodal") in (NonModal.DWELL.value, NonModal.SET_OFFSET.value):
            fail(ErrorCode.BAD_OUTPUT_NUMBER, f"M{code.value:g}: its P would be G{g['nonmodal']:g}'s too; put "
                 f"them on two lines", "M", code.value)
        if "P" not in w:
            fail(ErrorCode.BAD_OUTPUT_NUMBER, f"M{code.value:g} needs P (the output number, 0..{MAX_DIGITAL_OUTPUT})",
                 "M", code.value)
        p = w["P"]
        if p != int(p) or not 0 <= p <= MAX_DIGITAL_OUTPUT:
            fail(ErrorCode.BAD_OUTPUT_NUMBER, f"P{p:.12g}: a digital output is a whole number "
                 f"0..{MAX_DIGITAL_OUTPUT}", "P")
        eff.used.add("P")
        on = code in (DigitalOutput.ON_SYNC, DigitalOutput.ON)
        (te.sync if code in (DigitalOutput.ON_SYNC, DigitalOutput.OFF_SYNC) else te.digital).append((int(p), on))
    if servo:
        if not ctx.machine.pen_servo:
            fail(ErrorCode.DIALECT_OPTION_OFF, "M300: the servo pen is a dialect option (--pen-servo)", "M",
                 PenServo.SET.value)
        if "S" not in w:
            fail(ErrorCode.BAD_SPINDLE_SPEED, "M300 needs S (the servo angle, deg)", "M", PenServo.SET.value)
        new = replace(new, mode=SpindleMode.CW if w["S"] < PEN_DOWN_BELOW else SpindleMode.OFF)
    # group 8: the controlled point
    if "length" in g:
        length = ToolLengthOffset(g["length"])
        if length is ToolLengthOffset.TOOL:
            n = _tool_number(line, "H", ctx, fail, "H") if "H" in w else mounted
            eff.used.add("H")
            te.tcp = tools[n].tcp
        elif length is ToolLengthOffset.DYNAMIC:
            if "motion" in g and g["motion"] != 80.0:
                fail(ErrorCode.AXIS_COMMAND_CONFLICT, f"G{g['motion']:g}: G43.1 on this line takes the axis words",
                     "G", g["motion"])
            if not any(L in w for L in "XYZ"):
                fail(ErrorCode.AXIS_WORDS_MISSING, "G43.1 needs X, Y and/or Z: the offset of the controlled point "
                     "from the flange, in the flange frame", "G", length.value)
            tcp = np.eye(4)
            tcp[:3, 3] = [w.get(L, 0.0) * eff.units / 1000.0 for L in "XYZ"]
            te.tcp = tcp
            eff.used.update("XYZ")
        else:
            te.tcp = FLANGE
    if new is not out:
        te.outputs = new
    if te.selected is not None or te.change is not None or te.tcp is not None or new is not out or te.digital \
            or te.sync:
        eff.tooling = te


def controlled_point(flange: np.ndarray, tcp: np.ndarray, ctx: Context) -> list[float]:
    """(6,) machine coordinates (mm, deg) of the controlled point ``tcp`` of a flange pose ``flange`` (m, base)."""
    P = flange @ tcp
    o = ctx.origin_mm
    xyz = [P[0, 3] * 1000.0 - o[0], P[1, 3] * 1000.0 - o[1], P[2, 3] * 1000.0 - o[2]]
    R = P[:3, :3]
    if ctx.tilt:
        abc = [float(v) for v in np.degrees(matrix_to_rpy(R @ _R_DOWN.T))]
    else:
        abc = [0.0, 0.0, math.degrees(math.atan2(R[1, 0], R[0, 0]))]
    return xyz + abc


class WorkingState(Protocol):
    """What :func:`apply_tooling` changes of the interpreter's working state (``rules._Applier``)."""

    tool: int
    selected: int
    tcp: np.ndarray
    outputs: OutputState | None
    out: list[Block]

    def set_tcp(self, tcp: np.ndarray) -> None: ...


def apply_tooling(ap: WorkingState, eff: LineEffect) -> None:
    """A checked line's tool change, controlled point and outputs (before its dwell and motion)."""
    te = eff.tooling
    if te is None:
        return
    line = eff.line.lineno
    if te.selected is not None:
        ap.selected = te.selected
    if te.change is not None:
        ap.out.append(Stop(line, StopKind.TOOL_CHANGE))
        ap.tool = te.change
    if te.tcp is not None and te.tcp is not ap.tcp:
        ap.set_tcp(te.tcp)
    if te.outputs is not None or te.digital:
        outs = te.outputs if te.outputs is not None else ap.outputs or OutputState(ap.tool)
        for n, on in te.digital:
            outs = outs.with_digital(n, on)
        ap.outputs = outs
        ap.out.append(OutputChange(line, outs, tuple(te.digital)))
    if te.sync:
        outs = ap.outputs or OutputState(ap.tool)
        for n, on in te.sync:
            outs = outs.with_digital(n, on)
        ap.outputs = outs
        ap.out.append(OutputChange(line, outs, tuple(te.sync), sync=True))
