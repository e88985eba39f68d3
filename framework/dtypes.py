"""Data types: NumPy dtypes under torch-like names, and the rules for picking one."""
from __future__ import annotations

from typing import Any

import numpy as np

float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int8 = np.dtype(np.int8)
uint8 = np.dtype(np.uint8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)

DEFAULT_FLOAT = float32
_ALLOWED = (float16, float32, float64, int8, uint8, int16, int32, int64, bool_)


def resolve_dtype(dtype: Any) -> np.dtype:
    """A NumPy dtype from a dtype, a type or a name; TypeError naming the supported ones otherwise."""
    try:
        resolved = None if dtype is None else np.dtype(dtype)
    except TypeError:
        resolved = None
    if resolved is None or not any(resolved == allowed for allowed in _ALLOWED):
        names = ", ".join(str(d) for d in _ALLOWED)
        raise TypeError(f"unsupported dtype {dtype!r}: expected one of {names}")
    return resolved


def default_dtype_for(array: np.ndarray) -> np.dtype:
    """The dtype torch.tensor would pick for data that arrived as Python numbers: float32 for floats."""
    kind = array.dtype.kind
    if kind == "f":
        return DEFAULT_FLOAT
    if kind in "iu":
        return int64
    if kind == "b":
        return bool_
    raise TypeError(f"cannot make a tensor from data of dtype {array.dtype}: expected numbers or booleans")


def is_floating(dtype: np.dtype) -> bool:
    """True for floating point dtypes (the ones that can require gradients)."""
    return dtype.kind == "f"
