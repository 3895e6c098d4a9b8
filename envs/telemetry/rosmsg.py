"""ROS 2 messages for telemetry: their definitions (``ros2msg`` text, as rosbag2 stores them in
MCAP) and fast CDR encoders for the few types armtwin writes.

Why our own encoders: the control loops log at 250-500 Hz, and the generic (dynamic) encoder of
``mcap-ros2-support`` walks the schema field by field in Python for every message. These types
are fixed, so each encoder is a handful of ``struct`` packs (a JointState of 6 joints is a few
µs). The tests decode every message with ``mcap-ros2-support``'s own decoder, so a mistake in
the byte layout cannot pass unnoticed.

Encoding: CDR little-endian (the 4-byte encapsulation header ``00 01 00 00``), primitives
aligned to their size counted from the end of that header, strings as uint32 length (with the
terminating NUL) + bytes + NUL, sequences as uint32 count + elements.

Units are ROS's: SI (rad, m, s, N·m), except :data:`TWIN_SAMPLE` which carries the twin log's
columns as the CSV has them (deg, ms).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["MessageType", "JOINT_STATE", "TF_MESSAGE", "POSE_STAMPED", "STRING", "PATH", "LOG", "TWIN_SAMPLE",
           "LogLevel", "encode_joint_state", "encode_tf", "encode_pose_stamped", "encode_path", "encode_string", "encode_log",
           "encode_twin_sample", "Transform", "FixedLayout", "JointStateLayout", "TFLayout", "TwinSampleLayout"]

_SEP = "=" * 80 + "\n"


@dataclass(frozen=True)
class MessageType:
    """A ROS 2 message type: its name (``sensor_msgs/msg/JointState``) and the full ``ros2msg``
    definition, dependencies included after ``MSG:`` separators (rosbag2's MCAP form)."""

    name: str
    definition: str


def _deps(main: str, *deps: tuple[str, str]) -> str:
    return main + "".join(f"{_SEP}MSG: {name}\n{text}" for name, text in deps)


_TIME = ("builtin_interfaces/Time", "int32 sec\nuint32 nanosec\n")
_HEADER = ("std_msgs/Header", "builtin_interfaces/Time stamp\nstring frame_id\n")
_VECTOR3 = ("geometry_msgs/Vector3", "float64 x\nfloat64 y\nfloat64 z\n")
_POINT = ("geometry_msgs/Point", "float64 x\nfloat64 y\nfloat64 z\n")
_QUAT = ("geometry_msgs/Quaternion", "float64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1\n")
_TRANSFORM = ("geometry_msgs/Transform", "Vector3 translation\nQuaternion rotation\n")
_TSTAMPED = ("geometry_msgs/TransformStamped", "std_msgs/Header header\nstring child_frame_id\nTransform transform\n")
_POSE = ("geometry_msgs/Pose", "Point position\nQuaternion orientation\n")

JOINT_STATE = MessageType("sensor_msgs/msg/JointState", _deps(
    "std_msgs/Header header\nstring[] name\nfloat64[] position\nfloat64[] velocity\nfloat64[] effort\n",
    _HEADER, _TIME))
TF_MESSAGE = MessageType("tf2_msgs/msg/TFMessage", _deps(
    "geometry_msgs/TransformStamped[] transforms\n", _TSTAMPED, _HEADER, _TIME, _TRANSFORM, _VECTOR3, _QUAT))
POSE_STAMPED = MessageType("geometry_msgs/msg/PoseStamped", _deps(
    "std_msgs/Header header\nPose pose\n", _HEADER, _TIME, _POSE, _POINT, _QUAT))
STRING = MessageType("std_msgs/msg/String", "string data\n")
PATH = MessageType("nav_msgs/msg/Path", _deps(
    "std_msgs/Header header\ngeometry_msgs/PoseStamped[] poses\n", _HEADER, _TIME,
    ("geometry_msgs/PoseStamped", "std_msgs/Header header\nPose pose\n"), _POSE, _POINT, _QUAT))
LOG = MessageType("rcl_interfaces/msg/Log", _deps(
    "byte DEBUG=10\nbyte INFO=20\nbyte WARN=30\nbyte ERROR=40\nbyte FATAL=50\n"
    "builtin_interfaces/Time stamp\nuint8 level\nstring name\nstring msg\nstring file\nstring function\n"
    "uint32 line\n", _TIME))
#: one sample of the twin, exactly the twin log's row (:class:`armtwin.envs.rig.SyncSample`)
TWIN_SAMPLE = MessageType("armtwin_msgs/msg/TwinSample", _deps(
    "# one sample of the armtwin twin (a row of the CSV twin log); angles deg, latency ms\n"
    "builtin_interfaces/Time stamp\n"
    "uint64 stt\n"
    "float64 time\n"
    "string[] joints\n"
    "float64[] virtual_deg\n"
    "float64[] servo_deg\n"
    "float64[] error_deg\n"
    "float64 latency_ms\n"
    "uint32 faults\n"
    "string fault_names\n", _TIME))


class LogLevel:
    """rcl_interfaces/Log levels."""

    DEBUG, INFO, WARN, ERROR, FATAL = 10, 20, 30, 40, 50


@dataclass(frozen=True)
class Transform:
    """One TF edge: ``child`` in ``parent``, translation m (3,), quaternion (x, y, z, w)."""

    parent: str
    child: str
    translation: Sequence[float]
    rotation: Sequence[float]


class _Cdr:
    """A little-endian CDR buffer; offsets count from after the encapsulation header."""

    __slots__ = ("b",)

    def __init__(self) -> None:
        self.b = bytearray(b"\x00\x01\x00\x00")

    def _align(self, n: int) -> None:
        pad = -(len(self.b) - 4) % n
        if pad:
            self.b += b"\x00" * pad

    def u8(self, v: int) -> None:
        self.b.append(v & 0xFF)

    def u32(self, v: int) -> None:
        self._align(4)
        self.b += struct.pack("<I", v)

    def u64(self, v: int) -> None:
        self._align(8)
        self.b += struct.pack("<Q", v)

    def time(self, ns: int) -> None:
        self._align(4)
        sec, nsec = divmod(int(ns), 1_000_000_000)
        self.b += struct.pack("<iI", sec, nsec)

    def string(self, s: str) -> None:
        data = s.encode()
        self.u32(len(data) + 1)
        self.b += data
        self.b.append(0)

    def strings(self, items: Sequence[str]) -> None:
        self.u32(len(items))
        for s in items:
            self.string(s)

    def f64(self, *vs: float) -> None:
        self._align(8)
        self.b += struct.pack(f"<{len(vs)}d", *vs)

    def f64s(self, a) -> None:
        arr = np.ascontiguousarray(a, dtype="<f8")
        self.u32(arr.size)
        if arr.size:
            self._align(8)
            self.b += arr.tobytes()

    def header(self, ns: int, frame: str) -> None:
        self.time(ns)
        self.string(frame)


def encode_joint_state(stamp_ns: int, names: Sequence[str], position, velocity=(), effort=(),
                       frame: str = "") -> bytes:
    """sensor_msgs/JointState: positions rad (m), velocities rad/s (m/s), efforts N·m (N)."""
    c = _Cdr()
    c.header(stamp_ns, frame)
    c.strings(names)
    c.f64s(position)
    c.f64s(velocity)
    c.f64s(effort)
    return bytes(c.b)


def encode_tf(stamp_ns: int, transforms: Sequence[Transform]) -> bytes:
    """tf2_msgs/TFMessage of ``transforms`` (all with the same stamp)."""
    c = _Cdr()
    c.u32(len(transforms))
    for t in transforms:
        c.header(stamp_ns, t.parent)
        c.string(t.child)
        c.f64(*t.translation)
        c.f64(*t.rotation)
    return bytes(c.b)


def encode_pose_stamped(stamp_ns: int, frame: str, position, orientation) -> bytes:
    """geometry_msgs/PoseStamped: position m (3,), orientation quaternion (x, y, z, w)."""
    c = _Cdr()
    c.header(stamp_ns, frame)
    c.f64(*position)
    c.f64(*orientation)
    return bytes(c.b)


def encode_path(stamp_ns: int, frame: str, points) -> bytes:
    """nav_msgs/Path through ``points`` (N, 3), m, in ``frame`` (orientations identity)."""
    c = _Cdr()
    c.header(stamp_ns, frame)
    c.u32(len(points))
    for x, y, z in points:
        c.header(stamp_ns, frame)
        c.f64(float(x), float(y), float(z), 0.0, 0.0, 0.0, 1.0)
    return bytes(c.b)


def encode_string(text: str) -> bytes:
    """std_msgs/String."""
    c = _Cdr()
    c.string(text)
    return bytes(c.b)


def encode_log(stamp_ns: int, level: int, name: str, msg: str, file: str = "", function: str = "",
               line: int = 0) -> bytes:
    """rcl_interfaces/Log (what ``/rosout`` carries): ``level`` one of :class:`LogLevel`."""
    c = _Cdr()
    c.time(stamp_ns)
    c.u8(level)
    c.string(name)
    c.string(msg)
    c.string(file)
    c.string(function)
    c.u32(line)
    return bytes(c.b)


def encode_twin_sample(stamp_ns: int, stt: int, time_s: float, joints: Sequence[str], virtual_deg, servo_deg,
                       error_deg, latency_ms: float, faults: int, fault_names: str) -> bytes:
    """armtwin_msgs/TwinSample (:data:`TWIN_SAMPLE`)."""
    c = _Cdr()
    c.time(stamp_ns)
    c.u64(stt)
    c.f64(time_s)
    c.strings(joints)
    c.f64s(virtual_deg)
    c.f64s(servo_deg)
    c.f64s(error_deg)
    c.f64(latency_ms)
    c.u32(faults)
    c.string(fault_names)
    return bytes(c.b)


class FixedLayout:
    """A message whose strings and sequence lengths are fixed (a robot's joint names, its TF
    edges), compiled once into one ``struct`` format, so that encoding a message is one
    ``pack`` of its numbers — what a 500 Hz log needs (a TF of 6 edges in ~10 µs instead of ~80).

    Build it with the same calls as the CDR writer, in the message's field order: ``time()``,
    ``u8()``, ``u32()``, ``u64()``, ``f64(n)`` for variable numbers, and ``const_string(s)``,
    ``const_u32(v)`` for the fixed parts; :meth:`pack` then takes the variable values in order.
    """

    def __init__(self) -> None:
        self.fmt = ["<4s"]
        self.off = 0                          # offset after the encapsulation header
        self.parts: list = [b"\x00\x01\x00\x00"]  # constants, and None where a variable goes
        self._struct: struct.Struct | None = None

    def _align(self, n: int) -> None:
        pad = -self.off % n
        if pad:
            self.fmt.append(f"{pad}x")
            self.off += pad

    def _var(self, code: str, size: int, count: int = 1) -> "FixedLayout":
        self._align(size)
        self.fmt.append(f"{count}{code}")
        self.off += size * count
        self.parts.extend([None] * count)
        return self

    def time(self) -> "FixedLayout":
        return self._var("i", 4)._var("I", 4)

    def u8(self) -> "FixedLayout":
        return self._var("B", 1)

    def u32(self) -> "FixedLayout":
        return self._var("I", 4)

    def u64(self) -> "FixedLayout":
        return self._var("Q", 8)

    def f64(self, n: int = 1) -> "FixedLayout":
        return self._var("d", 8, n) if n else self

    def const_u32(self, v: int) -> "FixedLayout":
        self._align(4)
        self.fmt.append("I")
        self.off += 4
        self.parts.append(v)
        return self

    def const_string(self, s: str) -> "FixedLayout":
        data = s.encode() + b"\x00"
        self.const_u32(len(data))
        self.fmt.append(f"{len(data)}s")
        self.off += len(data)
        self.parts.append(data)
        return self

    def const_strings(self, items: Sequence[str]) -> "FixedLayout":
        self.const_u32(len(items))
        for s in items:
            self.const_string(s)
        return self

    def f64s(self, n: int) -> "FixedLayout":
        """A float64 sequence of fixed length ``n``."""
        self.const_u32(n)
        return self.f64(n)

    def compile(self) -> "FixedLayout":
        self._struct = struct.Struct("".join(self.fmt))
        slots = [i for i, p in enumerate(self.parts) if p is None]
        self._slots = slots
        return self

    def pack(self, values: Sequence) -> bytes:
        """The message with ``values`` (as many as the variable fields, in order) filled in."""
        args = list(self.parts)
        for i, v in zip(self._slots, values):
            args[i] = v
        return self._struct.pack(*args)  # type: ignore[union-attr]

    @property
    def size(self) -> int:
        return self.off + 4


def _sec_nsec(ns: int) -> tuple[int, int]:
    return divmod(int(ns), 1_000_000_000)


class JointStateLayout:
    """sensor_msgs/JointState with fixed joint ``names`` and empty frame: :meth:`encode` is one pack."""

    def __init__(self, names: Sequence[str], velocity: bool = False, effort: bool = False) -> None:
        n = len(names)
        self.n = n
        self.layout = (FixedLayout().time().const_string("").const_strings(names).f64s(n)
                       .f64s(n if velocity else 0).f64s(n if effort else 0).compile())

    def encode(self, stamp_ns: int, position, velocity=(), effort=()) -> bytes:
        return self.layout.pack([*_sec_nsec(stamp_ns), *map(float, position), *map(float, velocity),
                                 *map(float, effort)])


class TFLayout:
    """tf2_msgs/TFMessage with fixed (parent, child) ``edges``: :meth:`encode` is one pack."""

    def __init__(self, edges: Sequence[tuple[str, str]]) -> None:
        lay = FixedLayout().const_u32(len(edges))
        for parent, child in edges:
            lay.time().const_string(parent).const_string(child).f64(7)
        self.layout = lay.compile()

    def encode(self, stamp_ns: int, transforms: Sequence[Transform]) -> bytes:
        sec, nsec = _sec_nsec(stamp_ns)
        vals: list = []
        for t in transforms:
            vals += (sec, nsec, *t.translation, *t.rotation)
        return self.layout.pack(vals)


class TwinSampleLayout:
    """armtwin_msgs/TwinSample (:data:`TWIN_SAMPLE`) with fixed joint labels: one pack, then the
    fault names (the only string that changes)."""

    def __init__(self, joints: Sequence[str]) -> None:
        k = len(joints)
        self.layout = (FixedLayout().time().u64().f64().const_strings(joints).f64s(k).f64s(k).f64s(k).f64()
                       .u32().compile())

    def encode(self, stamp_ns: int, stt: int, time_s: float, virtual_deg, servo_deg, error_deg, latency_ms: float,
               faults: int, fault_names: str) -> bytes:
        head = self.layout.pack([*_sec_nsec(stamp_ns), int(stt), float(time_s), *map(float, virtual_deg),
                                 *map(float, servo_deg), *map(float, error_deg), float(latency_ms), int(faults)])
        data = fault_names.encode()
        return head + struct.pack("<I", len(data) + 1) + data + b"\x00"   # the prefix ends 4-aligned
