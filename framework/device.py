"""Devices: where a tensor's array lives ("cpu" is NumPy, "cuda:N" is CuPy) and moving arrays between them.

CuPy is imported only when a CUDA device is asked for, so everything on the CPU
works without it, and a process that never asks makes no CUDA call even where
CuPy is installed. Every way into CUDA from here goes through `cupy_module`,
which runs the start-method guard first: a process forked after its parent
initialised CUDA gets an error naming spawn/forkserver, not CUDA's
"initialization error".
"""
from __future__ import annotations

import contextlib
import sys
from types import ModuleType
from typing import Any

import numpy as np

from cuda_ipc.guard import check_cuda_allowed

_CUDA_HINT = "install CuPy (pip install 'hogshare[cuda]') on a machine with an NVIDIA GPU"


def parse_device(device: Any) -> str:
    """Canonical device string: 'cpu' or 'cuda:N'; ValueError naming the accepted forms otherwise."""
    if device is None:
        return "cpu"
    if isinstance(device, str):
        name = device.strip().lower()
        if name == "cpu":
            return "cpu"
        if name == "cuda":
            return "cuda:0"
        if name.startswith("cuda:") and name[5:].isdigit():
            return f"cuda:{int(name[5:])}"
    raise ValueError(f"unknown device {device!r}: expected 'cpu', 'cuda' or 'cuda:N' (N a device index)")


def cupy_module() -> ModuleType:
    """The cupy module, for CUDA work in this process: the start-method guard first, then CuPy imported on demand.

    RuntimeError explaining how to get CuPy when it is not importable.
    """
    check_cuda_allowed()
    try:
        import cupy
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise RuntimeError(f"CUDA tensors need CuPy, which is not importable ({exc}); {_CUDA_HINT}") from None
    return cupy


def array_module(array: Any) -> ModuleType:
    """numpy for NumPy arrays, cupy for CuPy arrays (the `xp` idiom)."""
    if isinstance(array, np.ndarray):
        return np
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(array, cupy.ndarray):
        return cupy
    return np


def device_of(array: Any) -> str:
    """The canonical device string of an array."""
    if isinstance(array, np.ndarray):
        return "cpu"
    return f"cuda:{array.device.id}"


def on_device(device: str) -> Any:
    """A context in which new arrays are made on `device` (CuPy's current device); nothing to do for 'cpu'."""
    if device == "cpu":
        return contextlib.nullcontext()
    return cupy_module().cuda.Device(int(device[5:]))


def scatter_add(target: Any, index: Any, values: Any) -> None:
    """target[index] += values, adding repeated indices up (np.add.at; cupyx.scatter_add on CUDA)."""
    if isinstance(target, np.ndarray):
        np.add.at(target, index, values)
    else:
        import cupyx
        cupyx.scatter_add(target, index, values)


def to_device(array: Any, device: str, copy: bool = False) -> Any:
    """`array` on `device` (a canonical device string); a copy when it moves or when `copy` is true."""
    if device == "cpu":
        if isinstance(array, np.ndarray):
            return array.copy() if copy else array
        if hasattr(array, "get"):
            return array.get()
        return np.array(array, copy=True) if copy else np.asarray(array)
    cupy = cupy_module()
    with cupy.cuda.Device(int(device[5:])):
        if isinstance(array, cupy.ndarray) and array.device.id == int(device[5:]):
            return array.copy() if copy else array
        return cupy.array(array, copy=True)


def to_host(array: Any, copy: bool = False) -> np.ndarray:
    """`array` as a NumPy array: itself on the CPU (a copy when `copy`), a copy from the device otherwise."""
    return to_device(array, "cpu", copy)


def cuda_device_count() -> int:
    """How many CUDA devices this process can use through CuPy (0 without CuPy, a driver or a device)."""
    import cuda_ipc
    if not cuda_ipc.is_available():
        return 0
    return int(cupy_module().cuda.runtime.getDeviceCount())


def use_device(device: str) -> None:
    """Make `device` this process's current device, so new arrays land there; nothing to do for 'cpu'."""
    device = parse_device(device)
    if device == "cpu":
        return
    cupy_module().cuda.Device(int(device[5:])).use()


def shareable(array: Any) -> Any:
    """`array` in memory other processes can map with nothing unrelated beside it: shared memory for a NumPy
    array (`sharing.share_array`), a device allocation of its own, rounded up to 2 MiB, for a CuPy array
    (`cuda_ipc.shareable`); `array` itself when it already is."""
    if isinstance(array, np.ndarray):
        import sharing
        return array if sharing.is_shared(array) else sharing.share_array(array)
    import cuda_ipc
    return cuda_ipc.shareable(array)
