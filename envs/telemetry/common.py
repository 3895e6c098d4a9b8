"""What every armtwin MCAP log writes first: the robot (URDF attachment, ``/robot_description``,
``/tf_static``) and the run's metadata."""

from __future__ import annotations

from .mcapfile import McapFile
from .rosmsg import encode_log, encode_string, encode_tf
from .tf import RobotFrames
from .topics import ROBOT_DESCRIPTION, ROSOUT, TF_STATIC

__all__ = ["write_robot", "write_note", "NODE"]

#: the ``name`` of armtwin's rcl_interfaces/Log messages
NODE = "armtwin"


def write_robot(f: McapFile, spec, frames: RobotFrames, stamp_ns: int, metadata: dict[str, str]) -> None:
    """The robot's URDF (attachment ``<robot>.urdf`` and one ``/robot_description`` message), the
    static TF edges and a metadata record ``armtwin`` (writer thread)."""
    urdf = spec.urdf_path.read_bytes()
    f.attach(spec.urdf_path.name, "application/xml", urdf, stamp_ns)
    f.metadata("armtwin", {"robot": spec.name, "urdf": spec.urdf_path.name, **metadata})
    f.message(ROBOT_DESCRIPTION, stamp_ns, encode_string(urdf.decode()))
    f.message(TF_STATIC, stamp_ns, encode_tf(stamp_ns, frames.static))


def write_note(f: McapFile, stamp_ns: int, level: int, text: str, file: str = "", line: int = 0) -> None:
    """One ``/rosout`` message (writer thread)."""
    f.message(ROSOUT, stamp_ns, encode_log(stamp_ns, level, NODE, text, file, "", line))

