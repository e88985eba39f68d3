"""V-trace: off-policy value targets and policy-gradient advantages for trajectories of a lagging policy.

Espeholt et al. 2018 (IMPALA), section 4: trajectories come from a
behaviour policy mu (the actor's parameters at the start of its rollout),
the learner improves the target policy pi (the shared parameters now). With
truncated importance weights rho_t = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t))
and c_t = min(c_bar, pi / mu), the n-step V-trace target is

    v_s = V(x_s) + sum_{t=s}^{s+n-1} gamma^(t-s) (prod_{i=s}^{t-1} c_i) delta_t,
    delta_t = rho_t (r_t + gamma V(x_{t+1}) - V(x_t)),

computed backwards as v_s - V(x_s) = delta_s + gamma c_s (v_{s+1} - V(x_{s+1})),
and the policy gradient's advantage at s is rho_s (r_s + gamma v_{s+1} - V(x_s)).
On-policy (pi = mu, rho_bar and c_bar >= 1) v_s is the n-step return, the
target A3C uses (`returns.gae` with lambda = 1). An episode's end at t
(dones[t] = 1) stops the bootstrap and the sums there, as in `gae`.
"""
from __future__ import annotations

import numpy as np


def vtrace(log_rhos: np.ndarray, rewards: np.ndarray, dones: np.ndarray, values: np.ndarray, gamma: float,
           rho_bar: float = 1.0, c_bar: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(v_s targets, policy-gradient advantages), both (T, E), for a (T, E) rollout.

    log_rhos are log pi(a_t|x_t) - log mu(a_t|x_t) of the actions taken; values is (T+1, E): V(x_0..x_T) under
    the current value function, the last row the bootstrap.
    """
    rhos = np.exp(np.minimum(log_rhos, 50.0))  # exp of a huge ratio is truncated anyway: keep it finite
    clipped_rhos = np.minimum(rho_bar, rhos)
    cs = np.minimum(c_bar, rhos)
    discounts = gamma * (1.0 - dones)
    deltas = clipped_rhos * (rewards + discounts * values[1:] - values[:-1])
    corrections = np.empty_like(deltas)  # v_s - V(x_s), built backwards from v_T - V(x_T) = 0
    carried = np.zeros_like(deltas[0])
    for t in range(deltas.shape[0] - 1, -1, -1):
        carried = deltas[t] + discounts[t] * cs[t] * carried
        corrections[t] = carried
    vs = values[:-1] + corrections
    next_vs = np.concatenate([vs[1:], values[-1:]])
    advantages = clipped_rhos * (rewards + discounts * next_vs - values[:-1])
    return vs, advantages
