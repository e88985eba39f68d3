"""Functional forms of the layers and the losses (torch.nn.functional's names; axis arguments are `axis`).

mse_loss and nll_loss are Primitives (see ops.primitive); the others compose ops.
"""
from __future__ import annotations

from typing import Any


from ..device import array_module
from ..ops import pointwise
from ..ops.arithmetic import linear
from ..ops.conv import conv2d, max_pool2d
from ..ops.pointwise import elu, relu, sigmoid, softplus, tanh
from ..ops.primitive import Primitive, apply
from ..ops.reduction import log_softmax, softmax
from ..ops._util import promote, tensor_arg
from ..tensor import Tensor

__all__ = ["linear", "conv2d", "max_pool2d", "relu", "tanh", "sigmoid", "elu", "softplus", "softmax", "log_softmax",
           "mse_loss", "smooth_l1_loss", "nll_loss", "cross_entropy"]

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(reduction: str, loss: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{loss}: reduction must be one of {', '.join(_REDUCTIONS)}, got {reduction!r}")


def _reduce(values: Any, reduction: str) -> Any:
    if reduction == "mean":
        return values.mean()
    if reduction == "sum":
        return values.sum()
    return values


def _mse_loss_forward(x: Any, y: Any, reduction: str) -> Any:
    diff = x - y
    return _reduce(diff * diff, reduction)


def _mse_loss_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    x, y, reduction = args
    diff = x - y
    grad = diff * (g * (2.0 / diff.size if reduction == "mean" else 2.0))
    return (grad if needs[0] else None), (-grad if needs[1] else None), None


MSE_LOSS = Primitive("mse_loss", _mse_loss_forward, _mse_loss_backward,
                     shape=lambda x, y, reduction: x if reduction == "none" else ())


def mse_loss(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """(input - target) ** 2, averaged (default), summed or per element."""
    _check_reduction(reduction, "mse_loss")
    input, target = promote(tensor_arg(input), target)
    if getattr(target, "shape", ()) != input.shape:
        raise ValueError(f"mse_loss: target shape {getattr(target, 'shape', ())} differs from input shape "
                         f"{input.shape}")
    return apply(MSE_LOSS, input, target, reduction)


def smooth_l1_loss(input: Tensor, target: Any, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """Huber-style loss: 0.5 * d**2 / beta where |d| < beta, |d| - 0.5 * beta elsewhere (torch's formula)."""
    _check_reduction(reduction, "smooth_l1_loss")
    if beta <= 0:
        raise ValueError(f"smooth_l1_loss: beta must be positive, got {beta!r}")
    diff = tensor_arg(input) - target
    absolute = pointwise.abs(diff)
    small = absolute._data < beta
    values = pointwise.where(small, diff * diff * (0.5 / beta), absolute - 0.5 * beta)
    return _reduce(values, reduction)


def _nll_loss_forward(logp: Any, target: Any, reduction: str) -> Any:
    xp = array_module(logp)
    target = xp.asarray(target)
    if target.size and (int(target.min()) < 0 or int(target.max()) >= logp.shape[-1]):
        raise IndexError(f"nll_loss: target values must be class indices in [0, {logp.shape[-1]}), got "
                         f"[{int(target.min())}, {int(target.max())}]")
    if logp.ndim == 1:
        picked = -logp[target.reshape(1)]
        return picked[0] if reduction == "none" else _reduce(picked, reduction)
    return _reduce(-logp[xp.arange(target.shape[0]), target], reduction)


def _nll_loss_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    logp, target, reduction = args
    xp = array_module(g)
    table = logp.reshape(-1, logp.shape[-1])
    target = xp.asarray(target).reshape(-1)
    full = xp.zeros(table.shape, table.dtype)
    full[xp.arange(target.shape[0]), target] = -(g / target.shape[0] if reduction == "mean" else g)
    return full.reshape(logp.shape), None, None


NLL_LOSS = Primitive("nll_loss", _nll_loss_forward, _nll_loss_backward,
                     shape=lambda logp, target, reduction: target if reduction == "none" and len(logp) == 2 else ())


def nll_loss(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class indices `target` (N,) under log-probabilities `input` (N, C) or (C,)."""
    _check_reduction(reduction, "nll_loss")
    target = tensor_arg(target)
    t = target._data
    if t.dtype.kind not in "iu":
        raise TypeError(f"nll_loss: target must hold integer class indices, got dtype {t.dtype}")
    shape = input._data.shape
    if not ((len(shape) == 1 and t.size == 1) or (len(shape) == 2 and t.shape == shape[:1])):
        raise ValueError(f"nll_loss: expected input (N, C) and target (N,), got {tuple(shape)} and "
                         f"{tuple(t.shape)}")
    return apply(NLL_LOSS, input, target, reduction)


def cross_entropy(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """nll_loss(log_softmax(input, axis=-1), target): class indices `target` (N,), logits `input` (N, C)."""
    return nll_loss(log_softmax(input, -1), target, reduction)
