"""A browser teach pendant for a simulated robot (``armtwin ui ROBOT``), in two rooms:

* :mod:`.core` — :class:`PendantCore`, the logic without a GUI: a world with one robot (and its
  tool, whose TCP is then the controlled point: ``PendantConfig(tool=N)``), joint
  targets, jogging, IK targets with a branch choice, taught points, G-code export (the G-code
  text itself is :func:`armtwin.controllers.gcode.teach.gcode_for_points`), program runs
  (:func:`armtwin.controllers.gcode.compile.compile_program`, the runner's own joints) and the rig
  attachment. Thread-safe; only the ticking thread touches PyBullet.
* :mod:`.gui` — :class:`Pendant`, the viser server around a core (loaded only when a GUI is made:
  the core imports without viser).

Usage::

    from armtwin.envs.pendant import Pendant
    p = Pendant("irb120", host="127.0.0.1", port=8080)   # starts serving at once
    print(p.url)
    p.serve_forever()        # or: ... p.close()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...controllers.gcode.teach import gcode_for_points
from .. import examples_dir
from .core import MoveResult, PendantConfig, PendantCore, SaveResult, safe_file_name

if TYPE_CHECKING:
    from .gui import Pendant, rig_markdown

__all__ = ["MoveResult", "Pendant", "PendantConfig", "PendantCore", "SaveResult", "examples_dir", "gcode_for_points",
           "rig_markdown", "safe_file_name"]


def __getattr__(name: str) -> Any:
    """The GUI's names, loaded (with viser) only when asked for."""
    if name in ("Pendant", "rig_markdown"):
        from . import gui
        return getattr(gui, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
