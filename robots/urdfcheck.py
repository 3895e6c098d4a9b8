"""Check a robot's URDF file before a simulator or viewer reads it.

PyBullet aborts the whole process on some bad inputs (a folder given as the file ends in
``std::bad_alloc``) and reports others only as a bare ``error``; viewers raise their own
exceptions. This check reads the file as data — that it is a regular, readable, non-empty file
of bounded size, well-formed XML with a ``<robot>`` root, that every joint the robot's data
names is there with the right type, and that every mesh it refers to is a file next to it —
and raises :class:`RobotDataError` naming the file and what is wrong. Pure Python: no PyBullet.
"""

from __future__ import annotations

import math
import os
import stat
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterable

__all__ = ["RobotDataError", "check_urdf", "MAX_URDF_BYTES"]

#: the largest URDF file read, bytes (armtwin's own are ~10 kB; meshes live in their own files)
MAX_URDF_BYTES = 16 * 1024 * 1024


class RobotDataError(ValueError):
    """A robot's data file is missing or unusable; the message names the file and why.

    A ``ValueError``: command-line entry points end with one line and exit code 2."""


#: (element, attribute) pairs holding numbers: every one must be finite; masses and inertia
#: diagonals not negative, sizes positive
_NUMERIC = {("origin", "xyz"), ("origin", "rpy"), ("axis", "xyz"), ("mass", "value"), ("limit", "lower"),
            ("limit", "upper"), ("limit", "effort"), ("limit", "velocity"), ("dynamics", "damping"),
            ("dynamics", "friction"), ("box", "size"), ("cylinder", "radius"), ("cylinder", "length"),
            ("sphere", "radius"), ("capsule", "radius"), ("capsule", "length"), ("mesh", "scale"),
            ("color", "rgba")} | {("inertia", k) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
_NOT_NEGATIVE = {("mass", "value"), ("inertia", "ixx"), ("inertia", "iyy"), ("inertia", "izz"),
                 ("limit", "effort"), ("limit", "velocity"), ("dynamics", "damping"), ("dynamics", "friction")}
_POSITIVE = {("box", "size"), ("cylinder", "radius"), ("cylinder", "length"), ("sphere", "radius"),
             ("capsule", "radius"), ("capsule", "length")}
_COUNT = {"xyz": 3, "rpy": 3, "size": 3, "scale": 3, "rgba": 4}


def _check_numbers(e: ET.Element, attr: str, value: str, bad) -> None:
    words = value.split()
    want = _COUNT.get(attr, 1)
    where = f"<{e.tag} {attr}=\"{value[:40]}\">"
    try:
        nums = [float(w) for w in words]
    except ValueError:
        raise bad(f"{where}: not a number") from None
    if len(nums) != want:
        raise bad(f"{where}: {want} number{'s' if want > 1 else ''} expected, got {len(nums)}")
    if not all(math.isfinite(v) and abs(v) < 1e6 for v in nums):
        raise bad(f"{where}: numbers must be finite and below 1e6")
    key = (e.tag, attr)
    if key in _NOT_NEGATIVE and min(nums) < 0 or key in _POSITIVE and min(nums) <= 0:
        raise bad(f"{where}: must be {'positive' if key in _POSITIVE else 'zero or more'}")


def check_urdf(path: str | os.PathLike, joints: Iterable[tuple[str, str]] = ()) -> Path:
    """Check a URDF file before it is loaded; returns its path.

    Args:
        path: the file.
        joints: (name, type) of the moving joints the robot's data expects, type "revolute"
            (also accepts "continuous") or "prismatic".

    Raises:
        RobotDataError: naming ``path`` and the first problem found.
    """
    p = Path(path)

    def bad(why: str) -> RobotDataError:
        return RobotDataError(f"robot description {p}: {why}")

    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise bad("does not exist (regenerate it: python -m armtwin.robots.urdfgen)") from None
    except OSError as exc:
        raise bad(f"cannot be read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise bad("is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise bad("is not a regular file")
    if st.st_size == 0:
        raise bad("is empty")
    if st.st_size > MAX_URDF_BYTES:
        raise bad(f"is {st.st_size:,} bytes, more than the {MAX_URDF_BYTES:,} a robot description may have")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise bad(f"cannot be read: {exc.strerror or exc}") from None
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        line, col = getattr(exc, "position", (0, 0))
        raise bad(f"is not well-formed XML (line {line}, column {col + 1}): {exc.msg if hasattr(exc, 'msg') else exc}") from None
    if root.tag != "robot":
        raise bad(f"its root element is <{root.tag}>, not <robot>")
    links = {e.get("name") for e in root.findall("link")}
    if not links:
        raise bad("has no <link>")
    found = {e.get("name"): e for e in root.findall("joint")}
    for joint in found.values():
        for end in ("parent", "child"):
            ref = joint.find(end)
            if ref is None or ref.get("link") not in links:
                raise bad(f"joint {joint.get('name')!r}: its {end} link is missing")
    for name, kind in joints:
        element = found.get(name)
        if element is None:
            raise bad(f"has no joint {name!r}, which the robot's data names")
        want = ("revolute", "continuous") if kind == "revolute" else (kind,)
        if element.get("type") not in want:
            raise bad(f"joint {name!r} is {element.get('type')!r}, the robot's data says {kind!r}")
    for element in root.iter():
        for attr, value in element.attrib.items():
            if (element.tag, attr) in _NUMERIC:
                _check_numbers(element, attr, value, bad)
    for mesh in root.iter("mesh"):
        filename = mesh.get("filename") or ""
        target = p.parent / filename.removeprefix("file://") if not filename.startswith("package://") else None
        if not filename or target is None or not target.is_file():
            raise bad(f"mesh {filename!r} is not a file next to it")
    return p
