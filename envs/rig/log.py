"""The twin log: the sample type, the CSV writer and the checked reader.

* :class:`SyncSample` — one sample of the twin (ΔE, latency, faults; deg and ms);
* :class:`TwinLog` — writes samples as CSV at the full loop rate, flushed after every row;
* :func:`read_twin_log` — reads a log back, checking every value (``armtwin plot`` and
  ``armtwin replay`` use it).

This module opens no port and starts no thread: reading a log imports neither the serial link
nor the sync loop. Columns and units: docs/PROTOCOL.md, "The twin log".
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Sequence

import numpy as np

from ...controllers import rigproto as rp

if TYPE_CHECKING:
    from .link import RigState

__all__ = ["SyncSample", "SampleLog", "TeeLog", "TwinLog", "TwinLogData", "TwinLogError", "read_twin_log", "FAULT_NAMES",
           "LOG_MAX_JOINT_DEG", "LOG_MAX_LATENCY_MS", "LOG_MAX_STT", "LOG_MAX_TIME_S"]


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
        predicted_deg: what the virtual rig (``TwinSync(virtual_rig=…)``, the identified motors)
            says the rig reports now (k,), deg; None without one.
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
    predicted_deg: np.ndarray | None = None


class SampleLog(Protocol):
    """What the sync loop writes its samples to: the CSV :class:`TwinLog`, or the MCAP
    :class:`armtwin.envs.telemetry.twinlog.TwinMcapLog`."""

    def write(self, s: SyncSample) -> None: ...

    def close(self) -> None: ...


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
        # the virtual joints to 1e-7°: the target the rig was sent, round(virtual × 37.5) pulses, comes
        # back from the log (at 1e-4°, one target in a thousand came back a pulse off)
        f7 = lambda v: "nan" if not np.isfinite(v) else f"{v:.7f}"  # noqa: E731
        self._w.writerow([s.stt, f"{s.time:.6f}", *map(f3, s.error_deg), *map(f7, s.virtual_deg),
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
    """Read a :class:`TwinLog` CSV back, checking every value; a ``.mcap`` name is read as the
    MCAP twin log (:func:`armtwin.envs.telemetry.reader.read_twin_mcap`, the same columns).

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
    if path.lower().endswith(".mcap"):
        from ..telemetry.reader import read_twin_mcap
        return read_twin_mcap(path)
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


class TeeLog:
    """Several :class:`SampleLog` as one (the CSV or MCAP log and the remote store): every sample
    goes to each in turn; :meth:`close` closes them all, the first error raised after all closed."""

    def __init__(self, *logs: SampleLog) -> None:
        self.logs = [log for log in logs if log is not None]

    def write(self, s: SyncSample) -> None:
        for log in self.logs:
            log.write(s)

    def close(self) -> None:
        first: BaseException | None = None
        for log in self.logs:
            try:
                log.close()
            except Exception as exc:  # noqa: BLE001 - the others still close
                first = first or exc
        if first is not None:
            raise first
