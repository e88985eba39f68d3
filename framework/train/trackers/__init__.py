"""Trackers beyond TensorBoard: `logging.mlflow` (MLflow) and `logging.wandb` (Weights & Biases).

Setting any key of a tracker's section turns it on. Each gets what TensorBoard
gets, by the same tags at the same steps (env steps): every log interval's
scalars, each evaluation's eval/<name>, and at the end the final/ metrics
(TensorBoard's hparams metrics); besides them the run's resolved config as
parameters, its summary, and its config.yaml and checkpoints as artifacts.

A tracker is a `Callback` (base.Tracker) that never raises and never holds the
run up: a thread of its own talks to the service, and the first failure there
(a dead server, no credentials) costs one line and ends the tracker; the run
goes on as without it. The registry maps names to modules, imported, with the
tracker's package, only when a run's config turns the tracker on: `import
framework`, and a run without trackers, load neither.
"""
from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any, Callable

from framework.train.callbacks import Callback

_TRACKERS: dict[str, tuple[str, str]] = {
    "mlflow": ("framework.train.trackers.mlflow_tracker", "mlflow"),
    "wandb": ("framework.train.trackers.wandb_tracker", "wandb"),
}
"""Each tracker's config section (under logging): its module (whose TRACKER is the class) and its package."""


def is_on(section: dict[str, Any]) -> bool:
    """Whether a tracker's config section sets any of its keys."""
    return any(value not in (None, []) for value in section.values())


def build_trackers(config: dict[str, Any], run_dir: Path, say: Callable[[str], None]) -> list[Callback]:
    """The trackers the config turns on, for the run in run_dir; one that is not installed is said in one line and
    left out."""
    trackers = []
    for name, (module, package) in _TRACKERS.items():
        if not is_on(config["logging"][name]):
            continue
        if importlib.util.find_spec(package) is None:
            say(f"logging.{name}: {package} is not installed (pip install -e '.[{name}]'); the run goes on without "
                f"it")
            continue
        trackers.append(importlib.import_module(module).TRACKER(config, run_dir, say))
    return trackers
