"""Reductions over axes (sum, mean, max, min, logsumexp) and the normalisations built on them (softmax, log_softmax)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..device import array_module
from ..grad_mode import MODE
from ..tensor import Tensor, node, wrap
from ._util import expand_reduced, normalize_axes, normalize_axis


def _record(x: Tensor) -> bool:
    return x._rg and MODE.enabled


def _add_reduce(data: Any, axes: Any, keepdims: bool) -> Any:
    """Sum over axes (None: all) as an array; NumPy's ufunc reduce directly, which skips np.sum's dispatch."""
    if isinstance(data, np.ndarray):
        return np.add.reduce(data, axis=axes, keepdims=keepdims)
    return data.sum(axis=axes, keepdims=keepdims)


def sum(x: Tensor, axis: Optional[Any] = None, keepdims: bool = False) -> Tensor:
    """Sum over `axis` (all axes by default)."""
    data = x._data
    axes = normalize_axes(axis, data.ndim)
    out = _add_reduce(data, axes, keepdims)
    if _record(x):
        shape = data.shape

        def sum_backward(g: Any) -> tuple:
            return (expand_reduced(g, axes, keepdims, shape),)
        return node(out, sum_backward, (x,))
    return wrap(out)


def mean(x: Tensor, axis: Optional[Any] = None, keepdims: bool = False) -> Tensor:
    """Mean over `axis` (all axes by default)."""
    data = x._data
    if data.dtype.kind != "f":
        raise TypeError(f"mean: expected a floating point tensor, got dtype {data.dtype} (convert with .float())")
    axes = normalize_axes(axis, data.ndim)
    total = _add_reduce(data, axes, keepdims)
    count = data.size // total.size if total.size else 1
    out = total / count
    if _record(x):
        shape = data.shape

        def mean_backward(g: Any) -> tuple:
            return (expand_reduced(g / count, axes, keepdims, shape),)
        return node(out, mean_backward, (x,))
    return wrap(out)


def _extreme(x: Tensor, axis: Any, keepdims: bool, which: str) -> Tensor:
    data = x._data
    if data.size == 0:
        raise RuntimeError(f"{which}(): cannot reduce an empty tensor (shape {tuple(data.shape)})")
    axes = normalize_axes(axis, data.ndim)
    kept = getattr(data, which)(axis=axes, keepdims=True)
    out = kept if keepdims else (kept.reshape(()) if axes is None else kept.squeeze(axis=axes))
    if _record(x):
        shape = data.shape

        def extreme_backward(g: Any) -> tuple:
            hits = data == kept
            share = hits / hits.sum(axis=axes, keepdims=True)
            return (expand_reduced(g, axes, keepdims, shape) * share,)
        extreme_backward.__qualname__ = f"{which}_backward"
        return node(out, extreme_backward, (x,))
    return wrap(out)


def max(x: Tensor, axis: Optional[Any] = None, keepdims: bool = False) -> Tensor:
    """Largest value over `axis` (values only, NumPy style); ties share the gradient evenly, as torch.amax."""
    return _extreme(x, axis, keepdims, "max")


def min(x: Tensor, axis: Optional[Any] = None, keepdims: bool = False) -> Tensor:
    """Smallest value over `axis` (values only, NumPy style); ties share the gradient evenly, as torch.amin."""
    return _extreme(x, axis, keepdims, "min")


def argmax(x: Tensor, axis: Optional[int] = None, keepdims: bool = False) -> Tensor:
    """Index of the largest value (over the flattened tensor when axis is None); int64, no gradient."""
    data = x._data
    ax = None if axis is None else normalize_axis(axis, data.ndim)
    return wrap(data.argmax(axis=ax, keepdims=keepdims).astype(np.int64, copy=False))


def argmin(x: Tensor, axis: Optional[int] = None, keepdims: bool = False) -> Tensor:
    """Index of the smallest value (over the flattened tensor when axis is None); int64, no gradient."""
    data = x._data
    ax = None if axis is None else normalize_axis(axis, data.ndim)
    return wrap(data.argmin(axis=ax, keepdims=keepdims).astype(np.int64, copy=False))


def _stable_max(data: Any, axes: Any) -> Any:
    """The max over `axes` (kept), with infinities replaced by 0 so shifting by it stays finite."""
    peak = data.max(axis=axes, keepdims=True)
    return array_module(data).where(np.isfinite(peak), peak, 0)


def logsumexp(x: Tensor, axis: Optional[Any] = None, keepdims: bool = False) -> Tensor:
    """log(sum(exp(x))) over `axis`, computed without overflow."""
    data = x._data
    axes = normalize_axes(axis, data.ndim)
    peak = _stable_max(data, axes)
    with np.errstate(divide="ignore"):  # all -inf along an axis: log(0) = -inf, as torch gives, without a warning
        kept = np.log(np.exp(data - peak).sum(axis=axes, keepdims=True)) + peak
    out = kept if keepdims else (kept.reshape(()) if axes is None else kept.squeeze(axis=axes))
    if _record(x):
        shape = data.shape

        def logsumexp_backward(g: Any) -> tuple:
            return (expand_reduced(g, axes, keepdims, shape) * np.exp(data - kept),)
        return node(out, logsumexp_backward, (x,))
    return wrap(out)


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """exp(x) / sum(exp(x)) along `axis`."""
    data = x._data
    ax = normalize_axis(axis, data.ndim)
    out = np.exp(data - data.max(axis=ax, keepdims=True))
    out /= _add_reduce(out, ax, True)
    if _record(x):
        def softmax_backward(g: Any) -> tuple:
            return (out * (g - _add_reduce(g * out, ax, True)),)
        return node(out, softmax_backward, (x,))
    return wrap(out)


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """x - logsumexp(x) along `axis`, computed without overflow."""
    data = x._data
    ax = normalize_axis(axis, data.ndim)
    out = data - data.max(axis=ax, keepdims=True)
    out -= np.log(_add_reduce(np.exp(out), ax, True))
    if _record(x):
        def log_softmax_backward(g: Any) -> tuple:
            return (g - np.exp(out) * _add_reduce(g, ax, True),)
        return node(out, log_softmax_backward, (x,))
    return wrap(out)
