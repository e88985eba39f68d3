"""Per-worker statistics in shared memory: workers write their own row, the monitor reads every row.

No queue traffic while training: each worker adds to its counters once per
update, appends finished episodes to its own ring buffer, and sums the
algorithm's per-update metrics (losses, entropy, ...) and its running counts
(seconds waited, trajectories dropped), and each process keeps its profile
there (`runtime.profile`: seconds per phase). The monitor takes snapshots and
turns differences between them into rates and means. Workers report metrics and
counts by name; a name the algorithm did not declare is an error. One writer
per row, so no locks are needed; an update's counters and metric sums are
written under a per-row sequence number (a seqlock) so that a snapshot never
pairs one update's metrics with the count before it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

import sharing
from framework.runtime.profile import COLUMNS, Profile

# Columns of the int64 counter table. SEQ is odd while the row's writer is in add_update.
STEPS, UPDATES, EPISODES, SKIPPED, SKIP_STREAK, LAG_SUM, SEQ = range(7)
_COUNTERS = 7
_STOP, _BUDGET, _UPDATES_ELSEWHERE = range(3)
_SNAPSHOT_TRIES = 200
_SNAPSHOT_WAIT_S = 0.0002


class RunStats:
    """Shared counters, episode rings and metric sums for `workers` workers; pickles as shared handles.

    `metrics` are averaged over updates; `counts` (the algorithm's running totals) are summed over workers. Both
    live in `metric_sums`, the counts after the metrics.
    """

    def __init__(self, workers: int, metrics: Sequence[str], ring: int = 1024, step_budget: int = 2**62,
                 counts: Sequence[str] = ()):
        self.workers = workers
        self.metrics = tuple(metrics)
        self.counts = tuple(counts)
        self.ring = ring
        self.counters = sharing.empty_shared((workers, _COUNTERS), np.int64)
        self.metric_sums = sharing.empty_shared((workers, max(1, len(self.metrics) + len(self.counts))), np.float64)
        self.episodes = sharing.empty_shared((workers, ring, 2), np.float64)  # (return, length)
        self.control = sharing.empty_shared((3,), np.int64)  # [stop requested, step budget, updates elsewhere]
        self.profile = sharing.empty_shared((workers, COLUMNS), np.float64)  # seconds per phase, wall (profile)
        for array in (self.counters, self.metric_sums, self.episodes, self.control, self.profile):
            array[...] = 0
        self.control[_BUDGET] = step_budget

    def set_step_budget(self, steps: int) -> None:
        """Workers start no rollout (or batch) once the run's total steps reach this (`trainer.total_steps`)."""
        self.control[_BUDGET] = steps

    def set_updates_elsewhere(self, updates: int) -> None:
        """Updates the shared parameters hold besides these workers' own (a Ray node's: the other nodes' updates,
        which arrived with the global parameters), so that the policy lag counts them as a local run does."""
        self.control[_UPDATES_ELSEWHERE] = updates

    def writer(self, rank: int, started_at: float | None = None) -> "WorkerStats":
        """The view a worker writes through; started_at: when its process was started (time.time(), by default
        now), from which its profile counts its wall time."""
        return WorkerStats(self, rank, started_at)

    def request_stop(self) -> None:
        """Ask every worker to finish its current update and return."""
        self.control[_STOP] = 1

    def stop_told(self) -> bool:
        """Whether the workers were told to stop (what `WorkerStats.should_stop` tells them): asked by the monitor,
        or the run's steps at the budget. A worker that returns before it was told has failed."""
        return bool(self.control[_STOP]) or int(self.counters[:, STEPS].sum()) >= self.control[_BUDGET]

    def snapshot(self) -> "StatsSnapshot":
        """Copies of the counters and metric sums at this moment, each row between two updates.

        Retries while a writer is inside add_update; after about 40 ms (a writer
        descheduled or killed mid-update) it takes what it read.
        """
        for _ in range(_SNAPSHOT_TRIES):
            seq = self.counters[:, SEQ].copy()
            counters = self.counters.copy()
            sums = self.metric_sums.copy()
            if not (seq % 2).any() and (self.counters[:, SEQ] == seq).all():
                break
            time.sleep(_SNAPSHOT_WAIT_S)
        return StatsSnapshot(counters, sums, self.profile.copy())

    def new_episodes(self, seen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(returns, lengths) finished since `seen` (per-worker episode counts, updated in place).

        When a worker finished more than a ring's worth since the last call, only
        the newest `ring` of its episodes are returned.
        """
        parts = self.new_episodes_by_worker(seen)
        if not parts:
            return np.zeros(0), np.zeros(0)
        return np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])

    def new_episodes_by_worker(self, seen: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """(row, returns, lengths) of each worker that finished episodes since `seen` (see new_episodes)."""
        parts = []
        for rank in range(self.workers):
            count = int(self.counters[rank, EPISODES])
            first = max(int(seen[rank]), count - self.ring)
            if count > first:
                slots = np.arange(first, count) % self.ring
                parts.append((rank, self.episodes[rank, slots, 0], self.episodes[rank, slots, 1]))
            seen[rank] = count
        return parts

    def restore(self, counters: np.ndarray) -> None:
        """Start from saved totals (a resumed run): row 0 carries them, the others start at zero."""
        self.counters[...] = 0
        self.counters[0, STEPS:EPISODES + 1] = counters[STEPS:EPISODES + 1]
        self.counters[0, SKIPPED] = counters[SKIPPED]


@dataclass
class StatsSnapshot:
    """Counters (workers x columns), metric sums (workers x metrics) and the profile table (workers x phases and
    wall: runtime.profile) at one moment."""

    counters: np.ndarray
    metric_sums: np.ndarray
    profile: np.ndarray

    def total(self, column: int) -> int:
        """The sum of one counter column over workers."""
        return int(self.counters[:, column].sum())

    def metric_means(self, earlier: "StatsSnapshot", names: Sequence[str]) -> dict[str, float]:
        """The mean of each metric over the updates made between earlier and this snapshot."""
        updates = self.total(UPDATES) - earlier.total(UPDATES)
        if updates <= 0 or not names:
            return {}
        sums = (self.metric_sums - earlier.metric_sums).sum(axis=0)
        return {name: float(sums[i]) / updates for i, name in enumerate(names)}

    def count_totals(self, metrics: Sequence[str], counts: Sequence[str]) -> dict[str, float]:
        """Each count summed over workers (the counts follow the metrics in the sums)."""
        sums = self.metric_sums[:, len(metrics):len(metrics) + len(counts)].sum(axis=0)
        return {name: float(sums[i]) for i, name in enumerate(counts)}


class WorkerStats:
    """One worker's row: what the algorithm calls once per rollout/update."""

    def __init__(self, stats: RunStats, rank: int, started_at: float | None = None):
        self.profile = Profile(stats.profile[rank], started_at)
        """This process's phase timer (runtime.profile)."""
        self._counters = stats.counters
        self._row = stats.counters[rank]
        self._sums = stats.metric_sums[rank]
        self._episodes = stats.episodes[rank]
        self._ring = stats.ring
        self._control = stats.control
        self._metric_index = {name: i for i, name in enumerate(stats.metrics)}
        self._count_index = {name: len(stats.metrics) + i for i, name in enumerate(stats.counts)}
        self._row[SEQ] += self._row[SEQ] % 2  # a predecessor killed inside add_update left it odd

    def should_stop(self) -> bool:
        """True once the monitor asked the workers to stop or the run's steps reached its budget.

        Checked before each rollout (or batch), so a run ends at most one
        rollout per worker past `trainer.total_steps`.
        """
        return bool(self._control[_STOP]) or self.global_steps() >= self._control[_BUDGET]

    def global_updates(self) -> int:
        """Updates applied to the shared parameters by all workers so far, those of other Ray nodes included (for
        policy lag)."""
        return int(self._counters[:, UPDATES].sum()) + int(self._control[_UPDATES_ELSEWHERE])

    def global_steps(self) -> int:
        """Env steps (or samples) taken by all workers so far (for schedules such as lr decay)."""
        return int(self._counters[:, STEPS].sum())

    def add_steps(self, n: int) -> None:
        """Count n env steps (or samples)."""
        self._row[STEPS] += n

    def add_episodes(self, returns: Sequence[float], lengths: Sequence[int]) -> None:
        """Record finished episodes in the ring buffer, then publish the new count."""
        count = int(self._row[EPISODES])
        for i, (ret, length) in enumerate(zip(returns, lengths)):
            slot = (count + i) % self._ring
            self._episodes[slot, 0] = ret
            self._episodes[slot, 1] = length
        self._row[EPISODES] = count + len(returns)

    def add_update(self, metrics: Mapping[str, float], lag: int) -> None:
        """Count one applied update with its named metric values (the algorithm's `metrics`) and policy lag."""
        index = [self._metric_index[name] for name in metrics]  # KeyError for a name not declared
        self._row[SEQ] += 1
        self._sums[index] += list(metrics.values())
        self._row[LAG_SUM] += lag
        self._row[SKIP_STREAK] = 0
        self._row[UPDATES] += 1
        self._row[SEQ] += 1

    def add_count(self, name: str, value: float = 1.0) -> None:
        """Add value to one of the algorithm's running counts (`Algorithm.counts`); KeyError for another name."""
        self._sums[self._count_index[name]] += value

    def add_skipped(self) -> int:
        """Count an update not applied (non-finite loss or gradient); returns the current streak."""
        self._row[SKIPPED] += 1
        self._row[SKIP_STREAK] += 1
        return int(self._row[SKIP_STREAK])
