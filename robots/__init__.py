"""Robots as data: a registry of frozen :class:`RobotSpec` objects and their URDF files.

>>> from armtwin import robots
>>> robots.get("irb120").dof
6

Adding a robot means adding a data module here and one line to ``_MODULES``, then
regenerating the URDF with ``python -m armtwin.robots.urdfgen``.
"""

from __future__ import annotations

import importlib

from .spec import DriveGains, JointSpec, JointType, LinkSpec, Origin, RobotSpec, ToolOrientation, WorkCell

__all__ = ["get", "names", "RobotSpec", "JointSpec", "JointType", "LinkSpec", "Origin", "DriveGains", "WorkCell", "ToolOrientation", "UnknownRobotError"]

# registry id -> data module (each defines SPEC)
_MODULES = {"scara": "scara", "irb120": "irb120", "aubo_i5": "aubo_i5"}
_LOADED: dict[str, RobotSpec] = {}


class UnknownRobotError(KeyError):
    """Raised for a robot id that is not in the registry."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


def names() -> tuple[str, ...]:
    """Registered robot ids."""
    return tuple(_MODULES)


def get(name: str) -> RobotSpec:
    """The spec of robot ``name`` (``scara``, ``irb120``, ``aubo_i5``; any case, ``-`` for ``_``).

    Raises:
        UnknownRobotError: (a KeyError) ``name`` is not a registered id, or not text at all.
    """
    if not isinstance(name, str):
        raise UnknownRobotError(f"a robot id is text, got {name!r}; known robots: {', '.join(_MODULES)}")
    key = name.strip().lower().replace("-", "_")
    if key not in _MODULES:
        raise UnknownRobotError(f"unknown robot {name!r}; known robots: {', '.join(_MODULES)}")
    if key not in _LOADED:
        _LOADED[key] = importlib.import_module(f".{_MODULES[key]}", __name__).SPEC
    return _LOADED[key]
