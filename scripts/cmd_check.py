"""``armtwin check PROGRAM --robot R``: the G-code preflight, per line, without physics.

Exit codes: 0 the program is clean, 1 it has faults (or warnings with ``--strict``),
2 usage errors (unknown robot, a PROGRAM that is missing, a directory, not a regular file
or unreadable, bad --origin). Programs of more than :data:`PROGRESS_MIN_LINES` lines show
the preflight's stages with a percentage on stderr (not with ``--json``).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cli import FILE_KINDS, CliError, StderrProgress, add_json_flag, get_robot, print_json
from .options import add_tool_options, tool_settings
from .placing import add_place_options, dialect, place, placement_json

EXIT_FAULTY = 1
#: largest program file, bytes
MAX_PROGRAM_BYTES = 200_000_000
#: programs with more lines than this show progress on stderr
PROGRESS_MIN_LINES = 50_000


def register(sub) -> None:
    p = sub.add_parser("check", help="preflight a G-code program: parse, plan, IK, limits (no physics)")
    add_program_args(p)
    add_place_options(p)
    p.add_argument("--strict", action="store_true", help="warnings (near singularity) also count as faults")
    add_json_flag(p)
    p.set_defaults(func=run)


def add_program_args(p: argparse.ArgumentParser) -> None:
    """PROGRAM, --robot, --origin, --optional-stop and the tool options (shared with ``armtwin run``)."""
    p.add_argument("program", help="G-code file (.ngc, .gcode, .nc)")
    p.add_argument("--robot", required=True, help="robot id (see `armtwin robots`)")
    p.add_argument("--origin", nargs=3, type=float, metavar=("X", "Y", "Z"),
                   help="work origin (program X0 Y0 Z0) in the robot base frame, mm (default: per robot, see docs/GCODE.md)")
    p.add_argument("--optional-stop", action="store_true",
                   help="M1 (optional stop) pauses like M0 (default: M1 does nothing, with a note)")
    add_tool_options(p)
    add_cell_arg(p, "check the path for collisions with this workcell", implicit=True)
    p.add_argument("--clearance", type=float, metavar="MM",
                   help="with --cell: warn where a link passes closer than MM (0 to 100) to a body or another link "
                        "(error with --strict)")
    _own_extra_arguments(p)


def add_cell_arg(p: argparse.ArgumentParser, what: str, *, implicit: bool = False) -> None:
    """``--cell FILE|default`` (read by :func:`load_cell_arg`), shared by ``check``, ``run``, ``compare``,
    ``ui`` and ``ik``: ``what`` says what the command does with the cell. ``implicit``: the command
    uses the robot's built-in cell when none is given, and takes ``--no-cell`` for the empty world."""
    default = ("; without it the robot's built-in cell, a table whose top is the program's Z0 under the "
               "default work origin" if implicit else "")
    p.add_argument("--cell", "--workcell", metavar="FILE",
                   help=f"{what} (a TOML file, docs/WORKCELL.md) and the robot with itself; "
                        f"'default': the robot's built-in cell, a table under its work{default}")
    if implicit:
        p.add_argument("--no-cell", "--no-workcell", dest="no_cell", action="store_true",
                       help="no workcell: the robot alone in an empty world (no table and no collision check, "
                            "not even of the robot with itself)")


def _own_extra_arguments(p: argparse.ArgumentParser) -> None:
    """Report words left over after this subcommand's arguments with its own usage (argparse
    leaves them to the top-level parser, which shows the top-level usage), and say when they
    follow ``--origin``'s three numbers (``--origin 350 0 200 1``)."""
    parse = p.parse_known_args

    def parse_known_args(args=None, namespace=None):
        ns, extra = parse(args, namespace)
        if extra:
            words = list(args or ())
            hint = ""
            if "--origin" in words:
                i = len(words) - 1 - words[::-1].index("--origin")
                if words[i + 4:i + 5] == extra[:1]:
                    hint = " (--origin takes three numbers: X Y Z, mm)"
            p.error(f"unrecognized arguments: {' '.join(extra)}{hint}")
        return ns, extra

    p.parse_known_args = parse_known_args


def load(args: argparse.Namespace):
    """(spec, machine, text) from the shared arguments, with CLI errors for bad input."""
    from ..controllers.gcode import machine_for
    spec = get_robot(args.robot)
    tools = tool_settings(args)
    try:
        machine = machine_for(spec, args.origin, optional_stop=bool(getattr(args, "optional_stop", False)), **tools)
    except ValueError as exc:
        raise CliError(f"--origin: {exc}") from None
    load_cell_arg(args, spec)
    return spec, machine, read_program(args.program)


@dataclass
class CellCheck:
    """The workcell a program was checked in, and what the collision check found.

    Attributes:
        cell: the cell (:class:`~armtwin.robots.workcell.Cell`).
        contacts: the first contact of each pair (:class:`~armtwin.envs.collision.Contact`).
        seconds: CPU time of the collision check, s.
        clearance: ``--clearance``, m (0: none).
        near_misses: with a clearance, the first approach of each pair that does not touch.
    """

    cell: Any
    contacts: list = field(default_factory=list)
    seconds: float = 0.0
    clearance: float = 0.0
    near_misses: list = field(default_factory=list)


def load_cell_arg(args: argparse.Namespace, spec) -> CellCheck | None:
    """Read ``--cell`` (a file, or 'default') into ``args.cell_check``; CliError (exit 2) naming the
    file and line of a bad cell.

    A command that takes ``--no-cell`` (:func:`add_cell_arg` with ``implicit``) gets the robot's
    built-in cell when no ``--cell`` is given, except while ``--place`` searches for a work origin
    (the search looks for an origin anywhere in reach, where the built-in table would stand in the
    way: give ``--cell`` to search in a cell). The built-in cell's table top is the Z0 plane of the
    robot's *default* work origin: a program moved with ``--origin`` moves over a table that stays."""
    from ..robots.workcell import CellError, default_cell, load_cell
    name = getattr(args, "cell", None)
    clearance = getattr(args, "clearance", None)
    if clearance is not None and not (math.isfinite(clearance) and 0 < clearance <= 100):
        raise CliError(f"--clearance {clearance:g}: a distance from 0 to 100 mm (more than 0)")
    if getattr(args, "no_cell", False):
        if name is not None:
            raise CliError(f"--cell {name} and --no-cell: choose one")
        name = None
    elif name is None and hasattr(args, "no_cell") and getattr(args, "place", None) is None:
        name = "default"
    if name is None:
        if clearance is not None:
            raise CliError("--clearance needs a cell (--cell FILE or 'default'): the distance is to the cell's bodies")
        args.cell_check = None
        return None
    if name == "default":
        cell = default_cell(spec)
    else:
        try:
            check_program_file(Path(name), what="a workcell file")
        except CliError as exc:
            raise CliError(f"--cell {exc}") from None
        try:
            cell = load_cell(name)
        except CellError as exc:
            raise CliError(f"--cell {exc}") from None
        except OSError as exc:
            raise CliError(f"--cell {name}: cannot read ({exc.strerror or exc})") from None
    args.cell_check = CellCheck(cell, clearance=(clearance or 0.0) / 1000.0)
    return args.cell_check


def read_program(program: str) -> bytes:
    """The bytes of a program file (the parser names non-ASCII bytes as they are); CliError
    (exit 2) for a file that is missing, not a regular file, unreadable or over
    :data:`MAX_PROGRAM_BYTES`."""
    path = Path(program)
    check_program_file(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_PROGRAM_BYTES + 1)
    except OSError as exc:
        raise CliError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > MAX_PROGRAM_BYTES:
        raise CliError(f"{path}: more than {MAX_PROGRAM_BYTES / 1e6:.0f} MB is too large for a G-code program")
    return data


def check_program_file(path: Path, what: str = "a G-code file") -> None:
    """CliError unless ``path`` is an existing regular file (without opening it: a FIFO would block)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        broken = os.path.islink(path)
        raise CliError(f"{path}: no such file" + (" (a broken symbolic link)" if broken else "")) from None
    except NotADirectoryError:
        raise CliError(f"{path}: no such file (a part of the path is not a folder)") from None
    except OSError as exc:
        raise CliError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise CliError(f"{path}: is a directory, not {what}")
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in FILE_KINDS if test(st.st_mode)), "not a regular file")
        raise CliError(f"{path}: is {kind}, not a regular file" if kind != "not a regular file"
                       else f"{path}: not a regular file")


def check(args: argparse.Namespace, *, quiet: bool = False):
    """Run the preflight with a short note on stderr; returns the report."""
    from ..controllers.gcode.preflight import preflight
    spec, machine, data = load(args)
    machine = dialect(args, machine)
    placing = getattr(args, "place", None) is not None
    progress = None
    if not quiet and not placing:
        print(f"checking {args.program} for {spec.name} …", file=sys.stderr)
        if data.count(b"\n") > PROGRESS_MIN_LINES:
            progress = StderrProgress(f"checking {args.program}")
    passes: tuple = ()
    cc = getattr(args, "cell_check", None)
    models = []
    if cc is not None:
        from ..envs.collision import CollisionModel, clearance_pass, timed_collision_pass
        tool = body_tool(data, spec, machine)
        models.append(CollisionModel(spec, cc.cell, tool=tool))
        passes = (timed_collision_pass(models[0], cc),)
        if cc.clearance > 0:
            models.append(CollisionModel(spec, cc.cell, tool=tool, clearance=cc.clearance))
            passes += (clearance_pass(models[1], cc.contacts, cc.near_misses),)
    try:
        if placing:     # --place: the search checks its candidates in full (with the cell's passes) and keeps the best
            machine, rep = place(args, spec, machine, data, quiet=quiet, passes=passes)
        else:
            rep = preflight(data, spec, machine, progress=progress.stage if progress is not None else None,
                            passes=passes)
    finally:
        for model in models:
            model.close()
    if progress is not None:
        progress.done()
    return spec, machine, rep


def body_tool(data: bytes, spec, machine):
    """The tool that is part of the robot for the collision check: the one ``run`` puts on the
    simulated flange (:attr:`~armtwin.controllers.gcode.compile.CompiledProgram.body_tool`) — the
    start tool, or else the first one the program mounts with M6 (found by a preflight without the
    collision pass, only for programs that have an M6) — or None for the bare flange."""
    from ..controllers.gcode.compile import CompiledProgram
    from ..controllers.gcode.preflight import preflight
    from ..controllers.tools import ToolKind
    start = machine.start_tool
    if start.kind is not ToolKind.NONE:
        return start
    if re.search(rb"[Mm]\s*0*6(?![0-9.])", data) is None:
        return None
    return CompiledProgram(preflight(data, spec, machine), None).body_tool


def report_dict(rep, spec, machine, strict: bool, cell_check: CellCheck | None = None) -> dict:
    cell = {} if cell_check is None else {"cell": {
        "name": cell_check.cell.name, "source": cell_check.cell.source,
        "bodies": [b.name for b in cell_check.cell.bodies], "check_s": cell_check.seconds,
        "contacts": [c.to_dict() for c in cell_check.contacts],
        "clearance_mm": cell_check.clearance * 1000,
        "near_misses": [{**c.to_dict(), "distance_mm": max(-c.depth, 0.0) * 1000} for c in cell_check.near_misses]}}
    return {
        "robot": spec.name,
        "clean": rep.clean(strict),
        "lines": rep.program.line_count,
        "lines_with_motion": rep.lines_with_motion,
        "program_time_s": rep.duration,
        "origin_mm": [v * 1000 for v in machine.origin],
        "faults": [f.to_dict() for f in rep.faults],
        "truncated": rep.truncated,
        "tool_changes": tool_changes(rep),
        **cell,
    }


def tool_changes(rep) -> list[dict]:
    """The program's M6 tool changes (stops: the arm rests): line and tool number."""
    from ..controllers.gcode.blocks import OutputChange, Stop, StopKind
    out, blocks = [], rep.program.blocks
    for i, b in enumerate(blocks):
        if isinstance(b, Stop) and b.kind is StopKind.TOOL_CHANGE:
            nxt = blocks[i + 1] if i + 1 < len(blocks) else None
            out.append({"line": b.line, "tool": nxt.outputs.tool if isinstance(nxt, OutputChange) else None})
    return out


def run(args: argparse.Namespace) -> int:
    spec, machine, rep = check(args, quiet=args.json)
    clean = rep.clean(args.strict)
    if args.json:
        print_json({"program": args.program, **report_dict(rep, spec, machine, args.strict, args.cell_check),
                    **placement_json(args, spec)})
        return 0 if clean else EXIT_FAULTY
    print_report(args.program, rep, spec, machine, args.strict, args.cell_check)
    return 0 if clean else EXIT_FAULTY


def print_report(name: str, rep, spec, machine, strict: bool, cell_check: CellCheck | None = None) -> None:
    for f in rep.faults:
        print(f"{name}:{f}" if f.line else f"{name}: {f}")
    o = ", ".join(f"{v * 1000:g}" for v in machine.origin) + " mm"
    if cell_check is not None:
        o += f"; cell {cell_check.cell.name!r}, {len(cell_check.contacts)} contact(s)"
    n_err = len(rep.errors(False))
    n_note = sum(f.severity.value == "note" for f in rep.faults)
    n_warn = len(rep.faults) - n_err - n_note
    changes = tool_changes(rep)
    if changes:
        print(f"{name}: tool change(s): " + ", ".join(f"line {c['line']} T{c['tool']}" for c in changes)
              + " (M6: the arm rests while the tool is changed)")
    if rep.clean(strict):
        extra = (f", {n_warn} warning(s)" if n_warn else "") + (f", {n_note} note(s)" if n_note else "")
        print(f"{name}: clean for {spec.name} (origin {o}): {rep.program.line_count} lines, "
              f"{rep.lines_with_motion} moving, program time {rep.duration:.1f} s{extra}")
    else:
        print(f"{name}: FAULTY for {spec.name} (origin {o}): {n_err} error(s), {n_warn} warning(s)")
