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
from .ops import pointwise, reduction
from .ops._util import tensor_arg, unbroadcast
from .ops.primitive import Primitive, apply, broadcast_shape
from .tensor import Tensor, wrap

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _check_values(index: Any, k: int) -> None:
    """ValueError unless every value is an integer in [0, k)."""
    if not index.size:
        return
    if isinstance(index, np.ndarray):  # the ufunc reductions skip min()/max()'s Python wrappers
        low, high = np.minimum.reduce(index, None), np.maximum.reduce(index, None)
    else:
        low, high = index.min(), index.max()
    if low < 0 or high >= k or (index.dtype.kind == "f" and bool((index % 1 != 0).any())):
        raise ValueError(f"Categorical.log_prob: values must be integers in [0, {k}), got values from {low} to "
                         f"{high}")


def _categorical_log_prob_forward(logp: Any, index: Any) -> Any:
    """log P(index) from normalised log-probabilities (last axis K), broadcasting index with the batch shape."""
    xp = array_module(logp)
    index = xp.asarray(index)
    k = logp.shape[-1]
    _check_values(index, k)
    if logp.ndim == 2 and index.shape == logp.shape[:1] and index.dtype.kind in "iu":  # one row per sample
        return logp[xp.arange(index.shape[0]), index]
    table, index, shape = _broadcast_table(logp, index)
    return table.reshape(-1, k)[xp.arange(index.size), index.reshape(-1).astype(np.int64, copy=False)].reshape(shape)


def _broadcast_table(logp: Any, index: Any) -> tuple:
    """(log-probabilities and index broadcast to one batch shape, that shape)."""
    batch = logp.shape[:-1]
    if index.shape == batch:
        return logp, index, batch
    try:
        shape = tuple(np.broadcast_shapes(index.shape, batch))
    except ValueError:
        raise ValueError(f"Categorical.log_prob: value shape {tuple(index.shape)} does not broadcast with "
                         f"the batch shape {tuple(batch)}") from None
    xp = array_module(logp)
    return xp.broadcast_to(logp, shape + logp.shape[-1:]), xp.broadcast_to(index, shape), shape


def _categorical_log_prob_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    logp, index = args
    xp = array_module(g)
    index = xp.asarray(index)
    k = logp.shape[-1]
    if logp.ndim == 2 and index.shape == logp.shape[:1] and index.dtype.kind in "iu":  # one row per sample
        full = xp.zeros(logp.shape, g.dtype)
        full[xp.arange(index.shape[0]), index] = g
        return full, None
    _, index, shape = _broadcast_table(logp, index)
    full = xp.zeros((index.size, k), g.dtype)
    full[xp.arange(index.size), index.reshape(-1).astype(np.int64, copy=False)] = g.reshape(-1)
    return unbroadcast(full.reshape(shape + (k,)), logp.shape), None


_LOWEST: dict = {}


def _clamped(logp: Any) -> Any:
    """Log-probabilities with -inf raised to the lowest finite value, so 0 * log 0 counts as 0."""
    lowest = _LOWEST.get(logp.dtype)
    if lowest is None:
        lowest = _LOWEST[logp.dtype] = np.finfo(logp.dtype).min
    return np.maximum(logp, lowest)


def _categorical_entropy_forward(logp: Any) -> Any:
    """-sum(p log p) over the last axis."""
    clamped = _clamped(logp)
    terms = np.exp(clamped)
    terms *= clamped
    total = np.add.reduce(terms, -1) if isinstance(terms, np.ndarray) else terms.sum(axis=-1)
    return -total


def _categorical_entropy_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    clamped = _clamped(args[0])
    return (g[..., None] * (-np.exp(clamped) * (clamped + 1)),)


def _normal_log_prob_forward(x: Any, mu: Any, sigma: Any) -> Any:
    z = (x - mu) / sigma
    return -0.5 * (z * z) - np.log(sigma) - _HALF_LOG_2PI


def _normal_log_prob_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    x, mu, sigma = args
    z = (x - mu) / sigma
    dz = g * z / sigma
    grads = (-dz, dz, g * (z * z - 1) / sigma)
    return tuple(unbroadcast(d, a.shape) if need else None for d, a, need in zip(grads, args, needs))


def _normal_entropy_forward(sigma: Any, batch_shape: tuple) -> Any:
    """0.5 + 0.5 log(2 pi) + log(sigma), broadcast to the batch shape."""
    xp = array_module(sigma)
    return xp.broadcast_to(xp.log(sigma) + (0.5 + _HALF_LOG_2PI), batch_shape).copy()


def _normal_entropy_backward(needs: tuple, args: tuple, out: Any, g: Any) -> tuple:
    sigma = args[0]
    return unbroadcast(g / sigma, sigma.shape), None


CATEGORICAL_LOG_PROB = Primitive("categorical_log_prob", _categorical_log_prob_forward, _categorical_log_prob_backward,
                                 shape=lambda logp, index: broadcast_shape(index, logp[:-1]))
CATEGORICAL_ENTROPY = Primitive("categorical_entropy", _categorical_entropy_forward, _categorical_entropy_backward,
                                shape=lambda logp: logp[:-1])
NORMAL_LOG_PROB = Primitive("normal_log_prob", _normal_log_prob_forward, _normal_log_prob_backward,
                            shape=broadcast_shape)
NORMAL_ENTROPY = Primitive("normal_entropy", _normal_entropy_forward, _normal_entropy_backward,
                           shape=lambda sigma, batch_shape: batch_shape)


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
        return apply(CATEGORICAL_LOG_PROB, self.logits, tensor_arg(value))

    def entropy(self) -> Tensor:
        """-sum(p log p) over the last axis, shape batch_shape."""
        return apply(CATEGORICAL_ENTROPY, self.logits)

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
        return apply(NORMAL_LOG_PROB, tensor_arg(value), self.loc, self.scale)

    def entropy(self) -> Tensor:
        """0.5 + 0.5 log(2 pi) + log(scale), shape batch_shape."""
        return apply(NORMAL_ENTROPY, self.scale, broadcast_shape(self.loc.shape, self.scale.shape))

    def __repr__(self) -> str:
        return f"Normal(loc: {tuple(self.loc.shape)}, scale: {tuple(self.scale.shape)})"



class Bernoulli:
    """Independent Bernoulli(sigmoid(logits)) for each batch element, as torch's Bernoulli(logits=...)."""

    def __init__(self, logits: Any) -> None:
        self.logits = tensor_arg(logits)
        if self.logits._data.dtype.kind != "f":
            raise ValueError(f"Bernoulli: logits must be floating point, got {self.logits._data.dtype}")

    @property
    def batch_shape(self) -> tuple:
        return tuple(self.logits.shape)

    @property
    def probs(self) -> Tensor:
        return pointwise.sigmoid(self.logits)

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        """0/1 floats of shape sample_shape + batch_shape (no gradient)."""
        logits = self.logits._data
        u = random.uniform(_shape(sample_shape) + tuple(logits.shape), logits.dtype, device=self.logits.device)
        xp = array_module(logits)
        return wrap((u * (1.0 + xp.exp(-logits)) < 1.0).astype(logits.dtype))

    def log_prob(self, value: Any) -> Tensor:
        """value * logits - softplus(logits): log P(value) for 0/1 values, elementwise."""
        return tensor_arg(value) * self.logits - pointwise.softplus(self.logits)

    def entropy(self) -> Tensor:
        """softplus(logits) - p * logits, elementwise."""
        return pointwise.softplus(self.logits) - self.probs * self.logits

    def __repr__(self) -> str:
        return f"Bernoulli(logits: {tuple(self.logits.shape)})"
