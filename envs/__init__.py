"""The simulated world and what runs on it.

``sim`` is the simulator facade (the only module that imports PyBullet); ``gym_envs`` the
Gymnasium environments, ``runner`` the G-code run loop, ``compare`` the joint-model
experiment, ``video`` the recorder, ``pendant`` the browser teach pendant, ``rig`` the servo
rig link and twin sync.

Importing this package registers the Gymnasium ids (``armtwin/IRB120Reach-v0`` …); that loads
Gymnasium but not PyBullet, which loads only when an environment is made.
"""

from pathlib import Path

from . import registration  # noqa: F401  (registers the armtwin/* Gymnasium ids)


def examples_dir() -> Path:
    """armtwin's ``examples/`` folder of G-code programs (may not exist)."""
    return Path(__file__).resolve().parent.parent / "examples"
