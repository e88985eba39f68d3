"""What a run carries over across checkpoints and resumes: its totals, its window of recent returns, when it reached
its target, and how often each rank was started (the generations its workers' seeds come from).

A resumed run starts with the saved window of returns but not with the saved
`solved_at`: its target (which the resume may have changed: `--set
trainer.target_return=HIGHER`) is reached only when episodes of its own bring
the mean of the last `target_window` returns to it (`add_returns`, as
episodes arrive), so a resume never stops at once on what an earlier session
reached.
"""
from __future__ import annotations

import collections
from typing import Any

import numpy as np

from framework.runtime.run_stats import EPISODES, SKIPPED, STEPS, UPDATES, RunStats, StatsSnapshot


class Carryover:
    """A run's totals, return window, target time and seeds' generations (see the module docstring)."""

    def __init__(self, workers: int, window: int):
        self.wall_offset = 0.0
        self.solved_at: float | None = None
        self.window: collections.deque[float] = collections.deque(maxlen=window)
        self.generations = [0] * workers

    def restore(self, saved: dict[str, Any], stats: RunStats) -> None:
        """Continue from a checkpoint's run part: its totals into stats, its wall time, window and generations."""
        counters = np.zeros(stats.counters.shape[1], dtype=np.int64)
        counters[[STEPS, UPDATES, EPISODES, SKIPPED]] = [saved["env_steps"], saved["updates"], saved["episodes"],
                                                         saved["skipped_updates"]]
        stats.restore(counters)
        self.wall_offset = float(saved["wall_seconds"])
        self.window.extend(float(r) for r in saved["recent_returns"])
        generations = list(saved["generations"])[:len(self.generations)]
        self.generations[:len(generations)] = generations

    def saved(self, snap: StatsSnapshot, wall_seconds: float, seed: int) -> dict[str, Any]:
        """The run part of a checkpoint at snap (what `restore` reads back)."""
        return {"env_steps": snap.total(STEPS), "updates": snap.total(UPDATES), "episodes": snap.total(EPISODES),
                "skipped_updates": snap.total(SKIPPED), "wall_seconds": wall_seconds,
                "solved_at_seconds": self.solved_at, "recent_returns": np.asarray(self.window, dtype=np.float64), "seed": seed,
                "generations": list(self.generations)}

    def add_returns(self, returns: np.ndarray, target: float | None, wall_seconds: float) -> None:
        """Episodes' returns into the window; the target reached now, when the full window's mean reaches it."""
        self.window.extend(returns.tolist())
        if (self.solved_at is None and target is not None and len(self.window) == self.window.maxlen
                and self.mean_return() >= target):
            self.solved_at = wall_seconds

    def mean_return(self) -> float | None:
        return float(np.mean(self.window)) if self.window else None
