"""Pool results that cannot be received fail their task, not the pool.

multiprocessing's Pool unpickles every result in one thread of the parent
(``Pool._handle_results``), and an exception raised there ends that thread for
good: ``map`` never returns and ``terminate`` asserts. Receiving a shared array
can fail there (a ``file_descriptor`` worker that exited before its result was
opened, as workers with ``maxtasksperchild`` do; no descriptor left), so that
thread receives with failures collected (Note [receiving where an exception
would kill the thread] in ``pickling``) and turns a result whose storages
could not be opened into the task's exception, a RuntimeError that ``map``,
``apply_async`` and the rest raise in the caller. A result whose unpickling
fails otherwise (an object's own reducer raising, even an OSError, which the
thread would take for a closed pipe and end on, silently) cannot be told from
the other tasks' results, since the task's id is in the message that failed:
every task then waiting fails with that error, and the pool goes on for the
tasks that follow. Installed on import, for every context's Pool; costs one
context manager per result.
"""
from __future__ import annotations

import multiprocessing.pool
from multiprocessing.reduction import ForkingPickler
from typing import Any, Callable

from .pickling import failures_collected


def _transfer_error(failures: list[Exception]) -> RuntimeError:
    more = f" (and {len(failures) - 1} more shared storages)" if len(failures) > 1 else ""
    error = RuntimeError(f"the result of this pool task could not be received{more}: {failures[0]}")
    error.__cause__ = failures[0]
    return error


_NO_TASK = (-1, 0, None)
"""A result for no task (job ids start at 0): the handler looks it up, finds nothing and goes on."""


def _fail_waiting(cache: dict, exc: Exception) -> tuple:
    """Fail every task of the pool still waiting with an unreadable result's error; a result for no task."""
    error = RuntimeError(f"a result of this pool could not be received ({type(exc).__name__}: {exc}); the task it "
                         f"answered is unknown, so every task waiting for a result fails with it")
    error.__cause__ = exc
    for result in list(cache.values()):
        result._set(getattr(result, "_index", 0), (False, error))  # an imap's next item, else any slot
    return _NO_TASK


def _receiving(outqueue: Any, get: Callable[[], Any], cache: dict) -> Callable[[], Any]:
    """`get` of the pool's result handler, with a result that could not be received made the task's failure."""
    reader = getattr(outqueue, "_reader", None)  # a ThreadPool's results are not pickled

    def get_result() -> Any:
        if reader is None:
            return get()
        message = reader.recv_bytes()  # OSError or EOFError here: the pipe, which ends the handler as before
        with failures_collected() as failures:
            try:
                task = ForkingPickler.loads(message)
            except Exception as exc:
                return _fail_waiting(cache, exc)
        if failures and task is not None:
            job, i, _ = task
            return job, i, (False, _transfer_error(failures))
        return task
    return get_result


def _handle_results(outqueue, get, cache, _handle=multiprocessing.pool.Pool._handle_results) -> None:
    _handle(outqueue, _receiving(outqueue, get, cache), cache)


def install() -> None:
    """Have every Pool's result handler receive through `_receiving` (idempotent)."""
    multiprocessing.pool.Pool._handle_results = staticmethod(_handle_results)


install()
