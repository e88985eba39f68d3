"""Stochastic gradient descent with torch's options: momentum, dampening, nesterov, weight_decay, maximize."""
from __future__ import annotations

from typing import Any, Dict, Iterable, Tuple

from ..device import array_module
from .optimizer import Optimizer, check_range


class SGD(Optimizer):
    """p -= lr * d, where d is the gradient (plus weight_decay * p) or, with momentum, the buffer
    b = momentum b + (1 - dampening) d (b = d on the first step), or d + momentum b with nesterov."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False) -> None:
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize))

    def _validate(self, group: Dict[str, Any]) -> None:
        super()._validate(group)
        check_range("momentum", group["momentum"], 0.0)
        check_range("weight_decay", group["weight_decay"], 0.0)
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError(f"Nesterov momentum requires a momentum and zero dampening (got momentum="
                             f"{group['momentum']}, dampening={group['dampening']})")

    def state_keys(self, group: Dict[str, Any]) -> Tuple[str, ...]:
        return ("momentum_buffer",) if group["momentum"] != 0 else ()

    def _state_dict_keys(self, group: Dict[str, Any], started: bool) -> Tuple[str, ...]:
        # torch keeps no step count for SGD, and creates the momentum buffer at the first step
        return self.state_keys(group) if started else ()

    def _update(self, group: Dict[str, Any], param: Any, grad: Any, state: Dict[str, Any], step: float,
                scratch: Any) -> None:
        xp = array_module(param)
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"]:
            grad = grad + group["weight_decay"] * param
        momentum = group["momentum"]
        if momentum != 0:
            buf = state["momentum_buffer"]
            if step == 1:
                buf[...] = grad
            else:
                buf *= momentum
                xp.multiply(grad, 1 - group["dampening"], out=scratch)
                buf += scratch
            grad = grad + momentum * buf if group["nesterov"] else buf
        xp.multiply(grad, group["lr"], out=scratch)
        param -= scratch
