"""The user's own code that a config names: `module:attribute` in `env.id`, `model.factory` and `algorithm.name`.

These three keys are the only way a config (and so a run directory's
config.yaml) makes hogshare import a module, and `framework.train.config`
imports none until the config has passed every check that needs no import.
Modules are found as `python -m` finds them: the current directory first,
then the installed modules. The console scripts (`train`, `evaluate`) do not
put the current directory on sys.path themselves, so `import_module` does,
in this one place, before the first import of a user's module. Worker
processes find the same modules: spawn and forkserver children start with
the parent's sys.path (multiprocessing's preparation data), and the
directory is added here before any worker starts; fork copies it.
"""
from __future__ import annotations

import importlib
import os
import re
import sys
from types import ModuleType
from typing import Any

from framework.runtime.schema import ConfigError, printable

_MODULE = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
ATTRIBUTE_SPEC = re.compile(rf"({_MODULE}):({_MODULE})")
"""module:attribute, the attribute a (dotted) name in the module, e.g. `my_models:build` or `pkg.mod:Cls.make`."""


def spec_problem(value: str, what: str = "attribute") -> str | None:
    """None when value has the form module:attribute (checked without importing anything), else what is allowed."""
    if ATTRIBUTE_SPEC.fullmatch(value):
        return None
    return f"module:{what} (a dotted module name, ':', then a name in that module)"


def search_current_directory() -> None:
    """Put the current directory first on sys.path, as `python -m` does, unless it is there already."""
    cwd = os.getcwd()
    if sys.path[:1] != [""] and cwd not in sys.path:
        sys.path.insert(0, cwd)


def import_module(key: str, value: str, module: str, where: str | None = None) -> ModuleType:
    """The module named in config key `key` (whose value is `value`), from the current directory first;
    ConfigError naming the real cause when it cannot be imported (and `where` it was given, when that is not a
    config key: a command's option)."""
    where = where or f"config key '{key}'"
    search_current_directory()
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module == exc.name or module.startswith(exc.name + ".")):
            raise ConfigError(f"{where}: got {printable(repr(value))}; allowed: a module that can be "
                              f"imported (no module {exc.name!r} in the current directory {os.getcwd()!r} or "
                              f"among the installed modules)") from None
        raise ConfigError(f"{where}: got {printable(repr(value))}; importing {module!r} failed: it "
                          f"needs module {exc.name!r}, which is not installed") from None
    except Exception as exc:
        raise ConfigError(f"{where}: got {printable(repr(value))}; importing {module!r} raised "
                          f"{type(exc).__name__}: {printable(str(exc))}") from None


def find_attribute(module: ModuleType, name: str) -> Any:
    """module's attribute at the dotted name, or None where there is none."""
    value: Any = module
    for part in name.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def load_attribute(key: str, value: str) -> Any:
    """The object that config key `key` names as module:attribute; ConfigError if the module or attribute is
    missing."""
    match = ATTRIBUTE_SPEC.fullmatch(value)
    if match is None:
        raise ConfigError(f"config key '{key}': got {printable(repr(value))}; allowed: {spec_problem(value)}")
    module, name = match.groups()
    found = find_attribute(import_module(key, value, module), name)
    if found is None:
        raise ConfigError(f"config key '{key}': got {printable(repr(value))}; allowed: a name that module "
                          f"{module!r} defines (it has no {name!r})")
    return found
