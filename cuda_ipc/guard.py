"""The start-method guard: CUDA cannot be used in a process forked after its parent initialised CUDA.

A forked child inherits the parent's CUDA driver state without the threads and
mappings behind it, so its first CUDA call fails in obscure ways (or hangs).
Every CUDA use through hogshare (cuda_ipc and framework CUDA tensors) calls
:func:`check_cuda_allowed` first, which records that this process uses CUDA
and, in a child forked after that, raises an error that names the start
methods that work.
"""
from __future__ import annotations

import os

_initialised_pid: int | None = None
_forked_from_pid: int | None = None


def check_cuda_allowed() -> None:
    """Raise RuntimeError in a process forked after its parent initialised CUDA; else record this process as a CUDA user."""
    global _initialised_pid
    if _forked_from_pid is not None:
        raise RuntimeError(
            f"cannot use CUDA in process {os.getpid()}: it was forked from process {_forked_from_pid} "
            "after that process had initialised CUDA, and CUDA does not survive fork. "
            "Start the process with the 'spawn' or 'forkserver' start method "
            "(sharing.get_context('spawn') or trainer.start_method: spawn)")
    if _initialised_pid is None:
        _initialised_pid = os.getpid()


def forked_after_cuda() -> bool:
    """True in a process forked (directly or not) from one that had initialised CUDA."""
    return _forked_from_pid is not None


def _after_fork_in_child() -> None:
    global _initialised_pid, _forked_from_pid
    if _initialised_pid is not None and _forked_from_pid is None:
        _forked_from_pid = _initialised_pid
    _initialised_pid = None


os.register_at_fork(after_in_child=_after_fork_in_child)
