"""Element-wise functions and their derivatives: exp, log, sqrt, abs, tanh, sigmoid, relu, elu, softplus, clamp, where."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..device import array_module
from ..grad_mode import MODE
from ..tensor import Tensor, node, wrap
from ._util import operands, shape_of, tensor_arg, unbroadcast


def _record(x: Tensor) -> bool:
    return x._rg and MODE.enabled


def exp(x: Tensor) -> Tensor:
    """e ** x."""
    out = np.exp(x._data)
    if _record(x):
        def exp_backward(g: Any) -> tuple:
            return (g * out,)
        return node(out, exp_backward, (x,))
    return wrap(out)


def log(x: Tensor) -> Tensor:
    """Natural logarithm."""
    data = x._data
    out = np.log(data)
    if _record(x):
        def log_backward(g: Any) -> tuple:
            return (g / data,)
        return node(out, log_backward, (x,))
    return wrap(out)


def sqrt(x: Tensor) -> Tensor:
    """Square root."""
    out = np.sqrt(x._data)
    if _record(x):
        def sqrt_backward(g: Any) -> tuple:
            return (g / (2 * out),)
        return node(out, sqrt_backward, (x,))
    return wrap(out)


def abs(x: Tensor) -> Tensor:
    """|x| (gradient 0 at 0, as torch)."""
    data = x._data
    out = np.abs(data)
    if _record(x):
        def abs_backward(g: Any) -> tuple:
            return (g * np.sign(data),)
        return node(out, abs_backward, (x,))
    return wrap(out)


def tanh(x: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    out = np.tanh(x._data)
    if _record(x):
        def tanh_backward(g: Any) -> tuple:
            return (g * (1 - out * out),)
        return node(out, tanh_backward, (x,))
    return wrap(out)


def sigmoid(x: Tensor) -> Tensor:
    """1 / (1 + e ** -x), computed without overflow."""
    out = np.exp(-np.logaddexp(0, -x._data))
    if _record(x):
        def sigmoid_backward(g: Any) -> tuple:
            return (g * out * (1 - out),)
        return node(out, sigmoid_backward, (x,))
    return wrap(out)


def relu(x: Tensor) -> Tensor:
    """max(x, 0) (gradient 0 at 0, as torch)."""
    data = x._data
    out = np.maximum(data, 0)
    if _record(x):
        def relu_backward(g: Any) -> tuple:
            return (g * (data > 0),)
        return node(out, relu_backward, (x,))
    return wrap(out)


def elu(x: Tensor, alpha: float = 1.0) -> Tensor:
    """x for x > 0, alpha * (e ** x - 1) otherwise."""
    data = x._data
    positive = data > 0
    out = array_module(data).where(positive, data, alpha * np.expm1(np.minimum(data, 0)))
    if _record(x):
        def elu_backward(g: Any) -> tuple:
            return (g * array_module(data).where(positive, 1, out + alpha),)
        return node(out, elu_backward, (x,))
    return wrap(out)


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + e ** (beta * x)) / beta, linear where beta * x > threshold (as torch)."""
    data = x._data
    scaled = data * beta
    linear = scaled > threshold
    xp = array_module(data)
    out = xp.where(linear, data, np.logaddexp(0, scaled) / beta)
    if _record(x):
        def softplus_backward(g: Any) -> tuple:
            return (g * xp.where(linear, 1, np.exp(-np.logaddexp(0, -scaled))),)
        return node(out, softplus_backward, (x,))
    return wrap(out)


def clamp(x: Tensor, min: Optional[float] = None, max: Optional[float] = None) -> Tensor:
    """x limited to [min, max] (either bound may be None); gradient 1 inside the closed interval."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    data = x._data
    out = array_module(data).clip(data, min, max)
    if _record(x):
        def clamp_backward(g: Any) -> tuple:
            inside = True
            if min is not None:
                inside = data >= min
            if max is not None:
                inside = inside & (data <= max)
            return (g * inside,)
        return node(out, clamp_backward, (x,))
    return wrap(out)


def where(condition: Any, input: Any, other: Any) -> Tensor:
    """Elements of `input` where `condition` holds, else of `other` (tensors or scalars, broadcast)."""
    cond = condition._data if isinstance(condition, Tensor) else np.asarray(condition)
    if cond.dtype != np.bool_:
        raise TypeError(f"where: condition must be a bool tensor, got dtype {cond.dtype}")
    a = tensor_arg(input)
    x, y = operands(a, other)
    xp = array_module(x)
    out = xp.where(cond, x, y)
    ra, rb = a._rg, isinstance(other, Tensor) and other._rg
    if MODE.enabled and (ra or rb):
        sx, sy = x.shape, shape_of(y)

        def where_backward(g: Any) -> tuple:
            zero = xp.zeros((), g.dtype)
            gx = unbroadcast(xp.where(cond, g, zero), sx) if ra else None
            gy = unbroadcast(xp.where(cond, zero, g), sy) if rb else None
            return gx, gy
        return node(out, where_backward, (a, other) if isinstance(other, Tensor) else (a,))
    return wrap(out)


def clone(x: Tensor) -> Tensor:
    """A copy with its own storage; gradients flow through unchanged."""
    out = x._data.copy()
    if _record(x):
        def clone_backward(g: Any) -> tuple:
            return (g,)
        return node(out, clone_backward, (x,))
    return wrap(out)
