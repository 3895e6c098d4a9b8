"""``armtwin sync --log twin.mcap``: the twin log as ROS 2 messages in an MCAP file.

The same samples as the CSV :class:`armtwin.envs.rig.TwinLog`, one :meth:`TwinMcapLog.write`
each, with the same interface (``write(sample)``, ``close()``), so the sync loop, the pendant
and the Gym wrapper take either. Every sample becomes:

* ``/twin/sample`` (armtwin_msgs/TwinSample): the CSV row exactly — STT, time s, virtual,
  servo and ΔE deg, latency ms, fault bits and names; ``armtwin plot`` and ``replay`` read it;
* ``/joint_states`` (the rig's measured joints) and ``/joint_states/commanded`` (the virtual
  twin's), rad, named as the URDF's joints;
* ``/tf``: the virtual twin (the joints the rig does not carry stand at home);
* ``/rosout``: a fault appearing or clearing (rcl_interfaces/Log, WARN / INFO).

The loop only queues the sample (a frozen dataclass); the writer thread encodes and writes.
"""

from __future__ import annotations

import math
import os
import time
from typing import Sequence

import numpy as np

from ...controllers import rigproto as rp
from .common import write_note, write_robot
from .mcapfile import Compression, McapFile
from .rosmsg import JointStateLayout, LogLevel, TFLayout, TwinSampleLayout
from .tf import RobotFrames
from .topics import COMMANDED, JOINT_STATES, TF, TWIN_SAMPLE_TOPIC, TWIN_TOPICS

__all__ = ["TwinMcapLog"]

#: fault bits whose changes are not worth a /rosout line (per-sample flags, counted elsewhere)
_QUIET = int(rp.Fault.RX_ERROR | rp.Fault.LATE)


class TwinMcapLog:
    """The MCAP twin log.

    Args:
        path: the ``.mcap`` file (replaced if it exists), or None (only ``live``).
        spec: the robot.
        joints: 0-based robot joints mapped to the rig's motors.
        compression: chunk compression.
        live: a :class:`~.live.LiveServer` streaming the same messages (``--live``; closed with the log).
        start_ns: the wall-clock time (ns since the epoch) that sample time 0 maps to (default: now).
        chunk_size: bytes of messages per MCAP chunk (a killed writer loses at most the one being built).

    Raises:
        OSError: the file cannot be created.
    """

    def __init__(self, path: str | os.PathLike | None, spec, joints: Sequence[int], *,
                 compression: Compression = Compression.ZSTD, start_ns: int | None = None,
                 chunk_size: int = 256 * 1024, live=None) -> None:
        self.path = os.fspath(path) if path is not None else None
        self.spec = spec
        self.joints = list(joints)
        self.labels = [f"j{j + 1}" for j in self.joints]
        self.names = [spec.joint_names[j] for j in self.joints]
        self.frames = RobotFrames(spec)
        self.home = np.array(spec.home, dtype=float)
        # every message's fixed parts compiled once: a sample is a few struct packs (500 Hz loops)
        self._sample = TwinSampleLayout(self.labels)
        self._joints = JointStateLayout(self.names)
        self._tf = TFLayout(self.frames.edges)
        self.t0 = time.time_ns() if start_ns is None else int(start_ns)
        self.rows = 0
        self._faults = 0
        self.file = McapFile(self.path, TWIN_TOPICS, compression=compression, chunk_size=chunk_size, live=live)
        self.file.submit(write_robot, spec, self.frames, self.t0,
                         {"command": "sync", "joints": ",".join(self.labels)})

    def write(self, s) -> None:
        """Queue one :class:`armtwin.envs.rig.SyncSample`."""
        self.file.submit(_write_sample, self, s)
        self.rows += 1

    def close(self) -> None:
        """Write everything queued and the summary (idempotent); OSError if the writing failed."""
        self.file.close()

    def __enter__(self) -> "TwinMcapLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _write_sample(f: McapFile, log: TwinMcapLog, s) -> None:
    ns = log.t0 + int(round(s.time * 1e9))
    faults = int(s.faults)
    f.message(TWIN_SAMPLE_TOPIC, ns, log._sample.encode(ns, s.stt, s.time, s.virtual_deg, s.servo_deg, s.error_deg,
                                                        s.latency_ms, faults, s.faults.names()))
    virt = [math.radians(v) for v in s.virtual_deg]
    f.message(JOINT_STATES, ns, log._joints.encode(ns, [math.radians(v) for v in s.servo_deg]))
    f.message(COMMANDED, ns, log._joints.encode(ns, virt))
    q = log.home.copy()
    q[log.joints] = virt
    f.message(TF, ns, log._tf.encode(ns, log.frames.moving(q)))
    changed = (faults ^ log._faults) & ~_QUIET
    for b in range(changed.bit_length()):
        if changed >> b & 1:
            bit = rp.Fault(1 << b)
            on = bool(faults & bit)
            write_note(f, ns, LogLevel.WARN if on else LogLevel.INFO,
                       f"fault {bit.names()} {'ON' if on else 'off'} at STT {s.stt} (t = {s.time:.3f} s)")
    log._faults = faults
