"""The servo-rig firmware on real AVR boards: the sketch built with Debian's AVR toolchain.

* :data:`BOARDS` — the boards the firmware is built for (Uno, Nano: ATmega328P; Mega 2560);
* :func:`build_firmware` — compile ``firmware/servo_rig`` and the Arduino AVR core with ``avr-gcc``
  into an ELF for one board, warnings as errors in the firmware's own files, cached per source
  version like :func:`~armtwin.envs.rig.emulator.build_emulator`;
* :class:`FirmwareImage` — the ELF and its flash / static-RAM footprint (``avr-size``).

Needs the Debian packages ``gcc-avr``, ``avr-libc`` (compiler and C library) and
``arduino-core-avr`` (the Arduino AVR core in ``/usr/share/arduino/hardware/arduino/avr``).
The Arduino core's own sources are compiled as Arduino's ``platform.txt`` does (``-w``: they are
not ours to fix); the sketch and ``rig_core.cpp`` with ``-Wall -Wextra -Werror``.
"""

from __future__ import annotations

import enum
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from .emulator import FIRMWARE_DIR
from .link import RigLinkError

__all__ = ["Board", "BoardSpec", "BOARDS", "ARDUINO_CORE_DIR", "FirmwareImage", "build_firmware", "firmware_size"]

#: the Arduino AVR core of Debian's ``arduino-core-avr``
ARDUINO_CORE_DIR = "/usr/share/arduino/hardware/arduino/avr"
#: the ``ARDUINO`` macro value (the IDE version the core expects, 1.8.19)
ARDUINO_VERSION = 10819
_FW_SOURCES = ("servo_rig.ino", "rig_core.cpp", "rig_core.h")
#: the firmware's own files: warnings are errors here
FIRMWARE_WARNINGS = ("-Wall", "-Wextra", "-Werror")


class Board(str, enum.Enum):
    """A board the firmware is built for (its value is the word people type)."""

    UNO = "uno"
    NANO = "nano"
    MEGA2560 = "mega2560"


@dataclass(frozen=True)
class BoardSpec:
    """What the build needs to know about a board (from the core's ``boards.txt``).

    Attributes:
        mcu: avr-gcc ``-mmcu``.
        define: the ``ARDUINO_<define>`` board macro.
        variant: the core's pin-map folder (``variants/<variant>``).
        f_cpu: clock, Hz.
        flash_max: flash the sketch may use (the bootloader's share removed), bytes.
        ram_max: SRAM, bytes.
    """

    mcu: str
    define: str
    variant: str
    f_cpu: int
    flash_max: int
    ram_max: int


BOARDS: dict[Board, BoardSpec] = {
    Board.UNO: BoardSpec("atmega328p", "AVR_UNO", "standard", 16_000_000, 32_256, 2_048),
    Board.NANO: BoardSpec("atmega328p", "AVR_NANO", "eightanaloginputs", 16_000_000, 30_720, 2_048),
    Board.MEGA2560: BoardSpec("atmega2560", "AVR_MEGA2560", "mega", 16_000_000, 253_952, 8_192),
}


@dataclass(frozen=True)
class FirmwareImage:
    """A built firmware.

    Attributes:
        board: the board it is built for.
        elf: path of the ELF (what a simulator loads).
        hex: path of the Intel HEX (what a bootloader flashes).
        flash: program memory used, bytes (``.text`` + ``.data`` initialisers).
        ram: static RAM, bytes (``.data`` + ``.bss``; the stack grows into the rest).
    """

    board: Board
    elf: str
    hex: str
    flash: int
    ram: int

    @property
    def spec(self) -> BoardSpec:
        return BOARDS[self.board]

    @property
    def flash_share(self) -> float:
        """Flash used / flash available (0..1)."""
        return self.flash / self.spec.flash_max

    @property
    def ram_share(self) -> float:
        """Static RAM / SRAM (0..1)."""
        return self.ram / self.spec.ram_max

    def summary(self) -> str:
        """One line: ``uno: flash 12356 B of 32256 (38.3 %), static RAM 680 B of 2048 (33.2 %)``."""
        s = self.spec
        return (f"{self.board.value}: flash {self.flash} B of {s.flash_max} ({self.flash_share:.1%}), "
                f"static RAM {self.ram} B of {s.ram_max} ({self.ram_share:.1%})")


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise RigLinkError(f"{tool} was not found: building the rig firmware needs Debian's gcc-avr, avr-libc and "
                           f"arduino-core-avr (apt-get install gcc-avr avr-libc arduino-core-avr)")
    return path


def _core_sources(core: str) -> list[str]:
    return sorted(os.path.join(core, n) for n in os.listdir(core) if n.endswith((".c", ".cpp", ".S")))


def firmware_size(elf: str) -> tuple[int, int]:
    """(flash, static RAM) of an AVR ELF, bytes, from ``avr-size`` (Berkeley format: text, data, bss)."""
    r = subprocess.run([_need("avr-size"), elf], capture_output=True, text=True)
    if r.returncode != 0:
        raise RigLinkError(f"avr-size {elf} failed: {r.stderr.strip()}")
    text, data, bss = (int(v) for v in r.stdout.splitlines()[1].split()[:3])
    return text + data, data + bss


def build_firmware(board: Board | str = Board.UNO, cache_dir: str | os.PathLike | None = None,
                   *, defines: tuple[str, ...] = (), sketch: str = "servo_rig.ino") -> FirmwareImage:
    """Build the servo-rig sketch for ``board`` with avr-gcc and the Arduino AVR core (cached).

    The build goes to ``<cache_dir>/servo_rig-<board>-<hash>/`` (default cache
    ``$XDG_CACHE_HOME/armtwin``); the hash covers the firmware sources, the core's file list,
    the board and ``defines``, so a changed source rebuilds and an unchanged one is reused.

    Args:
        board: a :class:`Board` or its name (``uno``, ``nano``, ``mega2560``).
        cache_dir: where builds are kept.
        defines: extra ``-D`` macros for the firmware files (``NAME`` or ``NAME=VALUE``).
        sketch: the sketch, relative to ``firmware/servo_rig`` (the tests build
            ``chip/core_trace.ino``, the chip side of the emulator/chip agreement test).

    Returns:
        The image: ELF, HEX and its footprint.

    Raises:
        ValueError: an unknown board name.
        RigLinkError: a missing tool or core, or a failed compile (the compiler's message, first
            2000 characters — a warning in the firmware's own files fails the build).
    """
    board = Board(board)
    spec = BOARDS[board]
    core = os.path.join(ARDUINO_CORE_DIR, "cores", "arduino")
    variant = os.path.join(ARDUINO_CORE_DIR, "variants", spec.variant)
    if not os.path.isdir(core) or not os.path.isdir(variant):
        raise RigLinkError(f"the Arduino AVR core was not found in {ARDUINO_CORE_DIR} "
                           f"(apt-get install arduino-core-avr)")
    gcc, gxx = _need("avr-gcc"), _need("avr-g++")
    objcopy = _need("avr-objcopy")
    h = hashlib.sha256(f"{board.value}\0{spec}\0{defines}\0{sketch}\0".encode())
    for name in dict.fromkeys((sketch, *_FW_SOURCES, "chip/core_trace.h")):
        p = os.path.join(FIRMWARE_DIR, name)
        if not os.path.exists(p):
            raise RigLinkError(f"firmware source {p} is missing")
        with open(p, "rb") as f:
            h.update(name.encode() + b"\0" + f.read())
    for p in _core_sources(core):
        h.update(p.encode() + b"\0" + str(os.path.getsize(p)).encode())
    if cache_dir is None:
        cache_dir = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "armtwin")
    os.makedirs(cache_dir, exist_ok=True)
    stem = os.path.splitext(os.path.basename(sketch))[0]
    out = os.path.join(os.fspath(cache_dir), f"{stem}-{board.value}-{h.hexdigest()[:16]}")
    elf, hexf = os.path.join(out, "servo_rig.elf"), os.path.join(out, "servo_rig.hex")
    if not (os.path.exists(elf) and os.path.exists(hexf)):
        tmp = tempfile.mkdtemp(prefix=f"servo_rig-{board.value}.", dir=cache_dir)
        try:
            _compile(tmp, spec, core, variant, gcc, gxx, objcopy, defines, sketch)
            try:
                os.rename(tmp, out)  # atomic: a concurrent build of the same sources may have won
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    flash, ram = firmware_size(elf)
    return FirmwareImage(board, elf, hexf, flash, ram)


def _run(cmd: list[str], what: str) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RigLinkError(f"building the rig firmware failed ({what}): {(r.stderr or r.stdout).strip()[:2000]}")


def _compile(build: str, spec: BoardSpec, core: str, variant: str, gcc: str, gxx: str, objcopy: str,
             defines: tuple[str, ...], sketch: str = "servo_rig.ino") -> None:
    """The Arduino IDE's recipe (platform.txt: the core in an archive), without link-time optimisation: the ELF keeps the
    symbols a simulator harness looks up (``main``, ``timer0_overflow_count``)."""
    arch = [f"-mmcu={spec.mcu}", f"-DF_CPU={spec.f_cpu}L", f"-DARDUINO={ARDUINO_VERSION}",
            f"-DARDUINO_{spec.define}", "-DARDUINO_ARCH_AVR", "-I", core, "-I", variant]
    cflags = ["-c", "-g", "-Os", "-ffunction-sections", "-fdata-sections"]
    cxxflags = cflags + ["-std=gnu++11", "-fno-exceptions", "-fno-threadsafe-statics"]
    objs = []
    for src in _core_sources(core):  # the Arduino core: compiled as the IDE does, its warnings are not ours
        obj = os.path.join(build, "core_" + os.path.basename(src) + ".o")
        if src.endswith(".cpp"):
            # gcc-avr 5.4's <float.h> defines DECIMAL_DIG for C only; the core's WString.cpp wants it
            cmd = [gxx, *cxxflags, "-fpermissive", "-w", "-DDECIMAL_DIG=__DECIMAL_DIG__", *arch, src, "-o", obj]
        elif src.endswith(".c"):
            cmd = [gcc, *cflags, "-std=gnu11", "-w", *arch, src, "-o", obj]
        else:
            cmd = [gcc, "-c", "-g", "-x", "assembler-with-cpp", *arch, src, "-o", obj]
        _run(cmd, os.path.basename(src))
        objs.append(obj)
    # the core goes into an archive, as the IDE builds it: only the parts the sketch uses are linked
    # (WInterrupts.o's INT0/INT1 vectors would clash with the sketch's own encoder vectors)
    core_a = os.path.join(build, "core.a")
    _run([_need("avr-ar"), "rcs", core_a, *objs], "core.a")
    objs = []
    fw_defs = [f"-D{d}" for d in defines]
    for name, lang in ((sketch, ["-x", "c++"]), ("rig_core.cpp", [])):
        obj = os.path.join(build, os.path.basename(name) + ".o")
        _run([gxx, *cxxflags, *FIRMWARE_WARNINGS, *arch, *fw_defs, "-I", FIRMWARE_DIR, *lang,
              os.path.join(FIRMWARE_DIR, name), "-o", obj], name)
        objs.append(obj)
    elf = os.path.join(build, "servo_rig.elf")
    _run([gcc, "-Os", "-g", "-Wl,--gc-sections", f"-mmcu={spec.mcu}", "-o", elf, *objs, core_a, "-lm"], "link")
    _run([objcopy, "-O", "ihex", "-R", ".eeprom", elf, os.path.join(build, "servo_rig.hex")], "hex")
