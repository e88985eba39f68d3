"""LSTMCell: one step of an LSTM, with torch's parameter names, shapes and gate order (i, f, g, o), and `unroll`
over a whole sequence as one op (ops/recurrent.py: one GEMM per step, its backward a few large GEMMs)."""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple

from .. import creation
from ..grad_mode import MODE
from ..ops import pointwise
from ..ops.arithmetic import linear
from ..ops.recurrent import lstm_cell_array, lstm_sequence
from ..ops.shape import getitem, unsqueeze
from ..tensor import Tensor, wrap
from . import init
from .linear import _positive
from .module import Module
from .parameter import Parameter


class LSTMCell(Module):
    """(h', c') = LSTMCell(x, (h, c)); weight_ih (4h, in), weight_hh (4h, h), bias_ih and bias_hh (4h).

    Gates are computed as x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh and
    split in the order input, forget, cell, output (without autograd, as for acting, on raw arrays in one
    pass: ops/recurrent.py's lstm_cell_array). Every parameter starts as
    U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as torch. The state defaults to zeros.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = "cpu",
                 dtype: Any = None) -> None:
        super().__init__()
        self.input_size = _positive(input_size, "input_size", "LSTMCell")
        self.hidden_size = _positive(hidden_size, "hidden_size", "LSTMCell")
        gates = 4 * hidden_size
        self.weight_ih = Parameter(creation.empty(gates, input_size, dtype=dtype, device=device))
        self.weight_hh = Parameter(creation.empty(gates, hidden_size, dtype=dtype, device=device))
        self.bias_ih = Parameter(creation.empty(gates, dtype=dtype, device=device)) if bias else None
        self.bias_hh = Parameter(creation.empty(gates, dtype=dtype, device=device)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def forward(self, input: Tensor, hx: Optional[Tuple[Tensor, Tensor]] = None) -> Tuple[Tensor, Tensor]:
        if input.ndim not in (1, 2) or input.shape[-1] != self.input_size:
            raise ValueError(f"LSTMCell: expected input of shape (batch, {self.input_size}) or ({self.input_size},), "
                             f"got {tuple(input.shape)}")
        unbatched = input.ndim == 1
        if unbatched:
            input = unsqueeze(input, 0)
        batch = input.shape[0]
        if hx is None:
            zeros = creation.zeros(batch, self.hidden_size, dtype=input.dtype, device=input.device)
            h, c = zeros, zeros
        else:
            h, c = hx
            if unbatched:
                h, c = unsqueeze(h, 0), unsqueeze(c, 0)
            expected = (batch, self.hidden_size)
            if tuple(h.shape) != expected or tuple(c.shape) != expected:
                raise ValueError(f"LSTMCell: expected h and c of shape {expected}, got {tuple(h.shape)} and "
                                 f"{tuple(c.shape)}")
        if not (MODE.enabled and any(t._rg for t in (input, h, c, *self.parameters()))):  # acting: raw arrays
            h_next, c_next = (wrap(a) for a in lstm_cell_array(
                input._data, h._data, c._data, self.weight_ih._data, self.weight_hh._data,
                None if self.bias_ih is None else self.bias_ih._data,
                None if self.bias_hh is None else self.bias_hh._data))
            return (getitem(h_next, 0), getitem(c_next, 0)) if unbatched else (h_next, c_next)
        gates = linear(input, self.weight_ih, self.bias_ih) + linear(h, self.weight_hh, self.bias_hh)
        n = self.hidden_size
        i = pointwise.sigmoid(getitem(gates, (slice(None), slice(0, n))))
        f = pointwise.sigmoid(getitem(gates, (slice(None), slice(n, 2 * n))))
        g = pointwise.tanh(getitem(gates, (slice(None), slice(2 * n, 3 * n))))
        o = pointwise.sigmoid(getitem(gates, (slice(None), slice(3 * n, 4 * n))))
        c_next = f * c + i * g
        h_next = o * pointwise.tanh(c_next)
        if unbatched:
            return getitem(h_next, 0), getitem(c_next, 0)
        return h_next, c_next

    def unroll(self, inputs: Tensor, hx: Optional[Tuple[Tensor, Tensor]] = None, keep: Any = None) -> Tensor:
        """The hidden states (T, B, H) of the cell stepped over inputs (T, B, input_size) from hx (zeros if None).

        keep, an optional (T, B) array, multiplies the state entering each step (0 where a sequence restarts).
        Equal to calling the cell T times, and much cheaper to differentiate.
        """
        if inputs.ndim != 3 or inputs.shape[-1] != self.input_size:
            raise ValueError(f"LSTMCell.unroll: expected input of shape (steps, batch, {self.input_size}), "
                             f"got {tuple(inputs.shape)}")
        if hx is None:
            zeros = creation.zeros(inputs.shape[1], self.hidden_size, dtype=inputs.dtype, device=inputs.device)
            hx = (zeros, zeros)
        return lstm_sequence(inputs, hx[0], hx[1], self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh, keep)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, bias={self.bias_ih is not None}"
