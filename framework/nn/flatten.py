"""Flatten: merge axes start_dim..end_dim (by default all but the batch axis)."""
from __future__ import annotations

from ..ops.shape import flatten
from ..tensor import Tensor
from .module import Module


class Flatten(Module):
    """x.flatten(start_dim, end_dim); defaults keep the batch axis, as torch.nn.Flatten."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
