"""The rig emulator: the firmware core (``firmware/servo_rig``) compiled on the host with g++ and run
behind a pseudo-terminal (bytes paced at the baud rate; a 64-byte receive buffer like the board).

* :func:`build_emulator` — compile it once per source version (cached);
* :class:`Emulator` — a running emulator process (``with Emulator() as emu: emu.device``).
"""

from __future__ import annotations

import os

from .link import RigLinkError

__all__ = ["FIRMWARE_DIR", "build_emulator", "Emulator"]


#: the firmware sources (package data of a non-editable install too)
FIRMWARE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "firmware",
                            "servo_rig")
_EMU_SOURCES = ("emulator.cpp", "rig_core.cpp", "rig_core.h", "chip/core_trace.h")


def build_emulator(cache_dir: str | os.PathLike | None = None, *, compiler: str = "g++") -> str:
    """Compile ``firmware/servo_rig`` into the rig emulator (once per source version).

    The binary is cached as ``<cache_dir>/rig_emulator-<hash of the sources>``; the default
    cache is ``$XDG_CACHE_HOME/armtwin`` (``~/.cache/armtwin``).

    Returns:
        The path of the executable.

    Raises:
        RigLinkError: the sources are missing or the compiler failed (its message included).
    """
    import hashlib
    import shutil
    import subprocess
    import tempfile
    h = hashlib.sha256()
    for name in _EMU_SOURCES:
        p = os.path.join(FIRMWARE_DIR, name)
        if not os.path.exists(p):
            raise RigLinkError(f"firmware source {p} is missing")
        with open(p, "rb") as f:
            h.update(name.encode() + b"\0" + f.read())
    if cache_dir is None:
        cache_dir = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "armtwin")
    os.makedirs(cache_dir, exist_ok=True)
    exe = os.path.join(os.fspath(cache_dir), f"rig_emulator-{h.hexdigest()[:16]}")
    if os.path.exists(exe):
        return exe
    if shutil.which(compiler) is None:
        raise RigLinkError(f"the C++ compiler {compiler!r} was not found (needed to build the rig emulator)")
    fd, tmp = tempfile.mkstemp(prefix="rig_emulator.", dir=cache_dir)
    os.close(fd)
    cmd = [compiler, "-std=c++11", "-O2", "-Wall", "-o", tmp,
           os.path.join(FIRMWARE_DIR, "emulator.cpp"), os.path.join(FIRMWARE_DIR, "rig_core.cpp")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        os.unlink(tmp)
        raise RigLinkError(f"building the rig emulator failed: {r.stderr.strip()[:2000]}")
    os.chmod(tmp, 0o755)
    os.replace(tmp, exe)  # atomic: concurrent builds do not see half a file
    return exe


class Emulator:
    """A running rig emulator process (``with Emulator() as emu: emu.device``).

    Args:
        baud: simulated serial speed, bit/s (bytes are paced at 10 bits each).
        link: optional stable path (a symlink to the pty) — lets a restarted emulator
            reappear under the same name (the reconnect test). A name in use (anything but a
            symbolic link, or a link to something that exists, e.g. another emulator's pty) is
            refused; at exit only the emulator's own link is removed.
        exe: a prebuilt binary (default: :func:`build_emulator`).
        control_hz: the firmware core's control rate, Hz.
        rx_buffer: the board's serial receive buffer, bytes (the Arduino core's 64): bytes a
            host writes faster than the wire carries beyond it are dropped and counted.
        boot_id: the boot id the emulated board reports in HELLO (default: a new random one).
        motor_params: a motor parameter file (``armtwin fit --save``, ``armtwin rig identify``;
            ``name = value`` lines) for both motors, instead of the data sheet motor.
        motor2_params: motor 2's own file (default: ``motor_params``, or the data sheet's).

    Attributes:
        device: the path to open (the pty, or ``link``).
        stats: after :meth:`stop`, the emulator's counters (``rx_frames``, ``rx_dropped``,
            ``rx_overruns``, ``stale_targets``, ``mode_changes``, ``tx_frames``, ``tx_lost``); empty before, or
            when it was killed.

    Raises:
        RigLinkError: the emulator did not start (its one-line reason).
    """

    def __init__(self, baud: int = 115200, *, link: str | None = None, exe: str | None = None,
                 control_hz: int = 1000, rx_buffer: int = 64, boot_id: int | None = None,
                 motor_params: str | os.PathLike | None = None,
                 motor2_params: str | os.PathLike | None = None) -> None:
        import subprocess
        self.exe = exe or build_emulator()
        cmd = [self.exe, "--baud", str(int(baud)), "--control-hz", str(int(control_hz)),
               "--rx-buffer", str(int(rx_buffer)), "--quiet"]
        if link:
            cmd += ["--link", link]
        if boot_id is not None:
            cmd += ["--boot-id", str(int(boot_id))]
        if motor_params is not None:
            cmd += ["--motor-params", os.fspath(motor_params)]
        if motor2_params is not None:
            cmd += ["--motor2-params", os.fspath(motor2_params)]
        self.stats: dict[str, int] = {}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().rstrip("\n")  # type: ignore[union-attr]
        kind, _, rest = line.partition(" ")
        if kind != "DEVICE" or not rest:
            self.proc.kill()
            code = self.proc.wait()
            self.proc.stdout.close()  # type: ignore[union-attr]
            raise RigLinkError(rest if kind == "ERROR" and rest else f"the rig emulator did not start (exit code {code})")
        self.device = rest

    def stop(self, kill: bool = False) -> None:
        """End the process (SIGKILL when ``kill``: a pulled cable) and read its counters; idempotent."""
        if self.proc.poll() is None:
            (self.proc.kill if kill else self.proc.terminate)()
            try:
                self.proc.wait(timeout=2.0)
            except Exception:  # noqa: BLE001
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None and not self.proc.stdout.closed:
            for line in self.proc.stdout.read().splitlines():
                kind, _, rest = line.partition(" ")
                if kind == "STATS":
                    self.stats = {k: int(v) for k, _, v in (p.partition("=") for p in rest.split()) if v.isdigit()}
            self.proc.stdout.close()

    def __enter__(self) -> "Emulator":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
