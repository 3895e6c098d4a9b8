"""One training run with stable-baselines3 on an armtwin env, and the plots of its results.

:func:`train_run` trains with :class:`~armtwin.envs.hyperparams.TrainSettings`, evaluates the
policy and writes everything into one folder:

* ``monitor.csv`` — one row per training episode (return, length, wall time, success), flushed
  per episode;
* ``policy.zip`` — the model (``SAC.load`` / ``PPO.load``; SAC + HER needs ``env=``);
* ``vecnormalize.pkl`` — the observation normalisation (``VecNormalize.load``), when used;
* ``learning_curve.png`` — training episode return and success rate against env steps;
* ``eval.mp4`` (``eval.gif``) — the first evaluation episodes, drawn by armtwin's recorder;
* ``eval.mcap`` (``mcap=True``) — every evaluation episode as ROS 2 messages, the run log's topics
  (:class:`~armtwin.envs.telemetry.runlog.RunMcapLog`: joints measured and commanded, TF, flange
  pose) one episode after the other on one time axis, with each episode's goal and outcome on
  ``/rosout``;
* ``summary.json`` — settings (with the hyperparams file's version), seed, wall and CPU time,
  steps done, evaluation success rate and mean final error, the files kept.

A run asked to stop (``stop()`` turns true: the command's SIGINT/SIGTERM handler) ends its
training at the next env step, and still saves the policy so far, the normalisation, the curve
and a summary with ``"interrupted": true``; evaluation is skipped (or cut short, with the video
closed so it plays). :func:`plot_seeds` draws several runs' curves in one figure.

Needs the ``rl`` extra (stable-baselines3, PyTorch), imported when a run starts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .hyperparams import Algo, TrainSettings

__all__ = ["train_run", "read_monitor", "plot_curve", "plot_seeds", "success_curve", "EVAL_SEED_OFFSET"]

#: evaluation episode k of a run with seed s is reset with seed s + EVAL_SEED_OFFSET + k (never a training seed)
EVAL_SEED_OFFSET = 10_000

#: ``progress(steps_done, steps_total, seconds, recent_success_or_None)``
Progress = Callable[[int, int, float, "float | None"], None]


def read_monitor(monitor_csv: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(cumulative env steps, episode returns, success 0/1 or None) of a Monitor CSV.

    Rows that are not complete (a run killed while writing) are skipped.
    """
    steps, returns, success = [], [], []
    has_success = False
    try:
        lines = monitor_csv.read_text().splitlines()
    except FileNotFoundError:
        lines = []
    header = lines[1].split(",") if len(lines) > 1 else []
    has_success = "is_success" in header
    total = 0
    for ln in lines[2:]:
        cells = ln.split(",")
        if len(cells) != len(header):
            continue
        try:
            r, n = float(cells[0]), int(float(cells[1]))
        except ValueError:
            continue
        total += n
        steps.append(total)
        returns.append(r)
        if has_success:
            success.append(cells[header.index("is_success")].strip() == "True")
    return (np.array(steps, dtype=int), np.array(returns, dtype=float),
            np.array(success, dtype=float) if has_success else None)


def _window(n: int) -> int:
    return max(1, min(20, n // 5))


def success_curve(steps: np.ndarray, success: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Training success rate (mean over the last up-to-20 episodes) at env steps ``grid`` (NaN before
    the first episode ends)."""
    k = _window(len(success))
    if len(success) == 0:
        return np.full(len(grid), np.nan)
    c = np.cumsum(np.r_[0.0, success])
    rate = np.array([(c[i + 1] - c[max(0, i + 1 - k)]) / min(k, i + 1) for i in range(len(success))])
    idx = np.searchsorted(steps, grid, side="right") - 1
    return np.where(idx >= 0, rate[np.clip(idx, 0, None)], np.nan)


def plot_curve(monitor_csv: Path, png: Path, title: str, *, expert_steps: int = 0) -> None:
    """Episode return (raw and smoothed) and success rate against env steps, as a PNG; the first
    ``expert_steps`` (the scripted expert's demonstrations) shaded."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, r, succ = read_monitor(monitor_csv)
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    if len(r):
        k = _window(len(r))
        ax.plot(steps, r, color="0.8", lw=0.8, label="episode return")
        ax.plot(steps[k - 1:], np.convolve(r, np.ones(k) / k, mode="valid"), color="C0", lw=1.8,
                label=f"return, mean of {k}")
        ax.set_xlabel("environment steps")
        ax.set_ylabel("episode return")
        if expert_steps:
            ax.axvspan(0, expert_steps, color="C1", alpha=0.12, lw=0, label="the expert's demonstrations")
        if succ is not None:
            ax2 = ax.twinx()
            ax2.plot(steps[k - 1:], np.convolve(succ, np.ones(k) / k, mode="valid"), color="C2", lw=1.5,
                     label="success rate")
            ax2.set_ylim(-0.02, 1.02)
            ax2.set_ylabel("training success rate (final step)")
            ax2.legend(loc="lower right")
        ax.legend(loc="upper left")
    else:
        ax.text(0.5, 0.5, "no episode finished", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def plot_seeds(runs: Sequence[tuple[int, Path]], steps: int, png: Path, title: str, *,
               expert_steps: int = 0) -> dict[str, Any]:
    """The training success rate of several seeds in one figure: one line per seed, the mean ± sd band
    (the first ``expert_steps``, the scripted expert's demonstrations, shaded).

    Args:
        runs: (seed, monitor.csv) per run.
        steps: env steps of a run (the x axis).
        png: the figure to write.

    Returns:
        ``{"steps": grid, "mean": ..., "sd": ...}`` of the curves (lists; NaN where no seed has data).
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.linspace(0, steps, 101)
    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=100)
    curves = []
    for seed, csv in runs:
        s, _, succ = read_monitor(csv)
        if succ is None or len(succ) == 0:
            continue
        c = success_curve(s, succ, grid)
        curves.append(c)
        ax.plot(grid, c, lw=1.0, alpha=0.75, label=f"seed {seed}")
    mean = sd = np.full(len(grid), np.nan)
    if curves:
        C = np.array(curves)
        have = np.sum(np.isfinite(C), axis=0)
        with np.errstate(invalid="ignore"):
            mean = np.where(have > 0, np.nansum(C, axis=0) / np.maximum(have, 1), np.nan)
            sd = np.where(have > 1, np.sqrt(np.nansum((C - mean) ** 2, axis=0) / np.maximum(have - 1, 1)), 0.0)
        ax.plot(grid, mean, color="k", lw=2.2, label=f"mean of {len(curves)}")
        ax.fill_between(grid, np.clip(mean - sd, 0, 1), np.clip(mean + sd, 0, 1), color="k", alpha=0.12,
                        label="± 1 sd")
    if expert_steps:
        ax.axvspan(0, expert_steps, color="C1", alpha=0.12, lw=0, label="the expert's demonstrations")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlim(0, steps)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("training success rate (last 20 episodes)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
    return {"steps": grid.tolist(), "mean": mean.tolist(), "sd": sd.tolist()}


def _goal_marks(points: np.ndarray, size: float = 0.015) -> list[np.ndarray]:
    """Polylines that show a task's markers: a 3-D cross at a single goal, the path itself otherwise."""
    if len(points) != 1:
        return [points]
    g = points[0]
    return [np.array([g - size * e, g + size * e]) for e in np.eye(3)]


def _episode_logger(u, path: Path | None, env_id: str):
    """``(log, write)`` for the evaluation's MCAP file at ``path`` (``(None, None)`` without one):
    ``write(t)`` logs the robot of the unwrapped env ``u`` as it is at time ``t`` s."""
    if path is None:
        return None, None
    from .telemetry.runlog import RunMcapLog
    log = RunMcapLog(path, u.robot_spec, base_position=u.robot.base_position, program=env_id,
                     mode=u.joint_mode.value, command="train")
    robot = u.robot

    def write(t: float) -> None:
        st = robot.state()
        q_cmd, qd_cmd = robot.commanded
        log.write(t, None, q_cmd, qd_cmd, st.q, st.qd, st.tau, robot.flange_pose())
    return log, write


def _evaluate(model, make_env, prepare, episodes: int, video_episodes: int, video: Path, seed: int,
              stop: Callable[[], bool], gif: bool = False, mcap: Path | None = None, env_id: str = "",
              size: tuple[int, int] = (640, 480), fps: float | None = None) -> dict:
    """Success rate and final errors over ``episodes`` (fewer when stopped); the first
    ``video_episodes`` go into a video drawn by :class:`~armtwin.envs.video.VideoRecorder`, and
    with ``mcap`` every episode into that MCAP file (:func:`_episode_logger`)."""
    from .telemetry.rosmsg import LogLevel      # armtwin's own encoders: no package of the extra
    env = make_env()
    success, dists = [], []
    rec = log = None
    try:
        u = env.unwrapped
        log, write = _episode_logger(u, mcap, env_id)
        t = 0.0                                  # the log's clock: the episodes one after the other
        if video_episodes > 0:
            from .video import VideoRecorder
            rec = VideoRecorder(u.world, u.robot, video, camera=u.camera, fps=fps or min(60.0, 1.0 / u.dt), size=size,
                                gif=gif, progress=False,
                                title=f"{u.robot_spec.title}  ·  {u.joint_mode.value} joints  ·  policy")
        for ep in range(episodes):
            obs, info = env.reset(seed=seed + EVAL_SEED_OFFSET + ep)
            film = rec is not None and ep < video_episodes
            if film:
                rec.clear_trails()
                for line in _goal_marks(u.task.markers()):
                    rec.add_planned_path(line)
            if log is not None:
                marks = np.asarray(u.task.markers(), dtype=float).reshape(-1, 3) * 1000
                goal = (f"goal ({', '.join(f'{v:.1f}' for v in marks[0])}) mm" if len(marks) == 1
                        else f"a path of {len(marks)} points from ({', '.join(f'{v:.1f}' for v in marks[0])}) mm")
                log.note(t, LogLevel.INFO, f"episode {ep + 1}: {goal}")
                write(t)
            done = False
            while not stop():
                if film:
                    rec.maybe_capture({"label": f"episode {ep + 1}/{video_episodes}",
                                       "to the goal": f"{1000 * float(info.get('distance', np.nan)):.1f} mm"})
                if done:
                    break
                action, _ = model.predict(prepare(obs), deterministic=True)
                obs, _, terminated, truncated, info = env.step(action)
                done = terminated or truncated
                if log is not None:
                    t += u.dt
                    write(t)
            if not done:
                break
            success.append(bool(info.get("is_success", False)))
            dists.append(float(info.get("distance", np.nan)))
            if log is not None:
                ok = success[-1]
                log.note(t, LogLevel.INFO if ok else LogLevel.WARN,
                         f"episode {ep + 1}: {'success' if ok else 'failure'}, {1000 * dists[-1]:.1f} mm from the goal")
                t += u.dt                        # the next episode's start is its own stamp
    finally:
        try:
            written = rec.close().paths if rec is not None else ()
        finally:
            try:
                if log is not None:
                    log.close()
            finally:
                env.close()
    return {"episodes": len(success), "success_rate": float(np.mean(success)) if success else None,
            "final_distance_mean_m": float(np.nanmean(dists)) if dists else None, "videos": [str(p) for p in written]}


def _expert_sac(sb3, expert, settings: TrainSettings, seed: int):
    """SAC whose first ``settings.expert_steps`` env steps are acted by ``expert`` (observation dict ->
    action), with Gaussian ``expert_noise`` on its arm action: demonstrations into the replay buffer
    (HER relabels them as any other episode), learned from off-policy while they last and after.

    With ``bc_weight`` > 0 every gradient step is followed by a behaviour-cloning step of the actor
    on a batch of the demonstrations (weight × the squared distance of its deterministic action to
    the expert's), kept only where the critic rates the expert's action above the actor's (the
    Q-filter of Nair et al. 2018, "Overcoming exploration in RL with demonstrations")."""
    import torch as th

    rng = np.random.default_rng(seed)
    steps, noise, weight = settings.expert_steps, settings.expert_noise, settings.bc_weight

    class ExpertSAC(sb3.SAC):
        def _setup_model(self) -> None:
            super()._setup_model()
            self.demo_obs: list[dict[str, np.ndarray]] = []     # raw observations, as the buffer keeps them
            self.demo_actions: list[np.ndarray] = []
            self._demo_arrays: tuple[dict[str, np.ndarray], np.ndarray] | None = None

        def _excluded_save_params(self) -> list[str]:
            return [*super()._excluded_save_params(), "demo_obs", "demo_actions", "_demo_arrays"]

        def _sample_action(self, learning_starts, action_noise=None, n_envs=1):
            if self.num_timesteps >= steps:
                return super()._sample_action(learning_starts, action_noise, n_envs)
            raw = self._last_original_obs if self._vec_normalize_env is not None else self._last_obs
            acts = []
            for i in range(n_envs):
                obs = {k: np.array(v[i]) for k, v in raw.items()}
                a = np.asarray(expert(obs), dtype=np.float64)
                if weight > 0:                  # cloned: the expert's own action (the noise only explores)
                    self.demo_obs.append(obs)
                    self.demo_actions.append(a.copy())
                a[:3] += noise * rng.standard_normal(3)
                acts.append(np.clip(a, -1.0, 1.0))
            action = np.asarray(acts, dtype=np.float32)
            return action, self.policy.scale_action(action)

        def train(self, gradient_steps: int, batch_size: int = 64) -> None:
            super().train(gradient_steps, batch_size)
            demos = self.demo_obs
            if weight <= 0 or not demos:
                return
            if self._demo_arrays is None or len(self._demo_arrays[1]) != len(demos):   # stacked once they stop growing
                self._demo_arrays = ({k: np.stack([d[k] for d in demos]) for k in demos[0]}, np.stack(self.demo_actions))
            all_obs, all_act = self._demo_arrays
            for _ in range(gradient_steps):
                idx = rng.integers(0, len(demos), size=min(batch_size, len(demos)))
                obs = {k: v[idx] for k, v in all_obs.items()}
                if self._vec_normalize_env is not None:
                    obs = self._vec_normalize_env.normalize_obs(obs)
                obs_t = self.policy.obs_to_tensor(obs)[0]
                act_e = th.as_tensor(all_act[idx], dtype=th.float32)
                act_pi = self.actor(obs_t, deterministic=True)
                with th.no_grad():
                    q_e = th.min(th.cat(self.critic(obs_t, act_e), dim=1), dim=1).values
                    q_pi = th.min(th.cat(self.critic(obs_t, act_pi), dim=1), dim=1).values
                    keep = (q_e > q_pi).float()
                if keep.sum() == 0:
                    continue
                loss = weight * (keep * ((act_pi - act_e) ** 2).sum(dim=1)).sum() / keep.sum()
                self.actor.optimizer.zero_grad()
                loss.backward()
                self.actor.optimizer.step()

    return ExpertSAC


def _make_model(settings: TrainSettings, env, seed: int, goal_env: bool, expert=None):
    import stable_baselines3 as sb3

    kw = dict(settings.algo_kwargs)
    if settings.algo is Algo.SAC:
        kw["learning_starts"] = min(int(kw.get("learning_starts", 100)), settings.steps)  # >= steps: no update
        if settings.her:
            from stable_baselines3 import HerReplayBuffer
            kw["replay_buffer_class"] = HerReplayBuffer
        cls = sb3.SAC if expert is None else _expert_sac(sb3, expert, settings, seed)
        return cls("MultiInputPolicy" if goal_env else "MlpPolicy", env, seed=seed, verbose=0, device="cpu", **kw)
    kw["n_steps"] = max(64, min(int(kw.get("n_steps", 1024)), settings.steps))
    return sb3.PPO("MultiInputPolicy" if goal_env else "MlpPolicy", env, seed=seed, verbose=0, device="cpu", **kw)


def _callback(total: int, stop: Callable[[], bool], progress: Progress | None):
    from stable_baselines3.common.callbacks import BaseCallback

    class _StopAndReport(BaseCallback):
        """Ends learn() when ``stop()`` turns true; reports progress about every 2 %."""

        def __init__(self) -> None:
            super().__init__()
            self.every = max(1, total // 50)
            self.t0 = time.perf_counter()

        def _on_step(self) -> bool:
            n = self.num_timesteps
            if progress is not None and (n % self.every == 0 or n == total):
                buf = getattr(self.model, "ep_success_buffer", None)
                ep = list(buf)[-20:] if buf else []
                progress(n, total, time.perf_counter() - self.t0, float(np.mean(ep)) if ep else None)
            return not stop()

    return _StopAndReport()


def train_run(settings: TrainSettings, seed: int, out: Path, *, stop: Callable[[], bool] = lambda: False,
              progress: Progress | None = None, eval_episodes: int = 20, video_episodes: int = 3,
              gif: bool = False, mcap: bool = False, video_size: tuple[int, int] = (640, 480),
              video_fps: float | None = None) -> dict[str, Any]:
    """Train, save, evaluate; write ``summary.json`` into ``out`` and return it.

    Args:
        settings: hyper-parameters, env id and env keyword arguments.
        seed: seeds the env, the algorithm and PyTorch.
        out: the run's folder (exists, writable).
        stop: polled every env step (training) and every evaluation step: True ends the run early,
            keeping what it has.
        progress: called about every 2 % of the training steps.
        eval_episodes: evaluation episodes (deterministic policy, seeds never used in training).
        video_episodes: how many of them are filmed (0: no video).
        gif: write eval.gif beside eval.mp4.
        mcap: write the evaluation episodes into eval.mcap (needs the ``telemetry`` extra).
        video_size: the evaluation video's (width, height), pixels (the overlay's rows need 640 px).
        video_fps: its frames per simulated second (None: the control rate, at most 60).

    Returns:
        The summary (also in ``out/summary.json``); ``"interrupted"`` says whether ``stop`` ended it,
        ``"files"`` the files kept.
    """
    import gymnasium as gym
    import torch
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from . import registration  # noqa: F401 - registers the ids

    torch.set_num_threads(1)
    env_kwargs = dict(settings.env_kwargs)

    def make_env():
        return gym.make(settings.env_id, **env_kwargs)

    monitor_csv = out / "monitor.csv"
    files: dict[str, str | None] = {"monitor": str(monitor_csv)}
    base = DummyVecEnv([lambda: Monitor(make_env(), str(monitor_csv), info_keywords=("is_success",))])
    env = base
    try:
        base.seed(seed)
        goal_env = isinstance(base.observation_space, gym.spaces.Dict) and "desired_goal" in base.observation_space.spaces
        if settings.her:
            episode = base.envs[0].unwrapped.task.episode_steps()
            starts = int(settings.algo_kwargs.get("learning_starts", 100))
            if starts <= episode and starts < settings.steps:
                # HER samples goals from finished episodes: it cannot learn before the first one ends
                raise ValueError(f"learning_starts must exceed the episode length ({episode} steps) when SAC uses "
                                 f"HER, got {starts}")
        if settings.normalize:
            space = base.observation_space
            keys = ([k for k, sp in space.spaces.items() if not (sp.dtype == np.uint8 and len(sp.shape) == 3)]
                    if isinstance(space, gym.spaces.Dict) else None)   # images are not normalised
            env = VecNormalize(base, norm_obs=True, norm_reward=False, clip_obs=10.0, norm_obs_keys=keys,
                               gamma=float(settings.algo_kwargs.get("gamma", 0.99)), epsilon=settings.norm_epsilon)
        expert = None
        if settings.expert_steps > 0 and settings.algo is Algo.SAC:
            make_expert = getattr(base.envs[0].unwrapped, "expert", None)
            if make_expert is None:
                raise ValueError(f"expert_steps: {settings.env_id} has no scripted expert to demonstrate with "
                                 f"(the PickAndPlace and Push ids have one); set expert_steps = 0")
            expert = make_expert()
        model = _make_model(settings, env, seed, goal_env, expert)
        t0, c0 = time.perf_counter(), time.process_time()
        if not stop():
            model.learn(total_timesteps=settings.steps, callback=_callback(settings.steps, stop, progress))
        train_s, train_cpu = time.perf_counter() - t0, time.process_time() - c0
        interrupted = stop() or model.num_timesteps < settings.steps
        policy = out / "policy.zip"
        model.save(policy)
        files["policy"] = str(policy)
        if settings.normalize:
            stats = out / "vecnormalize.pkl"
            env.save(str(stats))
            env.training = False
            files["normalization"] = str(stats)
        curve = out / "learning_curve.png"
        plot_curve(monitor_csv, curve, f"{settings.env_id} — {settings.tag}, seed {seed}"
                   + (f" (interrupted at {model.num_timesteps} steps)" if interrupted else ""),
                   expert_steps=settings.expert_steps)
        files["learning_curve"] = str(curve)
        ev: dict[str, Any] = {"episodes": 0, "success_rate": None, "final_distance_mean_m": None, "videos": []}
        if not stop():
            prepare = env.normalize_obs if settings.normalize else (lambda o: o)
            ev = _evaluate(model, make_env, prepare, eval_episodes, video_episodes, out / "eval.mp4", seed, stop,
                           gif=gif, mcap=out / "eval.mcap" if mcap else None, env_id=settings.env_id,
                           size=video_size, fps=video_fps)
            interrupted = interrupted or stop()
            if mcap:
                files["log"] = str(out / "eval.mcap")
        if ev["videos"]:
            files["video"] = ev["videos"][0]
            if len(ev["videos"]) > 1:
                files["gif"] = ev["videos"][1]
    finally:
        env.close()
    summary = {
        **settings.as_dict(), "seed": seed, "interrupted": bool(interrupted), "steps_done": int(model.num_timesteps),
        "train_wall_s": train_s, "train_cpu_s": train_cpu,
        "eval_episodes": ev["episodes"], "success_rate": ev["success_rate"],
        "final_distance_mean_m": ev["final_distance_mean_m"], "files": files,
    }
    summary_json = out / "summary.json"
    files["summary"] = str(summary_json)
    summary_json.write_text(json.dumps(summary, indent=2))
    return summary
