"""The start-method guard: CUDA cannot be used in a process forked after its parent initialised CUDA.

A forked child inherits the parent's CUDA driver state without the threads and
mappings behind it, so its first CUDA call fails in obscure ways (CUDA's
"initialization error", or a hang). Every way into CUDA through hogshare calls
:func:`check_cuda_allowed` first: creating or moving a CUDA tensor, making a
device current, drawing random numbers on a device (all through
``framework.device.cupy_module``), sending or receiving a device array, and
``cuda_ipc.is_available()`` when it finds a device. The first call records
that this process uses CUDA; in a child forked after that, every call raises an
error that names the start methods that work. (Operations on CUDA arrays a
forked child inherited do not pass here: the child cannot make new ones.)
The check is two global reads.
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
