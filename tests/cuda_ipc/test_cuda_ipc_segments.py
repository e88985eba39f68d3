"""The segment allocator on host memory: 2 MiB segments, small pieces packed, memory freed with the last piece."""
from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest

import sharing as mp
from cuda_ipc.limbo import Limbo
from cuda_ipc.pickling import share
from cuda_ipc.segments import ALIGN_BYTES, SEGMENT_BYTES, SMALL_BYTES, SegmentAllocator, round_up
from cuda_ipc_host import HostBackend, host_backend, unpacked_array


def test_small_pieces_share_a_segment_aligned_and_apart() -> None:
    backend = HostBackend()
    allocator = SegmentAllocator(backend)
    pieces = [allocator.allocate(n, 0) for n in (40, 512, 513, 1)]
    assert backend.allocations == 1 and len({id(p.segment) for p in pieces}) == 1
    assert [p.ptr - pieces[0].ptr for p in pieces] == [0, 512, 1024, 2048]
    assert all(p.ptr % ALIGN_BYTES == 0 and not p.owns_segment for p in pieces)
    assert pieces[0].segment.size == SEGMENT_BYTES


def test_large_and_own_requests_get_segments_of_their_own_rounded_to_2_mib() -> None:
    backend = HostBackend()
    allocator = SegmentAllocator(backend)
    large = allocator.allocate(SMALL_BYTES + 1, 0)
    own = allocator.allocate(12, 0, own=True)
    huge = allocator.allocate(5 * SEGMENT_BYTES + 3, 0)
    assert [p.segment.size for p in (large, own, huge)] == [SEGMENT_BYTES, SEGMENT_BYTES, 6 * SEGMENT_BYTES]
    assert all(p.owns_segment and p.ptr == p.segment.ptr for p in (large, own, huge))
    assert allocator.allocate(8, 0).segment is not own.segment, "nothing is packed beside an own piece"
    assert round_up(0, SEGMENT_BYTES) == SEGMENT_BYTES


def test_a_full_segment_is_followed_by_a_new_one_and_devices_have_their_own() -> None:
    backend = HostBackend()
    allocator = SegmentAllocator(backend)
    first = [allocator.allocate(SMALL_BYTES, 0) for _ in range(2)]
    third = allocator.allocate(ALIGN_BYTES, 0)
    other_device = allocator.allocate(ALIGN_BYTES, 1)
    assert first[0].segment is first[1].segment and third.segment is not first[0].segment
    assert other_device.segment.device == 1 and other_device.segment is not third.segment
    assert backend.allocations == 3


def test_a_segment_is_freed_with_its_last_piece() -> None:
    backend = HostBackend()
    allocator = SegmentAllocator(backend)
    kept, dropped = allocator.allocate(64, 0), allocator.allocate(64, 0)
    memory = weakref.ref(kept.segment.memory)
    filler = allocator.allocate(SMALL_BYTES, 0)
    allocator.allocate(SMALL_BYTES, 0)  # does not fit: the allocator moves on to a new segment
    del dropped, filler
    gc.collect()
    assert memory() is not None, "a live piece keeps its segment"
    del kept
    gc.collect()
    assert memory() is None


def _allocate_in_child(report: Any) -> None:
    from cuda_ipc_host import device_array

    array = device_array(np.full(4, 7.0))
    report.put((array.memory.segment.ptr, array.tolist()))


@pytest.mark.timeout(60)
def test_a_forked_child_packs_into_segments_of_its_own() -> None:
    from cuda_ipc_host import device_array

    mine = device_array(np.zeros(4))  # leaves a half-filled segment that the child inherits
    context = mp.get_context("fork")
    report = context.SimpleQueue()
    child = context.Process(target=_allocate_in_child, args=(report,))
    child.start()
    segment, values = report.get()
    child.join(60)
    assert child.exitcode == 0 and values == [7.0] * 4
    assert segment != mine.memory.segment.ptr and mine.tolist() == [0.0] * 4


def test_an_allocation_that_is_not_a_multiple_of_2_mib_is_not_exported(drained: Limbo) -> None:
    with pytest.raises(ValueError, match=r"not a multiple of 2 MiB.*cuda_ipc.shareable"):
        share(unpacked_array(np.arange(12.0)), host_backend())
    assert len(drained) == 0
