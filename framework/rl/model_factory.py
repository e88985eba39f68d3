"""`model.factory: module:function`: the user's own network for an actor-critic plugin, built and checked before a
run starts.

The function is called as `function(observation_space, action_space, model_section)`: the observation
space as the model reads it (rl.spaces.ObservationLayout: a Box of its shape and dtype), the env's action
space, and the validated `model` section (its `kwargs` mapping is the factory's own). It returns an
nn.Module with the members of `ActorCriticBase` (subclass it). `check_model` builds nothing itself: it
checks the members and one forward pass on sampled observations, so a module that lacks something is
refused in one line, before any process starts, naming what is missing.
"""
from __future__ import annotations

from typing import Any, Mapping

import gymnasium as gym
import numpy as np

import framework
from framework import nn
from framework.runtime import user_code
from framework.rl.envs.info import EnvInfo
from framework.rl.normalization import RunningMeanStd
from framework.rl.spaces import ObservationLayout
from framework.runtime.schema import ConfigError, one_line, printable

MEMBERS = ("forward", "policy", "policy_array", "forward_rollout", "initial_state", "device")
"""What the worker, the evaluation and the normalisation call on a model besides its parameters."""

SAMPLE_BATCH = 2
"""Observations of the forward pass that checks a model's output shapes."""


def model_space(layout: ObservationLayout) -> gym.spaces.Box:
    """The observation space as the model reads it: a Box of the layout's shape and dtype."""
    if layout.dtype == np.uint8:
        return gym.spaces.Box(0, 255, layout.shape, np.uint8)
    return gym.spaces.Box(-np.inf, np.inf, layout.shape, np.float32)


def build(spec: str, layout: ObservationLayout, action_space: gym.Space, section: Mapping[str, Any]) -> Any:
    """The model that model.factory `spec` builds for these spaces (unchecked); ConfigError if it raises."""
    factory = user_code.load_attribute("model.factory", spec)
    if not callable(factory):
        raise _refuse(spec, f"it is a {type(factory).__name__}; allowed: a function (observation_space, "
                            f"action_space, model_section) -> nn.Module")
    try:
        return factory(model_space(layout), action_space, dict(section))
    except Exception as exc:
        raise _refuse(spec, f"calling it raised {type(exc).__name__}: {exc}") from None


def add_statistics(model: Any, env: EnvInfo) -> Any:
    """model with the RunningMeanStd statistics env.normalize_obs / normalize_reward need, as the built-in
    ActorCritic holds them (`obs_norm` of the observation's shape, `return_norm` of (1,)), where it has none of
    its own: a user's network needs no normalisation code, and the statistics are shared, checkpointed and
    exported as the built-in model's."""
    if not isinstance(model, nn.Module):
        return model  # check_model refuses it
    if env.normalize_obs and getattr(model, "obs_norm", None) is None:
        model.obs_norm = RunningMeanStd(env.layout.shape)
    if env.normalize_reward and getattr(model, "return_norm", None) is None:
        model.return_norm = RunningMeanStd((1,))
    return model


def _refuse(spec: str, problem: str) -> ConfigError:
    return ConfigError(printable(one_line(f"config key 'model.factory': got {spec!r}; {problem}"), limit=1000))


def _shape(value: Any) -> tuple[int, ...] | None:
    return tuple(value.shape) if hasattr(value, "shape") else None


def check_model(spec: str, model: Any, env: EnvInfo) -> None:
    """ConfigError naming the first thing the model lacks: a member of MEMBERS, log_std for Box actions,
    statistics of its own that do not fit (`add_statistics` adds missing ones), or the output shapes of one
    forward pass, in the described environment."""
    layout, head = env.layout, env.action_head
    if not isinstance(model, nn.Module):
        raise _refuse(spec, f"it returned a {type(model).__name__}; allowed: an nn.Module with the members of "
                            f"framework.rl.ActorCriticBase")
    missing = [name for name in MEMBERS if not hasattr(model, name)]
    if missing:
        raise _refuse(spec, f"its {type(model).__name__} lacks {', '.join(missing)}; allowed: a model with the "
                            f"members of ActorCriticBase (subclass it)")
    log_std = getattr(model, "log_std", None)
    if head.continuous and _shape(log_std) != (head.size,):
        raise _refuse(spec, f"its log_std has shape {_shape(log_std)}; allowed: a Parameter of shape "
                            f"({head.size},) for the Box actions")
    for wanted, attribute, shape in ((env.normalize_obs, "obs_norm", layout.shape),
                                     (env.normalize_reward, "return_norm", (1,))):
        statistics = getattr(model, attribute, None)
        if wanted and not (isinstance(statistics, RunningMeanStd) and _shape(statistics.mean) == tuple(shape)):
            raise _refuse(spec, f"its {attribute} is a {type(statistics).__name__}; allowed: a RunningMeanStd "
                                f"of shape {tuple(shape)} (rl.normalization), or none (hogshare adds one)")
    sample = framework.as_tensor(layout.batch([layout.space.sample() for _ in range(SAMPLE_BATCH)]))
    expected = {"policy output": (SAMPLE_BATCH, head.size), "value": (SAMPLE_BATCH,)}
    try:
        with framework.no_grad():
            policy, value, _ = model(sample, model.initial_state(SAMPLE_BATCH))
            rollout = model.forward_rollout(sample.reshape(1, *sample.shape), model.initial_state(SAMPLE_BATCH),
                                            np.ones((1, SAMPLE_BATCH), dtype=np.float32))
    except Exception as exc:
        raise _refuse(spec, f"its forward on {SAMPLE_BATCH} sampled observations of shape {layout.shape} raised "
                            f"{type(exc).__name__}: {exc}") from None
    got = {"policy output": _shape(policy), "value": _shape(value)}
    rollout_got = {"policy output": _shape(rollout[0]), "value": _shape(rollout[1])}
    for what in expected:
        for where, shapes in (("forward", got), ("forward_rollout", rollout_got)):
            if shapes[what] != expected[what]:
                raise _refuse(spec, f"its {where} gave a {what} of shape {shapes[what]} for {SAMPLE_BATCH} "
                                    f"observations; allowed: {expected[what]}")
