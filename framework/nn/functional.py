"""Functional forms of the layers and the losses (torch.nn.functional's names; axis arguments are `axis`)."""
from __future__ import annotations

from typing import Any


from ..device import array_module
from ..grad_mode import MODE
from ..ops import pointwise
from ..ops.arithmetic import linear
from ..ops.conv import conv2d, max_pool2d
from ..ops.pointwise import elu, relu, sigmoid, softplus, tanh
from ..ops.reduction import log_softmax, softmax
from ..ops._util import operands, tensor_arg
from ..tensor import Tensor, node, wrap

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


def mse_loss(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """(input - target) ** 2, averaged (default), summed or per element."""
    _check_reduction(reduction, "mse_loss")
    input = tensor_arg(input)
    x, y = operands(input, target)
    if getattr(y, "shape", ()) != x.shape:
        raise ValueError(f"mse_loss: target shape {getattr(y, 'shape', ())} differs from input shape {x.shape}")
    diff = x - y
    out = _reduce(diff * diff, reduction)
    rx, ry = input._rg, isinstance(target, Tensor) and target._rg
    if not (MODE.enabled and (rx or ry)):
        return wrap(out)
    scale = 2.0 / diff.size if reduction == "mean" else 2.0

    def mse_loss_backward(g: Any) -> tuple:
        grad = diff * (g * scale)
        return (grad if rx else None), (-grad if ry else None)
    return node(out, mse_loss_backward, (input, target) if isinstance(target, Tensor) else (input,))


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


def nll_loss(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class indices `target` (N,) under log-probabilities `input` (N, C) or (C,)."""
    _check_reduction(reduction, "nll_loss")
    logp = input._data
    t = target._data if isinstance(target, Tensor) else array_module(logp).asarray(target)
    if t.dtype.kind not in "iu":
        raise TypeError(f"nll_loss: target must hold integer class indices, got dtype {t.dtype}")
    if logp.ndim == 1:
        logp, t = logp[None], t.reshape(1)
    if logp.ndim != 2 or t.shape != (logp.shape[0],):
        raise ValueError(f"nll_loss: expected input (N, C) and target (N,), got {tuple(input.shape)} and "
                         f"{tuple(t.shape)}")
    xp = array_module(logp)
    if t.size and (int(t.min()) < 0 or int(t.max()) >= logp.shape[1]):
        raise IndexError(f"nll_loss: target values must be class indices in [0, {logp.shape[1]}), got "
                         f"[{int(t.min())}, {int(t.max())}]")
    rows = xp.arange(t.shape[0])
    picked = -logp[rows, t]
    out = _reduce(picked, reduction) if reduction != "none" or input.ndim != 1 else picked[0]
    if not (MODE.enabled and input._rg):
        return wrap(out)
    n = t.shape[0]
    shape = input.shape

    def nll_loss_backward(g: Any) -> tuple:
        full = xp.zeros((n, logp.shape[1]), logp.dtype)
        full[rows, t] = -(g / n if reduction == "mean" else g)
        return (full.reshape(shape),)
    return node(out, nll_loss_backward, (input,))


def cross_entropy(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """nll_loss(log_softmax(input, axis=-1), target): class indices `target` (N,), logits `input` (N, C)."""
    return nll_loss(log_softmax(input, -1), target, reduction)
