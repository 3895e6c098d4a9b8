"""``armtwin run --log run.mcap``: the run as ROS 2 messages in an MCAP file.

One control period of the run is one :meth:`RunMcapLog.write`: the simulated joints
(``/joint_states``: positions, velocities, efforts), the commanded ones, every link's TF edge,
the flange pose measured and commanded, and the G-code line whenever it changes; the program's
tool and I/O outputs (``/tool_outputs``, :meth:`RunMcapLog.outputs`) at the start and whenever
one changes; notes (the start, an instability, an interruption) go to ``/rosout``. Topics and units:
:data:`armtwin.envs.telemetry.topics.RUN_TOPICS`, docs/TELEMETRY.md.

The loop only copies the numbers and queues them (:class:`~.mcapfile.McapFile`); the writer
thread encodes and writes, in order. :meth:`RunMcapLog.close` writes everything queued and the
file's summary.
"""

from __future__ import annotations

import os
import time
from typing import Sequence

import numpy as np

from ...controllers.gcode.outputs import OUTPUT_COLUMNS, OutputState
from .common import write_note, write_robot
from .mcapfile import Compression, McapFile
from .rosmsg import JointStateLayout, LogLevel, TFLayout, encode_path, encode_pose_stamped, encode_string
from .tf import REPORT_FRAME, RobotFrames, quat_of
from .topics import (COMMANDED, GCODE_LINE, JOINT_STATES, PLANNED_PATH, RUN_TOPICS, TF, TOOL_OUTPUTS, TOOL_POSE,
                     TOOL_POSE_COMMANDED)

__all__ = ["RunMcapLog", "OUTPUT_NAMES", "output_values"]

#: the names of ``/tool_outputs``' values: the CSV run log's output columns, in their order
OUTPUT_NAMES = tuple(OUTPUT_COLUMNS)


def output_values(state: OutputState, level: float) -> tuple[float, ...]:
    """``/tool_outputs``' values (:data:`OUTPUT_NAMES`) of ``state`` with the tool's effective
    ``level`` 0 … 1: the CSV's output columns as numbers — tool number, tool on (0/1), S
    (rpm, power units), level, mist M7 (0/1), flood M8 (0/1), digital outputs (bit mask, bit n: P n)."""
    return (float(state.tool), float(state.tool_on), float(state.s), float(level), float(state.mist),
            float(state.flood), float(state.digital_mask))


class RunMcapLog:
    """The MCAP log of one ``armtwin run``.

    Args:
        path: the ``.mcap`` file (replaced if it exists), or None (only ``live``).
        spec: the robot.
        base_position: where the robot's root link stands in the world, m.
        program: the program's name (metadata and notes).
        source_lines: the program's lines, for ``/gcode/line`` (line numbers only without them).
        compression: chunk compression.
        live: a :class:`~.live.LiveServer` streaming the same messages (``--live``; closed with the log).
        planned_path: (M, 3) the programmed path in the reporting frame, m: ``/path/planned`` once.
        start_ns: the wall-clock time (ns since the epoch) that run time 0 maps to (default: now).
        command: the armtwin command (metadata and the first note): "run", or "ui" for the
            pendant's ``--live`` stream (its target joints as the commanded ones).

    Raises:
        OSError: the file cannot be created.
    """

    def __init__(self, path: str | os.PathLike | None, spec, *, base_position: Sequence[float] = (0.0, 0.0, 0.0),
                 program: str = "", source_lines: Sequence[str] | None = None, mode: str = "",
                 compression: Compression = Compression.ZSTD, start_ns: int | None = None, live=None,
                 planned_path: np.ndarray | None = None, command: str = "run") -> None:
        self.path = os.fspath(path) if path is not None else None
        self.spec = spec
        self.frames = RobotFrames(spec, base_position)
        self.names = list(spec.joint_names)
        self._measured = JointStateLayout(self.names, velocity=True, effort=True)
        self._commanded = JointStateLayout(self.names, velocity=True)
        self._tf = TFLayout(self.frames.edges)
        self._outputs = JointStateLayout(OUTPUT_NAMES)
        self._last_outputs: tuple[float, ...] | None = None
        self.source_lines = source_lines
        self.program = program
        self.t0 = time.time_ns() if start_ns is None else int(start_ns)
        self.rows = 0
        self._line = None
        self.file = McapFile(self.path, RUN_TOPICS, compression=compression, live=live)
        meta = {"command": command, "program": program, "joint_mode": mode}
        self.file.submit(write_robot, spec, self.frames, self.t0, meta)
        if planned_path is not None:
            self.file.submit(lambda f, ns, pts: f.message(PLANNED_PATH, ns, encode_path(ns, REPORT_FRAME, pts)),
                             self.t0, np.array(planned_path, dtype=float))
        what = f"run of {program or 'a program'}" if command == "run" else f"armtwin {command}"
        self.note(0.0, LogLevel.INFO, f"{what} on the {spec.name}" + (f" ({mode} joints)" if mode else ""))

    def _ns(self, t: float) -> int:
        return self.t0 + int(round(t * 1e9))

    def write(self, t: float, line: int | None, q_cmd: np.ndarray, qd_cmd: np.ndarray, q: np.ndarray, qd: np.ndarray,
              tau: np.ndarray, flange: np.ndarray) -> None:
        """One control period at run time ``t`` s: commanded joints (rad / m, rad/s / m/s), the
        simulated joints, velocities and efforts (N·m / N), the flange pose (4, 4) in the
        reporting frame (m) as the engine has it; ``line`` None: no program line (the pendant
        between programs: nothing on ``/gcode/line``)."""
        text = None
        if line != self._line:
            self._line = line
            if line is not None:
                src = self.source_lines
                body = src[line - 1].strip() if src and 0 < line <= len(src) else ""
                text = f"{line}: {body}" if body else str(line)
        self.file.submit(_write_period, self, self._ns(t), text, np.array(q_cmd, dtype=float),
                         np.array(qd_cmd, dtype=float), np.array(q, dtype=float), np.array(qd, dtype=float),
                         np.array(tau, dtype=float), np.array(flange, dtype=float))
        self.rows += 1

    def outputs(self, t: float, values: Sequence[float]) -> bool:
        """The program's outputs at run time ``t`` s (:func:`output_values`): one ``/tool_outputs``
        message when they differ from the last one written (and the first time); True if written.

        Why on change and not every period: the outputs are a step function (a handful of changes
        in a program), and a viewer's plot or state panel draws a step from its changes; a laser
        under M4 (its level follows the speed) changes nearly every period and gets nearly every
        period."""
        vals = tuple(float(v) for v in values)
        if vals == self._last_outputs:
            return False
        self._last_outputs = vals
        self.file.submit(lambda f, ns, v: f.message(TOOL_OUTPUTS, ns, self._outputs.encode(ns, v)), self._ns(t), vals)
        return True

    def note(self, t: float, level: int, text: str) -> None:
        """A ``/rosout`` message at run time ``t`` s (level: :class:`~.rosmsg.LogLevel`)."""
        self.file.submit(write_note, self._ns(t), level, text, self.program, self._line or 0)

    def close(self) -> None:
        """Write everything queued and the summary (idempotent); OSError if the writing failed."""
        self.file.close()


def _write_period(f: McapFile, log: RunMcapLog, ns: int, text: str | None, q_cmd, qd_cmd, q, qd, tau, flange) -> None:
    f.message(JOINT_STATES, ns, log._measured.encode(ns, q, qd, tau))
    f.message(COMMANDED, ns, log._commanded.encode(ns, q_cmd, qd_cmd))
    f.message(TF, ns, log._tf.encode(ns, log.frames.moving(q)))
    f.message(TOOL_POSE, ns, encode_pose_stamped(ns, REPORT_FRAME, flange[:3, 3], quat_of(flange)))
    f.message(TOOL_POSE_COMMANDED, ns, encode_pose_stamped(ns, REPORT_FRAME, *log.frames.flange(q_cmd)))
    if text is not None:
        f.message(GCODE_LINE, ns, encode_string(text))
