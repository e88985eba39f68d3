"""A run's environment described once: what every process needs to know of it, without building one.

As sample-factory's EnvInfo: the main process builds one environment of the
config's `env` section, reads its spaces as the model reads them (rl.spaces:
`ObservationLayout`, `ActionHead`), resets it once (seeded with the run's
seed) to see that its first observation fits its space, and closes it. The
description (the spaces and the section's settings: a few kilobytes
pickled) then reaches every process of the run as part of `ctx.shared`, so a
learner builds no environment and a worker builds only the ones it steps,
straight into its vector env or loop (`EnvBatch`). `describe` is the one
place the `env` section is read into settings; `env_info` describes a config
once per process (check_config, build_model, build_shared, evaluation and
acting in the main process all get the same description, and only the first
builds an environment).

An environment that cannot be built, has a space that cannot be read, raises
in its first reset or gives a first observation its space does not describe
is refused here (ConfigError naming the real cause and the config key at
fault: env.id or env.kwargs): an env every worker would fail with at once is
refused before a run starts, not after burning its restarts.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

import gymnasium as gym

from framework.rl.envs.extras import missing_extra_message
from framework.rl.envs.faults import EnvBuildError
from framework.rl.envs.ids import make_env
from framework.rl.spaces import ActionHead, ObservationLayout, SpaceError
from framework.runtime.schema import ConfigError, one_line, short_repr

_DESCRIBED: dict[str, "EnvInfo"] = {}
"""This process's descriptions, by the env section and seed they describe (see env_info)."""


@dataclass(frozen=True)
class EnvInfo:
    """A run's environment: its id and kwargs, how its spaces are read, and the `env` section's settings."""

    id: str
    kwargs: Mapping[str, Any]
    layout: ObservationLayout
    action_head: ActionHead
    envs_per_worker: int
    vectorize: bool
    sign_reward: bool
    life_loss_done: bool
    normalize_obs: bool
    normalize_reward: bool
    clip_obs: float
    clip_reward: float

    @classmethod
    def describe(cls, section: Mapping[str, Any], seed: int) -> "EnvInfo":
        """The environment of a validated `env` section, built, reset once with seed and closed (see the module
        docstring); ConfigError when it is refused."""
        env_id = section["id"]
        missing = missing_extra_message(env_id)
        if missing:
            raise ConfigError(f"config key 'env.id': {missing}")
        try:
            env = make_env(env_id, section["kwargs"])
        except EnvBuildError as exc:
            raise ConfigError(f"config key '{exc.key}': {exc.problem}") from None
        try:
            layout, head = ObservationLayout.of(env.observation_space), ActionHead(env.action_space)
            _first_observation(env, layout, section, seed)
        except SpaceError as exc:
            raise ConfigError(f"config key 'env.id': got {env_id!r} with {exc}") from None
        finally:
            env.close()
        return cls(env_id, dict(section["kwargs"]), layout, head, section["envs_per_worker"], section["vectorize"],
                   section["sign_reward"], section["life_loss_done"], section["normalize_obs"],
                   section["normalize_reward"], section["clip_obs"], section["clip_reward"])


def _first_observation(env: gym.Env, layout: ObservationLayout, section: Mapping[str, Any], seed: int) -> None:
    """Reset env once (seeded) and read its observation as workers do; ConfigError if either fails."""
    shown = f"got {section['id']!r} with env.kwargs {short_repr(section['kwargs'])}"
    try:
        observation = env.reset(seed=seed)[0]
    except (Exception, SystemExit) as exc:
        raise ConfigError(f"config key 'env.id': {shown}, which raised in its first reset: {type(exc).__name__}: "
                          f"{one_line(exc)}") from None
    try:
        layout.batch([observation])
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise ConfigError(f"config key 'env.id': {shown}, whose first observation does not fit its observation "
                          f"space {layout.space} ({type(exc).__name__}: {one_line(exc)})") from None


def env_info(config: Mapping[str, Any]) -> EnvInfo:
    """The description of a validated config's environment, made the first time this process asks for it (one
    environment built) and the same one after that; ConfigError when it is refused (asked again, it is tried
    again)."""
    key = json.dumps([config["env"], config["seed"]], sort_keys=True, default=repr)
    if key not in _DESCRIBED:
        _DESCRIBED[key] = EnvInfo.describe(config["env"], config["seed"])
    return _DESCRIBED[key]
