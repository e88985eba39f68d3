"""The consumer's handle cache: each allocation opened once, closed with its last view, releases never blocking."""
from __future__ import annotations

import gc
import threading

import numpy as np

from cuda_ipc.handles import HandleCache, ReceivedMemory
from cuda_ipc.refcount import RefCountFile
from cuda_ipc_host import HostBackend, device_array


def _exported(backend: HostBackend) -> tuple[object, bytes]:
    array = device_array(np.arange(4.0))
    return array, backend.export_memory(backend.locate(array).base_ptr, 0)


def test_one_open_per_handle_and_close_with_the_last_view() -> None:
    backend, cache, file = HostBackend(), HandleCache(), RefCountFile(4)
    array, handle = _exported(backend)
    first = cache.acquire(backend, handle, 0)
    second = cache.acquire(backend, handle, 0)
    assert first is second and first.views == 2
    assert backend.opens == 1 and len(cache) == 1
    slots = [file.allocate(), file.allocate()]
    cache.release(first, file.counts, slots[0], "default")
    assert backend.closes == 0 and file.counts[slots[0]] == 0 and file.counts[slots[1]] == 1
    cache.release(first, file.counts, slots[1], "default")
    assert backend.closes == 1 and len(cache) == 0 and file.counts[slots[1]] == 0
    assert backend.log == ["wait default", "wait default", "close"], "the stream's work must be done before a release"
    assert cache.acquire(backend, handle, 0) is not first and backend.opens == 2 and cache.opened == 2


def test_the_opened_memory_is_the_producers() -> None:
    backend, cache = HostBackend(), HandleCache()
    array, handle = _exported(backend)
    block = cache.acquire(backend, handle, 0)
    located = backend.locate(array)
    view = backend.view(block.ptr, located.base_size, None, 0, located.offset + 8, (2,), np.dtype(np.float64), (8,))
    view[:] = [10.0, 20.0]
    assert array.tolist() == [0.0, 10.0, 20.0, 3.0]


def test_handles_on_different_devices_are_different_entries() -> None:
    backend, cache = HostBackend(), HandleCache()
    array, handle = _exported(backend)
    assert cache.acquire(backend, handle, 0) is not cache.acquire(backend, handle, 1)
    assert backend.opens == 2


def test_received_memory_releases_when_collected() -> None:
    backend, cache, file = HostBackend(), HandleCache(), RefCountFile(2)
    array, handle = _exported(backend)
    slot = file.allocate()
    owner = ReceivedMemory(cache, cache.acquire(backend, handle, 0), file.counts, slot, "default")
    assert backend.closes == 0
    del owner
    gc.collect()
    assert backend.closes == 1 and file.counts[slot] == 0


def test_a_release_never_waits_for_the_lock_and_is_applied_by_its_holder() -> None:
    backend, cache, file = HostBackend(), HandleCache(), RefCountFile(2)
    array, handle = _exported(backend)
    block = cache.acquire(backend, handle, 0)
    block = cache.acquire(backend, handle, 0)
    slots = [file.allocate(), file.allocate()]
    other_array = device_array(np.arange(4.0), own=True)
    other_handle = backend.export_memory(backend.locate(other_array).base_ptr, 0)
    with cache._lock:  # held by this thread, as when a finaliser runs inside the cache's own work
        cache.release(block, file.counts, slots[0], "default")
        releaser = threading.Thread(target=cache.release, args=(block, file.counts, slots[1], "default"))
        releaser.start()
        releaser.join(10)
        assert not releaser.is_alive(), "a release from another thread blocked on the cache lock"
        assert block.views == 2 and file.counts.tolist() == [1, 1]
    cache.acquire(backend, other_handle, 0)  # the next holder applies what was queued
    assert block.views == 0 and backend.closes == 1 and file.counts.tolist() == [0, 0]
