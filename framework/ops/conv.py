"""2-D convolution and max pooling over (N, C, H, W) batches (or one (C, H, W) image), as torch's.

Note [convolution as one GEMM each way]
A convolution is a GEMM over a matrix of input patches: the weight as an
(out, in * kh * kw) matrix times the patches, one column per output position
with the batch folded into the columns, and its backward is one GEMM for the
weight gradient and one for the input gradient. conv2d builds that matrix in
one of two ways (`_plan`):

- blocks (space to depth), for strides above 1: the input cut into
  stride-sized blocks, a (in * sh * sw, GH * GW * N) matrix the size of the
  input (im2col's is kh * kw / (sh * sw) times larger: 4x for both of the Atari
  network's convolutions), in one copy from a strided view. The convolution is
  then a stride-1 one over the grid of blocks with a kernel of kbh x kbw
  blocks: one GEMM of the weight as (kbh * kbw * out) rows gives every block's
  product with each kernel block, and the output is their sum over kbh * kbw
  shifted windows, each a shift along the flat grid. Backward: the output
  gradient is copied once per kernel block, shifted, into a
  (kbh * kbw * out, GH * GW * N) matrix (the patches of the transposed
  convolution; its zero borders are written once), which gives the weight
  gradient against the block matrix and the input gradient's blocks against
  the weight, one GEMM each. Besides the smaller copy, its GEMMs have
  kbh * kbw times more rows than im2col's, which OpenBLAS runs about 1.5x as
  fast when out is 16 (the Atari network's first layer: 64 x 64 x 17640 against
  16 x 256 x 16000). The price: the grid's border cells (GH * GW against
  OH * OW: 10% and 23% for the Atari network) go through the GEMMs.
- patches (im2col), at stride 1 and for dilated kernels: a strided view of the
  input with one axis per kernel offset, copied once into a
  (in * kh * kw, OH * OW * N) matrix. Backward: the weight gradient is the
  output gradient times that matrix, the input gradient's patches are the
  weight times the output gradient, summed back onto the input by one strided
  add per kernel offset (col2im, no np.add.at).

Layout: activations live as (C, H, W, N) in memory, handed out as
(N, C, H, W) views. The GEMMs write their results in place, and every copy,
shifted sum and strided add in between runs along the batch, whole rows at a
time (NumPy's cost per inner loop, not per value, is what a 9x9 activation
would otherwise pay). Flattening the last one for a Linear is a view the
Linear's GEMM reads transposed (im2col's output), or one copy of the output
where a block grid's border cells sit between its rows. No transpose copies a
whole activation.
Integer input (uint8 frames) becomes floats in the block matrix's copy.

Memory: the patch or block matrix is kept for the backward (as autograd would
keep the input); it and every temporary come from the layer's Workspace
(ops.workspace), so a training loop allocates them once per shape. With
`relu` (nn.Sequential's fusion) the ReLU runs in place on the output and its
backward is the mask applied in the backward's first copy.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Optional, Tuple

import numpy as np

from ..device import array_module
from ..grad_mode import MODE
from ..tensor import Tensor, node, wrap
from .primitive import Primitive, apply
from .workspace import Saved, Workspace


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


def _strided(array: Any, shape: tuple, strides: tuple) -> Any:
    """A read-only strided view of `array` (NumPy or CuPy)."""
    if isinstance(array, np.ndarray):
        return np.lib.stride_tricks.as_strided(array, shape, strides, writeable=False)
    return array_module(array).lib.stride_tricks.as_strided(array, shape, strides)


def _windows(padded: Any, kernel: Tuple[int, int], stride: Tuple[int, int], dilation: Tuple[int, int],
             out_hw: Tuple[int, int]) -> Any:
    """(N, C, OH, OW, KH, KW) strided view of the windows each output position sees."""
    n, c, _, _ = padded.shape
    s0, s1, s2, s3 = padded.strides
    shape = (n, c, out_hw[0], out_hw[1], kernel[0], kernel[1])
    return _strided(padded, shape, (s0, s1, s2 * stride[0], s3 * stride[1], s2 * dilation[0], s3 * dilation[1]))


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


# ---- convolution (see Note [convolution as one GEMM each way]) -------------------------------------------

class _Plan:
    """The geometry of one convolution's shapes, worked out once (`_plan` is cached)."""

    __slots__ = ("blocked", "n", "c", "h", "w", "o", "kernel", "stride", "padding", "dilation", "out_hw", "blocks",
                 "grid", "inside")

    def __init__(self, x_shape: tuple, w_shape: tuple, stride: Tuple[int, int], padding: Tuple[int, int],
                 dilation: Tuple[int, int]) -> None:
        self.n, self.c, self.h, self.w = x_shape
        self.o, _, kh, kw = w_shape
        self.kernel, self.stride, self.padding, self.dilation = (kh, kw), stride, padding, dilation
        self.out_hw = (_out_size(self.h, kh, stride[0], padding[0], dilation[0]),
                       _out_size(self.w, kw, stride[1], padding[1], dilation[1]))
        self.blocked = stride != (1, 1) and dilation == (1, 1)  # blocks (space to depth), else patches (im2col)
        self.blocks = (-(-kh // stride[0]), -(-kw // stride[1]))  # blocked: the kernel in blocks (kbh, kbw)
        self.grid = (self.out_hw[0] + self.blocks[0] - 1, self.out_hw[1] + self.blocks[1] - 1)  # blocks outputs read
        self.inside = padding == (0, 0) and self.grid[0] * stride[0] <= self.h and self.grid[1] * stride[1] <= self.w


def _out_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


@lru_cache(maxsize=256)
def _plan(x_shape: tuple, w_shape: tuple, stride: Tuple[int, int], padding: Tuple[int, int],
          dilation: Tuple[int, int]) -> _Plan:
    """How to run a convolution of these shapes: blocks for strides above 1 without dilation (their matrix is the
    input's size, where im2col's is kh * kw / (sh * sw) times it, and their GEMMs have kbh * kbw times more rows),
    patches otherwise (at stride 1 blocks would only add the grid's border cells to every GEMM: 65% more for a
    3x3 kernel on 9x9)."""
    return _Plan(x_shape, w_shape, stride, padding, dilation)


def _phase(size: int, pad: int, stride: int, phase: int, grid: int) -> Tuple[int, int, int]:
    """(g0, g1, i0): grid cells g0..g1-1 at `phase` within their block read input rows i0, i0 + stride, ...
    (cell g holds padded row g * stride + phase, input row g * stride + phase - pad)."""
    g0 = max(0, -(-(pad - phase) // stride))
    g1 = min(grid, (size - 1 + pad - phase) // stride + 1)
    return g0, g1, g0 * stride + phase - pad


def _block_copies(plan: _Plan) -> list:
    """(blocks index, input index) pairs, one per phase within a block (sh * sw at most): where the parts of the
    (C, sh, sw, GH, GW, N) block matrix that hold input come from in the (C, H, W, N) input."""
    (sh, sw), (gh, gw) = plan.stride, plan.grid
    pairs = []
    for p in range(sh):
        g0, g1, i0 = _phase(plan.h, plan.padding[0], sh, p, gh)
        for q in range(sw):
            f0, f1, j0 = _phase(plan.w, plan.padding[1], sw, q, gw)
            if g1 > g0 and f1 > f0:
                pairs.append(((slice(None), p, q, slice(g0, g1), slice(f0, f1)),
                              (slice(None), slice(i0, i0 + sh * (g1 - g0 - 1) + 1, sh),
                               slice(j0, j0 + sw * (f1 - f0 - 1) + 1, sw))))
    return pairs


def _to_blocks(blocks: Any, x: Any, plan: _Plan) -> None:
    """Copy the (C, H, W, N) input into the (C, sh, sw, GH, GW, N) block matrix (cells outside it stay zero)."""
    (sh, sw), (gh, gw) = plan.stride, plan.grid
    if plan.inside:
        blocks[...] = x[:, :gh * sh, :gw * sw].reshape(plan.c, gh, sh, gw, sw, plan.n).transpose(0, 2, 4, 1, 3, 5)
        return
    for block_index, input_index in _block_copies(plan):
        blocks[block_index] = x[input_index]


def _from_blocks(blocks: Any, plan: _Plan) -> Any:
    """The (C, H, W, N) input gradient from the block matrix's gradient."""
    xp = array_module(blocks)
    (sh, sw), (gh, gw) = plan.stride, plan.grid
    covered = plan.inside and (gh * sh, gw * sw) == (plan.h, plan.w)
    grad = (xp.empty if covered else xp.zeros)((plan.c, plan.h, plan.w, plan.n), blocks.dtype)
    if plan.inside:
        grad[:, :gh * sh, :gw * sw].reshape(plan.c, gh, sh, gw, sw, plan.n)[...] = blocks.transpose(0, 3, 1, 4, 2, 5)
    else:
        for block_index, input_index in _block_copies(plan):
            grad[input_index] = blocks[block_index]
    return grad


def _blocked_kernel(w: Any, plan: _Plan) -> Any:
    """The weight as a (kbh * kbw * out, in * sh * sw) matrix: a row block per kernel block, over the
    stride-sized input blocks; a kernel that is not a whole number of strides gets zero taps."""
    xp = array_module(w)
    (kbh, kbw), (sh, sw), (kh, kw) = plan.blocks, plan.stride, plan.kernel
    if (kbh * sh, kbw * sw) != (kh, kw):
        dense = xp.zeros((plan.o, plan.c, kbh * sh, kbw * sw), w.dtype)
        dense[:, :, :kh, :kw] = w
        w = dense
    return w.reshape(plan.o, plan.c, kbh, sh, kbw, sw).transpose(2, 4, 0, 1, 3, 5).reshape(kbh * kbw * plan.o, -1)


def _kernel_grad(grad_blocked: Any, plan: _Plan) -> Any:
    """The gradient of the blocked weight matrix in the (out, in, kh, kw) layout (the inverse of _blocked_kernel)."""
    (kbh, kbw), (sh, sw), (kh, kw) = plan.blocks, plan.stride, plan.kernel
    dense = grad_blocked.reshape(kbh, kbw, plan.o, plan.c, sh, sw).transpose(2, 3, 0, 4, 1, 5)
    return dense.reshape(plan.o, plan.c, kbh * sh, kbw * sw)[:, :, :kh, :kw]


def _shifts(plan: _Plan) -> list:
    """How far along the flat (GH, GW, N) grid each kernel block (a, b) reaches: (a * GW + b) * N."""
    return [(a * plan.grid[1] + b) * plan.n for a in range(plan.blocks[0]) for b in range(plan.blocks[1])]


def _blocks_region(plan: _Plan) -> Any:
    """The workspace key of a block matrix: False where the input fills it, else the input size and padding
    that say which cells hold input (the others stay zero: the same shape can come from another input size)."""
    return False if plan.inside else ("blocks", plan.h, plan.w, plan.padding)


def _blocks_forward(x: Any, w: Any, b: Any, plan: _Plan, workspace: Workspace, dtype: Any) -> tuple:
    """(output (O, OH, OW, N), the (O, GH, GW, N) grid it views, block matrix, blocked weight) of the blocks path,
    from the (C, H, W, N) input.

    The output is a view of a grid: each shifted sum then runs along whole rows of the grid (cells it wraps into
    are cut off by the view), not along rows of OW values.
    """
    xp = array_module(x)
    (sh, sw), (gh, gw), (oh, ow), depth = plan.stride, plan.grid, plan.out_hw, plan.c * plan.stride[0] * plan.stride[1]
    blocks = workspace.take(xp, x, (plan.c, sh, sw, gh, gw, plan.n), dtype, zeroed=_blocks_region(plan))
    _to_blocks(blocks, x, plan)
    kernel = _blocked_kernel(w, plan)
    flat = gh * gw * plan.n
    products = workspace.take(xp, x, (len(_shifts(plan)), plan.o, flat), dtype)
    xp.matmul(kernel, blocks.reshape(depth, flat), out=products.reshape(-1, flat))
    out = xp.empty((plan.o, gh, gw, plan.n), dtype)
    rows = out.reshape(plan.o, flat)
    if b is None:
        rows[...] = products[0]
    else:
        xp.add(products[0], b[:, None], out=rows)
    for k, shift in enumerate(_shifts(plan)[1:], start=1):
        rows[:, :flat - shift] += products[k, :, shift:]
    workspace.give(products)
    return out[:, :oh, :ow], out, blocks, kernel


def _blocks_backward(needs: tuple, g: Any, mask: Any, plan: _Plan, saved: Saved) -> tuple:
    """(input (C, H, W, N), weight, bias) gradients of the blocks path from the (O, OH, OW, N) output gradient,
    times `mask` (the fused ReLU's) unless None.

    The output gradient is placed on the grid once; each kernel block's shifted copy of it is then one copy
    along whole rows (their zero borders are the workspace buffer's, written once).
    """
    xp, workspace = array_module(g), saved.workspace
    (sh, sw), (gh, gw), (oh, ow), depth = plan.stride, plan.grid, plan.out_hw, plan.c * plan.stride[0] * plan.stride[1]
    shifts, flat = _shifts(plan), gh * gw * plan.n
    shifted = workspace.take(xp, g, (len(shifts), plan.o, gh, gw, plan.n), g.dtype, zeroed="shifted")
    if mask is None:
        shifted[0, :, :oh, :ow] = g
    else:
        xp.multiply(g, mask, out=shifted[0, :, :oh, :ow])
    rows = shifted.reshape(len(shifts), plan.o, flat)
    gb = rows[0].sum(axis=1) if needs[2] else None
    for k, shift in enumerate(shifts[1:], start=1):
        rows[k, :, shift:] = rows[0, :, :flat - shift]
    rows = rows.reshape(-1, flat)
    gx = gw_ = None
    if needs[1]:
        gw_ = _kernel_grad(rows @ saved["blocks"].reshape(depth, flat).T, plan)
    if needs[0]:
        blocks = workspace.take(xp, g, (plan.c, sh, sw, gh, gw, plan.n), g.dtype)
        xp.matmul(saved["kernel"].T, rows, out=blocks.reshape(depth, flat))
        gx = _from_blocks(blocks, plan)
        workspace.give(blocks)
    workspace.give(shifted, zeroed="shifted")
    return gx, gw_, gb


def _padded(x: Any, plan: _Plan, workspace: Workspace) -> Tuple[Any, Any]:
    """(the (C, H, W, N) input with its zero padding, (C, H + 2ph, W + 2pw, N), and the workspace buffer behind
    it or None): the input itself without padding."""
    if plan.padding == (0, 0):
        return x, None
    xp = array_module(x)
    (ph, pw) = plan.padding
    buffer = workspace.take(xp, x, (plan.c, plan.h + 2 * ph, plan.w + 2 * pw, plan.n), x.dtype, zeroed="padded")
    buffer[:, ph:ph + plan.h, pw:pw + plan.w] = x
    return buffer, buffer


def _patches_forward(x: Any, w: Any, b: Any, plan: _Plan, workspace: Workspace, dtype: Any) -> tuple:
    """(output (O, OH, OW, N), patch matrix) of the patches path, from the (C, H, W, N) input."""
    xp = array_module(x)
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = plan.kernel, plan.stride, plan.dilation, plan.out_hw
    padded, buffer = _padded(x, plan, workspace)
    s_c, s_h, s_w, s_n = padded.strides
    patches = workspace.take(xp, x, (plan.c, kh, kw, oh, ow, plan.n), dtype)
    patches[...] = _strided(padded, patches.shape, (s_c, dh * s_h, dw * s_w, sh * s_h, sw * s_w, s_n))
    if buffer is not None:
        workspace.give(buffer, zeroed="padded")
    out = xp.empty((plan.o, oh, ow, plan.n), dtype)
    xp.matmul(w.reshape(plan.o, -1), patches.reshape(plan.c * kh * kw, -1), out=out.reshape(plan.o, -1))
    if b is not None:
        out += b[:, None, None, None]
    return out, patches


def _patches_backward(needs: tuple, g: Any, mask: Any, w: Any, plan: _Plan, saved: Saved) -> tuple:
    """(input (C, H, W, N), weight, bias) gradients of the patches path from the (O, OH, OW, N) output gradient,
    times `mask` (the fused ReLU's) unless None."""
    xp, workspace = array_module(g), saved.workspace
    (kh, kw), (sh, sw), (dh, dw), (oh, ow), (ph, pw) = plan.kernel, plan.stride, plan.dilation, plan.out_hw, \
        plan.padding
    lent = None
    if mask is not None or not g.flags.c_contiguous:
        lent = workspace.take(xp, g, g.shape, g.dtype)
        if mask is None:
            lent[...] = g
        else:
            xp.multiply(g, mask, out=lent)
        g = lent
    g_rows = g.reshape(plan.o, -1)
    gb = g_rows.sum(axis=1) if needs[2] else None
    gx = gw_ = None
    if needs[1]:
        gw_ = (g_rows @ saved["patches"].reshape(plan.c * kh * kw, -1).T).reshape(w.shape)
    if needs[0]:
        patches = workspace.take(xp, g, (plan.c, kh, kw, oh, ow, plan.n), g.dtype)
        xp.matmul(w.reshape(plan.o, -1).T, g_rows, out=patches.reshape(plan.c * kh * kw, -1))
        grad = xp.zeros((plan.c, plan.h + 2 * ph, plan.w + 2 * pw, plan.n), g.dtype)
        for a in range(kh):
            for c in range(kw):
                grad[:, a * dh:a * dh + sh * (oh - 1) + 1:sh, c * dw:c * dw + sw * (ow - 1) + 1:sw] += patches[:, a, c]
        workspace.give(patches)
        gx = grad[:, ph:ph + plan.h, pw:pw + plan.w]
    if lent is not None:
        workspace.give(lent)
    return gx, gw_, gb


def _conv2d_forward(x: Any, w: Any, b: Any, stride: Tuple[int, int], padding: Tuple[int, int],
                    dilation: Tuple[int, int], workspace: Optional[Workspace], relu: bool, save: bool = False) -> Any:
    unbatched = x.ndim == 3
    x4 = x[None] if unbatched else x
    plan = _plan(x4.shape, w.shape, stride, padding, dilation)
    workspace = Workspace() if workspace is None else workspace  # without one: buffers for this call alone
    xp = array_module(x)
    dtype = xp.result_type(x.dtype, w.dtype)
    channels_first = x4.transpose(1, 2, 3, 0)  # (C, H, W, N): the layout of the Note
    if plan.blocked:
        out, memory, matrix, kernel = _blocks_forward(channels_first, w, b, plan, workspace, dtype)
        zeroed, kept = _blocks_region(plan), {"blocks": matrix, "kernel": kernel}
    else:
        out, matrix = _patches_forward(channels_first, w, b, plan, workspace, dtype)
        memory, zeroed, kept = out, False, {"patches": matrix}
    if relu:  # in place, along whole rows of the output's memory
        xp.maximum(memory, 0, out=memory)
    result = out.transpose(3, 0, 1, 2)
    result = result[0] if unbatched else result
    if not save:
        workspace.give(matrix, zeroed)
        return result
    return result, Saved(workspace, ((matrix, zeroed),), plan=plan, output=memory if relu else None, **kept)


def _conv2d_backward(needs: tuple, args: tuple, out: Any, g: Any, saved: Saved) -> tuple:
    plan, output = saved["plan"], saved["output"]
    g4 = (g[None] if g.ndim == 3 else g).transpose(1, 2, 3, 0)  # (O, OH, OW, N): the output's memory order
    mask = None if output is None else (output > 0)[:, :plan.out_hw[0], :plan.out_hw[1]]  # the fused ReLU's
    if plan.blocked:
        gx, gw, gb = _blocks_backward(needs, g4, mask, plan, saved)
    else:
        gx, gw, gb = _patches_backward(needs, g4, mask, args[1], plan, saved)
    if gx is not None:
        gx = gx.transpose(3, 0, 1, 2)
        gx = gx[0] if args[0].ndim == 3 else gx
    return gx, gw, gb, None, None, None, None, None


def _conv2d_shape(x: tuple, w: tuple, b: Any, stride: Tuple[int, int], padding: Tuple[int, int],
                  dilation: Tuple[int, int], workspace: Any, relu: bool) -> tuple:
    return tuple(x[:-3]) + (w[0],) + tuple(_out_size(x[i - 2], w[i + 2], stride[i], padding[i], dilation[i])
                                           for i in range(2))


CONV2D = Primitive("conv2d", _conv2d_forward, _conv2d_backward, shape=_conv2d_shape, saves=True)


def conv2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1, *, workspace: Optional[Workspace] = None, relu: bool = False) -> Tensor:
    """Cross-correlation of (N, C_in, H, W) input with an (C_out, C_in, KH, KW) weight, as torch.conv2d; integer
    input (uint8 frames) is read as its values in the weight's dtype, where torch refuses it.

    One GEMM each way (see Note [convolution as one GEMM each way]); the result
    is an (N, C_out, OH, OW) view of channel-major memory. `workspace` keeps the
    scratch arrays for the next call of the same shapes (nn.Conv2d passes its
    own); without one they are allocated per call. With `relu`, the result is
    max(conv, 0), computed in place along whole rows of the output's memory,
    and the ReLU's backward is the mask applied in the copy of the output
    gradient that the convolution's backward makes anyway (nn.Sequential fuses
    a Conv2d and the ReLU after it so).
    """
    if groups != 1:
        raise ValueError(f"conv2d: only groups=1 is supported, got groups={groups!r}")
    stride, padding, dilation = as_pair(stride, "stride", 1), as_pair(padding, "padding", 0), as_pair(dilation, "dilation", 1)
    x, _ = _batched(input._data, "conv2d")
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
    return apply(CONV2D, input, weight, bias, stride, padding, dilation, workspace, bool(relu))


# ---- max pooling ------------------------------------------------------------------------------------------

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
