"""The best checkpoint (`trainer.keep_best`): checkpoints/best.npz holds the parameters of the evaluation with the
highest mean return so far.

The workers train on while an evaluation plays, so with keep_best the monitor evaluates a copy of the shared
parameters taken as the evaluation starts; when its mean return beats the best so far, that copy is what is
written, with the evaluation's metrics (the checkpoint's `evaluation` part), atomically as the checkpoint is. A
resumed run reads them back, so only a better evaluation replaces the file. The file is a whole checkpoint (the
optimizer's state and the run's counters as they were at that evaluation) so that every reader of checkpoints
reads it: `load_policy(run_dir, checkpoint="best")`, `evaluate --run RUN --checkpoint best`.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Mapping

from framework.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from framework.train.run_checkpoint import BEST, check_saved_state

METRIC = "return_mean"
"""The evaluation metric the best checkpoint maximises."""


class BestCheckpoint:
    """checkpoints/best.npz of one run: the best evaluation so far, and the file written when one beats it."""

    def __init__(self, path: Path, say: Callable[[str], None]):
        self.path, self.say = path, say
        self.metrics: dict[str, float] | None = None
        self.env_steps: int | None = None
        self._error: str | None = None  # the last failed write, said once until it changes

    def restore(self, algorithm: str, max_bytes: int) -> None:
        """The best so far of a resumed run, from the best.npz it holds (a file that cannot be read is said in one
        line and replaced by the next evaluation)."""
        if not self.path.is_file():
            return
        try:
            saved = check_saved_state(load_checkpoint(self.path, max_bytes), self.path, algorithm)
        except CheckpointError as exc:
            self.say(f"{exc}; the next evaluation writes a new best checkpoint")
            return
        evaluation = saved.get("evaluation", {})
        if METRIC in evaluation:
            self.metrics, self.env_steps = dict(evaluation), saved["run"]["env_steps"]

    def offer(self, metrics: Mapping[str, float], state: Callable[[], dict[str, Any]]) -> bool:
        """Write state() (a checkpoint's state) as the best checkpoint when metrics beat the best so far; whether
        it was written (a failure is said once, and training goes on)."""
        value = metrics.get(METRIC)
        if value is None or not math.isfinite(value):
            return False
        if self.metrics is not None and value <= self.metrics[METRIC]:
            return False
        saved = {**state(), "evaluation": {name: float(v) for name, v in metrics.items()}}
        try:
            save_checkpoint(self.path, saved)
        except CheckpointError as exc:
            if str(exc) != self._error:
                self.say(f"best checkpoint failed: {exc}")
            self._error = str(exc)
            return False
        self.metrics, self.env_steps, self._error = dict(saved["evaluation"]), saved["run"]["env_steps"], None
        return True

    def summary(self) -> dict[str, Any] | None:
        """summary.json's `best_checkpoint`: the file, the env steps and the metrics of its evaluation; None
        before any evaluation."""
        if self.metrics is None:
            return None
        return {"checkpoint": str(BEST), "env_steps": self.env_steps, **self.metrics}
