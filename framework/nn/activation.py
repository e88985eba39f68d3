"""Activation layers wrapping the element-wise functions (no parameters)."""
from __future__ import annotations

from ..ops import pointwise, reduction
from ..tensor import Tensor
from .module import Module


class ReLU(Module):
    """max(x, 0)."""

    def forward(self, input: Tensor) -> Tensor:
        return pointwise.relu(input)


class Tanh(Module):
    """tanh(x)."""

    def forward(self, input: Tensor) -> Tensor:
        return pointwise.tanh(input)


class Sigmoid(Module):
    """1 / (1 + e ** -x)."""

    def forward(self, input: Tensor) -> Tensor:
        return pointwise.sigmoid(input)


class ELU(Module):
    """x for x > 0, alpha * (e ** x - 1) otherwise."""

    def __init__(self, alpha: float = 1.0) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, input: Tensor) -> Tensor:
        return pointwise.elu(input, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Softplus(Module):
    """log(1 + e ** (beta * x)) / beta, linear above threshold."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Tensor) -> Tensor:
        return pointwise.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Softmax(Module):
    """softmax along `axis`."""

    def __init__(self, axis: int = -1) -> None:
        super().__init__()
        self.axis = axis

    def forward(self, input: Tensor) -> Tensor:
        return reduction.softmax(input, self.axis)

    def extra_repr(self) -> str:
        return f"axis={self.axis}"


class LogSoftmax(Module):
    """log_softmax along `axis`."""

    def __init__(self, axis: int = -1) -> None:
        super().__init__()
        self.axis = axis

    def forward(self, input: Tensor) -> Tensor:
        return reduction.log_softmax(input, self.axis)

    def extra_repr(self) -> str:
        return f"axis={self.axis}"
