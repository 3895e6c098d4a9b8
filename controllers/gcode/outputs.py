"""The tool and I/O outputs of a program, and their timeline along the timed path.

What the outputs are (docs/GCODE.md, "Tool outputs"):

* the **tool output** of the mounted tool (M3/M4 on, M5 off, S its set-point): a spindle turns
  (S rpm), a laser burns (S power, of ``Tool.s_max``), a pen is down, a vacuum cup sucks, a
  gripper closes. A laser works as in grbl's laser mode: off during G0 moves, and under M4 its
  power is S scaled with the tool's speed over the programmed feed (so corners do not burn);
* the **auxiliary outputs** M7 (mist / air assist) and M8 (flood / extraction), both off with M9;
* LinuxCNC's **digital outputs** M62–M65 P n (n = 0 … :data:`MAX_DIGITAL_OUTPUT`), for grippers
  and I/O: M62/M63 switch when the next move starts, M64/M65 at once;
* M300 S (a servo pen), a dialect option: S below :data:`PEN_DOWN_BELOW` puts the pen down.

The interpreter keeps an :class:`OutputState` and emits an
:class:`~.blocks.OutputChange` block for every line that changes it; :func:`output_timeline`
places those changes on the planned time axis, so a run logs them and later workcell code can ask
:meth:`OutputTimeline.at` ("is the vacuum on at t = 3.2 s?").

Pure Python/numpy. Units: s; S in the program's own units (rpm, power units).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable

import numpy as np

from ..tools import MAX_DIGITAL_OUTPUT, Tool, ToolKind, ToolTable
from .blocks import Block, Dwell, Motion, MotionKind, OutputChange, Stop, StopKind
from .modal import SpindleMode

__all__ = ["OutputState", "OutputTimeline", "output_timeline", "program_outputs", "node_arrivals", "move_feeds", "tool_level", "MAX_DIGITAL_OUTPUT",
           "PEN_DOWN_BELOW", "OUTPUT_COLUMNS"]

#: M300 S: a servo angle below this (deg) puts the pen down (Inkscape's writers use S30 down, S50 up)
PEN_DOWN_BELOW = 40.0
#: the run log's output columns (:meth:`OutputState.log_row` plus the effective level)
OUTPUT_COLUMNS = ("tool", "tool_on", "s", "tool_level", "mist", "flood", "dout")


@dataclass(frozen=True, slots=True)
class OutputState:
    """Every output of the program at one moment.

    Attributes:
        tool: the mounted tool's number (T, after M6).
        mode: the tool output (:class:`~.modal.SpindleMode`: M3, M4 or M5 = off).
        s: the S set-point (rpm, laser power units; kept while off, as G-code's S is modal).
        mist: M7's output is on.
        flood: M8's output is on.
        digital: the digital outputs that are on (M62/M64 P n).
    """

    tool: int = 0
    mode: SpindleMode = SpindleMode.OFF
    s: float = 0.0
    mist: bool = False
    flood: bool = False
    digital: frozenset[int] = field(default_factory=frozenset)

    @property
    def tool_on(self) -> bool:
        """The tool output is on (M3 or M4)."""
        return self.mode is not SpindleMode.OFF

    def works(self, tool: Tool) -> bool:
        """``tool`` is working: its digital output is on (a tool with ``output``, M62/M64 P n), or
        else the tool output is on (M3/M4)."""
        return self.tool_on if tool.output is None else tool.output in self.digital

    @property
    def digital_mask(self) -> int:
        """The digital outputs as a bit mask (bit n: output P n)."""
        return sum(1 << n for n in self.digital)

    def with_digital(self, n: int, on: bool) -> "OutputState":
        """A copy with digital output ``n`` switched."""
        return replace(self, digital=self.digital | {n} if on else self.digital - {n})

    def log_row(self, level: float) -> list:
        """The run log's output columns (:data:`OUTPUT_COLUMNS`) with the tool's effective ``level``."""
        return [self.tool, int(self.tool_on), f"{self.s:g}", f"{level:.4f}", int(self.mist), int(self.flood),
                self.digital_mask]


def tool_level(state: OutputState, tool: Tool, speed, feed, rapid) -> np.ndarray:
    """The tool output's effective level, 0 … 1, at path samples.

    On (M3, or the tool's digital output: :meth:`OutputState.works`): S / ``tool.s_max`` (1 when the tool has no S scale or no S was given). A laser
    works as in grbl's laser mode: off (0) on G0 moves under M3 and M4, and under M4 (dynamic
    power) the level is scaled with ``speed / feed`` (at most 1), so it burns evenly through the
    accelerations and corners. Off: 0.

    Args:
        state: the outputs at the samples.
        tool: the mounted tool.
        speed: (K,) path speed, m/s.
        feed: (K,) the programmed feed of the samples' moves, m/s (0 for rapids).
        rapid: (K,) bool, the sample lies on a G0 move.
    """
    speed = np.asarray(speed, dtype=float)
    if not state.works(tool):
        return np.zeros(speed.shape)
    base = min(state.s / tool.s_max, 1.0) if tool.s_max > 0 and state.s > 0 else 1.0
    if tool.kind is not ToolKind.LASER:
        return np.full(speed.shape, base)
    level = np.full(speed.shape, base)
    if state.mode is SpindleMode.CCW:
        feed = np.asarray(feed, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            level *= np.where(feed > 0, np.minimum(speed / np.where(feed > 0, feed, 1.0), 1.0), 0.0)
    return np.where(np.asarray(rapid, dtype=bool), 0.0, level)


@dataclass(frozen=True, eq=False)
class OutputTimeline:
    """The output state along the planned time axis: a step function.

    Attributes:
        times: (E,) when each state starts, s, non-decreasing; ``times[0]`` is 0.
        states: (E,) the states (the last one at equal times wins).
        lines: (E,) the program line that set each state (0 for the start).
        tools: the tool table (for the tools' kinds and S scales).
    """

    times: np.ndarray
    states: tuple[OutputState, ...]
    lines: np.ndarray
    tools: ToolTable

    def index_at(self, t):
        """Index (or (K,) indices) of the state in force at ``t`` s."""
        return np.searchsorted(self.times, t, side="right") - 1

    def at(self, t: float) -> OutputState:
        """The outputs in force at ``t`` s (the start state before 0)."""
        i = int(np.searchsorted(self.times, float(t), side="right")) - 1
        return self.states[max(i, 0)]

    @property
    def tools_mounted(self) -> tuple[int, ...]:
        """The tools the program has on the flange, in order (the start tool first; repeats merged)."""
        out: list[int] = []
        for st in self.states:
            if not out or out[-1] != st.tool:
                out.append(st.tool)
        return tuple(out)

    def mounted(self, state: OutputState) -> Tool:
        """The tool ``state`` has on the flange (the bare flange for a number the table lacks)."""
        return self.tools.get(state.tool, self.tools[0])

    def tool_on(self, t: float) -> bool:
        """The mounted tool works at ``t`` (the vacuum sucks, the pen is down, ...): its output —
        M3/M4, or the digital output the tool table names for it (:meth:`OutputState.works`)."""
        s = self.at(t)
        return s.works(self.mounted(s))

    def grips(self, t: float) -> bool:
        """The mounted tool holds what it touches at ``t``: a vacuum cup or gripper that works."""
        s = self.at(t)
        tool = self.mounted(s)
        return tool.kind.grips and s.works(tool)

    def grips_at(self, t) -> np.ndarray:
        """(K,) bool: the mounted tool holds what it touches at each of the times ``t`` (K,) s
        (:meth:`grips` for many samples at once)."""
        holds = np.array([self.mounted(s).kind.grips and s.works(self.mounted(s)) for s in self.states])
        return holds[np.maximum(self.index_at(np.asarray(t, dtype=float)), 0)]

    def marks(self, t: float) -> bool:
        """The mounted tool marks the work at ``t``: a pen that is down or a laser that is on."""
        s = self.at(t)
        tool = self.mounted(s)
        return tool.kind.marks and s.works(tool)

    def digital(self, t: float, n: int) -> bool:
        """Digital output ``n`` is on at ``t``."""
        return n in self.at(t).digital

    def levels(self, t, speed, feed, rapid) -> np.ndarray:
        """(K,) the tool output's effective level (:func:`tool_level`) at samples at times ``t`` (K,)."""
        t = np.asarray(t, dtype=float)
        idx = np.maximum(self.index_at(t), 0)
        out = np.zeros(len(t))
        speed, feed, rapid = np.asarray(speed, float), np.asarray(feed, float), np.asarray(rapid, bool)
        for i in np.unique(idx):
            k = idx == i
            st = self.states[int(i)]
            out[k] = tool_level(st, self.tools.get(st.tool, self.tools[0]), speed[k], feed[k], rapid[k])
        return out


def output_timeline(blocks: Iterable[Block], arrivals: np.ndarray, tools: ToolTable,
                    start: OutputState | None = None) -> OutputTimeline:
    """Place the program's output changes on the time axis.

    A change takes effect when the path reaches the node where the line stands (the end of the
    previous move), after the dwells before it at that node; a ``sync`` change (M62/M63) when
    the next move starts (after every dwell at that node).

    Args:
        blocks: the program's blocks, in order (an END stop ends them).
        arrivals: (B + 1,) the time (s) the path arrives at the node before motion block b
            (b = 0 … B - 1) and at the end of the last one (b = B), dwells not included.
        tools: the tool table.
        start: the outputs at the start (default all off, T0).
    """
    state = start or OutputState()
    times, states, lines = [0.0], [state], [0]
    motion, dwelt = 0, 0.0
    pending: list[OutputChange] = []

    def change(t: float, blk: OutputChange) -> None:
        nonlocal state
        new = state if blk.sync else replace(blk.outputs, digital=state.digital)
        for n, on in blk.digital:
            new = new.with_digital(n, on)
        state = new
        times.append(t)
        states.append(new)
        lines.append(blk.line)

    for blk in blocks:
        if isinstance(blk, Motion):
            for p in pending:
                change(float(arrivals[motion]) + dwelt, p)
            pending = []
            motion += 1
            dwelt = 0.0
        elif isinstance(blk, Dwell):
            dwelt += blk.seconds
        elif isinstance(blk, OutputChange):
            if blk.sync:
                pending.append(blk)
            else:
                change(float(arrivals[min(motion, len(arrivals) - 1)]) + dwelt, blk)
        elif isinstance(blk, Stop) and blk.kind is StopKind.END:
            break
    for p in pending:
        change(float(arrivals[min(motion, len(arrivals) - 1)]) + dwelt, p)
    return OutputTimeline(np.array(times), tuple(states), np.array(lines, dtype=np.int64), tools)


def program_outputs(program, plan, machine) -> OutputTimeline:
    """The output timeline of an interpreted ``program`` along its timed ``plan`` (None: no motion)
    with ``machine``'s tool table and start tool (None: the built-in table, T0)."""
    from ..tools import default_tools
    tools = machine.tools if machine is not None else default_tools()
    start = OutputState(machine.tool if machine is not None else 0)
    arrivals = node_arrivals(plan) if plan is not None else np.zeros(1)
    return output_timeline(program.blocks, arrivals, tools, start)


def node_arrivals(plan) -> np.ndarray:
    """(B + 1,) when the timed path of ``plan`` (:class:`~.planner.Plan`) reaches the start of each
    motion block and (last) the end of the last one, s, before the dwells there."""
    B, S = len(plan.motions), plan.segment_count
    out = np.zeros(B + 1)
    if S == 0:
        return out
    delay = plan.nodes.delay
    node_t = np.empty(S + 1)
    node_t[:S] = plan.t_start - delay[:S]
    node_t[S] = plan.duration - delay[S]
    first = np.searchsorted(plan.block, np.arange(B + 1))   # a block without chords: the next node
    out[:] = node_t[np.minimum(first, S)]
    out[B] = node_t[S]
    return out


def move_feeds(motions, block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(feed m/s, rapid bool) of the motion blocks ``block`` (K,) (for :meth:`OutputTimeline.levels`)."""
    feed = np.array([m.feed for m in motions], dtype=float)
    rapid = np.array([m.kind is MotionKind.RAPID for m in motions], dtype=bool)
    return feed[block], rapid[block]
