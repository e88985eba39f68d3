"""The CUDA backend: CuPy arrays, CuPy's runtime bindings for IPC handles, events and streams.

Memory: the pool installed on CuPy's import is a ``cupy.cuda.MemoryPool`` whose
allocations come from :class:`~cuda_ipc.segments.SegmentAllocator` (2 MiB
segments, small arrays packed) instead of one cudaMalloc each; CuPy's pool
still does the caching, per stream, in compiled code, so this Python allocator
runs only when the pool misses. A pool carves arrays out of larger
allocations, and an IPC handle always stands for a whole allocation, so the
producer looks up the allocation that contains the array
(``cuMemGetAddressRange`` from the driver, which CuPy does not wrap) and sends
the array's offset in it.

Events: interprocess events are created with ``cudaEventDisableTiming |
cudaEventInterprocess``, as CUDA requires, and recorded on the legacy default
stream (``cudaStreamLegacy``), whatever thread pickles. CUDA's stream
semantics make that event follow all work queued before it on every blocking
stream of the device, and the per-thread default streams
(``CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1``) are blocking streams that
synchronise with the legacy one. When the pickling thread's current stream was
created non-blocking, the legacy stream first waits for it. The price: the
record is a barrier between the device's blocking streams (on the device, not
on the host), once per send.
"""
from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np

from cuda_ipc.backend import Located
from cuda_ipc.segments import Piece, SegmentAllocator

# From CUDA's driver_types.h / cuda.h; stable parts of the ABI.
_EVENT_DISABLE_TIMING = 0x02
_EVENT_INTERPROCESS = 0x04
_CUDA_ERROR_INVALID_CONTEXT = 201
_LEGACY_STREAM = 0x1                 # cudaStreamLegacy
_DEFAULT_STREAMS = (0x0, 0x1, 0x2)   # the default stream, cudaStreamLegacy, cudaStreamPerThread: all blocking


@functools.lru_cache(maxsize=None)
def cupy_backend() -> "CupyBackend":
    """This process's CUDA backend (imports CuPy and loads the driver library on first use)."""
    return CupyBackend()


@functools.lru_cache(maxsize=None)
def memory_pool() -> Any:
    """The pool cuda_ipc gives CuPy: a ``cupy.cuda.MemoryPool`` over 2 MiB segments (no CUDA call until used)."""
    import cupy

    return cupy.cuda.MemoryPool(allocator=_segment_malloc)


def install_memory_pool(cupy: Any) -> bool:
    """Make :func:`memory_pool` CuPy's allocator, unless the user chose another; True when it is installed."""
    current = cupy.cuda.get_allocator()
    if current == memory_pool().malloc:
        return True
    if current != cupy.get_default_memory_pool().malloc:
        return False
    cupy.cuda.set_allocator(memory_pool().malloc)
    return True


def _segment_malloc(nbytes: int) -> Any:
    # What memory_pool() calls when it has no cached block: a piece of a segment on the current device.
    return cupy_backend().pool_memory(nbytes)


class CupyBackend:
    """IPC for ``cupy.ndarray``: handles of cudaMalloc allocations, interprocess events, views over opened memory."""

    def __init__(self) -> None:
        import cupy

        self._cupy = cupy
        self._runtime = cupy.cuda.runtime
        driver = ctypes.CDLL("libcuda.so.1")
        self._address_range = driver.cuMemGetAddressRange_v2
        self._address_range.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                        ctypes.c_uint64]
        self._address_range.restype = ctypes.c_int
        self._segments = SegmentAllocator(self)

    def __reduce__(self) -> tuple:
        return cupy_backend, ()

    def _on(self, device: int) -> Any:
        return self._cupy.cuda.Device(device)

    def _stream_ptr(self) -> int:
        return self._cupy.cuda.get_current_stream().ptr

    def _over(self, piece: Piece, device: int) -> Any:
        # A MemoryPointer to a piece; the memory object keeps the piece, and so its segment, alive.
        return self._cupy.cuda.MemoryPointer(self._cupy.cuda.UnownedMemory(piece.ptr, piece.size, piece, device), 0)

    def pool_memory(self, nbytes: int) -> Any:
        """A MemoryPointer to nbytes packed into a segment of the current device (memory_pool's allocator)."""
        device = self._runtime.getDevice()
        return self._over(self._segments.allocate(nbytes, device), device)

    def shareable(self, array: Any) -> Any:
        """array when it has a segment of its own (or no elements), else a C-contiguous copy in a new one."""
        owner = self.owner(array)
        if array.size == 0 or isinstance(owner, Piece) and owner.owns_segment:
            return array
        device = array.device.id
        with self._on(device):
            piece = self._segments.allocate(array.nbytes, device, own=True)
            copy = self._cupy.ndarray(array.shape, array.dtype, self._over(piece, device))
            copy[...] = array
        return copy

    def owner(self, array: Any) -> Any:
        return getattr(array.data.mem, "_owner", None)  # set for cupy.cuda.UnownedMemory only

    def locate(self, array: Any) -> Located:
        device = array.device.id
        if array.size == 0:
            return Located(None, 0, 0, 0, device)
        ptr = array.data.ptr
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        with self._on(device):
            status = self._address_range(ctypes.byref(base), ctypes.byref(size), ptr)
            if status == _CUDA_ERROR_INVALID_CONTEXT:
                self._runtime.memGetInfo()  # makes the device's primary context current in this thread
                status = self._address_range(ctypes.byref(base), ctypes.byref(size), ptr)
        if status != 0:
            raise RuntimeError(f"cuMemGetAddressRange failed (CUresult {status}) for the array at {ptr:#x} "
                               f"on device {device}: CUDA IPC can only share device memory from cudaMalloc")
        return Located(array.data.mem, base.value, size.value, ptr - base.value, device)

    def allocate(self, nbytes: int, device: int) -> Any:
        with self._on(device):
            return self._cupy.cuda.Memory(nbytes)  # cudaMalloc, outside any pool; cudaFree when garbage

    def export_memory(self, base_ptr: int, device: int) -> bytes:
        with self._on(device):
            try:
                return self._runtime.ipcGetMemHandle(base_ptr)
            except self._runtime.CUDARuntimeError as err:
                raise RuntimeError(
                    f"cannot export a CUDA IPC handle for the allocation at {base_ptr:#x} on device {device} "
                    f"({err}): only cudaMalloc memory, which CuPy's default memory pool uses, can be shared; "
                    "managed memory and stream-ordered (async) pools cannot. Copy the array into "
                    "default-pool memory first.") from err

    def open_memory(self, handle: bytes, device: int) -> int:
        with self._on(device):
            try:
                return self._runtime.ipcOpenMemHandle(handle)
            except self._runtime.CUDARuntimeError as err:
                raise RuntimeError(
                    f"cannot open a CUDA IPC memory handle on device {device} ({err}): the producer process "
                    "must still be alive and hold the memory") from err

    def close_memory(self, ptr: int, device: int) -> None:
        with self._on(device):
            self._runtime.ipcCloseMemHandle(ptr)

    def record_event(self, device: int) -> tuple[int, bytes]:
        with self._on(device):
            current = self._cupy.cuda.get_current_stream()
            if current.ptr not in _DEFAULT_STREAMS and current.is_non_blocking:
                bridge = self._runtime.eventCreateWithFlags(_EVENT_DISABLE_TIMING)
                self._runtime.eventRecord(bridge, current.ptr)
                self._runtime.streamWaitEvent(_LEGACY_STREAM, bridge)
                self._runtime.eventDestroy(bridge)  # freed once it has happened; the wait stays queued
            event = self._runtime.eventCreateWithFlags(_EVENT_DISABLE_TIMING | _EVENT_INTERPROCESS)
            self._runtime.eventRecord(event, _LEGACY_STREAM)
            return event, self._runtime.ipcGetEventHandle(event)

    def open_event(self, handle: bytes, device: int) -> int:
        with self._on(device):
            return self._runtime.ipcOpenEventHandle(handle)

    def wait_event(self, event: int, device: int) -> None:
        with self._on(device):
            self._runtime.streamWaitEvent(self._stream_ptr(), event)

    def current_stream(self, device: int) -> Any:
        with self._on(device):
            return self._cupy.cuda.get_current_stream()

    def wait_stream(self, stream: Any, device: int) -> None:
        with self._on(device):
            event = self._cupy.cuda.Event(disable_timing=True)
            event.record(stream)
            event.synchronize()

    def destroy_event(self, event: int, device: int) -> None:
        with self._on(device):
            self._runtime.eventDestroy(event)

    def synchronize(self, device: int) -> None:
        self._cupy.cuda.Device(device).synchronize()

    def view(self, ptr: int, size: int, owner: Any, device: int, offset: int,
             shape: tuple[int, ...], dtype: np.dtype, strides: tuple[int, ...]) -> Any:
        memory = self._cupy.cuda.UnownedMemory(ptr, size, owner, device)
        return self._cupy.ndarray(shape, dtype, self._cupy.cuda.MemoryPointer(memory, offset), strides)

    def empty(self, shape: tuple[int, ...], dtype: np.dtype, device: int) -> Any:
        with self._on(device):
            return self._cupy.empty(shape, dtype)
