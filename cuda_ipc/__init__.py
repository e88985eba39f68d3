"""CUDA IPC sharing for CuPy arrays (and framework CUDA tensors, which travel as their CuPy arrays).

A ``cupy.ndarray`` put on a ``sharing`` (or ``multiprocessing``) queue travels
as an IPC handle of its allocation plus its place in it; the receiving process
gets a view of the same device memory, ordered after the sender's pending
work by an interprocess event. The sender keeps every sent block alive until
its receiver lets go (reference counts in shared memory, see ``limbo``), and
each receiver opens an allocation once however many arrays it receives from it.

An array that was itself received over IPC cannot be sent on (a ValueError
says to send ``array.copy()`` instead), as with PyTorch; receiving in the
process that sent the array gives a view of the original memory.

Importing this package touches no CUDA API; it only registers the reducer when
CuPy is importable. CUDA cannot be used in a process forked after its parent
initialised CUDA: use the ``spawn`` or ``forkserver`` start methods.
"""
from __future__ import annotations

import importlib.util
from multiprocessing.reduction import ForkingPickler

from cuda_ipc.guard import check_cuda_allowed, forked_after_cuda
from cuda_ipc.limbo import ipc_collect
from cuda_ipc.reductions import reduce_array

__all__ = ["check_cuda_allowed", "ipc_collect", "is_available", "register_reducers"]


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


def _reduce_cupy_array(array: object) -> tuple:
    from cuda_ipc.cupy_backend import cupy_backend

    return reduce_array(array, cupy_backend())


def register_reducers() -> bool:
    """Send ``cupy.ndarray`` through multiprocessing as CUDA IPC handles; False when CuPy is not importable."""
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy
    except ImportError:
        return False
    ForkingPickler.register(cupy.ndarray, _reduce_cupy_array)
    return True


register_reducers()
