"""What the monitor logs while a run goes: every `logging.log_every_s`, the interval's scalars to TensorBoard and
the callbacks (`RunHooks`: the user's, then the trackers), which get what TensorBoard gets when it gets it; the
parameters' histograms every `logging.histogram_every` updates; at the end, the hparams with the final metrics.

An interval's scalars: its episodes' returns and lengths (episode/), the
window's mean return, env steps and updates a second, the policy lag and
skipped updates, the algorithm's per-update metrics averaged over the
interval (train/), its running counts (perf/), each phase's share of the
worker processes' wall time in the interval (profile/<phase>:
runtime.profile), its own scalars about the shared model, and the backend's
metrics.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from framework.runtime import profile
from framework.runtime.run_stats import LAG_SUM, SKIPPED, STEPS, UPDATES, StatsSnapshot
from framework.train.backends.base import Backend, Launch
from framework.train.callbacks import RunHooks
from framework.train.carryover import Carryover
from framework.train.config import get_path
from framework.train.outcome import final_metrics
from framework.train.run_checkpoint import model_state


class RunLog:
    """A run's logging from its first snapshot (taken at monotonic time `start`) on; see the module docstring."""

    def __init__(self, launch: Launch, backend: Backend, writer: Any, hooks: RunHooks, carryover: Carryover,
                 first: StatsSnapshot, start: float):
        self.algorithm, self.cfg, self.model, self.stats = launch.algorithm, launch.config, launch.model, launch.stats
        self.backend, self.writer, self.hooks, self.carryover = backend, writer, hooks, carryover
        self.every_s = launch.config["logging"]["log_every_s"]
        self.last, self.last_time = first, start
        self.histogram_updates = first.total(UPDATES)
        self.returns: list[np.ndarray] = []
        self.lengths: list[np.ndarray] = []
        self.train_metrics: dict[str, float] = {}
        """The algorithm's per-update metrics (train/ in TensorBoard) averaged over the last interval that had
        updates: summary.json's `train`."""

    def add_episodes(self, returns: np.ndarray, lengths: np.ndarray) -> None:
        """Episodes that ended in this interval."""
        self.returns.append(returns)
        self.lengths.append(lengths)

    def due(self, now: float) -> bool:
        return now - self.last_time >= self.every_s

    def write(self, snap: StatsSnapshot, now: float) -> str | None:
        """The interval up to snap (taken at now): its scalars, and the histograms when due; the stop reason when a
        callback asks to stop."""
        asked = self._scalars(self.last, snap, max(now - self.last_time, 1e-9))
        self.last, self.last_time = snap, now
        self._histograms(snap)
        return asked

    def _scalars(self, before: StatsSnapshot, after: StatsSnapshot, seconds: float) -> str | None:
        """The interval's scalars to TensorBoard and the callbacks; the stop reason when a callback asks to stop."""
        returns = np.concatenate(self.returns) if self.returns else np.zeros(0)
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0)
        self.returns, self.lengths = [], []
        train = after.metric_means(before, self.stats.metrics)
        if train:
            self.train_metrics = train
        if self.writer is None and not self.hooks:
            return None
        values: dict[str, float] = {}
        if returns.size:
            values.update({"episode/return_mean": returns.mean(), "episode/return_min": returns.min(),
                           "episode/return_max": returns.max(), "episode/length_mean": lengths.mean()})
        mean = self.carryover.mean_return()
        if mean is not None:
            values["episode/return_window_mean"] = mean
        updates = after.total(UPDATES) - before.total(UPDATES)
        values["perf/env_steps_per_s"] = (after.total(STEPS) - before.total(STEPS)) / seconds
        values["perf/updates_per_s"] = updates / seconds
        if updates > 0:
            values["perf/policy_lag"] = (after.total(LAG_SUM) - before.total(LAG_SUM)) / updates
        values["perf/skipped_updates"] = after.total(SKIPPED)
        values.update({f"train/{k}": v for k, v in train.items()})
        values.update({f"perf/{k}": v for k, v in after.count_totals(self.stats.metrics, self.stats.counts).items()})
        seconds, wall = profile.totals(after.profile - before.profile)
        if wall > 0:
            values.update({f"profile/{name}": value / wall for name, value in seconds.items()})
        values.update(self.algorithm.scalars(self.model, self.cfg))
        values.update(self.backend.metrics())
        if self.writer is not None:
            self.writer.scalars(values, after.total(STEPS))
        return self.hooks.log(values, after.total(STEPS))

    def _histograms(self, snap: StatsSnapshot) -> None:
        """The parameters' histograms, once per logging.histogram_every updates."""
        every = self.cfg["logging"]["histogram_every"]
        updates = snap.total(UPDATES)
        if self.writer is None or every == 0 or updates // every == self.histogram_updates // every:
            return
        for name, values in model_state(self.model).items():
            self.writer.histogram(f"params/{name}", values, snap.total(STEPS))
        self.histogram_updates = updates

    def close(self, summary: dict[str, Any], snap: StatsSnapshot, run_name: str) -> None:
        """The hparams with the run's final metrics; the event file closed."""
        if self.writer is None:
            return
        hparams = {key: get_path(self.cfg, key) for key in self.cfg["logging"]["hparams"]}
        self.writer.hparams(hparams, final_metrics(summary), snap.total(STEPS), run_name=run_name)
        self.writer.close()
