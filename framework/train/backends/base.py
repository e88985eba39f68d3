"""The seam between the trainer and where its workers run.

The trainer builds the model, the optimizer and the run statistics in this
machine's shared memory, then hands them to a backend. The backend starts one
worker per rank that runs the algorithm's `run_worker` against them, reports
each worker that ends (cleanly, by an exception with its traceback, or by a
signal), restarts a rank when the monitor asks, and stops everything at the
end. The monitor only calls the methods below, so a backend that runs
workers elsewhere (other machines, exchanging parameters with this one: the
`ray` backend) plugs in without touching the monitor, checkpoints or
TensorBoard; it keeps the launch's model and statistics current, reports
workers lost with their machine (`WorkerExit.lost`) and a failure it cannot
survive (`BackendError`), and may add metrics and summary entries.
"""
from __future__ import annotations

import abc
import os
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from framework.runtime.algorithm import Algorithm, Role
from framework.runtime.run_stats import RunStats
from framework.runtime.schema import Config


def share_model(config: Config, algorithm: Algorithm, model: Any, workers: int) -> tuple[Any, Any, RunStats]:
    """model in shared memory on trainer.device, its shared optimizer, and run statistics for `workers` rows.

    What the trainer makes for a run, and a Ray node group for its part of one.
    """
    model.to(config["trainer"]["device"]).share_memory()  # on CUDA one device allocation, sent as an IPC handle
    optimizer = algorithm.build_optimizer(model, config)  # its state lives with the parameters
    optimizer.share_memory()
    stats = RunStats(workers, algorithm.metrics, ring=max(1024, algorithm.window(config)),
                     step_budget=config["trainer"]["total_steps"], counts=algorithm.counts)
    return model, optimizer, stats


def set_environment(values: dict[str, str]) -> Callable[[], None]:
    """Set environment variables (processes started from now on inherit them); returns what restores them."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)

    def restore() -> None:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return restore


def worker_seed(base_seed: int, rank: int, generation: int) -> int:
    """A seed for worker rank's generation-th start, distinct for every (base, rank, generation)."""
    return int(np.random.SeedSequence([base_seed, rank, generation]).generate_state(1)[0])


@dataclass
class WorkerExit:
    """A worker that ended: its rank, whether it finished cleanly, how it ended (one line, starting with its
    `name`) and its traceback."""

    rank: int
    clean: bool
    summary: str
    traceback: str = ""
    lost: bool = False
    """The worker's machine went away (a Ray node), not the worker: the run goes on without its group, or starts
    the group again when the monitor restarts `rank` (the group's first rank, which reports the loss)."""
    role: str = "worker"
    index: int | None = None
    """Its place among its role's processes; None: its rank (the one `worker` role)."""

    @property
    def position(self) -> int:
        """Its index among its role's processes (its rank, for the one `worker` role)."""
        return self.rank if self.index is None else self.index

    @property
    def name(self) -> str:
        """How lines name it: 'worker 3', 'learner 0'."""
        return f"{self.role} {self.position}"

    def report(self) -> str:
        """The summary line, followed by the traceback when there is one."""
        return f"{self.summary}\n{self.traceback.rstrip()}" if self.traceback else self.summary


@dataclass
class Launch:
    """What a backend gets from the trainer: the config, the plugin, and the run's shared objects.

    `generations[rank]` counts the starts of each rank (restarts and resumes
    included); a backend bumps it before each start and derives the worker's
    seed from it (`worker_seed`), so a checkpoint carries it across resumes.
    """

    config: Config
    algorithm: Algorithm
    model: Any
    optimizer: Any
    stats: RunStats
    generations: list[int]
    roles: tuple[Role, ...] = ()
    """The plugin's kinds of process in rank order (`Algorithm.roles`); empty: every rank is a `worker`."""
    state: dict[str, np.ndarray] = field(default_factory=dict)
    """The plugin's own arrays in shared memory (`Algorithm.build_state`), each worker's `ctx.state`."""

    def role_of(self, rank: int) -> tuple[Role, int]:
        """The role of rank and its index among that role's processes."""
        first = 0
        for role in self.roles:
            if rank < first + role.count:
                return role, rank - first
            first += role.count
        return Role("worker", 0), rank


class BackendError(Exception):
    """The backend cannot go on (the parameter server of a Ray run was lost): the run stops as failed."""


class Backend(abc.ABC):
    """Runs the workers of one run; made with a Launch, driven by the monitor."""

    def __init__(self, launch: Launch):
        self.launch = launch
        self.restarts = 0
        """How many times a rank was started again after it ended."""

    @abc.abstractmethod
    def start(self, cancelled: Callable[[], bool] = lambda: False) -> None:
        """Start one worker per rank (`trainer.workers`); no further one once `cancelled()` is true.

        Start-up failures (no process can be made) raise OSError; the ranks started so far run on.
        """

    @abc.abstractmethod
    def poll(self) -> list[WorkerExit]:
        """Workers that ended since the last call; BackendError when the run cannot go on."""

    @abc.abstractmethod
    def restart(self, rank: int) -> None:
        """Start rank again, with a new seed, after it ended; counts in `restarts`."""

    @property
    @abc.abstractmethod
    def running(self) -> int:
        """How many workers are running."""

    @abc.abstractmethod
    def stop(self, timeout_s: float) -> list[WorkerExit]:
        """Ask every worker to stop, wait up to timeout_s, end any left over; how each one ended."""

    def metrics(self) -> dict[str, float]:
        """The backend's own numbers since the last call, logged next to the run's (none by default)."""
        return {}

    def summary(self) -> dict[str, Any]:
        """The backend's own entries of summary.json (none by default)."""
        return {}
