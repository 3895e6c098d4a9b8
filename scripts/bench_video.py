"""``armtwin bench video``: frames/s of armtwin's video recorder vs raw ``getCameraImage``.

Both run in one process, in one world, at the same image size, with the same camera and
the same moving robot, in interleaved rounds (raw block, recorder block, …) so that load
from other processes hits both alike. The recorder's frames include the tool-path trail
(programmed and followed), the text overlay and H.264 encoding (finished inside the
timing: the encoder is flushed and closed before the clock stops).

``overhead_fraction`` = recorder time per frame / raw time per frame − 1 (0.05 = 5 %), the
median over the rounds (robust to other processes' load on a shared machine); the ratio of
the totals is reported beside it. The recorder's start (its helper process starts in the
background) and its final encoder flush are spread over the rounds.
``cpu_overhead_fraction`` compares CPU time (this process's threads + the recorder's helper
process and its ffmpeg, which only count once they have exited, i.e. after the recorder is
closed; the helper's start-up is included) — less sensitive to load. The recorder draws and
encodes in that helper process at idle priority, so it spends more CPU than it adds wall time.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from ..envs.config import Renderer, parse_size
from .cli import CliError, add_json_flag, get_robot, print_json


def register(sub) -> None:
    p = sub.add_parser("video", help="video recorder frames/s vs raw getCameraImage (overhead fraction)")
    p.add_argument("--robot", default="irb120", help="robot id (default irb120)")
    p.add_argument("--frames", type=int, default=20, help="frames per method and round (default 20)")
    p.add_argument("--rounds", type=int, default=12, help="interleaved rounds (default 12)")
    p.add_argument("--size", default="640x480", help="WIDTHxHEIGHT pixels (default 640x480)")
    p.add_argument("--renderer", default=Renderer.AUTO.value, choices=[r.value for r in Renderer], help="PyBullet renderer (default auto)")
    add_json_flag(p)
    p.set_defaults(func=run)


def _cpu_time() -> float:
    """CPU seconds used by this process (all threads) and its finished children (the recorder's helper, ffmpeg)."""
    import resource
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def run(args: argparse.Namespace) -> int:
    from ..controllers.kinematics import chain_of, fk_batch
    from ..envs.sim import PhysicsConfig, SimulationError, World
    from ..envs.video import VideoRecorder, camera_for_robot

    spec = get_robot(args.robot)
    try:
        w, h = parse_size(args.size)
    except ValueError as exc:
        raise CliError(f"--size {args.size}: {exc}") from None
    if args.frames < 2 or args.rounds < 1:
        raise CliError("--frames must be >= 2 and --rounds >= 1")
    fps = 30.0
    try:
        world = World(PhysicsConfig(dt=1.0 / fps), renderer=args.renderer)
    except SimulationError as exc:
        raise CliError(str(exc)) from None
    with world:
        robot = world.add_robot(spec)
        cam = camera_for_robot(robot, "iso")
        n = args.frames * args.rounds
        s = np.linspace(0.0, 1.0, 2 * n)
        span = 0.35 * (spec.upper - spec.lower)
        mid = np.clip(spec.home, spec.lower + span, spec.upper - span)
        Q = mid + span * np.sin(2 * np.pi * s)[:, None] * np.linspace(1.0, 0.4, spec.dof)
        planned = fk_batch(chain_of(spec), Q)[:, :3, 3]
        world.render_raw(cam, w, h)  # warm-up (first EGL frame sets up buffers)
        raw_times, rec_times = [], []
        cpu = {"raw": 0.0, "rec": 0.0}
        k = 0

        def timed(kind: str, work):
            """(wall time of ``work()``, its result); its CPU time is added to ``cpu[kind]``."""
            c0 = _cpu_time()
            t0 = time.perf_counter()
            result = work()
            dt = time.perf_counter() - t0
            cpu[kind] += _cpu_time() - c0
            return dt, result

        def block(kind: str, frame) -> float:
            """Wall time of args.frames steps, each ending in ``frame(k)``."""
            def steps() -> None:
                nonlocal k
                for _ in range(args.frames):
                    robot.command(Q[k % len(Q)])
                    world.step()
                    frame(k)
                    k += 1
            return timed(kind, steps)[0]

        def raw_block() -> float:
            return block("raw", lambda _k: world.render_raw(cam, w, h))

        def rec_block(rec) -> float:
            return block("rec", lambda i: rec.capture({"line": f"N{i} G1 X{i}"}))

        def start_recorder(path: Path) -> VideoRecorder:
            rec = VideoRecorder(world, robot, path, camera=cam, fps=fps, size=(w, h),
                                overlay=True, trail=True, progress=False)
            rec.add_planned_path(planned)
            return rec

        with tempfile.TemporaryDirectory() as tmp:
            start_t, rec = timed("rec", lambda: start_recorder(Path(tmp) / "bench.mp4"))
            for r in range(args.rounds):  # alternate the order so that drifting load hits both alike
                if r % 2 == 0:
                    raw_times.append(raw_block())
                    rec_times.append(rec_block(rec))
                else:
                    rec_times.append(rec_block(rec))
                    raw_times.append(raw_block())
            # flushing the encoder is part of the recorder's cost: spread over the rounds
            close_t, _ = timed("rec", rec.close)
            size_bytes = (Path(tmp) / "bench.mp4").stat().st_size
        renderer = world.renderer
    rec_times = [t + (start_t + close_t) / args.rounds for t in rec_times]
    ratios = np.array(rec_times) / np.array(raw_times)
    raw_t, rec_t = sum(raw_times), sum(rec_times)
    raw_fps = n / raw_t
    rec_fps = n / rec_t
    result = {
        "robot": spec.name, "size": [w, h], "renderer": renderer, "frames_per_method": n, "rounds": args.rounds,
        "raw_fps": raw_fps, "recorder_fps": rec_fps,
        "raw_ms_per_frame": 1000 * raw_t / n, "recorder_ms_per_frame": 1000 * rec_t / n,
        "overhead_fraction": float(np.median(ratios) - 1.0),
        "overhead_fraction_total": rec_t / raw_t - 1.0,
        "overhead_fraction_per_round": (ratios - 1.0).tolist(),
        "cpu_overhead_fraction": cpu["rec"] / cpu["raw"] - 1.0 if cpu["raw"] > 0 else None,
        "target_overhead_fraction": 0.10,
        "recorder_start_s": start_t,
        "recorder_close_s": close_t,
        "mp4_bytes": size_bytes,
    }
    if args.json:
        print_json(result)
        return 0
    print(f"video recorder vs raw getCameraImage: {spec.name}, {w}x{h}, {renderer} renderer, "
          f"{n} frames each in {args.rounds} interleaved rounds")
    print(f"  raw getCameraImage        {raw_fps:7.2f} frames/s  ({result['raw_ms_per_frame']:.1f} ms/frame)")
    print(f"  recorder (trail, overlay, H.264)  {rec_fps:7.2f} frames/s  ({result['recorder_ms_per_frame']:.1f} ms/frame)")
    print(f"  overhead {100 * result['overhead_fraction']:+.1f} % (median of rounds; "
          f"{100 * result['overhead_fraction_total']:+.1f} % on the totals)  (target <= 10 %)")
    if result["cpu_overhead_fraction"] is not None:
        print(f"  CPU time overhead {100 * result['cpu_overhead_fraction']:+.1f} % "
              "(this process, the recorder's helper process and ffmpeg)")
    return 0
