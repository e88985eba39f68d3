"""The `local` backend: worker processes on this machine, sharing the model through its shared memory.

A worker runs its algorithm's `run_worker` with the shared model and optimizer,
with `trainer.device` made current first (for CUDA, after the start-method
guard; the model's device memory arrived as IPC handles). It dies with the
main process (`die_with_parent`), and if it raises writes the tail of its
traceback (at most TRACEBACK_BYTES, less than a pipe holds, so the write never
waits for a reader) to a pipe of its own that nothing else uses. A pipe, not a
queue: a queue's locks are named semaphores under spawn and forkserver, which
a process killed outright (a Ray node) would leave in /dev/shm. SIGINT and SIGHUP, which a terminal
sends to the whole process group, are blocked while a worker starts and
ignored once it runs (see `stop_signals`): the main process decides when to
stop and tells it through shared memory. multiprocessing's resource tracker
(a process of the same group) is started with them blocked too, and for
forkserver a watcher of the fork server's socket directory
(`lifecycle.watch_forkserver_directory`), so that not even SIGKILL of the whole
process group leaves it in TMPDIR. Workers are
started with `trainer.start_method` and pin BLAS to one thread: through the
environment for spawn and forkserver children, and with threadpoolctl in each
worker, since a forked one inherits the BLAS thread pool numpy already made
(two threads a worker on a loaded machine made the Atari model's GEMMs 13x
slower), and keep the memory they free for reuse (see `keep_freed_memory`).
A main module that is no file (standard input) is kept from the children
(`main_module_reachable`).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
import traceback
from multiprocessing import resource_tracker
from typing import Any, Callable, Iterator

from threadpoolctl import threadpool_limits

import sharing
from framework import algorithms
from framework.runtime.algorithm import Role, WorkerContext
from framework.device import use_device
from framework.train.backends.base import Backend, Config, Launch, WorkerExit, set_environment, worker_seed
from framework.runtime.run_stats import RunStats
from framework.train.stop_signals import WORKER_IGNORED
from sharing import lifecycle

BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
TRACEBACK_BYTES = 16 << 10
KEPT_BLOCK_BYTES = 1 << 30
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


def keep_freed_memory() -> bool:
    """Have malloc keep the large blocks this process frees for reuse, rather than give them back to the kernel.

    A worker makes and frees the same large temporaries every update (a Pong
    rollout's convolution patches are tens of MB). glibc's malloc maps each
    block above its mmap threshold (32 MB at most) afresh, and returns a freed
    heap top past its trim threshold, so every update faulted all those pages in
    again: 3,600 minor faults an update, 8% of the worker's time in the kernel.
    With both thresholds at KEPT_BLOCK_BYTES it faults none, and an update takes
    75 ms of CPU instead of 85 (configs/a3c_pong.yaml, one worker in one process,
    medians of 12 runs of 40 updates each way, alternating). The cost: a
    worker's heap stays at its peak, which it reaches every update anyway.
    False where the C library has no mallopt (not glibc) or refuses.
    """
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    return mallopt is not None and all(mallopt(parameter, KEPT_BLOCK_BYTES) == 1
                                       for parameter in (_M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD))


@contextlib.contextmanager
def main_module_reachable() -> Iterator[None]:
    """While starting a process: hide a `__main__` file that does not exist from spawn and forkserver.

    Their children re-run the main module from `__main__.__file__` (under the
    name `__mp_main__`) so that what it defines can be unpickled there. A
    program read from standard input (`python - < script.py`) has the file
    name '<stdin>', which the children cannot open: they died with
    FileNotFoundError before a worker ran. Without `__file__` they leave the
    main module alone, as they do for `python -c` and a notebook, whose
    definitions they cannot reach either (`framework.train.api` refuses
    factories defined there).
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if getattr(main, "__spec__", None) is not None or not isinstance(path, str) or os.path.isfile(path):
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


def _worker_main(rank: int, row: int, seed: int, config: Config, model: Any, optimizer: Any, stats: RunStats,
                 error: Any, shared: Any, state: dict[str, Any], role: Role, index: int, started_at: float) -> None:
    """Entry point of a worker process: rank in the run, row in `stats`, `error` the pipe for its traceback,
    started_at when the main process started it (its profile's wall time counts from there); it calls the plugin's
    method that its role names, and publishes its profile however that ends."""
    lifecycle.die_with_parent()
    lifecycle.ignore_signals(WORKER_IGNORED)
    try:
        threadpool_limits(1)  # a forked worker's BLAS pool was sized before BLAS_THREAD_VARS were set
        keep_freed_memory()
        use_device(config["trainer"]["device"])
        algorithm = algorithms.get(config["algorithm"]["name"])
        ctx = WorkerContext(rank, seed, config, model, optimizer, stats.writer(row, started_at), shared, state,
                            role.name, index)
        try:
            getattr(algorithm, role.entry)(ctx)
        finally:
            ctx.stats.profile.publish()
    except BaseException:
        error.send_bytes(traceback.format_exc().encode(errors="replace")[-TRACEBACK_BYTES:])
        raise SystemExit(1) from None


def describe_exit(rank: int, exitcode: int, tb: str | None, told_to_stop: bool = True, role: str = "worker",
                  index: int | None = None) -> WorkerExit:
    """How a worker process ended, from its exit code, the traceback it sent (if any) and whether it had been told
    to stop: exit code 0 before then (an environment or C library calling exit(0)) is a failure too. Lines name
    it by its role and index ('worker 3', 'learner 0')."""
    ended = WorkerExit(rank, exitcode == 0 and told_to_stop, "", role=role, index=index)
    if ended.clean:
        how = "finished"
    elif exitcode == 0:
        how = "exited with code 0 before it was told to stop"
    elif exitcode < 0:
        try:
            how = f"was killed by signal {signal.Signals(-exitcode).name}"
        except ValueError:
            how = f"was killed by signal {-exitcode}"
    elif tb:
        how = f"raised an exception: {tb.rstrip().splitlines()[-1]}"
        ended.traceback = tb
    else:
        how = f"exited with code {exitcode}"
    ended.summary = f"{ended.name} {how}"
    return ended


class LocalBackend(Backend):
    """The worker processes of one run, started with one multiprocessing context.

    `ranks` are the ranks it runs (all of the run's by default; a Ray node
    group runs a contiguous part of them): rank `ranks[i]` writes row i of the
    launch's statistics and counts its starts in `generations[i]`.
    """

    def __init__(self, launch: Launch, ranks: range | None = None):
        super().__init__(launch)
        config = launch.config
        self.ranks = range(launch.stats.workers) if ranks is None else ranks
        with lifecycle.signals_blocked(WORKER_IGNORED):  # the tracker of the run's semaphores outlives them too
            resource_tracker.ensure_running()
        if config["trainer"]["start_method"] == "forkserver":
            lifecycle.watch_forkserver_directory()
        self._context = sharing.get_context(config["trainer"]["start_method"])
        self.shared = launch.algorithm.build_shared(config, self._context, self.ranks)
        """What the plugin made for these ranks' processes (`Algorithm.build_shared`), their ctx.shared."""
        self._errors: dict[int, Any] = {}  # rank -> the reading end of its worker's traceback pipe
        self._procs: dict[int, Any] = {}
        self._restore_env = set_environment(dict.fromkeys(BLAS_THREAD_VARS, "1"))  # for spawn/forkserver children

    def _start(self, rank: int) -> None:
        launch = self.launch
        row = rank - self.ranks.start
        launch.generations[row] += 1
        seed = worker_seed(launch.config["seed"], rank, launch.generations[row])
        reader, writer = self._context.Pipe(duplex=False)
        role, index = launch.role_of(rank)
        proc = self._context.Process(
            target=_worker_main, name=f"{launch.config['experiment']}-{role.name}-{index}", daemon=True,
            args=(rank, row, seed, launch.config, launch.model, launch.optimizer, launch.stats, writer,
                  self.shared, launch.state, role, index, time.time()))
        try:
            with lifecycle.signals_blocked(WORKER_IGNORED), main_module_reachable():
                proc.start()
        except BaseException:
            reader.close()
            raise
        finally:
            writer.close()  # the worker has its own
        self._procs[rank], self._errors[rank] = proc, reader

    def start(self, cancelled: Callable[[], bool] = lambda: False) -> None:
        for rank in self.ranks:
            if cancelled():
                return
            self._start(rank)

    def restart(self, rank: int) -> None:
        self.restarts += 1
        self._start(rank)

    @property
    def running(self) -> int:
        return len(self._procs)

    def poll(self) -> list[WorkerExit]:
        ended = {rank: p for rank, p in self._procs.items() if p.exitcode is not None}
        if not ended:
            return []
        exits = []
        told = self.launch.stats.stop_told()  # read after the exits: a worker that saw it and returned is told
        for rank, proc in ended.items():
            del self._procs[rank]
            proc.join()
            role, index = self.launch.role_of(rank)
            exits.append(describe_exit(rank, proc.exitcode, self._traceback(rank), told, role.name, index))
            proc.close()
        return exits

    def _traceback(self, rank: int) -> str | None:
        """What the ended worker of rank wrote to its pipe, or None (it raised nothing, or died writing)."""
        error = self._errors.pop(rank)
        try:
            return error.recv_bytes().decode(errors="replace") if error.poll() else None
        except EOFError:  # the pipe closed empty
            return None
        finally:
            error.close()

    def stop(self, timeout_s: float) -> list[WorkerExit]:
        self.launch.stats.request_stop()
        deadline = time.monotonic() + timeout_s
        for proc in self._procs.values():
            proc.join(max(0.0, deadline - time.monotonic()))
        late = {rank for rank, proc in self._procs.items() if proc.exitcode is None}
        lifecycle.terminate_processes([self._procs[rank] for rank in late], grace_s=1.0)
        exits = self.poll()
        for ended in exits:
            if ended.rank in late:
                ended.summary = (f"{ended.name} did not stop within trainer.join_timeout_s ({timeout_s:g} s) "
                                 f"and was terminated by the trainer")
        self._restore_env()
        return exits


BACKEND = LocalBackend
