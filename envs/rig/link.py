"""The serial link to the servo rig: :class:`RigLink` and its settings, counters and states.

:class:`RigLink` talks protocol 2 (docs/PROTOCOL.md) over any pyserial URL — ``/dev/ttyUSB0``,
the emulator's pty (``armtwin rig emulate``), ``socket://host:port``. A reader thread decodes
frames, sorts the rig's sequence numbers (:class:`~armtwin.controllers.rigstream.SeqTracker`:
lost, late, repeated, stray — only fresh states are acted on), counts corrupt frames, matches
echoed sequence numbers to measure the latency, sends heartbeats when nothing else went out for
``heartbeat_s`` and a HELLO every ``hello_s`` (the rig's boot id tells a reboot), re-sends the
mode until the rig echoes it, and when the port disappears it keeps trying to reopen it — it
never raises out of the thread.

Units: encoder pulses on the wire, deg in :attr:`RigState.degrees`, ms for latencies.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ...controllers import rigproto as rp
from ...controllers.rigstream import Arrival, RigClock, SeqTracker
from ...controllers.servo import PULSES_PER_DEG

__all__ = ["RigLinkError", "LinkConfig", "RigState", "LatencyWindow", "LinkStats", "RigLink"]


class RigLinkError(OSError):
    """The port could not be opened at all (bad path/URL), or the rig did not answer."""


@dataclass(frozen=True)
class LinkConfig:
    """Settings of a :class:`RigLink`.

    Attributes:
        baudrate: serial speed, bit/s (ignored by pty and socket:// ports).
        heartbeat_s: send a HEARTBEAT when nothing was sent for this long, s (< the rig's 100 ms watchdog).
        link_timeout_s: no JOINT_STATES for this long -> Fault.LINK, s (the rig sends one at least every 20 ms).
        reconnect_s: pause between attempts to reopen a vanished port, s.
        read_timeout_s: serial read timeout of the reader thread, s.
        keep_states: keep the newest this many received states in :attr:`RigLink.history`
            (every state, not only the ones a sampler saw; 0: none) — for fault analysis on the
            rig's clock.
        hello_s: send a HELLO this often, s: the rig's answer carries its boot id, so a reboot
            whose own announcement was lost is still seen within this time.
        target_lead_s: timed targets (:meth:`RigLink.set_mode` with ``timed``) apply this long
            after the time they belong to: longer than a target's way to the rig (its 1.4 ms on
            the wire at 115 200 bit/s, the host's write and the adapter), so the rig holds each
            until then and the link's jitter does not move it. A target that arrives later is
            applied at once (the emulator counts ``late_targets``).
    """

    baudrate: int = 115200
    heartbeat_s: float = 0.02
    link_timeout_s: float = 0.05
    reconnect_s: float = 0.2
    read_timeout_s: float = 0.002
    keep_states: int = 0
    hello_s: float = 1.0
    target_lead_s: float = 0.004

    def __post_init__(self) -> None:
        for name in ("baudrate", "heartbeat_s", "link_timeout_s", "reconnect_s", "read_timeout_s", "hello_s",
                     "target_lead_s"):
            if not (getattr(self, name) > 0):
                raise ValueError(f"LinkConfig.{name} must be > 0, got {getattr(self, name)!r}")
        if self.keep_states < 0:
            raise ValueError(f"LinkConfig.keep_states must be >= 0, got {self.keep_states!r}")


@dataclass(frozen=True)
class RigState:
    """One JOINT_STATES as received.

    Attributes:
        t: host monotonic time of reception, s.
        seq: the rig's frame sequence number.
        t_us: the rig's clock, µs.
        positions: encoder pulses per motor.
        pwm: PWM duty per motor (−255…255).
        faults: the rig's fault flags.
        latency_ms: command out -> this state, ms, when this state is the first echo of a command (else NaN).
        echo: low byte of the seq of the newest host frame the rig had received when it built this state.
    """

    t: float
    seq: int
    t_us: int
    positions: tuple[int, ...]
    pwm: tuple[int, ...]
    faults: rp.Fault
    latency_ms: float
    echo: int = -1

    @property
    def degrees(self) -> np.ndarray:
        """Measured output angles (n_motors,), deg."""
        return np.asarray(self.positions, dtype=float) / PULSES_PER_DEG


class LatencyWindow:
    """Latency measurements, ms: running totals over all of them plus a bounded ring of the newest.

    Memory stays constant on a link that runs for hours (a 500 Hz state stream would otherwise
    grow by 1.8 M floats an hour). :meth:`percentile` covers the newest ``capacity``
    measurements — at 500 Hz the default (65536) holds the last ~2 minutes, i.e. the whole
    window of ``armtwin bench rig``.

    Args:
        capacity: number of newest measurements kept for percentiles.
    """

    def __init__(self, capacity: int = 65536) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self._buf = np.empty(int(capacity), dtype=float)
        self._n = 0  # measurements ever appended
        self.sum_ms = 0.0
        self.min_ms = math.inf
        self.max_ms = -math.inf

    @property
    def capacity(self) -> int:
        """Size of the ring."""
        return int(self._buf.size)

    @property
    def count(self) -> int:
        """Number of measurements ever appended (not bounded by ``capacity``)."""
        return self._n

    @property
    def mean_ms(self) -> float:
        """Mean over all measurements ever appended, ms (NaN when none)."""
        return self.sum_ms / self._n if self._n else math.nan

    def append(self, ms: float) -> None:
        """Add one measurement, ms."""
        self._buf[self._n % self._buf.size] = ms
        self._n += 1
        self.sum_ms += ms
        self.min_ms = min(self.min_ms, ms)
        self.max_ms = max(self.max_ms, ms)

    def values(self) -> np.ndarray:
        """The measurements in the ring, oldest first (min(count, capacity),), ms (a copy)."""
        n, cap = self._n, self._buf.size
        if n <= cap:
            return self._buf[:n].copy()
        k = n % cap
        return np.concatenate([self._buf[k:], self._buf[:k]])

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (0..100) of the measurements in the ring, ms (NaN when none)."""
        v = self.values()
        return float(np.percentile(v, q)) if v.size else math.nan

    def __len__(self) -> int:
        return min(self._n, self._buf.size)

    def __iter__(self):
        return iter(self.values().tolist())


@dataclass
class LinkStats:
    """Counters of a :class:`RigLink` (read them any time; they only grow, but ``lost``, which
    falls again when a missing frame arrives late)."""

    frames_rx: int = 0
    states_rx: int = 0  # fresh JOINT_STATES (newer than every frame before): the ones acted on
    frames_tx: int = 0
    lost: int = 0  # rig frames missing (sequence numbers skipped and not arrived late; per boot and connection)
    late: int = 0  # rig frames that arrived after a newer one (reordered): recorded, not acted on
    repeated: int = 0  # rig frames whose sequence number had arrived already (duplicates): ignored
    stray: int = 0  # rig frames far from the stream that nothing continued from (replays): ignored
    reboots: int = 0  # the rig announced a new boot id (it rebooted): the mode was sent again
    dropped: int = 0  # corrupt frames dropped by the decoder
    dropped_by_kind: dict = field(default_factory=dict)
    targets_skipped: int = 0  # targets not sent because the wire was still busy (newer ones follow)
    disconnects: int = 0
    reconnect_attempts: int = 0
    reconnects: int = 0
    faults_seen: rp.Fault = rp.Fault.NONE  # OR of the fault flags of every state received
    latencies_ms: LatencyWindow = field(default_factory=LatencyWindow)


class RigLink:
    """A protocol-v1 link to the rig over a pyserial URL, with a reader thread.

    Args:
        url: ``/dev/ttyUSB0``, a pty path, ``socket://host:port``, … (pyserial ``serial_for_url``).
        config: timing settings.

    Raises:
        RigLinkError: from :meth:`open` when the port cannot be opened the first time.
    """

    def __init__(self, url: str, config: LinkConfig | None = None) -> None:
        self.url = url
        self.config = config or LinkConfig()
        self.stats = LinkStats()
        self._port = None
        self._lock = threading.Lock()  # serialises writes and port swaps
        self._seq = 0
        self._last_tx = 0.0
        self._wire_free = 0.0  # monotonic s at which the bytes written so far have left the wire
        self._pending: collections.deque = collections.deque(maxlen=512)  # (seq, t_sent)
        self._decoder = rp.StreamDecoder()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._latest: RigState | None = None
        self._rx_seq = SeqTracker()  # the rig's sequence numbers: new, late, repeated, stray
        #: the rig's clock on the host's, from the states' times (timed targets are stamped with it)
        self.clock = RigClock(rp.wire_bytes(rp.MsgType.JOINT_STATES) * 10.0 / self.config.baudrate)
        self._timed_wanted = False
        #: the rig-clock time (µs) the newest JOINT_TARGETS was stamped for, when timed (else None)
        self.last_target_stamp_us: int | None = None
        self.boot_id: int | None = None  # the rig's boot id, from its HELLO
        self._hello_sent = 0.0
        self._mode: rp.ModeMsg | None = None
        self._mode_sent = 0.0
        self.hello: rp.Hello | None = None
        self.mode_ack: rp.ModeMsg | None = None
        self.last_error = ""
        self._new_state = threading.Condition()
        self._faults_acc = rp.Fault.NONE  # OR of the flags of the states received since take_faults()
        #: the newest ``config.keep_states`` states received, oldest first
        self.history: collections.deque = collections.deque(maxlen=self.config.keep_states)
        self._t0 = time.monotonic()

    # ----- life cycle -------------------------------------------------------------------
    def _open_port(self):
        import serial
        port = serial.serial_for_url(self.url, baudrate=self.config.baudrate, timeout=self.config.read_timeout_s,
                                     write_timeout=0.5)
        try:
            port.reset_input_buffer()
        except Exception:  # noqa: BLE001 - not every URL handler supports it
            pass
        port.write(b"\x00")  # terminate whatever half frame the rig may hold
        return port

    def open(self) -> "RigLink":
        """Open the port and start the reader thread."""
        import serial
        try:
            self._port = self._open_port()
        except (serial.SerialException, OSError, ValueError) as exc:
            raise RigLinkError(f"cannot open rig port {self.url}: {exc}") from None
        self._thread = threading.Thread(target=self._run, name="RigLink", daemon=True)
        self._thread.start()
        self._send_hello()  # starts the session: the rig forgets the previous host's target numbers
        return self

    def close(self) -> None:
        """Stop the reader thread, send IDLE (best effort) and close the port (idempotent).

        The thread stops first, so that it cannot send the old mode again after the IDLE (it
        re-sends a mode the rig has not echoed).
        """
        was_open = self._thread is not None
        self._mode = None
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None
        if was_open and self.connected:
            try:
                self.send(rp.ModeMsg(rp.Mode.IDLE))
            except Exception:  # noqa: BLE001
                pass
        with self._lock:
            self._close_port_locked()

    def __enter__(self) -> "RigLink":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        """True while the port is open."""
        return self._port is not None

    @property
    def is_open(self) -> bool:
        """True from :meth:`open` until :meth:`close` (also while it reconnects a lost port)."""
        return self._thread is not None

    # ----- sending ------------------------------------------------------------------------
    def _now_us(self, t: float | None = None) -> int:
        return int(((time.monotonic() if t is None else t) - self._t0) * 1e6) & 0xFFFFFFFF

    def send(self, msg: rp.Message, *, stamp: float | None = None, t_us: int | None = None) -> int | None:
        """Send one message; returns its seq, or None when the port is gone (never raises).

        ``stamp``: the host time (``time.monotonic()``) the frame's time field says, default now;
        ``t_us``: the time field itself (a time on the rig's clock), instead.
        """
        with self._lock:
            port = self._port
            if port is None:
                return None
            seq = self._seq
            frame = rp.encode_frame(msg, seq, self._now_us(stamp) if t_us is None else int(t_us) & 0xFFFFFFFF)
            t = time.monotonic()
            try:
                port.write(frame)
            except Exception as exc:  # noqa: BLE001 - a vanished port: the reader thread reconnects
                self.last_error = str(exc)
                self._drop_port_locked()
                return None
            self._seq = (seq + 1) & 0xFFFF
            self._last_tx = t
            self._wire_free = max(self._wire_free, t) + len(frame) * 10.0 / self.config.baudrate
            self._pending.append((seq, t))
            self.stats.frames_tx += 1
            return seq

    #: a target is skipped when the wire stays busy for longer than this, s
    WIRE_SLACK_S = 0.0005

    def send_targets(self, pulses: Sequence[int], *, stamp: float | None = None) -> int | None:
        """JOINT_TARGETS in encoder pulses (saturated to int16); returns the seq, or None.

        ``stamp``: the host time (``time.monotonic()``) the targets belong to, default now. The
        firmware takes a target's velocity from two frames' times, so a sample loop passes its
        sample's time: the time spent between the sample and the write (a physics step, a
        scheduling delay) then does not bend the velocity feed-forward.

        Targets are latest-value data: when the bytes sent earlier would still occupy the wire
        (10 bits per byte at ``baudrate``) for more than ``WIRE_SLACK_S``, this target is
        skipped (counted in ``stats.targets_skipped``) instead of queued, so a burst of
        samples after a stall can never build a backlog in front of the rig.
        """
        if self._wire_free - time.monotonic() > self.WIRE_SLACK_S:
            self.stats.targets_skipped += 1
            return None
        p = tuple(int(max(-32768, min(32767, v))) for v in pulses)
        t_us = None
        if self.timed:  # the rig applies it target_lead_s after its time, on the rig's clock
            t = time.monotonic() if stamp is None else stamp
            try:
                t_us = (self.clock.rig_us(t) + int(round(self.config.target_lead_s * 1e6))) & 0xFFFFFFFF
            except RuntimeError:  # the clock was forgotten this instant (a reboot): the untimed MODE follows
                self.stats.targets_skipped += 1
                return None
        self.last_target_stamp_us = t_us
        return self.send(rp.JointTargets(p), stamp=stamp, t_us=t_us)  # type: ignore[arg-type]

    @property
    def timed(self) -> bool:
        """The mode sent last asks for timed targets (targets are then stamped on the rig's clock)."""
        m = self._mode
        return m is not None and bool(m.flags & rp.ModeMsg.TIMED)

    def _mode_msg(self, mode: rp.Mode, stream_hz: int, flags: int) -> rp.ModeMsg:
        """The MODE to send: with TIMED when it was asked for, the mode drives the motors from
        targets, the rig's firmware honours it and the rig's clock is known (else without)."""
        flags &= ~rp.ModeMsg.TIMED
        fw = self.hello.firmware if self.hello is not None else 0
        if self._timed_wanted and mode == rp.Mode.VIRTUAL_TO_REAL and fw >= rp.ModeMsg.TIMED_FIRMWARE \
                and self.clock.ready:
            flags |= rp.ModeMsg.TIMED
        return rp.ModeMsg(mode, stream_hz, flags)

    def _forget_clock(self) -> None:
        """The rig's clock is unknown again (a reboot, a reconnected port): targets go untimed until
        the mode is next set (a rig still in the timed mode hears the untimed MODE before them)."""
        self.clock.reset()
        m = self._mode
        if m is not None and m.flags & rp.ModeMsg.TIMED:
            self._mode = rp.ModeMsg(m.mode, m.stream_hz, m.flags & ~rp.ModeMsg.TIMED)
            self._mode_sent = 0.0
            self.mode_ack = None

    def wait_clock(self, timeout: float) -> bool:
        """Wait until the rig's clock is known (enough states arrived); True if it is."""
        end = time.monotonic() + timeout
        while not self.clock.ready and time.monotonic() < end:
            self.wait_state(time.monotonic(), min(0.05, max(end - time.monotonic(), 0.001)))
        return self.clock.ready

    #: re-send the MODE this often until the rig echoes it, s (a board may still be booting)
    MODE_RETRY_S = 0.2

    def set_mode(self, mode: rp.Mode, stream_hz: int = 500, flags: int = 0, *, timed: bool = False) -> None:
        """Select the lead direction.

        The mode is remembered: it is re-sent every ``MODE_RETRY_S`` until the rig echoes it,
        after every reconnect, when the rig announces a new boot id (it rebooted — an
        Arduino resets when its port is opened), and when a state reports WATCHDOG (the rig's
        watchdog is latched: after a stop it moves again only on a MODE). The rig takes the same MODE again without
        resetting anything, so a repeat is harmless.

        ``timed``: VIRTUAL_TO_REAL with timed targets (MODE flag TIMED, docs/PROTOCOL.md) when the
        rig's firmware has them (2.1 on) and its clock is known (:meth:`wait_clock`); otherwise
        untimed. Each time the mode is sent again it is decided afresh (:attr:`timed` tells).
        """
        self._timed_wanted = bool(timed)
        msg = self._mode_msg(mode, stream_hz, flags)
        self._mode_sent = time.monotonic()  # before the reader can see the new mode (no double send)
        self.mode_ack = None
        self._mode = msg
        self.send(msg)

    def power(self, on: bool) -> int | None:
        """Cut (False) or restore (True) the motor supply (emulator / rig with a supply relay).

        Returns:
            The POWER frame's seq (the rig's states echo its low byte once received), or None
            when the port is gone.
        """
        return self.send(rp.Power(1 if on else 0))

    def _send_hello(self) -> None:
        self._hello_sent = time.monotonic()
        self.send(rp.Hello(role=0))

    def request_hello(self, timeout: float = 1.0) -> rp.Hello | None:
        """Send HELLO and wait for the rig's answer (None on timeout)."""
        self.hello = None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._send_hello()
            t_next = min(deadline, time.monotonic() + 0.2)
            while time.monotonic() < t_next:
                if self.hello is not None:
                    return self.hello
                time.sleep(0.005)
        return self.hello

    # ----- receiving ----------------------------------------------------------------------
    def latest(self) -> RigState | None:
        """The newest JOINT_STATES (or None before the first)."""
        return self._latest

    def wait_state(self, after_t: float, timeout: float) -> RigState | None:
        """Block until a state newer than ``after_t`` (monotonic s) arrives, or ``timeout``."""
        with self._new_state:
            self._new_state.wait_for(lambda: self._latest is not None and self._latest.t > after_t, timeout=timeout)
        s = self._latest
        return s if s is not None and s.t > after_t else None

    def take_faults(self) -> rp.Fault:
        """The OR of the fault flags of every state received since the previous call (then cleared).

        A fault that lasted shorter than the gap between two samples (a power glitch, one
        corrupt frame) is therefore never missed by a sampler that only looks at :meth:`latest`.
        """
        with self._new_state:
            f, self._faults_acc = self._faults_acc, rp.Fault.NONE
        return f

    def link_faults(self, now: float | None = None) -> rp.Fault:
        """Fault.LINK when the port is gone or no state came for ``link_timeout_s``."""
        now = time.monotonic() if now is None else now
        s = self._latest
        if self._port is None or s is None or now - s.t > self.config.link_timeout_s:
            return rp.Fault.LINK
        return rp.Fault.NONE

    def _close_port_locked(self) -> bool:
        """Close the port if one is open (a vanished device may fail to close: ignored); True if it was."""
        if self._port is None:
            return False
        try:
            self._port.close()
        except Exception:  # noqa: BLE001
            pass
        self._port = None
        return True

    def _drop_port_locked(self) -> None:
        if self._close_port_locked():
            self.stats.disconnects += 1

    def _run(self) -> None:
        cfg = self.config
        next_attempt = 0.0
        while not self._stop.is_set():
            port = self._port
            if port is None:
                now = time.monotonic()
                if now < next_attempt:
                    self._stop.wait(min(0.01, next_attempt - now))
                    continue
                next_attempt = now + cfg.reconnect_s
                self.stats.reconnect_attempts += 1
                try:
                    newp = self._open_port()
                except Exception as exc:  # noqa: BLE001
                    self.last_error = str(exc)
                    continue
                with self._lock:
                    self._port = newp
                    self._decoder.reset()  # forget a half frame from the old connection, keep the counters
                    self._rx_seq.reset()
                    self._pending.clear()
                    self._forget_clock()
                self.stats.reconnects += 1
                self.mode_ack = None  # the reader re-sends the mode until the rig echoes it
                continue
            try:
                data = port.read(max(1, port.in_waiting))
            except Exception as exc:  # noqa: BLE001 - SerialException, OSError, TypeError on a closed fd
                self.last_error = str(exc)
                with self._lock:
                    if self._port is port:
                        self._drop_port_locked()
                next_attempt = time.monotonic() + cfg.reconnect_s
                continue
            t = time.monotonic()
            if data:
                self._handle(self._decoder.feed(data), t)
            if self._mode is not None and self.mode_ack != self._mode and t - self._mode_sent > self.MODE_RETRY_S:
                self._mode_sent = t
                m = self._mode
                self._mode = self._mode_msg(m.mode, m.stream_hz, m.flags)  # TIMED decided afresh (a rebooted rig)
                self.send(self._mode)
            if t - self._hello_sent > cfg.hello_s:
                self._send_hello()  # the answer's boot id tells a reboot whose announcement was lost
            elif t - self._last_tx > cfg.heartbeat_s:
                self.send(rp.Heartbeat())

    def _match_latency(self, echo: int, t: float) -> float:
        """Latency (ms) of the newest sent frame whose seq low byte is ``echo``; NaN if none pending.

        That frame and every older pending one are retired, so each command is measured at most
        once (the first state echoing it) and stale unmatched entries can never be matched later.
        """
        pend = self._pending
        for k in range(len(pend) - 1, -1, -1):
            if (pend[k][0] & 0xFF) == echo:
                ts = pend[k][1]
                for _ in range(k + 1):
                    pend.popleft()
                return (t - ts) * 1e3
        return math.nan

    def _handle(self, frames: list[rp.Frame], t: float) -> None:
        """Frames from the reader. A new boot id in a HELLO means the rig rebooted: the sequence
        numbers start afresh and the mode is sent again. Only fresh frames (newer than every
        frame before) are acted on; late ones add their faults; repeated and stray ones are only
        counted — so a duplicated or reordered frame can neither move the twin back nor reset
        the rig (docs/PROTOCOL.md, "Sequence numbers")."""
        st = self.stats
        st.dropped = self._decoder.stats.dropped
        st.dropped_by_kind = dict(self._decoder.stats.by_kind)
        track = self._rx_seq
        for f in frames:
            st.frames_rx += 1
            m = f.msg
            if isinstance(m, rp.Hello) and m.role == 1:
                if self.boot_id is not None and m.boot_id != self.boot_id:
                    st.reboots += 1
                    track.reset()
                    self._forget_clock()
                    self.mode_ack = None  # a rebooted rig is IDLE: the reader sends the mode again
                self.boot_id = m.boot_id
            arrival = track.accept(f.seq)
            st.lost, st.late, st.repeated, st.stray = track.lost, track.late, track.repeated, track.stray
            if isinstance(m, rp.JointStates):
                if arrival is Arrival.NEW:
                    self.clock.observe(t, f.t_us)
                    lat = self._match_latency(m.echo, t)
                    if not math.isnan(lat):
                        st.latencies_ms.append(lat)
                    st.states_rx += 1
                elif arrival is Arrival.LATE:
                    lat = math.nan
                else:
                    continue
                faults = rp.Fault(m.faults)
                if arrival is Arrival.NEW and faults & rp.Fault.WATCHDOG and self._mode is not None \
                        and self._mode.mode != rp.Mode.IDLE:
                    # the rig's watchdog stopped it (a host stall, a pulled cable) and stays stopped
                    # until it hears MODE again: the reader re-sends the mode until it is echoed
                    self.mode_ack = None
                state = RigState(t, f.seq, f.t_us, m.positions, m.pwm, faults, lat, m.echo)
                with self._new_state:
                    if arrival is Arrival.NEW:
                        self._latest = state
                        if self.history.maxlen:
                            self.history.append(state)
                    self._faults_acc |= faults  # a late state's faults count too: none is missed
                    st.faults_seen |= faults
                    self._new_state.notify_all()
            elif arrival is Arrival.NEW or arrival is Arrival.LATE:
                if isinstance(m, rp.Hello):
                    self.hello = m
                elif isinstance(m, rp.ModeMsg):
                    self.mode_ack = m
