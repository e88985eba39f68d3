"""An LSTM unrolled over a whole sequence as one recorded op, with its backward (BPTT) written out.

Stepping `LSTMCell` T times records some 15 small ops per step, and its
backward adds T outer products into each weight's gradient. Here the input
projection of all T steps is one GEMM, each step is one (B, H) x (H, 4H)
GEMM and a few element-wise passes on preallocated buffers, and the backward
pass walks the steps in reverse for the gate gradients only, then forms the
gradients of both weights and of the input with three large GEMMs. The price
is memory: the gates and cell states of every step are kept, (T, B, 12H)
floats, as autograd would keep them anyway. Without autograd, one step of the
same arithmetic (`lstm_cell_array`) is LSTMCell's acting path.

Gate order and parameters are torch's (i, f, g, o; weight_ih (4H, in),
weight_hh (4H, H), bias_ih, bias_hh). The sigmoid gates are computed as
0.5 + 0.5 * tanh(z / 2), which is the sigmoid exactly and cannot overflow.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..device import array_module
from ..grad_mode import MODE
from ..tensor import Tensor, node, wrap


def _gate_constants(xp: Any, hidden: int, dtype: Any) -> tuple:
    """(scale, offset) over the 4H gate columns: gate = scale * tanh(scale * z) + offset makes the i, f, o
    columns sigmoids (scale 0.5, offset 0.5) and the g columns a tanh (1, 0);
    d gate / d z = scale ** 2 * (1 - tanh ** 2)."""
    scale = xp.repeat(xp.asarray([0.5, 0.5, 1.0, 0.5], dtype), hidden)
    offset = xp.repeat(xp.asarray([0.5, 0.5, 0.0, 0.5], dtype), hidden)
    return scale, offset


def _step(z: Any, c: Any, scale: Any, offset: Any, tanh_z: Any, gates: Any, tanh_c: Any, h: Any) -> tuple:
    """One step from the gate pre-activations z (B, 4H) and the cell state c: writes tanh(scale * z), the gates
    (i, f, g, o), tanh(c') and h' into the given (B, 4H), (B, 4H), (B, H), (B, H) buffers; returns (h', c')."""
    hidden = c.shape[1]
    np.tanh(z * scale, out=tanh_z)
    np.multiply(tanh_z, scale, out=gates)
    gates += offset
    c = gates[:, hidden:2 * hidden] * c + gates[:, :hidden] * gates[:, 2 * hidden:3 * hidden]
    np.tanh(c, out=tanh_c)
    np.multiply(gates[:, 3 * hidden:], tanh_c, out=h)
    return h, c


def lstm_cell_array(x: Any, h: Any, c: Any, w_ih: Any, w_hh: Any, b_ih: Any = None, b_hh: Any = None) -> tuple:
    """(h', c') of one LSTM step on raw arrays, without autograd: LSTMCell's path for acting and inference."""
    xp = array_module(x)
    z = x @ w_ih.T + h @ w_hh.T
    for bias in (b_ih, b_hh):
        if bias is not None:
            z += bias
    scale, offset = _gate_constants(xp, c.shape[-1], z.dtype)
    return _step(z, c, scale, offset, xp.empty_like(z), xp.empty_like(z), xp.empty_like(c), xp.empty_like(c))


def lstm_sequence(input: Tensor, h0: Tensor, c0: Tensor, weight_ih: Tensor, weight_hh: Tensor,
                  bias_ih: Optional[Tensor] = None, bias_hh: Optional[Tensor] = None,
                  keep: Optional[Any] = None) -> Tensor:
    """The hidden states (T, B, H) of an LSTM cell run over input (T, B, in) from the state (h0, c0), each (B, H).

    keep, an optional (T, B) array, multiplies the state entering step t (0 resets it to zeros there: an
    episode boundary). Same results as stepping LSTMCell T times.
    """
    x, h, c = input._data, h0._data, c0._data
    w_ih, w_hh = weight_ih._data, weight_hh._data
    steps, batch, _ = x.shape
    hidden = w_hh.shape[1]
    xp = array_module(x)
    dtype = x.dtype
    scale, offset = _gate_constants(xp, hidden, dtype)
    projected = (x.reshape(steps * batch, -1) @ w_ih.T).reshape(steps, batch, 4 * hidden)
    for bias in (bias_ih, bias_hh):
        if bias is not None:
            projected += bias._data
    keep_col = None if keep is None else xp.asarray(keep, dtype)[:, :, None]
    tanh_z = xp.empty((steps, batch, 4 * hidden), dtype)   # tanh(scale * z), for the gate derivatives
    gates = xp.empty((steps, batch, 4 * hidden), dtype)    # i, f, g, o
    h_in = xp.empty((steps, batch, hidden), dtype)         # the (masked) state entering each step
    c_in = xp.empty((steps, batch, hidden), dtype)
    tanh_c = xp.empty((steps, batch, hidden), dtype)
    hs = xp.empty((steps, batch, hidden), dtype)
    for t in range(steps):
        if keep_col is not None:
            h, c = h * keep_col[t], c * keep_col[t]
        h_in[t], c_in[t] = h, c
        h, c = _step(projected[t] + h @ w_hh.T, c, scale, offset, tanh_z[t], gates[t], tanh_c[t], hs[t])
    parents = tuple(p for p in (input, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh) if p is not None)
    if not (MODE.enabled and any(p._rg for p in parents)):
        return wrap(hs)

    i_, f_, g_, o_ = (slice(k * hidden, (k + 1) * hidden) for k in range(4))

    def lstm_sequence_backward(g: Any) -> tuple:
        dz = xp.empty((steps, batch, 4 * hidden), dtype)
        dh_next = xp.zeros((batch, hidden), dtype)
        dc_next = xp.zeros((batch, hidden), dtype)
        derivative = scale * scale
        for t in range(steps - 1, -1, -1):
            gate = gates[t]
            dh = g[t] + dh_next
            dc = dc_next + dh * gate[:, o_] * (1 - tanh_c[t] * tanh_c[t])
            d_gate = dz[t]
            np.multiply(dc, gate[:, g_], out=d_gate[:, i_])
            np.multiply(dc, c_in[t], out=d_gate[:, f_])
            np.multiply(dc, gate[:, i_], out=d_gate[:, g_])
            np.multiply(dh, tanh_c[t], out=d_gate[:, o_])
            d_gate *= derivative * (1 - tanh_z[t] * tanh_z[t])
            dh_next, dc_next = d_gate @ w_hh, dc * gate[:, f_]
            if keep_col is not None:
                dh_next *= keep_col[t]
                dc_next *= keep_col[t]
        dz_rows = dz.reshape(steps * batch, 4 * hidden)
        gx = (dz_rows @ w_ih).reshape(x.shape) if input._rg else None
        gw_ih = dz_rows.T @ x.reshape(steps * batch, -1) if weight_ih._rg else None
        gw_hh = dz_rows.T @ h_in.reshape(steps * batch, hidden) if weight_hh._rg else None
        gb = dz_rows.sum(axis=0) if any(b is not None and b._rg for b in (bias_ih, bias_hh)) else None
        grads = (gx, dh_next if h0._rg else None, dc_next if c0._rg else None, gw_ih, gw_hh)
        return grads + tuple(gb for b in (bias_ih, bias_hh) if b is not None)
    return node(hs, lstm_sequence_backward, parents)
