"""What an `env.id` names, and building it: a gymnasium id, module:EnvId or module:Factory.

`env_id_problem` checks the form without importing anything (the schema's
check); `env_source` finds what an id names, importing the module of a
module:name form through framework.runtime.user_code; `make_env` builds it,
raising `EnvBuildError` (envs.faults) naming the real cause and the config
key at fault.
"""
from __future__ import annotations

import importlib
import importlib.util
import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import gymnasium as gym

from framework.rl.envs.atari import ALE_ENTRY_POINT, ATARI_ID
from framework.rl.envs.faults import EnvBuildError, build_problem
from framework.runtime import user_code
from framework.runtime.schema import ConfigError

_GYM_ID = r"[\w./-]+"


def env_id_problem(env_id: str) -> str | None:
    """None when env_id has one of the forms of env.id (checked without importing anything), else what is allowed.

    The forms: a gymnasium id (CartPole-v1, ALE/Breakout-v5), module:EnvId (the module registers EnvId when
    imported) and module:Factory (an Env subclass or a callable that returns an Env; env.kwargs go to it).
    """
    module, sep, name = env_id.partition(":")
    if re.fullmatch(_GYM_ID, env_id) or (sep and user_code.ATTRIBUTE_SPEC.fullmatch(f"{module}:x")
                                         and re.fullmatch(_GYM_ID, name)):
        return None
    return "a gymnasium environment id (e.g. CartPole-v1, ALE/Breakout-v5), module:EnvId or module:Factory"


@dataclass(frozen=True)
class EnvSource:
    """What an env.id names, found: a gymnasium id for gym.make, or a factory to call; the kwargs for either.

    An ALE id (ALE/Breakout-v5, BreakoutNoFrameskip-v4) becomes `hogshare/Atari-v0` with the id as its game:
    the A3C/DQN preprocessing and the convolutional model, rl-zoo's convention.
    """

    env_id: str
    gym_id: str | None
    factory: Callable[..., gym.Env] | None
    kwargs: Mapping[str, Any]


def env_source(env_id: str, kwargs: Mapping[str, Any] | None = None) -> EnvSource:
    """Find what env_id names (importing the module of a module:name form: see framework.runtime.user_code);
    ConfigError when the module cannot be imported or names nothing usable."""
    kwargs = dict(kwargs or {})
    module, _, name = env_id.rpartition(":")
    if module:
        imported = user_code.import_module("env.id", env_id, module)
        factory = user_code.find_attribute(imported, name) if user_code.ATTRIBUTE_SPEC.fullmatch(f"m:{name}") \
            else None
        if factory is not None:
            if not callable(factory):
                raise ConfigError(f"config key 'env.id': got {env_id!r}, a {type(factory).__name__}; allowed: a "
                                  f"gymnasium.Env subclass or a callable that returns a gymnasium.Env")
            return EnvSource(env_id, None, factory, kwargs)
        if name not in gym.envs.registry:
            raise ConfigError(f"config key 'env.id': got {env_id!r}; allowed: module:EnvId with an id the module "
                              f"registers, or module:Factory with a name it defines (module {module!r} has "
                              f"neither {name!r})")
    if name not in gym.envs.registry and importlib.util.find_spec("ale_py") is not None:
        importlib.import_module("ale_py")  # registers the ALE ids
    spec = gym.envs.registry.get(name)
    if spec is not None and spec.entry_point == ALE_ENTRY_POINT:
        return EnvSource(env_id, ATARI_ID, None, {"game": name, **kwargs})
    return EnvSource(env_id, name, None, kwargs)


def make_env(env_id: str, kwargs: Mapping[str, Any] | None = None, rank: int = 0) -> gym.Env:
    """The environment env_id names (see env_source), built with kwargs (gym.make without the passive checker);
    EnvBuildError naming the real cause if it cannot be built."""
    source = env_source(env_id, kwargs)
    with warnings.catch_warnings(record=True) as caught:  # shown only for an env that builds: the error says it
        try:
            if source.factory is None:
                env = gym.make(source.gym_id, disable_env_checker=True, **source.kwargs)
            else:
                env = source.factory(**source.kwargs)
        except (Exception, SystemExit) as exc:  # sys.exit() in an env's __init__ ends no process
            raise EnvBuildError(env_id, rank, *build_problem(env_id, kwargs or {}, exc)) from exc
    for warning in caught:
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    if not isinstance(env, gym.Env):
        raise EnvBuildError(env_id, rank, "env.id", f"got {env_id!r}, which returned a {type(env).__name__}; "
                            f"allowed: a gymnasium.Env subclass or a callable that returns a gymnasium.Env")
    for name in ("observation_space", "action_space"):
        space = getattr(env, name, None)
        if not isinstance(space, gym.spaces.Space):
            env.close()
            raise EnvBuildError(env_id, rank, "env.id", f"got {env_id!r}, whose {name} is "
                                f"{'missing' if space is None else f'a {type(space).__name__}'}; allowed: an Env "
                                f"that sets observation_space and action_space to gymnasium spaces")
    return env

