"""Errors of the simulated world that a user can cause (bad robot data, no display, a renderer
that does not load). Without PyBullet, so the command line can name them in one line."""

from __future__ import annotations

__all__ = ["SimulationError"]


class SimulationError(RuntimeError):
    """A world or robot could not be created or used (e.g. a URDF that does not load)."""
