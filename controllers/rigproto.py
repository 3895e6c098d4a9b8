"""The servo-rig wire protocol, version 2 (docs/PROTOCOL.md is the reference).

A frame on the wire is ``COBS(header ‖ body ‖ crc) ‖ 0x00``:

* header (8 bytes, little-endian): version u8 (=2), type u8, seq u16 (per sender, +1 per
  frame, wraps), t_us u32 (sender's microsecond clock, wraps after 71.6 min);
* body: fixed layout per message type (see the ``*_FMT`` constants);
* crc: CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, xorout 0; check
  value 0x29B1 for b"123456789") over header ‖ body, sent most significant byte first;
* COBS (consistent overhead byte stuffing) removes every 0x00, so 0x00 only ever
  delimits frames and a receiver resynchronises at the next 0x00 after any corruption.

:class:`StreamDecoder` turns a byte stream into messages, dropping and counting corrupt
frames. The same protocol is implemented in C++ in ``firmware/servo_rig/rig_core.cpp``;
the tests make both talk to each other.
"""

from __future__ import annotations

import enum
import re
import struct
from dataclasses import dataclass, field
from typing import Iterable, Union

__all__ = [
    "PROTOCOL_VERSION", "MsgType", "Mode", "Fault", "FAULT_NAMES", "HEADER_SIZE", "MAX_FRAME",
    "Hello", "ModeMsg", "JointTargets", "JointStates", "Heartbeat", "Power", "Message", "Frame",
    "crc16_ccitt_false", "cobs_encode", "cobs_decode", "encode_frame", "decode_frame",
    "ProtocolError", "StreamDecoder", "DecoderStats", "N_MOTORS", "wire_bytes",
]

PROTOCOL_VERSION = 2
N_MOTORS = 2
HEADER_FMT = "<BBHI"
HEADER_SIZE = struct.calcsize(HEADER_FMT)  # 8
CRC_SIZE = 2
MAX_FRAME = 64  # longest decoded frame accepted (header + body + crc), bytes


class MsgType(enum.IntEnum):
    """Message type byte."""

    HELLO = 0x01
    MODE = 0x02
    JOINT_TARGETS = 0x03
    JOINT_STATES = 0x04
    HEARTBEAT = 0x05
    POWER = 0x06


class Mode(enum.IntEnum):
    """Which side leads (MODE message)."""

    IDLE = 0
    VIRTUAL_TO_REAL = 1
    REAL_TO_VIRTUAL = 2


class Fault(enum.IntFlag):
    """Fault flags. Bits 0–7 travel in JOINT_STATES; bit 8+ are set by the host."""

    NONE = 0
    POWER = 0x01  # motor supply below threshold (supply sense) — motors unpowered
    WATCHDOG = 0x02  # no valid frame for 100 ms: the rig stopped its motors (latched until the next MODE)
    STALL = 0x04  # |PWM| high but the encoder did not move: that motor cut until the next MODE
    RANGE = 0x08  # a position did not fit in int16 and was saturated
    RX_ERROR = 0x10  # the rig dropped a corrupt frame since its previous state
    LINK = 0x100  # host: no state for longer than the link timeout, or the port is gone
    LATE = 0x200  # host: the sync loop stalled and skipped control ticks just before this sample

    def names(self) -> str:
        """``"POWER|STALL"`` style text; ``"OK"`` for no fault.

        A bit without a name (a newer firmware's fault, or line noise that passed the CRC) is
        written as its number, ``0x20``, one per bit, so nothing the rig reported is lost and
        :meth:`parse` gives the same flags back: ``Fault(0xE1).names()`` is
        ``"POWER|0x20|0x40|0x80"``.
        """
        if not self:
            return "OK"
        value = int(self)
        parts = [f.name for f in Fault if f and f in self and f.name]
        known = 0
        for f in Fault:
            known |= int(f)
        unknown = value & ~known
        parts += [f"0x{1 << b:02X}" for b in range(unknown.bit_length()) if unknown >> b & 1]
        return "|".join(parts)  # type: ignore[arg-type]

    @classmethod
    def parse(cls, text: str) -> "Fault":
        """Inverse of :meth:`names`: ``OK``, or names and single-bit numbers (``0x20``) joined by ``|``.

        Raises:
            ValueError: a part that is neither a fault name nor a single bit written as ``0x…``
                (at most 32 bits).
        """
        text = text.strip()
        if text in ("", "OK"):
            return cls.NONE
        out = cls.NONE
        for part in text.split("|"):
            if part in cls.__members__ and part != "NONE":
                out |= cls[part]
                continue
            m = _BIT_RE.fullmatch(part)
            v = int(m.group(1), 16) if m else 0
            if not (v and v & (v - 1) == 0 and v < 1 << 32):
                raise ValueError(f"{part!r} is not a fault name ({', '.join(FAULT_NAMES)}) or one bit as 0x…")
            out |= cls(v)
        return out


#: the named fault flags, in bit order
FAULT_NAMES = tuple(f.name for f in Fault if f and f.name)
_BIT_RE = re.compile(r"0[xX]([0-9A-Fa-f]{1,8})")


# ----- messages ----------------------------------------------------------------------

@dataclass(frozen=True)
class Hello:
    """HELLO: identification. The host sends one (role 0); the rig answers with its own (role 1).

    Attributes:
        role: 0 host, 1 rig.
        n_motors: motors on the rig.
        control_hz: rig's PID rate, Hz (0 from the host).
        pulses_per_deg_milli: encoder pulses per output degree × 1000 (37500 for the rig).
        firmware: firmware version, major·256 + minor.
        boot_id: the rig's id of its current boot (it differs from one boot to the next); 0 from
            the host. The rig sends a HELLO by itself when it boots, and a host that sees a new
            boot id knows the rig rebooted (its mode is IDLE again).
    """

    role: int = 0
    n_motors: int = N_MOTORS
    control_hz: int = 0
    pulses_per_deg_milli: int = 37500
    firmware: int = 0
    boot_id: int = 0
    TYPE = MsgType.HELLO
    FMT = "<BBHIHH"

    def pack(self) -> bytes:
        return struct.pack(self.FMT, self.role, self.n_motors, self.control_hz, self.pulses_per_deg_milli, self.firmware,
                           self.boot_id)


@dataclass(frozen=True)
class ModeMsg:
    """MODE: select the lead direction. The rig echoes the MODE it accepted.

    Attributes:
        mode: IDLE, VIRTUAL_TO_REAL or REAL_TO_VIRTUAL.
        stream_hz: in REAL_TO_VIRTUAL the rig streams JOINT_STATES at this rate, Hz.
        flags: bit 0 LOCAL_DEMO: in REAL_TO_VIRTUAL the rig moves its motors along a built-in
            slow sine (else the motors are released so they can be turned by hand). Bit 1 TIMED
            (firmware >= 2.1): in VIRTUAL_TO_REAL each JOINT_TARGETS' time field is the time on the
            rig's clock at which it applies; the rig holds it until then and extrapolates it from
            then, so the link's jitter does not reach the motion.
    """

    mode: Mode = Mode.IDLE
    stream_hz: int = 500
    flags: int = 0
    TYPE = MsgType.MODE
    FMT = "<BHB"
    LOCAL_DEMO = 0x01
    TIMED = 0x02
    #: the first firmware (major · 256 + minor, from HELLO) that honours TIMED
    TIMED_FIRMWARE = 0x0201

    def pack(self) -> bytes:
        return struct.pack(self.FMT, int(self.mode), self.stream_hz, self.flags)


@dataclass(frozen=True)
class JointTargets:
    """JOINT_TARGETS: target positions, encoder pulses (int16 each: ±873.8°)."""

    targets: tuple[int, int] = (0, 0)
    TYPE = MsgType.JOINT_TARGETS
    FMT = "<hh"

    def pack(self) -> bytes:
        return struct.pack(self.FMT, *self.targets)


@dataclass(frozen=True)
class JointStates:
    """JOINT_STATES: the rig's measured state.

    Attributes:
        echo: low byte of the seq of the last valid frame the rig received (latency matching).
        faults: :class:`Fault` bits 0–7.
        positions: encoder pulses (int16 each, saturated; Fault.RANGE when saturated).
        pwm: applied PWM duty, −255…255.
    """

    echo: int = 0
    faults: int = 0
    positions: tuple[int, int] = (0, 0)
    pwm: tuple[int, int] = (0, 0)
    TYPE = MsgType.JOINT_STATES
    FMT = "<BBhhhh"

    def pack(self) -> bytes:
        return struct.pack(self.FMT, self.echo, self.faults, *self.positions, *self.pwm)


@dataclass(frozen=True)
class Heartbeat:
    """HEARTBEAT: keeps the rig's 100 ms watchdog fed when nothing else is sent. Empty body."""

    TYPE = MsgType.HEARTBEAT
    FMT = "<"

    def pack(self) -> bytes:
        return b""


@dataclass(frozen=True)
class Power:
    """POWER: emulator command — cut (0) or restore (1) the simulated motor supply.

    Real firmware with a supply relay on pin ``RELAY_PIN`` obeys it too; without one it ignores it.
    """

    on: int = 1
    TYPE = MsgType.POWER
    FMT = "<B"

    def pack(self) -> bytes:
        return struct.pack(self.FMT, self.on)


Message = Union[Hello, ModeMsg, JointTargets, JointStates, Heartbeat, Power]
_BY_TYPE = {c.TYPE: c for c in (Hello, ModeMsg, JointTargets, JointStates, Heartbeat, Power)}


def _from_body(mtype: MsgType, body: bytes) -> Message:
    cls = _BY_TYPE[mtype]
    vals = struct.unpack(cls.FMT, body)
    if cls is Hello:
        return Hello(*vals)
    if cls is ModeMsg:
        return ModeMsg(Mode(vals[0]), vals[1], vals[2])
    if cls is JointTargets:
        return JointTargets(tuple(vals))  # type: ignore[arg-type]
    if cls is JointStates:
        return JointStates(vals[0], vals[1], (vals[2], vals[3]), (vals[4], vals[5]))
    if cls is Heartbeat:
        return Heartbeat()
    return Power(vals[0])


@dataclass(frozen=True)
class Frame:
    """A decoded frame: header fields plus the message."""

    seq: int  # u16
    t_us: int  # u32, sender's clock
    msg: Message
    version: int = PROTOCOL_VERSION


# ----- CRC and COBS ------------------------------------------------------------------

def _crc_table() -> tuple[int, ...]:
    table = []
    for i in range(256):
        c = i << 8
        for _ in range(8):
            c = ((c << 1) ^ 0x1021) if c & 0x8000 else (c << 1)
        table.append(c & 0xFFFF)
    return tuple(table)


_CRC_TABLE = _crc_table()


def crc16_ccitt_false(data: bytes, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE of ``data`` (poly 0x1021, init 0xFFFF, MSB first, no xorout)."""
    t = _CRC_TABLE
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ t[((crc >> 8) ^ b) & 0xFF]
    return crc


def cobs_encode(data: bytes) -> bytes:
    """COBS-encode ``data`` (the result contains no 0x00; the delimiter is not added)."""
    out = bytearray([0])
    code_i, code = 0, 1
    for b in data:
        if b == 0:
            out[code_i] = code
            code_i, code = len(out), 1
            out.append(0)
        else:
            out.append(b)
            code += 1
            if code == 0xFF:
                out[code_i] = code
                code_i, code = len(out), 1
                out.append(0)
    out[code_i] = code
    return bytes(out)


class ProtocolError(ValueError):
    """A frame that cannot be decoded; ``kind`` names why (cobs, crc, version, type, length)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def cobs_decode(data: bytes) -> bytes:
    """Inverse of :func:`cobs_encode` (without the delimiter).

    Raises:
        ProtocolError: kind "cobs" for a zero byte or a code running past the end.
    """
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        code = data[i]
        if code == 0:
            raise ProtocolError("cobs", "zero byte inside a COBS frame")
        end = i + code
        if end > n:
            raise ProtocolError("cobs", "COBS code runs past the end of the frame")
        chunk = data[i + 1:end]
        if 0 in chunk:
            raise ProtocolError("cobs", "zero byte inside a COBS frame")
        out += chunk
        i = end
        if code != 0xFF and i < n:
            out.append(0)
    return bytes(out)


def encode_frame(msg: Message, seq: int, t_us: int, *, version: int = PROTOCOL_VERSION) -> bytes:
    """The wire bytes of one frame, delimiter included."""
    raw = struct.pack(HEADER_FMT, version & 0xFF, int(msg.TYPE), seq & 0xFFFF, t_us & 0xFFFFFFFF) + msg.pack()
    crc = crc16_ccitt_false(raw)
    return cobs_encode(raw + bytes(((crc >> 8) & 0xFF, crc & 0xFF))) + b"\x00"


def decode_frame(encoded: bytes) -> Frame:
    """Decode one frame (COBS bytes without the 0x00 delimiter).

    Raises:
        ProtocolError: corrupt frame; ``kind`` tells why.
    """
    raw = cobs_decode(encoded)
    if len(raw) < HEADER_SIZE + CRC_SIZE:
        raise ProtocolError("length", f"frame of {len(raw)} bytes is shorter than header + CRC")
    if len(raw) > MAX_FRAME:
        raise ProtocolError("length", f"frame of {len(raw)} bytes is longer than {MAX_FRAME}")
    crc = (raw[-2] << 8) | raw[-1]
    if crc16_ccitt_false(raw[:-2]) != crc:
        raise ProtocolError("crc", "CRC mismatch")
    version, mtype, seq, t_us = struct.unpack_from(HEADER_FMT, raw)
    if version != PROTOCOL_VERSION:
        raise ProtocolError("version", f"protocol version {version}, expected {PROTOCOL_VERSION}")
    try:
        mt = MsgType(mtype)
    except ValueError:
        raise ProtocolError("type", f"unknown message type 0x{mtype:02x}") from None
    body = raw[HEADER_SIZE:-2]
    cls = _BY_TYPE[mt]
    if len(body) != struct.calcsize(cls.FMT):
        raise ProtocolError("length", f"{mt.name} body of {len(body)} bytes, expected {struct.calcsize(cls.FMT)}")
    try:
        msg = _from_body(mt, body)
    except ValueError as exc:  # e.g. an unknown Mode value
        raise ProtocolError("type", f"{mt.name}: {exc}") from None
    return Frame(seq, t_us, msg, version)


def wire_bytes(msg_type: MsgType) -> int:
    """Bytes on the wire for one frame of ``msg_type`` (COBS overhead and delimiter included)."""
    n = HEADER_SIZE + struct.calcsize(_BY_TYPE[msg_type].FMT) + CRC_SIZE
    return n + 1 + n // 254 + 1


# ----- streaming ---------------------------------------------------------------------

@dataclass
class DecoderStats:
    """Counters of a :class:`StreamDecoder`."""

    frames: int = 0  # good frames
    dropped: int = 0  # corrupt frames dropped (sum of the kinds below)
    by_kind: dict = field(default_factory=dict)  # kind -> count
    bytes: int = 0  # bytes fed


class StreamDecoder:
    """Incremental decoder: feed bytes, get frames; corrupt frames are dropped and counted.

    A frame ends at each 0x00. Anything that does not decode (partial frame at start-up,
    garbage, bit flips, over-long runs without a delimiter) is dropped and counted by kind,
    and decoding resumes with the byte after the next 0x00.
    """

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self.max_encoded = max_frame + 2 + max_frame // 254
        self._buf = bytearray()
        self._overflow = False
        self.stats = DecoderStats()

    def reset(self) -> None:
        """Forget a partly received frame (e.g. after reconnecting); the counters stay."""
        self._buf.clear()
        self._overflow = False

    def _drop(self, kind: str) -> None:
        self.stats.dropped += 1
        self.stats.by_kind[kind] = self.stats.by_kind.get(kind, 0) + 1

    def feed(self, data: Iterable[int] | bytes) -> list[Frame]:
        """Consume ``data`` and return the frames completed by it (oldest first)."""
        data = bytes(data)
        self.stats.bytes += len(data)
        out: list[Frame] = []
        start = 0
        while True:
            z = data.find(0, start)
            if z < 0:
                chunk = data[start:]
                if not self._overflow:
                    self._buf += chunk
                    if len(self._buf) > self.max_encoded:
                        self._overflow = True
                        self._buf.clear()
                break
            chunk = data[start:z]
            start = z + 1
            if self._overflow:
                self._overflow = False
                self._buf.clear()
                self._drop("overflow")
                continue
            self._buf += chunk
            if len(self._buf) > self.max_encoded:
                self._buf.clear()
                self._drop("overflow")
                continue
            if not self._buf:
                continue  # empty frame: a bare delimiter (used to flush a line)
            enc = bytes(self._buf)
            self._buf.clear()
            try:
                out.append(decode_frame(enc))
                self.stats.frames += 1
            except ProtocolError as exc:
                self._drop(exc.kind)
        return out
