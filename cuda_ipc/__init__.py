"""CUDA IPC sharing for CuPy arrays (and framework CUDA tensors, which travel as their CuPy arrays).

A ``cupy.ndarray`` put on a ``sharing`` (or ``multiprocessing``) queue travels
as an IPC handle of its allocation plus its place in it; the receiving process
gets a view of the same device memory, ordered after the sender's pending
work by an interprocess event. The sender keeps every sent block alive until
its receiver lets go (reference counts in shared memory, see ``limbo``), and
each receiver opens an allocation once however many arrays it holds from it.

Importing this package touches neither CUDA nor CuPy. When CuPy gets imported
(or right away, if it already is), the reducer is registered and CuPy's
allocator becomes a memory pool over 2 MiB segments, small arrays packed into
them (see ``segments``): every allocation is then safe to export, and many
small arrays share one handle. A user's own allocator is left alone; arrays
from it are sent only when their allocation is a multiple of 2 MiB, and
:func:`shareable` copies any array into an allocation of its own.

An array that was itself received over IPC cannot be sent on (a ValueError
says to send ``array.copy()`` instead), as with PyTorch; receiving in the
process that sent the array gives a view of the original memory.

CUDA cannot be used in a process forked after its parent initialised CUDA:
use the ``spawn`` or ``forkserver`` start methods.
"""
from __future__ import annotations

from multiprocessing.reduction import ForkingPickler
from types import ModuleType
from typing import Any

from cuda_ipc.guard import check_cuda_allowed, forked_after_cuda
from cuda_ipc.limbo import ipc_collect
from cuda_ipc.pickling import reduce_array
from cuda_ipc.registration import when_imported

__all__ = ["check_cuda_allowed", "ipc_collect", "is_available", "memory_pool", "register_reducers", "shareable"]


def is_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device here; never raises.

    A positive answer initialised the CUDA driver in this process, so children
    that use CUDA must then be started with spawn or forkserver.
    """
    if forked_after_cuda():
        return False
    try:
        from cupy.cuda import runtime

        count = runtime.getDeviceCount()
    except Exception:  # no CuPy, no driver, no device, a broken install: all mean "not available"
        return False
    if count > 0:
        check_cuda_allowed()
    return count > 0


def shareable(array: Any) -> Any:
    """array itself when it has a device allocation of its own from cuda_ipc, else a copy in one (2 MiB-rounded).

    For arrays that other processes will map (parameter arenas, optimizer
    state): nothing unrelated shares their IPC handle.
    """
    check_cuda_allowed()
    from cuda_ipc.cupy_backend import cupy_backend

    return cupy_backend().shareable(array)


def memory_pool() -> Any:
    """The CuPy memory pool cuda_ipc installs (``cupy.cuda.MemoryPool``; for its statistics or free_all_blocks)."""
    from cuda_ipc.cupy_backend import memory_pool as pool

    return pool()


def _reduce_cupy_array(array: object) -> tuple:
    from cuda_ipc.cupy_backend import cupy_backend

    return reduce_array(array, cupy_backend())


def _on_cupy_import(cupy: ModuleType) -> None:
    from cuda_ipc.cupy_backend import install_memory_pool

    ForkingPickler.register(cupy.ndarray, _reduce_cupy_array)
    install_memory_pool(cupy)


def register_reducers() -> bool:
    """Import CuPy and register what its import registers (idempotent); False when CuPy is not importable."""
    try:
        import cupy
    except ImportError:
        return False
    _on_cupy_import(cupy)
    return True


when_imported("cupy", _on_cupy_import)
