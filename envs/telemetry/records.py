"""Down-sampled twin records for the remote store (``--publish mqtt://host:port/topic``).

The published IRB120 twin sent 10 Hz records to a cloud store beside its local log. A
:class:`TwinPublisher` takes every sample of the loop (it has the twin log's interface:
``write(sample)``, ``close()``) and puts one JSON record per ``1 / hz`` of sample time into an
:class:`~.mqtt.MqttStore`. A record's ``faults`` are those of every sample since the previous
record, so a fault shorter than the record period is never missed.

Record (JSON; NaN as null)::

    {"seq": 12, "stt": 600, "time": 1.2, "stamp": 1796470524.447, "joints": ["j1", "j2"],
     "virtual_deg": [..], "servo_deg": [..], "error_deg": [..], "latency_ms": 4.8, "faults": "OK"}

``time``: s since the start of the sync (or run time for ``armtwin run``); ``stamp``: wall clock,
s since the epoch, when the record was made; angles deg (mm for a prismatic joint), latency ms.
"""

from __future__ import annotations

import math
import time
from typing import Sequence

from ...controllers import rigproto as rp
from .mqtt import MqttReport, MqttStore

__all__ = ["TwinPublisher", "twin_record", "PUBLISH_HZ_DEFAULT", "PUBLISH_HZ_MAX"]

#: records per second by default (the published twin's cloud log)
PUBLISH_HZ_DEFAULT = 10.0
#: most records per second (a store, not a second full-rate log)
PUBLISH_HZ_MAX = 100.0


def _list(values) -> list:
    return [None if not math.isfinite(v) else round(float(v), 6) for v in values]


def twin_record(stt: int, time_s: float, labels: Sequence[str], virtual, servo, error, latency_ms: float,
                faults: str) -> dict:
    """One record as a JSON-able dict (NaN → None)."""
    return {"stt": int(stt), "time": round(float(time_s), 6), "stamp": round(time.time(), 6), "joints": list(labels),
            "virtual_deg": _list(virtual), "servo_deg": _list(servo), "error_deg": _list(error),
            "latency_ms": None if not math.isfinite(latency_ms) else round(float(latency_ms), 4), "faults": faults}


class TwinPublisher:
    """Every ``1 / hz`` s of sample time, one record of the newest sample to ``store``.

    Args:
        store: the MQTT store (closed by :meth:`close`).
        joints: 0-based robot joints of the samples (labels ``j1``, ``j2`` …).
        hz: records per second of sample time, (0, :data:`PUBLISH_HZ_MAX`].
    """

    def __init__(self, store: MqttStore, joints: Sequence[int], hz: float = PUBLISH_HZ_DEFAULT) -> None:
        if not (0 < hz <= PUBLISH_HZ_MAX):
            raise ValueError(f"publish rate must be in (0, {PUBLISH_HZ_MAX:g}] Hz, got {hz!r}")
        self.store, self.period = store, 1.0 / hz
        self.labels = [f"j{j + 1}" for j in joints]
        self._next = 0.0
        self._faults = rp.Fault.NONE
        self.records = 0
        self.report: MqttReport | None = None

    def write(self, s) -> None:
        """Take one :class:`armtwin.envs.rig.SyncSample`; publish it if a record is due."""
        self._faults |= s.faults
        if s.time + 1e-9 < self._next:
            return
        while self._next <= s.time + 1e-9:
            self._next += self.period
        self.store.put(twin_record(s.stt, s.time, self.labels, s.virtual_deg, s.servo_deg, s.error_deg, s.latency_ms,
                                   self._faults.names()))
        self._faults = rp.Fault.NONE
        self.records += 1

    def close(self, timeout: float = 5.0) -> MqttReport:
        """Flush (up to ``timeout`` s), disconnect, and return what became of the records (idempotent)."""
        if self.report is None:
            self.report = self.store.close(timeout)
        return self.report
