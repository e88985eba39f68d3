"""The diagnostics PPO users read, against their definitions."""
import numpy as np
import pytest

from framework.rl.diagnostics import approx_kl, clip_fraction, explained_variance


def test_explained_variance_is_one_for_a_perfect_value_zero_for_the_mean_negative_for_worse():
    rng = np.random.default_rng(0)
    targets = rng.normal(size=(5, 4))
    assert explained_variance(targets, targets) == pytest.approx(1.0)
    assert explained_variance(np.full_like(targets, targets.mean()), targets) == pytest.approx(0.0, abs=1e-12)
    assert explained_variance(-targets, targets) < 0
    noisy = targets + rng.normal(scale=0.5, size=targets.shape)
    assert explained_variance(noisy, targets) == pytest.approx(1 - np.var(targets - noisy) / np.var(targets))
    assert explained_variance(np.zeros(3), np.ones(3)) == 0.0  # targets that do not vary: finite, 0


def test_approx_kl_estimates_the_kl_from_samples_of_the_acting_policy():
    """Samples of a categorical mu, the log ratios to another pi: the estimate converges to KL(mu || pi)."""
    rng = np.random.default_rng(1)
    mu, pi = np.array([0.5, 0.3, 0.2]), np.array([0.4, 0.4, 0.2])
    actions = rng.choice(3, size=400_000, p=mu)
    estimate = approx_kl(np.log(pi[actions] / mu[actions]))
    assert estimate == pytest.approx(float(np.sum(mu * np.log(mu / pi))), rel=0.02)
    assert approx_kl(np.zeros(10)) == 0.0 and np.isfinite(approx_kl(np.array([1e4, -1e4])))


def test_clip_fraction_counts_the_ratios_outside_the_clip_range():
    ratios = np.array([0.7, 0.85, 1.0, 1.15, 1.3])
    assert clip_fraction(np.log(ratios), 0.2) == pytest.approx(2 / 5)
    assert clip_fraction(np.log(ratios), 0.1) == pytest.approx(4 / 5)
