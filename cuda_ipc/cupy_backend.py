"""The CUDA backend: CuPy arrays, CuPy's runtime bindings for IPC handles and events.

CuPy's memory pool carves arrays out of larger cudaMalloc allocations, and an
IPC handle always stands for a whole allocation, so the producer looks up the
allocation that contains the array (``cuMemGetAddressRange`` from the driver,
which CuPy does not wrap) and sends the array's offset in it. Interprocess
events are created with ``cudaEventDisableTiming | cudaEventInterprocess``, as
CUDA requires.
"""
from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np

from cuda_ipc.backend import Located

# From CUDA's driver_types.h / cuda.h; stable parts of the ABI.
_EVENT_DISABLE_TIMING = 0x02
_EVENT_INTERPROCESS = 0x04
_CUDA_ERROR_INVALID_CONTEXT = 201


@functools.lru_cache(maxsize=None)
def cupy_backend() -> "CupyBackend":
    """This process's CUDA backend (imports CuPy and loads the driver library on first use)."""
    return CupyBackend()


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

    def __reduce__(self) -> tuple:
        return cupy_backend, ()

    def _on(self, device: int) -> Any:
        return self._cupy.cuda.Device(device)

    def _stream_ptr(self) -> int:
        return self._cupy.cuda.get_current_stream().ptr

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
            event = self._runtime.eventCreateWithFlags(_EVENT_DISABLE_TIMING | _EVENT_INTERPROCESS)
            self._runtime.eventRecord(event, self._stream_ptr())
            return event, self._runtime.ipcGetEventHandle(event)

    def open_event(self, handle: bytes, device: int) -> int:
        with self._on(device):
            return self._runtime.ipcOpenEventHandle(handle)

    def wait_event(self, event: int, device: int) -> None:
        with self._on(device):
            self._runtime.streamWaitEvent(self._stream_ptr(), event)

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
