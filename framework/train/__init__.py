"""hogshare's training system, on top of the tensor library.

The public Python API (docs/python-api.md), loaded on first use:
`run(config, overrides, logdir=, env=, model=, resume=, callbacks=) -> Run`
trains (or resumes) as `train` does (`RunFailed` when the run fails), calling
`Callback`s; `load_policy(run_dir, checkpoint=) -> Policy` acts with a
trained run; `evaluate_policy(policy, env, episodes, seed, deterministic)`
gives the mean and standard deviation of its return in any gymnasium env;
`read_checkpoint(path)` gives a checkpoint's parameters by name; `tune(config,
space, trials, ...) -> TuneResult` searches hyperparameters with Optuna (the
`tune` command, docs/tuning.md); `ConfigError` and `CheckpointError` are what
they raise for bad input.

- `config`, `yaml_input`: the core schema, `--set`, run directories' config.yaml; YAML read in bounded time and memory;
- `api`, `policy`, `policy_evaluation`: `run`, `read_checkpoint`; `load_policy`, `Policy` (acting, export
  to .safetensors); `evaluate_policy`;
- `callbacks`, `trackers`: `Callback` and the seam the monitor calls them through; MLflow and W&B as callbacks;
- `best_checkpoint`, `outcome`: checkpoints/best.npz (`trainer.keep_best`); the final metrics and the line a
  finished run ends with;
- `tuning`, `tune_space`: `tune` on Optuna, and its search space;
- `cli`: the `train`, `evaluate` and `tune` commands (`python -m framework.train` runs them too);
- `trainer`: start-up (model, shared memory, checks, checkpoint), then the run directory and the monitor; `Run`,
  a finished run;
- `startup`, `run_dir`, `resume`, `stop_signals`: room checks, the run directory, what a resume may change, and what
  each phase does with a stop signal;
- `run_checkpoint`, `checkpoint`: what a run's checkpoint holds, its checks and restore; the file format;
- `monitor`: the main process's loop over a run (what it decides, in what order), with `worker_exits` (report,
  restart or stop), `carryover` (what a run carries across resumes), `run_log` (TensorBoard and callbacks every
  interval), `periodic` (tasks due every so many seconds), `greedy_play` (evaluations and videos);
- `backends`: where workers run (`local`: processes on this machine);
- `tensorboard_writer`, `progress`: what the monitor works with.

The algorithms it trains are plugins in `framework.algorithms`, written against the contract in
`framework.runtime` (`Algorithm`, `Field`, `ConfigError`, the workers' statistics). Importing this
package imports none of these modules: a public name imports its module when
first used.
"""
from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "run": "framework.train.api", "Run": "framework.train.trainer", "RunFailed": "framework.train.api",
    "read_checkpoint": "framework.train.api", "Callback": "framework.train.callbacks",
    "load_policy": "framework.train.policy", "Policy": "framework.train.policy",
    "evaluate_policy": "framework.train.policy_evaluation",
    "tune": "framework.train.tuning", "TuneResult": "framework.train.tuning",
    "ConfigError": "framework.runtime.schema", "CheckpointError": "framework.train.checkpoint",
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
