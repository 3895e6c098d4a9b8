"""``armtwin bench env [--json] [--steps N] [--num-envs N]``: environment throughput against panda-gym.

In one process, steps ``armtwin/IRB120Reach-v0`` (Cartesian control through armtwin's IK,
articulation joint model — the settings a user trains with) as a single env, as the batched
vector env with ``--num-envs`` robots in one world (``gymnasium.make_vec``, default 16), and
panda-gym's ``PandaReach-v3``, with seeded random actions for the same number of env steps,
resetting at the end of every episode. They run in alternating rounds (so load from other
processes on the machine falls on all) and each is timed by wall clock and by the process's CPU
time. Prints env-steps/s of each and the ratios to panda-gym (per CPU second; JSON keys
``ratio_vs_panda_gym``, ``vector_ratio_vs_panda_gym``, ``vector_ratio_vs_single``). Then each
renders ``--frames`` ``rgb_array`` frames at its default size (armtwin 320×240, panda-gym
720×480) and the frame rates are shown too. With ``--tool N`` the single env is also stepped
with tool N of the built-in table on the flange (``tool=N``: the TCP observed, the IK at the
TCP, the tool's body and mass simulated), and the ratio to the bare flange is shown. With
``--cell FILE|default`` it is also stepped in that workcell (``cell=``: the bodies in the world and
one collision query per step), and the ratio to the robot alone is shown. panda-gym is not a dependency: install it for the
comparison (``pip install panda-gym``); without it only armtwin's numbers are shown.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time


from .cli import CliError, add_json_flag, print_json

ARMTWIN_ID = "armtwin/IRB120Reach-v0"
PANDA_ID = "PandaReach-v3"
#: panda-gym's physics step (PyBullet timestep 1/500 s, 20 substeps per 25 Hz env step)
PANDA_PHYSICS_DT = 0.002
ROUNDS = 4


def register(sub) -> None:
    p = sub.add_parser("env", help="Gymnasium env steps/s: armtwin IRB120Reach vs panda-gym PandaReach")
    p.add_argument("--steps", type=int, default=4000, help="env steps per environment (default 4000)")
    p.add_argument("--num-envs", type=int, default=16,
                   help="robots in the batched vector env (default 16; 0: skip it)")
    p.add_argument("--image-size", type=int, default=84,
                   help="also step the env with rgb image observations of this many pixels a side, for a quarter "
                        "of --steps (default 84; 0: skip it)")
    p.add_argument("--frames", type=int, default=10,
                   help="rgb_array frames rendered per environment at its default size (default 10; 0: skip)")
    p.add_argument("--tool", type=int, default=0, metavar="N",
                   help="also step the single env with tool N of the built-in table on the flange (default 0: skip)")
    p.add_argument("--cell", metavar="FILE|default",
                   help="also step the single env in this workcell (a cell file or 'default')")
    p.add_argument("--armtwin-only", action="store_true",
                   help="measure armtwin alone (without panda-gym, the 'bench' extra, there is nothing to compare)")
    add_json_flag(p)
    p.set_defaults(func=run)


@contextlib.contextmanager
def _quiet_stdout():
    """Silence fd 1 (PyBullet's C code prints its argv there when a client connects)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


class _Runner:
    """One environment stepped with seeded random actions; times accumulated over rounds."""

    def __init__(self, env, seed: int) -> None:
        self.env = env
        self.env.action_space.seed(seed)
        self.env.reset(seed=seed)
        self.steps = 0
        self.wall = 0.0
        self.cpu = 0.0
        self.run(20, timed=False)  # warm-up

    def run(self, n: int, timed: bool = True) -> None:
        env = self.env
        actions = [env.action_space.sample() for _ in range(n)]
        w0, c0 = time.perf_counter(), time.process_time()
        for a in actions:
            _, _, terminated, truncated, _ = env.step(a)
            if terminated or truncated:
                env.reset()
        if timed:
            self.wall += time.perf_counter() - w0
            self.cpu += time.process_time() - c0
            self.steps += n

    def result(self) -> dict:
        return {"steps": self.steps, "wall_s": self.wall, "cpu_s": self.cpu,
                "steps_per_s_wall": self.steps / self.wall, "steps_per_s_cpu": self.steps / self.cpu}


class _VectorRunner(_Runner):
    """A batched vector env stepped with seeded random actions (it resets its envs itself); ``steps``
    counts env steps (vector steps × N)."""

    def run(self, n: int, timed: bool = True) -> None:
        env = self.env
        k = max(1, n // env.num_envs)
        actions = [env.action_space.sample() for _ in range(k)]
        w0, c0 = time.perf_counter(), time.process_time()
        for a in actions:
            env.step(a)
        if timed:
            self.wall += time.perf_counter() - w0
            self.cpu += time.process_time() - c0
            self.steps += k * env.num_envs


def _engine_ceiling(env, env_steps: int, robot_calls: bool = False) -> dict:
    """The batched world's bare engine steps for ``env_steps`` env steps (substeps per control step
    × env_steps / N calls of ``stepSimulation``, nothing else; ``robot_calls``: with each robot's
    drive-set and joint-read call at every one, :meth:`World.engine_steps`): the env-steps/s no
    control loop over this world can pass. Run last: it moves the robots without their drives."""
    base = env.unwrapped
    calls = max(1, env_steps // base.num_envs) * base.world.physics.substeps
    w0, c0 = time.perf_counter(), time.process_time()
    base.world.engine_steps(calls, robot_calls=robot_calls)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    steps = calls // base.world.physics.substeps * base.num_envs
    return {"engine_calls": calls, "steps": steps, "wall_s": wall, "cpu_s": cpu,
            "steps_per_s_wall": steps / wall, "steps_per_s_cpu": steps / cpu}


def _render_rate(make, frames: int) -> dict:
    """Frames per second (wall and CPU) of ``render()`` after random steps, at the env's default size."""
    with _quiet_stdout():
        env = make()
        env.action_space.seed(0)
        env.reset(seed=0)
        frame = env.render()
    wall = cpu = 0.0
    try:
        for _ in range(frames):
            env.step(env.action_space.sample())
            w0, c0 = time.perf_counter(), time.process_time()
            frame = env.render()
            wall += time.perf_counter() - w0
            cpu += time.process_time() - c0
    finally:
        env.close()
    return {"frames": frames, "width": int(frame.shape[1]), "height": int(frame.shape[0]),
            "fps_wall": frames / wall, "fps_cpu": frames / cpu}


def run(args: argparse.Namespace) -> int:
    if args.steps < ROUNDS:
        raise CliError(f"--steps must be at least {ROUNDS}, got {args.steps}")
    if args.frames < 0:
        raise CliError(f"--frames must be >= 0 (0: no rendering), got {args.frames}")
    if not 0 <= args.num_envs <= 1024:
        raise CliError(f"--num-envs must be from 0 (skip the vector env) to 1024, got {args.num_envs}")
    if not (args.image_size == 0 or 16 <= args.image_size <= 256):
        raise CliError(f"--image-size must be from 16 to 256 pixels (0: skip image observations), got {args.image_size}")
    import gymnasium as gym

    from ..envs import gym_options
    from ..envs import registration  # noqa: F401 - registers the ids
    try:
        tool = gym_options.tool("--tool", args.tool)
    except ValueError as exc:
        raise CliError(str(exc).split("; give")[0]) from None
    cell = None
    if args.cell is not None:
        from ..robots import get
        try:
            cell = gym_options.cell("--cell", args.cell, get("irb120"))
        except ValueError as exc:
            raise CliError(str(exc)) from None

    with _quiet_stdout():
        ours = _Runner(gym.make(ARMTWIN_ID, control="cartesian", joint_mode="articulation"), seed=0)
        # like for like: the same 2 ms physics step as panda-gym (it runs 20 x 2 ms per 25 Hz step)
        same = _Runner(gym.make(ARMTWIN_ID, control="cartesian", joint_mode="articulation", physics_dt=PANDA_PHYSICS_DT), seed=0)
        vec = (_VectorRunner(gym.make_vec(ARMTWIN_ID, num_envs=args.num_envs, control="cartesian",
                                          joint_mode="articulation"), seed=0) if args.num_envs else None)
        img = (_Runner(gym.make(ARMTWIN_ID, control="cartesian", joint_mode="articulation", obs_type="rgb",
                                image_size=args.image_size), seed=0) if args.image_size else None)
        tooled = (_Runner(gym.make(ARMTWIN_ID, control="cartesian", joint_mode="articulation", tool=tool), seed=0)
                  if tool is not None else None)
        celled = (_Runner(gym.make(ARMTWIN_ID, control="cartesian", joint_mode="articulation", cell=cell), seed=0)
                  if cell is not None else None)
    panda, panda_error = None, ""
    if not args.armtwin_only:
        try:
            with _quiet_stdout():
                import panda_gym  # noqa: F401 - registers PandaReach-v3
        except ModuleNotFoundError as exc:   # the comparison is the benchmark's point: say how to get it
            from .cli import missing_extra
            raise missing_extra(exc.name or "panda_gym", "bench") from None
        try:
            with _quiet_stdout():
                panda = _Runner(gym.make(PANDA_ID), seed=0)
        except Exception as exc:  # noqa: BLE001 - installed but broken: report it and bench armtwin alone
            panda_error = f"{type(exc).__name__}: {exc}"
    per_round = [args.steps // ROUNDS + (1 if i < args.steps % ROUNDS else 0) for i in range(ROUNDS)]
    for i, n in enumerate(per_round):
        print(f"bench env: round {i + 1}/{ROUNDS} ({n} steps each)", file=sys.stderr)
        ours.run(n)
        same.run(n)
        if vec is not None:
            vec.run(n)
        if img is not None:
            img.run(max(1, n // 4))
        if tooled is not None:
            tooled.run(n)
        if celled is not None:
            celled.run(n)
        if panda is not None:
            panda.run(n)
    res = {"armtwin": {"id": ARMTWIN_ID, "control": "cartesian", "joint_mode": "articulation",
                       "control_freq_hz": 1.0 / ours.env.unwrapped.dt,
                       "physics_substeps": ours.env.unwrapped.physics.substeps,
                       "physics_dt_s": ours.env.unwrapped.dt / ours.env.unwrapped.physics.substeps, **ours.result()},
           "armtwin_same_physics_dt": {"physics_dt_s": same.env.unwrapped.dt / same.env.unwrapped.physics.substeps,
                                       **same.result()}}
    if img is not None:
        res["armtwin_rgb"] = {"image_size": args.image_size, **img.result()}
    if tooled is not None:
        res["armtwin_tool"] = {"tool": args.tool, "name": tool.name, **tooled.result()}
        res["tool_ratio_vs_flange"] = res["armtwin_tool"]["steps_per_s_cpu"] / res["armtwin"]["steps_per_s_cpu"]
        tooled.env.close()
    if celled is not None:
        res["armtwin_cell"] = {"cell": cell.name, **celled.result()}
        res["cell_ratio_vs_alone"] = res["armtwin_cell"]["steps_per_s_cpu"] / res["armtwin"]["steps_per_s_cpu"]
        celled.env.close()
    if vec is not None:
        res["armtwin_vector"] = {"num_envs": args.num_envs, "physics_dt_s": res["armtwin"]["physics_dt_s"],
                                 **vec.result(), "engine_only": _engine_ceiling(vec.env, vec.steps),
                                 "engine_and_robot_calls": _engine_ceiling(vec.env, vec.steps, robot_calls=True)}
        res["vector_ratio_vs_single"] = res["armtwin_vector"]["steps_per_s_cpu"] / res["armtwin"]["steps_per_s_cpu"]
    if args.frames > 0:
        print(f"bench env: rendering {args.frames} frames each", file=sys.stderr)
        res["armtwin"]["render"] = _render_rate(lambda: gym.make(ARMTWIN_ID, render_mode="rgb_array"), args.frames)
    if panda is not None:
        res["panda_gym"] = {"id": PANDA_ID, "physics_dt_s": PANDA_PHYSICS_DT, **panda.result()}
        if args.frames > 0:
            res["panda_gym"]["render"] = _render_rate(lambda: gym.make(PANDA_ID, render_mode="rgb_array"), args.frames)
        res["ratio_vs_panda_gym"] = res["armtwin"]["steps_per_s_cpu"] / res["panda_gym"]["steps_per_s_cpu"]
        res["ratio_vs_panda_gym_wall"] = res["armtwin"]["steps_per_s_wall"] / res["panda_gym"]["steps_per_s_wall"]
        res["ratio_vs_panda_gym_same_physics_dt"] = (res["armtwin_same_physics_dt"]["steps_per_s_cpu"]
                                                     / res["panda_gym"]["steps_per_s_cpu"])
        if vec is not None:
            res["vector_ratio_vs_panda_gym"] = res["armtwin_vector"]["steps_per_s_cpu"] / res["panda_gym"]["steps_per_s_cpu"]
        panda.env.close()
    else:
        res["panda_gym"] = None
        res["ratio_vs_panda_gym"] = None
        res["panda_gym_error"] = panda_error or "--armtwin-only"
    ours.env.close()
    same.env.close()
    if vec is not None:
        vec.env.close()
    if img is not None:
        img.env.close()
    if args.json:
        print_json(res)
        return 0
    a = res["armtwin"]
    print(f"{'environment':34s} {'steps':>7s} {'steps/s wall':>13s} {'steps/s CPU':>12s}")
    print(f"{ARMTWIN_ID + ' (cartesian, artic.)':34s} {a['steps']:7d} {a['steps_per_s_wall']:13.0f} {a['steps_per_s_cpu']:12.0f}"
          f"   physics step {a['physics_dt_s'] * 1000:.1f} ms")
    if vec is not None:
        v = res["armtwin_vector"]
        label = f"  batched, {v['num_envs']} robots in one world"
        print(f"{label:34s} {v['steps']:7d} {v['steps_per_s_wall']:13.0f} {v['steps_per_s_cpu']:12.0f}"
              f"   physics step {v['physics_dt_s'] * 1000:.1f} ms, {res['vector_ratio_vs_single']:.2f}x the single env")
        e = v["engine_only"]
        label = "    its engine alone (the ceiling)"
        print(f"{label:34s} {e['steps']:7d} {e['steps_per_s_wall']:13.0f} {e['steps_per_s_cpu']:12.0f}"
              f"   stepSimulation only: the batched env runs at {v['steps_per_s_cpu'] / e['steps_per_s_cpu']:.2f}x it")
        e = v["engine_and_robot_calls"]
        label = "    + each robot's 2 calls a substep"
        print(f"{label:34s} {e['steps']:7d} {e['steps_per_s_wall']:13.0f} {e['steps_per_s_cpu']:12.0f}"
              f"   drive set + joints read per robot and physics step, nothing else "
              f"({v['steps_per_s_cpu'] / e['steps_per_s_cpu']:.2f}x)")
    if img is not None:
        g = res["armtwin_rgb"]
        label = f"  rgb observations {g['image_size']}x{g['image_size']}"
        print(f"{label:34s} {g['steps']:7d} {g['steps_per_s_wall']:13.0f} {g['steps_per_s_cpu']:12.0f}")
    if tooled is not None:
        t = res["armtwin_tool"]
        label = f"  with tool T{t['tool']} on the flange"
        print(f"{label:34s} {t['steps']:7d} {t['steps_per_s_wall']:13.0f} {t['steps_per_s_cpu']:12.0f}"
              f"   {t['name']}: {res['tool_ratio_vs_flange']:.2f}x the bare flange")
    if celled is not None:
        w = res["armtwin_cell"]
        label = "  in a workcell"
        print(f"{label:34s} {w['steps']:7d} {w['steps_per_s_wall']:13.0f} {w['steps_per_s_cpu']:12.0f}"
              f"   {w['cell']}: {res['cell_ratio_vs_alone']:.2f}x the robot alone")
    c = res["armtwin_same_physics_dt"]
    print(f"{'  same, physics step as panda-gym':34s} {c['steps']:7d} {c['steps_per_s_wall']:13.0f} {c['steps_per_s_cpu']:12.0f}"
          f"   physics step {c['physics_dt_s'] * 1000:.1f} ms")
    if panda is not None:
        b = res["panda_gym"]
        print(f"{'panda-gym ' + PANDA_ID:34s} {b['steps']:7d} {b['steps_per_s_wall']:13.0f} {b['steps_per_s_cpu']:12.0f}"
              f"   physics step {b['physics_dt_s'] * 1000:.1f} ms")
        print(f"ratio armtwin / panda-gym: {res['ratio_vs_panda_gym']:.2f}x per CPU second "
              f"({res['ratio_vs_panda_gym_wall']:.2f}x wall); at the same physics step "
              f"{res['ratio_vs_panda_gym_same_physics_dt']:.2f}x"
              + (f"; batched {res['vector_ratio_vs_panda_gym']:.2f}x" if vec is not None else ""))
    else:
        print(f"panda-gym: not measured ({res['panda_gym_error']})")
    for name, r in (("armtwin", a), ("panda-gym", res["panda_gym"] or {})):
        if "render" in r:
            f = r["render"]
            print(f"render {name:9s} rgb_array {f['width']}x{f['height']}: {f['fps_wall']:.1f} frames/s wall, "
                  f"{f['fps_cpu']:.1f} per CPU second")
    return 0
