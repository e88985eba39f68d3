"""What goes wrong with an environment, and whose fault it is: the errors that name the env id and the worker.

An environment that raises (or calls sys.exit) while it is built, reset,
stepped or rendered is reported as `EnvError` naming the env id and the
worker's rank. One that cannot be built at all is an `EnvBuildError` naming
the real cause and the config key at fault (`build_problem`): a missing
module and the extra that brings it, gymnasium's own hint for an unknown or
deprecated id, and env.kwargs only for a TypeError of arguments the env does
not take (a regex over the TypeError's text tells those from a TypeError
raised inside the env's own code).
"""
from __future__ import annotations

import re
from typing import Any, Mapping

import gymnasium as gym

from framework.rl.envs.extras import EXTRAS, install_hint
from framework.runtime.schema import short_repr

_KWARGS_TYPE_ERROR = re.compile(r"(unexpected|multiple values for|missing \d+ required|takes \d+ positional)"
                                r".*argument|argument.*(unexpected|required)")
"""The TypeErrors of a call with keyword arguments it does not take (the only ones that blame env.kwargs)."""


class EnvError(RuntimeError):
    """An environment that failed to build, reset or step; names the env id and the worker rank."""


class NoFrames(EnvError):
    """An environment asked to render that gives no rgb_array frames (it has no such render mode)."""


class EnvBuildError(EnvError):
    """An env.id that cannot be built: `key` is the config key at fault (env.id or env.kwargs), `problem` the
    rest of the one-line message, which names the real cause."""

    def __init__(self, env_id: str, rank: int, key: str, problem: str):
        super().__init__(f"environment {env_id} (worker {rank}) could not be built: {problem}")
        self.key, self.problem = key, problem


def _missing_module(exc: BaseException) -> str | None:
    """The module whose absence made exc (an ImportError, or gymnasium's DependencyNotInstalled from one)."""
    while exc is not None:
        if isinstance(exc, ImportError) and exc.name:
            return exc.name
        exc = exc.__cause__ or exc.__context__
    return None


def build_problem(env_id: str, kwargs: Mapping[str, Any], exc: BaseException) -> tuple[str, str]:
    """(config key at fault, the rest of the message) for an exception raised while building env_id."""
    shown, text = repr(env_id), str(exc).split(" was raised from the environment creator")[0]
    if isinstance(exc, SystemExit):
        return "env.id", (f"got {shown} with env.kwargs {short_repr(dict(kwargs))}, which called sys.exit({exc.code!r}) "
                          f"while being built")
    if isinstance(exc, TypeError) and _KWARGS_TYPE_ERROR.search(text):
        return "env.kwargs", (f"got {short_repr(dict(kwargs))}; allowed: keyword arguments {env_id} "
                              f"accepts (TypeError: {text})")
    if isinstance(exc, gym.error.UnregisteredEnv) or isinstance(exc, gym.error.DeprecatedEnv):
        return "env.id", (f"got {shown}; allowed: a registered gymnasium environment id, e.g. CartPole-v1, "
                          f"Acrobot-v1, Pendulum-v1, ALE/Breakout-v5, or module:EnvId or module:Factory "
                          f"(gymnasium: {exc})")
    module = _missing_module(exc)
    if module is not None:
        extras = [extra for extra, modules in EXTRAS.items() if module in modules]
        install = f" (the '{extras[0]}' extra: {install_hint(extras[0])})" if extras else ""
        return "env.id", f"got {shown}, which needs module {module!r}, not installed{install}"
    return "env.id", (f"got {shown} with env.kwargs {short_repr(dict(kwargs))}, which could not be built: "
                      f"{type(exc).__name__}: {text}")
