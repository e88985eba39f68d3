"""Shape and selection ops: reshape, transpose, permute, squeeze, unsqueeze, flatten, indexing, gather, cat, stack, chunk;
all but chunk are Primitives (see ops.primitive).

Reshapes, transposes and basic indexing give views that share storage with
their source (and follow it into shared memory); advanced indexing copies.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

from ..device import array_module, scatter_add
from ..tensor import Tensor
from ..tracing import SymbolicSize
from ._util import normalize_axes, normalize_axis, tensor_arg
from .primitive import Primitive, apply, product, same_shape


def _shape_arg(shape: Sequence[Any]) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(n if isinstance(n, SymbolicSize) else int(n) for n in shape)


def _reshape_forward(x: Any, target: tuple) -> Any:
    return x.reshape(target)


def _view_forward(x: Any, target: tuple) -> Any:
    try:
        out = x.reshape(target)
    except ValueError:
        out = None
    if out is None or (x.size and not array_module(x).may_share_memory(out, x)):
        raise RuntimeError(f"view size is not compatible with input tensor's size and stride (shape "
                           f"{tuple(x.shape)}, strides {x.strides}, asked for {target}); use .reshape(...) "
                           f"instead")
    return out


def _restore_shape_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    """The gradient of any op that only rearranges elements into a new shape: reshaped back."""
    return (g.reshape(args[0].shape),) + (None,) * (len(args) - 1)


def _reshape_shape(x: tuple, target: tuple) -> tuple:
    if -1 not in target:
        return target
    known = product(n for n in target if not (n.__class__ is int and n == -1))
    return tuple(product(x) // known if n.__class__ is int and n == -1 else n for n in target)


def _flatten_forward(x: Any, start: int, end: int) -> Any:
    return x.reshape(_flatten_shape(x.shape, start, end))


def _flatten_shape(x: tuple, start: int, end: int) -> tuple:
    return x[:start] + (product(x[start:end + 1]),) + x[end + 1:] if x else (1,)


def _squeeze_shape(x: tuple, axes: Any) -> tuple:
    return tuple(n for i, n in enumerate(x) if not (n.__class__ is int and n == 1 and (axes is None or i in axes)))


def _unsqueeze_forward(x: Any, axis: int) -> Any:
    return x.reshape(x.shape[:axis] + (1,) + x.shape[axis:])


def _permute_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    x, order = args
    return g.transpose(tuple(np.argsort(order))), None


def _transpose_forward(x: Any, a: int, b: int) -> Any:
    return x.swapaxes(a, b)


def _transpose_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    _, a, b = args
    return g.swapaxes(a, b), None, None


def _transpose_shape(x: tuple, a: int, b: int) -> tuple:
    order = list(range(len(x)))
    order[a], order[b] = b, a
    return tuple(x[i] for i in order)


def _t_forward(x: Any) -> Any:
    return x.T


def _t_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    return (g.T,)


RESHAPE = Primitive("reshape", _reshape_forward, _restore_shape_backward, shape=_reshape_shape, view="maybe")
VIEW = Primitive("view", _view_forward, _restore_shape_backward, shape=_reshape_shape, view=True)
FLATTEN = Primitive("flatten", _flatten_forward, _restore_shape_backward, shape=_flatten_shape, view="maybe")
SQUEEZE = Primitive("squeeze", lambda x, axes: x.squeeze(axis=axes), _restore_shape_backward,
                    shape=_squeeze_shape, view=True)
UNSQUEEZE = Primitive("unsqueeze", _unsqueeze_forward, _restore_shape_backward,
                      shape=lambda x, axis: x[:axis] + (1,) + x[axis:], view=True)
PERMUTE = Primitive("permute", lambda x, order: x.transpose(order), _permute_backward,
                    shape=lambda x, order: tuple(x[i] for i in order), view=True)
TRANSPOSE = Primitive("transpose", _transpose_forward, _transpose_backward, shape=_transpose_shape, view=True)
T = Primitive("t", _t_forward, _t_backward, shape=lambda x: x[::-1], view=True)
DETACH = Primitive("detach", lambda x: x, shape=same_shape, view=True)


def reshape(x: Tensor, *shape: Any) -> Tensor:
    """The same elements in a new shape (-1 infers one size); a view when the layout allows, else a copy."""
    target = _shape_arg(shape)
    try:
        return apply(RESHAPE, x, target)
    except ValueError:
        raise ValueError(f"reshape: cannot reshape a tensor of shape {tuple(x._data.shape)} ({x._data.size} "
                         f"elements) into shape {target}") from None


def view(x: Tensor, *shape: Any) -> Tensor:
    """reshape that must not copy (as torch's view): RuntimeError when the layout does not allow it."""
    return apply(VIEW, x, _shape_arg(shape))


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge axes start_dim..end_dim into one."""
    ndim = x._data.ndim
    if not ndim:
        return apply(FLATTEN, x, 0, -1)
    start, end = normalize_axis(start_dim, ndim, "start_dim"), normalize_axis(end_dim, ndim, "end_dim")
    if start > end:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    return apply(FLATTEN, x, start, end)


def permute(x: Tensor, *axes: Any) -> Tensor:
    """A view with the axes reordered."""
    ndim = x._data.ndim
    order = _shape_arg(axes)
    if sorted(a % max(ndim, 1) for a in order) != list(range(ndim)):
        raise ValueError(f"permute: {order} is not a permutation of the {ndim} axes")
    return apply(PERMUTE, x, tuple(a % ndim for a in order))


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """A view with two axes swapped."""
    ndim = x._data.ndim
    return apply(TRANSPOSE, x, normalize_axis(dim0, ndim, "dim0"), normalize_axis(dim1, ndim, "dim1"))


def t(x: Tensor) -> Tensor:
    """All axes reversed (a view): the matrix transpose for 2-D tensors."""
    return apply(T, x)


def detach(x: Tensor) -> Tensor:
    """A leaf sharing `x`'s storage, cut from the graph."""
    return apply(DETACH, x)


def squeeze(x: Tensor, axis: Optional[Any] = None) -> Tensor:
    """A view without the size-1 axes (all of them, or those in `axis` that have size 1, as torch)."""
    data = x._data
    axes = normalize_axes(axis, data.ndim)
    if axes is not None:
        axes = tuple(a for a in axes if data.shape[a] == 1)
    return apply(SQUEEZE, x, axes)


def unsqueeze(x: Tensor, axis: int) -> Tensor:
    """A view with a size-1 axis inserted at `axis` (negative counts from the end of the result)."""
    return apply(UNSQUEEZE, x, normalize_axis(axis, x._data.ndim + 1))


_SIMPLE = {int, slice, type(None), type(Ellipsis)}
_BASIC = (int, slice, type(None), type(Ellipsis), np.integer, SymbolicSize)
_TENSOR = type("TensorIndex", (), {"__repr__": lambda self: "<tensor>", "__slots__": ()})()
"""Where an index template takes the next tensor argument of an advanced index."""


def _fill(template: tuple, arrays: tuple) -> tuple:
    """The index `template` with its tensor places filled from `arrays`, in order."""
    if not arrays:
        return template
    rest = iter(arrays)
    return tuple(next(rest) if item is _TENSOR else item for item in template)


def _getitem_forward(x: Any, template: tuple, *arrays: Any) -> Any:
    return x[_fill(template, arrays)]


def _selects_all(shape: tuple, template: tuple) -> bool:
    """True when the basic index `template` selects every element of an array of `shape`, in order: full slices
    (unit step), integers on axes of size 1 and new axes; its result is then a reshape of the array."""
    explicit = sum(1 for item in template if item is not None and item is not Ellipsis)
    axis = 0
    for item in template:
        if item is Ellipsis:
            axis += len(shape) - explicit
        elif isinstance(item, slice):
            bounds = (item.start, item.stop, item.step)
            if not all(b is None or b.__class__ is int for b in bounds) or item.step not in (None, 1) \
                    or _slice_length(shape[axis], item) != shape[axis]:
                return False
            axis += 1
        elif item is not None:
            if shape[axis] != 1:
                return False
            axis += 1
    return True


def _getitem_grad_inline(shapes: tuple, constants: tuple) -> Optional[tuple]:
    """An index that selects everything: the gradient is the output's, reshaped (see _selects_all)."""
    shape = shapes[0]
    if not _selects_all(shape, constants[1]):
        return None
    return (f"{{g}}.reshape({tuple(shape)!r})",) + (None,) * (len(shapes) - 1)


def _getitem_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    x, template, *arrays = args
    if not arrays and _selects_all(x.shape, template):
        return (g.reshape(x.shape),) + (None,) * (len(args) - 1)
    full = array_module(g).zeros(x.shape, g.dtype)
    full[template] = g
    return (full,) + (None,) * (len(args) - 1)


def _index_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    x, template, *arrays = args
    full = array_module(g).zeros(x.shape, g.dtype)
    scatter_add(full, _fill(template, tuple(arrays)), g)
    return (full,) + (None,) * (len(args) - 1)


def _slice_length(n: Any, item: slice) -> Any:
    """len(range(n)[item]), in symbols where it can be (a unit step), else from the size's value."""
    if item.step not in (None, 1):
        return len(range(*item.indices(n)))
    start = 0 if item.start is None else (item.start + n if item.start < 0 else item.start)
    stop = n if item.stop is None else (item.stop + n if item.stop < 0 else item.stop)
    stop = min(max(stop, 0), n)
    return max(stop - min(max(start, 0), stop), 0)


def _basic_index_shape(x: tuple, template: tuple) -> tuple:
    """The shape basic indexing gives; slices with bounds read the size they cut (a symbolic one specializes)."""
    explicit = sum(1 for item in template if item is not None and item is not Ellipsis)
    out: list = []
    axis = 0
    for item in template:
        if item is Ellipsis:
            out.extend(x[axis:axis + len(x) - explicit])
            axis += len(x) - explicit
        elif item is None:
            out.append(1)
        elif isinstance(item, slice):
            out.append(_slice_length(x[axis], item))
            axis += 1
        else:
            axis += 1
    return tuple(out)


GETITEM = Primitive("getitem", _getitem_forward, _getitem_backward, shape=_basic_index_shape, view=True,
                    grad_inline=_getitem_grad_inline)
INDEX = Primitive("index", _getitem_forward, _index_backward, shape=None)  # the shape may depend on values


def getitem(x: Tensor, index: Any) -> Tensor:
    """x[index]: basic indexing gives a view, integer/boolean array indexing a copy; both differentiable."""
    items = index if isinstance(index, tuple) else (index,)
    if all(item.__class__ in _SIMPLE for item in items):  # the common case: ints and slices
        return _apply_index(GETITEM, x, index, items if any(item is Ellipsis for item in items) else
                            items + (Ellipsis,), ())
    template, tensors, basic = [], [], True
    for item in items:
        if isinstance(item, Tensor):
            tensors.append(item)
            item = _TENSOR
        elif isinstance(item, list):
            item = np.asarray(item)
        if not isinstance(item, _BASIC) or isinstance(item, (bool, np.bool_)):
            basic = False
        template.append(item)
    if basic and not any(item is Ellipsis for item in template):
        template.append(Ellipsis)  # so an integer index gives a 0-d view rather than a scalar
    return _apply_index(GETITEM if basic else INDEX, x, index, tuple(template), tensors)


def _apply_index(prim: Primitive, x: Tensor, index: Any, template: tuple, tensors: Sequence[Tensor]) -> Tensor:
    try:
        return apply(prim, x, template, *tensors)
    except IndexError as exc:
        raise IndexError(f"index {index!r} is invalid for a tensor of shape {tuple(x._data.shape)}: {exc}") from None


def _gather_where(x: Any, axis: int, index: Any) -> tuple:
    """The advanced index that picks index[..., i, ...] along `axis` (aranges along the other axes)."""
    xp = array_module(x)
    return tuple(index if d == axis else xp.arange(n).reshape((-1,) + (1,) * (index.ndim - d - 1))
                 for d, n in enumerate(index.shape))


def _gather_forward(x: Any, axis: int, index: Any) -> Any:
    index = array_module(x).asarray(index)
    if index.size and (int(index.min()) < 0 or int(index.max()) >= x.shape[axis]):
        raise IndexError(f"gather: index values must be in [0, {x.shape[axis]}) along axis {axis}, got "
                         f"[{int(index.min())}, {int(index.max())}]")
    return x[_gather_where(x, axis, index)]


def _gather_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    x, axis, index = args
    full = array_module(g).zeros(x.shape, g.dtype)
    where = _gather_where(x, axis, index)
    if index.shape[axis] == 1:  # one pick per line along the axis: no repeated index
        full[where] = g
    else:
        scatter_add(full, where, g)
    return full, None, None


GATHER = Primitive("gather", _gather_forward, _gather_backward, shape=lambda x, axis, index: index)


def gather(x: Tensor, axis: int, index: Any) -> Tensor:
    """out[..., i, ...] = x[..., index[..., i, ...], ...] along `axis` (torch.gather); `index` has x's ndim."""
    data = x._data
    index = tensor_arg(index)
    ind = index._data
    if ind.ndim != data.ndim or ind.dtype.kind not in "iu":
        raise ValueError(f"gather: index must be an integer tensor with the input's {data.ndim} dimensions, got "
                         f"dtype {ind.dtype} and shape {tuple(ind.shape)}")
    ax = normalize_axis(axis, data.ndim)
    if any(i > n for d, (i, n) in enumerate(zip(ind.shape, data.shape)) if d != ax):
        raise ValueError(f"gather: index shape {tuple(ind.shape)} is larger than the input shape "
                         f"{tuple(data.shape)} outside axis {ax}")
    return apply(GATHER, x, ax, index)


def _cat_forward(axis: int, *arrays: Any) -> Any:
    return array_module(arrays[0]).concatenate(arrays, axis=axis)


def _cat_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    axis, *arrays = args
    lead = (slice(None),) * axis
    bounds = np.cumsum([0] + [a.shape[axis] for a in arrays])
    return (None,) + tuple(g[lead + (slice(lo, hi),)] if need else None
                           for lo, hi, need in zip(bounds[:-1], bounds[1:], needs[1:]))


def _cat_shape(axis: int, *shapes: tuple) -> tuple:
    first = shapes[0]
    return first[:axis] + (sum(s[axis] for s in shapes[1:]) + first[axis],) + first[axis + 1:]


def _stack_forward(axis: int, *arrays: Any) -> Any:
    return array_module(arrays[0]).stack(arrays, axis=axis)


def _stack_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    axis = args[0]
    lead = (slice(None),) * axis
    return (None,) + tuple(g[lead + (i,)] if need else None for i, need in enumerate(needs[1:]))


CAT = Primitive("cat", _cat_forward, _cat_backward, shape=_cat_shape)
STACK = Primitive("stack", _stack_forward, _stack_backward,
                  shape=lambda axis, *shapes: shapes[0][:axis] + (len(shapes),) + shapes[0][axis:])


def _joined(tensors: Sequence[Any], op: str) -> list:
    items = [tensor_arg(t) for t in tensors]
    if not items:
        raise ValueError(f"{op}: expected a non-empty sequence of tensors")
    return items


def cat(tensors: Sequence[Any], axis: int = 0) -> Tensor:
    """Concatenate along an existing axis."""
    items = _joined(tensors, "cat")
    ax = normalize_axis(axis, items[0]._data.ndim)
    try:
        return apply(CAT, ax, *items)
    except ValueError:
        raise ValueError(f"cat: shapes {[tuple(t._data.shape) for t in items]} differ outside axis {ax}") from None


def stack(tensors: Sequence[Any], axis: int = 0) -> Tensor:
    """Join along a new axis."""
    items = _joined(tensors, "stack")
    ax = normalize_axis(axis, items[0]._data.ndim + 1)
    try:
        return apply(STACK, ax, *items)
    except ValueError:
        raise ValueError(f"stack: all tensors must have the same shape, got "
                         f"{[tuple(t._data.shape) for t in items]}") from None


def chunk(x: Tensor, chunks: int, axis: int = 0) -> Tuple[Tensor, ...]:
    """Split into `chunks` views of (nearly) equal size along `axis`, as torch.chunk."""
    if not isinstance(chunks, (int, np.integer)) or chunks <= 0:
        raise ValueError(f"chunk: chunks must be a positive int, got {chunks!r}")
    ax = normalize_axis(axis, x._data.ndim)
    size = x.shape[ax]  # symbolic under a dynamic capture: the slices below then follow it
    step = -(-size // chunks)
    lead = (slice(None),) * ax
    return tuple(getitem(x, lead + (slice(lo, min(lo + step, size)),)) for lo in range(0, size, step))
