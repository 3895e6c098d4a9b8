"""``armtwin replay twin.csv --robot R --video replay.mp4``: a twin-sync log as a video.

Two copies of the robot stand side by side: on the left the virtual twin (the log's
``Virtual_j…`` columns), on the right the servo rig's measured joints (``Servo_j…``). Joints
the rig does not carry stay at the robot's home pose on both. Video time is log time; the
overlay shows the sample number, the twin error, the latency and the fault flags. Samples
with no servo reading (``nan`` while the link is down) keep the last known servo pose.

The log is checked first (:func:`armtwin.envs.rig.read_twin_log`), and its virtual joints must
lie within the robot's ranges (a log recorded with another robot is refused). Servo readings
beyond a range (a rig shaft turned further than the robot can go, real-to-virtual) are drawn
at the limit, with a warning.

The overlay's joint and tool rows are those of the virtual twin as drawn: the joints the log
does not carry are at home there, so the tool pose is not the one of the robot that was
recorded — the overlay says so in the row below them.
"""

from __future__ import annotations

import argparse
import re
import sys

import numpy as np

from .cli import CliError, get_robot
from .cmd_plot import read_log
from .options import add_video_options, same_file, video_settings

#: the servo twin stands this far (m, +y) from the virtual one, in units of the robot's reach
SIDE_BY_SIDE = 1.6
#: a virtual joint of the log may lie this far outside the robot's range, deg (a dynamic joint
#: model can overshoot a limit a little)
RANGE_TOLERANCE_DEG = 1.0


def register(sub) -> None:
    p = sub.add_parser("replay", help="video of a twin-sync log: virtual and servo twins side by side")
    p.add_argument("log", help="twin log written by `armtwin sync --log`: .csv or .mcap")
    p.add_argument("--robot", required=True, help="the robot the log was recorded with")
    add_video_options(p, required=True, renderer=True, cameras=(),
                      video_help="output file: .mp4 (H.264) or .gif; the camera frames both twins")
    p.set_defaults(func=run)


def _joint_numbers(log: dict, spec) -> list[int]:
    """0-based robot joints the log carries (from its ``Virtual_jN`` columns)."""
    nums = sorted(int(m.group(1)) - 1 for k in log if (m := re.fullmatch(r"Virtual_j(\d+)", k)))
    if not nums:
        raise CliError("the log has no Virtual_jN columns")
    bad = [j + 1 for j in nums if not 0 <= j < spec.dof or spec.prismatic[j]]
    if bad:
        raise CliError(f"the log's joints {bad} are not revolute joints of the {spec.name}")
    return nums


def _check_ranges(log, joints: list[int], spec) -> np.ndarray:
    """CliError when a ``Virtual_jN`` value lies outside the robot's range (beyond the tolerance),
    naming its line; returns the servo joints (deg, rows × joints) clipped to the ranges, and
    warns on stderr when some were."""
    lo, hi = np.degrees(spec.lower), np.degrees(spec.upper)
    servo = np.column_stack([log[f"Servo_j{j + 1}"] for j in joints])
    for k, j in enumerate(joints):
        col = f"Virtual_j{j + 1}"
        v = log[col]
        out = np.flatnonzero((v < lo[j] - RANGE_TOLERANCE_DEG) | (v > hi[j] + RANGE_TOLERANCE_DEG))
        if out.size:
            i = int(out[0])
            raise CliError(f"{log.path}: line {log.line_of(i)}, column {col}: {v[i]:g}° is outside J{j + 1}'s "
                           f"range [{lo[j]:g}, {hi[j]:g}]° of the {spec.name} (was the log recorded with this robot?)")
    clipped = np.clip(servo, lo[joints], hi[joints])
    n = int(np.sum(np.any(np.abs(clipped - servo) > RANGE_TOLERANCE_DEG, axis=1)))  # NaN compares False
    if n:
        print(f"armtwin: warning: {n} sample(s) of the log have a servo joint beyond the {spec.name}'s range; "
              f"the servo twin is drawn at the limit there", file=sys.stderr)
    return clipped


def _num(v: float, fmt: str, unit: str) -> str:
    return f"{v:{fmt}}{unit}" if np.isfinite(v) else "n/a"


def _pose_note(joints: list[int], spec) -> str:
    """The overlay row under the recorder's joint and tool rows: whose pose they are, and that
    the joints the log does not carry are at home in it (the tool pose is not the recorded robot's)."""
    other = [i + 1 for i in range(spec.dof) if i not in joints]
    if not other:
        return "joint and tool rows above: the virtual twin (left)"
    rng = f"J{other[0]}-J{other[-1]}" if other == list(range(other[0], other[-1] + 1)) and len(other) > 1 \
        else ", ".join(f"J{i}" for i in other)
    return f"{rng} not in the log, drawn at home; tool pose above is not the real one"


def run(args: argparse.Namespace) -> int:
    from ..envs.sim import Camera, JointMode, PhysicsConfig, World
    from ..envs.video import VideoRecorder
    spec = get_robot(args.robot)
    video = video_settings(args)
    if same_file(args.video, args.log):
        raise CliError(f"--video {args.video}: is the log itself; give another file name")
    log = read_log(args.log)  # checked: STT, Time, finite values, fault names
    joints = _joint_numbers(log, spec)
    t = log["Time"]
    virt = np.radians(np.column_stack([log[f"Virtual_j{j + 1}"] for j in joints]))
    servo = np.radians(_check_ranges(log, joints, spec))
    dt = float(np.median(np.diff(t))) if len(t) > 1 else 1.0 / video.fps
    offset = SIDE_BY_SIDE * spec.reach
    world = World(PhysicsConfig(dt=max(dt, 1e-4)), renderer=video.renderer)
    try:
        a = world.add_robot(spec, JointMode.KINEMATIC)
        b = world.add_robot(spec, JointMode.KINEMATIC, position=(0.0, offset, 0.0))
        r = spec.reach
        # a three-quarter view from the front right, far and narrow, so both twins are seen from
        # nearly the same angle (a near, wide camera showed the left one end-on)
        camera = Camera((0.25 * r, offset / 2, 0.3 * max(r, 0.6)), 3.6 * r + 0.6, azimuth=-40.0, elevation=20.0, fov=30.0)
        q_virtual, q_servo = spec.home.copy(), spec.home.copy()
        note = _pose_note(joints, spec)
        with VideoRecorder(world, a, args.video, camera=camera, fps=video.fps, size=video.size, trail=False, gif=video.gif,
                           expected_duration=float(t[-1] - t[0]), title=f"{spec.title} twin: virtual (left) | servo (right)") as rec:
            for k in range(len(t)):
                q_virtual[joints] = virt[k]
                ok = np.isfinite(servo[k])
                q_servo[np.asarray(joints)[ok]] = servo[k][ok]
                a.command(q_virtual)
                b.command(q_servo)
                world.step()
                err = " ".join(f"J{j + 1} {_num(log[f'Error_j{j + 1}'][k], '+.2f', '°')}" for j in joints)
                rec.maybe_capture({"label": f"STT {int(log['STT'][k])}", "note": note, "error": err,
                                   "latency": _num(log["Latency_ms"][k], ".1f", " ms"), "fault": log["Fault"][k]})
    finally:
        world.close()
    print(f"replayed {len(t)} samples ({t[-1] - t[0]:.1f} s) of {args.log}", file=sys.stderr)
    for p in rec.result.paths:
        print(p)
    return 0
