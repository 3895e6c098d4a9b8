"""``armtwin compare --log compare.mcap``: the joint models' runs of one trajectory, side by side.

Each joint model's run (:class:`armtwin.envs.compare.RunResult`) goes under its own namespace
— ``/kinematic/joint_states``, ``/hinge/joint_states``, ``/articulation/joint_states``, with the
reference as ``/<model>/joint_states/commanded``, the links as ``/<model>/tf`` and the flange as
``/<model>/tool_pose`` — so that Foxglove plots the three on one time axis
(``/hinge/joint_states.position[1]`` beside ``/articulation/joint_states.position[1]``). Every
model has its own TF frames (``hinge/base_link`` → ``hinge/link_1`` …, prefixed so the trees do
not merge), standing side by side along the world's y axis (:func:`model_gap` apart). Topics:
:func:`~.topics.compare_topics`, docs/TELEMETRY.md.

The runs are finished when this is written (``compare`` runs the models one after another), so
every model's time starts at the same stamp: one file, the three runs aligned.
"""

from __future__ import annotations

import os
import time
from typing import Mapping

import numpy as np

from .common import NODE
from .mcapfile import Compression, McapFile
from .rosmsg import (JointStateLayout, LogLevel, TFLayout, Transform, encode_log, encode_pose_stamped, encode_string,
                     encode_tf)
from .tf import REPORT_FRAME, WORLD, RobotFrames
from .topics import COMMANDED, JOINT_STATES, ROBOT_DESCRIPTION, ROSOUT, TF, TF_STATIC, TOOL_POSE, compare_topics

__all__ = ["write_compare_mcap", "model_gap"]


def model_gap(spec) -> float:
    """How far apart (m, along the world's y) the models' robots stand in the log's 3D view."""
    return 2.5 * float(spec.reach) + 0.5


def _prefixed(name: str, model: str) -> str:
    return name if name == WORLD else f"{model}/{name}"


def write_compare_mcap(path: str | os.PathLike, spec, runs: Mapping[str, object], *,
                       metadata: Mapping[str, str] | None = None, compression: Compression = Compression.ZSTD,
                       start_ns: int | None = None) -> dict[str, int]:
    """Write the runs of :func:`armtwin.envs.compare.run_motion` into one MCAP file.

    Args:
        path: the ``.mcap`` file (replaced if it exists).
        spec: the robot.
        runs: ``{model name: run}``, each run with ``t`` (N,) s, ``q_ref``, ``qd_ref``, ``q``, ``qd``,
            ``tau`` (N, n) (rad / m, rad/s / m/s, N·m / N), ``stable`` and ``message`` (a
            :class:`~armtwin.envs.compare.RunResult`).
        metadata: more of the ``armtwin`` metadata record (motion, dt, payload).
        compression: chunk compression.
        start_ns: the wall-clock time (ns since the epoch) that time 0 maps to (default: now).

    Returns:
        ``{model: messages on /<model>/joint_states}`` (one per control period of its run).

    Raises:
        OSError: the file cannot be written.
    """
    models = list(runs)
    t0 = time.time_ns() if start_ns is None else int(start_ns)
    gap = model_gap(spec)
    f = McapFile(path, compare_topics(models), compression=compression)
    try:
        f.submit(_write_all, spec, {m: runs[m] for m in models}, gap, t0,
                 {"command": "compare", "models": ",".join(models), **(metadata or {})})
    finally:
        f.close()
    return {m: len(runs[m].t) for m in models}


def _write_all(f: McapFile, spec, runs: dict, gap: float, t0: int, meta: dict[str, str]) -> None:
    """Everything, on the writer thread: the robot, the static edges, then the runs period by period."""
    urdf = spec.urdf_path.read_bytes()
    f.attach(spec.urdf_path.name, "application/xml", urdf, t0)
    f.metadata("armtwin", {"robot": spec.name, "urdf": spec.urdf_path.name, **meta})
    f.message(ROBOT_DESCRIPTION, t0, encode_string(urdf.decode()))
    names = list(spec.joint_names)
    measured, commanded = JointStateLayout(names, velocity=True, effort=True), JointStateLayout(names, velocity=True)
    per: list[tuple[str, object, RobotFrames, TFLayout]] = []
    static: list[Transform] = []
    for i, (m, run) in enumerate(runs.items()):
        frames = RobotFrames(spec, (0.0, (i - (len(runs) - 1) / 2) * gap, 0.0))
        static += [Transform(_prefixed(e.parent, m), _prefixed(e.child, m), e.translation, e.rotation)
                   for e in frames.static]
        per.append((m, run, frames, TFLayout([(_prefixed(a, m), _prefixed(b, m)) for a, b in frames.edges])))
    f.message(TF_STATIC, t0, encode_tf(t0, static))
    n_max = max((len(run.t) for _, run, _, _ in per), default=0)
    for k in range(n_max):                       # period by period: the file is in time order
        for m, run, frames, tf in per:
            if k >= len(run.t):
                continue
            ns = t0 + int(round(float(run.t[k]) * 1e9))
            q = run.q[k]
            f.message(f"/{m}{JOINT_STATES}", ns, measured.encode(ns, q, run.qd[k], run.tau[k]))
            f.message(f"/{m}{COMMANDED}", ns, commanded.encode(ns, run.q_ref[k], run.qd_ref[k]))
            if np.all(np.isfinite(q)):
                f.message(f"/{m}{TF}", ns, tf.encode(ns, frames.moving(q)))
                f.message(f"/{m}{TOOL_POSE}", ns, encode_pose_stamped(ns, _prefixed(REPORT_FRAME, m), *frames.flange(q)))
    for m, run, _, _ in per:
        end = t0 + int(round(float(run.t[-1]) * 1e9)) if len(run.t) else t0
        level, text = ((LogLevel.INFO, f"{m}: {len(run.t)} control periods") if run.stable
                       else (LogLevel.ERROR, f"{m}: unstable after {len(run.t)} control periods: {run.message}"))
        f.message(ROSOUT, end, encode_log(end, level, NODE, text))
