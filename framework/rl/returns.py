"""Targets for a value function and advantages for a policy gradient, from a rollout's rewards and values."""
from __future__ import annotations

import numpy as np


def gae(rewards: np.ndarray, dones: np.ndarray, values: np.ndarray, gamma: float,
        lam: float) -> tuple[np.ndarray, np.ndarray]:
    """GAE(lambda) advantages and value targets for a (T, E) rollout; values is (T+1, E) with the bootstrap last.

    lam = 1 gives the classic n-step return's advantages (A3C's), lam = 0 the one-step TD errors. An episode's end
    (dones[t] = 1) stops the bootstrap and the sum at step t (Schulman et al. 2016, eq. 16).
    """
    keep = 1.0 - dones
    adv = rewards + gamma * keep * values[1:] - values[:-1]  # the one-step TD errors, then summed back in time
    decay = gamma * lam * keep
    carried = np.empty_like(adv[0])
    for t in range(rewards.shape[0] - 2, -1, -1):
        np.multiply(decay[t], adv[t + 1], out=carried)
        adv[t] += carried
    return adv, adv + values[:-1]
