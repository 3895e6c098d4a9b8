"""Hardware-in-the-loop twin: the servo rig, its serial link, the twin sync and its log.

One module per concern:

| module | what |
|---|---|
| :mod:`.link` | :class:`RigLink` — the serial transport (protocol 2, reader thread, reconnects), :class:`LinkConfig`, :class:`LinkStats`, :class:`RigState`, :class:`LatencyWindow`, :class:`RigLinkError` |
| :mod:`.log` | the twin log: :class:`SyncSample` (one sample), :class:`TwinLog` (CSV writer), :func:`read_twin_log` (checked reader) — no port, no thread |
| :mod:`.sync` | the twin session: :class:`TwinSync` (one sample at a time, the tick-scheduled loop, the ramp from the rig's measured joints), :class:`SyncConfig`, :class:`Direction`, :func:`smooth_motion`, :func:`connect` (the HELLO / give-up policy), :class:`RigLoop` (the twin on its own thread) |
| :mod:`.gym` | :class:`TwinSyncWrapper` — the twin inside a Gymnasium env |
| :mod:`.emulator` | :func:`build_emulator`, :class:`Emulator` — the firmware core compiled on the host |
| :mod:`.chip` | :func:`build_firmware`, :class:`Board`, :class:`FirmwareImage` — the firmware built for AVR boards with avr-gcc |

Every public name is importable from here (``from armtwin.envs.rig import TwinSyncWrapper``);
the submodule is imported on first use, so ``armtwin plot`` reading a log through
:mod:`armtwin.envs.rig.log` never loads the serial link or the sync loop.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> the submodule that defines it
_WHERE = {
    **dict.fromkeys(("RigLinkError", "LinkConfig", "RigState", "LatencyWindow", "LinkStats", "RigLink"), "link"),
    **dict.fromkeys(("SyncSample", "SampleLog", "TeeLog", "TwinLog", "TwinLogData", "TwinLogError", "read_twin_log", "FAULT_NAMES",
                     "LOG_MAX_JOINT_DEG", "LOG_MAX_LATENCY_MS", "LOG_MAX_STT", "LOG_MAX_TIME_S"), "log"),
    **dict.fromkeys(("Direction", "SyncConfig", "FaultEvent", "PowerCommand", "SyncReport", "TwinSync",
                     "smooth_motion", "RampInfo", "RigLoop", "connect", "RigNoAnswer", "RigProtocolMismatch"), "sync"),
    "TwinSyncWrapper": "gym",
    **dict.fromkeys(("FIRMWARE_DIR", "build_emulator", "Emulator"), "emulator"),
    **dict.fromkeys(("Board", "BoardSpec", "BOARDS", "FirmwareImage", "build_firmware"), "chip"),
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """Import the submodule defining ``name`` on first use (PEP 562)."""
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


if TYPE_CHECKING:  # the names as the type checker and editors see them
    from .chip import BOARDS, Board, BoardSpec, FirmwareImage, build_firmware
    from .emulator import FIRMWARE_DIR, Emulator, build_emulator
    from .gym import TwinSyncWrapper
    from .link import LatencyWindow, LinkConfig, LinkStats, RigLink, RigLinkError, RigState
    from .log import (FAULT_NAMES, LOG_MAX_JOINT_DEG, LOG_MAX_LATENCY_MS, LOG_MAX_STT, LOG_MAX_TIME_S, SampleLog, SyncSample, TeeLog,
                      TwinLog, TwinLogData, TwinLogError, read_twin_log)
    from .sync import (Direction, FaultEvent, PowerCommand, RampInfo, RigLoop, RigNoAnswer, RigProtocolMismatch,
                       SyncConfig, SyncReport, TwinSync, connect, smooth_motion)
