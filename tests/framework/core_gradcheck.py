"""Finite-difference gradient checks for framework ops (float64, central differences)."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

import framework as F


def numeric_grads(fn: Callable[..., F.Tensor], arrays: Sequence[np.ndarray], upstream: np.ndarray,
                  eps: float = 1e-6) -> list:
    """d sum(fn(*arrays) * upstream) / d arrays[i] by central differences."""
    def value(values: Sequence[np.ndarray]) -> float:
        with F.no_grad():
            out = fn(*[F.tensor(v) for v in values])
        return float(np.sum(out.numpy() * upstream))

    grads = []
    for i, array in enumerate(arrays):
        grad = np.zeros_like(array)
        for idx in np.ndindex(array.shape):
            plus = [a.copy() for a in arrays]
            minus = [a.copy() for a in arrays]
            plus[i][idx] += eps
            minus[i][idx] -= eps
            grad[idx] = (value(plus) - value(minus)) / (2 * eps)
        grads.append(grad)
    return grads


def check_grads(fn: Callable[..., F.Tensor], *arrays: np.ndarray, seed: int = 0, atol: float = 1e-6,
                rtol: float = 1e-5) -> None:
    """Assert that backward() through fn matches finite differences for every input."""
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    inputs = [F.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*inputs)
    upstream = np.random.default_rng(seed).standard_normal(out.shape)
    out.backward(F.tensor(upstream))
    expected = numeric_grads(fn, arrays, upstream)
    for i, (t, want) in enumerate(zip(inputs, expected)):
        assert t.grad is not None, f"input {i} got no gradient"
        assert t.grad.shape == t.shape, f"input {i}: grad shape {t.grad.shape} != {t.shape}"
        np.testing.assert_allclose(t.grad.numpy(), want, atol=atol, rtol=rtol, err_msg=f"input {i}")
