"""Worker processes of a run: starting them, noticing when one dies or raises, restarting, stopping.

A worker runs its algorithm's `run_worker` with the shared model and optimizer,
with `trainer.device` made current first (for CUDA, after the start-method
guard; the model's device memory arrived as IPC handles). It dies with the
main process (`die_with_parent`), ignores SIGINT (the main process decides
when to stop and tells it through shared memory), and sends its traceback
over a queue if it raises: the queue carries nothing else.
"""
from __future__ import annotations

import os
import signal
import time
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

from framework import algorithms
from framework.algorithms.base import WorkerContext
from framework.config import Config
from framework.device import use_device
from framework.run_stats import RunStats
from sharing import lifecycle

BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def worker_seed(base_seed: int, rank: int, generation: int) -> int:
    """A seed for worker rank's generation-th start, distinct for every (base, rank, generation)."""
    return int(np.random.SeedSequence([base_seed, rank, generation]).generate_state(1)[0])


def _worker_main(rank: int, seed: int, config: Config, model: Any, optimizer: Any, stats: RunStats,
                 errors: Any, shared: Any) -> None:
    """Entry point of a worker process."""
    lifecycle.die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        use_device(config["trainer"]["device"])
        algorithm = algorithms.get(config["algorithm"]["name"])
        algorithm.run_worker(WorkerContext(rank, seed, config, model, optimizer, stats.writer(rank), shared))
    except BaseException:
        errors.put((rank, traceback.format_exc()))
        raise SystemExit(1) from None


@dataclass
class WorkerExit:
    """A worker that ended: its rank, whether it finished cleanly, how it ended (one line) and its traceback."""

    rank: int
    clean: bool
    summary: str
    traceback: str = ""

    def report(self) -> str:
        """The summary line, followed by the traceback when there is one."""
        return f"{self.summary}\n{self.traceback.rstrip()}" if self.traceback else self.summary


class WorkerPool:
    """The worker processes of one run, started with one multiprocessing context."""

    def __init__(self, context: Any, config: Config, model: Any, optimizer: Any, stats: RunStats,
                 generations: list[int], shared: Any = None):
        self._context = context
        self._shared = shared
        self._config = config
        self._model, self._optimizer, self._stats = model, optimizer, stats
        self.generations = generations
        self.restarts = 0
        self._errors = context.SimpleQueue()
        self._procs: dict[int, Any] = {}
        self._saved_env = {k: os.environ.get(k) for k in BLAS_THREAD_VARS}
        os.environ.update({k: "1" for k in BLAS_THREAD_VARS})  # inherited by spawn/forkserver children

    def start(self, rank: int) -> None:
        """Start (or restart) worker rank with a fresh seed."""
        self.generations[rank] += 1
        seed = worker_seed(self._config["seed"], rank, self.generations[rank])
        proc = self._context.Process(
            target=_worker_main, name=f"{self._config['experiment']}-worker-{rank}", daemon=True,
            args=(rank, seed, self._config, self._model, self._optimizer, self._stats, self._errors, self._shared))
        proc.start()
        self._procs[rank] = proc

    def start_all(self) -> None:
        """Start one worker per rank."""
        for rank in range(self._stats.workers):
            self.start(rank)

    def restart(self, rank: int) -> None:
        """Replace an ended worker by a fresh one with the same rank and a new seed."""
        self.restarts += 1
        self.start(rank)

    @property
    def running(self) -> int:
        """How many workers are still running."""
        return len(self._procs)

    def poll(self) -> list[WorkerExit]:
        """Workers that have ended since the last call, with their tracebacks or signals."""
        ended = {rank: p for rank, p in self._procs.items() if p.exitcode is not None}
        if not ended:
            return []
        tracebacks = self._drain()
        exits = []
        for rank, proc in ended.items():
            del self._procs[rank]
            proc.join()
            exits.append(self._describe(rank, proc.exitcode, tracebacks.get(rank)))
            proc.close()
        return exits

    def _drain(self) -> dict[int, str]:
        tracebacks: dict[int, str] = {}
        while not self._errors.empty():
            rank, text = self._errors.get()
            tracebacks[rank] = text
        return tracebacks

    @staticmethod
    def _describe(rank: int, exitcode: int, tb: str | None) -> WorkerExit:
        if exitcode == 0:
            return WorkerExit(rank, True, f"worker {rank} finished")
        if exitcode < 0:
            try:
                name = signal.Signals(-exitcode).name
            except ValueError:
                name = str(-exitcode)
            return WorkerExit(rank, False, f"worker {rank} was killed by signal {name}")
        if tb:
            return WorkerExit(rank, False, f"worker {rank} raised an exception: {tb.rstrip().splitlines()[-1]}", tb)
        return WorkerExit(rank, False, f"worker {rank} exited with code {exitcode}")

    def stop(self, timeout_s: float) -> list[WorkerExit]:
        """Ask the workers to stop, wait up to timeout_s, terminate any left; how each one ended."""
        self._stats.request_stop()
        procs = list(self._procs.values())
        deadline = time.monotonic() + timeout_s
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        lifecycle.terminate_processes([p for p in procs if p.exitcode is None], grace_s=1.0)
        exits = self.poll()
        self._errors.close()
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        return exits
