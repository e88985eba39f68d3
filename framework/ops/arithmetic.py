"""Arithmetic with broadcasting: + - * / **, negation, matmul and the fused affine map `linear`.

Each op is a Primitive (see ops.primitive): the array forward and backward side
by side, and the Tensor-level function that checks and promotes its operands.
A Python number operand is a constant argument of the primitive.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..device import array_module
from ..dtypes import DEFAULT_FLOAT
from ..tensor import Tensor
from ._util import cast, expression_primitive, promote, shape_of, tensor_arg, unbroadcast
from .primitive import Primitive, apply, broadcast_shape


def _is_two(y: Any) -> bool:
    return y.__class__ in (int, float) and y == 2


def _pow_forward(x: Any, y: Any, out: Any = None) -> Any:
    if _is_two(y):
        return np.multiply(x, x, out=out)
    return np.power(x, y, out=out)


def _pow_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    x, y = args
    gx = gy = None
    if needs[0]:
        gx = g * (2 * x) if _is_two(y) else unbroadcast(g * (y * x ** (y - 1)), shape_of(x))
    if needs[1]:
        with np.errstate(divide="ignore", invalid="ignore"):
            logx = np.log(x)
        gy = unbroadcast(g * np.where((x == 0) & (y >= 0), 0, out * logx), shape_of(y))
    return gx, gy


ADD, SUB, MUL, DIV, NEG = (
    expression_primitive(name, forward, grad_infix, shape=broadcast_shape, out=True, infix=infix)
    for name, forward, infix, grad_infix in (
        ("add", np.add, "{0} + {1}", ("{g}", "{g}")),
        ("sub", np.subtract, "{0} - {1}", ("{g}", "-{g}")),
        ("mul", np.multiply, "{0} * {1}", ("{g} * {1}", "{g} * {0}")),
        ("div", np.true_divide, "{0} / {1}", ("{g} / {1}", "-{g} * {out} / {1}")),
        ("neg", np.negative, "-{0}", ("-{g}",))))
POW = Primitive("pow", _pow_forward, _pow_backward, shape=broadcast_shape, out=True, infix="{0} ** {1}")


def add(a: Any, b: Any) -> Tensor:
    """a + b."""
    return apply(ADD, *promote(tensor_arg(a), b))


def sub(a: Any, b: Any) -> Tensor:
    """a - b."""
    return apply(SUB, *promote(tensor_arg(a), b))


def rsub(a: Tensor, b: Any) -> Tensor:
    """b - a (the reflected operator)."""
    x, y = promote(a, b)
    return apply(SUB, y, x)


def mul(a: Any, b: Any) -> Tensor:
    """a * b."""
    return apply(MUL, *promote(tensor_arg(a), b))


def _true_division(x: Tensor, y: Any) -> tuple:
    """Integer operands become float32 (torch's true division); `promote` already made the kinds agree."""
    if x._data.dtype.kind != "f":
        x = cast(x, DEFAULT_FLOAT)
        if isinstance(y, Tensor):
            y = cast(y, DEFAULT_FLOAT)
    return x, y


def div(a: Any, b: Any) -> Tensor:
    """a / b (true division: integer operands give float32, as in torch)."""
    return apply(DIV, *_true_division(*promote(tensor_arg(a), b)))


def rdiv(a: Tensor, b: Any) -> Tensor:
    """b / a (the reflected operator)."""
    x, y = _true_division(*promote(a, b))
    return apply(DIV, y, x)


def neg(a: Tensor) -> Tensor:
    """-a."""
    return apply(NEG, a)


def pow(a: Any, exponent: Any) -> Tensor:
    """a ** exponent (a scalar or a tensor exponent)."""
    return apply(POW, *promote(tensor_arg(a), exponent))


def rpow(a: Tensor, base: Any) -> Tensor:
    """base ** a (the reflected operator)."""
    x, y = promote(a, base)
    return apply(POW, y, x)


# ---- matrix products --------------------------------------------------------------------------------------

def _matmul(x: Any, y: Any, out: Any = None) -> Any:
    """x @ y; `dot` for 1-D and 2-D operands (the same product, with less overhead in NumPy, and without
    matmul's slow path for an inner size of 1: a (32, 1) @ (1, 128) takes 9x longer)."""
    if x.ndim <= 2 and y.ndim <= 2:
        return (np if isinstance(x, np.ndarray) else array_module(x)).dot(x, y, out)
    return x @ y if out is None else np.matmul(x, y, out=out)


def _matmul_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    x, y = args
    rx, ry = needs
    if x.ndim == 2 and y.ndim == 2:
        return (_matmul(g, y.T) if rx else None), (_matmul(x.T, g) if ry else None)
    if x.ndim == 1 and y.ndim == 1:
        return (g * y if rx else None), (g * x if ry else None)
    x2 = x[None, :] if x.ndim == 1 else x
    y2 = y[:, None] if y.ndim == 1 else y
    g2 = g[..., None, :] if x.ndim == 1 else g
    g2 = g2[..., None] if y.ndim == 1 else g2
    gx = unbroadcast(g2 @ y2.swapaxes(-1, -2), x2.shape).reshape(x.shape) if rx else None
    gy = unbroadcast(x2.swapaxes(-1, -2) @ g2, y2.shape).reshape(y.shape) if ry else None
    return gx, gy


def _matmul_shape(x: tuple, y: tuple) -> tuple:
    if len(x) == 1 and len(y) == 1:
        return ()
    if len(x) == 1:
        return y[:-2] + y[-1:]
    if len(y) == 1:
        return x[:-1]
    return broadcast_shape(x[:-2], y[:-2]) + (x[-2], y[-1])


MATMUL = Primitive("matmul", _matmul, _matmul_backward, shape=_matmul_shape, out=True)


def matmul(a: Any, b: Any) -> Tensor:
    """Matrix product with NumPy's matmul rules (1-D operands, batch broadcasting)."""
    a, b = promote(tensor_arg(a), tensor_arg(b))
    try:
        return apply(MATMUL, a, b)
    except ValueError:
        raise ValueError(f"matmul: shapes {tuple(a._data.shape)} and {tuple(b._data.shape)} cannot be multiplied "
                         f"(the last axis of the first must match the "
                         f"{'only' if b._data.ndim == 1 else 'second-to-last'} axis of the second)") from None


def _linear_forward(x: Any, w: Any, b: Any, out: Any = None) -> Any:
    y = _matmul(x, w.T, out)
    if b is not None:
        y += b
    return y


def _sum_rows(g: Any) -> Any:
    return np.add.reduce(g, axis=0) if isinstance(g, np.ndarray) else g.sum(axis=0)


def _linear_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    x, w, _ = args
    gx = _matmul(g, w) if needs[0] else None
    gw = gb = None
    if needs[1]:
        if x.ndim == 2:
            gw = _matmul(g.T, x)
        elif x.ndim == 1:
            gw = g[:, None] * x
        else:
            gw = g.reshape(-1, g.shape[-1]).T @ x.reshape(-1, x.shape[-1])
    if needs[2]:
        gb = g if g.ndim == 1 else _sum_rows(g if g.ndim == 2 else g.reshape(-1, g.shape[-1]))
    return gx, gw, gb


def _linear_shape(x: tuple, w: tuple, b: Any) -> tuple:
    return x[:-1] + w[:1]


LINEAR = Primitive("linear", _linear_forward, _linear_backward, shape=_linear_shape, out=True)


def linear(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """input @ weight.T + bias in one op; `weight` is (out_features, in_features) as in torch."""
    x, w = input._data, weight._data
    if x.shape[-1:] != w.shape[1:]:
        raise ValueError(f"linear: input has {x.shape[-1] if x.ndim else 0} features (shape {tuple(x.shape)}) but "
                         f"the weight expects {w.shape[1]} (weight shape {tuple(w.shape)})")
    return apply(LINEAR, input, weight, bias)
