"""Tensor factories: tensor, as_tensor, from_numpy, zeros, ones, empty, full, arange, randn, rand, randint, *_like.

Every factory that makes a CUDA array goes through `framework.device` (`_build`,
`to_device`), and so through the start-method guard, with the target device
current.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import random
from .device import cupy_module, device_of, on_device, parse_device, to_device
from .dtypes import DEFAULT_FLOAT, is_floating, resolve_dtype
from .tensor import Tensor, as_array, wrap


def _finish(data: Any, requires_grad: bool) -> Tensor:
    out = wrap(data)
    if requires_grad:
        out.requires_grad = True
    return out


def _size(size: Sequence[Any], name: str) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in size):
        raise ValueError(f"{name}: sizes must be non-negative ints, got {tuple(size)!r}")
    return tuple(int(n) for n in size)


def _dtype_or(dtype: Any, default: np.dtype) -> np.dtype:
    return default if dtype is None else resolve_dtype(dtype)


def _float_dtype(dtype: Any, name: str) -> np.dtype:
    resolved = DEFAULT_FLOAT if dtype is None else resolve_dtype(dtype)
    if not is_floating(resolved):
        raise TypeError(f"{name}: dtype must be a floating point type, got {resolved}")
    return resolved


def _build(device: Any, make: Callable[[Any], Any]) -> Any:
    """make(xp) run with the array module of `device` and, for CUDA, that device current."""
    dev = parse_device(device)
    with on_device(dev):
        return make(np if dev == "cpu" else cupy_module())


def tensor(data: Any, dtype: Any = None, device: Any = "cpu", requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of `data` (Python numbers default to float32/int64, arrays keep their dtype)."""
    array = to_device(as_array(data, dtype), parse_device(device), copy=True)
    return _finish(array, requires_grad)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """`data` as a tensor, sharing memory when it already is an array of that dtype and device."""
    if isinstance(data, Tensor) and dtype is None and device is None:
        return data
    array = as_array(data, dtype)
    if device is not None:
        array = to_device(array, parse_device(device))
    return wrap(array)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with `array` (no copy), as torch.from_numpy."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    resolve_dtype(array.dtype)
    return wrap(array)


def zeros(*size: Any, dtype: Any = None, device: Any = "cpu", requires_grad: bool = False) -> Tensor:
    """A tensor of zeros (float32 by default)."""
    shape, resolved = _size(size, "zeros"), _dtype_or(dtype, DEFAULT_FLOAT)
    return _finish(_build(device, lambda xp: xp.zeros(shape, resolved)), requires_grad)


def ones(*size: Any, dtype: Any = None, device: Any = "cpu", requires_grad: bool = False) -> Tensor:
    """A tensor of ones (float32 by default)."""
    shape, resolved = _size(size, "ones"), _dtype_or(dtype, DEFAULT_FLOAT)
    return _finish(_build(device, lambda xp: xp.ones(shape, resolved)), requires_grad)


def empty(*size: Any, dtype: Any = None, device: Any = "cpu", requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor (float32 by default)."""
    shape, resolved = _size(size, "empty"), _dtype_or(dtype, DEFAULT_FLOAT)
    return _finish(_build(device, lambda xp: xp.empty(shape, resolved)), requires_grad)


def full(size: Sequence[int], fill_value: Any, dtype: Any = None, device: Any = "cpu",
         requires_grad: bool = False) -> Tensor:
    """A tensor filled with `fill_value` (dtype inferred from it as torch does when not given)."""
    shape = _size((size,), "full")
    resolved = resolve_dtype(dtype) if dtype is not None else as_array(fill_value).dtype
    return _finish(_build(device, lambda xp: xp.full(shape, fill_value, resolved)), requires_grad)


def zeros_like(other: Tensor, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Zeros with `other`'s shape, device and (unless given) dtype."""
    data = other._data
    return _finish(_build(device_of(data), lambda xp: xp.zeros(data.shape, _dtype_or(dtype, data.dtype))),
                   requires_grad)


def ones_like(other: Tensor, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Ones with `other`'s shape, device and (unless given) dtype."""
    data = other._data
    return _finish(_build(device_of(data), lambda xp: xp.ones(data.shape, _dtype_or(dtype, data.dtype))),
                   requires_grad)


def arange(start: Any, end: Optional[Any] = None, step: Any = 1, dtype: Any = None, device: Any = "cpu",
           requires_grad: bool = False) -> Tensor:
    """Values from start (default 0) up to end, exclusive; int64 for integer arguments, else float32."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange: step must be non-zero")
    ints = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (start, end, step))
    resolved = resolve_dtype(dtype) if dtype is not None else (np.dtype(np.int64) if ints else DEFAULT_FLOAT)
    return _finish(_build(device, lambda xp: xp.arange(start, end, step).astype(resolved)), requires_grad)


def randn(*size: Any, dtype: Any = None, device: Any = "cpu", requires_grad: bool = False) -> Tensor:
    """Samples of N(0, 1) from the global generator."""
    shape, resolved, dev = _size(size, "randn"), _float_dtype(dtype, "randn"), parse_device(device)
    return _finish(_build(dev, lambda xp: random.standard_normal(shape, resolved, dev)), requires_grad)


def rand(*size: Any, dtype: Any = None, device: Any = "cpu", requires_grad: bool = False) -> Tensor:
    """Samples of U[0, 1) from the global generator."""
    shape, resolved, dev = _size(size, "rand"), _float_dtype(dtype, "rand"), parse_device(device)
    return _finish(_build(dev, lambda xp: random.uniform(shape, resolved, device=dev)), requires_grad)


def randint(low: int, high: Optional[int] = None, size: Sequence[int] = (), device: Any = "cpu") -> Tensor:
    """Uniform int64 samples from [low, high) (or [0, low) when high is omitted) from the global generator."""
    if high is None:
        low, high = 0, low
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    shape, dev = _size((size,), "randint"), parse_device(device)
    return wrap(_build(dev, lambda xp: random.integers(low, high, shape, dev)))
