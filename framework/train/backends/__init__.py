"""The backend registry: `trainer.backend` names where a run's workers execute.

A backend (a subclass of `framework.train.backends.base.Backend`) starts the
workers, reports how they end, restarts and stops them; the trainer, the
monitor, checkpoints and TensorBoard are the same for every backend. The
registry maps names to modules, imported on first use, so a backend's
dependencies load only when a run chooses it.
"""
from __future__ import annotations

import importlib
from typing import Any

_MODULES: dict[str, str] = {
    "local": "framework.train.backends.local",
    "ray": "framework.train.backends.ray_cluster",
}


def names() -> tuple[str, ...]:
    """The names a config may give as `trainer.backend`."""
    return tuple(sorted(_MODULES))


def backend_class(name: str) -> Any:
    """The Backend subclass registered under name (its module's `BACKEND`); KeyError naming the valid ones."""
    if name not in _MODULES:
        raise KeyError(f"unknown backend {name!r}; known: {', '.join(names())}")
    return importlib.import_module(_MODULES[name]).BACKEND
