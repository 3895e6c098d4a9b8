"""Warnings about what a program's writer probably meant: lines that are valid G-code but, on an
arm, are most likely a mistake of dialect. The preflight adds them (:func:`~.preflight.preflight`).

* LONG_DWELL (107): a G4 dwell longer than ``machine.long_dwell`` (10 s by default). P is in
  seconds (LinuxCNC, grbl); Inkscape-style writers mean milliseconds, so ``G4 P150`` would
  stand still for 150 s. The ``dwell_ms`` dialect option (``--dwell-ms``) reads P as
  milliseconds.
* WORK_ZERO_AT_START (108): a G92 before the program's first move makes the robot's home the
  work zero, so the work origin (``--origin``, ``--place``) no longer places the job.
* UNITS_NOT_GIVEN (109): a length (X Y Z I J K R) or feed (F) up to the first move before any
  G20/G21 (on that line or earlier): the program is read in millimetres
  (grbl's default), while LinuxCNC reads it in its machine's units (often inches), so an inch
  program would run 25.4 times too small.

All are warnings (``--strict`` makes them count). Cost: one pass over the blocks, and the parse
of the lines before the first move only.
"""

from __future__ import annotations

from dataclasses import replace

from .blocks import Dwell, Motion
from .config import MachineConfig
from .errors import ErrorCode, Fault, Severity, cap_faults
from .interpreter import Program
from .modal import NonModal
from .parser import parse_chunks

__all__ = ["INTENT_FAULTS", "intent_warnings", "with_intent_warnings"]

#: words whose values are in program units (mm or inch): A B C are degrees, P and S are not lengths
_LENGTH_WORDS = frozenset("XYZIJKRF")

#: the codes this module reports
INTENT_FAULTS = (ErrorCode.LONG_DWELL, ErrorCode.WORK_ZERO_AT_START, ErrorCode.UNITS_NOT_GIVEN)


def _long_dwells(prog: Program, machine: MachineConfig) -> list[Fault]:
    limit = machine.long_dwell
    unit = "ms (--dwell-ms)" if machine.dwell_ms else "s"
    scale = 1000.0 if machine.dwell_ms else 1.0
    hint = ("" if machine.dwell_ms else
            "; if P means milliseconds (Inkscape-style writers), use the --dwell-ms dialect option")
    return [Fault(ErrorCode.LONG_DWELL, b.line, 0, f"G4 P{b.seconds * scale:.12g}: a dwell of {b.seconds:.12g} s "
                  f"(P in {unit}) is longer than {limit:g} s{hint}", Severity.WARNING)
            for b in prog.blocks if isinstance(b, Dwell) and b.seconds > limit]


def _before_first_move(text, prog: Program) -> list[Fault]:
    """WORK_ZERO_AT_START and UNITS_NOT_GIVEN: what the lines before the first move set."""
    first = next((b.line for b in prog.blocks if isinstance(b, Motion)), 0)
    if isinstance(text, (list, tuple)) and all(isinstance(t, str) for t in text[:first]):
        text = "\n".join(text[:first])          # a program given as lines: the ones before the first move
    if not first or not isinstance(text, (str, bytes, bytearray, memoryview)):
        return []                                # (a one-shot iterator has been read by the interpreter)
    out: list[Fault] = []
    units = False          # G20/G21 seen, or the units warning given
    for chunk in parse_chunks(text):
        for pl in chunk.lines:
            units = units or "units" in pl.g
            if not units and not _LENGTH_WORDS.isdisjoint(pl.words):
                units = True
                out.append(Fault(ErrorCode.UNITS_NOT_GIVEN, pl.lineno, 0, "a length or feed before the program "
                                 "gives its units (G20 inches, G21 mm): read in mm, as grbl does (LinuxCNC would use "
                                 "its machine's units, often inches): write G21 or G20 first", Severity.WARNING))
            if pl.lineno >= first:
                return out
            if pl.g.get("nonmodal") == NonModal.OFFSET.value:
                out.append(Fault(ErrorCode.WORK_ZERO_AT_START, pl.lineno, pl.column_of("G", NonModal.OFFSET.value),
                                 "G92 before the first move makes the robot's home position the work zero: the "
                                 "work origin (--origin, --place) no longer places the program", Severity.WARNING))
    return out


def intent_warnings(text, prog: Program, machine: MachineConfig) -> list[Fault]:
    """The warnings of this module for a program ``text`` interpreted as ``prog`` (line order)."""
    return sorted(_before_first_move(text, prog) + _long_dwells(prog, machine), key=lambda f: f.line)


def with_intent_warnings(report, text, max_faults: int):
    """``report`` (a :class:`~.preflight.PreflightReport`) with :func:`intent_warnings` added in line
    order under the same cap; a report already cut at the cap is returned as it is."""
    if report.truncated or report.machine is None:
        return report
    extra = intent_warnings(text, report.program, report.machine)
    if not extra:
        return report
    faults = sorted(list(report.faults) + extra, key=lambda f: (f.line, int(f.code)))
    shown, truncated = cap_faults(faults, max_faults)
    return replace(report, faults=tuple(shown), truncated=truncated)
