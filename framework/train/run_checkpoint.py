"""A run's checkpoint: where it lives, what it holds, how it is checked, and how it is restored.

The file format (one `.npz`, written atomically, read bounded and never
unpickled) is `checkpoint`'s; this module says what a run puts in it:

- `algorithm`: the config's algorithm.name;
- `model`: the parameters by name (host copies: a checkpoint resumes or
  evaluates on any device), as `read_checkpoint` and docs/python-api.md give
  them;
- `optimizer`: the optimizer's state_dict (moments, step counts, options);
- `run`: the counters, wall time, recent returns, seed and worker
  generations (SAVED_RUN says what each may hold);
- `plugin`, when the algorithm keeps arrays of its own
  (`Algorithm.build_state`): those arrays by name;
- `evaluation`, in the best checkpoint (`trainer.keep_best`: checkpoints/best.npz) alone: the metrics of the
  evaluation that made it the best (`best_checkpoint`).

`checkpoint_path(run_dir, checkpoint)` names either file: "latest" (checkpoint.npz, what a resume continues
from) or "best".

A checkpoint is read as untrusted input: `check_saved_state` checks every
part's types, ranges and sizes before any of it is used; the model and the
optimizer built from the config then check names and shapes
(`load_model_state`, `load_optimizer_state`), and the plugin's arrays must
have the names, shapes and dtypes the algorithm builds (`restore_plugin_state`).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from framework.device import to_host
from framework.runtime.schema import ConfigError, one_line, printable, short_repr
from framework.train import run_dir
from framework.train.checkpoint import CheckpointError, load_checkpoint
from framework.train.config import MAX_SECONDS, MAX_STEPS, MAX_WORKERS, Config

CHECKPOINT = Path(run_dir.CHECKPOINTS) / "checkpoint.npz"
BEST = Path(run_dir.CHECKPOINTS) / "best.npz"
CHECKPOINTS = {"latest": CHECKPOINT, "best": BEST}
"""The checkpoints a run directory may hold, by the names `load_policy` and `evaluate --checkpoint` take."""
CHECKPOINT_META_BYTES = 4 << 20
"""The most a checkpoint holds besides parameters and optimizer state (run counters, recent returns, JSON)."""
MAX_WINDOW = 100_000
"""Recent returns a checkpoint may carry (the largest `trainer.target_window`)."""
MAX_ENTRIES = 100_000
"""Parameters (and per-parameter optimizer states) a checkpoint may name."""
MAX_METRICS = 1000
"""Numbers of the evaluation a best checkpoint holds."""


def checkpoint_path(run_dir: str | Path, checkpoint: str = "latest") -> Path:
    """Where a run directory keeps its latest (or best) checkpoint; ConfigError for another name."""
    if checkpoint not in CHECKPOINTS:
        raise ConfigError(f"checkpoint: got {short_repr(checkpoint)}; allowed: {' or '.join(CHECKPOINTS)}")
    return Path(run_dir) / CHECKPOINTS[checkpoint]


def model_state(model: Any) -> dict[str, np.ndarray]:
    """The model's parameters as named NumPy copies (copied to the host from a CUDA device)."""
    return {name: to_host(value.data_array, copy=True) for name, value in model.state_dict().items()}


def checkpoint_state(algorithm: str, model: Any, optimizer: Any, run: Mapping[str, Any],
                     plugin: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """What a run's checkpoint holds: its algorithm's name, the model's parameters (host copies), the optimizer's
    state, the run part (SAVED_RUN's keys) and, when there are any, copies of the plugin's own arrays."""
    state = {"algorithm": algorithm, "model": model_state(model), "optimizer": optimizer.state_dict(), "run": dict(run)}
    if plugin:
        state["plugin"] = {name: np.array(array, copy=True) for name, array in plugin.items()}
    return state


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
    if not isinstance(state, dict) or sorted(set(state) - {"plugin", "evaluation"}) != sorted(parts):
        shown = sorted(state) if isinstance(state, dict) else state
        raise refuse("(top level)", shown, "the parts " + ", ".join(parts) + " (and plugin, for a plugin's arrays, "
                     "and evaluation, in the best checkpoint)")
    evaluation = state.get("evaluation", {})
    if not (isinstance(evaluation, dict) and len(evaluation) <= MAX_METRICS and all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for k, v in evaluation.items())):
        raise refuse("evaluation", evaluation, f"a mapping of at most {MAX_METRICS} names to finite numbers")
    plugin = state.get("plugin", {})
    if not (isinstance(plugin, dict) and len(plugin) <= MAX_ENTRIES and all(
            isinstance(k, str) and isinstance(v, np.ndarray) and v.dtype.kind in "biuf" for k, v in plugin.items())):
        raise refuse("plugin", plugin, f"a mapping of at most {MAX_ENTRIES} names to numeric arrays")
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


def load_model_state(model: Any, state: dict[str, Any], source: Path) -> None:
    """Copy saved parameters into model; CheckpointError naming source when they do not fit."""
    try:
        model.load_state_dict(state)
    except (KeyError, ValueError, RuntimeError, TypeError) as exc:
        raise CheckpointError(f"checkpoint '{source}' does not fit the model of this config: {one_line(exc)}") from None


def max_checkpoint_bytes(model: Any, plugin_bytes: int = 0) -> int:
    """The most of a checkpoint this model (and optimizer state of up to four arrays per parameter) and
    plugin_bytes of the plugin's own arrays (`Algorithm.build_state`) could use."""
    return 5 * sum(value.nbytes for value in model_state(model).values()) + plugin_bytes + CHECKPOINT_META_BYTES


def read_checkpoint(run: Path, config: Config, model: Any, plugin_bytes: int = 0,
                    checkpoint: str = "latest") -> dict[str, Any]:
    """The checked latest (or best) checkpoint of a run directory, its parameters loaded into model;
    CheckpointError otherwise. Nothing of a checkpoint larger than `max_checkpoint_bytes` is read."""
    path = checkpoint_path(run, checkpoint)
    if checkpoint == "best" and not path.is_file():
        raise CheckpointError(f"run '{printable(str(run))}' has no best checkpoint ({BEST}); allowed: a run trained "
                              f"with trainer.keep_best: true and trainer.eval_every_s > 0, once it evaluated")
    saved = load_checkpoint(path, max_bytes=max_checkpoint_bytes(model, plugin_bytes))
    check_saved_state(saved, path, config["algorithm"]["name"])
    load_model_state(model, saved["model"], path)
    return saved


def restore_plugin_state(state: Mapping[str, np.ndarray], saved: Mapping[str, Any], path: Path, algorithm: str) -> None:
    """Copy a checked checkpoint's plugin arrays into state (the run's, in shared memory); CheckpointError, before
    anything is copied, when their names, shapes or dtypes are not state's."""
    kept = saved.get("plugin", {})
    if sorted(kept) != sorted(state):
        raise CheckpointError(f"checkpoint '{printable(str(path))}' holds the plugin arrays "
                              f"{', '.join(map(printable, sorted(kept))) or '(none)'}; allowed: "
                              f"{', '.join(sorted(state)) or '(none)'}, what algorithm {algorithm} keeps")
    for name, target in state.items():
        value = kept[name]
        if value.shape != target.shape or value.dtype != target.dtype:
            raise CheckpointError(f"checkpoint '{printable(str(path))}' holds plugin array '{name}' of shape "
                                  f"{value.shape} and dtype {value.dtype}; allowed: shape {target.shape} and dtype "
                                  f"{target.dtype}, what algorithm {algorithm} builds for this config")
    for name, target in state.items():
        target[...] = kept[name]
