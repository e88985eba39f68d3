"""Reductions over axes (sum, mean, max, min, logsumexp) and the normalisations built on them (softmax,
log_softmax); each a Primitive (see ops.primitive) taking normalised axes as constants."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..device import array_module
from ..tensor import Tensor
from ._util import expand_reduced, normalize_axes, normalize_axis
from .primitive import Primitive, apply, reduced_shape, same_shape


def _add_reduce(data: Any, axes: Any, keepdims: bool, out: Any = None) -> Any:
    """Sum over axes (None: all) as an array; NumPy's ufunc reduce directly, which skips np.sum's dispatch."""
    if isinstance(data, np.ndarray):
        return np.add.reduce(data, axes, None, out, keepdims)
    return data.sum(axis=axes, keepdims=keepdims, out=out)


def _kept(out: Any, x: Any, axes: Any, keepdims: bool) -> Any:
    """A reduction's result with the reduced axes kept (size 1), so it broadcasts against the input."""
    return out if keepdims else out.reshape(reduced_shape(x.shape, axes, True))


def _sum_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    x, axes, keepdims = args
    return expand_reduced(g, axes, keepdims, x.shape), None, None


def _mean_forward(x: Any, axes: Any, keepdims: bool, out: Any = None) -> Any:
    total = _add_reduce(x, axes, keepdims, out)
    count = x.size // total.size if total.size else 1
    if out is None:
        return total / count
    out /= count
    return out


def _mean_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    x, axes, keepdims = args
    count = x.size // out.size if out.size else 1
    return expand_reduced(g / count, axes, keepdims, x.shape), None, None


def _max_forward(x: Any, axes: Any, keepdims: bool) -> Any:
    return x.max(axis=axes, keepdims=keepdims)


def _min_forward(x: Any, axes: Any, keepdims: bool) -> Any:
    return x.min(axis=axes, keepdims=keepdims)


def _extreme_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    """Ties share the gradient evenly, as torch.amax/amin."""
    x, axes, keepdims = args
    hits = x == _kept(out, x, axes, keepdims)
    share = hits / hits.sum(axis=axes, keepdims=True)
    return expand_reduced(g, axes, keepdims, x.shape) * share, None, None


def _argmax_forward(x: Any, axis: Optional[int], keepdims: bool) -> Any:
    return x.argmax(axis=axis, keepdims=keepdims).astype(np.int64, copy=False)


def _argmin_forward(x: Any, axis: Optional[int], keepdims: bool) -> Any:
    return x.argmin(axis=axis, keepdims=keepdims).astype(np.int64, copy=False)


def _stable_max(data: Any, axes: Any) -> Any:
    """The max over `axes` (kept), with infinities replaced by 0 so shifting by it stays finite."""
    peak = data.max(axis=axes, keepdims=True)
    return array_module(data).where(np.isfinite(peak), peak, 0)


def _logsumexp_forward(x: Any, axes: Any, keepdims: bool) -> Any:
    peak = _stable_max(x, axes)
    with np.errstate(divide="ignore"):  # all -inf along an axis: log(0) = -inf, as torch gives, without a warning
        kept = np.log(np.exp(x - peak).sum(axis=axes, keepdims=True)) + peak
    if keepdims:
        return kept
    return kept.reshape(()) if axes is None else kept.squeeze(axis=axes)


def _logsumexp_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    x, axes, keepdims = args
    return expand_reduced(g, axes, keepdims, x.shape) * np.exp(x - _kept(out, x, axes, keepdims)), None, None


def _peak(x: Any, axis: int) -> Any:
    """The max along `axis`, kept (np.maximum.reduce directly on NumPy: it skips ndarray.max's wrapper)."""
    return np.maximum.reduce(x, axis, None, None, True) if isinstance(x, np.ndarray) else x.max(axis, keepdims=True)


def _softmax_forward(x: Any, axis: int) -> Any:
    out = np.exp(x - _peak(x, axis))
    out /= _add_reduce(out, axis, True)
    return out


def _softmax_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    axis = args[1]
    return out * (g - _add_reduce(g * out, axis, True)), None


def _log_softmax_forward(x: Any, axis: int, out: Any = None) -> Any:
    if isinstance(x, np.ndarray):  # one stable reduction: twice as fast as max, exp, sum, log for a few classes
        return np.subtract(x, np.logaddexp.reduce(x, axis, None, None, True), out=out)
    out = np.subtract(x, _peak(x, axis), out=out)
    out -= np.log(_add_reduce(np.exp(out), axis, True))
    return out


def _log_softmax_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    axis = args[1]
    return g - np.exp(out) * _add_reduce(g, axis, True), None


def _reduction_shape(x: tuple, axes: Any, keepdims: bool) -> tuple:
    return reduced_shape(x, axes if axes is None or isinstance(axes, tuple) else (axes,), keepdims)


SUM = Primitive("sum", _add_reduce, _sum_backward, shape=_reduction_shape, out=True)
MEAN = Primitive("mean", _mean_forward, _mean_backward, shape=_reduction_shape, out=True)
MAX = Primitive("max", _max_forward, _extreme_backward, shape=_reduction_shape)
MIN = Primitive("min", _min_forward, _extreme_backward, shape=_reduction_shape)
ARGMAX = Primitive("argmax", _argmax_forward, shape=_reduction_shape)
ARGMIN = Primitive("argmin", _argmin_forward, shape=_reduction_shape)
LOGSUMEXP = Primitive("logsumexp", _logsumexp_forward, _logsumexp_backward, shape=_reduction_shape)
SOFTMAX = Primitive("softmax", _softmax_forward, _softmax_backward, shape=same_shape)
LOG_SOFTMAX = Primitive("log_softmax", _log_softmax_forward, _log_softmax_backward, shape=same_shape, out=True)


def sum(x: Tensor, axis: Optional[Any] = None, keepdims: bool = False) -> Tensor:
    """Sum over `axis` (all axes by default)."""
    return apply(SUM, x, normalize_axes(axis, x._data.ndim), keepdims)


def mean(x: Tensor, axis: Optional[Any] = None, keepdims: bool = False) -> Tensor:
    """Mean over `axis` (all axes by default)."""
    if x._data.dtype.kind != "f":
        raise TypeError(f"mean: expected a floating point tensor, got dtype {x._data.dtype} (convert with .float())")
    return apply(MEAN, x, normalize_axes(axis, x._data.ndim), keepdims)


def _extreme(prim: Primitive, x: Tensor, axis: Any, keepdims: bool) -> Tensor:
    if x._data.size == 0:
        raise RuntimeError(f"{prim.name}(): cannot reduce an empty tensor (shape {tuple(x._data.shape)})")
    return apply(prim, x, normalize_axes(axis, x._data.ndim), keepdims)


def max(x: Tensor, axis: Optional[Any] = None, keepdims: bool = False) -> Tensor:
    """Largest value over `axis` (values only, NumPy style); ties share the gradient evenly, as torch.amax."""
    return _extreme(MAX, x, axis, keepdims)


def min(x: Tensor, axis: Optional[Any] = None, keepdims: bool = False) -> Tensor:
    """Smallest value over `axis` (values only, NumPy style); ties share the gradient evenly, as torch.amin."""
    return _extreme(MIN, x, axis, keepdims)


def argmax(x: Tensor, axis: Optional[int] = None, keepdims: bool = False) -> Tensor:
    """Index of the largest value (over the flattened tensor when axis is None); int64, no gradient."""
    return apply(ARGMAX, x, None if axis is None else normalize_axis(axis, x._data.ndim), keepdims)


def argmin(x: Tensor, axis: Optional[int] = None, keepdims: bool = False) -> Tensor:
    """Index of the smallest value (over the flattened tensor when axis is None); int64, no gradient."""
    return apply(ARGMIN, x, None if axis is None else normalize_axis(axis, x._data.ndim), keepdims)


def logsumexp(x: Tensor, axis: Optional[Any] = None, keepdims: bool = False) -> Tensor:
    """log(sum(exp(x))) over `axis`, computed without overflow."""
    return apply(LOGSUMEXP, x, normalize_axes(axis, x._data.ndim), keepdims)


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """exp(x) / sum(exp(x)) along `axis`."""
    return apply(SOFTMAX, x, normalize_axis(axis, x._data.ndim))


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """x - logsumexp(x) along `axis`, computed without overflow."""
    return apply(LOG_SOFTMAX, x, normalize_axis(axis, x._data.ndim))
