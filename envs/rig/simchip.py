"""The rig firmware on a simulated ATmega328P: the chip-level harness and what it measured.

``firmware/servo_rig/chip/rig_chip.cpp`` runs the firmware ELF (:func:`~armtwin.envs.rig.chip.build_firmware`)
on simavr at 16 MHz with UART0 on a pseudo-terminal (a :class:`~armtwin.envs.rig.link.RigLink` opens it
like a USB serial port), 12 V on the supply divider and two motor + encoder models on the pins (the
host emulator's motor model, its quadrature edges on D2..D5). Everything it sees is stamped with the
*chip's* cycle counter and written to an events file, so timings hold however slow the PC is.

* :func:`build_harness` — compile the harness against libsimavr (cached like the emulator);
* :class:`SimChip` — a running harness (``with SimChip(elf) as chip: chip.device``);
* :func:`read_events` → :class:`ChipEvents` — the events file parsed, with the figures the tests and
  ``armtwin bench rig --chip`` report (tick duration and period, CPU busy share, state rate, reply
  latency, targets answered, watchdog stop time).

Needs the Debian packages ``simavr`` and ``libsimavr-dev`` (plus the AVR toolchain of :mod:`.chip`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

import numpy as np

from .emulator import FIRMWARE_DIR
from .link import RigLinkError

__all__ = ["HARNESS_DIR", "build_harness", "SimChip", "ChipEvents", "read_events", "elf_symbol", "CHIP_HZ"]

HARNESS_DIR = os.path.join(FIRMWARE_DIR, "chip")
_SOURCES = (("chip", "rig_chip.cpp"), ("", "rig_core.cpp"), ("", "rig_core.h"))
#: the simulated chip's clock, Hz
CHIP_HZ = 16_000_000
#: JOINT_TARGETS / JOINT_STATES message types (docs/PROTOCOL.md)
_TARGETS, _STATES = 0x03, 0x04


def build_harness(cache_dir: str | os.PathLike | None = None, *, compiler: str = "g++") -> str:
    """Compile the chip harness (``rig_chip.cpp`` + the firmware core) against libsimavr, once per source version.

    Returns:
        The path of the executable (``<cache>/rig_chip-<hash>``).

    Raises:
        RigLinkError: the compiler or libsimavr is missing, or the build failed (its message).
    """
    h = hashlib.sha256()
    for sub, name in _SOURCES:
        p = os.path.join(FIRMWARE_DIR, sub, name)
        if not os.path.exists(p):
            raise RigLinkError(f"harness source {p} is missing")
        with open(p, "rb") as f:
            h.update(name.encode() + b"\0" + f.read())
    if cache_dir is None:
        cache_dir = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "armtwin")
    os.makedirs(cache_dir, exist_ok=True)
    exe = os.path.join(os.fspath(cache_dir), f"rig_chip-{h.hexdigest()[:16]}")
    if os.path.exists(exe):
        return exe
    if shutil.which(compiler) is None:
        raise RigLinkError(f"the C++ compiler {compiler!r} was not found (needed to build the chip harness)")
    if not os.path.exists("/usr/include/simavr/sim_avr.h"):
        raise RigLinkError("libsimavr's headers were not found in /usr/include/simavr "
                           "(apt-get install simavr libsimavr-dev)")
    fd, tmp = tempfile.mkstemp(prefix="rig_chip.", dir=cache_dir)
    os.close(fd)
    cmd = [compiler, "-std=c++11", "-O2", "-Wall", "-Wextra", "-Werror", "-I/usr/include/simavr", "-o", tmp,
           os.path.join(HARNESS_DIR, "rig_chip.cpp"), os.path.join(FIRMWARE_DIR, "rig_core.cpp"), "-lsimavr", "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        os.unlink(tmp)
        raise RigLinkError(f"building the chip harness failed: {r.stderr.strip()[:2000]}")
    os.chmod(tmp, 0o755)
    os.replace(tmp, exe)
    return exe


def elf_symbol(elf: str, name: str) -> int:
    """Address of a symbol in an AVR ELF (``avr-nm``): code as a byte address, data as a data-space
    address (the ELF's 0x800000 offset of the data space removed).

    Raises:
        RigLinkError: avr-nm is missing or the symbol is not there.
    """
    nm = shutil.which("avr-nm")
    if nm is None:
        raise RigLinkError("avr-nm was not found (apt-get install binutils-avr)")
    out = subprocess.run([nm, elf], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            return int(parts[0], 16) & 0x7FFFFF if int(parts[0], 16) < 0x800000 else int(parts[0], 16) - 0x800000
    raise RigLinkError(f"symbol {name} not found in {elf}")


#: micros() on the Arduino AVR core: timer0 overflows every 256 × 64 cycles = 1024 µs at 16 MHz
_US_PER_T0_OVERFLOW = 1024


class SimChip:
    """A running chip harness (``with SimChip(elf, events=path) as chip: chip.device``).

    Args:
        elf: the firmware (board ``uno``: the harness models an ATmega328P).
        events: the events file to write (the chip-clock record, :func:`read_events`).
        baud: the host's serial speed, bit/s (the chip runs at the baud rate its firmware sets).
        seconds: stop after this much chip time (None: until :meth:`stop`).
        fast: run as fast as the PC can instead of in step with the wall clock (only for runs with
            the built-in host, ``drive``; a host on the pty needs real time).
        start_us: preset the chip's ``micros()`` to about this value at boot (the timer0 overflow
            counter is poked when ``main`` starts), e.g. ``2**32 - 500_000`` to cross the wrap 0.5 s in.
        drive: options of the built-in host on the chip's clock (``{"targets": 500}``,
            ``{"stream": 500}``; ``"silent_at"``, ``"resume_at"``, ``"remode_at"``, ``"corrupt_at"``,
            ``"power_cut_at"``, ``"power_restore_at"``: s of chip time; ``"far": True``: targets ±800° away).
        jam_at: block motor 1's shaft from this chip time on, s (a stall).
        exe: a prebuilt harness (default :func:`build_harness`).

    Raises:
        RigLinkError: the harness did not start (its one-line reason).
    """

    def __init__(self, elf: str, *, events: str | os.PathLike, baud: int = 115200, seconds: float | None = None,
                 fast: bool = False, start_us: int | None = None, drive: dict | None = None,
                 jam_at: float | None = None, exe: str | None = None) -> None:
        self.exe = exe or build_harness()
        self.events = os.fspath(events)
        cmd = [self.exe, "--elf", elf, "--events", self.events, "--baud", str(int(baud))]
        if seconds is not None:
            cmd += ["--seconds", repr(float(seconds))]
        if fast:
            cmd.append("--fast")
        if start_us is not None:
            cmd += ["--poke-pc", str(elf_symbol(elf, "main")),
                    "--poke", f"{elf_symbol(elf, 'timer0_overflow_count')}={int(start_us) // _US_PER_T0_OVERFLOW}"]
        if jam_at is not None:
            cmd += ["--jam-at", repr(float(jam_at))]
        for k, v in (drive or {}).items():
            opt = "--drive-" + k.replace("_", "-")
            cmd += [opt] if v is True else [opt, str(v)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().rstrip("\n")  # type: ignore[union-attr]
        kind, _, rest = line.partition(" ")
        if kind != "DEVICE" or not rest:
            self.proc.kill()
            err = self.proc.stderr.read().strip() if self.proc.stderr else ""  # type: ignore[union-attr]
            code = self.proc.wait()
            self._close_pipes()
            raise RigLinkError(rest if kind == "ERROR" and rest else f"the chip harness did not start (exit code "
                                                                    f"{code}) {err[:500]}")
        self.device = rest

    def _close_pipes(self) -> None:
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None and not pipe.closed:
                pipe.close()

    def wait(self, timeout: float | None = None) -> int:
        """Wait for a timed run (``seconds``) to end; its exit code (3: the simulated CPU crashed)."""
        code = self.proc.wait(timeout=timeout)
        self._close_pipes()
        return code

    def stop(self) -> None:
        """End the harness (SIGTERM: it writes its END line); idempotent."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._close_pipes()

    def read(self) -> "ChipEvents":
        """The events recorded so far (all of them after :meth:`stop`)."""
        return read_events(self.events)

    def __enter__(self) -> "SimChip":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@dataclass
class ChipEvents:
    """The events file of a harness run; times in the chip's cycles (``freq`` per second).

    Attributes:
        freq: the chip's clock, Hz.
        ticks: (n, 2) control ticks, [start, end] cycles (TIMING_PIN high .. low).
        pwm: (n, 3) H-bridge input changes: cycle, motor, signed duty.
        rx: (n, 3) host frames fully arrived: end cycle, type, seq.
        rx_bad: end cycles of host frames that did not decode.
        tx: (n, 6) chip frames fully sent: end cycle, type, seq, echo (-1 unless a state), faults, t_us
            (the frame's time stamp: the firmware's micros()).
        power: (n, 2) supply switched by the harness: cycle, on.
        end_cycle: chip cycles run (0 before the END line is written).
        busy_cycles: cycles in control ticks or with interrupts disabled (ISRs).
        sp_min: the lowest stack pointer seen (data-space address).
    """

    freq: float = CHIP_HZ
    ticks: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))
    pwm: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))
    rx: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))
    rx_bad: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    tx: np.ndarray = field(default_factory=lambda: np.zeros((0, 6), dtype=np.int64))
    power: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))
    end_cycle: int = 0
    busy_cycles: int = 0
    sp_min: int = 0

    def seconds(self, cycles) -> np.ndarray | float:
        """Cycles → seconds."""
        return np.asarray(cycles, dtype=float) / self.freq if np.ndim(cycles) else float(cycles) / self.freq

    # ----- the control loop ------------------------------------------------------------------
    def tick_durations_ms(self, after_s: float = 0.0) -> np.ndarray:
        """Duration of each control tick starting after ``after_s``, ms."""
        t = self.ticks[self.ticks[:, 0] >= after_s * self.freq]
        return (t[:, 1] - t[:, 0]) / self.freq * 1e3

    def tick_periods_ms(self, after_s: float = 0.0) -> np.ndarray:
        """Start-to-start period of consecutive control ticks after ``after_s``, ms."""
        s = self.ticks[self.ticks[:, 0] >= after_s * self.freq, 0]
        return np.diff(s) / self.freq * 1e3

    def busy_share(self) -> float:
        """Share of the chip's cycles spent in control ticks or interrupt handlers (0..1; NaN before END)."""
        return self.busy_cycles / self.end_cycle if self.end_cycle else float("nan")

    # ----- the link ---------------------------------------------------------------------------
    def states(self, after_s: float = 0.0) -> np.ndarray:
        """The JOINT_STATES sent after ``after_s`` (rows of :attr:`tx`)."""
        return self.tx[(self.tx[:, 1] == _STATES) & (self.tx[:, 0] >= after_s * self.freq)]

    def state_rate_hz(self, after_s: float, until_s: float) -> float:
        """JOINT_STATES per second sent in [after_s, until_s) of chip time."""
        c = self.tx[:, 0]
        n = int(np.count_nonzero((self.tx[:, 1] == _STATES) & (c >= after_s * self.freq) & (c < until_s * self.freq)))
        return n / (until_s - after_s)

    def replies(self, after_s: float = 0.0) -> tuple[np.ndarray, int]:
        """Reply latencies of the JOINT_TARGETS received after ``after_s``, ms, and how many there were.

        A target's reply is the first JOINT_STATES that echoes its seq (low byte) and ends after it
        arrived, before the next target arrived (a later state answers the next one). Latency: end
        of the target frame (its delimiter's stop bit) → end of that state (its delimiter's stop bit).
        """
        tg = self.rx[(self.rx[:, 1] == _TARGETS) & (self.rx[:, 0] >= after_s * self.freq)]
        st = self.states()
        lat = []
        ends = st[:, 0]
        for k, (c_end, _, seq) in enumerate(tg):
            nxt = tg[k + 1, 0] if k + 1 < len(tg) else np.iinfo(np.int64).max
            i = int(np.searchsorted(ends, c_end, side="right"))
            while i < len(st) and ends[i] < nxt + 4 * self.freq / 1000:  # a reply may end after the next target arrived
                if st[i, 3] == (seq & 0xFF):
                    lat.append((ends[i] - c_end) / self.freq * 1e3)
                    break
                i += 1
        return np.asarray(lat, dtype=float), len(tg)

    # ----- the motors -------------------------------------------------------------------------
    def duty_at(self, cycle: int) -> tuple[int, int]:
        """The H-bridge duties in force at ``cycle``."""
        d = [0, 0]
        for c, m, v in self.pwm:
            if c > cycle:
                break
            d[int(m)] = int(v)
        return d[0], d[1]

    def stop_after(self, cycle: int) -> int | None:
        """The first cycle at or after ``cycle`` from which both motors' duty is 0 (None: never)."""
        d = list(self.duty_at(cycle))
        if d == [0, 0]:
            return cycle
        for c, m, v in self.pwm[self.pwm[:, 0] > cycle]:
            d[int(m)] = int(v)
            if d == [0, 0]:
                return int(c)
        return None

    def last_rx_end(self) -> int:
        """End cycle of the host's last byte (the last frame, good or bad)."""
        ends = [int(self.rx[-1, 0])] if len(self.rx) else []
        ends += [int(self.rx_bad[-1])] if len(self.rx_bad) else []
        return max(ends) if ends else 0


def read_events(path: str | os.PathLike) -> ChipEvents:
    """Parse a harness events file (a run still going: the lines written so far)."""
    rows: dict[str, list] = {"TICK": [], "PWM": [], "RX": [], "RXBAD": [], "TX": [], "POWER": []}
    ev = ChipEvents()
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts or not line.endswith("\n"):
                continue
            kind = parts[0]
            if kind in rows:
                rows[kind].append([int(p) for p in parts[1:]])
            elif kind == "H":
                kv = dict(p.split("=") for p in parts[1:])
                ev.freq = float(kv.get("freq", CHIP_HZ))
            elif kind == "END":
                ev.end_cycle = int(parts[1])
                kv = dict(p.split("=") for p in parts[2:])
                ev.busy_cycles = int(kv.get("busy", 0))
                ev.sp_min = int(kv.get("sp_min", 0))

    def arr(key: str, width: int) -> np.ndarray:
        return np.asarray(rows[key], dtype=np.int64).reshape(-1, width)

    ev.ticks, ev.pwm, ev.rx, ev.tx, ev.power = arr("TICK", 2), arr("PWM", 3), arr("RX", 3), arr("TX", 6), arr("POWER", 2)
    ev.rx_bad = arr("RXBAD", 1)[:, 0]
    return ev
