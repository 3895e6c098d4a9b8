"""Hardware-in-the-loop twin: the serial link to the servo rig and the twin sync.

* :class:`RigLink` talks protocol v1 (docs/PROTOCOL.md) over any pyserial URL —
  ``/dev/ttyUSB0``, the emulator's pty (``armtwin rig emulate``), ``socket://host:port``.
  A reader thread decodes frames, tracks sequence numbers (lost frames), counts corrupt
  frames, matches echoed sequence numbers to measure the latency, sends heartbeats when
  nothing else went out for ``heartbeat_s``, and when the port disappears it keeps trying
  to reopen it (and restores the mode) — it never raises out of the thread.
* :class:`TwinSync` runs one direction of the twin per sample: VIRTUAL_TO_REAL (the
  simulated joints command the rig through JOINT_TARGETS) or REAL_TO_VIRTUAL (the rig's
  measured joints drive the simulated joints through :meth:`SimRobot.command`). Each
  sample has ΔE = E_virtual − E_servo (deg, per mapped joint), the latency (ms, command out →
  state echoing it back) and the fault flags of every state since the previous sample;
  :class:`TwinLog` writes them as CSV. :meth:`TwinSync.run` keeps a fixed tick schedule:
  every tick is either sampled or, after a host stall longer than ``max_late_s``, skipped —
  counted in the report and flagged ``LATE`` in the log, never silently.
* :class:`TwinSyncWrapper` mirrors a Gymnasium env's robot to the rig after every step.

No PyBullet here: the robot is a :class:`armtwin.envs.sim.SimRobot` from the World facade.
Units: deg and ms at the sample/log level, rad inside the robot, encoder pulses on the wire.
"""

from __future__ import annotations

import collections
import csv
import io

import math
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..controllers.choices import Choice
from ..controllers import rigproto as rp
from ..controllers.rigstream import Arrival, SeqTracker
from ..controllers.servo import PULSES_PER_DEG

__all__ = ["LinkConfig", "RigState", "LatencyWindow", "LinkStats", "RigLink", "Direction", "SyncConfig", "SyncSample",
           "FaultEvent", "PowerCommand", "SyncReport", "TwinLog", "TwinLogData", "TwinLogError", "read_twin_log", "TwinSync", "TwinSyncWrapper", "smooth_motion", "RigLinkError", "build_emulator", "Emulator", "FIRMWARE_DIR"]


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
    """

    baudrate: int = 115200
    heartbeat_s: float = 0.02
    link_timeout_s: float = 0.05
    reconnect_s: float = 0.2
    read_timeout_s: float = 0.002
    keep_states: int = 0
    hello_s: float = 1.0

    def __post_init__(self) -> None:
        for name in ("baudrate", "heartbeat_s", "link_timeout_s", "reconnect_s", "read_timeout_s", "hello_s"):
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
    def _now_us(self) -> int:
        return int((time.monotonic() - self._t0) * 1e6) & 0xFFFFFFFF

    def send(self, msg: rp.Message) -> int | None:
        """Send one message; returns its seq, or None when the port is gone (never raises)."""
        with self._lock:
            port = self._port
            if port is None:
                return None
            seq = self._seq
            frame = rp.encode_frame(msg, seq, self._now_us())
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

    def send_targets(self, pulses: Sequence[int]) -> int | None:
        """JOINT_TARGETS in encoder pulses (saturated to int16); returns the seq, or None.

        Targets are latest-value data: when the bytes sent earlier would still occupy the wire
        (10 bits per byte at ``baudrate``) for more than ``WIRE_SLACK_S``, this target is
        skipped (counted in ``stats.targets_skipped``) instead of queued, so a burst of
        samples after a stall can never build a backlog in front of the rig.
        """
        if self._wire_free - time.monotonic() > self.WIRE_SLACK_S:
            self.stats.targets_skipped += 1
            return None
        p = tuple(int(max(-32768, min(32767, v))) for v in pulses)
        return self.send(rp.JointTargets(p))  # type: ignore[arg-type]

    #: re-send the MODE this often until the rig echoes it, s (a board may still be booting)
    MODE_RETRY_S = 0.2

    def set_mode(self, mode: rp.Mode, stream_hz: int = 500, flags: int = 0) -> None:
        """Select the lead direction.

        The mode is remembered: it is re-sent every ``MODE_RETRY_S`` until the rig echoes it,
        after every reconnect, and when the rig announces a new boot id (it rebooted — an
        Arduino resets when its port is opened). The rig takes the same MODE again without
        resetting anything, so a repeat is harmless.
        """
        msg = rp.ModeMsg(mode, stream_hz, flags)
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
                    self.mode_ack = None  # a rebooted rig is IDLE: the reader sends the mode again
                self.boot_id = m.boot_id
            arrival = track.accept(f.seq)
            st.lost, st.late, st.repeated, st.stray = track.lost, track.late, track.repeated, track.stray
            if isinstance(m, rp.JointStates):
                if arrival is Arrival.NEW:
                    lat = self._match_latency(m.echo, t)
                    if not math.isnan(lat):
                        st.latencies_ms.append(lat)
                    st.states_rx += 1
                elif arrival is Arrival.LATE:
                    lat = math.nan
                else:
                    continue
                faults = rp.Fault(m.faults)
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


# ----- twin sync --------------------------------------------------------------------------

class Direction(Choice):
    """Which side leads."""

    __label__ = "direction"

    VIRTUAL_TO_REAL = "virtual-to-real"
    REAL_TO_VIRTUAL = "real-to-virtual"



@dataclass(frozen=True)
class SyncConfig:
    """Settings of a :class:`TwinSync`.

    Attributes:
        joints: 0-based indices of the robot joints mapped to rig motors 1, 2 (revolute only).
        direction: which side leads.
        rate_hz: loop rate of :meth:`TwinSync.run`, Hz.
        stream_hz: REAL_TO_VIRTUAL: the rig's state stream rate, Hz.
        local_demo: REAL_TO_VIRTUAL: let the rig move its motors along its built-in sine
            (for a rig without a person turning the shafts; the emulator).
        max_late_s: :meth:`TwinSync.run` takes samples that are late by up to this much back to
            back (catching up with its tick schedule); when the host stalled for longer, the
            missed ticks are skipped instead — counted in ``SyncReport.ticks_skipped`` and
            flagged ``Fault.LATE`` on the first sample after the gap, s.
    """

    joints: tuple[int, ...] = (0, 1)
    direction: Direction = Direction.VIRTUAL_TO_REAL
    rate_hz: float = 500.0
    stream_hz: int = 500
    local_demo: bool = False
    max_late_s: float = 0.05

    def __post_init__(self) -> None:
        if not (1 <= len(self.joints) <= rp.N_MOTORS) or len(set(self.joints)) != len(self.joints):
            raise ValueError(f"joints must name 1..{rp.N_MOTORS} different robot joints, got {self.joints}")
        if not isinstance(self.direction, Direction):
            raise ValueError(f"direction must be a Direction, got {self.direction!r}")
        if not (0 < self.rate_hz <= 5000):
            raise ValueError(f"rate_hz must be in (0, 5000], got {self.rate_hz}")
        if not (self.max_late_s >= 0):
            raise ValueError(f"max_late_s must be >= 0, got {self.max_late_s}")


@dataclass(frozen=True)
class SyncSample:
    """One sample of the twin.

    Attributes:
        stt: consecutive sample number (0, 1, 2, …).
        time: s since the start of the sync.
        virtual_deg: simulated joint angles of the mapped joints (k,), deg.
        servo_deg: measured rig angles (k,), deg (NaN while no state is known).
        error_deg: ΔE = virtual − servo (k,), deg.
        latency_ms: newest command-out -> matching-state-back latency, ms (NaN if none yet, or
            while the link is faulty).
        faults: rig flags of every state received since the previous sample (so a short fault is
            never missed), plus Fault.LINK when the link is stale and Fault.LATE when control
            ticks were skipped just before this sample.
        pwm: the rig's PWM per mapped joint.
        rig_state: the newest rig state this sample used (its ``t_us`` is the rig's clock), or None.
    """

    stt: int
    time: float
    virtual_deg: np.ndarray
    servo_deg: np.ndarray
    error_deg: np.ndarray
    latency_ms: float
    faults: rp.Fault
    pwm: tuple[int, ...] = ()
    rig_state: RigState | None = None


@dataclass(frozen=True)
class FaultEvent:
    """A fault that appeared (``on``) or cleared (``off``) at sample ``stt``."""

    stt: int
    time: float
    fault: str
    on: bool


@dataclass(frozen=True)
class PowerCommand:
    """A POWER message sent by :meth:`TwinSync.run` (its power schedule)."""

    stt: int  # sent just before this sample
    time: float  # s on the sync's clock (the sample's time)
    seq: int | None  # the frame's seq (None: the port was gone)
    on: bool
    t_sent: float = math.nan  # host monotonic time just after the frame was written, s (no state
    # received before it can have seen the command)


@dataclass
class SyncReport:
    """Summary of a :meth:`TwinSync.run`."""

    samples: int = 0  # samples taken (rows logged) by this run
    seconds: float = 0.0
    rate_hz: float = 0.0  # (samples − 1) / (time of the last sample − time of the first), Hz
    events: list = field(default_factory=list)
    stale_samples: int = 0  # samples for which no new state had arrived since the previous sample
    ticks: int = 0  # control ticks of the schedule that passed: samples + ticks_skipped
    ticks_skipped: int = 0  # ticks without a sample because the host stalled for > max_late_s
    stalls: int = 0  # gaps of skipped ticks (= samples flagged Fault.LATE)
    power_commands: list = field(default_factory=list)  # PowerCommand per scheduled POWER sent
    interrupted: bool = False


class TwinLog:
    """CSV log of a twin at the full loop rate; flushed after every row, closed idempotently.

    Columns: ``STT, Time, Error_j…, Virtual_j…, Servo_j…, Latency_ms, Fault`` (j = robot joint
    numbers, 1-based; angles in deg, Time in s, Fault as ``OK`` or ``POWER|LINK`` …).
    """

    def __init__(self, path: str | os.PathLike, joints: Sequence[int]) -> None:
        self.path = os.fspath(path)
        labels = [f"j{j + 1}" for j in joints]
        self.columns = (["STT", "Time"] + [f"Error_{l}" for l in labels] + [f"Virtual_{l}" for l in labels]
                        + [f"Servo_{l}" for l in labels] + ["Latency_ms", "Fault"])
        self._f = open(self.path, "w", newline="", buffering=1 << 16)
        self._w = csv.writer(self._f)
        self._w.writerow(self.columns)
        self._f.flush()
        self.rows = 0

    def write(self, s: SyncSample) -> None:
        """Append one sample and flush it to the OS."""
        if self._f.closed:
            return
        f3 = lambda v: "nan" if not np.isfinite(v) else f"{v:.4f}"  # noqa: E731
        self._w.writerow([s.stt, f"{s.time:.6f}", *map(f3, s.error_deg), *map(f3, s.virtual_deg),
                          *map(f3, s.servo_deg), f"{s.latency_ms:.3f}" if np.isfinite(s.latency_ms) else "nan",
                          s.faults.names()])
        self._f.flush()
        self.rows += 1

    def close(self) -> None:
        if not self._f.closed:
            self._f.flush()
            self._f.close()

    def __enter__(self) -> "TwinLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ----- reading a twin log back ------------------------------------------------------------

class TwinLogError(ValueError):
    """A file that is not a valid :class:`TwinLog`: the message names the file and, for a bad
    value, its line (1-based, as an editor shows it) and column."""


#: largest |joint angle| a twin log may carry, deg (the rig's int16 encoder positions stay
#: within ±874°; anything far beyond is not a measurement)
LOG_MAX_JOINT_DEG = 1e4
#: largest latency a twin log may carry, ms
LOG_MAX_LATENCY_MS = 1e6
#: largest sample number a twin log may carry (a year at 5 kHz is 1.6 × 10¹¹)
LOG_MAX_STT = 10**12
#: largest time a twin log may carry, s (about 3 years)
LOG_MAX_TIME_S = 1e8
_STT_RE = re.compile(r"(-?)([0-9]+)")
#: the names the log's Fault column is made of (``OK``, or these and unnamed bits as ``0x20``
#: joined by ``|``; see :meth:`armtwin.controllers.rigproto.Fault.names`)
FAULT_NAMES = rp.FAULT_NAMES


class TwinLogData(dict):
    """The columns of a twin log, ``{name: values}``: ``STT`` as int64, ``Fault`` as a list
    of str, the rest as float64 (NaN where the log has ``nan`` or nothing). Also:

    Attributes:
        path: the file read.
        labels: the joint labels of the columns (``["j1", "j2"]``).
        lines: the 1-based line in the file of every row (int64).
    """

    def __init__(self, path: str = "", labels: Sequence[str] = (), lines: np.ndarray | None = None) -> None:
        super().__init__()
        self.path = path
        self.labels = list(labels)
        self.lines = np.zeros(0, dtype=np.int64) if lines is None else lines

    def line_of(self, row: int) -> int:
        """The 1-based line in the file of row ``row`` (0-based)."""
        return int(self.lines[row])


def _one_line(text: str, limit: int) -> str:
    """``text`` for a one-line message: control characters escaped, at most ``limit`` characters."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:limit])
    return out + ("…" if len(text) > limit else "")


def read_twin_log(path: str | os.PathLike) -> TwinLogData:
    """Read a :class:`TwinLog` CSV back, checking every value.

    The header must be ``STT, Time, Error_<j>…, Virtual_<j>…, Servo_<j>…, Latency_ms, Fault``
    (the same joint labels in each group). A row is checked as :class:`TwinLog` writes it:

    * STT: integers in 0..:data:`LOG_MAX_STT` that count up by 1 from row to row;
    * Time: 0..:data:`LOG_MAX_TIME_S` and never going back;
    * Virtual_<j>: finite, |v| <= :data:`LOG_MAX_JOINT_DEG`;
    * Servo_<j>: the same, or ``nan`` / empty (no rig state, the link down);
    * Error_<j>: |v| <= 2 × :data:`LOG_MAX_JOINT_DEG`, or ``nan`` / empty (no servo value);
    * Latency_ms: 0..:data:`LOG_MAX_LATENCY_MS`, or ``nan`` / empty (none measured yet, LINK);
    * Fault: ``OK``, or fault names (:data:`FAULT_NAMES`) and unnamed bits (``0x20``) joined by ``|``.

    Blank lines are skipped, and so is a last row cut short by a crash (the file does not end
    with a line break and the row has too few fields); any other row with the wrong number of
    fields is an error.

    Raises:
        OSError: the file cannot be read.
        TwinLogError: not a twin log, no samples, or a bad value (naming its line and column).
    """
    path = os.fspath(path)
    where = _one_line(path, 300)  # the file's name as the messages show it
    try:
        with open(path, newline="", encoding="utf-8") as f:
            text = f.read()
        reader = csv.reader(io.StringIO(text))
        head = next(reader, None)
        records = []
        for row in reader:
            if row:
                records.append((reader.line_num, row))
    except (UnicodeDecodeError, csv.Error):
        raise TwinLogError(f"{where}: not a twin log (not a text CSV file)") from None
    want = "STT, Time, Error_j…, Virtual_j…, Servo_j…, Latency_ms, Fault"
    if not head or head[:2] != ["STT", "Time"] or head[-1] != "Fault":
        raise TwinLogError(f"{where}: not a twin log (expected a header {want})")
    if not any(c.startswith("Virtual_") for c in head):
        raise TwinLogError(f"{where}: not a twin log: the header has no Virtual_jN columns (expected {want})")
    mid = head[2:-2]
    k = len(mid) // 3
    labels = [c[len("Virtual_"):] for c in mid[k:2 * k]] if len(mid) % 3 == 0 else []
    if (head[-2] != "Latency_ms" or not labels or len(set(labels)) != k or not all(labels)
            or mid != [f"{g}_{l}" for g in ("Error", "Virtual", "Servo") for l in labels]):
        raise TwinLogError(f"{where}: not a twin log: header {_one_line(', '.join(head), 200)} (expected {want}, "
                           f"the same joints in each group)")
    n_fields = len(head)
    if records and len(records[-1][1]) < n_fields and not text.endswith(("\n", "\r")):
        records.pop()  # the last row, cut short by a crash while it was being written
    for line, row in records:
        if len(row) != n_fields:
            raise TwinLogError(f"{where}: line {line}: {len(row)} fields, the header has {n_fields}")
    if not records:
        raise TwinLogError(f"{where}: the log has no samples")
    lines = np.array([line for line, _ in records], dtype=np.int64)

    def bad(i: int, col: str, why: str) -> TwinLogError:
        return TwinLogError(f"{where}: line {lines[i]}, column {col}: {why}")

    def numbers(c: int, col: str, empty_ok: bool) -> np.ndarray:
        cells = [row[c] for _, row in records]
        out = np.empty(len(cells))
        for i, v in enumerate(cells):
            try:
                out[i] = float(v)
            except ValueError:
                if empty_ok and not v.strip():
                    out[i] = math.nan
                else:
                    raise bad(i, col, f"{v[:40]!r} is not a number") from None
        return out

    def first(mask: np.ndarray) -> int | None:
        hits = np.flatnonzero(mask)
        return int(hits[0]) if hits.size else None

    out = TwinLogData(path, labels, lines)
    # STT: consecutive integers in 0..LOG_MAX_STT (checked as text first: no int64 overflow)
    stt = np.empty(len(records), dtype=np.int64)
    for i, (_, row) in enumerate(records):
        m = _STT_RE.fullmatch(row[0])
        if m is None:
            raise bad(i, "STT", f"{row[0][:40]!r} is not a sample number (an integer)")
        if m.group(1) or len(m.group(2)) > len(str(LOG_MAX_STT)) or int(m.group(2)) > LOG_MAX_STT:
            raise bad(i, "STT", f"{row[0][:40]!r} is not a sample number in 0..{LOG_MAX_STT}")
        stt[i] = int(m.group(2))
    if (i := first(np.diff(stt) != 1)) is not None:
        raise bad(i + 1, "STT", f"{stt[i + 1]} after {stt[i]} (the sample numbers count up by 1; rows lost or mixed up)")
    out["STT"] = stt
    # Time: finite, >= 0, never going back
    t = numbers(1, "Time", False)
    if (i := first(~(t >= 0) | ~(t <= LOG_MAX_TIME_S))) is not None:
        raise bad(i, "Time", f"{records[i][1][1][:40]!r} is not a time (0..{LOG_MAX_TIME_S:.0f} s)")
    if (i := first(np.diff(t) < 0)) is not None:
        raise bad(i + 1, "Time", f"{t[i + 1]:g} s goes back (the row before has {t[i]:g} s)")
    out["Time"] = t
    for c, col in enumerate(head[2:-1], start=2):
        group = col.split("_", 1)[0]
        v = numbers(c, col, group != "Virtual")
        missing = np.isnan(v)
        if group == "Virtual" and (i := first(missing)) is not None:
            raise bad(i, col, f"{records[i][1][c][:40]!r} is not a number (the virtual joint is always known)")
        limit, unit = {"Latency": (LOG_MAX_LATENCY_MS, "ms"), "Error": (2 * LOG_MAX_JOINT_DEG, "deg")}.get(
            group, (LOG_MAX_JOINT_DEG, "deg"))
        wrong = ~missing & ~(np.abs(v) <= limit)
        if group == "Latency":
            wrong |= ~missing & (v < 0)
        if (i := first(wrong)) is not None:
            rng = f"0..{limit:.0f}" if group == "Latency" else f"±{limit:.0f}"
            raise bad(i, col, f"{records[i][1][c][:40]!r} is not a value in {rng} {unit}"
                      + ("" if group == "Virtual" else " (or nan)"))
        out[col] = v
    faults = [row[-1] for _, row in records]
    for i, f in enumerate(faults):
        try:
            if f != "OK" and not rp.Fault.parse(f):  # "" or "NONE" are not what TwinLog writes
                raise ValueError(f"{f!r} names no fault")
        except ValueError:
            raise bad(i, "Fault", f"{f[:40]!r} is not OK or fault names joined by | ({', '.join(FAULT_NAMES)}, "
                                  f"or an unnamed bit as 0x20)") from None
    out["Fault"] = faults
    return out


def smooth_motion(spec, joints: Sequence[int], amplitude_deg: float = 30.0, move_s: float = 1.5,
                  hold_s: float = 1.0) -> Callable[[float], np.ndarray]:
    """A built-in joint motion: cosine-smoothed moves between +A, 0 and −A with holds.

    Returns ``q(t)`` (rad, all robot joints; the unmapped ones stay at home). The second mapped
    joint moves with −0.6 × the amplitude (so the two are told apart in plots). Amplitudes are
    reduced to fit each joint's limits.
    """
    home = np.array(spec.home, dtype=float)
    amps = []
    for k, j in enumerate(joints):
        room = min(spec.upper[j] - home[j], home[j] - spec.lower[j])
        f = (1.0, -0.6)[k % 2]
        amps.append(math.copysign(min(math.radians(amplitude_deg) * abs(f), 0.9 * room), f))
    amps = np.array(amps)
    levels = [0.0, 1.0, 0.0, -1.0]
    seg = move_s + hold_s

    def q(t: float) -> np.ndarray:
        k = int(t // seg)
        a, b = levels[k % 4], levels[(k + 1) % 4]
        tau = min(1.0, (t - k * seg) / move_s)
        s = a + (b - a) * (0.5 - 0.5 * math.cos(math.pi * tau))
        out = home.copy()
        out[list(joints)] = home[list(joints)] + s * amps
        return out

    return q


class TwinSync:
    """The twin between a simulated robot and the rig, one :meth:`step` per sample.

    Args:
        robot: an :class:`armtwin.envs.sim.SimRobot` (any joint model).
        link: an open :class:`RigLink`.
        config: joints, direction, rate.
        log: optional :class:`TwinLog` receiving every sample.

    Raises:
        ValueError: a mapped joint that does not exist or is prismatic.
    """

    def __init__(self, robot, link: RigLink, config: SyncConfig, log: TwinLog | None = None) -> None:
        spec = robot.spec
        for j in config.joints:
            if not (0 <= j < spec.dof):
                raise ValueError(f"{spec.name} has joints 1..{spec.dof}; joint {j + 1} does not exist")
            if spec.prismatic[j]:
                raise ValueError(f"{spec.name} joint {j + 1} is prismatic; the rig's motors stand for revolute joints")
        self.robot, self.link, self.config, self.log = robot, link, config, log
        self.idx = list(config.joints)
        self.stt = 0
        self.events: list[FaultEvent] = []
        self._faults = rp.Fault.NONE
        self._t0: float | None = None
        self._last_state_t = -1.0
        self._last_latency = math.nan
        self.stale = 0

    def send_mode(self) -> None:
        """Send the MODE for the configured direction (the link re-sends it until the rig echoes it)."""
        mode = rp.Mode.VIRTUAL_TO_REAL if self.config.direction is Direction.VIRTUAL_TO_REAL else rp.Mode.REAL_TO_VIRTUAL
        flags = rp.ModeMsg.LOCAL_DEMO if self.config.local_demo else 0
        self.link.set_mode(mode, self.config.stream_hz, flags)

    def start(self) -> None:
        """Send the MODE and, the first time only, start the clock of the samples' ``time``.

        Calling it again (a new episode, a second :meth:`run`) re-sends the mode but keeps the
        clock, so ``time`` never jumps back while ``stt`` goes on.
        """
        self.send_mode()
        if self._t0 is None:
            self.link.take_faults()  # flags from before the sync (a rig idle since power-up) are not its samples'
            self._t0 = time.monotonic()

    @property
    def started(self) -> bool:
        """True once :meth:`start` ran (the clock is running)."""
        return self._t0 is not None

    def step(self, *, step_world: bool = True, late_ticks: int = 0, now: float | None = None) -> SyncSample:
        """One sample: exchange with the rig, compute ΔE and latency, log it.

        VIRTUAL_TO_REAL: sends the robot's current mapped joints as targets (whoever drives
        the robot — a program, a policy, the UI — has already commanded and stepped it).
        REAL_TO_VIRTUAL: commands the robot's mapped joints to the rig's newest measurement
        through ``SimRobot.command`` and, if ``step_world``, advances the world one step so
        that E_virtual is the simulated joint after the command.

        Args:
            step_world: REAL_TO_VIRTUAL: advance the world one step after the command.
            late_ticks: control ticks skipped just before this sample (> 0 flags Fault.LATE).
            now: the sample's monotonic time, s (default: now) — :meth:`run` passes the time
                its tick schedule was checked at, so ``time`` and the schedule agree exactly.
        """
        if self._t0 is None:
            self.start()
        now = time.monotonic() if now is None else now
        spec = self.robot.spec
        seen = self.link.take_faults()  # every state since the previous sample, before latest():
        state = self.link.latest()  # a state arriving in between is counted next time, not lost
        if self.config.direction is Direction.VIRTUAL_TO_REAL:
            virt = np.degrees(self.robot.q[self.idx])
            self.link.send_targets(np.rint(virt * PULSES_PER_DEG).astype(int).tolist() + [0] * (rp.N_MOTORS - len(self.idx)))
        else:
            if state is not None:
                q_cmd, _ = self.robot.commanded
                q_cmd[self.idx] = np.clip(np.radians(state.degrees[:len(self.idx)]), spec.lower[self.idx], spec.upper[self.idx])
                self.robot.command(q_cmd)
            if step_world:
                self.robot.world.step()
            virt = np.degrees(self.robot.q[self.idx])
        if state is not None:
            servo = state.degrees[:len(self.idx)]
            if state.t > self._last_state_t:
                if not math.isnan(state.latency_ms):
                    self._last_latency = state.latency_ms
            else:
                self.stale += 1
            self._last_state_t = state.t
            faults = state.faults | seen | self.link.link_faults(now)
            pwm = tuple(state.pwm[:len(self.idx)])
        else:
            servo = np.full(len(self.idx), np.nan)
            faults = rp.Fault.LINK | seen
            pwm = ()
        if late_ticks > 0:
            faults |= rp.Fault.LATE
        latency = self._last_latency
        if faults & rp.Fault.LINK:  # no fresh state: no latency to show; no servo values without a port
            latency = math.nan
            if not self.link.connected:
                servo = np.full(len(self.idx), np.nan)
        sample = SyncSample(self.stt, now - self._t0, virt, servo, virt - servo, latency, faults, pwm, state)
        self._track_faults(sample)
        if self.log is not None:
            self.log.write(sample)
        self.stt += 1
        return sample

    def _track_faults(self, s: SyncSample) -> None:
        changed = int(s.faults ^ self._faults) & ~int(rp.Fault.RX_ERROR | rp.Fault.LATE)
        for b in range(changed.bit_length()):  # every bit, named or not (a newer firmware's fault)
            if changed >> b & 1:
                f = rp.Fault(1 << b)
                self.events.append(FaultEvent(s.stt, s.time, f.names(), bool(f & s.faults)))
        self._faults = s.faults

    def run(self, seconds: float | None = None, *, source: Callable[[float], np.ndarray] | None = None,
            stop: threading.Event | None = None, power_schedule: dict[int, bool] | None = None,
            max_samples: int | None = None, on_sample: Callable[[SyncSample], None] | None = None) -> SyncReport:
        """Run the loop at ``config.rate_hz`` until ``seconds``, ``max_samples`` or ``stop``.

        Samples follow a fixed tick schedule (tick k at k / rate_hz after the start). A sample
        is never taken before its tick; a late one is taken at once (back to back) while it is
        at most ``config.max_late_s`` late. After a longer stall of the host the missed ticks
        are skipped — counted in ``SyncReport.ticks_skipped``, and the next sample carries
        Fault.LATE — so no tick is lost silently: ticks = samples + ticks_skipped.

        Args:
            seconds: duration, s (None: until ``stop`` or ``max_samples``).
            source: VIRTUAL_TO_REAL: ``q(t)`` (rad, all joints; t in s since this run started)
                commanded to the robot each sample (a program, a planner, a policy…). None
                leaves the robot to whoever else commands it.
            stop: set it (e.g. from a signal handler) to end the loop cleanly.
            power_schedule: {sample number: power on?} — POWER messages sent at those samples
                (the fault test: {3000: False, 3150: True, 3600: False}); each is recorded in
                ``SyncReport.power_commands``.
            max_samples: stop once ``stt`` reaches this (the total sample count of this sync).
            on_sample: called with every sample (progress display); it may set ``stop``.
        """
        world = self.robot.world
        period = 1.0 / self.config.rate_hz
        max_late_ticks = int(self.config.max_late_s / period)
        sched = dict(power_schedule or {})
        report = SyncReport()
        self.start()
        t_first = t_last = None
        t_start = time.monotonic()  # tick 0 of this run
        tick = 0  # the next tick to take
        n0 = self.stt
        try:
            while True:
                if stop is not None and stop.is_set():
                    report.interrupted = True
                    break
                if max_samples is not None and self.stt >= max_samples:
                    break
                now = time.monotonic()
                if seconds is not None and now - t_start >= seconds:
                    break
                due = int((now - t_start) / period)  # the newest tick that has come
                late = 0
                if due - tick > max_late_ticks:  # stalled: skip the missed ticks, visibly
                    late = due - tick
                    report.ticks_skipped += late
                    report.stalls += 1
                    tick = due
                if self.stt in sched:
                    on = sched.pop(self.stt)
                    seq = self.link.power(on)
                    report.power_commands.append(PowerCommand(self.stt, now - self._t0, seq, on, time.monotonic()))
                if source is not None and self.config.direction is Direction.VIRTUAL_TO_REAL:
                    self.robot.command(source(now - t_start))
                if self.config.direction is Direction.VIRTUAL_TO_REAL:
                    world.step()
                s = self.step(late_ticks=late, now=now)
                tick += 1
                t_first = s.time if t_first is None else t_first
                t_last = s.time
                if on_sample is not None:
                    on_sample(s)
                delay = t_start + tick * period - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                # (catching up never queues commands: RigLink.send_targets skips targets while
                # the wire is still busy with earlier bytes)
        except KeyboardInterrupt:
            report.interrupted = True
        report.samples = self.stt - n0
        report.ticks = report.samples + report.ticks_skipped
        report.seconds = time.monotonic() - t_start
        if t_first is not None and t_last > t_first:  # samples per second of the loop itself
            report.rate_hz = (report.samples - 1) / (t_last - t_first)
        report.events = list(self.events)
        report.stale_samples = self.stale
        return report


try:
    import gymnasium as _gym

    _WrapperBase = _gym.Wrapper
except ImportError:  # pragma: no cover - gymnasium is a core dependency
    _WrapperBase = object  # type: ignore[assignment,misc]


class TwinSyncWrapper(_WrapperBase):  # type: ignore[misc,valid-type]
    """Couple an armtwin Gymnasium env's robot with the servo rig, in either direction.

    VIRTUAL_TO_REAL (default): each ``step`` first lets the env step (the policy commands the
    simulated robot and the world advances), then sends the mapped joints to the rig as targets.

    REAL_TO_VIRTUAL: the rig's measured joints drive the mapped simulated joints and the policy
    drives the others. Every command the env gives its robot has the mapped joints replaced by
    the rig's newest measurement (clipped to the joint ranges; the last one known while the
    link is down), so the world steps with them; the observation therefore shows the rig as
    of the start of the step. Use it to act with a policy on a robot whose first joints a
    person moves on the rig by hand, or to check a policy against measured joint motion.
    ``close`` gives the robot its own ``command`` back.

    Both directions add ``info["twin"]`` = {"error_deg", "servo_deg", "latency_ms", "faults"}:
    ΔE, the servo joints, the latency and the link/rig faults of that sample. ``reset``
    re-sends the mode (the rig may have rebooted); the log's sample numbers and clock run on
    across episodes.

    Assumption: ``env.unwrapped.robot`` is the env's :class:`armtwin.envs.sim.SimRobot`
    (true for the armtwin envs; any env exposing such an attribute works).

    Args:
        env: the env to wrap.
        link: an open :class:`RigLink`.
        joints: 0-based robot joint indices mapped to the rig's motors.
        log: optional :class:`TwinLog`.
        direction: :class:`Direction` (or its value, "virtual-to-real" / "real-to-virtual").
        local_demo: REAL_TO_VIRTUAL: let the rig move its motors along its built-in sine.

    Raises:
        ValueError: the env has no robot, ``link`` is not open (every step would only
            report LINK), or a joint the rig cannot stand for.
    """

    def __init__(self, env, link: RigLink, joints: Sequence[int] = (0, 1), log: TwinLog | None = None, *,
                 direction: Direction | str = Direction.VIRTUAL_TO_REAL, local_demo: bool = False) -> None:
        super().__init__(env)
        robot = getattr(env.unwrapped, "robot", None)
        if robot is None or not hasattr(robot, "command"):
            raise ValueError("TwinSyncWrapper needs env.unwrapped.robot to be a SimRobot")
        if not getattr(link, "is_open", False):
            raise ValueError("TwinSyncWrapper needs an open RigLink: call link.open() or use `with RigLink(...) as link`")
        direction = Direction.parse(direction)
        self.sync = TwinSync(robot, link, SyncConfig(tuple(joints), direction, local_demo=local_demo), log)
        self._robot = robot
        if direction is Direction.REAL_TO_VIRTUAL:
            robot.command = self._rig_command(robot.command)  # an instance attribute over the method

    def _rig_command(self, command):
        idx, link, spec = self.sync.idx, self.sync.link, self._robot.spec
        lo, hi = spec.lower[idx], spec.upper[idx]

        def rig_command(q, qd=None) -> None:
            q = np.array(q, dtype=float)
            state = link.latest()
            if state is not None:
                q[idx] = np.clip(np.radians(state.degrees[:len(idx)]), lo, hi)
                if qd is not None:
                    qd = np.array(qd, dtype=float)
                    qd[idx] = 0.0
            command(q, qd)

        return rig_command

    def close(self):
        self._robot.__dict__.pop("command", None)  # the robot's own command again
        return super().close()

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.sync.start()  # the mode again (the rig may have rebooted); the log's clock keeps running
        info = dict(info)
        info["twin"] = self._info(self.sync.step(step_world=False))
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = dict(info)
        info["twin"] = self._info(self.sync.step(step_world=False))
        return obs, reward, terminated, truncated, info

    @staticmethod
    def _info(s: SyncSample) -> dict:
        return {"error_deg": s.error_deg, "servo_deg": s.servo_deg, "latency_ms": s.latency_ms, "faults": s.faults.names()}


# ----- the rig emulator (firmware core compiled on the host) ----------------------------------

FIRMWARE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "firmware", "servo_rig")
_EMU_SOURCES = ("emulator.cpp", "rig_core.cpp", "rig_core.h")


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

    Attributes:
        device: the path to open (the pty, or ``link``).
        stats: after :meth:`stop`, the emulator's counters (``rx_frames``, ``rx_dropped``,
            ``rx_overruns``, ``stale_targets``, ``mode_changes``, ``tx_frames``, ``tx_lost``); empty before, or
            when it was killed.

    Raises:
        RigLinkError: the emulator did not start (its one-line reason).
    """

    def __init__(self, baud: int = 115200, *, link: str | None = None, exe: str | None = None,
                 control_hz: int = 1000, rx_buffer: int = 64, boot_id: int | None = None) -> None:
        import subprocess
        self.exe = exe or build_emulator()
        cmd = [self.exe, "--baud", str(int(baud)), "--control-hz", str(int(control_hz)),
               "--rx-buffer", str(int(rx_buffer)), "--quiet"]
        if link:
            cmd += ["--link", link]
        if boot_id is not None:
            cmd += ["--boot-id", str(int(boot_id))]
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
