"""2-D convolution and max pooling over (N, C, H, W) batches (or one (C, H, W) image), as torch's.

Convolution runs as a few large GEMMs over a space-to-depth copy of the
input (see conv2d); max pooling works on strided windows of the padded input
and its backward pass loops only over the kh * kw kernel offsets. Neither
loops in Python over positions.
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


def _blocked_kernel(w: Any, stride: Tuple[int, int], dilation: Tuple[int, int]) -> Tuple[Any, Tuple[int, int]]:
    """The weight as one (kbh * kbw * out, in * sh * sw) matrix, a row block per kernel offset over stride-sized
    input blocks, and (kbh, kbw).

    A dilated kernel is first spread into a dense one with zero taps, and the
    kernel is padded with zero taps to a whole number of strides, so every
    convolution takes the same path (the extra taps cost flops, not results).
    """
    xp = array_module(w)
    out_c, in_c, kh, kw = w.shape
    span = (dilation[0] * (kh - 1) + 1, dilation[1] * (kw - 1) + 1)
    blocks = (-(-span[0] // stride[0]), -(-span[1] // stride[1]))
    if blocks[0] * stride[0] != kh or blocks[1] * stride[1] != kw or dilation != (1, 1):
        dense = xp.zeros((out_c, in_c, blocks[0] * stride[0], blocks[1] * stride[1]), w.dtype)
        dense[:, :, :span[0]:dilation[0], :span[1]:dilation[1]] = w
        w = dense
    w6 = w.reshape(out_c, in_c, blocks[0], stride[0], blocks[1], stride[1])
    return w6.transpose(2, 4, 0, 1, 3, 5).reshape(blocks[0] * blocks[1] * out_c, -1), blocks


def _kernel_grad(grad_blocked: Any, shape: tuple, stride: Tuple[int, int], dilation: Tuple[int, int],
                 blocks: Tuple[int, int]) -> Any:
    """The gradient of the blocked weight matrix in the (out, in, kh, kw) layout (the inverse of _blocked_kernel)."""
    out_c, in_c, kh, kw = shape
    g6 = grad_blocked.reshape(blocks[0], blocks[1], out_c, in_c, stride[0], stride[1])
    dense = g6.transpose(2, 3, 0, 4, 1, 5).reshape(out_c, in_c, blocks[0] * stride[0], blocks[1] * stride[1])
    return dense[:, :, :dilation[0] * (kh - 1) + 1:dilation[0], :dilation[1] * (kw - 1) + 1:dilation[1]]


def conv2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """Cross-correlation of (N, C_in, H, W) input with an (C_out, C_in, KH, KW) weight, as torch.conv2d; integer
    input (uint8 frames) is read as its values in the weight's dtype, where torch refuses it.

    Space to depth, then shifted sums, on a flat grid. The (padded) input is
    cut into stride-sized blocks: a (C_in * sh * sw, N * GH * GW) matrix, a copy
    of the input's size where im2col's would be kh * kw / (sh * sw) times larger
    (4x for both of the Atari network's convolutions). One GEMM with the
    blocked kernel gives each block's contribution to every kernel offset
    (a, b); as each row runs over all N * GH * GW blocks, the offset is a shift
    by a * GW + b along the row, so the output is the sum of kbh * kbw
    contiguous shifted slices (no output position reads across images: the
    rows and columns the shift wraps into are cut off at the end).

    Backward: the output gradient is placed on the same grid (one copy); the
    weight gradient is one GEMM per offset against the shifted block matrix,
    the input gradient one GEMM and kbh * kbw shifted sums back onto the
    blocks, reshaped into the input. No scatter, no np.add.at, no Python loop
    over positions. The output is an (N, C_out, OH, OW) view of channel-major
    (C_out, N, GH, GW) memory.
    """
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
    n, in_c, height, width = x.shape
    out_c = w.shape[0]
    kernel_blocked, blocks = _blocked_kernel(w, stride, dilation)
    grid = (out_hw[0] + blocks[0] - 1, out_hw[1] + blocks[1] - 1)  # blocks along H and W that outputs read
    rows, cols = grid[0] * stride[0], grid[1] * stride[1]
    # Pad to at least rows x cols, then take exactly that: rows past the input's only ever meet zero taps.
    fits = not any(padding) and (rows, cols) == (height, width)
    extra = (max(rows - height - 2 * padding[0], 0), max(cols - width - 2 * padding[1], 0))
    padded = x if fits else xp.pad(x, ((0, 0), (0, 0), (padding[0], padding[0] + extra[0]),
                                       (padding[1], padding[1] + extra[1])))[:, :, :rows, :cols]
    flat = n * grid[0] * grid[1]
    # One copy into blocks; integer images (uint8 frames) become floats in this same copy.
    block_cols = xp.empty((in_c * stride[0] * stride[1], flat), xp.result_type(x.dtype, w.dtype))
    block_cols.reshape(in_c, stride[0], stride[1], n, grid[0], grid[1])[...] = \
        padded.reshape(n, in_c, grid[0], stride[0], grid[1], stride[1]).transpose(1, 3, 5, 0, 2, 4)
    shifts = [a * grid[1] + b for a in range(blocks[0]) for b in range(blocks[1])]  # kernel offset k's shift
    per_offset = kernel_blocked @ block_cols  # row block k: every block's contribution through offset k
    out = per_offset[:out_c]
    for k, shift in enumerate(shifts[1:], start=1):
        out[:, :flat - shift] += per_offset[k * out_c:(k + 1) * out_c, shift:]
    if bias is not None:
        out += bias._data[:, None]
    oh, ow = out_hw
    result = out.reshape(out_c, n, grid[0], grid[1])[:, :, :oh, :ow].transpose(1, 0, 2, 3)
    result = result[0] if unbatched else result
    if not (MODE.enabled and (input._rg or weight._rg or (bias is not None and bias._rg))):
        return wrap(result)

    def conv2d_backward(g: Any) -> tuple:
        g_grid = xp.zeros((out_c, n, grid[0], grid[1]), g.dtype)
        g_grid[:, :, :oh, :ow] = (g[None] if unbatched else g).transpose(1, 0, 2, 3)
        g_grid = g_grid.reshape(out_c, flat)
        gx = gw = gb = None
        if input._rg:
            depth = block_cols.shape[0]
            per_offset_g = kernel_blocked.reshape(-1, out_c, depth).transpose(0, 2, 1).reshape(-1, out_c) @ g_grid
            g_cols = per_offset_g[:depth]
            for k, shift in enumerate(shifts[1:], start=1):
                g_cols[:, shift:] += per_offset_g[k * depth:(k + 1) * depth, :flat - shift]
            g_padded = g_cols.reshape(in_c, stride[0], stride[1], n, grid[0], grid[1]).transpose(3, 0, 4, 1, 5, 2) \
                .reshape(n, in_c, rows, cols)
            if not fits:
                g_full = xp.zeros((n, in_c, height + 2 * padding[0] + extra[0], width + 2 * padding[1] + extra[1]),
                                  g.dtype)
                g_full[:, :, :rows, :cols] = g_padded
                g_padded = g_full[:, :, padding[0]:padding[0] + height, padding[1]:padding[1] + width]
            gx = g_padded[0] if unbatched else g_padded
        if weight._rg:
            g_blocked = xp.empty(kernel_blocked.shape, g.dtype)
            for k, shift in enumerate(shifts):  # (blocks x outputs) is faster in OpenBLAS than its transpose
                g_blocked[k * out_c:(k + 1) * out_c] = (block_cols[:, shift:] @ g_grid[:, :flat - shift].T).T
            gw = _kernel_grad(g_blocked, w.shape, stride, dilation, blocks)
        if bias is not None and bias._rg:
            gb = g_grid.sum(axis=1)
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
