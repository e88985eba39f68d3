"""A host-memory backend for the CUDA IPC protocol, so the protocol runs for real on a machine without a GPU.

Allocations are memfd segments; an "IPC handle" names the producer's fd
(``/proc/PID/fd/FD``), which another process of the same user can open while
the producer is alive and holds the allocation, as with CUDA. Arrays are
pieces of those segments, packed by cuda_ipc's own ``SegmentAllocator`` as on
the GPU. Host memory is synchronous, so events and streams only record who
waited on what: each thread has a current stream (a name, "default" unless a
test picks one). The backend counts what it did (allocations, opens, closes,
events) so tests can check the protocol's bookkeeping in each process.
"""
from __future__ import annotations

import mmap
import os
import threading
import weakref
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np

from cuda_ipc.backend import Located
from cuda_ipc.pickling import reduce_array
from cuda_ipc.segments import Piece, Segment, SegmentAllocator


class HostMemory:
    """One allocation: a memfd mapped here (the analogue of a cudaMalloc block)."""

    def __init__(self, size: int, device: int = 0) -> None:
        self.size, self.device = size, device
        self.fd = os.memfd_create("hogshare-test-block", os.MFD_CLOEXEC)
        weakref.finalize(self, os.close, self.fd)
        os.ftruncate(self.fd, max(size, 1))
        self.buffer = np.frombuffer(mmap.mmap(self.fd, max(size, 1)), np.uint8)
        self.ptr = self.buffer.ctypes.data
        _allocations[self.ptr] = self


class UnownedHostMemory:
    """Memory this process did not allocate, kept alive by owner (the analogue of cupy.cuda.UnownedMemory)."""

    def __init__(self, ptr: int, size: int, owner: Any, device: int) -> None:
        self.ptr, self.size, self.owner, self.device = ptr, size, owner, device


_allocations: weakref.WeakValueDictionary[int, HostMemory] = weakref.WeakValueDictionary()


class DeviceArray(np.ndarray):
    """A NumPy array standing for a device array: it knows its memory object and device id; views inherit both."""

    memory: Piece | UnownedHostMemory | None
    device_id: int

    def __array_finalize__(self, obj: Any) -> None:
        memory = getattr(obj, "memory", None)
        inside = memory is not None and memory.ptr <= self.__array_interface__["data"][0] < memory.ptr + memory.size
        self.memory = memory if inside else None
        self.device_id = getattr(obj, "device_id", 0)

    def copy(self, order: str = "C") -> DeviceArray:
        """A copy in a new allocation of its own (as cupy.ndarray.copy makes)."""
        return device_array(np.asarray(self).copy(order), device=self.device_id)


def _over(buffer: np.ndarray, memory: Any, device: int, offset: int, shape: tuple[int, ...], dtype: Any,
          strides: tuple[int, ...] | None) -> DeviceArray:
    array = np.ndarray(shape, dtype, buffer=buffer, offset=offset, strides=strides).view(DeviceArray)
    array.memory, array.device_id = memory, device
    return array


def empty(shape: Any, dtype: Any = np.float64, device: int = 0, own: bool = False) -> DeviceArray:
    """A new uninitialised array: packed into a segment with others, or alone in one when own."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    piece = _backend.segments.allocate(int(np.prod(shape)) * dtype.itemsize, device, own)
    return _over(piece.segment.memory.buffer, piece, device, piece.ptr - piece.segment.ptr, shape, dtype, None)


def device_array(data: Any, dtype: Any = None, device: int = 0, own: bool = False) -> DeviceArray:
    """A new array holding a copy of data."""
    data = np.asarray(data, dtype=dtype)
    array = empty(data.shape, data.dtype, device, own)
    array[...] = data
    return array


def unpacked_array(data: Any) -> DeviceArray:
    """A copy of data in an allocation of exactly its size (what a plain cudaMalloc of a small array gives)."""
    data = np.asarray(data)
    memory = HostMemory(data.nbytes)
    piece = Piece(Segment(memory, data.nbytes, 0, packed=False), 0, data.nbytes)
    array = _over(memory.buffer, piece, 0, 0, data.shape, data.dtype, None)
    array[...] = data
    return array


class HostBackend:
    """The protocol's backend over memfd allocations; counts opens, closes and events in this process."""

    def __init__(self) -> None:
        self._opened: dict[int, np.ndarray] = {}
        self.segments = SegmentAllocator(self)
        self.allocations = self.opens = self.closes = self.synchronized = 0
        self.log: list[str] = []  # "wait <stream>" and "close", in the order they happened
        self.live_events: set[bytes] = set()
        self.waited: list[bytes] = []
        self._stream = threading.local()

    def __reduce__(self) -> tuple:
        return host_backend, ()

    @property
    def open_blocks(self) -> int:
        return len(self._opened)

    def _buffer(self, ptr: int) -> np.ndarray:
        return self._opened[ptr] if ptr in self._opened else _allocations[ptr].buffer

    def owner(self, array: DeviceArray) -> Any:
        return getattr(array.memory, "owner", None)

    def locate(self, array: DeviceArray) -> Located:
        if array.size == 0:
            return Located(None, 0, 0, 0, array.device_id)
        segment = array.memory.segment
        return Located(array.memory, segment.ptr, segment.size, array.__array_interface__["data"][0] - segment.ptr,
                       array.device_id)

    def allocate(self, nbytes: int, device: int) -> HostMemory:
        self.allocations += 1
        return HostMemory(nbytes, device)

    def export_memory(self, base_ptr: int, device: int) -> bytes:
        return f"{os.getpid()}:{_allocations[base_ptr].fd}".encode()

    def open_memory(self, handle: bytes, device: int) -> int:
        pid, fd = handle.decode().split(":")
        opened = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR)
        try:
            buffer = np.frombuffer(mmap.mmap(opened, os.fstat(opened).st_size), np.uint8)
        finally:
            os.close(opened)
        self._opened[buffer.ctypes.data] = buffer
        self.opens += 1
        return buffer.ctypes.data

    def close_memory(self, ptr: int, device: int) -> None:
        del self._opened[ptr]
        self.closes += 1
        self.log.append("close")

    def record_event(self, device: int) -> tuple[bytes, bytes]:
        token = os.urandom(8)
        self.live_events.add(token)
        return token, token

    def open_event(self, handle: bytes, device: int) -> bytes:
        return handle

    def wait_event(self, event: bytes, device: int) -> None:
        self.waited.append(event)

    def use_stream(self, name: str) -> None:
        """Make name the calling thread's current stream."""
        self._stream.name = name

    def current_stream(self, device: int) -> str:
        return getattr(self._stream, "name", "default")

    def wait_stream(self, stream: str, device: int) -> None:
        self.log.append(f"wait {stream}")

    def destroy_event(self, event: bytes, device: int) -> None:
        self.live_events.discard(event)

    def synchronize(self, device: int) -> None:
        self.synchronized += 1

    def view(self, ptr: int, size: int, owner: Any, device: int, offset: int,
             shape: tuple[int, ...], dtype: np.dtype, strides: tuple[int, ...]) -> DeviceArray:
        memory = UnownedHostMemory(ptr, size, owner, device)
        return _over(self._buffer(ptr)[:size], memory, device, offset, shape, dtype, strides)

    def empty(self, shape: tuple[int, ...], dtype: np.dtype, device: int) -> DeviceArray:
        return empty(shape, dtype, device)


_backend = HostBackend()


def host_backend() -> HostBackend:
    """This process's host backend."""
    return _backend


def _reduce_device_array(array: DeviceArray) -> tuple:
    return reduce_array(array, _backend)


ForkingPickler.register(DeviceArray, _reduce_device_array)
