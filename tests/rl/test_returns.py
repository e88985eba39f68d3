"""GAE(lambda): n-step returns at lambda = 1, and the definition term by term."""
import numpy as np

from framework.rl.returns import gae


def test_gae_with_lambda_one_gives_n_step_returns_minus_values():
    rewards = np.array([[1.0], [1.0], [1.0]], dtype=np.float32)
    dones = np.array([[0.0], [1.0], [0.0]], dtype=np.float32)
    values = np.array([[0.5], [0.4], [0.3], [2.0]], dtype=np.float32)
    adv, targets = gae(rewards, dones, values, gamma=0.9, lam=1.0)
    # t=2 bootstraps from V=2.0; t=1 ends an episode (no bootstrap); t=0 runs into it.
    np.testing.assert_allclose(targets[:, 0], [1 + 0.9 * 1, 1, 1 + 0.9 * 2.0], rtol=1e-6)
    np.testing.assert_allclose(adv, targets - values[:-1], rtol=1e-6)


def test_gae_matches_its_definition():
    rng = np.random.default_rng(0)
    rewards = rng.random((6, 2)).astype(np.float32)
    dones = (rng.random((6, 2)) < 0.3).astype(np.float32)
    values = rng.random((7, 2)).astype(np.float32)
    gamma, lam = 0.97, 0.9
    adv, _ = gae(rewards, dones, values, gamma, lam)
    expected = np.zeros((6, 2))
    for e in range(2):
        for t in range(6):
            total, weight = 0.0, 1.0
            for k in range(t, 6):
                delta = rewards[k, e] + gamma * (1 - dones[k, e]) * values[k + 1, e] - values[k, e]
                total += weight * delta
                if dones[k, e]:
                    break
                weight *= gamma * lam
            expected[t, e] = total
    np.testing.assert_allclose(adv, expected, rtol=1e-5, atol=1e-6)
