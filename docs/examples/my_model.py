"""A user's own network for the docs: `model.factory: docs.examples.my_model:build`."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from framework import nn
from framework.rl import ActorCriticBase


class TwoLayer(ActorCriticBase):
    """Two tanh layers of model.kwargs.width units (default 32), a policy head and a value head."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, width: int):
        super().__init__()
        size = int(np.prod(observation_space.shape))
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(size, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh())
        self.pi = nn.Linear(width, int(action_space.n))  # Discrete actions: one logit each
        self.v = nn.Linear(width, 1)

    def forward(self, obs: Any, state: Any = None) -> tuple[Any, Any, Any]:
        h = self.body(obs)
        return self.pi(h), self.v(h)[:, 0], None  # (B, n) logits, (B,) values, no recurrent state


def build(observation_space: gym.Space, action_space: gym.Space, model_section: dict) -> TwoLayer:
    return TwoLayer(observation_space, action_space, model_section["kwargs"].get("width", 32))
