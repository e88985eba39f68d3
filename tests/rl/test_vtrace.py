"""V-trace: the paper's definition term by term, the n-step return on-policy, the truncations."""
import numpy as np
import pytest

from framework.rl.returns import gae
from framework.rl.vtrace import vtrace


def _rollout(seed: int, T: int = 7, E: int = 3):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(T, E))
    dones = (rng.random((T, E)) < 0.2).astype(np.float64)
    values = rng.normal(size=(T + 1, E))
    log_rhos = rng.normal(scale=0.7, size=(T, E))
    return log_rhos, rewards, dones, values


def _definition(log_rhos, rewards, dones, values, gamma, rho_bar, c_bar):
    """Espeholt et al. 2018, eq. 1, summed term by term (an episode's end cuts the sums and the bootstrap), and
    the advantage of section 4.2: rho_s (r_s + gamma v_{s+1} - V(x_s))."""
    T, E = rewards.shape
    ratios = np.exp(log_rhos)
    vs = np.zeros((T, E))
    for e in range(E):
        for s in range(T):
            total, weight = 0.0, 1.0  # weight: gamma^(t-s) prod_{i<t} c_i, up to the first end
            for t in range(s, T):
                delta = min(rho_bar, ratios[t, e]) * (rewards[t, e] + gamma * (1 - dones[t, e]) * values[t + 1, e]
                                                      - values[t, e])
                total += weight * delta
                if dones[t, e]:
                    break
                weight *= gamma * min(c_bar, ratios[t, e])
            vs[s, e] = values[s, e] + total
    next_vs = np.concatenate([vs[1:], values[-1:]])
    advantages = np.minimum(rho_bar, ratios) * (rewards + gamma * (1 - dones) * next_vs - values[:-1])
    return vs, advantages


@pytest.mark.parametrize("rho_bar, c_bar", [(1.0, 1.0), (2.0, 0.5), (0.7, 1.5)])
def test_vtrace_matches_the_papers_definition(rho_bar, c_bar):
    for seed in range(3):
        log_rhos, rewards, dones, values = _rollout(seed)
        vs, advantages = vtrace(log_rhos, rewards, dones, values, 0.95, rho_bar, c_bar)
        expected_vs, expected_adv = _definition(log_rhos, rewards, dones, values, 0.95, rho_bar, c_bar)
        np.testing.assert_allclose(vs, expected_vs, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(advantages, expected_adv, rtol=1e-10, atol=1e-12)


def test_on_policy_vtrace_is_the_n_step_return():
    """pi = mu with rho_bar, c_bar >= 1: the targets are A3C's n-step returns and the advantages its own."""
    _, rewards, dones, values = _rollout(4, T=20, E=5)
    vs, advantages = vtrace(np.zeros_like(rewards), rewards, dones, values, 0.99)
    n_step_adv, n_step_targets = gae(rewards, dones, values, 0.99, 1.0)
    np.testing.assert_allclose(vs, n_step_targets, rtol=1e-12)
    np.testing.assert_allclose(advantages, n_step_adv, rtol=1e-12, atol=1e-12)


def test_huge_importance_ratios_are_truncated_and_stay_finite():
    log_rhos, rewards, dones, values = _rollout(5)
    vs, advantages = vtrace(np.full_like(log_rhos, 1e4), rewards, dones, values, 0.9, 1.0, 1.0)
    on_policy_vs, on_policy_adv = vtrace(np.zeros_like(log_rhos), rewards, dones, values, 0.9, 1.0, 1.0)
    np.testing.assert_allclose(vs, on_policy_vs)  # ratios of e^10000 truncated to 1: as if on-policy
    np.testing.assert_allclose(advantages, on_policy_adv)


def test_a_policy_that_never_takes_the_actions_keeps_its_values():
    """rho = c = 0: no correction reaches the targets, v_s = V(x_s), and the advantages vanish."""
    log_rhos, rewards, dones, values = _rollout(6)
    vs, advantages = vtrace(np.full_like(log_rhos, -1e4), rewards, dones, values, 0.9)
    np.testing.assert_allclose(vs, values[:-1])
    np.testing.assert_allclose(advantages, 0.0, atol=1e-300)
