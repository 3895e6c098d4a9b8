"""Tuned training hyper-parameters per algorithm and env id, read from ``envs/hyperparams.toml``.

The file is data, versioned with the repository (the rl-baselines3-zoo idea): a ``[<algo>.default]``
table holds the settings every env id starts from, a ``[<algo>."<env id>"]`` table what that id
changes, and ``version`` is raised on every change, so each run's ``summary.json`` names the set it
trained with. ``armtwin train`` reads it; ``--hp KEY=VALUE`` overrides single values for a run.

Every key is checked when the file (or an override) is read: an unknown key, a wrong type or an
out-of-range value is a ValueError naming the table and the key. Nothing here imports PyTorch or
stable-baselines3.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from ..controllers.choices import Choice

__all__ = ["Algo", "TrainSettings", "HYPERPARAMS_FILE", "load_settings", "file_version", "parse_override"]

#: the repository's tuned hyper-parameters
HYPERPARAMS_FILE = Path(__file__).with_name("hyperparams.toml")


class Algo(Choice):
    """The training algorithms of ``armtwin train`` (stable-baselines3)."""

    __label__ = "algorithm"

    SAC = "sac"
    PPO = "ppo"


def _pos_float(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _pos_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _nonneg_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _unit(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1


def _layers(v: Any) -> bool:
    return isinstance(v, list) and 0 < len(v) <= 8 and all(_pos_int(x) and x <= 4096 for x in v)


def _ent_coef(v: Any) -> bool:
    return (isinstance(v, str) and (v == "auto" or v.startswith("auto_"))) or (
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0)


def _flag(v: Any) -> bool:
    return isinstance(v, bool)


#: key -> (check, what the value must be) for the settings every algorithm shares
_COMMON = {
    "steps": (_pos_int, "a whole number of env steps > 0"),
    "normalize": (_flag, "true or false (observations normalised by running statistics)"),
    "norm_epsilon": (_pos_float, "a number > 0 (the variance floor of the normalisation: std >= sqrt of it)"),
    "learning_rate": (_pos_float, "a number > 0"),
    "gamma": (_unit, "a number in (0, 1]"),
    "batch_size": (_pos_int, "a whole number > 0"),
    "net_arch": (_layers, "a list of 1-8 layer widths, e.g. [64, 64]"),
    "env_kwargs": (lambda v: isinstance(v, dict), "a table of env keyword arguments"),
}
#: per algorithm, the keys it takes beyond the common ones
_KEYS = {
    Algo.SAC: {
        "tau": (_unit, "a number in (0, 1]"),
        "buffer_size": (_pos_int, "a whole number > 0"),
        "learning_starts": (_nonneg_int, "a whole number >= 0"),
        "train_freq": (_pos_int, "a whole number > 0"),
        "gradient_steps": (lambda v: isinstance(v, int) and not isinstance(v, bool) and (v > 0 or v == -1),
                           "a whole number > 0, or -1"),
        "ent_coef": (_ent_coef, "'auto', 'auto_<initial value>' or a number >= 0"),
        "her": (_flag, "true or false (hindsight experience replay on goal envs)"),
        "expert_steps": (_nonneg_int, "a whole number >= 0 (first env steps acted by the env's scripted expert)"),
        "expert_noise": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1,
                         "a number in [0, 1] (sd of the noise on the expert's arm action)"),
        "bc_weight": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < math.inf,
                      "a number >= 0 (weight of the behaviour-cloning steps on the expert's demonstrations)"),
        "n_sampled_goal": (_pos_int, "a whole number > 0"),
        "goal_selection_strategy": (lambda v: v in ("future", "final", "episode"), "'future', 'final' or 'episode'"),
    },
    Algo.PPO: {
        "n_steps": (_pos_int, "a whole number > 0"),
        "n_epochs": (_pos_int, "a whole number > 0"),
        "gae_lambda": (_unit, "a number in (0, 1]"),
        "clip_range": (_unit, "a number in (0, 1]"),
        "ent_coef": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0,
                     "a number >= 0"),
    },
}


@dataclass(frozen=True)
class TrainSettings:
    """The hyper-parameters of one training run.

    Attributes:
        algo: the algorithm.
        env_id: the Gymnasium id they are for.
        version: the hyperparams file's version they came from.
        steps: env steps to train.
        normalize: observations normalised by running statistics (VecNormalize).
        her: SAC with hindsight experience replay (goal envs only).
        env_kwargs: keyword arguments of the env (the file's, then the command line's).
        algo_kwargs: keyword arguments of the stable-baselines3 algorithm (``policy_kwargs`` built
            from ``net_arch``; with HER, ``replay_buffer_kwargs`` — the replay buffer class itself
            is :mod:`armtwin.envs.training`'s business).
        overrides: the keys a run changed from the file (``--hp``), for the summary.
        norm_epsilon: the normalisation's variance floor (VecNormalize ``epsilon``): a feature's
            std is taken as at least its square root, so a nearly constant feature is not
            amplified into noise.
        expert_steps: SAC: the first env steps are acted by the env's scripted expert (its
            ``expert()``, e.g. :class:`~armtwin.envs.object_tasks.PickPlaceExpert`) instead of the
            warm-up's random actions or the policy: demonstrations in the replay buffer, which
            the policy learns from off-policy (0: none).
        expert_noise: sd of Gaussian noise added to the expert's arm action (normalised units),
            so the demonstrations cover the states around its path.
        bc_weight: SAC with ``expert_steps``: weight of a behaviour-cloning step of the actor on
            the demonstrations after every gradient step, where the critic rates the expert's
            action above the actor's (0: none).
    """

    algo: Algo
    env_id: str
    version: int
    steps: int
    normalize: bool
    her: bool
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    algo_kwargs: Mapping[str, Any] = field(default_factory=dict)
    overrides: Mapping[str, Any] = field(default_factory=dict)
    norm_epsilon: float = 1e-8
    expert_steps: int = 0
    expert_noise: float = 0.0
    bc_weight: float = 0.0

    @property
    def tag(self) -> str:
        """The algorithm as plots name it: ``"SAC + HER"``, ``"SAC + HER, 30000 expert steps, BC 100"``."""
        tag = f"{self.algo.value.upper()}{' + HER' if self.her else ''}"
        if self.expert_steps:
            tag += f", {self.expert_steps} expert steps" + (f", BC {self.bc_weight:g}" if self.bc_weight else "")
        return tag

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON values, for summary.json."""
        return {"algo": self.algo.value, "env_id": self.env_id, "hyperparams_version": self.version,
                "steps": self.steps, "normalize": self.normalize, "norm_epsilon": self.norm_epsilon, "her": self.her, "expert_steps": self.expert_steps,
                "expert_noise": self.expert_noise, "bc_weight": self.bc_weight, "env_kwargs": dict(self.env_kwargs),
                "algo_kwargs": dict(self.algo_kwargs), "overrides": dict(self.overrides)}


def _check(algo: Algo, where: str, table: Mapping[str, Any]) -> None:
    allowed = {**_COMMON, **_KEYS[algo]}
    for key, value in table.items():
        if key not in allowed:
            raise ValueError(f"{where}: unknown {algo.value} hyper-parameter {key!r}; known: {', '.join(sorted(allowed))}")
        ok, rule = allowed[key]
        if not ok(value):
            raise ValueError(f"{where}: {key} must be {rule}, got {value!r}")


def _read(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from None
    if not isinstance(data.get("version"), int):
        raise ValueError(f"{path}: needs a whole-number 'version'")
    return data


def file_version(path: Path = HYPERPARAMS_FILE) -> int:
    """The ``version`` of a hyperparams file."""
    return int(_read(path)["version"])


def parse_override(text: str) -> tuple[str, Any]:
    """``"learning_rate=3e-4"`` -> ("learning_rate", 0.0003): the value is read as TOML
    (numbers, true/false, lists, quoted text); bare words are text."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"--hp {text!r}: expected KEY=VALUE")
    try:
        return key, tomllib.loads(f"v = {value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        return key, value.strip()


def load_settings(algo: Algo | str, env_id: str, *, overrides: Mapping[str, Any] | None = None,
                  env_kwargs: Mapping[str, Any] | None = None, goal_env: bool = False,
                  path: Path = HYPERPARAMS_FILE) -> TrainSettings:
    """The settings of ``algo`` on ``env_id``: the file's default table, its env table, then ``overrides``.

    Args:
        algo: the algorithm.
        env_id: the Gymnasium id.
        overrides: single values to change (``--hp``), checked like the file's.
        env_kwargs: env keyword arguments given for this run; they update the file's ``env_kwargs``.
        goal_env: the env has a Dict goal observation (HER applies only then).
        path: the hyperparams file.

    Raises:
        ValueError: naming the table (or ``--hp``) and the key at fault.
    """
    algo = Algo.parse(algo)
    data = _read(path)
    tables = data.get(algo.value, {})
    merged: dict[str, Any] = {}
    for name in ("default", env_id):
        table = tables.get(name, {})
        _check(algo, f"{path.name} [{algo.value}.{name!r}]", table)
        merged.update(table)
    overrides = dict(overrides or {})
    _check(algo, "--hp", overrides)
    merged.update(overrides)
    if "steps" not in merged:
        raise ValueError(f"{path.name}: [{algo.value}.default] needs 'steps'")
    env_kw = {**merged.pop("env_kwargs", {}), **dict(env_kwargs or {})}
    steps = merged.pop("steps")
    normalize = merged.pop("normalize", True)
    norm_epsilon = float(merged.pop("norm_epsilon", 1e-8))
    her = bool(merged.pop("her", False)) and algo is Algo.SAC and goal_env
    expert_steps = int(merged.pop("expert_steps", 0))
    expert_noise = float(merged.pop("expert_noise", 0.0))
    bc_weight = float(merged.pop("bc_weight", 0.0))
    replay = {k: merged.pop(k) for k in ("n_sampled_goal", "goal_selection_strategy") if k in merged}
    if her:
        merged["replay_buffer_kwargs"] = replay
    net = merged.pop("net_arch", [64, 64])
    merged["policy_kwargs"] = {"net_arch": list(net)}
    return TrainSettings(algo, env_id, int(data["version"]), int(steps), bool(normalize), her,
                         MappingProxyType(env_kw), MappingProxyType(merged), MappingProxyType(overrides),
                         norm_epsilon, expert_steps, expert_noise, bc_weight)
