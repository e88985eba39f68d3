"""RMSprop (Hinton's lecture 6e) with torch's options, plus the eps-inside-sqrt form of the A3C paper, and
TensorFlow's (RMSpropTFLike) whose running average starts at 1."""
from __future__ import annotations

from typing import Any, Dict, Iterable, Tuple

from ..device import array_module
from .optimizer import Optimizer, check_range


class RMSprop(Optimizer):
    """s = alpha s + (1-alpha) g^2; p -= lr * g / (sqrt(s) + eps), as torch.optim.RMSprop.

    `centered` uses s - mean(g)^2 as the variance estimate; `momentum` keeps a
    buffer b = momentum b + g / denom and steps by lr * b. With
    `eps_inside_sqrt=True` the denominator is sqrt(s + eps), the form Mnih et
    al. (2016) use for A3C's shared RMSprop. Lock-free workers sharing s stay
    within RMSprop's step size: s is floored at the worker's own (1-alpha) g^2,
    which one process's s always holds (see Optimizer). The centered estimate,
    which a lost write to s can turn negative (a NaN step), is floored at
    (1-alpha)/alpha (g - mean(g))^2: in one process it is alpha times the last
    estimate plus that, never less (`centered_floor`).
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False, maximize: bool = False,
                 eps_inside_sqrt: bool = False) -> None:
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, maximize=maximize, eps_inside_sqrt=eps_inside_sqrt))

    def _validate(self, group: Dict[str, Any]) -> None:
        super()._validate(group)
        check_range("epsilon", group["eps"], 0.0)
        check_range("momentum", group["momentum"], 0.0)
        check_range("weight_decay", group["weight_decay"], 0.0)
        check_range("alpha", group["alpha"], 0.0)

    def state_keys(self, group: Dict[str, Any]) -> Tuple[str, ...]:
        keys: Tuple[str, ...] = ("square_avg",)
        if group["momentum"] > 0:
            keys += ("momentum_buffer",)
        if group["centered"]:
            keys += ("grad_avg",)
        return keys

    def _update(self, group: Dict[str, Any], param: Any, grad: Any, state: Dict[str, Any], step: float,
                scratch: Any) -> None:
        xp = array_module(param)
        alpha, eps, lr = group["alpha"], group["eps"], group["lr"]
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"]:
            grad = grad + group["weight_decay"] * param
        square_avg = state["square_avg"]
        square_avg *= alpha
        xp.multiply(grad, grad, out=scratch)
        scratch *= 1 - alpha
        square_avg += scratch
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg *= alpha
            xp.multiply(grad, 1 - alpha, out=scratch)
            grad_avg += scratch
            xp.multiply(grad_avg, grad_avg, out=scratch)
            xp.subtract(square_avg, scratch, out=scratch)
            xp.maximum(scratch, centered_floor(grad, grad_avg, alpha), out=scratch)
            source = scratch
        else:  # v >= (1 - alpha) g^2 in one process; a lock-free worker's v can have lost its own gradient
            xp.maximum(square_avg, scratch, out=scratch)
            source = scratch
        if group["eps_inside_sqrt"]:
            xp.add(source, eps, out=scratch)
            xp.sqrt(scratch, out=scratch)
        else:
            xp.sqrt(source, out=scratch)
            scratch += eps
        xp.divide(grad, scratch, out=scratch)
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]
            buf *= group["momentum"]
            buf += scratch
            xp.multiply(buf, lr, out=scratch)
        else:
            scratch *= lr
        param -= scratch


def centered_floor(grad: Any, grad_avg: Any, alpha: float) -> Any:
    """The least the centered estimate s - mean(g)^2 can be in one process right after mean(g) took grad:
    (1-alpha)/alpha (grad - mean(g))^2, for s - mean(g)^2 = alpha (its last value) + alpha (1-alpha) (grad - the
    last mean(g))^2 and grad - mean(g) = alpha (grad - the last mean(g)). 0 when alpha is 0 (the estimate is 0)."""
    gap = grad - grad_avg
    gap *= gap
    gap *= (1 - alpha) / alpha if alpha > 0 else 0.0
    return gap


class RMSpropTFLike(RMSprop):
    """RMSprop as TensorFlow computes it (Stable-Baselines3's RMSpropTFLike): eps inside the square root and the
    running average of g^2 starting at 1 instead of 0.

    From 0, the first steps are lr / sqrt(1 - alpha^t) in size whatever the gradient (10 x lr at the first with
    alpha 0.99), which on Atari can push every unit of a convolution below zero for good; from 1 they start
    at lr * g. With `momentum` the buffer is torch's (b = momentum b + g / denom; step lr * b).
    """

    initial_state = {"square_avg": 1.0}

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 maximize: bool = False) -> None:
        super().__init__(params, lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                         centered=centered, maximize=maximize, eps_inside_sqrt=True)
