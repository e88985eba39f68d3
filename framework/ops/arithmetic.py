"""Arithmetic with broadcasting: + - * / **, negation, matmul and the fused affine map `linear`."""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from ..dtypes import DEFAULT_FLOAT
from ..grad_mode import MODE
from ..tensor import Tensor, node, wrap
from ._util import operands, shape_of, tensor_arg, unbroadcast


def _needs(a: Tensor, b: Any) -> bool:
    return (a._rg or (isinstance(b, Tensor) and b._rg)) and MODE.enabled


def _inputs(a: Tensor, b: Any) -> tuple:
    return (a, b) if isinstance(b, Tensor) else (a,)


def add(a: Any, b: Any) -> Tensor:
    """a + b."""
    a = tensor_arg(a)
    x, y = operands(a, b)
    out = x + y
    if _needs(a, b):
        sx, sy = x.shape, shape_of(y)

        ra, rb = a._rg, isinstance(b, Tensor) and b._rg

        def add_backward(g: Any) -> tuple:
            return (unbroadcast(g, sx) if ra else None), (unbroadcast(g, sy) if rb else None)
        return node(out, add_backward, _inputs(a, b))
    return wrap(out)


def sub(a: Any, b: Any) -> Tensor:
    """a - b."""
    a = tensor_arg(a)
    x, y = operands(a, b)
    out = x - y
    if _needs(a, b):
        sx, sy = x.shape, shape_of(y)

        ra, rb = a._rg, isinstance(b, Tensor) and b._rg

        def sub_backward(g: Any) -> tuple:
            return (unbroadcast(g, sx) if ra else None), (unbroadcast(-g, sy) if rb else None)
        return node(out, sub_backward, _inputs(a, b))
    return wrap(out)


def rsub(a: Tensor, b: Any) -> Tensor:
    """b - a (the reflected operator)."""
    x, y = operands(a, b)
    out = y - x
    if _needs(a, b):
        sx = x.shape

        def rsub_backward(g: Any) -> tuple:
            return (unbroadcast(-g, sx),)
        return node(out, rsub_backward, (a,))
    return wrap(out)


def mul(a: Any, b: Any) -> Tensor:
    """a * b."""
    a = tensor_arg(a)
    x, y = operands(a, b)
    out = x * y
    if _needs(a, b):
        sx, sy = x.shape, shape_of(y)
        ra, rb = a._rg, isinstance(b, Tensor) and b._rg

        def mul_backward(g: Any) -> tuple:
            return (unbroadcast(g * y, sx) if ra else None), (unbroadcast(g * x, sy) if rb else None)
        return node(out, mul_backward, _inputs(a, b))
    return wrap(out)


def div(a: Any, b: Any) -> Tensor:
    """a / b (true division: integer operands give float32, as in torch)."""
    a = tensor_arg(a)
    x, y = operands(a, b)
    if x.dtype.kind != "f":  # then y is integral too (operands promotes mixed kinds)
        x = x.astype(DEFAULT_FLOAT)
        if hasattr(y, "dtype"):
            y = y.astype(DEFAULT_FLOAT)
    out = x / y
    if _needs(a, b):
        sx, sy = x.shape, shape_of(y)
        ra, rb = a._rg, isinstance(b, Tensor) and b._rg

        def div_backward(g: Any) -> tuple:
            gx = unbroadcast(g / y, sx) if ra else None
            gy = unbroadcast(-g * out / y, sy) if rb else None
            return gx, gy
        return node(out, div_backward, _inputs(a, b))
    return wrap(out)


def rdiv(a: Tensor, b: Any) -> Tensor:
    """b / a (the reflected operator)."""
    x, y = operands(a, b)
    if x.dtype.kind != "f":
        x = x.astype(DEFAULT_FLOAT)
        if hasattr(y, "dtype"):
            y = y.astype(DEFAULT_FLOAT)
    out = y / x
    if _needs(a, b):
        sx = x.shape

        def rdiv_backward(g: Any) -> tuple:
            return (unbroadcast(-g * out / x, sx),)
        return node(out, rdiv_backward, (a,))
    return wrap(out)


def neg(a: Tensor) -> Tensor:
    """-a."""
    out = -a._data
    if a._rg and MODE.enabled:
        def neg_backward(g: Any) -> tuple:
            return (-g,)
        return node(out, neg_backward, (a,))
    return wrap(out)


def pow(a: Any, exponent: Any) -> Tensor:
    """a ** exponent (a scalar or a tensor exponent)."""
    a = tensor_arg(a)
    if exponent.__class__ in (int, float) and exponent == 2:
        return _square(a)
    x, y = operands(a, exponent)
    out = x ** y
    if not _needs(a, exponent):
        return wrap(out)
    ra, rb = a._rg, isinstance(exponent, Tensor) and exponent._rg
    sx, sy = x.shape, shape_of(y)

    def pow_backward(g: Any) -> tuple:
        gx = gy = None
        if ra:
            gx = unbroadcast(g * (y * x ** (y - 1)), sx)
        if rb:
            with np.errstate(divide="ignore", invalid="ignore"):
                logx = np.log(x)
            gy = unbroadcast(g * np.where((x == 0) & (y >= 0), 0, out * logx), sy)
        return gx, gy
    return node(out, pow_backward, _inputs(a, exponent))


def _square(a: Tensor) -> Tensor:
    x = a._data
    out = x * x
    if a._rg and MODE.enabled:
        def square_backward(g: Any) -> tuple:
            return (g * (2 * x),)
        return node(out, square_backward, (a,))
    return wrap(out)


def rpow(a: Tensor, base: Any) -> Tensor:
    """base ** a (the reflected operator)."""
    x, y = operands(a, base)
    out = y ** x
    if _needs(a, base):
        sx = x.shape

        log_base = math.log(y) if isinstance(y, (int, float)) else np.log(y)

        def rpow_backward(g: Any) -> tuple:
            return (unbroadcast(g * out * log_base, sx),)
        return node(out, rpow_backward, (a,))
    return wrap(out)


def _as_matrix_grad(g: Any, x_ndim: int, y_ndim: int) -> Any:
    if x_ndim == 1:
        g = g[..., None, :]
    if y_ndim == 1:
        g = g[..., None]
    return g


def matmul(a: Any, b: Any) -> Tensor:
    """Matrix product with NumPy's matmul rules (1-D operands, batch broadcasting)."""
    a, b = tensor_arg(a), tensor_arg(b)
    x, y = operands(a, b)
    try:
        out = x @ y
    except ValueError:
        raise ValueError(f"matmul: shapes {tuple(x.shape)} and {tuple(y.shape)} cannot be multiplied (the last "
                         f"axis of the first must match the {'only' if y.ndim == 1 else 'second-to-last'} axis "
                         f"of the second)") from None
    if not (MODE.enabled and (a._rg or b._rg)):
        return wrap(out)
    ra, rb = a._rg, b._rg

    def matmul_backward(g: Any) -> tuple:
        if x.ndim == 2 and y.ndim == 2:
            return (g @ y.T if ra else None), (x.T @ g if rb else None)
        if x.ndim == 1 and y.ndim == 1:
            return (g * y if ra else None), (g * x if rb else None)
        x2 = x[None, :] if x.ndim == 1 else x
        y2 = y[:, None] if y.ndim == 1 else y
        g2 = _as_matrix_grad(g, x.ndim, y.ndim)
        gx = unbroadcast(g2 @ y2.swapaxes(-1, -2), x2.shape).reshape(x.shape) if ra else None
        gy = unbroadcast(x2.swapaxes(-1, -2) @ g2, y2.shape).reshape(y.shape) if rb else None
        return gx, gy
    return node(out, matmul_backward, (a, b))


def _sum_rows(g: Any) -> Any:
    return np.add.reduce(g, axis=0) if isinstance(g, np.ndarray) else g.sum(axis=0)


def linear(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """input @ weight.T + bias in one recorded op; `weight` is (out_features, in_features) as in torch."""
    x, w = input._data, weight._data
    if x.shape[-1:] != w.shape[1:]:
        raise ValueError(f"linear: input has {x.shape[-1] if x.ndim else 0} features (shape {tuple(x.shape)}) but "
                         f"the weight expects {w.shape[1]} (weight shape {tuple(w.shape)})")
    out = x @ w.T
    if bias is not None:
        out += bias._data
    if not (MODE.enabled and (input._rg or weight._rg or (bias is not None and bias._rg))):
        return wrap(out)
    rx, rw = input._rg, weight._rg

    def linear_backward(g: Any) -> tuple:
        gx = g @ w if rx else None
        gw = gb = None
        if rw:
            if x.ndim == 2:
                gw = g.T @ x
            elif x.ndim == 1:
                gw = g[:, None] * x
            else:
                gw = g.reshape(-1, g.shape[-1]).T @ x.reshape(-1, x.shape[-1])
        if bias is not None and bias._rg:
            gb = g if g.ndim == 1 else _sum_rows(g if g.ndim == 2 else g.reshape(-1, g.shape[-1]))
        return gx, gw, gb
    return node(out, linear_backward, (input, weight) if bias is None else (input, weight, bias))
