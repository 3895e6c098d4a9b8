"""The remote store: JSON records to an MQTT broker with QoS 1, through a bounded local queue.

Why a queue of our own in front of paho-mqtt's: a twin must go on while the broker or the network
is down, memory must stay bounded however long that lasts, and a person must be told which
records never reached the store. :class:`MqttStore` keeps records in a deque of at most
``max_queue``; when it is full the *oldest* record is dropped and counted (a store that has a
gap is told exactly which sequence numbers are missing, :attr:`MqttStore.dropped_ranges`).

Delivery: paho-mqtt's network thread (``loop_start``) connects and reconnects by itself; this
module's sender thread hands records to it only while connected, at most ``inflight`` of them
unacknowledged at a time, and forgets a record only at its PUBACK. After a reconnection paho
first re-sends the records it had in flight; new records wait until those are acknowledged, so
the broker sees every record in order. QoS 1 is at-least-once: a broker that received a record
but died before acknowledging it gets it again — every record carries ``seq`` (0, 1, 2, …) so a
store can drop such repeats.
"""

from __future__ import annotations

import collections
import json
import math
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field

__all__ = ["MqttTarget", "MqttStore", "MqttReport", "parse_mqtt_url"]


@dataclass(frozen=True)
class MqttTarget:
    """Where records go: ``mqtt://host:port/topic``."""

    host: str
    port: int
    topic: str

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}/{self.topic}"


def parse_mqtt_url(url: str) -> MqttTarget:
    """``mqtt://host[:port]/topic/levels`` → :class:`MqttTarget` (port 1883 by default).

    Raises:
        ValueError: not an ``mqtt://`` URL with a host and a topic, a bad port, or wildcards
            (``+``, ``#``) in the topic.
    """
    u = urllib.parse.urlsplit(url.strip())
    if u.scheme != "mqtt":
        raise ValueError(f"{url!r}: expected mqtt://host:port/topic")
    try:
        port = u.port or 1883
    except ValueError:
        raise ValueError(f"{url!r}: the port must be a number in 1..65535") from None
    topic = urllib.parse.unquote(u.path.lstrip("/"))
    if not u.hostname:
        raise ValueError(f"{url!r}: no broker host (expected mqtt://host:port/topic)")
    if not topic:
        raise ValueError(f"{url!r}: no topic (expected mqtt://host:port/topic)")
    if any(c in topic for c in "+#\0") or "#" in url or "?" in url:
        raise ValueError(f"{url!r}: a topic to publish to has no wildcards (+, #), query or fragment")
    return MqttTarget(u.hostname, port, topic)


@dataclass
class MqttReport:
    """What became of the records.

    Attributes:
        queued: records given to :meth:`MqttStore.put`.
        acked: records the broker acknowledged (PUBACK).
        dropped: records dropped because the queue was full (the oldest first).
        dropped_ranges: their ``seq`` numbers, as (first, last) ranges.
        unsent: records still queued or unacknowledged when the store closed (lost).
        reconnects: connections after the first.
        latency_ms: put → PUBACK of every acknowledged record, ms.
    """

    queued: int = 0
    acked: int = 0
    dropped: int = 0
    dropped_ranges: list = field(default_factory=list)
    unsent: int = 0
    reconnects: int = 0
    latency_ms: list = field(default_factory=list)

    def latency_p50_ms(self) -> float:
        v = sorted(self.latency_ms)
        return v[len(v) // 2] if v else math.nan

    def describe(self) -> str:
        """One line for people."""
        out = (f"{self.acked} of {self.queued} records acknowledged, {self.dropped} dropped (queue full)"
               f", {self.unsent} unsent at the end, {self.reconnects} reconnects")
        if self.dropped_ranges:
            out += "; dropped seq " + ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in self.dropped_ranges[:5])
            out += " …" if len(self.dropped_ranges) > 5 else ""
        return out


class MqttStore:
    """JSON records to ``target`` with QoS 1 through a bounded queue (see the module docstring).

    Args:
        target: broker and topic.
        max_queue: records kept while the broker cannot take them (the oldest are dropped beyond).
        inflight: records handed to the broker and not yet acknowledged, at most.
        client_id: the MQTT client id (default: ``armtwin-`` and a random suffix).
        reconnect_s: (first, longest) wait between reconnection attempts, s.
    """

    def __init__(self, target: MqttTarget, *, max_queue: int = 10_000, inflight: int = 20, client_id: str | None = None,
                 reconnect_s: tuple[int, int] = (1, 2)) -> None:
        import paho.mqtt.client as mqtt
        if max_queue < 1 or inflight < 1:
            raise ValueError("max_queue and inflight must be >= 1")
        self.target = target
        self.report = MqttReport()
        self._q: collections.deque = collections.deque()
        self._max_queue = max_queue
        self._inflight_max = inflight
        self._unacked: dict[int, tuple[int, float]] = {}   # mid -> (seq, put time)
        self._sending = 0                                   # records being handed to paho right now
        self._early: set[int] = set()                       # mids acknowledged before publish() returned
        self._cv = threading.Condition()
        self._connected = False
        self._drain_first = False      # after a reconnection: paho re-sends its in-flight records first
        self._connections = 0
        self._closing = False
        self._seq = 0
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id or f"armtwin-{uuid.uuid4().hex[:10]}",
                        protocol=mqtt.MQTTv311, clean_session=True)
        c.max_inflight_messages_set(inflight)
        c.max_queued_messages_set(0)   # unbounded inside paho: it never holds more than `inflight` of ours
        c.reconnect_delay_set(*reconnect_s)
        c.on_connect = self._on_connect
        c.on_disconnect = self._on_disconnect
        c.on_publish = self._on_publish
        self._client = c
        c.connect_async(target.host, target.port, keepalive=10)
        c.loop_start()
        self._sender = threading.Thread(target=self._send_loop, name="MqttStore", daemon=True)
        self._sender.start()

    # ----- the producer's side ----------------------------------------------------------------------
    def put(self, record: dict) -> int:
        """Queue ``record`` (a JSON-able dict; ``seq`` is added) and return its ``seq``; never blocks."""
        with self._cv:
            seq = self._seq
            self._seq += 1
            payload = json.dumps({"seq": seq, **record}, allow_nan=False, separators=(",", ":"))
            if len(self._q) >= self._max_queue:
                old, _, _ = self._q.popleft()
                self.report.dropped += 1
                r = self.report.dropped_ranges
                if r and r[-1][1] == old - 1:
                    r[-1] = (r[-1][0], old)
                else:
                    r.append((old, old))
            self._q.append((seq, payload, time.monotonic()))
            self.report.queued += 1
            self._cv.notify_all()
        return seq

    @property
    def connected(self) -> bool:
        return self._connected

    @property
    def pending(self) -> int:
        """Records queued or in flight."""
        with self._cv:
            return len(self._q) + len(self._unacked)

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for every record to be acknowledged; True if they were."""
        end = time.monotonic() + timeout
        with self._cv:
            while self._q or self._unacked or self._sending:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(min(left, 0.1))
        return True

    def close(self, timeout: float = 5.0) -> MqttReport:
        """Flush for up to ``timeout`` s, disconnect, and return the report (idempotent)."""
        if not self._closing:
            self.flush(timeout)
            with self._cv:
                self._closing = True
                self.report.unsent = len(self._q) + len(self._unacked)
                self._cv.notify_all()
            self._sender.join(2.0)
            self._client.disconnect()
            self._client.loop_stop()
        return self.report

    # ----- paho's network thread --------------------------------------------------------------------
    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            return
        with self._cv:
            self._connections += 1
            self.report.reconnects = self._connections - 1
            self._connected = True
            self._drain_first = bool(self._unacked)
            self._cv.notify_all()

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        with self._cv:
            self._connected = False
            self._cv.notify_all()

    def _on_publish(self, client, userdata, mid, reason_code, properties) -> None:
        with self._cv:
            got = self._unacked.pop(mid, None)
            if got is not None:
                self._acked(got[1])
            elif self._sending:
                self._early.add(mid)
            if not self._unacked:
                self._drain_first = False
            self._cv.notify_all()

    def _acked(self, t_put: float) -> None:
        self.report.acked += 1
        self.report.latency_ms.append((time.monotonic() - t_put) * 1e3)

    # ----- the sender thread ------------------------------------------------------------------------
    def _send_loop(self) -> None:
        while True:
            with self._cv:
                while not self._closing and not (self._connected and self._q and not self._drain_first
                                                 and len(self._unacked) + self._sending < self._inflight_max):
                    self._cv.wait(0.5)
                if self._closing:
                    return
                seq, payload, t_put = self._q.popleft()
                self._sending += 1
            # outside the lock: paho calls on_publish holding its own locks, which publish() takes too.
            # paho keeps a QoS 1 message it could not write and re-sends it on reconnection.
            info = self._client.publish(self.target.topic, payload, qos=1)
            with self._cv:
                self._sending -= 1
                if info.mid in self._early:    # acknowledged before we got here
                    self._early.discard(info.mid)
                    self._acked(t_put)
                else:
                    self._unacked[info.mid] = (seq, t_put)
                self._cv.notify_all()
