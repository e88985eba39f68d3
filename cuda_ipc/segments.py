"""Device memory in 2 MiB segments, small arrays packed into them: what makes every allocation safe to export.

An IPC handle always stands for a whole cudaMalloc allocation, and the CUDA
Programming Guide warns that the driver may carve small cudaMallocs out of a
larger block, which IPC then shares whole (other allocations with it). So every
allocation hogshare may export is a *segment* whose size is a multiple of
2 MiB, which the driver never sub-allocates:

- a request above ``SMALL_BYTES`` (1 MiB) gets a segment of its own, rounded up;
- smaller ones are packed into a shared 2 MiB segment, as PyTorch's caching
  allocator packs its small blocks, so sending many small arrays costs one
  cudaMalloc per 2 MiB on the producer's side and one IPC handle per segment,
  which a consumer opens once however many arrays it holds from it;
- ``own=True`` gives even a small array a segment of its own (arenas and
  optimizer state that workers map, with nothing unrelated beside them).

A :class:`Piece` holds its segment, and the segment holds the backend's
allocation, so the memory is freed when the last piece is gone. Space inside a
segment is handed out once and never reused: CuPy's memory pool, which sits on
top of this allocator, caches and reuses the pieces itself, stream by stream,
and a segment-level free (cudaFree) synchronises the device, which reusing
bytes here would not. The price is the unused tail of each small segment
(under 1 MiB) and, for a large array, up to 2 MiB of rounding.
"""
from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from cuda_ipc.backend import Backend

SEGMENT_BYTES = 2 << 20  # the IPC granularity the CUDA Programming Guide recommends
SMALL_BYTES = 1 << 20    # requests up to this size share a segment
ALIGN_BYTES = 512        # what cudaMalloc guarantees, and what CuPy's pool rounds requests to


def round_up(nbytes: int, multiple: int) -> int:
    """The smallest multiple of `multiple` that is at least nbytes (and at least one multiple)."""
    return max(1, -(-nbytes // multiple)) * multiple


class Segment:
    """One backend allocation of a multiple of 2 MiB, handed out front to back."""

    __slots__ = ("memory", "ptr", "size", "device", "packed", "used")

    def __init__(self, memory: Any, size: int, device: int, packed: bool) -> None:
        self.memory, self.ptr, self.size, self.device = memory, memory.ptr, size, device
        self.packed = packed  # small pieces share it; otherwise it holds one piece
        self.used = 0 if packed else size


class Piece:
    """Bytes [ptr, ptr + size) of a segment; holding a piece keeps its segment allocated."""

    __slots__ = ("segment", "ptr", "size", "__weakref__")

    def __init__(self, segment: Segment, offset: int, size: int) -> None:
        self.segment, self.ptr, self.size = segment, segment.ptr + offset, size

    @property
    def owns_segment(self) -> bool:
        """True for a piece that was given a segment of its own."""
        return not self.segment.packed


class SegmentAllocator:
    """Pieces of 2 MiB-multiple segments from one backend: large or `own` requests alone, small ones packed."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._lock = threading.Lock()
        self._filling: dict[int, Segment] = {}  # per device, the segment small pieces come from
        _allocators.add(self)

    def allocate(self, nbytes: int, device: int, own: bool = False) -> Piece:
        """A piece of at least nbytes on device (its own segment when own or large)."""
        if own or nbytes > SMALL_BYTES:
            size = round_up(nbytes, SEGMENT_BYTES)
            return Piece(Segment(self._backend.allocate(size, device), size, device, packed=False), 0, nbytes)
        step = round_up(nbytes, ALIGN_BYTES)
        with self._lock:
            segment = self._filling.get(device)
            if segment is None or segment.used + step > segment.size:
                segment = Segment(self._backend.allocate(SEGMENT_BYTES, device), SEGMENT_BYTES, device, packed=True)
                self._filling[device] = segment
            piece = Piece(segment, segment.used, nbytes)
            segment.used += step
        return piece

    def _forget_after_fork(self) -> None:
        # A forked child shares the parent's segments (host memory is MAP_SHARED): packing more
        # pieces into them from the child would hand both processes the same bytes.
        self._lock = threading.Lock()
        self._filling = {}


_allocators: "weakref.WeakSet[SegmentAllocator]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for allocator in list(_allocators):
        allocator._forget_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
