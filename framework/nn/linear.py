"""Affine layers: Linear (weight (out_features, in_features), as torch) and Identity."""
from __future__ import annotations

import math
from typing import Any

from .. import creation
from ..ops.arithmetic import linear
from ..tensor import Tensor
from . import init
from .module import Module
from .parameter import Parameter


def _positive(value: Any, name: str, layer: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{layer}: {name} must be a positive int, got {value!r}")
    return value


class Linear(Module):
    """y = x @ weight.T + bias, initialised as torch does (U(-1/sqrt(in), 1/sqrt(in)) for both)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = "cpu",
                 dtype: Any = None) -> None:
        super().__init__()
        self.in_features = _positive(in_features, "in_features", "Linear")
        self.out_features = _positive(out_features, "out_features", "Linear")
        self.weight = Parameter(creation.empty(out_features, in_features, dtype=dtype, device=device))
        self.bias = Parameter(creation.empty(out_features, dtype=dtype, device=device)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraw the weights (kaiming_uniform_ with a=sqrt(5)) and bias, as torch.nn.Linear."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features)
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Identity(Module):
    """Returns its input unchanged (a placeholder layer)."""

    def forward(self, input: Tensor) -> Tensor:
        return input
