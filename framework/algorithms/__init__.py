"""The algorithm registry: a config's `algorithm.name` picks the plugin that builds and trains the model.

A plugin is an `Algorithm` (see `framework.runtime.algorithm`) exposed as the
attribute `ALGORITHM` of a module. Built-in ones are imported on first use, so
choosing one algorithm never imports another's dependencies; `register` adds
more at run time (register in a module that worker processes import too when
they are started with spawn or forkserver). A config may also name a plugin
as `module:PluginClass` (an Algorithm subclass, or an instance): `get` imports
it (see `user_code`) in every process that asks, workers included.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from framework.runtime.algorithm import Algorithm

_MODULES: dict[str, str] = {
    "a3c": "framework.algorithms.a3c.plugin",
    "appo": "framework.algorithms.appo.plugin",
    "hogwild": "framework.algorithms.hogwild.plugin",
    "impala": "framework.algorithms.impala.plugin",
}
_LOADED: dict[str, "Algorithm"] = {}


def names() -> tuple[str, ...]:
    """The registered names a config may give as `algorithm.name` (besides module:PluginClass)."""
    return tuple(sorted({*_MODULES, *(n for n in _LOADED if not is_spec(n))}))


def is_spec(name: str) -> bool:
    """Whether an algorithm.name is of the form module:PluginClass (checked without importing anything)."""
    from framework.runtime import user_code

    return user_code.ATTRIBUTE_SPEC.fullmatch(name) is not None


def _load_spec(name: str) -> "Algorithm":
    """The plugin that algorithm.name `module:PluginClass` names (imported; instantiated if a class); ConfigError
    when it is neither an Algorithm subclass nor an instance."""
    from framework.runtime import user_code
    from framework.runtime.algorithm import Algorithm
    from framework.runtime.schema import ConfigError

    found = user_code.load_attribute("algorithm.name", name)
    if isinstance(found, type) and issubclass(found, Algorithm):
        found = found()
    if not isinstance(found, Algorithm):
        raise ConfigError(f"config key 'algorithm.name': got {name!r}, a {type(found).__name__}; allowed: a "
                          f"subclass of framework.runtime.algorithm.Algorithm, or an instance of one")
    return found


def get(name: str) -> "Algorithm":
    """The plugin registered (or, for module:PluginClass, named) under name; KeyError naming the valid ones
    otherwise."""
    if name not in _LOADED:
        if name not in _MODULES and is_spec(name):
            _LOADED[name] = _load_spec(name)
            return _LOADED[name]
        if name not in _MODULES:
            raise KeyError(f"unknown algorithm {name!r}; known: {', '.join(names())}")
        _LOADED[name] = importlib.import_module(_MODULES[name]).ALGORITHM
    return _LOADED[name]


def register(algorithm: "Algorithm") -> None:
    """Make an algorithm plugin available under its `name`."""
    _LOADED[algorithm.name] = algorithm
