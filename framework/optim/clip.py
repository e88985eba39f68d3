"""Gradient clipping by total norm (torch's clip_grad_norm_), with a fast path over a packed arena's flat grad."""
from __future__ import annotations

import math
from typing import Any, Iterable, Union

import numpy as np

from ..device import array_module, device_of, on_device
from ..tensor import Tensor, wrap


def _arena_of(params: list) -> Any:
    """The arena when `params` are exactly all of one live arena's parameters, in order."""
    arena = getattr(params[0], "_arena", None) if params else None
    if arena is None or not arena.alive or len(arena.params) != len(params):
        return None
    return arena if all(a is b for a, b in zip(arena.params, params)) else None


def grad_norm(flat: Any) -> float:
    """The 2-norm of a flat gradient buffer (NumPy or CuPy, e.g. `arena.grad`) as a float: one dot product."""
    with on_device(device_of(flat)):
        return math.sqrt(float(array_module(flat).dot(flat, flat)))


def clip_grad_norm_(parameters: Union[Tensor, Iterable[Tensor]], max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False) -> Tensor:
    """Scale gradients in place so their total norm is at most max_norm; returns the norm before scaling.

    Parameters without a gradient are ignored (for a packed module, arena.grad is
    the gradient of every parameter, zeros for those without one).
    """
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    norm_type = float(norm_type)
    if not norm_type > 0:
        raise ValueError(f"clip_grad_norm_: norm_type must be positive (or inf), got {norm_type}")
    arena = _arena_of(params)
    grads = [arena.grad] if arena is not None else [p._grad._data for p in params if p._grad is not None]
    if not grads:
        return wrap(np.zeros((), np.float32))
    with on_device(device_of(grads[0])):  # the gradients' device, whichever is current
        return _clip(grads, max_norm, norm_type, error_if_nonfinite)


def _clip(grads: list, max_norm: float, norm_type: float, error_if_nonfinite: bool) -> Tensor:
    """clip_grad_norm_ over a non-empty list of gradient arrays (with their device current)."""
    xp = array_module(grads[0])
    if norm_type == math.inf:
        total = max(float(xp.abs(g).max()) if g.size else 0.0 for g in grads)
    elif norm_type == 2.0:
        total = math.sqrt(sum(float(xp.dot(g.ravel(), g.ravel())) for g in grads))
    else:
        total = sum(float((xp.abs(g) ** norm_type).sum()) for g in grads) ** (1.0 / norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                           f"so it cannot be clipped. To disable this error and scale the gradients by the "
                           f"non-finite norm anyway, set `error_if_nonfinite=False`")
    coef = max_norm / (total + 1e-6)
    if coef < 1.0:
        for g in grads:
            g *= coef
    return wrap(xp.asarray(total, dtype=grads[0].dtype))
