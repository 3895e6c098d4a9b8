"""Reading armtwin's MCAP logs back: the twin log's ``/twin/sample`` as the CSV reader gives it.

:func:`read_twin_mcap` returns the same :class:`armtwin.envs.rig.TwinLogData` as
:func:`armtwin.envs.rig.read_twin_log` (columns ``STT, Time, Error_j…, Virtual_j…, Servo_j…,
Latency_ms, Fault``), so ``armtwin plot``, ``replay`` and ``fit`` read either. The messages are
decoded by ``mcap-ros2-support``'s decoder (from the schema stored in the file), not by
armtwin's encoder run backwards. The file is read as a stream, so a log whose writer was killed
(no summary) still reads up to its last complete chunk.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

import numpy as np

from ..rig.log import (LOG_MAX_JOINT_DEG, LOG_MAX_LATENCY_MS, LOG_MAX_TIME_S, TwinLogData, TwinLogError)
from .topics import COMMANDED, JOINT_STATES, ROBOT_DESCRIPTION, TWIN_SAMPLE_TOPIC

__all__ = ["read_twin_mcap", "iter_messages", "read_joint_runs", "JointRuns", "JointRun"]


def iter_messages(path: str | os.PathLike, topics=None):
    """(topic, log_time_ns, decoded message) of every message on ``topics`` (all when None), in
    file order; stops quietly at a cut-off end (a writer killed mid-chunk).

    Raises:
        OSError: the file cannot be read.
        TwinLogError: not an MCAP file.
    """
    from mcap.exceptions import EndOfFile, McapError
    from mcap.reader import NonSeekingReader
    from mcap_ros2.decoder import DecoderFactory
    where = os.fspath(path)
    with open(path, "rb") as fh:
        try:
            reader = NonSeekingReader(fh, decoder_factories=[DecoderFactory()])
            it = reader.iter_decoded_messages(topics=topics, log_time_order=False)  # file order: streams a cut file
            while True:
                try:
                    schema, channel, message, decoded = next(it)
                except StopIteration:
                    return
                except (EndOfFile, EOFError, struct.error):  # a cut-off last chunk or record: the writer was killed
                    return
                yield channel.topic, message.log_time, decoded
        except McapError as exc:
            raise TwinLogError(f"{where}: not a readable MCAP file ({exc})") from None
        except ValueError as exc:
            raise TwinLogError(f"{where}: not an MCAP file ({exc})") from None


def read_twin_mcap(path: str | os.PathLike) -> TwinLogData:
    """The ``/twin/sample`` messages of an MCAP twin log as :class:`TwinLogData`, checked.

    ``lines`` are the 1-based numbers of the messages on ``/twin/sample``. Checked: the joints are
    the same in every message; STT counts up by 1 (no sample lost); time never goes back and
    lies in 0..:data:`LOG_MAX_TIME_S`; virtual joints finite and within ±:data:`LOG_MAX_JOINT_DEG`.

    Raises:
        OSError: the file cannot be read.
        TwinLogError: not an MCAP file, no ``/twin/sample`` (a run log, say), or a bad value.
    """
    where = os.fspath(path)
    rows = []
    labels: list[str] | None = None
    for _topic, _ns, m in iter_messages(path, [TWIN_SAMPLE_TOPIC]):
        if labels is None:
            labels = list(m.joints)
        elif list(m.joints) != labels:
            raise TwinLogError(f"{where}: message {len(rows) + 1} on {TWIN_SAMPLE_TOPIC}: joints {list(m.joints)}, "
                               f"the first message has {labels}")
        rows.append(m)
    if labels is None:
        raise TwinLogError(f"{where}: not a twin log: no {TWIN_SAMPLE_TOPIC} messages (a log of `armtwin run` or `compare`? "
                           f"open it in Foxglove; docs/TELEMETRY.md)")
    k = len(labels)
    if not k or any(len(m.virtual_deg) != k or len(m.servo_deg) != k or len(m.error_deg) != k for m in rows):
        raise TwinLogError(f"{where}: {TWIN_SAMPLE_TOPIC}: every message must carry one value per joint")
    out = TwinLogData(where, labels, np.arange(1, len(rows) + 1, dtype=np.int64))

    def bad(i: int, col: str, why: str) -> TwinLogError:
        return TwinLogError(f"{where}: message {i + 1} on {TWIN_SAMPLE_TOPIC}, {col}: {why}")

    stt = np.array([m.stt for m in rows], dtype=np.int64)
    gaps = np.flatnonzero(np.diff(stt) != 1)
    if gaps.size:
        i = int(gaps[0]) + 1
        raise bad(i, "stt", f"{stt[i]} after {stt[i - 1]} (the sample numbers count up by 1; samples lost)")
    t = np.array([m.time for m in rows], dtype=float)
    for i, v in enumerate(t):
        if not (0 <= v <= LOG_MAX_TIME_S) or (i and v < t[i - 1]):
            raise bad(i, "time", f"{v:g} s is not a time after the previous sample's")
    out["STT"], out["Time"] = stt, t
    cols = {g: np.array([getattr(m, f"{g.lower()}_deg") for m in rows], dtype=float).reshape(len(rows), k)
            for g in ("Error", "Virtual", "Servo")}
    v = cols["Virtual"]
    wrong = np.argwhere(~(np.abs(v) <= LOG_MAX_JOINT_DEG))
    if wrong.size:
        i, j = (int(x) for x in wrong[0])
        raise bad(i, f"virtual_deg[{j}]", f"{v[i, j]} is not a joint angle (finite, within ±{LOG_MAX_JOINT_DEG:g}°)")
    for g in ("Error", "Virtual", "Servo"):
        for j, lab in enumerate(labels):
            out[f"{g}_{lab}"] = cols[g][:, j]
    lat = np.array([m.latency_ms for m in rows], dtype=float)
    wrong = np.flatnonzero(~np.isnan(lat) & ~((lat >= 0) & (lat <= LOG_MAX_LATENCY_MS)))
    if wrong.size:
        raise bad(int(wrong[0]), "latency_ms", f"{lat[wrong[0]]} is not a latency in 0..{LOG_MAX_LATENCY_MS:g} ms")
    out["Latency_ms"] = lat
    out["Fault"] = [m.fault_names or "OK" for m in rows]
    return out




@dataclass
class JointRun:
    """One robot's joints over a log: ``t`` (N,) s from the log's first joint message, ``q`` and
    ``q_ref`` (N, n) (rad / m), the commanded joints matched to ``q`` by stamp (NaN where none)."""
    t: np.ndarray
    q: np.ndarray
    q_ref: np.ndarray


@dataclass
class JointRuns:
    """The joint runs of an MCAP log of ``run``, ``compare`` or ``ui --live`` (:func:`read_joint_runs`)."""
    path: str
    names: list[str]
    prismatic: list[bool]                           # per joint: True for a prismatic joint (m), else rad
    runs: dict[str, JointRun] = field(default_factory=dict)   # "" for a run log's unprefixed topics
    twin: bool = False                              # the file has /twin/sample: a twin log (read_twin_mcap)


def _prismatic(urdf: str, names: list[str]) -> list[bool]:
    """Per joint name: declared prismatic in the URDF text (False when the URDF does not say)."""
    import xml.etree.ElementTree as ET
    try:
        kinds = {j.get("name"): j.get("type") for j in ET.fromstring(urdf).iter("joint")}
    except ET.ParseError:
        kinds = {}
    return [kinds.get(n) == "prismatic" for n in names]


def read_joint_runs(path: str | os.PathLike) -> JointRuns:
    """Every ``[/<model>]/joint_states`` of an MCAP log with its ``…/joint_states/commanded``.

    A run log has one run (key ``""``), a compare log one per joint model (``"kinematic"``, …).
    Stops at the first ``/twin/sample`` message and returns ``twin=True`` (read that log with
    :func:`read_twin_mcap`). Times are seconds from the first joint message of the file, so the
    models of a compare log share one axis.

    Raises:
        OSError: the file cannot be read.
        TwinLogError: not an MCAP file, no joint states, or joint names that differ between messages.
    """
    where = os.fspath(path)
    measured: dict[str, list] = {}
    commanded: dict[str, dict[int, list]] = {}
    names: list[str] | None = None
    urdf = ""
    for topic, ns, m in iter_messages(path):
        if topic == TWIN_SAMPLE_TOPIC:
            return JointRuns(where, [], [], twin=True)
        if topic == ROBOT_DESCRIPTION:
            urdf = str(m.data)
            continue
        if topic.endswith(COMMANDED):
            model, into = topic[:-len(COMMANDED)], None
        elif topic.endswith(JOINT_STATES):
            model, into = topic[:-len(JOINT_STATES)], measured
        else:
            continue
        if model.count("/") > 1 or (model and not model.startswith("/")):
            continue                                    # another tool's topic that happens to end alike
        got = list(m.name)
        if names is None:
            names = got
        elif got != names or len(m.position) != len(names):
            raise TwinLogError(f"{where}: {topic} at {ns} ns: joints {got}, the first joint message has {names}")
        stamp = int(m.header.stamp.sec) * 1_000_000_000 + int(m.header.stamp.nanosec)
        if into is None:
            commanded.setdefault(model.lstrip("/"), {})[stamp] = list(m.position)
        else:
            into.setdefault(model.lstrip("/"), []).append((stamp, list(m.position)))
    if names is None or not measured:
        raise TwinLogError(f"{where}: no {JOINT_STATES} messages: not a log of `armtwin run`, `compare` or `sync`")
    t0 = min(rows[0][0] for rows in measured.values())
    out = JointRuns(where, names, _prismatic(urdf, names))
    nan = [float("nan")] * len(names)
    for model, rows in measured.items():
        ref = commanded.get(model, {})
        out.runs[model] = JointRun(np.array([(s - t0) * 1e-9 for s, _ in rows]),
                                   np.array([q for _, q in rows], dtype=float).reshape(len(rows), len(names)),
                                   np.array([ref.get(s, nan) for s, _ in rows], dtype=float).reshape(len(rows), len(names)))
    return out
