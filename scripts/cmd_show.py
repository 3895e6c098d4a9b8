"""``armtwin show ROBOT --video out.mp4``: a headless video of every joint sweeping its range.

Each joint in turn moves from the ``home`` pose to its upper limit, to its lower limit and
back (smooth cosine legs; revolute joints with more than ±180° of travel sweep ±180° around
home), driven through the one command path (``SimRobot.command`` + ``World.step``) in the
chosen joint model, and recorded with :class:`armtwin.envs.video.VideoRecorder`: camera
preset, programmed (cyan) and followed (magenta) flange paths, overlay with time, joint
values and tool pose. The files written are printed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from .cli import CliError, get_robot, print_json
from .options import add_joint_mode, add_video_options, joint_mode, video_settings


def register(sub) -> None:
    p = sub.add_parser("show", help="render a video of the robot sweeping every joint (headless)")
    p.add_argument("robot", help="robot id (see `armtwin robots`)")
    add_video_options(p, required=True, renderer=True, overlay=True,
                      video_help="output file, required (show renders headless): .mp4 (H.264) or .gif")
    p.add_argument("--seconds", type=float, default=8.0, help="length of the sweep, simulated s (default 8)")
    add_joint_mode(p)
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    p.set_defaults(func=run)


def sweep_waypoints(spec, max_travel: float = np.pi) -> list[tuple[int, np.ndarray]]:
    """Joint waypoints of the sweep: for each joint, home → upper → lower → home.

    Args:
        spec: the robot.
        max_travel: for revolute joints, the largest excursion from home (rad).

    Returns:
        [(joint index, (n,) waypoint)], starting at home.
    """
    home = np.clip(spec.home, spec.lower, spec.upper)
    out: list[tuple[int, np.ndarray]] = [(-1, home.copy())]
    for i in range(spec.dof):
        lo, hi = spec.lower[i], spec.upper[i]
        if not spec.prismatic[i]:
            lo, hi = max(lo, home[i] - max_travel), min(hi, home[i] + max_travel)
        for v in (hi, lo, home[i]):
            q = home.copy()
            q[i] = v
            out.append((i, q))
    return out


def sweep_trajectory(spec, seconds: float, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """The sweep sampled every ``dt`` s: (T,) joint index being swept and (T, n) joints.

    Each leg between waypoints takes time in proportion to the square root of its length
    (short legs do not crawl, long ones do not race) with a cosine ease-in/ease-out, so
    every leg starts and ends at rest.
    """
    wps = sweep_waypoints(spec)
    scale = np.where(spec.prismatic, 10.0, 1.0)  # 0.1 m of stroke weighs like 1 rad
    legs = [(wps[k][0], wps[k - 1][1], wps[k][1]) for k in range(1, len(wps))]
    weights = np.array([np.sqrt(np.max(np.abs((b - a) * scale))) + 0.05 for _, a, b in legs])
    durations = seconds * weights / weights.sum()
    n_steps = int(round(seconds / dt)) + 1
    t = np.arange(n_steps) * dt
    ends = np.cumsum(durations)
    starts = ends - durations
    leg = np.minimum(np.searchsorted(ends, t, side="right"), len(legs) - 1)
    u = np.clip((t - starts[leg]) / durations[leg], 0.0, 1.0)
    s = 0.5 - 0.5 * np.cos(np.pi * u)
    a = np.array([legs[k][1] for k in leg])
    b = np.array([legs[k][2] for k in leg])
    joint = np.array([legs[k][0] for k in leg])
    return joint, a + (b - a) * s[:, None]


def run(args: argparse.Namespace) -> int:
    from ..controllers.kinematics import chain_of, fk_batch
    from ..envs.config import JointMode
    from ..envs.sim import PhysicsConfig, SimulationError, World
    from ..envs.video import VideoRecorder

    spec = get_robot(args.robot)
    video = video_settings(args)
    path = Path(args.video)
    if not (np.isfinite(args.seconds) and 0.1 <= args.seconds <= 600):
        raise CliError(f"--seconds must be between 0.1 and 600, got {args.seconds:g}")
    mode = joint_mode(args)

    dt = 1.0 / 240.0 if mode is not JointMode.KINEMATIC else 1.0 / max(60.0, 2 * video.fps)
    joint, Q = sweep_trajectory(spec, args.seconds, dt)
    try:
        world = World(PhysicsConfig(dt=dt), renderer=video.renderer)
    except SimulationError as exc:
        raise CliError(str(exc)) from None
    with world:
        robot = world.add_robot(spec, mode, q0=Q[0])
        qd = np.gradient(Q, dt, axis=0)
        with VideoRecorder(world, robot, path, camera=video.camera.value, fps=video.fps, size=video.size,
                           overlay=video.overlay, gif=video.gif, expected_duration=(len(Q) - 1) * dt,
                           title=f"{spec.title} · joint sweep · {mode.value}") as rec:
            rec.add_planned_path(fk_batch(chain_of(spec), Q)[:, :3, 3])
            rec.maybe_capture({"label": "home"})
            for k in range(1, len(Q)):
                robot.command(Q[k], qd[k])
                world.step()
                j = joint[k]
                rec.maybe_capture({"label": f"sweeping J{j + 1}" if j >= 0 else "home"})
        result = rec.result
        renderer = world.renderer
        unstable = robot.instability
    if unstable is not None:
        print(f"armtwin: warning: {unstable.message}", file=sys.stderr)
    if args.json:
        print_json({"robot": spec.name, "files": [str(p) for p in result.paths], "frames": result.frames,
                    "fps": result.fps, "size": list(result.size), "seconds": result.duration,
                    "renderer": renderer, "mode": mode.value, "wall_time_s": result.wall_time})
        return 0
    for p in result.paths:
        print(f"wrote {p}")
    return 0
