"""Environments with vector entry points, for the tests of EnvBatch's vector path without ale-py: use them as
`vector_envs:<id>` in a config.

SameStepCartPole-v0 is CartPole-v1 whose vector entry point is gymnasium's SyncVectorEnv with SAME_STEP
autoreset (so its steps must equal a loop of CartPole-v1 envs seeded alike), SameStepRaisingCartPole-v0
the same over fault_envs' RaisingCartPole; NextStepCartPole-v0's is a SyncVectorEnv that only
autoresets on the next call. Frames-v0 gives uint8 image observations, for the uint8 path.
"""
import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import fault_envs  # noqa: F401  (registers RaisingCartPole-v0)


def same_step(env_id: str):
    """A vector entry point: num_envs gym.make(env_id) envs in a SyncVectorEnv (SAME_STEP on request)."""
    def make(num_envs: int, autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP, **kwargs):
        return SyncVectorEnv([lambda: gym.make(env_id, **kwargs) for _ in range(num_envs)],
                             autoreset_mode=autoreset_mode)
    return make


def next_step(env_id: str):
    """A vector entry point: num_envs gym.make(env_id) envs in a SyncVectorEnv that autoresets on the next call."""
    def make(num_envs: int, **kwargs):
        return SyncVectorEnv([lambda: gym.make(env_id, **kwargs) for _ in range(num_envs)])
    return make


class Frames(gym.Env):
    """(2, 24, 24) uint8 frames of noise; action 1 ends the episode with reward 1, action 0 pays 0."""

    observation_space = gym.spaces.Box(0, 255, (2, 24, 24), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.np_random.integers(0, 256, (2, 24, 24), dtype=np.uint8), {}

    def step(self, action):
        obs = self.np_random.integers(0, 256, (2, 24, 24), dtype=np.uint8)
        return obs, float(action), bool(action), False, {}


gym.register("SameStepCartPole-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv", max_episode_steps=500,
             vector_entry_point=same_step("CartPole-v1"))
gym.register("SameStepRaisingCartPole-v0", entry_point=fault_envs.RaisingCartPole, max_episode_steps=500,
             vector_entry_point=same_step("RaisingCartPole-v0"))
gym.register("NextStepCartPole-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv", max_episode_steps=500,
             vector_entry_point=next_step("CartPole-v1"))
gym.register("Frames-v0", entry_point=Frames, max_episode_steps=50)
