"""The algorithm registry: a config's `algorithm.name` picks the plugin that builds and trains the model.

A plugin is an `Algorithm` (see `framework.algorithms.base`) exposed as the
attribute `ALGORITHM` of a module. Built-in ones are imported on first use, so
choosing one algorithm never imports another's dependencies; `register` adds
more at run time (register in a module that worker processes import too when
they are started with spawn or forkserver).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from framework.algorithms.base import Algorithm

_MODULES: dict[str, str] = {
    "a3c": "framework.algorithms.a3c.plugin",
    "hogwild": "framework.algorithms.hogwild.plugin",
}
_LOADED: dict[str, "Algorithm"] = {}


def names() -> tuple[str, ...]:
    """The names a config may give as `algorithm.name`."""
    return tuple(sorted({*_MODULES, *_LOADED}))


def get(name: str) -> "Algorithm":
    """The plugin registered under name; KeyError naming the valid ones otherwise."""
    if name not in _LOADED:
        if name not in _MODULES:
            raise KeyError(f"unknown algorithm {name!r}; known: {', '.join(names())}")
        _LOADED[name] = importlib.import_module(_MODULES[name]).ALGORITHM
    return _LOADED[name]


def register(algorithm: "Algorithm") -> None:
    """Make an algorithm plugin available under its `name`."""
    _LOADED[algorithm.name] = algorithm
