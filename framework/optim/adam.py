"""Adam (Kingma & Ba, 2015) with torch's options: weight_decay (L2, added to the gradient), amsgrad, maximize."""
from __future__ import annotations

import math
from typing import Any, Dict, Iterable, Tuple

from ..device import array_module
from .optimizer import Optimizer, check_range


def ratio_bound(beta1: float, beta2: float) -> float | None:
    """The largest |m| / sqrt(v) Adam's running averages reach from zero state, whatever the gradients, with a
    margin for rounding: (1 - b1) / sqrt((1 - b2) (1 - b1^2 / b2)) by Cauchy-Schwarz. None when b1^2 >= b2,
    where there is no bound."""
    if beta1 ** 2 >= beta2:
        return None
    return 1.001 * (1 - beta1) / math.sqrt((1 - beta2) * (1 - beta1 ** 2 / beta2))


class Adam(Optimizer):
    """m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps).

    With amsgrad, v is replaced by its running maximum in the denominator. Lock-free workers sharing the state
    stay within Adam's step size: sqrt(v) is floored at |m| / ratio_bound(beta1, beta2), which one process's
    state never falls below (see Optimizer).
    """

    temporaries = 2

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, maximize: bool = False) -> None:
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize))

    def _validate(self, group: Dict[str, Any]) -> None:
        super()._validate(group)
        check_range("epsilon", group["eps"], 0.0)
        betas = group["betas"]
        if len(betas) != 2:
            raise ValueError(f"Invalid betas: {betas!r} (expected two numbers in [0, 1))")
        check_range("beta parameter at index 0", betas[0], 0.0, 1.0)
        check_range("beta parameter at index 1", betas[1], 0.0, 1.0)
        check_range("weight_decay", group["weight_decay"], 0.0)

    def state_keys(self, group: Dict[str, Any]) -> Tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if group["amsgrad"] else ("exp_avg", "exp_avg_sq")

    def _update(self, group: Dict[str, Any], param: Any, grad: Any, state: Dict[str, Any], step: float,
                scratch: Any) -> None:
        xp = array_module(param)
        beta1, beta2 = group["betas"]
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"]:
            grad = grad + group["weight_decay"] * param
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        numerator, denom = scratch
        exp_avg *= beta1
        xp.multiply(grad, 1 - beta1, out=denom)
        exp_avg += denom
        exp_avg_sq *= beta2
        xp.multiply(grad, grad, out=denom)
        denom *= 1 - beta2
        exp_avg_sq += denom
        denom_source = exp_avg_sq
        if group["amsgrad"]:
            denom_source = state["max_exp_avg_sq"]
            xp.maximum(denom_source, exp_avg_sq, out=denom_source)
        numerator[...] = exp_avg  # m read once: the step bounds what it divides
        bound = ratio_bound(beta1, beta2)
        if bound is None:
            xp.sqrt(denom_source, out=denom)
        else:  # sqrt(max(v, (m / bound)^2)): sqrt(v) itself unless lock-free workers raced
            xp.multiply(numerator, numerator, out=denom)
            denom *= 1 / bound ** 2
            xp.maximum(denom, denom_source, out=denom)
            xp.sqrt(denom, out=denom)
        denom *= 1 / math.sqrt(1 - beta2 ** step)
        denom += group["eps"]
        xp.divide(numerator, denom, out=denom)
        denom *= -group["lr"] / (1 - beta1 ** step)
        param += denom
