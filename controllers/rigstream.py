"""Receive-side bookkeeping of a rig frame stream: which frames are new, late, repeated or stray.

Every frame the rig sends carries a 16-bit sequence number, +1 per frame (docs/PROTOCOL.md).
A link can lose frames, and a faulty adapter, a hub or a man in the middle can repeat or
reorder them. :class:`SeqTracker` sorts each arriving number into one :class:`Arrival`:

* ``NEW`` — newer than every frame so far: the only frames whose data a host should act on;
  the numbers skipped on the way are counted as lost (for now);
* ``LATE`` — an older number that was missing: it arrived out of order, so it is no longer
  lost (its data is old: a host records its faults but does not act on its positions);
* ``REPEATED`` — a number that already arrived (a duplicate);
* ``STRAY`` — far from the stream (more than ``jump`` ahead or ``window`` behind): held as a
  suspect, not acted on. When the next frame continues from it (its number + 1), the stream
  really moved there: after a long loss (``lost`` grows by the gap) or a restart of the
  sender's counter (counted in ``restarts``, nothing lost); that next frame is ``NEW``. A stray
  frame that nothing continues from was a replay and changes no count but ``stray``.

So one frame repeated or delayed by 500 numbers moves no counter but ``stray``; only frames that
never arrive count as lost. The tracker does not decide that the rig rebooted: the rig says so
with a new boot id in its HELLO (the link then calls :meth:`SeqTracker.reset`).

Pure Python, no I/O; the counts are exact for any order of arrival within ``window``.
"""

from __future__ import annotations

import collections
import enum
import threading

__all__ = ["Arrival", "SeqTracker", "RigClock"]


class Arrival(enum.Enum):
    """What one arriving sequence number is (see the module docstring)."""

    NEW = "new"
    LATE = "late"
    REPEATED = "repeated"
    STRAY = "stray"


def _signed16(d: int) -> int:
    """``d`` modulo 2¹⁶ as a signed difference in −32768 … 32767."""
    return ((d + 0x8000) & 0xFFFF) - 0x8000


class SeqTracker:
    """Sorts 16-bit sequence numbers into new, late, repeated and stray; counts lost frames.

    Args:
        window: how many numbers behind the newest are remembered (late arrivals within it are
            recognised; older ones are stray).
        jump: a number more than this far ahead of the newest is stray until the next frame
            confirms it.

    Attributes:
        lost: numbers skipped by the stream and not (yet) arrived late.
        late: frames that arrived after a newer one (out of order) and filled a gap.
        repeated: frames whose number had already arrived.
        stray: frames far from the stream that nothing continued from.
        restarts: times the stream continued from a number far behind (the sender's counter
            started again).
    """

    def __init__(self, window: int = 1024, jump: int = 64) -> None:
        if not (1 <= jump < window <= 16384):
            raise ValueError(f"need 1 <= jump < window <= 16384, got jump={jump}, window={window}")
        self.window, self.jump = int(window), int(jump)
        self.lost = self.late = self.repeated = self.stray = self.restarts = 0
        self.reset()

    def reset(self) -> None:
        """Forget the stream (a reconnect, a reboot of the sender); the counters stay."""
        self._hi: int | None = None  # newest number, unwrapped (an int that grows without wrapping)
        self._lo = 0  # the first number of the stream, unwrapped
        self._missing: set[int] = set()  # unwrapped numbers within the window that did not arrive
        self._order: collections.deque[int] = collections.deque()  # the same, oldest first (may hold arrived ones)
        self._suspect: int | None = None  # a stray number (mod 2¹⁶) the next frame may confirm

    @property
    def newest(self) -> int | None:
        """The newest number accepted (mod 2¹⁶), or None before the first frame."""
        return None if self._hi is None else self._hi & 0xFFFF

    def accept(self, seq: int) -> Arrival:
        """Sort one arriving number ``seq`` (0…65535) and update the counts."""
        seq &= 0xFFFF
        if self._hi is None:
            self._hi = self._lo = seq
            self._suspect = None
            return Arrival.NEW
        d = _signed16(seq - self._hi)
        if 0 < d <= self.jump:
            self._advance(self._hi + d)
            self._suspect = None
            return Arrival.NEW
        if -self.window < d <= 0 and self._hi + d >= self._lo:
            u = self._hi + d
            if u in self._missing:
                self._missing.discard(u)
                self.lost -= 1
                self.late += 1
                return Arrival.LATE
            self.repeated += 1
            return Arrival.REPEATED
        # far from the stream: confirmed only by a frame that continues from it
        if self._suspect is not None and seq == (self._suspect + 1) & 0xFFFF:
            self.stray -= 1  # the suspect was the first frame of the stream's new place
            self._suspect = None
            if d > 0:  # a long loss: everything between was lost, but not the suspect itself
                self._advance(self._hi + d)
                self._missing.discard(self._hi - 1)
                self.lost -= 1
            else:  # the sender's counter started again: nothing lost, a new stream
                self.restarts += 1
                self._hi = self._lo = seq
                self._missing.clear()
                self._order.clear()
            return Arrival.NEW
        self._suspect = seq
        self.stray += 1
        return Arrival.STRAY

    def _advance(self, hi: int) -> None:
        old = self._hi
        assert old is not None
        self.lost += hi - old - 1
        # remember at most `window` missing numbers (older ones stay counted as lost)
        new = range(max(old + 1, hi - self.window + 1), hi)
        self._missing.update(new)
        self._order.extend(new)
        self._hi = hi
        floor = hi - self.window
        while self._order and self._order[0] <= floor:
            self._missing.discard(self._order.popleft())


class RigClock:
    """The rig's clock seen from the host, online: what timed targets are stamped with
    (docs/PROTOCOL.md, MODE flag TIMED).

    Every state carries the rig's clock (``t_us``: µs, a 32-bit counter that wraps) and reaches the
    host no earlier than a state frame's wire time after it was taken, so the lower envelope of
    ``arrival − wire − rig time`` is the clocks' offset (plus the host's least read latency, tens of
    µs) and its slope the crystals' drift. The lowest point of each ``window_s`` of rig time is kept
    for the last ``windows`` windows; a line through them (its slope from four windows on, 0 before)
    is lowered under all of them. :meth:`rig_us` maps a host time onto the rig's clock; between two
    calls its answer moves at most ``slew_s`` away from where the previous one and the elapsed time
    put it, so a better estimate never jumps a target's time (the firmware takes a target's velocity
    from two stamps: a 20 µs step bends it by 1 % for one 2 ms frame). A rig clock that goes back
    (a reboot) starts the map afresh. Thread-safe (the link's reader observes, a sampler maps).

    Args:
        wire_s: a state frame's time on the wire, s.
        window_s: rig time per envelope window, s.
        windows: windows kept.
        min_states: states needed before :attr:`ready`.
        slew_s: the largest correction of one answer, s.
    """

    def __init__(self, wire_s: float, *, window_s: float = 0.5, windows: int = 40, min_states: int = 8,
                 slew_s: float = 20e-6) -> None:
        self.wire_s = float(wire_s)
        self.window_s = float(window_s)
        self.windows = int(windows)
        self.min_states = int(min_states)
        self.slew_s = float(slew_s)
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Forget everything (a rebooted rig, a reconnected port)."""
        with self._lock:
            self._lows: collections.OrderedDict[int, tuple[float, float]] = collections.OrderedDict()
            self._base = 0          # the counter's wraps so far, µs
            self._last_raw: int | None = None
            self._n = 0
            self._line: tuple[float, float] | None = None  # (offset, drift): host = r + offset + drift·r
            self._prev: tuple[float, float] | None = None  # the previous answer (host s, rig s)

    @property
    def ready(self) -> bool:
        """Enough states seen to map host times."""
        return self._n >= self.min_states

    def observe(self, host_t: float, rig_us: int) -> None:
        """One state: its arrival on the host's clock (s) and its ``t_us``."""
        raw = int(rig_us) & 0xFFFFFFFF
        with self._lock:
            if self._last_raw is not None:
                back = (self._last_raw - raw) & 0xFFFFFFFF
                if raw < self._last_raw and back < 2 ** 31:  # went back, not a wrap: the rig restarted its clock
                    self._lows.clear()
                    self._base, self._n, self._line, self._prev = 0, 0, None, None
                elif raw < self._last_raw:
                    self._base += 1 << 32
            self._last_raw = raw
            r = (raw + self._base) * 1e-6
            e = host_t - self.wire_s - r
            w = int(r // self.window_s)
            low = self._lows.get(w)
            if low is None or e < low[1]:
                self._lows[w] = (r, e)
                while len(self._lows) > self.windows:
                    self._lows.popitem(last=False)
                self._line = None
            self._n += 1

    def _fit(self) -> tuple[float, float]:
        if self._line is None:
            pts = list(self._lows.values())
            r = [p[0] for p in pts]
            e = [p[1] for p in pts]
            drift = 0.0
            if len(pts) >= 4:
                mr, me = sum(r) / len(r), sum(e) / len(e)
                var = sum((x - mr) ** 2 for x in r)
                drift = sum((x - mr) * (y - me) for x, y in zip(r, e)) / var if var > 0 else 0.0
            offset = min(y - drift * x for x, y in zip(r, e))
            self._line = (offset, drift)
        return self._line

    def rig_us(self, host_t: float) -> int:
        """The rig's clock at host time ``host_t`` (s), µs as the rig counts (wrapping at 2^32).

        Raises:
            RuntimeError: not :attr:`ready`.
        """
        with self._lock:
            if self._n < self.min_states:
                raise RuntimeError("the rig's clock is not known yet (too few states)")
            offset, drift = self._fit()
            r = (host_t - offset) / (1.0 + drift)
            if self._prev is not None:
                expect = self._prev[1] + (host_t - self._prev[0]) / (1.0 + drift)
                r = min(max(r, expect - self.slew_s), expect + self.slew_s)
            self._prev = (host_t, r)
            return int(round(r * 1e6)) & 0xFFFFFFFF

