"""Adam (Kingma & Ba, 2015) with torch's options: weight_decay (L2, added to the gradient), amsgrad, maximize."""
from __future__ import annotations

import math
from typing import Any, Dict, Iterable, Tuple

from ..device import array_module
from .optimizer import Optimizer, check_range


class Adam(Optimizer):
    """m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps).

    With amsgrad, v is replaced by its running maximum in the denominator.
    """

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
        exp_avg *= beta1
        xp.multiply(grad, 1 - beta1, out=scratch)
        exp_avg += scratch
        exp_avg_sq *= beta2
        xp.multiply(grad, grad, out=scratch)
        scratch *= 1 - beta2
        exp_avg_sq += scratch
        denom_source = exp_avg_sq
        if group["amsgrad"]:
            denom_source = state["max_exp_avg_sq"]
            xp.maximum(denom_source, exp_avg_sq, out=denom_source)
        xp.sqrt(denom_source, out=scratch)
        scratch *= 1 / math.sqrt(1 - beta2 ** step)
        scratch += group["eps"]
        xp.divide(exp_avg, scratch, out=scratch)
        scratch *= -group["lr"] / (1 - beta1 ** step)
        param += scratch
