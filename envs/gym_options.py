"""The bounds of the Gymnasium envs' options, and the one checker each option goes through.

Every keyword argument of :class:`~armtwin.envs.gym_envs.ReachEnv` / :class:`~armtwin.envs.gym_envs.TrackEnv`
and every ``reset(options=...)`` entry is checked when it is given, before any world is
built or any state changes: a wrong type, NaN, infinity, zero, a negative number or a value
beyond its bound is a :class:`ValueError` that names the option, the rule and the value. No
option can make a step hang (unbounded substeps or episode lengths), allocate without bound
(frame sizes, look-ahead) or leave the robot outside its joint ranges.

Nothing here imports PyBullet.

Units: Hz, s, m, rad, pixels.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from ..controllers.choices import Choice
from ..controllers.tools import MAX_TCP_MM, MAX_TOOL_MASS, MAX_TOOL_NUMBER, Tool, default_tools, tool_from_entry
from .config import MAX_VIDEO_SIZE, MIN_VIDEO_SIZE

if TYPE_CHECKING:
    from ..robots.workcell import Cell

__all__ = ["ObsType", "IMAGE_SIZE", "CONTROL_FREQ_HZ", "PHYSICS_DT_S", "TOOL_STEP_M", "ANGLE_STEP_RAD", "DISTANCE_THRESHOLD_M",
           "ANGLE_THRESHOLD_RAD", "GOAL_SPREAD_RAD", "MAX_EPISODE_STEPS", "LOOKAHEAD", "FRAME_WIDTH", "FRAME_HEIGHT",
           "number", "whole", "flag", "vector", "reset_options", "tool", "DICT_TOOL_NUMBER"]

class ObsType(Choice):
    """What an observation holds besides the goals: the state vector, a camera image (RGB, or RGB
    and depth), or both."""

    __label__ = "observation type"

    STATE = "state"
    RGB = "rgb"
    RGBD = "rgbd"
    BOTH = "both"


#: pixels per side of observation images (square)
IMAGE_SIZE = (16, 256)
#: actions per simulated second (Hz): at most one per millisecond, at least one per second
CONTROL_FREQ_HZ = (1.0, 1000.0)
#: physics step (s): at most 10 kHz physics (as ``armtwin compare``), at most 100 ms
PHYSICS_DT_S = (1e-4, 0.1)
#: m per control step at action 1 (Cartesian control, prismatic joints)
TOOL_STEP_M = (0.0, 1.0)
#: rad per control step at action 1 (joint steps, tool rotation)
ANGLE_STEP_RAD = (0.0, math.pi)
#: m, success radius / tracking tolerance
DISTANCE_THRESHOLD_M = (0.0, 1.0)
#: rad, success angle
ANGLE_THRESHOLD_RAD = (0.0, math.pi)
#: rad, half-width of the joint window goals are sampled from
GOAL_SPREAD_RAD = (0.0, 2.0 * math.pi)
#: most control steps in one episode (``episode_steps``; Track: ``duration`` × ``control_freq``)
MAX_EPISODE_STEPS = 100_000
#: future path points in a Track observation
LOOKAHEAD = (1, 100)
#: pixels of ``rgb_array`` frames (the video bounds of :mod:`armtwin.envs.config`)
FRAME_WIDTH = (MIN_VIDEO_SIZE[0], MAX_VIDEO_SIZE[0])
FRAME_HEIGHT = (MIN_VIDEO_SIZE[1], MAX_VIDEO_SIZE[1])


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def number(name: str, value: Any, bounds: tuple[float, float], unit: str = "", *, low_open: bool = True) -> float:
    """``value`` as a float inside ``bounds`` (the low end excluded unless ``low_open`` is False).

    Raises:
        ValueError: not a real number (text, bool, None, an array), NaN, infinite or out of bounds.
    """
    lo, hi = bounds
    u = f" {unit}" if unit else ""
    rule = f"{'>' if low_open else '>='} {lo:g}{u} and <= {hi:g}{u}"
    if not _is_real(value):
        raise ValueError(f"{name} must be a number {rule}, got {value!r}")
    v = float(value)
    if not (math.isfinite(v) and (v > lo if low_open else v >= lo) and v <= hi):
        raise ValueError(f"{name} must be a number {rule}, got {value!r}")
    return v


def whole(name: str, value: Any, bounds: tuple[int, int]) -> int:
    """``value`` as an int within ``bounds`` (inclusive); a float such as 50.0 counts as whole.

    Raises:
        ValueError: not a whole number, or out of bounds.
    """
    lo, hi = bounds
    ok = _is_real(value) and math.isfinite(float(value)) and float(value) == int(value) and lo <= int(value) <= hi
    if not ok:
        raise ValueError(f"{name} must be a whole number from {lo} to {hi}, got {value!r}")
    return int(value)


def flag(name: str, value: Any) -> bool:
    """``value`` as a bool: True, False, 1 or 0 (text such as "False" is refused, not taken as True)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if _is_real(value) and value in (0, 1):
        return bool(value)
    raise ValueError(f"{name} must be True or False, got {value!r}")


def reset_options(options: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    """``reset(options=...)`` as a dict with only ``allowed`` keys (None: empty).

    Raises:
        ValueError: not a mapping, or a key the env does not know (a typo must not be ignored).
    """
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ValueError(f"reset options must be a dict, got {type(options).__name__}")
    unknown = sorted(str(k) for k in options if k not in allowed)
    if unknown:
        raise ValueError(f"unknown reset option(s) {', '.join(unknown)}; this env takes: {', '.join(allowed)}")
    return {k: v for k, v in options.items() if v is not None}


def vector(name: str, value: Any, size: int) -> np.ndarray:
    """``value`` as a finite float vector (size,).

    Raises:
        ValueError: not numbers, the wrong length, or NaN / infinite entries.
    """
    try:
        v = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{name} needs {size} numbers, got {value!r}") from None
    if v.shape != (size,):
        raise ValueError(f"{name} needs {size} numbers, got {v.size}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be finite, got {v.tolist()}")
    return v


#: the T number of a tool given as a dict without ``number``: the first one after the built-in table's
DICT_TOOL_NUMBER = max(default_tools()) + 1


def tool(name: str, value: Any) -> Tool | None:
    """The ``tool=`` option as the :class:`~armtwin.controllers.tools.Tool` on the flange (None: the bare flange).

    Accepted: None or 0 (the bare flange); a tool of the built-in table
    (:func:`~armtwin.controllers.tools.default_tools`, docs/GCODE.md "Tools") by number (``2``), by
    ``"T2"``, by its name or by its kind (``"spindle"``); a :class:`Tool`; or a dict with the keys
    of a tool table entry, in its units (``{"tcp": [0, 0, 100], "mass": 0.3}``: mm, deg, kg), and
    optionally ``number`` (default :data:`DICT_TOOL_NUMBER`).

    Raises:
        ValueError: anything else, naming the option, the value and what the built-in table holds.
    """
    table = default_tools()
    listing = "; ".join(f"T{n} {t.name} ({t.kind.value})" for n, t in table.items())
    choices = f"a tool number or name of the built-in table ({listing}), a Tool, or a dict such as " \
              f"{{'tcp': [0, 0, 100], 'mass': 0.3}} (mm, kg)"
    if value is None:
        return None
    if isinstance(value, Tool):     # built in code: the bounds a table file is held to
        if not (math.isfinite(value.mass) and 0.0 <= value.mass <= MAX_TOOL_MASS):
            raise ValueError(f"{name}: the tool's mass must be from 0 to {MAX_TOOL_MASS:g} kg, got {value.mass!r}")
        for what, v in (("TCP", value.offset), ("centre of mass", value.com)):
            if not (np.all(np.isfinite(v)) and np.all(np.abs(v) <= MAX_TCP_MM / 1000.0)):
                raise ValueError(f"{name}: the tool's {what} must be within ±{MAX_TCP_MM:g} mm of the flange, "
                                 f"got {(np.asarray(v) * 1000.0).tolist()} mm")
        return value
    if isinstance(value, dict):
        entry = dict(value)
        number = entry.pop("number", DICT_TOOL_NUMBER)
        number = whole(f"{name}['number']", number, (0, MAX_TOOL_NUMBER))
        return tool_from_entry(entry, number, name)     # a ToolTableError (a ValueError) names the key
    n: int | None = None
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        n = int(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        if text[:1] == "t" and text[1:].isdigit():
            n = int(text[1:])
        else:
            found = [k for k, t in table.items() if text in (t.name.lower(), t.kind.value)]
            n = found[0] if len(found) == 1 else None
            if n is None:
                raise ValueError(f"{name}: no tool named {value!r}; give {choices}")
    else:
        raise ValueError(f"{name} must be {choices}, got {value!r}")
    if n not in table:
        raise ValueError(f"{name}: no tool {value!r} in the built-in table; give {choices}")
    return None if n == 0 else table[n]


#: the reward taken off for each step that ends in a collision (``collision_penalty``)
COLLISION_PENALTY = (0.0, 1000.0)


def cell(name: str, value: Any, spec) -> "Cell | None":
    """The ``cell=`` option as the :class:`~armtwin.robots.workcell.Cell` the robot works in (None: none).

    Accepted: None; ``"default"`` (the robot's default cell, a table whose top is the programs'
    Z0); the path of a cell file (docs/WORKCELL.md); or a :class:`Cell`.

    Raises:
        ValueError: anything else, or a file that cannot be read or is not a cell (its line named).
    """
    from ..robots.workcell import Cell, CellError, default_cell, load_cell
    if value is None or isinstance(value, Cell):
        return value
    if value == "default":
        return default_cell(spec)
    if isinstance(value, str) or hasattr(value, "__fspath__"):
        import os
        import stat
        try:
            if not stat.S_ISREG(os.stat(value).st_mode):     # a FIFO or device would block the read
                raise ValueError(f"{name}: {value}: not a regular file")
            return load_cell(value)
        except CellError as exc:
            raise ValueError(f"{name}: {exc}") from None
        except OSError as exc:
            raise ValueError(f"{name}: {value}: cannot read ({exc.strerror or exc})") from None
    raise ValueError(f"{name}: None, 'default', a cell file's path or a Cell, got {value!r}")
