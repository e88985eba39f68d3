"""The narrow interface between the IPC protocol and the memory it moves.

The protocol (segments, reference counts, limbo, handle cache, guard, message
layout) only ever talks to a :class:`Backend`. The CUDA backend
(``cupy_backend``) is the one used for CuPy arrays; any other implementation
must give the same guarantees: a handle exported for an allocation opens, in
another process of the same user, onto the same bytes; an event handle lets
the consumer order its work after all the work the producer queued before the
send; waiting for a stream covers all the work queued on it so far.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class Located:
    """Where an array's bytes live: the allocation an IPC handle covers, and the object that keeps it alive."""

    memory: Any      # kept referenced while consumers may read the block
    base_ptr: int    # start of the whole allocation
    base_size: int   # its size in bytes
    offset: int      # the array's data pointer minus base_ptr
    device: int


class Backend(Protocol):
    """The memory operations the IPC protocol needs; instances pickle by reference to a per-process singleton."""

    def owner(self, array: Any) -> Any:
        """The object that owns array's memory when the backend did not allocate it (None otherwise)."""

    def locate(self, array: Any) -> Located:
        """The allocation behind array; for an empty array only the device counts (memory None, sizes 0)."""

    def allocate(self, nbytes: int, device: int) -> Any:
        """A new allocation of nbytes on device (an object with ``ptr``), freed when the object is garbage."""

    def export_memory(self, base_ptr: int, device: int) -> bytes:
        """An IPC handle for the allocation that starts at base_ptr."""

    def open_memory(self, handle: bytes, device: int) -> int:
        """Map an allocation exported by another process; returns its base pointer here."""

    def close_memory(self, ptr: int, device: int) -> None:
        """Unmap what open_memory returned."""

    def record_event(self, device: int) -> tuple[Any, bytes]:
        """Record an interprocess event after the work this process queued on device: (event, its IPC handle).

        Whichever thread calls it (a queue pickles in its feeder thread), the
        event must follow the work of every thread's streams, not only the
        calling thread's current stream.
        """

    def open_event(self, handle: bytes, device: int) -> Any:
        """The event another process recorded, from its IPC handle."""

    def wait_event(self, event: Any, device: int) -> None:
        """Make the current stream wait for event."""

    def current_stream(self, device: int) -> Any:
        """The calling thread's current stream on device (an object the caller may keep)."""

    def wait_stream(self, stream: Any, device: int) -> None:
        """Wait on the host until the work queued so far on stream is done."""

    def destroy_event(self, event: Any, device: int) -> None:
        """Free an event made by record_event or open_event (pending waits still happen)."""

    def synchronize(self, device: int) -> None:
        """Wait on the host until all work this process queued on device is done."""

    def view(self, ptr: int, size: int, owner: Any, device: int, offset: int,
             shape: tuple[int, ...], dtype: np.dtype, strides: tuple[int, ...]) -> Any:
        """An array over [ptr, ptr + size) at offset; the array keeps owner alive for as long as it or a view lives."""

    def empty(self, shape: tuple[int, ...], dtype: np.dtype, device: int) -> Any:
        """A new array with no elements."""
