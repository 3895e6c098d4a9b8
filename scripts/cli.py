"""The ``armtwin`` command line.

Each subcommand lives in its own module ``scripts/cmd_<name>.py`` that defines
``register(subparsers)``; each benchmark in ``scripts/bench_<name>.py`` is registered
under ``armtwin bench <name>`` the same way. Handlers take the parsed arguments and
return an exit code. Units at this edge: mm, degrees, mm/min.

Errors a user can cause (unknown robot, bad numbers, unreachable poses, bad files)
raise :class:`CliError` (or ValueError/KeyError/OSError from the library) and end as
one line on stderr with exit code 2 — never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import re
import stat
import sys
from typing import Any

import numpy as np

EXIT_USAGE = 2
#: the reader of standard output went away (``armtwin … | head``): 128 + SIGPIPE, as a Unix tool
EXIT_BROKEN_PIPE = 141
#: stopped by Ctrl-C (SIGINT) or by SIGTERM, after closing what it wrote: 128 + the signal's number
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, like Ctrl-C's KeyboardInterrupt: every command that
    closes its logs, videos and links on Ctrl-C does the same on SIGTERM (``kill``, a service
    manager, a container stopping), and ends with :data:`EXIT_TERMINATED`."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


def handle_sigterm_as_interrupt() -> None:
    """Make SIGTERM raise :class:`Terminated` in the main thread (call from the main thread)."""
    import signal
    import threading
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)


class CliError(Exception):
    """A user-facing error: printed as one line, exit code ``code``."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


class ArgumentParser(argparse.ArgumentParser):
    """argparse with armtwin's rules for every command and subcommand:

    - a usage error is one line, ``armtwin: error: CMD: …`` with exit code 2, like every other
      error of bad input (no usage block; ``--help`` shows it);
    - a value that is a negative number in any notation armtwin prints (``-7.7e-05``, ``-1E3``,
      ``-.5``, ``-inf``) is a value, not an option.
    """

    _NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$|^-(inf|infinity|nan)$", re.IGNORECASE)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = self._NUMBER

    def error(self, message: str):  # type: ignore[override]
        """One line on stderr and exit code 2 (argparse would print the usage block first)."""
        sub = self.prog.partition(" ")[2]
        self.exit(EXIT_USAGE, f"armtwin: error: {sub + ': ' if sub else ''}{message} (see {self.prog} --help)\n")


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so that Python's last flush at exit does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _modules(prefix: str) -> list[str]:
    from . import __path__ as pkg_path
    return sorted(m.name for m in pkgutil.iter_modules(pkg_path) if m.name.startswith(prefix))


def build_parser() -> argparse.ArgumentParser:
    """The full parser with every discovered subcommand."""
    from .. import __version__
    parser = ArgumentParser(prog="armtwin", description="Simulation and digital twin for industrial robot arms.")
    parser.add_argument("--version", action="version", version=f"armtwin {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _modules("cmd_"):
        importlib.import_module(f".{name}", __package__).register(sub)
    bench = sub.add_parser("bench", help="benchmarks that print measured ratios side by side")
    bench_sub = bench.add_subparsers(dest="bench", metavar="BENCHMARK")
    for name in _modules("bench_"):
        importlib.import_module(f".{name}", __package__).register(bench_sub)
    bench.set_defaults(func=lambda a: (bench.print_help(), EXIT_USAGE)[1])
    return parser


#: optional packages -> the setup.cfg extra that installs them (for a one-line message, not a traceback)
_EXTRA_OF = {"gcodeparser": "bench", "panda_gym": "bench", "stable_baselines3": "rl", "torch": "rl",
             "viser": "ui", "trimesh": "ui", "yourdfpy": "ui", "playwright": "test", "hypothesis": "test",
             "ray": "cluster", "scipy": "fit", "numba": "fit", "mcap": "telemetry", "mcap_ros2": "telemetry",
             "paho": "telemetry", "foxglove": "telemetry"}


def missing_extra(module: str, extra: str | None = None) -> CliError:
    """The one-line error for an optional package that is not installed, naming its extra:
    ``this command needs the 'viser' package of the 'ui' extra: pip install -e ".[ui]"``."""
    top = module.split(".")[0]
    extra = extra or _EXTRA_OF.get(top, top)
    return CliError(f"this command needs the '{top}' package of the '{extra}' extra: pip install -e \".[{extra}]\" "
                    f"(from the repository)")


def require_telemetry(*modules: str) -> None:
    """CliError (the one-line extras hint) unless the 'telemetry' extra's packages are installed
    (``modules``, default the MCAP ones): checked before a run starts, not when its log is opened."""
    import importlib.util
    for mod in modules or ("mcap", "mcap_ros2"):
        if importlib.util.find_spec(mod) is None:
            raise missing_extra(mod)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``armtwin`` console command."""
    handle_sigterm_as_interrupt()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()       # here, where a reader that went away is handled, not at exit
        return code
    except BrokenPipeError:     # `armtwin … | head`: the reader has gone; stop quietly, as Unix tools do
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except CliError as exc:
        print(f"armtwin: error: {exc}", file=sys.stderr)
        return exc.code
    except ModuleNotFoundError as exc:  # an optional extra that is not installed
        top = (exc.name or "").split(".")[0]
        if top not in _EXTRA_OF:
            raise
        print(f"armtwin: error: {missing_extra(top)}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, KeyError, OSError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"armtwin: error: {msg}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:   # Ctrl-C, or SIGTERM (Terminated): what was written is closed and kept
        term = isinstance(exc, Terminated)
        print(f"armtwin: {'terminated (SIGTERM)' if term else 'interrupted'}", file=sys.stderr)
        return EXIT_TERMINATED if term else EXIT_INTERRUPTED
    except RuntimeError as exc:
        from ..envs.errors import SimulationError   # no PyBullet
        if not isinstance(exc, SimulationError):
            raise
        print(f"armtwin: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


# ----- helpers shared by the subcommands -------------------------------------------------

def get_robot(name: str):
    """The spec of robot ``name`` or a CliError naming the known ones."""
    from ..robots import UnknownRobotError, get
    try:
        return get(name)
    except UnknownRobotError as exc:
        raise CliError(str(exc)) from None


def parse_joints_display(spec, values: list[str], *, check_limits: bool = True) -> np.ndarray:
    """Joint values typed by a person (deg; mm for prismatic joints) -> SI, with checks."""
    if len(values) != spec.dof:
        raise CliError(f"{spec.name} has {spec.dof} joints ({', '.join(u for u in spec.display_units())}), got {len(values)} values")
    try:
        disp = np.array([float(v) for v in values])
    except ValueError:
        raise CliError(f"joint values must be numbers, got {' '.join(values)}") from None
    if not np.all(np.isfinite(disp)):
        raise CliError("joint values must be finite numbers")
    q = spec.from_display(disp)
    if check_limits:
        for i, (v, lo, hi, unit) in enumerate(zip(disp, spec.to_display(spec.lower), spec.to_display(spec.upper), spec.display_units())):
            if v < lo - 1e-9 or v > hi + 1e-9:
                raise CliError(f"J{i + 1} = {v:g} {unit} is outside its range [{lo:g}, {hi:g}] {unit}")
    return q


def print_json(obj: Any) -> None:
    """Print ``obj`` as JSON (numpy arrays and scalars converted)."""
    def default(o):
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, np.generic):
            return o.item()
        raise TypeError(f"not JSON serialisable: {type(o).__name__}")
    print(json.dumps(obj, default=default, indent=2))


class StderrProgress:
    """Progress on stderr for long work: one line updated in place on a terminal, a line per
    quarter otherwise (logs and CI stay readable). Call it with the done fraction 0..1 and,
    optionally, the stage; call :meth:`done` at the end.

    Shows ``LABEL [#####-----]  40%``, or ``LABEL: STAGE  40%`` when a stage is given.
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self._tty = sys.stderr.isatty()
        self._last: tuple | None = None

    def __call__(self, frac: float, stage: str | None = None) -> None:
        pct = int(max(0.0, min(float(frac), 1.0)) * 100)
        key = (stage, pct if self._tty else pct // 25)
        if key == self._last:
            return
        self._last = key
        if stage is None:
            text = f"{self.label} [{'#' * (pct // 4)}{'-' * (25 - pct // 4)}] {pct:3d}%"
        else:
            text = f"{self.label}: {stage:9s} {pct:3d}%"
        print(f"\r{text}" if self._tty else text, end="" if self._tty else "\n", file=sys.stderr, flush=True)

    def stage(self, stage: str, frac: float) -> None:
        """The same, as ``(stage, fraction)`` (the preflight's callback order)."""
        self(frac, stage)

    def done(self) -> None:
        """End the in-place line (terminal only)."""
        if self._last is not None and self._tty:
            print(file=sys.stderr, flush=True)


def output_file(path: str, opt: str, suffixes: tuple[str, ...] = ()) -> str:
    """Check an output file option before anything runs: its ending (one of ``suffixes``, if
    given), and its folder, which is created when missing (as ``out/`` on a fresh clone).

    Raises:
        CliError: a wrong ending, or a folder that cannot be created (naming ``opt`` and why).
    """
    from pathlib import Path
    if suffixes and not path.lower().endswith(suffixes):
        raise CliError(f"{opt} {path}: use a {' or '.join(suffixes)} file name")
    if Path(path).is_dir():
        raise CliError(f"{opt} {path}: is a folder; give a file name")
    kind = file_kind(path)
    if kind is not None:  # a FIFO would block the command, a device would swallow the output
        raise CliError(f"{opt} {path}: is not a regular file ({kind}); give a file name")
    try:
        Path(path).resolve().parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"{opt} {path}: cannot create its folder: {exc.strerror or exc}") from None
    _check_writable_folder(Path(path).resolve().parent, f"{opt} {path}")
    return path


#: what a path that is not a regular file or folder is, for messages
FILE_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
              (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def file_kind(path: str) -> str | None:
    """What an existing ``path`` is when it is neither a regular file nor a folder (e.g. "a FIFO
    (named pipe)"), found without opening it; None when it is one of those or does not exist."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((name for test, name in FILE_KINDS if test(mode)), "not a regular file")


def output_folder(path: str, opt: str):
    """Create an output folder option's folder and check that files can be written in it, before
    anything runs (a long experiment must not find out at the end). Returns it as a Path.

    Raises:
        CliError: a file in the way, or a folder that cannot be created or written (naming ``opt``).
    """
    from pathlib import Path
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise CliError(f"{opt} {path}: is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"{opt} {path}: cannot create the folder: {exc.strerror or exc}") from None
    _check_writable_folder(out, f"{opt} {path}")
    return out


def _check_writable_folder(folder, what: str) -> None:
    import tempfile
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise CliError(f"{what}: cannot write in {folder}: {exc.strerror or exc}") from None


def add_json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output")


if __name__ == "__main__":  # python -m armtwin.scripts.cli: use the imported module, whose CliError the commands raise
    from armtwin.scripts.cli import main as _main

    raise SystemExit(_main())
