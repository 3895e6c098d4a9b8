"""A scripted rig on a pseudo-terminal for the host-side tests: it answers HELLO and MODE like the
firmware core and streams JOINT_STATES whose content is a known function of their sequence
number, through a seeded :class:`Mangler` that loses, corrupts, repeats and reorders frames
and records exactly which sequence numbers reached the host intact."""

from __future__ import annotations

import os
import random
import select
import threading
import time
import tty

from armtwin.controllers import rigproto as rp


def positions_of(seq: int, boot: int) -> tuple[int, int]:
    """The encoder positions a state with ``seq`` carries (pulses): known to the test, different per boot."""
    return ((seq * 7 + boot * 1000) % 30000 - 15000, -((seq * 3 + boot) % 9000))


class Mangler:
    """What a bad link does to the rig's state frames, seeded.

    Args:
        seed: the random seed.
        drop, corrupt, repeat, reorder, garbage: probability per state frame of losing it, of
            flipping one bit in it (the host drops it: lost), of sending it again 1..20 frames
            later, of holding it back 1..8 frames, of sending noise (and a delimiter) before it.
    """

    def __init__(self, seed: int, drop=0.0, corrupt=0.0, repeat=0.0, reorder=0.0, garbage=0.0) -> None:
        self.rng = random.Random(seed)
        self.p = dict(drop=drop, corrupt=corrupt, repeat=repeat, reorder=reorder, garbage=garbage)
        self.delivered: set[int] = set()  # (boot, seq) of state frames written intact at least once
        self.sent_states: list[tuple[int, int]] = []  # (boot, seq) in the order they were built
        self.later: list[tuple[int, bytes, tuple[int, int] | None]] = []  # (frames to wait, bytes, key)
        self.repeats = 0
        self.reordered = 0

    def push(self, key: tuple[int, int], frame: bytes) -> bytes:
        """Bytes to write now for one state frame ``frame`` with ``key`` = (boot, seq)."""
        r, p = self.rng, self.p
        self.sent_states.append(key)
        out = bytearray()
        due = [x for x in self.later if x[0] <= 0]
        self.later = [(n - 1, b, k) for n, b, k in self.later if n > 0]
        for _, b, k in due:
            out += b
            if k is not None:
                self.delivered.add(k)
        if r.random() < p["garbage"]:
            out += bytes(r.randrange(1, 256) for _ in range(r.randint(1, 30))) + b"\x00"
        if r.random() < p["drop"]:
            return bytes(out)
        if r.random() < p["corrupt"]:
            bad = bytearray(frame)
            i = r.randrange(len(bad) - 1)
            bad[i] ^= 1 << r.randrange(8)
            out += bad
            return bytes(out)
        if r.random() < p["repeat"]:
            self.later.append((r.randint(1, 20), frame, key))
            self.repeats += 1
        if r.random() < p["reorder"]:
            self.later.append((r.randint(1, 8), frame, key))
            self.reordered += 1
            return bytes(out)
        out += frame
        self.delivered.add(key)
        return bytes(out)

    def flush(self) -> bytes:
        out = b"".join(b for _, b, _ in self.later)
        for _, _, k in self.later:
            if k is not None:
                self.delivered.add(k)
        self.later = []
        return out


class FakeRig:
    """A rig on a pty (``device``): HELLO and MODE answered at once (never mangled), then
    ``n_states`` JOINT_STATES written at about ``rate_hz`` through ``mangler`` once a MODE came.

    Attributes:
        modes_rx: (arrival time, mode) of every MODE frame the host sent.
        hellos_rx: the HELLO frames the host sent.
        done: set once every state was written (and the mangler flushed).
    """

    def __init__(self, n_states: int, mangler: Mangler | None = None, *, boot_id: int = 1, rate_hz: float = 1000.0,
                 burst: int = 8) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        self.device = os.ttyname(self.slave)
        self.n_states, self.mangler, self.boot_id = n_states, mangler or Mangler(0), boot_id
        self.rate_hz, self.burst = rate_hz, burst
        self.seq = 0
        self.boot = 0
        self.modes_rx: list[tuple[float, rp.Mode]] = []
        self.hellos_rx = 0
        self.states_written = 0
        self.done = threading.Event()
        self._stop = threading.Event()
        self._reboot: bool | None = None
        self._dec = rp.StreamDecoder()
        self._th = threading.Thread(target=self._run, daemon=True)
        self._th.start()

    def modes(self, mode: rp.Mode = rp.Mode.REAL_TO_VIRTUAL) -> int:
        """How many MODE frames selecting ``mode`` the host sent."""
        return sum(1 for _, m in self.modes_rx if m is mode)

    def reboot(self, announce: bool = True) -> None:
        """Reboot: a new boot id, sequence numbers from 0, a HELLO of its own if ``announce``."""
        self._reboot = announce

    def _frame(self, msg) -> bytes:
        f = rp.encode_frame(msg, self.seq, int(time.monotonic() * 1e6))
        self.seq = (self.seq + 1) & 0xFFFF
        return f

    def _hello(self) -> rp.Hello:
        return rp.Hello(role=1, control_hz=1000, firmware=0x0200, boot_id=self.boot_id)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view and not self._stop.is_set():
            try:
                n = os.write(self.master, view)
                view = view[n:]
            except BlockingIOError:
                time.sleep(0.001)

    def _run(self) -> None:
        os.set_blocking(self.master, False)
        period = self.burst / self.rate_hz
        next_t = time.monotonic()
        streaming = False
        while not self._stop.is_set():
            r, _, _ = select.select([self.master], [], [], 0.001)
            if r:
                try:
                    data = os.read(self.master, 4096)
                except (BlockingIOError, OSError):
                    data = b""
                for f in self._dec.feed(data):
                    m = f.msg
                    if isinstance(m, rp.Hello):
                        self.hellos_rx += 1
                        self._write(self._frame(self._hello()))
                    elif isinstance(m, rp.ModeMsg):
                        self.modes_rx.append((time.monotonic(), m.mode))
                        self._write(self._frame(m))
                        streaming = True
            if self._reboot is not None:
                announce, self._reboot = self._reboot, None
                self._write(self.mangler.flush())
                self.boot += 1
                self.boot_id = (self.boot_id + 7919) & 0xFFFF
                self.seq = 0
                if announce:
                    self._write(self._frame(self._hello()))
            now = time.monotonic()
            if streaming and self.states_written < self.n_states and now >= next_t:
                # on schedule: the bursts due since the last write go out together (at most 64),
                # so the rate is rate_hz and not bounded by the 1 ms poll
                bursts = min(1 + int((now - next_t) / period), 64)
                next_t = max(next_t + bursts * period, now - period)
                out = bytearray()
                for _ in range(min(bursts * self.burst, self.n_states - self.states_written)):
                    seq = self.seq
                    frame = self._frame(rp.JointStates(0, 0, positions_of(seq, self.boot), (seq & 0xFF, 0)))
                    out += self.mangler.push((self.boot, seq), frame)
                    self.states_written += 1
                if self.states_written >= self.n_states:  # what was held back, then one clean last state
                    out += self.mangler.flush()
                    seq = self.seq
                    out += self._frame(rp.JointStates(0, 0, positions_of(seq, self.boot), (seq & 0xFF, 0)))
                    self.mangler.sent_states.append((self.boot, seq))
                    self.mangler.delivered.add((self.boot, seq))
                self._write(bytes(out))
                if self.states_written >= self.n_states:
                    self.done.set()

    def close(self) -> None:
        self._stop.set()
        self._th.join(2.0)
        os.close(self.master)
        os.close(self.slave)
