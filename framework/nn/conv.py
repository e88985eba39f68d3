"""Convolution and pooling layers: Conv2d (weight (out, in, kh, kw), as torch) and MaxPool2d."""
from __future__ import annotations

import math
from typing import Any

from .. import creation
from ..ops.conv import as_pair, conv2d, max_pool2d
from ..ops.workspace import Workspace
from ..tensor import Tensor
from . import init
from .linear import _positive
from .module import Module
from .parameter import Parameter


class Conv2d(Module):
    """2-D cross-correlation over (N, C, H, W) input, initialised as torch.nn.Conv2d.

    `workspace` holds the convolution's scratch arrays between calls (ops.workspace): allocated on the first
    call of each shape, freed with the layer, never saved or copied with it.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, device: Any = "cpu", dtype: Any = None) -> None:
        super().__init__()
        if groups != 1:
            raise ValueError(f"Conv2d: only groups=1 is supported, got groups={groups!r}")
        self.in_channels = _positive(in_channels, "in_channels", "Conv2d")
        self.out_channels = _positive(out_channels, "out_channels", "Conv2d")
        self.kernel_size = as_pair(kernel_size, "kernel_size", 1)
        self.stride = as_pair(stride, "stride", 1)
        self.padding = as_pair(padding, "padding", 0)
        self.dilation = as_pair(dilation, "dilation", 1)
        self.weight = Parameter(creation.empty(out_channels, in_channels, *self.kernel_size, dtype=dtype,
                                               device=device))
        self.bias = Parameter(creation.empty(out_channels, dtype=dtype, device=device)) if bias else None
        self.workspace = Workspace()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraw the weights (kaiming_uniform_ with a=sqrt(5)) and bias (U(-1/sqrt(fan_in), ...)), as torch."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_channels * self.kernel_size[0] * self.kernel_size[1]
            bound = 1 / math.sqrt(fan_in)
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return self.convolve(input)

    def convolve(self, input: Tensor, relu: bool = False) -> Tensor:
        """The convolution, and with `relu` a ReLU after it in the same op (nn.Sequential's fusion): a subclass
        that changes the convolution overrides this, not forward."""
        return conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, workspace=self.workspace,
                      relu=relu)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, bias={self.bias is not None}")


class MaxPool2d(Module):
    """Maximum over kh x kw windows (stride defaults to the kernel size)."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1) -> None:
        super().__init__()
        self.kernel_size = as_pair(kernel_size, "kernel_size", 1)
        self.stride = self.kernel_size if stride is None else as_pair(stride, "stride", 1)
        self.padding = as_pair(padding, "padding", 0)
        self.dilation = as_pair(dilation, "dilation", 1)

    def forward(self, input: Tensor) -> Tensor:
        return max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
