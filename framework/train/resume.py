"""Continuing a run: what `--resume` may change, and what a checkpoint must hold before any of it is used.

`train --resume RUN_DIR --set key=value` continues a run under its saved
config with the overrides applied. Every change either applies to the rest
of the run or is refused (exit code 2, naming the key); none is ignored.

- Applied: budgets, intervals and everything else of `trainer` (workers,
  device, start method, sharing strategy, ...), `logging` (but `logdir`), the
  algorithm's hyperparameters, `env.envs_per_worker`, `env.vectorize`,
  `seed` (each worker start gets a fresh seed anyway), and every option of
  the optimizer: lr, betas, eps, weight_decay, momentum, alpha and the lr
  schedule. The checkpoint brings the optimizer's state (moments, step
  counts), the config its options; a state array the new options no longer
  keep (momentum set to 0) is dropped, and a line says so.
- Refused (FIXED): what the checkpoint's contents were made with or for,
  which a resume cannot change without meaning another run: the algorithm,
  the optimizer's kind, the model, the environment (`env.id`, `env.kwargs`,
  and whether it is normalised: the statistics are the model's), the dataset; and what names and places the run (`experiment`,
  `logging.logdir`).

A checkpoint is read by `checkpoint.load_checkpoint` (bounded, never
unpickled), then `check_saved_state` checks it against SAVED_RUN and the
types of every part, and the model and optimizer built from the config
check names and shapes. Only then is any of it used, and only then is
anything written to the run directory.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import numpy as np

from framework.train.checkpoint import CheckpointError
from framework.train.config import MAX_SECONDS, MAX_STEPS, MAX_WORKERS, Config, ConfigError
from framework.train.schema import printable, short_repr

FIXED = ("algorithm.name", "optimizer.name", "model", "env.id", "env.kwargs", "env.normalize_obs",
         "env.normalize_reward", "dataset", "experiment", "logging.logdir")
"""Config keys (and sections) a resume keeps as the run was trained."""

MAX_WINDOW = 100_000
"""Recent returns a checkpoint may carry (the largest `trainer.target_window`)."""
MAX_ENTRIES = 100_000
"""Parameters (and per-parameter optimizer states) a checkpoint may name."""


def _leaves(value: Any, prefix: str) -> dict[str, Any]:
    if isinstance(value, dict) and value:
        return {k: v for key, item in value.items() for k, v in _leaves(item, f"{prefix}.{key}").items()}
    return {prefix: value}


def check_changes(trained: Config, resumed: Config) -> None:
    """ConfigError naming the first FIXED key that the resumed config changes from the trained one."""
    missing = object()

    def shown(value: Any) -> str:
        return "nothing" if value is missing else short_repr(value)

    for key in FIXED:
        section, _, name = key.partition(".")
        if section not in trained or section not in resumed:
            continue
        before = trained[section] if not name else {name: trained[section][name]}
        after = resumed[section] if not name else {name: resumed[section][name]}
        old, new = _leaves(before, section), _leaves(after, section)
        changed = [p for p in sorted(set(old) | set(new)) if old.get(p, missing) != new.get(p, missing)]
        deepest = [p for p in changed if not any(q.startswith(p + ".") for q in changed)]
        if deepest:
            path = deepest[0]
            raise ConfigError(f"config key '{printable(path)}': got {shown(new.get(path, missing))} on --resume; "
                              f"allowed: {shown(old.get(path, missing))}, what the run was trained with (a resume "
                              f"keeps the model, the optimizer's kind, the environment, the data and the run's "
                              f"name and place: start a new run to change them)")


def _is_int(low: int, high: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _is_seconds(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= MAX_SECONDS


def _is_float_array(ndim: int | None = None, size: int | None = None) -> Callable[[Any], bool]:
    return lambda v: (isinstance(v, np.ndarray) and v.dtype.kind == "f" and (ndim is None or v.ndim == ndim)
                      and (size is None or v.size <= size))


SAVED_RUN: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "env_steps": (f"an integer from 0 to {MAX_STEPS}", _is_int(0, MAX_STEPS)),
    "updates": (f"an integer from 0 to {MAX_STEPS}", _is_int(0, MAX_STEPS)),
    "episodes": (f"an integer from 0 to {MAX_STEPS}", _is_int(0, MAX_STEPS)),
    "skipped_updates": (f"an integer from 0 to {MAX_STEPS}", _is_int(0, MAX_STEPS)),
    "wall_seconds": (f"seconds from 0 to {MAX_SECONDS:g}", _is_seconds),
    "solved_at_seconds": (f"null or seconds from 0 to {MAX_SECONDS:g}", lambda v: v is None or _is_seconds(v)),
    "recent_returns": (f"a 1-d float array of at most {MAX_WINDOW} returns", _is_float_array(1, MAX_WINDOW)),
    "seed": ("an integer from 0 to 2147483647", _is_int(0, 2**31 - 1)),
    "generations": (f"a list of at most {MAX_WORKERS} integers >= 0",
                    lambda v: isinstance(v, list) and len(v) <= MAX_WORKERS and all(map(_is_int(0, MAX_STEPS), v))),
}
"""What a checkpoint's `run` part holds: each key, what is allowed in words, and the test."""


def _option(v: Any) -> bool:
    """A JSON value an optimizer option can be: a number, bool, null, string, or a list of numbers."""
    if isinstance(v, list):
        return len(v) <= 16 and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
    return v is None or isinstance(v, (bool, int, float, str))


def check_saved_state(state: Any, path: Path, algorithm: str) -> dict[str, Any]:
    """state, once its parts have the types, ranges and sizes a checkpoint of `algorithm` has; CheckpointError.

    Names and shapes are checked by the model and optimizer that load it.
    """
    def refuse(where: str, value: Any, allowed: str) -> CheckpointError:
        return CheckpointError(f"checkpoint '{printable(str(path))}' does not hold a run of this program: "
                               f"'{where}' is {short_repr(value)}; allowed: {allowed}")

    parts = ("algorithm", "model", "optimizer", "run")
    if not isinstance(state, dict) or sorted(state) != sorted(parts):
        shown = sorted(state) if isinstance(state, dict) else state
        raise refuse("(top level)", shown, "the parts " + ", ".join(parts))
    if state["algorithm"] != algorithm:
        raise refuse("algorithm", state["algorithm"], f"{algorithm!r}, the config's algorithm.name")
    model = state["model"]
    if not (isinstance(model, dict) and 0 < len(model) <= MAX_ENTRIES
            and all(isinstance(k, str) and _is_float_array()(v) for k, v in model.items())):
        raise refuse("model", model, f"a mapping of at most {MAX_ENTRIES} parameter names to float arrays")
    optimizer = state["optimizer"]
    if not (isinstance(optimizer, dict) and sorted(optimizer) == ["param_groups", "state"]):
        raise refuse("optimizer", optimizer, "a mapping with state and param_groups")
    entries = optimizer["state"]
    if not (isinstance(entries, dict) and len(entries) <= MAX_ENTRIES and all(
            _is_int(0, MAX_ENTRIES)(k) and isinstance(v, dict) and len(v) <= 8
            and all(isinstance(name, str) and _is_float_array()(a) for name, a in v.items())
            for k, v in entries.items())):
        raise refuse("optimizer.state", entries, "a mapping of parameter indices to named float arrays")
    groups = optimizer["param_groups"]
    if not (isinstance(groups, list) and 0 < len(groups) <= 64 and all(
            isinstance(g, dict) and isinstance(g.get("params"), list) and len(g["params"]) <= MAX_ENTRIES
            and all(map(_is_int(0, MAX_ENTRIES), g["params"]))
            and all(isinstance(k, str) and (k == "params" or _option(v)) for k, v in g.items())
            for g in groups)):
        raise refuse("optimizer.param_groups", groups, "a list of groups, each with options and parameter indices")
    run = state["run"]
    if not isinstance(run, dict) or sorted(run) != sorted(SAVED_RUN):
        raise refuse("run", sorted(run) if isinstance(run, dict) else run, "the keys " + ", ".join(SAVED_RUN))
    for key, (allowed, ok) in SAVED_RUN.items():
        if not ok(run[key]):
            raise refuse(f"run.{key}", run[key], allowed)
    return state


def load_optimizer_state(optimizer: Any, saved: dict[str, Any], path: Path) -> list[str]:
    """Load a checked checkpoint's optimizer state (moments, step counts) under the config's options.

    Returns the names of the saved state arrays the optimizer no longer keeps
    with these options (they are dropped); CheckpointError when the state is
    another optimizer's or does not fit the parameters.
    """
    groups = optimizer.param_groups
    options = [{k: v for k, v in group.items() if k != "params"} for group in groups]
    for group, saved_group in zip(groups, saved["param_groups"]):
        if set(saved_group) != set(group):
            raise CheckpointError(f"checkpoint '{printable(str(path))}' holds the state of another kind of optimizer "
                                  f"(options {', '.join(sorted(set(saved_group) - {'params'}))}); allowed: the state "
                                  f"of a {type(optimizer).__name__} optimizer")
    params = [p for group in groups for p in group["params"]]
    state, dropped = {}, set()
    for index, entry in saved["state"].items():
        if index >= len(params):
            raise CheckpointError(f"checkpoint '{printable(str(path))}' holds optimizer state for parameter {index}; "
                                  f"allowed: parameters 0 to {len(params) - 1}")
        kept = optimizer.state[params[index]]
        state[index] = {k: v for k, v in entry.items() if k in kept}
        dropped |= set(entry) - set(kept)
    try:
        optimizer.load_state_dict({"state": state, "param_groups": saved["param_groups"]})
    except (KeyError, ValueError, RuntimeError, TypeError, IndexError) as exc:
        raise CheckpointError(f"checkpoint '{printable(str(path))}' holds optimizer state that does not fit: "
                              f"{printable(str(exc))}") from None
    for group, own in zip(groups, options):
        group.update(own)
    return sorted(dropped)
