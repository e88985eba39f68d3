"""Helpers shared by the op modules: operand promotion (and the cast primitive it records), axis normalisation and
broadcast reduction."""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

from ..device import array_module
from ..dtypes import DEFAULT_FLOAT
from ..tensor import Tensor, as_array, wrap
from .primitive import Primitive, apply, same_shape


def _cast_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    return g.astype(args[0].dtype, copy=False), None


def _cast_forward(x: Any, dtype: Any) -> Any:
    return x.astype(dtype)


CAST = Primitive("cast", _cast_forward, _cast_backward, shape=same_shape)
CONVERT = Primitive("convert", _cast_forward, shape=same_shape)  # to a non-floating dtype: no gradient


def cast(x: Tensor, dtype: Any) -> Tensor:
    """`x` converted to `dtype`; differentiable between floating dtypes."""
    return apply(CAST if dtype.kind == "f" else CONVERT, x, dtype)


def promote(a: Tensor, b: Any) -> Tuple[Tensor, Any]:
    """The operands a binary op combines: tensors, or a Python number for `b`, with torch's promotion.

    NumPy would make float32 <op> int64 a float64; torch keeps the floating
    operand's dtype (and an integer tensor <op> a Python float is float32).
    The casts are ops, so a capture records them.
    """
    if not isinstance(b, Tensor):
        if isinstance(b, np.generic):
            b = b.item()  # NumPy scalars count as Python numbers, as in torch
        if isinstance(b, (int, float)):
            if isinstance(b, float) and a._data.dtype.kind != "f":
                a = cast(a, DEFAULT_FLOAT)
            return a, b
        b = wrap(as_array(b))
    xd, yd = a._data.dtype, b._data.dtype
    if xd is not yd and xd != yd:
        if xd.kind == "f" and yd.kind != "f":
            b = cast(b, xd)
        elif yd.kind == "f" and xd.kind != "f":
            a = cast(a, yd)
    return a, b


def tensor_arg(value: Any) -> Tensor:
    """`value` as a Tensor (constants become leaves that do not require grad)."""
    return value if isinstance(value, Tensor) else wrap(as_array(value))


def shape_of(value: Any) -> tuple:
    """The shape of an array or () for a Python scalar."""
    return getattr(value, "shape", ())


def unbroadcast(grad: Any, shape: tuple) -> Any:
    """Sum `grad` over the axes broadcasting added or stretched so it has `shape`."""
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and grad.shape[lead + i] != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    return grad.reshape(shape)


def expression_primitive(name: str, forward: Any, grad_infix: Tuple[str, ...], **kwargs: Any) -> Primitive:
    """A Primitive whose gradients are expressions (its `grad_infix`, see ops.primitive), with its backward
    generated from them: each argument's gradient, summed back to the argument's shape unless the op keeps
    shapes (`same_shape`).

    One definition of the math serves both the eager op (this backward) and the
    compiler, which writes the expressions inline where it knows no broadcasting
    happened.
    """
    names = [f"a{i}" for i in range(len(grad_infix))]
    grads = [template.format(*names, g="g", out="out") for template in grad_infix]
    if kwargs["shape"] is not same_shape:
        grads = [f"(unbroadcast({grad}, shape_of(a{i})) if needs[{i}] else None)" for i, grad in enumerate(grads)]
    text = (f"def _{name}_backward(needs, args, out, g):\n    {', '.join(names)}, = args\n"
            f"    return ({', '.join(grads)},)\n")
    scope: dict = {}
    namespace = {"unbroadcast": unbroadcast, "shape_of": shape_of}
    exec(compile(text, f"<{name} backward>", "exec"), namespace, scope)  # noqa: S102
    return Primitive(name, forward, scope[f"_{name}_backward"], grad_infix=grad_infix, **kwargs)


def normalize_axes(axis: Optional[Any], ndim: int, name: str = "axis") -> Optional[Tuple[int, ...]]:
    """`axis` (None, an int or a sequence of ints) as a sorted tuple of non-negative axes."""
    if axis is None:
        return None
    if axis.__class__ is int and 0 <= axis < ndim:
        return (axis,)
    if ndim == 0 and axis in (0, -1, (), (0,), (-1,)):
        return ()
    items: Sequence[Any] = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)):
            raise TypeError(f"{name} must be an int or a tuple of ints, got {axis!r}")
        if not -max(ndim, 1) <= item < max(ndim, 1):
            raise IndexError(f"{name} {item} is out of range for a tensor with {ndim} dimensions "
                             f"(allowed: {-max(ndim, 1)} to {max(ndim, 1) - 1})")
        out.append(int(item) % max(ndim, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"{name} {axis!r} repeats an axis")
    return tuple(sorted(out))


def normalize_axis(axis: Any, ndim: int, name: str = "axis") -> int:
    """A single axis as a non-negative int."""
    axes = normalize_axes(axis, ndim, name)
    if axes is None or isinstance(axis, (tuple, list)):
        raise TypeError(f"{name} must be a single int, got {axis!r}")
    return axes[0]


def expand_reduced(grad: Any, axes: Optional[Tuple[int, ...]], keepdims: bool, shape: tuple) -> Any:
    """The gradient of a reduction, put back at the reduced axes and broadcast to `shape` (a new array)."""
    if not keepdims and axes is not None and len(axes) != len(shape):
        grad = grad.reshape(tuple(1 if i in axes else n for i, n in enumerate(shape)))
    out = array_module(grad).empty(shape, grad.dtype)
    out[...] = grad
    return out
