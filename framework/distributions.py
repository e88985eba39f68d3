"""Probability distributions for policies: Categorical (discrete actions) and Normal (continuous), as torch's.

Both are batched (parameters carry a batch shape), differentiable in their
parameters through log_prob and entropy, and sample from framework's global
generator without recording gradients (Normal.rsample is the reparameterised,
differentiable sample). Arguments are validated as torch does by default.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from . import random
from .device import array_module
from .grad_mode import MODE
from .ops import pointwise, reduction
from .ops._util import tensor_arg, unbroadcast
from .tensor import Tensor, node, wrap

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _shape(sample_shape: Any) -> tuple:
    if isinstance(sample_shape, int):
        return (sample_shape,)
    return tuple(int(n) for n in sample_shape)


class Categorical:
    """A distribution over {0, ..., K-1} for each batch element, from `logits` or `probs` (last axis K).

    `logits` are stored normalised (log-probabilities); `probs` is their exp.
    """

    def __init__(self, probs: Optional[Any] = None, logits: Optional[Any] = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Categorical: pass exactly one of probs or logits")
        if probs is not None:
            probs = tensor_arg(probs)
            data = probs._data
            if data.ndim < 1 or data.dtype.kind != "f":
                raise ValueError(f"Categorical: probs must be a floating tensor with at least one axis, got "
                                 f"shape {tuple(data.shape)} and dtype {data.dtype}")
            if not bool((data >= 0).all()) or not bool((data.sum(axis=-1) > 0).all()):
                raise ValueError("Categorical: probs must be non-negative with a positive sum along the last axis")
            self.probs = probs / reduction.sum(probs, -1, keepdims=True)
            eps = float(np.finfo(data.dtype).eps)
            self.logits = pointwise.log(pointwise.clamp(self.probs, eps, 1 - eps))
        else:
            logits = tensor_arg(logits)
            data = logits._data
            if data.ndim < 1 or data.dtype.kind != "f":
                raise ValueError(f"Categorical: logits must be a floating tensor with at least one axis, got "
                                 f"shape {tuple(data.shape)} and dtype {data.dtype}")
            if bool(array_module(data).isnan(data).any()):
                raise ValueError(f"Categorical: logits of shape {tuple(data.shape)} contain NaN")
            self.logits = reduction.log_softmax(logits, -1)
            self._probs: Optional[Tensor] = None

    @property
    def probs(self) -> Tensor:
        """Event probabilities (differentiable)."""
        if self._probs is None:
            self._probs = pointwise.exp(self.logits)
        return self._probs

    @probs.setter
    def probs(self, value: Tensor) -> None:
        self._probs = value

    @property
    def batch_shape(self) -> tuple:
        return self.logits.shape[:-1]

    @property
    def num_events(self) -> int:
        return self.logits.shape[-1]

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        """int64 indices of shape sample_shape + batch_shape (no gradient)."""
        logits = self.logits._data
        probs = array_module(logits).exp(logits) if self._probs is None else self._probs._data
        shape = _shape(sample_shape) + tuple(probs.shape[:-1])
        u = random.uniform(shape, probs.dtype, device=self.logits.device)
        cdf = probs.cumsum(axis=-1)
        index = (cdf < (u * cdf[..., -1])[..., None]).sum(axis=-1)
        return wrap(array_module(index).minimum(index, probs.shape[-1] - 1).astype(np.int64))

    def log_prob(self, value: Any) -> Tensor:
        """log P(value) for integer `value` broadcastable with batch_shape."""
        logp = self.logits
        data = logp._data
        xp = array_module(data)
        index = value._data if isinstance(value, Tensor) else xp.asarray(value)
        k = data.shape[-1]
        if index.size:
            if isinstance(index, np.ndarray):  # the ufunc reductions skip min()/max()'s Python wrappers
                low, high = np.minimum.reduce(index, axis=None), np.maximum.reduce(index, axis=None)
            else:
                low, high = index.min(), index.max()
            if low < 0 or high >= k or (index.dtype.kind == "f" and bool((index % 1 != 0).any())):
                raise ValueError(f"Categorical.log_prob: values must be integers in [0, {k}), got values from "
                                 f"{low} to {high}")
        batch = data.shape[:-1]
        if index.shape == batch:
            shape = batch
            table = data
        else:
            try:
                shape = tuple(np.broadcast_shapes(index.shape, batch))
            except ValueError:
                raise ValueError(f"Categorical.log_prob: value shape {tuple(index.shape)} does not broadcast with "
                                 f"the batch shape {tuple(batch)}") from None
            table = xp.broadcast_to(data, shape + (k,))
            index = xp.broadcast_to(index, shape)
        rows = xp.arange(index.size)
        flat_index = index.reshape(-1).astype(np.int64, copy=False)
        out = table.reshape(-1, k)[rows, flat_index].reshape(shape)
        if not (logp._rg and MODE.enabled):
            return wrap(out)
        source_shape = data.shape

        def log_prob_backward(g: Any) -> tuple:
            full = xp.zeros((index.size, k), g.dtype)
            full[rows, flat_index] = g.reshape(-1)
            return (unbroadcast(full.reshape(shape + (k,)), source_shape),)
        return node(out, log_prob_backward, (logp,))

    def entropy(self) -> Tensor:
        """-sum(p log p) over the last axis, shape batch_shape."""
        logp = self.logits
        data = logp._data
        xp = array_module(data)
        clamped = xp.maximum(data, np.finfo(data.dtype).min)
        p = xp.exp(clamped)
        out = -(p * clamped).sum(axis=-1)
        if not (logp._rg and MODE.enabled):
            return wrap(out)

        def entropy_backward(g: Any) -> tuple:
            return (g[..., None] * (-p * (clamped + 1)),)
        return node(out, entropy_backward, (logp,))

    def __repr__(self) -> str:
        return f"Categorical(logits: {tuple(self.logits.shape)})"


class Normal:
    """N(loc, scale^2) for each batch element; loc and scale are tensors or numbers, broadcast together."""

    def __init__(self, loc: Any, scale: Any) -> None:
        self.loc, self.scale = tensor_arg(loc), tensor_arg(scale)
        loc_data, scale_data = self.loc._data, self.scale._data
        if loc_data.dtype.kind != "f" or scale_data.dtype.kind != "f":
            raise ValueError(f"Normal: loc and scale must be floating point, got {loc_data.dtype} and "
                             f"{scale_data.dtype}")
        try:
            self.batch_shape = tuple(np.broadcast_shapes(loc_data.shape, scale_data.shape))
        except ValueError:
            raise ValueError(f"Normal: loc shape {tuple(loc_data.shape)} and scale shape {tuple(scale_data.shape)} "
                             f"do not broadcast") from None
        if not bool((scale_data > 0).all()):
            raise ValueError(f"Normal: scale (shape {tuple(scale_data.shape)}) must be positive, found values "
                             f"<= 0 or NaN")

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.scale * self.scale

    def _noise(self, sample_shape: Sequence[int]) -> Any:
        shape = _shape(sample_shape) + self.batch_shape
        dtype = np.result_type(self.loc._data.dtype, self.scale._data.dtype)
        return random.standard_normal(shape, dtype, self.loc.device)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        """Samples of shape sample_shape + batch_shape (no gradient)."""
        return wrap(self.loc._data + self.scale._data * self._noise(sample_shape))

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        """Reparameterised samples loc + scale * eps: differentiable in loc and scale."""
        return self.loc + self.scale * wrap(self._noise(sample_shape))

    def log_prob(self, value: Any) -> Tensor:
        """log density at `value` (broadcast with the batch shape)."""
        value = tensor_arg(value)
        x, mu, sigma = value._data, self.loc._data, self.scale._data
        z = (x - mu) / sigma
        log_sigma = array_module(sigma).log(sigma)
        out = -0.5 * (z * z) - log_sigma - _HALF_LOG_2PI
        inputs = (value, self.loc, self.scale)
        if not (MODE.enabled and any(t._rg for t in inputs)):
            return wrap(out)
        shapes = [t._data.shape for t in inputs]
        flags = [t._rg for t in inputs]

        def log_prob_backward(g: Any) -> tuple:
            dz = g * z / sigma
            grads = (-dz, dz, g * (z * z - 1) / sigma)
            return tuple(unbroadcast(d, s) if f else None for d, s, f in zip(grads, shapes, flags))
        return node(out, log_prob_backward, inputs)

    def entropy(self) -> Tensor:
        """0.5 + 0.5 log(2 pi) + log(scale), shape batch_shape."""
        sigma = self.scale._data
        xp = array_module(sigma)
        out = xp.broadcast_to(xp.log(sigma) + (0.5 + _HALF_LOG_2PI), self.batch_shape).copy()
        if not (self.scale._rg and MODE.enabled):
            return wrap(out)
        shape = sigma.shape

        def entropy_backward(g: Any) -> tuple:
            return (unbroadcast(g / sigma, shape),)
        return node(out, entropy_backward, (self.scale,))

    def __repr__(self) -> str:
        return f"Normal(loc: {tuple(self.loc.shape)}, scale: {tuple(self.scale.shape)})"

