"""What every armtwin MCAP log writes first: the robot (URDF attachment, ``/robot_description``,
``/tf_static``) and the run's metadata."""

from __future__ import annotations

from .mcapfile import McapFile
from .rosmsg import encode_log, encode_string, encode_tf
from .tf import RobotFrames
from .topics import ROBOT_DESCRIPTION, ROSOUT, TF_STATIC

__all__ = ["write_robot", "write_note", "description", "NODE"]

#: the ``name`` of armtwin's rcl_interfaces/Log messages
NODE = "armtwin"


def write_robot(f: McapFile, spec, frames: RobotFrames, stamp_ns: int, metadata: dict[str, str]) -> None:
    """The robot's URDF (attachment ``<robot>.urdf`` and one ``/robot_description`` message), the
    static TF edges and a metadata record ``armtwin`` (writer thread)."""
    urdf = spec.urdf_path.read_bytes()
    f.attach(spec.urdf_path.name, "application/xml", urdf, stamp_ns)
    f.metadata("armtwin", {"robot": spec.name, "urdf": spec.urdf_path.name, **metadata})
    f.message(ROBOT_DESCRIPTION, stamp_ns, encode_string(description(spec.urdf_path)))
    f.message(TF_STATIC, stamp_ns, encode_tf(stamp_ns, frames.static))


def description(path) -> str:
    """The URDF text of ``path`` for ``/robot_description``: its relative mesh file names made
    absolute ``file://`` URIs, which a viewer on the machine that wrote the log resolves (Foxglove's
    desktop app draws the meshes; a relative name resolves nowhere). The attachment keeps the file
    as it is."""
    import xml.etree.ElementTree as ET
    from pathlib import Path
    path = Path(path).resolve()
    root = ET.fromstring(path.read_bytes())
    for mesh in root.iter("mesh"):
        ref = mesh.get("filename") or ""
        if ref and "://" not in ref and not ref.startswith("/"):
            mesh.set("filename", (path.parent / ref).as_uri())
        elif ref.startswith("/"):
            mesh.set("filename", Path(ref).as_uri())
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode")


def write_note(f: McapFile, stamp_ns: int, level: int, text: str, file: str = "", line: int = 0) -> None:
    """One ``/rosout`` message (writer thread)."""
    f.message(ROSOUT, stamp_ns, encode_log(stamp_ns, level, NODE, text, file, "", line))

