"""Factories that `framework.train.run(env=..., model=...)` passes to workers by name (importable from tests/support)."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from framework.rl.model import ActorCritic


class ShortCartPole(CartPoleEnv):
    """CartPole as an Env class of a module (not a registered id)."""


def small_actor_critic(observation_space: gym.Space, action_space: gym.Space, model_section: dict[str, Any]) -> Any:
    """A3C's own actor-critic with one hidden layer of 16, whatever model.hidden says."""
    return ActorCritic(int(np.prod(observation_space.shape)), [16], "tanh", False, int(action_space.n), False)
