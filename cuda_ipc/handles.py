"""The consumer's cache of opened IPC handles: each allocation is opened once per process.

Every received array holds a :class:`ReceivedMemory`, which counts as one live
view of its opened allocation and remembers the stream that was current when
the array arrived: the stream the consumer uses it on (an array used on other
streams must have that work ordered before it is dropped, as CuPy's own pool
requires of its arrays). When an array is gone, this process first waits for
the work queued on that stream so far (an event recorded there, not a whole
device synchronisation: other streams go on), then closes the allocation if
that was its last view, and only then releases the producer's slot: the
producer can never free or reuse memory this process still uses or has mapped
(CUDA leaves freeing memory that another process still has open undefined).
PyTorch likewise synchronises the current stream before releasing.

Releases come from finalisers, which may run in any thread, or in the middle
of this module's own work when a garbage collection happens there. They are
therefore queued and applied by whichever thread holds the cache lock, never
waited for.
"""
from __future__ import annotations

import threading
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from cuda_ipc.backend import Backend
from cuda_ipc.refcount import release


@dataclass
class OpenedBlock:
    """An allocation opened from an IPC handle, and how many received arrays use it."""

    backend: Backend
    handle: bytes
    device: int
    ptr: int
    views: int = 0


class HandleCache:
    """Opened allocations by (device, handle), each closed when its last view is released."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blocks: dict[tuple[int, bytes], OpenedBlock] = {}
        self._released: deque[tuple[OpenedBlock, np.ndarray, int, Any]] = deque()
        self.opened = 0  # handles opened so far: what packing small arrays into segments keeps low

    def __len__(self) -> int:
        return len(self._blocks)

    def acquire(self, backend: Backend, handle: bytes, device: int) -> OpenedBlock:
        """The allocation behind handle, opened on first use, with one more view counted."""
        with self._lock:
            block = self._blocks.get((device, handle))
            if block is None:
                block = OpenedBlock(backend, handle, device, backend.open_memory(handle, device))
                self._blocks[(device, handle)] = block
                self.opened += 1
            block.views += 1
        self._apply_releases()
        return block

    def release(self, block: OpenedBlock, counts: np.ndarray, slot: int, stream: Any) -> None:
        """One view of block, used on stream, is gone: once stream's work is done, close block if that was its
        last view, then give back the producer's slot."""
        self._released.append((block, counts, slot, stream))
        self._apply_releases()

    def _apply_releases(self) -> None:
        # Whoever holds the lock applies the queue; a release queued while another thread
        # held it is seen by that thread's check after unlocking.
        while self._released and self._lock.acquire(blocking=False):
            try:
                batch = [self._released.popleft() for _ in range(len(self._released))]
                streams = {(id(stream), block.device): (block.backend, stream, block.device)
                           for block, _, _, stream in batch}
                for backend, stream, device in streams.values():
                    backend.wait_stream(stream, device)
                for block, counts, slot, _ in batch:
                    block.views -= 1
                    if block.views == 0:
                        del self._blocks[(block.device, block.handle)]
                        block.backend.close_memory(block.ptr, block.device)
                    release(counts, slot)
            finally:
                self._lock.release()


_cache = HandleCache()


def current() -> HandleCache:
    """This process's handle cache."""
    return _cache


class ReceivedMemory:
    """The owner of one received array's device memory: one view of an opened block and one producer slot."""

    __slots__ = ("block", "__weakref__")

    def __init__(self, cache: HandleCache, block: OpenedBlock, counts: np.ndarray, slot: int, stream: Any) -> None:
        self.block = block
        weakref.finalize(self, cache.release, block, counts, slot, stream)
