"""The differentiable operations on tensors, and their installation as Tensor operators and methods."""
from __future__ import annotations

from ..tensor import Tensor
from . import arithmetic, pointwise, reduction, shape
from ._util import cast
from .arithmetic import add, div, linear, matmul, mul, neg, pow, sub
from .conv import conv2d, max_pool2d
from .pointwise import abs, clamp, clone, elu, exp, log, relu, sigmoid, softplus, sqrt, tanh, where
from .reduction import argmax, argmin, log_softmax, logsumexp, max, mean, min, softmax, sum
from .shape import cat, chunk, flatten, gather, permute, reshape, squeeze, stack, transpose, unsqueeze

__all__ = ["add", "sub", "mul", "div", "pow", "neg", "matmul", "linear", "conv2d", "max_pool2d", "abs", "clamp",
           "clone", "elu", "exp", "log", "relu", "sigmoid", "softplus", "sqrt", "tanh", "where", "argmax", "argmin",
           "log_softmax", "logsumexp", "max", "mean", "min", "softmax", "sum", "cat", "chunk", "flatten", "gather",
           "permute", "reshape", "squeeze", "stack", "transpose", "unsqueeze"]


def _install() -> None:
    """Bind operators and methods on Tensor (they live here to keep tensor.py about state, not math)."""
    methods = {
        "__add__": arithmetic.add, "__radd__": arithmetic.add, "__sub__": arithmetic.sub,
        "__rsub__": arithmetic.rsub, "__mul__": arithmetic.mul, "__rmul__": arithmetic.mul,
        "__truediv__": arithmetic.div, "__rtruediv__": arithmetic.rdiv, "__pow__": arithmetic.pow,
        "__rpow__": arithmetic.rpow, "__neg__": arithmetic.neg, "__matmul__": arithmetic.matmul,
        "__rmatmul__": lambda self, other: arithmetic.matmul(other, self), "__abs__": pointwise.abs,
        "__getitem__": shape.getitem,
        "add": arithmetic.add, "sub": arithmetic.sub, "mul": arithmetic.mul, "div": arithmetic.div,
        "pow": arithmetic.pow, "neg": arithmetic.neg, "matmul": arithmetic.matmul,
        "exp": pointwise.exp, "log": pointwise.log, "sqrt": pointwise.sqrt, "abs": pointwise.abs,
        "tanh": pointwise.tanh, "sigmoid": pointwise.sigmoid, "relu": pointwise.relu, "elu": pointwise.elu,
        "softplus": pointwise.softplus, "clamp": pointwise.clamp, "clone": pointwise.clone,
        "sum": reduction.sum, "mean": reduction.mean, "max": reduction.max, "min": reduction.min,
        "argmax": reduction.argmax, "argmin": reduction.argmin, "logsumexp": reduction.logsumexp,
        "softmax": reduction.softmax, "log_softmax": reduction.log_softmax,
        "reshape": shape.reshape, "view": shape.view, "flatten": shape.flatten, "permute": shape.permute,
        "transpose": shape.transpose, "squeeze": shape.squeeze, "unsqueeze": shape.unsqueeze,
        "gather": shape.gather, "chunk": shape.chunk, "detach": shape.detach, "_cast": cast,
    }
    for name in pointwise.COMPARE:
        methods[name] = pointwise.compare(name)
    for name, fn in methods.items():
        setattr(Tensor, name, fn)
    Tensor.T = property(shape.t, doc="All axes reversed (a view): the matrix transpose for 2-D tensors.")


_install()
