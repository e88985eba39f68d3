"""The search space of `tune`: SPACE.yaml maps config keys to distributions, checked before any trial starts.

    optimizer.lr: {type: float, low: 1e-4, high: 1e-2, log: true}
    algorithm.n_steps: {type: int, low: 5, high: 40, step: 5}
    model.hidden: {type: categorical, choices: [[64], [128], [64, 64]]}

`float` and `int` take `low` <= `high`, `log` (true: sampled evenly in log space, which needs low > 0) and `step`
(a grid from low; not with log); `categorical` takes a non-empty list of `choices`. Each key must be a config key
of a value, and the config (with the command's --set) must accept both ends of a range and every choice: a space
that breaks a rule is refused in one line naming the key, as a bad config is. A trial's values become `--set`
overrides (JSON text, which YAML reads back as the same value). Optuna keeps a categorical's choices as they are
when they are null, bools, numbers or strings, and as their JSON text otherwise ([64, 64]), which `values` turns
back into the choice.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from framework.runtime.schema import MAX_ITEMS, ConfigError, printable, short_repr
from framework.train.config import load_config, read_yaml

SET_BY_TUNE = ("experiment", "logging.logdir", "logging.hparams")
"""Config keys tune sets for each trial (its run directory's name and place, and the hparams it shows)."""
FIELDS = {"float": ("type", "low", "high", "log", "step"), "int": ("type", "low", "high", "log", "step"),
          "categorical": ("type", "choices")}
_KEY_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_FLOAT_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
EXAMPLE = "optimizer.lr: {type: float, low: 1e-4, high: 1e-2, log: true}"


@dataclass(frozen=True)
class Dimension:
    """One key of the space and its distribution."""

    key: str
    kind: str
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    step: float | int | None = None
    choices: tuple[Any, ...] = ()

    def suggest(self, trial: Any) -> Any:
        """The trial's value of this key, from Optuna (a categorical's choice as Optuna keeps it)."""
        if self.kind == "float":
            return trial.suggest_float(self.key, self.low, self.high, log=self.log, step=self.step)
        if self.kind == "int":
            return trial.suggest_int(self.key, self.low, self.high, log=self.log, step=self.step or 1)
        return trial.suggest_categorical(self.key, [_kept(choice) for choice in self.choices])

    def value(self, kept: Any) -> Any:
        """The config value of what Optuna keeps for this key."""
        if self.kind == "categorical":
            return next((choice for choice in self.choices if _kept(choice) == kept), kept)
        return kept


def _kept(choice: Any) -> Any:
    """How Optuna keeps a categorical choice: as it is when it can, else as its JSON text."""
    return choice if choice is None or isinstance(choice, (bool, int, float, str)) else json.dumps(choice)


def _refuse(key: str, problem: str) -> ConfigError:
    return ConfigError(f"space key '{printable(key)}': {problem}")


def _number(key: str, field: str, value: Any, integer: bool) -> float | int:
    """value as an int (integer) or a finite float ('1e-4' included: YAML 1.1 reads it as a string)."""
    if isinstance(value, str) and not integer and len(value) <= 64 and _FLOAT_TEXT.match(value.strip()):
        value = float(value)
    ok = isinstance(value, int) if integer else isinstance(value, (int, float)) and math.isfinite(value)
    if not ok or isinstance(value, bool):
        raise _refuse(f"{key}.{field}", f"got {short_repr(value)}; allowed: {'an integer' if integer else 'a number'}")
    return value if integer else float(value)


def _dimension(key: Any, spec: Any) -> Dimension:
    """One entry of a space, checked on its own (the config checks come after)."""
    if not isinstance(key, str) or not _KEY_PATH.fullmatch(key):
        raise ConfigError(f"space key {short_repr(key)}: not a config key path; allowed: a key such as optimizer.lr")
    if key in SET_BY_TUNE:
        raise _refuse(key, f"tune sets it for each trial; allowed: other config keys ({', '.join(SET_BY_TUNE)} are "
                           f"tune's)")
    if not isinstance(spec, dict):
        raise _refuse(key, f"got {short_repr(spec)}; allowed: a distribution, e.g. {EXAMPLE}")
    kind = spec.get("type")
    if kind not in FIELDS:
        raise _refuse(f"{key}.type", f"got {short_repr(kind)}; allowed: float, int or categorical")
    unknown = [field for field in spec if field not in FIELDS[kind]]
    if unknown:
        raise _refuse(key, f"unknown field {short_repr(unknown[0])} for type {kind}; allowed: "
                           f"{', '.join(FIELDS[kind])}")
    if kind == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, list) or not 0 < len(choices) <= MAX_ITEMS:
            raise _refuse(f"{key}.choices", f"got {short_repr(choices)}; allowed: a list of 1 to {MAX_ITEMS} values")
        return Dimension(key, kind, choices=tuple(choices))
    integer = kind == "int"
    for field in ("low", "high"):
        if field not in spec:
            raise _refuse(key, f"no {field}; allowed: a distribution with low and high, e.g. {EXAMPLE}")
    low, high = _number(key, "low", spec["low"], integer), _number(key, "high", spec["high"], integer)
    if low > high:
        raise _refuse(key, f"low {low:g} is above high {high:g}; allowed: low <= high")
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise _refuse(f"{key}.log", f"got {short_repr(log)}; allowed: true or false")
    if log and low <= 0:
        raise _refuse(f"{key}.low", f"got {low:g} with log: true; allowed: a number > 0")
    step = spec.get("step")
    if step is not None:
        step = _number(key, "step", step, integer)
        if log or step <= 0:
            raise _refuse(f"{key}.step", f"got {step:g}{' with log: true' if log else ''}; allowed: a number > 0, "
                                         f"without log")
    return Dimension(key, kind, low, high, log, step)


@dataclass(frozen=True)
class SearchSpace:
    """The checked dimensions of a space, in the order it gives them."""

    dimensions: tuple[Dimension, ...]

    @property
    def keys(self) -> list[str]:
        return [dimension.key for dimension in self.dimensions]

    def suggest(self, trial: Any) -> dict[str, Any]:
        """A trial's config values by key, drawn by Optuna."""
        return {d.key: d.value(d.suggest(trial)) for d in self.dimensions}

    def values(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The config values by key of a trial's Optuna params (a trial of an earlier space may lack some)."""
        return {d.key: d.value(params[d.key]) for d in self.dimensions if d.key in params}

    @staticmethod
    def overrides(values: Mapping[str, Any]) -> list[str]:
        """The `--set` overrides that give a config these values."""
        return [f"{key}={json.dumps(value)}" for key, value in values.items()]


def load_space(source: str | Path | Mapping[str, Any], config: str | Path | Mapping[str, Any],
               overrides: Sequence[str]) -> SearchSpace:
    """The search space of a SPACE.yaml's path (or a mapping), checked on its own and against the config with the
    overrides; ConfigError (one line, naming the key) otherwise."""
    raw = read_yaml(source) if isinstance(source, (str, Path)) else source
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError(f"space: got {short_repr(raw)}; allowed: a mapping of config keys to distributions, e.g. "
                          f"{EXAMPLE}")
    space = SearchSpace(tuple(_dimension(key, spec) for key, spec in raw.items()))
    for dimension in space.dimensions:
        ends = dimension.choices if dimension.kind == "categorical" else (dimension.low, dimension.high)
        for value in ends:
            try:
                load_config(config, [*overrides, *space.overrides({dimension.key: value})])
            except ConfigError as exc:
                raise _refuse(dimension.key, f"the config refuses {short_repr(value)}: {exc}") from None
    return space
