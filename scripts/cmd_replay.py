"""``armtwin replay twin.csv --robot R --video replay.mp4``: a twin-sync log as a video.

Two copies of the robot stand side by side: on the left the virtual twin (the log's
``Virtual_j…`` columns), on the right the servo rig's measured joints (``Servo_j…``). Joints
the rig does not carry stay at the robot's home pose on both. Video time is log time; the
overlay shows the sample number, the twin error, the latency and the fault flags. Samples
with no servo reading (``nan`` while the link is down) keep the last known servo pose.
"""

from __future__ import annotations

import argparse
import re
import sys

import numpy as np

from .cli import CliError, get_robot, output_file
from .cmd_plot import read_log

#: the servo twin stands this far (m, +y) from the virtual one, in units of the robot's reach
SIDE_BY_SIDE = 1.6


def register(sub) -> None:
    p = sub.add_parser("replay", help="video of a twin-sync log: virtual and servo twins side by side")
    p.add_argument("log", help="CSV written by `armtwin sync --log`")
    p.add_argument("--robot", required=True, help="the robot the log was recorded with")
    p.add_argument("--video", required=True, help="output .mp4 or .gif")
    p.add_argument("--fps", type=float, default=30.0, help="video frames per second (default 30)")
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


def run(args: argparse.Namespace) -> int:
    from ..envs.sim import Camera, JointMode, PhysicsConfig, World
    from ..envs.video import VideoRecorder
    spec = get_robot(args.robot)
    output_file(args.video, "--video", (".mp4", ".gif"))
    if not (0 < args.fps <= 240):
        raise CliError("--fps must be in (0, 240]")
    log = read_log(args.log)
    joints = _joint_numbers(log, spec)
    t = log["Time"]
    if not np.all(np.isfinite(t)) or np.any(np.diff(t) < 0):
        raise CliError(f"{args.log}: the Time column must be finite and never go back")
    virt = np.radians(np.column_stack([log[f"Virtual_j{j + 1}"] for j in joints]))
    servo = np.radians(np.column_stack([log[f"Servo_j{j + 1}"] for j in joints]))
    dt = float(np.median(np.diff(t))) if len(t) > 1 else 1.0 / args.fps
    offset = SIDE_BY_SIDE * spec.reach
    world = World(PhysicsConfig(dt=max(dt, 1e-4)), renderer="auto")
    try:
        a = world.add_robot(spec, JointMode.KINEMATIC)
        b = world.add_robot(spec, JointMode.KINEMATIC, position=(0.0, offset, 0.0))
        r = spec.reach
        # a three-quarter view from the front right, far and narrow, so both twins are seen from
        # nearly the same angle (a near, wide camera showed the left one end-on)
        camera = Camera((0.25 * r, offset / 2, 0.3 * max(r, 0.6)), 3.6 * r + 0.6, azimuth=-40.0, elevation=20.0, fov=30.0)
        q_virtual, q_servo = spec.home.copy(), spec.home.copy()
        with VideoRecorder(world, a, args.video, camera=camera, fps=args.fps, trail=False,
                           expected_duration=float(t[-1] - t[0]), title=f"{spec.title} twin: virtual (left) | servo (right)") as rec:
            for k in range(len(t)):
                q_virtual[joints] = virt[k]
                ok = np.isfinite(servo[k])
                q_servo[np.asarray(joints)[ok]] = servo[k][ok]
                a.command(q_virtual)
                b.command(q_servo)
                world.step()
                err = " ".join(f"J{j + 1} {log[f'Error_j{j + 1}'][k]:+.2f}°" for j in joints)
                rec.maybe_capture({"label": f"STT {int(log['STT'][k])}", "error": err,
                                   "latency": f"{log['Latency_ms'][k]:.1f} ms", "fault": log["Fault"][k]})
    finally:
        world.close()
    print(f"replayed {len(t)} samples ({t[-1] - t[0]:.1f} s) of {args.log}", file=sys.stderr)
    for p in rec.result.paths:
        print(p)
    return 0
