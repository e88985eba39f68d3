"""Sending device arrays between processes: the producer's reduction and the consumer's rebuild.

The message (:class:`IpcArray`) names the allocation by its IPC handle and
places the array in it (offset, shape, strides, dtype, device); it carries the
handle of an event recorded after the producer's pending work, and the
producer's reference-count file and slot. The consumer opens the allocation
through its handle cache, makes its current stream wait on the event and gets
a view of the same device memory.

Which thread pickles is not the producer's choice (a ``Queue`` pickles in its
feeder thread), so the event cannot go on that thread's current stream: under
``CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1`` the feeder's stream is its own
per-thread default stream, which orders after nothing the producer did. The
backend records it after the work of every thread's streams instead (for CUDA,
on the legacy default stream; see ``cupy_backend``). Work on a stream created
with ``non_blocking=True`` escapes that ordering unless it is the pickling
thread's current stream: synchronise it before ``Queue.put``, or send through a
``SimpleQueue`` or ``Pipe``, which pickle in the calling thread.

Only allocations whose size is a multiple of 2 MiB are exported (see
``segments``): a smaller one may be a block the driver sub-allocated, whose
handle would expose its neighbours and misplace the array. Arrays that CuPy
allocated after ``cuda_ipc`` was imported always qualify.

An array that was itself received over IPC is refused by the reduction: only
the process that allocated memory can export it, and forwarding someone
else's handle would leave its producer unaware of the new consumer. Send a
copy (``array.copy()``) instead, as with PyTorch. Receiving in the process
that sent the message gives a view of the original memory directly.
"""
from __future__ import annotations

import os
import secrets
from typing import Any, Callable, NamedTuple

import numpy as np

from cuda_ipc import handles, limbo
from cuda_ipc.backend import Backend
from cuda_ipc.guard import check_cuda_allowed
from cuda_ipc.refcount import release
from cuda_ipc.segments import SEGMENT_BYTES

_TOKEN = secrets.token_bytes(8)


def _producer_id() -> tuple[int, bytes]:
    # The pid tells forked children apart; the token tells apart processes that reuse a pid.
    return os.getpid(), _TOKEN


class IpcArray(NamedTuple):
    """What travels for one array: where its bytes are, how to order after the producer, which slot to release."""

    backend: Backend
    producer: tuple[int, bytes]
    device: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: np.dtype
    handle: bytes | None             # None for an array with no elements
    base_size: int
    offset: int
    event: bytes | None              # None when the producer synchronised the device instead
    counts: np.ndarray | None        # the producer's reference-count file (shared memory)
    file_id: int
    slot: int


def share(array: Any, backend: Backend) -> IpcArray:
    """The producer's side: export array's allocation, record an event and take a reference slot for it."""
    check_cuda_allowed()
    if isinstance(backend.owner(array), handles.ReceivedMemory):
        raise ValueError("this array's device memory was received from another process and cannot be sent on: "
                         "only the process that allocated memory can share it. Send a copy (array.copy()).")
    located = backend.locate(array)
    common = (backend, _producer_id(), located.device, tuple(array.shape), tuple(array.strides),
              np.dtype(array.dtype))
    if array.size == 0:
        return IpcArray(*common, None, 0, 0, None, None, 0, 0)
    if located.base_size % SEGMENT_BYTES:
        raise ValueError(
            f"this array lives in a device allocation of {located.base_size} bytes, not a multiple of 2 MiB, which "
            "the CUDA driver may have carved out of a larger block: its IPC handle would share that whole block. "
            "Allocate arrays to send after importing cuda_ipc (or framework), whose memory pool makes every "
            "allocation shareable, or send cuda_ipc.shareable(array), a copy in an allocation of its own.")
    handle = backend.export_memory(located.base_ptr, located.device)
    block = limbo.current().send(backend, located)
    return IpcArray(*common, handle, located.base_size, located.offset, block.event_handle,
                    block.file.counts, block.file.id, block.slot)


def rebuild(message: IpcArray) -> Any:
    """The consumer's side: a view of the producer's device memory, ordered after its pending work.

    A message that cannot be rebuilt (the guard refuses, the handle does not
    open) still gives its slot back, so the producer is not left waiting.
    """
    backend, device = message.backend, message.device
    if message.handle is None:
        check_cuda_allowed()
        return backend.empty(message.shape, message.dtype, device)
    layout = (device, message.offset, message.shape, message.dtype, message.strides)
    try:
        check_cuda_allowed()
        if message.producer == _producer_id():
            return _own_view(message, layout)
        if message.event is not None:
            event = backend.open_event(message.event, device)
            backend.wait_event(event, device)
            backend.destroy_event(event, device)
        stream = backend.current_stream(device)
        cache = handles.current()
        opened = cache.acquire(backend, message.handle, device)
    except BaseException:
        release(message.counts, message.slot)
        raise
    owner = handles.ReceivedMemory(cache, opened, message.counts, message.slot, stream)
    return backend.view(opened.ptr, message.base_size, owner, *layout)


def _own_view(message: IpcArray, layout: tuple) -> Any:
    # Received by the process that sent it: view the original memory, which the view itself keeps alive.
    block = limbo.current().block(message.file_id, message.slot)
    if block.event is not None:
        message.backend.wait_event(block.event, message.device)
    array = message.backend.view(block.located.base_ptr, block.located.base_size, block.located.memory, *layout)
    release(message.counts, message.slot)
    return array


def reduce_array(array: Any, backend: Backend) -> tuple[Callable[[IpcArray], Any], tuple[IpcArray]]:
    """A pickle reduction that sends array as a CUDA IPC handle (for ForkingPickler.register)."""
    return rebuild, (share(array, backend),)
