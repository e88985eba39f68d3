"""A tiny goal-reaching environment for the docs: `env.id: docs.examples.move_to_goal:MoveToGoal`."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class MoveToGoal(gym.Env):
    """Reach position 0 from a random start in [-1, 1] with steps of 0.1; -0.01 a step, +1 at the goal."""

    def __init__(self, max_steps: int = 50, render_mode: str | None = None):
        self.observation_space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.max_steps, self.render_mode = max_steps, render_mode

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.pos, self.steps = float(self.np_random.uniform(-1, 1)), 0
        return np.array([self.pos], dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.pos = float(np.clip(self.pos + (0.1 if action else -0.1), -2, 2))
        self.steps += 1
        reached = abs(self.pos) < 0.05
        return (np.array([self.pos], dtype=np.float32), 1.0 if reached else -0.01, reached,
                self.steps >= self.max_steps, {})
