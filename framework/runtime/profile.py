"""A run's own profile: per-phase timers in the worker processes, in shared memory beside the run statistics.

As PufferLib's `profile('env')`: a worker's loop says which phase it enters
(`Profile.switch`), and the time since its last switch goes to the phase it
leaves, so every second of a worker from its start on belongs to one phase:

- setup: from the worker's start to its first other phase (its environments and model built);
- sync: copying the shared parameters into the local model;
- act: observations to actions (normalisation, the policy's forward pass, sampling: rl.actor);
- env: stepping the environments and writing each step into the trajectory;
- learn: the loss, its gradient and the update of the shared parameters;
- wait: an actor waiting for one of its slots, a learner for a batch (rl.trajectories);
- copy: a learner copying its batch out of the trajectory buffer.

A process adds its seconds to a list of its own and writes them into its row
of the run's table (`RunStats.profile`) at most every PUBLISH_S and when it
ends: no queue traffic, and per switch one time.perf_counter call and a few
Python operations (about 0.3 us; an A3C CartPole step makes two: its cost is
measured in docs/performance.md). The row also holds the process's wall time
since the backend started it (`started_at`, the main process's time.time()),
so what no phase accounts for shows: the interpreter's start and imports
before the worker's code runs, and what a process did since its last write.
A restarted rank adds to its predecessor's row. The monitor reports the
table summed over the processes (`totals`): summary.json's `profile`,
TensorBoard's profile/<phase> (each phase's share of the workers' wall time
in a log interval) and one line at the end of `train`.
"""
from __future__ import annotations

import time
from time import perf_counter

import numpy as np

PHASES = ("setup", "sync", "act", "env", "learn", "wait", "copy")
SETUP, SYNC, ACT, ENV, LEARN, WAIT, COPY = range(len(PHASES))
WALL = len(PHASES)
"""The column of a process's wall time, after the phases' columns."""
COLUMNS = len(PHASES) + 1

PUBLISH_S = 0.1
"""How often (at most) a process writes its seconds into the shared table: what the monitor's view lags by."""


class Profile:
    """One process's phase timer over its row of the profile table (see the module docstring)."""

    __slots__ = ("_row", "_base", "_seconds", "_phase", "_last", "_published", "_started_at")

    def __init__(self, row: np.ndarray, started_at: float | None = None):
        self._row = row
        self._base = row.copy()  # what a predecessor of this rank wrote
        self._seconds = [0.0] * len(PHASES)
        self._phase = SETUP
        self._last = self._published = perf_counter()
        self._started_at = time.time() if started_at is None else started_at

    def switch(self, phase: int) -> int:
        """Enter phase (one of SETUP ... COPY): the time since the last switch goes to the phase left, which is
        returned (a caller that interrupts a phase switches back to it)."""
        now = perf_counter()
        left = self._phase
        self._seconds[left] += now - self._last
        self._last, self._phase = now, phase
        if now - self._published >= PUBLISH_S:
            self._write(now)
        return left

    def publish(self) -> None:
        """Write the seconds so far (the running phase's up to now) into the shared row: at a process's end."""
        now = perf_counter()
        self._seconds[self._phase] += now - self._last
        self._last = now
        self._write(now)

    def _write(self, now: float) -> None:
        self._row[:WALL] = self._base[:WALL] + self._seconds
        self._row[WALL] = self._base[WALL] + time.time() - self._started_at
        self._published = now


def totals(table: np.ndarray) -> tuple[dict[str, float], float]:
    """(seconds of each phase, wall seconds), summed over the processes' rows of a profile table."""
    summed = table.sum(axis=0)
    return {name: float(summed[i]) for i, name in enumerate(PHASES)}, float(summed[WALL])
