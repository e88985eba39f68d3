"""Element-wise functions and their derivatives: exp, log, sqrt, abs, tanh, sigmoid, relu, elu, softplus, clamp,
where, clone and the comparisons; each a Primitive (see ops.primitive)."""
from __future__ import annotations

from functools import partial
from typing import Any, Optional

import numpy as np

from ..device import array_module
from ..tensor import Tensor
from ._util import expression_primitive, promote, shape_of, tensor_arg, unbroadcast
from .primitive import Primitive, apply, broadcast_shape, same_shape


def _abs_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    return (g * np.sign(args[0]),)  # 0 at 0, as torch


def _sigmoid_forward(x: Any, out: Any = None) -> Any:
    """1 / (1 + e ** -x) without overflow: exp(-log(1 + e ** -x))."""
    return np.exp(-np.logaddexp(0, -x), out=out)


def _relu_forward(x: Any, out: Any = None) -> Any:
    return np.maximum(x, 0, out=out)


def _elu_forward(x: Any, alpha: float) -> Any:
    return array_module(x).where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _elu_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    x, alpha = args
    return g * array_module(x).where(x > 0, 1, out + alpha), None


def _softplus_forward(x: Any, beta: float, threshold: float) -> Any:
    scaled = x * beta
    return array_module(x).where(scaled > threshold, x, np.logaddexp(0, scaled) / beta)


def _softplus_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    x, beta, threshold = args
    scaled = x * beta
    return g * array_module(x).where(scaled > threshold, 1, np.exp(-np.logaddexp(0, -scaled))), None, None


def _clamp_forward(x: Any, low: Optional[float], high: Optional[float], out: Any = None) -> Any:
    return array_module(x).clip(x, low, high, out=out)


def _clamp_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    x, low, high = args
    inside: Any = True  # gradient 1 inside the closed interval
    if low is not None:
        inside = x >= low
    if high is not None:
        inside = inside & (x <= high)
    return g * inside, None, None


def _where_forward(cond: Any, x: Any, y: Any) -> Any:
    return array_module(cond).where(cond, x, y)


def _where_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    cond, x, y = args
    xp = array_module(g)
    zero = xp.zeros((), g.dtype)
    return (None, unbroadcast(xp.where(cond, g, zero), shape_of(x)) if needs[1] else None,
            unbroadcast(xp.where(cond, zero, g), shape_of(y)) if needs[2] else None)


def _clone_forward(x: Any, out: Any = None) -> Any:
    if out is None:
        return x.copy()
    out[...] = x
    return out


_unary = partial(Primitive, shape=same_shape, out=True)
_expression_unary = partial(expression_primitive, shape=same_shape, out=True)
EXP = _expression_unary("exp", np.exp, ("{g} * {out}",))
LOG = _expression_unary("log", np.log, ("{g} / {0}",))
SQRT = _expression_unary("sqrt", np.sqrt, ("{g} / (2 * {out})",))
ABS = _unary("abs", np.abs, _abs_backward)
TANH = _expression_unary("tanh", np.tanh, ("{g} * (1 - {out} * {out})",))
SIGMOID = _expression_unary("sigmoid", _sigmoid_forward, ("{g} * {out} * (1 - {out})",))
RELU = _expression_unary("relu", _relu_forward, ("{g} * ({0} > 0)",))  # 0 at 0, as torch
CLAMP = _unary("clamp", _clamp_forward, _clamp_backward)
CLONE = _expression_unary("clone", _clone_forward, ("{g}",))
ELU = Primitive("elu", _elu_forward, _elu_backward, shape=same_shape)
SOFTPLUS = Primitive("softplus", _softplus_forward, _softplus_backward, shape=same_shape)
WHERE = Primitive("where", _where_forward, _where_backward, shape=broadcast_shape)
COMPARE = {name: Primitive(name.strip("_"), ufunc, shape=broadcast_shape, out=True, infix=f"{{0}} {symbol} {{1}}")
           for name, ufunc, symbol in (("__lt__", np.less, "<"), ("__le__", np.less_equal, "<="),
                                       ("__gt__", np.greater, ">"), ("__ge__", np.greater_equal, ">="),
                                       ("__eq__", np.equal, "=="), ("__ne__", np.not_equal, "!="))}
"""The comparison operators: bool results, no gradient."""


def exp(x: Tensor) -> Tensor:
    """e ** x."""
    return apply(EXP, x)


def log(x: Tensor) -> Tensor:
    """Natural logarithm."""
    return apply(LOG, x)


def sqrt(x: Tensor) -> Tensor:
    """Square root."""
    return apply(SQRT, x)


def abs(x: Tensor) -> Tensor:
    """|x| (gradient 0 at 0, as torch)."""
    return apply(ABS, x)


def tanh(x: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return apply(TANH, x)


def sigmoid(x: Tensor) -> Tensor:
    """1 / (1 + e ** -x), computed without overflow."""
    return apply(SIGMOID, x)


def relu(x: Tensor) -> Tensor:
    """max(x, 0) (gradient 0 at 0, as torch)."""
    return apply(RELU, x)


def elu(x: Tensor, alpha: float = 1.0) -> Tensor:
    """x for x > 0, alpha * (e ** x - 1) otherwise."""
    return apply(ELU, x, alpha)


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + e ** (beta * x)) / beta, linear where beta * x > threshold (as torch)."""
    return apply(SOFTPLUS, x, beta, threshold)


def clamp(x: Tensor, min: Optional[float] = None, max: Optional[float] = None) -> Tensor:
    """x limited to [min, max] (either bound may be None); gradient 1 inside the closed interval."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    return apply(CLAMP, x, min, max)


def where(condition: Any, input: Any, other: Any) -> Tensor:
    """Elements of `input` where `condition` holds, else of `other` (tensors or scalars, broadcast)."""
    cond = tensor_arg(condition)
    if cond._data.dtype != np.bool_:
        raise TypeError(f"where: condition must be a bool tensor, got dtype {cond._data.dtype}")
    return apply(WHERE, cond, *promote(tensor_arg(input), other))


def clone(x: Tensor) -> Tensor:
    """A copy with its own storage; gradients flow through unchanged."""
    return apply(CLONE, x)


def compare(name: str) -> Any:
    """The Tensor method for comparison operator `name` (e.g. '__lt__')."""
    prim = COMPARE[name]

    def comparison(self: Tensor, other: Any) -> Tensor:
        return apply(prim, *promote(self, other))
    comparison.__name__ = name
    return comparison
