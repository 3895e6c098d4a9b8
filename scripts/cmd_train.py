"""``armtwin train ENV_ID``: train a policy with stable-baselines3, evaluate it, write the results.

Needs the optional extra ``rl`` (stable-baselines3 on a CPU build of PyTorch). Writes into
``--out`` (default ``runs/<env>-<algo>-s<seed>``):

* ``policy.zip`` — the saved model (``SAC.load`` / ``PPO.load``; SAC + HER needs ``env=``);
* ``vecnormalize.pkl`` — the observation normalisation (``VecNormalize.load``), unless ``--no-normalize``;
* ``learning_curve.png`` — training episode return and success rate against env steps;
* ``eval.mp4`` (and ``eval.gif`` with ``--gif``) — the first evaluation episodes, drawn by armtwin's
  video recorder: the goal (Reach) or the path to follow (Track) in cyan, the tool's path in
  magenta, an overlay with the episode, time, joints, tool pose and distance to the goal;
* ``summary.json`` — settings, wall time, evaluation success rate and mean final error;
* ``monitor.csv`` — one row per training episode (return, length, success).

SAC on a goal environment (a Reach id) uses hindsight experience replay (HER) unless
``--no-her``. Hyperparameters follow the RL Zoo's Reach settings (gamma 0.95, learning
rate 1e-3, batch 256, two 64-unit layers, observations normalised by running statistics);
PyTorch runs on one CPU thread.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from .cli import CliError, add_json_flag, output_folder, print_json

EXTRA_HINT = "stable-baselines3 is not installed; install the rl extra: pip install 'armtwin[rl]' (CPU torch first: pip install torch==2.13.0)"


def register(sub) -> None:
    p = sub.add_parser("train", help="train an RL policy on an armtwin Gymnasium env (needs the rl extra)")
    p.add_argument("env_id", metavar="ENV_ID", help="a registered id, e.g. armtwin/ScaraReach-v0")
    p.add_argument("--algo", choices=("sac", "ppo"), default="sac", help="algorithm (default sac)")
    p.add_argument("--steps", type=int, default=20000, help="environment steps to train (default 20000)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--out", default=None, help="output folder (default runs/<env>-<algo>-s<seed>)")
    p.add_argument("--eval-episodes", type=int, default=20, help="evaluation episodes (default 20)")
    p.add_argument("--video-episodes", type=int, default=3, help="evaluation episodes in the video (default 3; 0: none)")
    p.add_argument("--gif", action="store_true", help="also write the evaluation video as eval.gif")
    p.add_argument("--no-her", action="store_true", help="SAC without hindsight experience replay")
    p.add_argument("--no-normalize", action="store_true",
                   help="do not normalise observations with running statistics (VecNormalize)")
    p.add_argument("--learning-starts", type=int, default=1000, help="SAC: random steps before learning (default 1000)")
    p.add_argument("--env-kw", action="append", default=[], metavar="KEY=VALUE",
                   help="environment keyword argument, repeatable (e.g. control=joint, joint_mode=hinge)")
    add_json_flag(p)
    p.set_defaults(func=run)


def _parse_env_kwargs(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--env-kw {item!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


class _Progress:
    """A stable-baselines3 callback factory printing progress to stderr about every 2 %."""

    @staticmethod
    def make(total: int):
        from stable_baselines3.common.callbacks import BaseCallback

        class Progress(BaseCallback):
            def __init__(self) -> None:
                super().__init__()
                self.every = max(1, total // 50)
                self.t0 = time.perf_counter()

            def _on_step(self) -> bool:
                n = self.num_timesteps
                if n % self.every == 0 or n == total:
                    ep = list(self.model.ep_success_buffer)[-20:]
                    succ = f", success(last {len(ep)}) {np.mean(ep):.0%}" if ep else ""
                    el = time.perf_counter() - self.t0
                    print(f"\rtrain: {n}/{total} steps, {el:.0f} s, {n / max(el, 1e-9):.0f} steps/s{succ}   ",
                          end="", file=sys.stderr, flush=True)
                return True

        return Progress()


def _plot_curve(monitor_csv: Path, png: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [ln.split(",") for ln in monitor_csv.read_text().splitlines()[2:] if ln.strip()]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    if rows:
        r = np.array([float(x[0]) for x in rows])
        steps = np.cumsum([int(float(x[1])) for x in rows])
        succ = np.array([x[3].strip() == "True" for x in rows], dtype=float) if len(rows[0]) > 3 else None
        k = max(1, min(20, len(r) // 5))
        smooth = np.convolve(r, np.ones(k) / k, mode="valid")
        ax.plot(steps, r, color="0.8", lw=0.8, label="episode return")
        ax.plot(steps[k - 1:], smooth, color="C0", lw=1.8, label=f"return, mean of {k}")
        ax.set_xlabel("environment steps")
        ax.set_ylabel("episode return")
        if succ is not None:
            ax2 = ax.twinx()
            ax2.plot(steps[k - 1:], np.convolve(succ, np.ones(k) / k, mode="valid"), color="C2", lw=1.5,
                     label="success rate")
            ax2.set_ylim(-0.02, 1.02)
            ax2.set_ylabel("success rate (final step)")
            ax2.legend(loc="lower right")
        ax.legend(loc="upper left")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def _goal_marks(points: np.ndarray, size: float = 0.015) -> list[np.ndarray]:
    """Polylines that show a task's markers: a 3-D cross at a single goal, the path itself otherwise."""
    if len(points) != 1:
        return [points]
    g = points[0]
    return [np.array([g - size * e, g + size * e]) for e in np.eye(3)]


def _evaluate(model, make_env, prepare, episodes: int, video_episodes: int, video: Path, seed: int,
              gif: bool = False) -> dict:
    """Success rate and final errors over ``episodes``; the first ``video_episodes`` go into a video.

    ``prepare`` maps an observation to what the policy expects (the training normalisation).
    The video is drawn by :class:`~armtwin.envs.video.VideoRecorder` from the env's own world and
    robot (the env's camera and frame rate), one episode after another.
    """
    env = make_env()
    success, dists = [], []
    rec = None
    try:
        u = env.unwrapped
        if video_episodes > 0:
            from ..envs.video import VideoRecorder
            size = (max(640, u.frame_size[0]), max(480, u.frame_size[1]))  # the overlay's rows need 640 px
            rec = VideoRecorder(u.world, u.robot, video, camera=u.camera, fps=min(60.0, 1.0 / u.dt), size=size,
                                gif=gif, progress=False, title=f"{u.robot_spec.title}  ·  {u.joint_mode.value} joints  ·  policy")
        for ep in range(episodes):
            obs, info = env.reset(seed=seed + 10_000 + ep)
            film = rec is not None and ep < video_episodes
            if film:
                rec.clear_trails()
                for line in _goal_marks(u.task.markers()):
                    rec.add_planned_path(line)
            done = False
            while True:
                if film:
                    rec.maybe_capture({"label": f"episode {ep + 1}/{video_episodes}",
                                       "to the goal": f"{1000 * float(info.get('distance', np.nan)):.1f} mm"})
                if done:
                    break
                action, _ = model.predict(prepare(obs), deterministic=True)
                obs, _, terminated, truncated, info = env.step(action)
                done = terminated or truncated
            success.append(bool(info.get("is_success", False)))
            dists.append(float(info.get("distance", np.nan)))
    finally:
        try:
            written = rec.close().paths if rec is not None else ()
        finally:
            env.close()
    return {"episodes": episodes, "success_rate": float(np.mean(success)) if success else 0.0,
            "final_distance_mean_m": float(np.nanmean(dists)) if dists else None, "videos": written}


def run(args: argparse.Namespace) -> int:
    try:
        import stable_baselines3 as sb3
        import torch
    except ImportError:
        raise CliError(EXTRA_HINT) from None
    import gymnasium as gym
    from stable_baselines3.common.monitor import Monitor

    from ..envs import registration

    if args.env_id not in gym.registry or not args.env_id.startswith("armtwin/"):
        raise CliError(f"unknown environment {args.env_id!r}; known: {', '.join(registration.ENV_IDS)}")
    if args.steps < 1:
        raise CliError(f"--steps must be >= 1, got {args.steps}")
    if not 0 <= args.seed < 2 ** 32:
        raise CliError(f"--seed must be between 0 and 2**32 - 1, got {args.seed}")
    if args.eval_episodes < 1 or args.video_episodes < 0:
        raise CliError("--eval-episodes must be >= 1 and --video-episodes >= 0")
    env_kwargs = _parse_env_kwargs(args.env_kw)
    if "render_mode" in env_kwargs:
        raise CliError("--env-kw render_mode: train renders its evaluation video itself; leave render_mode out")
    out = output_folder(args.out or f"runs/{args.env_id.split('/')[-1]}-{args.algo}-s{args.seed}", "--out")
    torch.set_num_threads(1)

    def make_env(**extra):
        try:
            return gym.make(args.env_id, **env_kwargs, **extra)
        except TypeError as exc:
            raise CliError(f"--env-kw: {exc}") from None

    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    monitor_csv = out / "monitor.csv"
    env = DummyVecEnv([lambda: Monitor(make_env(), str(monitor_csv), info_keywords=("is_success",))])
    env.seed(args.seed)
    normalize = not args.no_normalize
    if normalize:
        env = VecNormalize(env, norm_obs=True, norm_reward=False, clip_obs=10.0, gamma=0.95)
    her = args.algo == "sac" and not args.no_her and "Reach" in args.env_id
    if args.learning_starts < 0:
        raise CliError(f"--learning-starts must be >= 0, got {args.learning_starts}")
    episode = env.envs[0].unwrapped.task.episode_steps()
    if her and args.learning_starts <= episode and args.learning_starts < args.steps:
        # HER samples goals from finished episodes: it cannot learn before the first one ends
        raise CliError(f"--learning-starts must exceed the episode length ({episode} steps) when SAC uses HER, "
                       f"got {args.learning_starts}")
    if args.algo == "sac":
        kw = dict(learning_rate=1e-3, gamma=0.95, tau=0.05, batch_size=256, buffer_size=200_000,
                  learning_starts=min(args.learning_starts, args.steps),  # >= steps: no gradient step
                  policy_kwargs=dict(net_arch=[64, 64]))
        if her:
            from stable_baselines3 import HerReplayBuffer
            kw.update(replay_buffer_class=HerReplayBuffer,
                      replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"))
        model = sb3.SAC("MultiInputPolicy", env, seed=args.seed, verbose=0, device="cpu", **kw)
    else:
        n_steps = max(64, min(1024, args.steps))
        model = sb3.PPO("MultiInputPolicy", env, seed=args.seed, verbose=0, device="cpu", n_steps=n_steps,
                        batch_size=64, gamma=0.95, policy_kwargs=dict(net_arch=[64, 64]))
    t0 = time.perf_counter()
    c0 = time.process_time()
    model.learn(total_timesteps=args.steps, callback=_Progress.make(args.steps))
    train_s, train_cpu = time.perf_counter() - t0, time.process_time() - c0
    print(file=sys.stderr)
    policy = out / "policy.zip"
    model.save(policy)
    stats = None
    if normalize:
        stats = out / "vecnormalize.pkl"
        env.save(str(stats))
        env.training = False
    curve = out / "learning_curve.png"
    _plot_curve(monitor_csv, curve, f"{args.env_id} — {args.algo.upper()}{' + HER' if her else ''}, seed {args.seed}")
    print(f"train: evaluating {args.eval_episodes} episodes", file=sys.stderr)
    prepare = env.normalize_obs if normalize else (lambda o: o)
    ev = _evaluate(model, make_env, prepare, args.eval_episodes, args.video_episodes, out / "eval.mp4", args.seed,
                   gif=args.gif)
    env.close()
    summary = {
        "env_id": args.env_id, "env_kwargs": env_kwargs, "algo": args.algo, "her": her, "steps": args.steps,
        "seed": args.seed, "train_wall_s": train_s, "train_cpu_s": train_cpu,
        "eval_episodes": ev["episodes"], "success_rate": ev["success_rate"],
        "final_distance_mean_m": ev["final_distance_mean_m"],
        "normalize": normalize,
        "files": {"policy": str(policy), "normalization": str(stats) if stats else None, "learning_curve": str(curve),
                  "video": str(ev["videos"][0]) if ev["videos"] else None,
                  "gif": str(ev["videos"][1]) if len(ev["videos"]) > 1 else None, "monitor": str(monitor_csv)},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    summary["files"]["summary"] = str(out / "summary.json")
    if args.json:
        print_json(summary)
        return 0
    print(f"{args.env_id}: {args.algo.upper()}{' + HER' if her else ''}, {args.steps} steps in {train_s / 60:.1f} min "
          f"(seed {args.seed})")
    d = ev["final_distance_mean_m"]
    print(f"evaluation: success rate {ev['success_rate']:.0%} over {ev['episodes']} episodes"
          + (f", mean final distance {d * 1000:.1f} mm" if d is not None else ""))
    for path in summary["files"].values():
        if path:
            print(f"wrote {path}")
    return 0
