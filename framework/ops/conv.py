"""2-D convolution and max pooling over (N, C, H, W) batches (or one (C, H, W) image), as torch's.

Both work on strided windows of the padded input (no Python loop over
positions): convolution is one tensordot with the (out, in, kh, kw) weight;
the backward passes loop only over the kh * kw kernel offsets.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from ..device import array_module
from ..grad_mode import MODE
from ..tensor import Tensor, node, wrap


def as_pair(value: Any, name: str, minimum: int) -> Tuple[int, int]:
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(pair) != 2 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= minimum
                                 for v in pair):
        raise ValueError(f"{name} must be an int >= {minimum} or a pair of them, got {value!r}")
    return int(pair[0]), int(pair[1])


def _batched(data: Any, op: str) -> Tuple[Any, bool]:
    if data.ndim == 3:
        return data[None], True
    if data.ndim != 4:
        raise ValueError(f"{op}: expected input of shape (N, C, H, W) or (C, H, W), got {tuple(data.shape)}")
    return data, False


def _windows(padded: Any, kernel: Tuple[int, int], stride: Tuple[int, int], dilation: Tuple[int, int],
             out_hw: Tuple[int, int]) -> Any:
    """(N, C, OH, OW, KH, KW) strided view of the windows each output position sees."""
    n, c, _, _ = padded.shape
    s0, s1, s2, s3 = padded.strides
    shape = (n, c, out_hw[0], out_hw[1], kernel[0], kernel[1])
    strides = (s0, s1, s2 * stride[0], s3 * stride[1], s2 * dilation[0], s3 * dilation[1])
    if isinstance(padded, np.ndarray):
        return np.lib.stride_tricks.as_strided(padded, shape, strides, writeable=False)
    return array_module(padded).lib.stride_tricks.as_strided(padded, shape, strides)


def _out_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _scatter_windows(grad_windows: Any, padded_shape: tuple, kernel: Tuple[int, int], stride: Tuple[int, int],
                     dilation: Tuple[int, int], out_hw: Tuple[int, int], dtype: Any) -> Any:
    """Sum (N, C, OH, OW, KH, KW) window gradients back onto the padded input (col2im)."""
    xp = array_module(grad_windows)
    full = xp.zeros(padded_shape, dtype)
    oh, ow = out_hw
    for i in range(kernel[0]):
        top = i * dilation[0]
        for j in range(kernel[1]):
            left = j * dilation[1]
            full[:, :, top:top + stride[0] * (oh - 1) + 1:stride[0], left:left + stride[1] * (ow - 1) + 1:stride[1]] \
                += grad_windows[:, :, :, :, i, j]
    return full


def _crop(full: Any, padding: Tuple[int, int]) -> Any:
    ph, pw = padding
    return full[:, :, ph:full.shape[2] - ph, pw:full.shape[3] - pw]


def conv2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """Cross-correlation of (N, C_in, H, W) input with an (C_out, C_in, KH, KW) weight, as torch.conv2d."""
    if groups != 1:
        raise ValueError(f"conv2d: only groups=1 is supported, got groups={groups!r}")
    stride, padding, dilation = as_pair(stride, "stride", 1), as_pair(padding, "padding", 0), as_pair(dilation, "dilation", 1)
    x, unbatched = _batched(input._data, "conv2d")
    w = weight._data
    if w.ndim != 4 or w.shape[1] != x.shape[1]:
        raise ValueError(f"conv2d: weight of shape {tuple(w.shape)} does not fit input with {x.shape[1]} channels "
                         f"(expected (out_channels, {x.shape[1]}, kh, kw))")
    kernel = (w.shape[2], w.shape[3])
    out_hw = (_out_size(x.shape[2], kernel[0], stride[0], padding[0], dilation[0]),
              _out_size(x.shape[3], kernel[1], stride[1], padding[1], dilation[1]))
    if out_hw[0] <= 0 or out_hw[1] <= 0:
        raise ValueError(f"conv2d: kernel {kernel} (dilation {dilation}) is larger than the padded input "
                         f"{tuple(x.shape[2:])} + 2*{padding}")
    xp = array_module(x)
    padded = xp.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2)) if any(padding) else x
    windows = _windows(padded, kernel, stride, dilation, out_hw)
    out = xp.tensordot(windows, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)
    if bias is not None:
        out = out + bias._data[:, None, None]
    result = out[0] if unbatched else out
    if not (MODE.enabled and (input._rg or weight._rg or (bias is not None and bias._rg))):
        return wrap(result)

    def conv2d_backward(g: Any) -> tuple:
        g4 = g[None] if unbatched else g
        gx = gw = gb = None
        if input._rg:
            grad_windows = xp.tensordot(g4, w, axes=([1], [0]))  # (N, OH, OW, C, KH, KW)
            full = _scatter_windows(grad_windows.transpose(0, 3, 1, 2, 4, 5), padded.shape, kernel, stride,
                                    dilation, out_hw, g.dtype)
            gx = _crop(full, padding)
            gx = gx[0] if unbatched else gx
        if weight._rg:
            gw = xp.tensordot(g4, windows, axes=([0, 2, 3], [0, 2, 3]))
        if bias is not None and bias._rg:
            gb = g4.sum(axis=(0, 2, 3))
        return gx, gw, gb
    return node(result, conv2d_backward, (input, weight) if bias is None else (input, weight, bias))


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False) -> Tensor:
    """Maximum over kh x kw windows (stride defaults to the kernel size), as torch.max_pool2d."""
    if ceil_mode:
        raise ValueError("max_pool2d: ceil_mode=True is not supported")
    kernel = as_pair(kernel_size, "kernel_size", 1)
    stride = kernel if stride is None else as_pair(stride, "stride", 1)
    padding, dilation = as_pair(padding, "padding", 0), as_pair(dilation, "dilation", 1)
    if padding[0] * 2 > kernel[0] or padding[1] * 2 > kernel[1]:
        raise ValueError(f"max_pool2d: padding {padding} must be at most half the kernel size {kernel}")
    x, unbatched = _batched(input._data, "max_pool2d")
    out_hw = (_out_size(x.shape[2], kernel[0], stride[0], padding[0], dilation[0]),
              _out_size(x.shape[3], kernel[1], stride[1], padding[1], dilation[1]))
    if out_hw[0] <= 0 or out_hw[1] <= 0:
        raise ValueError(f"max_pool2d: kernel {kernel} is larger than the padded input {tuple(x.shape[2:])}")
    xp = array_module(x)
    padded = xp.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2), constant_values=-np.inf) \
        if any(padding) else x
    windows = _windows(padded, kernel, stride, dilation, out_hw)
    flat = windows.reshape(windows.shape[:4] + (kernel[0] * kernel[1],))
    arg = flat.argmax(axis=-1)
    out = xp.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]
    result = out[0] if unbatched else out
    if not (MODE.enabled and input._rg):
        return wrap(result)

    def max_pool2d_backward(g: Any) -> tuple:
        g4 = g[None] if unbatched else g
        positions = xp.arange(kernel[0] * kernel[1]).reshape(kernel)
        grad_windows = (arg[..., None, None] == positions) * g4[..., None, None]
        full = _scatter_windows(grad_windows, padded.shape, kernel, stride, dilation, out_hw, g.dtype)
        gx = _crop(full, padding)
        return (gx[0] if unbatched else gx,)
    return node(result, max_pool2d_backward, (input,))
