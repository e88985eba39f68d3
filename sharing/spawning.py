"""``spawn``: run a function in N processes and surface the first failure, as ``torch.multiprocessing.spawn`` does.

A child's exception comes back as ``ProcessRaisedException`` carrying the
child's traceback; a death by signal or a non-zero exit as
``ProcessExitedException``. Either way the other processes are terminated
(SIGTERM, then SIGKILL after a grace period), and every child dies with its
parent (see ``lifecycle.die_with_parent``).
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import signal
import sys
import traceback
from typing import Any, Callable

from . import lifecycle

TERMINATE_GRACE_S = 5.0


class ProcessException(Exception):
    """A process started by `spawn` failed; `error_index` is its rank, `pid` its process id."""

    def __init__(self, msg: str, error_index: int, pid: int) -> None:
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A process started by `spawn` raised; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A process started by `spawn` exited with a non-zero code or was killed by a signal."""

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int,
                 signal_name: str | None = None) -> None:
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _wrap(fn: Callable[..., Any], rank: int, args: tuple, error_queue: Any) -> None:
    lifecycle.die_with_parent()
    try:
        fn(rank, *args)
    except KeyboardInterrupt:
        pass  # the parent is stopping everyone
    except Exception:  # SystemExit keeps its exit code, as in torch
        error_queue.put(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    """The processes started by `spawn` and the means to wait for them."""

    def __init__(self, processes: list[multiprocessing.process.BaseProcess], error_queues: list[Any]) -> None:
        self.processes = processes
        self.error_queues = error_queues
        self.sentinels = {p.sentinel: rank for rank, p in enumerate(processes)}

    def pids(self) -> list[int]:
        """The process ids, by rank."""
        return [p.pid for p in self.processes]

    def join(self, timeout: float | None = None) -> bool:
        """Wait up to `timeout` seconds for the processes; True once all have exited successfully.

        The first failure terminates the others and is raised as
        ProcessRaisedException or ProcessExitedException.
        """
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(list(self.sentinels), timeout=timeout)
        failed = None
        for sentinel in ready:
            rank = self.sentinels.pop(sentinel)
            process = self.processes[rank]
            process.join()
            if process.exitcode != 0:
                failed = rank
                break
        if failed is None:
            return not self.sentinels
        lifecycle.terminate_processes(self.processes, grace_s=TERMINATE_GRACE_S)
        self.sentinels.clear()
        process = self.processes[failed]
        if not self.error_queues[failed].empty():
            tb = self.error_queues[failed].get()
            raise ProcessRaisedException(f"\n\n-- Process {failed} terminated with the following error:\n{tb}",
                                         failed, process.pid)
        if process.exitcode < 0:
            name = signal.Signals(-process.exitcode).name
            raise ProcessExitedException(f"process {failed} terminated with signal {name}", failed, process.pid,
                                         process.exitcode, name)
        raise ProcessExitedException(f"process {failed} terminated with exit code {process.exitcode}", failed,
                                     process.pid, process.exitcode)


def spawn(fn: Callable[..., Any], args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn") -> ProcessContext:
    """Run ``fn(rank, *args)`` in `nprocs` new processes (ranks 0..nprocs-1) and return their context.

    With `join` (the default) it returns once all have finished, raising the
    first failure; otherwise call ``context.join()`` until it returns True.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"nprocs must be a positive int, got {nprocs!r}")
    methods = multiprocessing.get_all_start_methods()
    if start_method not in methods:
        raise ValueError(f"unknown start method {start_method!r}; valid ones here are {', '.join(methods)}")
    ctx = multiprocessing.get_context(start_method)
    processes, error_queues = [], []
    try:
        for rank in range(nprocs):
            error_queue = ctx.SimpleQueue()
            process = ctx.Process(target=_wrap, args=(fn, rank, tuple(args), error_queue), daemon=daemon)
            process.start()
            processes.append(process)
            error_queues.append(error_queue)
    except BaseException:
        lifecycle.terminate_processes(processes, grace_s=TERMINATE_GRACE_S)
        raise
    context = ProcessContext(processes, error_queues)
    if join:
        while not context.join():
            pass
    return context
