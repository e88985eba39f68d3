"""Acting on CuPy's import without causing it: how cuda_ipc registers its reducer and memory pool.

A ``cupy.ndarray`` put on a queue must travel as an IPC handle from the moment
one can exist, that is from CuPy's import, and its memory must come from
hogshare's pool to be exportable (see ``segments``). Yet a CPU process must not
pay CuPy's import (about half a second in every worker) nor make any CUDA call.
So :func:`when_imported` acts at once when CuPy is already loaded, and
otherwise puts a finder first on ``sys.meta_path`` that lets CuPy import as
usual and acts right after. The finder stays there, inert once CuPy is loaded:
it costs one string comparison per import of a module not loaded yet (removing
it could make a concurrent import in another thread skip a finder).
"""
from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any, Callable

Action = Callable[[ModuleType], None]


def when_imported(name: str, action: Action) -> None:
    """Run action(module) once the top-level module `name` is imported (now, if it already is)."""
    module = sys.modules.get(name)
    if module is not None:
        action(module)
        return
    sys.meta_path.insert(0, _Finder(name, action))


class _Finder:
    """Finds `name` through the finders after it and wraps the loader so that action runs after the import."""

    def __init__(self, name: str, action: Action) -> None:
        self._name, self._action = name, action
        self._searching = False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self._name or self._searching:
            return None
        self._searching = True  # the module's import lock serialises imports of this name
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._searching = False
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenLoader(spec.loader, self._action)
        return spec


class _ThenLoader:
    """The module's own loader, then the action; the module sees its own loader while it executes."""

    def __init__(self, loader: Any, action: Action) -> None:
        self._loader, self._action = loader, action

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        self._action(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)
