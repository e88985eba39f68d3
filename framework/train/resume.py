"""Continuing a run: what `--resume` may change.

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

`resumed_config` is the config a resume runs under, for `train --resume` and
`run(resume=)` alike. What the checkpoint must hold before any of it is used,
and how it is restored, is `run_checkpoint`'s.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from framework.runtime.schema import printable, short_repr
from framework.train.config import Config, ConfigError, apply_overrides, validate
from framework.train.trust import read_run_config

FIXED = ("algorithm.name", "optimizer.name", "model", "env.id", "env.kwargs", "env.normalize_obs",
         "env.normalize_reward", "dataset", "experiment", "logging.logdir")
"""Config keys (and sections) a resume keeps as the run was trained."""



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


def resumed_config(run_dir: str | Path, overrides: Sequence[str], trust_code: bool = False) -> Config:
    """The config that continues the run in run_dir: its config.yaml with the overrides (`--set`) applied, once
    none of them changes a FIXED key; ConfigError otherwise, or when it names code to import that this user's
    train did not write and `trust_code` is not set (framework.train.trust)."""
    raw = read_run_config(Path(run_dir), trust_code)
    config = validate(apply_overrides(raw, overrides))
    check_changes(validate(raw), config)
    return config
