"""The topics armtwin writes, with their message types: one table for the MCAP logs, the docs
(docs/TELEMETRY.md) and the tests.

Units are ROS's (rad, m, s, N·m) on the standard types; ``/twin/sample`` carries the twin log's
row as the CSV has it (deg, ms). Stamps are the wall-clock time of the run's start plus the
run's own time (simulated time for ``armtwin run``, the sync's clock for ``armtwin sync``).
"""

from __future__ import annotations

from .rosmsg import JOINT_STATE, LOG, PATH, POSE_STAMPED, STRING, TF_MESSAGE, TWIN_SAMPLE, MessageType

__all__ = ["RUN_TOPICS", "TWIN_TOPICS", "JOINT_STATES", "COMMANDED", "TF", "TF_STATIC", "TOOL_POSE",
           "TOOL_POSE_COMMANDED", "GCODE_LINE", "ROSOUT", "ROBOT_DESCRIPTION", "TWIN_SAMPLE_TOPIC", "PLANNED_PATH",
           "TOOL_OUTPUTS", "PENDANT_TOPICS", "compare_topics"]

JOINT_STATES = "/joint_states"
COMMANDED = "/joint_states/commanded"
TF = "/tf"
TF_STATIC = "/tf_static"
TOOL_POSE = "/tool_pose"
TOOL_POSE_COMMANDED = "/tool_pose/commanded"
GCODE_LINE = "/gcode/line"
ROSOUT = "/rosout"
ROBOT_DESCRIPTION = "/robot_description"
TWIN_SAMPLE_TOPIC = "/twin/sample"
PLANNED_PATH = "/path/planned"
TOOL_OUTPUTS = "/tool_outputs"

#: ``armtwin run --log run.mcap``
RUN_TOPICS: dict[str, MessageType] = {
    JOINT_STATES: JOINT_STATE,          # the simulated joints: position rad|m, velocity rad/s|m/s, effort N·m|N
    COMMANDED: JOINT_STATE,             # the program's joints: position, velocity (no effort)
    TF: TF_MESSAGE,                     # every joint's edge, at the simulated joints
    TF_STATIC: TF_MESSAGE,              # world → base_link, base_link → base, last link → tool0 (once)
    TOOL_POSE: POSE_STAMPED,            # the flange (tool0) as the engine has it, frame "base", m
    TOOL_POSE_COMMANDED: POSE_STAMPED,  # the flange at the commanded joints, frame "base", m
    GCODE_LINE: STRING,                 # "12: G1 X40 Y0" whenever the current line changes
    TOOL_OUTPUTS: JOINT_STATE,          # the G-code outputs as named values (the CSV's output columns) at the
                                        # start and whenever one changes; see runlog.OUTPUT_NAMES
    PLANNED_PATH: PATH,                 # the programmed path (chord end points), frame "base", m (once)
    ROSOUT: LOG,                        # start, instability, interruption, end
    ROBOT_DESCRIPTION: STRING,          # the URDF (once; also an MCAP attachment)
}

#: ``armtwin ui ROBOT --live``: the run log's robot topics, one message per pendant update
PENDANT_TOPICS: dict[str, MessageType] = {t: RUN_TOPICS[t] for t in (
    JOINT_STATES,                       # the simulated joints, as for a run
    COMMANDED,                          # the pendant's target joints (and velocities while it runs a program)
    TF, TF_STATIC, TOOL_POSE, TOOL_POSE_COMMANDED,
    GCODE_LINE,                         # the line number while the pendant runs a program
    ROSOUT,                             # the start
    ROBOT_DESCRIPTION)}

#: ``armtwin sync --log twin.mcap``
TWIN_TOPICS: dict[str, MessageType] = {
    TWIN_SAMPLE_TOPIC: TWIN_SAMPLE,     # the twin log's row: STT, time s, virtual/servo/ΔE deg, latency ms, faults
    JOINT_STATES: JOINT_STATE,          # the rig's measured joints (mapped joints), rad; NaN while unknown
    COMMANDED: JOINT_STATE,             # the virtual twin's joints (mapped joints), rad
    TF: TF_MESSAGE,                     # the virtual twin (joints the rig does not carry at home)
    TF_STATIC: TF_MESSAGE,
    ROSOUT: LOG,                        # a fault appearing or clearing, with its sample number
    ROBOT_DESCRIPTION: STRING,
}


def compare_topics(models) -> dict[str, MessageType]:
    """``armtwin compare --log compare.mcap``: per joint model ``m`` (its name, e.g. ``hinge``)
    ``/m/joint_states`` (measured: position, velocity, effort), ``/m/joint_states/commanded`` (the
    reference), ``/m/tf`` (its links, frames named ``m/link_1`` …) and ``/m/tool_pose`` (frame
    ``m/base``); and, shared, ``/tf_static`` (every model's fixed edges), ``/rosout`` (each run's
    end) and ``/robot_description``."""
    out: dict[str, MessageType] = {}
    for m in models:
        out.update({f"/{m}{JOINT_STATES}": JOINT_STATE, f"/{m}{COMMANDED}": JOINT_STATE, f"/{m}{TF}": TF_MESSAGE,
                    f"/{m}{TOOL_POSE}": POSE_STAMPED})
    out.update({TF_STATIC: TF_MESSAGE, ROSOUT: LOG, ROBOT_DESCRIPTION: STRING})
    return out
