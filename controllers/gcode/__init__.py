"""G-code for robot arms: a strict parser, the modal interpreter, the motion planner, the
preflight check and the control trajectory, behind one service, :func:`compile_program`
(pure Python/numpy, no PyBullet). See docs/GCODE.md.

>>> from armtwin import robots
>>> from armtwin.controllers.gcode import load_program
>>> prog = load_program("G21 G90\\nG0 X0 Y0 Z10\\nG1 Z0 F600\\n", robots.get("irb120"))
>>> prog.ok, len(prog.blocks), prog.blocks[-1].end   # metres in the base frame (origin 350, 0, 200 mm)
(True, 2, (0.35, 0.0, 0.2))
"""

from .compile import CompiledProgram, compile_program
from .config import MachineConfig, machine_for
from .errors import MAX_FAULTS, ErrorCode, Fault, GcodeError, Severity
from .interpreter import Dwell, Interpreter, Motion, MotionKind, Program, Stop, StopKind, interpret, load_program
from .parser import ParsedLine, ParseResult, parse_line, parse_program
from .trajectory import ControlTrajectory, ControlTrajectoryError

__all__ = ["ErrorCode", "Fault", "GcodeError", "Severity", "MAX_FAULTS", "ParsedLine", "ParseResult",
           "parse_line", "parse_program", "MachineConfig", "machine_for", "Interpreter", "Program", "Motion",
           "MotionKind", "Dwell", "Stop", "StopKind", "interpret", "load_program", "compile_program",
           "CompiledProgram", "ControlTrajectory", "ControlTrajectoryError"]
