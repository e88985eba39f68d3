"""Probe environments: tiny envs whose right value and action are known, for the learning code (`probe_envs:NAME`).

After Andy Jones's "Debugging RL, without the agonizing pain": each isolates one thing the learning code must get
right, so a defect shows as a wrong number rather than as a slower curve. Observations are one float; each
episode is short; `VALUES` and `ACTIONS` give, for each probe, what a learner that got it right converges to
(gamma = GAMMA).

- ConstantReward: one step, reward 1, one action: V = 1 (the value loss, the episode end).
- ObservationReward: one step, observation +-1 at random, reward = the observation: V(+-1) = +-1 (the value
  depends on the observation).
- TwoStepDiscount: observation 0 then 1, reward 1 at the end of the second step: V(0) = gamma, V(1) = 1 (the
  discount, the bootstrap through a step, no bootstrap past an episode's end: an off-by-one in GAE or V-trace at
  episode ends moves them).
- ActionReward: one step, observation 0, reward +1 for action 1 and -1 for action 0: pick 1, V = 1 (the policy
  gradient's sign).
- ObservationActionReward: one step, observation +-1 at random, reward +1 for the action that matches it (1 for
  +1, 0 for -1), -1 otherwise: the policy and the value together.
- TimeLimitBootstrap: observation 0, reward 1 every step, never terminated but truncated by a time limit after
  5 steps: V = 1 / (1 - gamma), since a time limit is not an end (bootstrapping at truncation); a learner that
  treats truncation as termination learns the mean of the partial sums, about 3.7 at gamma 0.9.
- ContinuousObservationTarget: one step, observation +-1 at random, one continuous action in [-2, 2] rewarded
  -(action - 0.5 observation)^2: the Normal's mean goes to half the observation (`TARGETS`; the exploration of
  continuous actions, gSDE's among them). Its value depends on how much the policy still explores, so it has no
  entry in VALUES.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

GAMMA = 0.9


class _Probe(gym.Env):
    """One-float observations in [-1, 1], `actions` discrete actions, episodes of `length` steps."""

    actions, length = 1, 1

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(self.actions)
        self.t, self.x = 0, 0.0

    def _observe(self) -> np.ndarray:
        return np.array([self.x], dtype=np.float32)

    def _start(self) -> float:
        return 0.0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t, self.x = 0, self._start()
        return self._observe(), {}

    def reward(self, action: int) -> float:
        return 1.0

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        reward = self.reward(int(action))
        self.t += 1
        return self._observe(), reward, self.t >= self.length, False, {}


class _RandomSign(_Probe):
    def _start(self) -> float:
        return float(self.np_random.choice([-1.0, 1.0]))


class ConstantReward(_Probe):
    pass


class ObservationReward(_RandomSign):
    def reward(self, action: int) -> float:
        return self.x


class TwoStepDiscount(_Probe):
    length = 2

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        self.x = 1.0
        return self._observe(), float(self.t == 2), self.t == 2, False, {}


class ActionReward(_Probe):
    actions = 2

    def reward(self, action: int) -> float:
        return 1.0 if action == 1 else -1.0


class ObservationActionReward(_RandomSign):
    actions = 2

    def reward(self, action: int) -> float:
        return 1.0 if (action == 1) == (self.x > 0) else -1.0


class _Endless(_Probe):
    length = 10**9


class ContinuousObservationTarget(_RandomSign):
    def __init__(self) -> None:
        super().__init__()
        self.action_space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        reward = -float((np.asarray(action, dtype=np.float64).reshape(-1)[0] - TARGETS[self.x]) ** 2)
        return self._observe(), reward, True, False, {}


def TimeLimitBootstrap() -> gym.Env:
    """Reward 1 a step, truncated (never terminated) after 5 steps."""
    return gym.wrappers.TimeLimit(_Endless(), max_episode_steps=5)


VALUES: dict[str, dict[float, float]] = {
    "ConstantReward": {0.0: 1.0},
    "ObservationReward": {-1.0: -1.0, 1.0: 1.0},
    "TwoStepDiscount": {0.0: GAMMA, 1.0: 1.0},
    "ActionReward": {0.0: 1.0},
    "ObservationActionReward": {-1.0: 1.0, 1.0: 1.0},
    "TimeLimitBootstrap": {0.0: 1.0 / (1.0 - GAMMA)},
}
"""The converged V(observation) of each probe."""

ACTIONS: dict[str, dict[float, int]] = {
    "ActionReward": {0.0: 1},
    "ObservationActionReward": {-1.0: 0, 1.0: 1},
}
"""The right action for each observation, where a probe has a choice."""

TARGETS: dict[float, float] = {-1.0: -0.5, 1.0: 0.5}
"""ContinuousObservationTarget's best action for each observation."""
