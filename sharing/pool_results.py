"""Pool results that cannot be received fail their task, not the pool.

multiprocessing's Pool unpickles every result in one thread of the parent
(``Pool._handle_results``), and an exception raised there ends that thread for
good: ``map`` never returns and ``terminate`` asserts. Receiving a shared array
can fail there (a ``file_descriptor`` worker that exited before its result was
opened, as workers with ``maxtasksperchild`` do; no descriptor left), so that
thread receives with failures collected (Note [receiving where an exception
would kill the thread] in ``reductions``) and turns a result whose storages
could not be opened into the task's exception, a RuntimeError that ``map``,
``apply_async`` and the rest raise in the caller. Installed on import, for
every context's Pool; costs one context manager per result.
"""
from __future__ import annotations

import multiprocessing.pool
from typing import Any, Callable

from .reductions import failures_collected


def _transfer_error(failures: list[Exception]) -> RuntimeError:
    more = f" (and {len(failures) - 1} more shared storages)" if len(failures) > 1 else ""
    error = RuntimeError(f"the result of this pool task could not be received{more}: {failures[0]}")
    error.__cause__ = failures[0]
    return error


def _receiving(get: Callable[[], Any]) -> Callable[[], Any]:
    """`get` of the pool's result handler, with a result that could not be received made the task's failure."""
    def get_result() -> Any:
        with failures_collected() as failures:
            task = get()
        if failures and task is not None:
            job, i, _ = task
            return job, i, (False, _transfer_error(failures))
        return task
    return get_result


def _handle_results(outqueue, get, cache, _handle=multiprocessing.pool.Pool._handle_results) -> None:
    _handle(outqueue, _receiving(get), cache)


def install() -> None:
    """Have every Pool's result handler receive through `_receiving` (idempotent)."""
    multiprocessing.pool.Pool._handle_results = staticmethod(_handle_results)


install()
