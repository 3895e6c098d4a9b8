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

__all__ = ["MessageType", "JOINT_STATE", "TF_MESSAGE", "POSE_STAMPED", "STRING", "LOG", "TWIN_SAMPLE",
           "LogLevel", "encode_joint_state", "encode_tf", "encode_pose_stamped", "encode_string", "encode_log",
           "encode_twin_sample", "Transform"]

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
