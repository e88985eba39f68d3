"""Categorical and Normal: log_prob and entropy values (gradients are in test_core_gradcheck), sampling, checks."""
from __future__ import annotations

import math

import numpy as np
import pytest

import framework as F
from framework.distributions import Categorical, Normal


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_categorical_values():
    logits = np.array([[1.0, 2.0, 0.5], [0.0, 0.0, -3.0]], np.float32)
    dist = Categorical(logits=F.tensor(logits))
    logp = log_softmax(logits)
    assert dist.batch_shape == (2,) and dist.num_events == 3
    np.testing.assert_allclose(dist.logits.numpy(), logp, rtol=1e-6)
    np.testing.assert_allclose(dist.probs.numpy(), np.exp(logp), rtol=1e-6)
    np.testing.assert_allclose(dist.log_prob(F.tensor([2, 0])).numpy(), [logp[0, 2], logp[1, 0]], rtol=1e-6)
    np.testing.assert_allclose(dist.entropy().numpy(), -(np.exp(logp) * logp).sum(-1), rtol=1e-6)
    both = dist.log_prob(F.tensor([[0], [1]]))  # broadcasts (2, 1) against batch (2,) -> (2, 2)
    np.testing.assert_allclose(both.numpy(), [[logp[0, 0], logp[1, 0]], [logp[0, 1], logp[1, 1]]], rtol=1e-6)
    from_probs = Categorical(probs=F.tensor([[2.0, 2.0, 4.0]]))
    np.testing.assert_allclose(from_probs.probs.numpy(), [[0.25, 0.25, 0.5]])
    np.testing.assert_allclose(from_probs.log_prob(F.tensor([2])).numpy(), [math.log(0.5)], rtol=1e-6)


def test_categorical_masked_logits_have_finite_entropy():
    dist = Categorical(logits=F.tensor([[0.0, -np.inf, 0.0]], requires_grad=True))
    entropy = dist.entropy()
    assert entropy.item() == pytest.approx(math.log(2), rel=1e-6)


def test_categorical_sampling_frequencies():
    F.manual_seed(0)
    probs = np.array([0.1, 0.6, 0.3])
    samples = Categorical(probs=F.tensor(probs)).sample((20000,)).numpy()
    assert samples.dtype == np.int64 and samples.shape == (20000,)
    np.testing.assert_allclose(np.bincount(samples, minlength=3) / 20000, probs, atol=0.015)
    batch = Categorical(logits=F.zeros(4, 2)).sample()
    assert batch.shape == (4,) and not batch.requires_grad
    F.manual_seed(5)
    a = Categorical(logits=F.zeros(8, 3)).sample().numpy().copy()
    F.manual_seed(5)
    assert np.array_equal(a, Categorical(logits=F.zeros(8, 3)).sample().numpy())


@pytest.mark.parametrize("call, message", [
    (lambda: Categorical(), "exactly one of probs or logits"),
    (lambda: Categorical(logits=F.tensor(1.0)), "at least one axis"),
    (lambda: Categorical(logits=F.tensor([np.nan, 1.0])), "NaN"),
    (lambda: Categorical(probs=F.tensor([-0.1, 1.1])), "non-negative"),
    (lambda: Categorical(logits=F.zeros(2, 3)).log_prob(F.tensor([0, 3])), r"integers in \[0, 3\)"),
    (lambda: Categorical(logits=F.zeros(2, 3)).log_prob(F.tensor([0.5, 1.0])), "integers"),
    (lambda: Categorical(logits=F.zeros(2, 3)).log_prob(F.tensor([0, 1, 2])), "does not broadcast"),
    (lambda: Normal(F.zeros(2), F.tensor([1.0, 0.0])), "must be positive"),
    (lambda: Normal(F.zeros(2), F.ones(3)), "do not broadcast"),
    (lambda: Normal(F.zeros(2, dtype=F.int64), 1.0), "floating point"),
])
def test_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_normal_values():
    loc = np.array([[0.0, 1.0], [2.0, -1.0]])
    scale = np.array([1.0, 0.5])
    dist = Normal(F.tensor(loc), F.tensor(scale))
    x = np.array([[0.5, 1.0], [1.0, 0.0]])
    expected = -((x - loc) ** 2) / (2 * scale ** 2) - np.log(scale) - 0.5 * math.log(2 * math.pi)
    np.testing.assert_allclose(dist.log_prob(F.tensor(x)).numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(dist.entropy().numpy(), np.broadcast_to(0.5 + 0.5 * math.log(2 * math.pi)
                                                                       + np.log(scale), (2, 2)), rtol=1e-12)
    assert dist.batch_shape == (2, 2) and dist.mean is dist.loc and dist.stddev is dist.scale
    np.testing.assert_allclose(dist.variance.numpy(), scale ** 2)
    assert Normal(0.0, 2.0).log_prob(0.0).item() == pytest.approx(-math.log(2.0) - 0.5 * math.log(2 * math.pi))


def test_normal_sampling():
    F.manual_seed(1)
    dist = Normal(F.tensor([1.0, -2.0]), F.tensor([0.5, 2.0]))
    samples = dist.sample((20000,)).numpy()
    assert samples.shape == (20000, 2) and samples.dtype == np.float32
    np.testing.assert_allclose(samples.mean(0), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(samples.std(0), [0.5, 2.0], rtol=0.03)
    loc = F.zeros(3, requires_grad=True)
    assert not Normal(loc, 1.0).sample().requires_grad
    drawn = Normal(loc, 1.0).rsample()
    drawn.sum().backward()
    assert loc.grad.numpy().tolist() == [1.0, 1.0, 1.0]
