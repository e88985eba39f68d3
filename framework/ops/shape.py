"""Shape and selection ops: reshape, transpose, permute, squeeze, unsqueeze, flatten, indexing, gather, cat, stack, chunk.

Reshapes, transposes and basic indexing give views that share storage with
their source (and follow it into shared memory); advanced indexing copies.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

from ..device import array_module, scatter_add
from ..grad_mode import MODE
from ..tensor import Tensor, node, view_of, wrap
from ._util import normalize_axes, normalize_axis, tensor_arg


def _shape_arg(shape: Sequence[Any]) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(n) for n in shape)


def reshape(x: Tensor, *shape: Any) -> Tensor:
    """The same elements in a new shape (-1 infers one size); a view when the layout allows, else a copy."""
    data = x._data
    target = _shape_arg(shape)
    try:
        out = data.reshape(target)
    except ValueError:
        raise ValueError(f"reshape: cannot reshape a tensor of shape {tuple(data.shape)} ({data.size} elements) "
                         f"into shape {target}") from None
    source_shape = data.shape

    def reshape_backward(g: Any) -> tuple:
        return (g.reshape(source_shape),)
    if array_module(data).may_share_memory(out, data):
        return view_of(x, out, reshape_backward)
    return node(out, reshape_backward, (x,)) if x._rg and MODE.enabled else wrap(out)


def view(x: Tensor, *shape: Any) -> Tensor:
    """reshape that must not copy (as torch's view): RuntimeError when the layout does not allow it."""
    data = x._data
    target = _shape_arg(shape)
    try:
        out = data.reshape(target)
    except ValueError:
        out = None
    if out is None or (data.size and not array_module(data).may_share_memory(out, data)):
        raise RuntimeError(f"view size is not compatible with input tensor's size and stride (shape "
                           f"{tuple(data.shape)}, strides {data.strides}, asked for {target}); use .reshape(...) "
                           f"instead") from None
    source_shape = data.shape

    def view_backward(g: Any) -> tuple:
        return (g.reshape(source_shape),)
    return view_of(x, out, view_backward)


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge axes start_dim..end_dim into one."""
    shape = x._data.shape
    if not shape:
        return reshape(x, 1)
    start, end = normalize_axis(start_dim, len(shape), "start_dim"), normalize_axis(end_dim, len(shape), "end_dim")
    if start > end:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    merged = 1
    for n in shape[start:end + 1]:
        merged *= n
    return reshape(x, shape[:start] + (merged,) + shape[end + 1:])


def permute(x: Tensor, *axes: Any) -> Tensor:
    """A view with the axes reordered."""
    data = x._data
    order = _shape_arg(axes)
    if sorted(a % max(data.ndim, 1) for a in order) != list(range(data.ndim)):
        raise ValueError(f"permute: {order} is not a permutation of the {data.ndim} axes")
    out = data.transpose(order)
    inverse = tuple(np.argsort([a % data.ndim for a in order]))

    def permute_backward(g: Any) -> tuple:
        return (g.transpose(inverse),)
    return view_of(x, out, permute_backward)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """A view with two axes swapped."""
    data = x._data
    a, b = normalize_axis(dim0, data.ndim, "dim0"), normalize_axis(dim1, data.ndim, "dim1")
    out = data.swapaxes(a, b)

    def transpose_backward(g: Any) -> tuple:
        return (g.swapaxes(a, b),)
    return view_of(x, out, transpose_backward)


def t(x: Tensor) -> Tensor:
    """All axes reversed (a view): the matrix transpose for 2-D tensors."""
    data = x._data
    out = data.T

    def t_backward(g: Any) -> tuple:
        return (g.T,)
    return view_of(x, out, t_backward)


def squeeze(x: Tensor, axis: Optional[Any] = None) -> Tensor:
    """A view without the size-1 axes (all of them, or those in `axis` that have size 1, as torch)."""
    data = x._data
    axes = normalize_axes(axis, data.ndim)
    if axes is not None:
        axes = tuple(a for a in axes if data.shape[a] == 1)
    out = data.squeeze(axis=axes)
    source_shape = data.shape

    def squeeze_backward(g: Any) -> tuple:
        return (g.reshape(source_shape),)
    return view_of(x, out, squeeze_backward)


def unsqueeze(x: Tensor, axis: int) -> Tensor:
    """A view with a size-1 axis inserted at `axis` (negative counts from the end of the result)."""
    data = x._data
    ax = normalize_axis(axis, data.ndim + 1)
    out = data.reshape(data.shape[:ax] + (1,) + data.shape[ax:])
    source_shape = data.shape

    def unsqueeze_backward(g: Any) -> tuple:
        return (g.reshape(source_shape),)
    return view_of(x, out, unsqueeze_backward)


_BASIC = (int, slice, type(None), type(Ellipsis), np.integer)


def _index(index: Any) -> Tuple[Any, bool]:
    """(index with tensors replaced by arrays, whether it is basic indexing, i.e. gives a view)."""
    items = index if isinstance(index, tuple) else (index,)
    converted = []
    basic = True
    for item in items:
        if isinstance(item, Tensor):
            item = item._data
        elif isinstance(item, list):
            item = np.asarray(item)
        if not isinstance(item, _BASIC) or isinstance(item, (bool, np.bool_)):
            basic = False
        converted.append(item)
    if basic and not any(item is Ellipsis for item in converted):
        converted.append(Ellipsis)  # so an integer index gives a 0-d view rather than a scalar
    return tuple(converted), basic


def getitem(x: Tensor, index: Any) -> Tensor:
    """x[index]: basic indexing gives a view, integer/boolean array indexing a copy; both differentiable."""
    data = x._data
    idx, basic = _index(index)
    try:
        out = data[idx]
    except IndexError as exc:
        raise IndexError(f"index {index!r} is invalid for a tensor of shape {tuple(data.shape)}: {exc}") from None
    shape = data.shape
    xp = array_module(data)

    def getitem_backward(g: Any) -> tuple:
        full = xp.zeros(shape, g.dtype)
        if basic:
            full[idx] = g
        else:
            scatter_add(full, idx, g)
        return (full,)
    if basic:
        return view_of(x, out, getitem_backward)
    return node(out, getitem_backward, (x,)) if x._rg and MODE.enabled else wrap(out)


def gather(x: Tensor, axis: int, index: Any) -> Tensor:
    """out[..., i, ...] = x[..., index[..., i, ...], ...] along `axis` (torch.gather); `index` has x's ndim."""
    data = x._data
    ind = index._data if isinstance(index, Tensor) else np.asarray(index)
    if ind.ndim != data.ndim or ind.dtype.kind not in "iu":
        raise ValueError(f"gather: index must be an integer tensor with the input's {data.ndim} dimensions, got "
                         f"dtype {ind.dtype} and shape {tuple(ind.shape)}")
    ax = normalize_axis(axis, data.ndim)
    if any(i > n for d, (i, n) in enumerate(zip(ind.shape, data.shape)) if d != ax):
        raise ValueError(f"gather: index shape {tuple(ind.shape)} is larger than the input shape "
                         f"{tuple(data.shape)} outside axis {ax}")
    if ind.size and (int(ind.min()) < 0 or int(ind.max()) >= data.shape[ax]):
        raise IndexError(f"gather: index values must be in [0, {data.shape[ax]}) along axis {ax}, got "
                         f"[{int(ind.min())}, {int(ind.max())}]")
    xp = array_module(data)
    ind = xp.asarray(ind)
    where = tuple(ind if d == ax else xp.arange(n).reshape((-1,) + (1,) * (ind.ndim - d - 1))
                  for d, n in enumerate(ind.shape))
    out = data[where]
    if not (x._rg and MODE.enabled):
        return wrap(out)
    shape = data.shape

    def gather_backward(g: Any) -> tuple:
        full = xp.zeros(shape, g.dtype)
        if ind.shape[ax] == 1:  # one pick per line along the axis: no repeated index
            full[where] = g
        else:
            scatter_add(full, where, g)
        return (full,)
    return node(out, gather_backward, (x,))


def cat(tensors: Sequence[Any], axis: int = 0) -> Tensor:
    """Concatenate along an existing axis."""
    items = [tensor_arg(t) for t in tensors]
    if not items:
        raise ValueError("cat: expected a non-empty sequence of tensors")
    datas = [t._data for t in items]
    ax = normalize_axis(axis, datas[0].ndim)
    try:
        out = array_module(datas[0]).concatenate(datas, axis=ax)
    except ValueError:
        raise ValueError(f"cat: shapes {[tuple(d.shape) for d in datas]} differ outside axis {ax}") from None
    if not (MODE.enabled and any(t._rg for t in items)):
        return wrap(out)
    bounds = np.cumsum([0] + [d.shape[ax] for d in datas])
    lead = (slice(None),) * ax

    def cat_backward(g: Any) -> tuple:
        return tuple(g[lead + (slice(lo, hi),)] for lo, hi in zip(bounds[:-1], bounds[1:]))
    return node(out, cat_backward, tuple(items))


def stack(tensors: Sequence[Any], axis: int = 0) -> Tensor:
    """Join along a new axis."""
    items = [tensor_arg(t) for t in tensors]
    if not items:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    datas = [t._data for t in items]
    ax = normalize_axis(axis, datas[0].ndim + 1)
    try:
        out = array_module(datas[0]).stack(datas, axis=ax)
    except ValueError:
        raise ValueError(f"stack: all tensors must have the same shape, got {[tuple(d.shape) for d in datas]}") \
            from None
    if not (MODE.enabled and any(t._rg for t in items)):
        return wrap(out)
    lead = (slice(None),) * ax

    def stack_backward(g: Any) -> tuple:
        return tuple(g[lead + (i,)] for i in range(len(items)))
    return node(out, stack_backward, tuple(items))


def chunk(x: Tensor, chunks: int, axis: int = 0) -> Tuple[Tensor, ...]:
    """Split into `chunks` views of (nearly) equal size along `axis`, as torch.chunk."""
    if not isinstance(chunks, (int, np.integer)) or chunks <= 0:
        raise ValueError(f"chunk: chunks must be a positive int, got {chunks!r}")
    ax = normalize_axis(axis, x._data.ndim)
    size = x._data.shape[ax]
    step = -(-size // chunks)
    lead = (slice(None),) * ax
    return tuple(getitem(x, lead + (slice(lo, min(lo + step, size)),)) for lo in range(0, size, step))
