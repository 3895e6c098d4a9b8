"""A local MQTT broker for the tests and ``armtwin bench log``: Debian's mosquitto
(``apt-get install mosquitto``) on 127.0.0.1 and a free port, with persistence (so a
subscriber's session and its queued messages survive a restart, as a real store's broker does).
Not for production: a plant's broker is its own."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

#: the broker's program (Debian installs it in /usr/sbin, often not on a user's PATH)
MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"

__all__ = ["Broker", "free_port", "MOSQUITTO", "have_mosquitto"]


def have_mosquitto() -> bool:
    """Whether the mosquitto program is installed."""
    import os
    return os.access(MOSQUITTO, os.X_OK)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """``start()`` / ``stop()`` / ``restart()`` a mosquitto on ``port`` (data in ``folder``)."""

    def __init__(self, folder: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.folder = folder
        self.conf = folder / "mosquitto.conf"
        # `user`: run as root, mosquitto would switch to the user "mosquitto", which cannot write its
        # persistence file (or log) into our folder: the sessions would not survive a restart
        import getpass
        self.conf.write_text(f"user {getpass.getuser()}\nlistener {self.port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
                             f"persistence_location {folder}/\nlog_dest file {folder}/mosquitto.log\n")
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Broker":
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"mosquitto exited: {(self.folder / 'mosquitto.log').read_text()[-500:]}")
                time.sleep(0.05)
        raise RuntimeError("mosquitto did not start listening")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None

    def restart(self, down_s: float = 0.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()
