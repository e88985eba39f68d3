"""Generalized state-dependent exploration (gSDE: Raffin et al. 2021, "Smooth Exploration for Robotic
Reinforcement Learning"), as Stable-Baselines3's StateDependentNoiseDistribution with the defaults its A2C and
PPO use (`use_sde=True`: a full std matrix, exp, no squashing, features not learned through the noise).

A model with gSDE (`model.sde`) gives a Box policy output of `size + latent` columns, the Normal's mean and then
the policy's last features (detached: the exploration does not train them), and its `log_std` is a
(latent, size) matrix. An action is mean + latent @ W, where W ~ N(0, exp(log_std)^2) element-wise is an
exploration matrix drawn for each env and kept for several steps (`model.sde_sample_freq`; by default a whole
rollout): the noise is a function of the state, the same state getting the same push, rather than white
noise at every step. For one latent vector the action is Normal(mean, sqrt(latent^2 @ exp(log_std)^2 +
EPSILON)) per component, which log-probabilities, entropies and the behaviour policy use.

`rl.spaces.ActionHead` calls these for a Normal policy whose log_std has two axes; a greedy action is the mean.
"""
from __future__ import annotations

from typing import Any

import framework
from framework.device import array_module
from framework.random import standard_normal

EPSILON = 1e-6
"""Added to the variance, as Stable-Baselines3's StateDependentNoiseDistribution does."""


def latent_size(log_std: Any) -> int:
    """The width of the features the exploration reads: log_std's first axis when it is a (latent, size) matrix,
    0 for a Normal with a log_std per component (or none)."""
    return 0 if log_std is None or len(log_std.shape) != 2 else int(log_std.shape[0])


def split(head: Any, size: int) -> tuple[Any, Any]:
    """(mean, latent features) of a gSDE policy output (batch, size + latent), tensors or arrays."""
    return head[:, :size], head[:, size:]


def scale(latent: Any, log_std: Any) -> Any:
    """The Normal's standard deviation (batch, size) for latent features (batch, latent): sqrt(latent^2 @
    exp(log_std)^2 + EPSILON); tensors (with grad to log_std) or arrays."""
    if isinstance(latent, framework.Tensor):
        return framework.sqrt((latent * latent) @ (framework.exp(log_std) ** 2) + EPSILON)
    xp = array_module(latent)
    return xp.sqrt((latent * latent) @ (xp.exp(log_std) ** 2) + EPSILON)


def draw(leading: tuple[int, ...], latent: int, size: int, dtype: Any, device: str, every: int = 0) -> Any:
    """Standard-normal exploration matrices of shape (*leading, latent, size), on device. With `every` > 0, the
    first axis of leading is time: one draw for each `every` steps, repeated along it (a rollout's (T, E) noise
    keeps each env's matrix for `every` steps; Stable-Baselines3's sde_sample_freq)."""
    if every <= 0 or len(leading) < 2:
        return standard_normal((*leading, latent, size), dtype, device)
    steps = leading[0]
    draws = standard_normal(((steps + every - 1) // every, *leading[1:], latent, size), dtype, device)
    return array_module(draws).repeat(draws, every, axis=0)[:steps]


def actions(head: Any, noise: Any, log_std: Any, size: int) -> Any:
    """mean + latent @ (exp(log_std) * noise) for a policy output head (batch, size + latent) and one
    standard-normal matrix per row (batch, latent, size); arrays."""
    mean, latent = split(head, size)
    xp = array_module(head)
    weights = xp.exp(log_std) * noise
    return mean + (latent[:, None, :] @ weights)[:, 0, :]
