"""Shared fixtures: the rig emulator, compiled once per test session from firmware/servo_rig."""

import pytest

from armtwin.envs.rig import Emulator, build_emulator


@pytest.fixture(scope="session")
def exe():
    """Path of the host-compiled rig emulator (built with g++ if the sources changed)."""
    return build_emulator()


@pytest.fixture
def emu(exe):
    """A running emulator on its own pseudo-terminal (``emu.device``), stopped afterwards."""
    e = Emulator(exe=exe)
    yield e
    e.stop()
