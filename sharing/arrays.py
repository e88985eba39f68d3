"""NumPy arrays in shared memory: making them, copying into them, recognising them."""
from __future__ import annotations

import math
import operator
from typing import Sequence

import numpy as np
from numpy.typing import DTypeLike

from . import lending, memfd, shmfile
from .storage import Storage
from .strategies import FILE_DESCRIPTOR, get_sharing_strategy


def new_storage(nbytes: int) -> Storage:
    """A zero-filled shared storage of `nbytes`, made with the current sharing strategy."""
    lending.reap()  # storages already received by their receivers need not be held any more
    if get_sharing_strategy() == FILE_DESCRIPTOR:
        return memfd.make_segment(nbytes)
    return shmfile.make_segment(nbytes)


def _check_dtype(dtype: np.dtype) -> None:
    if dtype.hasobject:
        raise TypeError(f"arrays of dtype {dtype} cannot live in shared memory: they hold references to "
                        "Python objects, which are private to one process; use a numeric, bool, string or "
                        "structured dtype without object fields")


def _check_shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    try:
        dims = (operator.index(shape),)
    except TypeError:
        try:
            dims = tuple(map(operator.index, shape))
        except TypeError:
            raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"shape {dims} has a negative dimension")
    return dims


def empty_shared(shape: int | Sequence[int], dtype: DTypeLike = float, order: str = "C") -> np.ndarray:
    """A new array in shared memory, like ``np.empty`` but zero-filled (fresh shared pages are zeros)."""
    dims = _check_shape(shape)
    dt = np.dtype(dtype)
    _check_dtype(dt)
    if order not in ("C", "F"):
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    storage = new_storage(math.prod(dims) * dt.itemsize)
    return np.ndarray(dims, dt, buffer=storage.as_bytes(), order=order)


def share_array(a: np.ndarray) -> np.ndarray:
    """A copy of `a` in shared memory (Fortran order kept for Fortran-ordered input, C order otherwise)."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"share_array expects a numpy.ndarray, got {type(a).__name__}: only arrays can live in "
                        "shared memory (convert with np.asarray first)")
    _check_dtype(a.dtype)
    order = "F" if a.flags.f_contiguous and not a.flags.c_contiguous else "C"
    out = empty_shared(a.shape, a.dtype, order)
    np.copyto(out, a, casting="no")
    return out


def storage_of(a: object) -> Storage | None:
    """The shared storage `a` views (through any chain of views), or None when it is not shared."""
    base = getattr(a, "base", None) if isinstance(a, np.ndarray) else None
    while base is not None:
        if type(base) is Storage:
            return base
        base = getattr(base, "base", None)
    return None


def is_shared(a: object) -> bool:
    """True when `a` is an array (or any view of one) in shared memory."""
    return storage_of(a) is not None
