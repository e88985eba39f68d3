"""hogshare's training system, on top of the tensor library.

The public Python API (docs/python-api.md), loaded on first use:
`run(config, overrides, logdir=, env=, model=) -> Run` trains as `train` does
(`RunFailed` when the run fails), `load_policy(run_dir) -> Policy` acts with
a trained run, `read_checkpoint(path)` gives a checkpoint's parameters by
name; `ConfigError` and `CheckpointError` are what they raise for bad input.

- `config`, `yaml_input`: the core schema, `--set`, run directories' config.yaml; YAML read in bounded time and memory;
- `api`, `policy`: `run`, `Run`, `read_checkpoint`; `load_policy`, `Policy` (acting, export to .safetensors);
- `cli`: the `train` and `evaluate` commands (`python -m framework.train` runs them too);
- `trainer`: start-up (model, shared memory, checks, checkpoint), then the run directory and the monitor;
- `startup`, `run_dir`, `resume`, `stop_signals`: room checks, the run directory, what a resume may change, and what
  each phase does with a stop signal;
- `run_checkpoint`, `checkpoint`: what a run's checkpoint holds, its checks and restore; the file format;
- `monitor`: the main process's loop (logging, checkpoints, evaluation, stopping);
- `backends`: where workers run (`local`: processes on this machine);
- `tensorboard_writer`, `progress`: what the monitor works with.

The algorithms it trains are plugins in `framework.algorithms`, written against the contract in
`framework.plugin` (`Algorithm`, `Field`, `ConfigError`, the workers' statistics). Importing this
package imports none of these modules: a public name imports its module when
first used.
"""
from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "run": "framework.train.api", "Run": "framework.train.api", "RunFailed": "framework.train.api",
    "read_checkpoint": "framework.train.api",
    "load_policy": "framework.train.policy", "Policy": "framework.train.policy",
    "ConfigError": "framework.plugin.schema", "CheckpointError": "framework.train.checkpoint",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'framework.train' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
