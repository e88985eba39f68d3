"""CartPole variants that fail on purpose, registered for the fault tests as faulty_env:<id>."""
import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class RaisingCartPole(CartPoleEnv):
    """Raises RuntimeError in step once it has taken fail_after steps."""

    def __init__(self, fail_after: int = 50, **kwargs):
        super().__init__(**kwargs)
        self.fail_after, self.steps = fail_after, 0

    def step(self, action):
        self.steps += 1
        if self.steps > self.fail_after:
            raise RuntimeError("injected fault in step")
        return super().step(action)


class NanRewardCartPole(CartPoleEnv):
    """Returns a NaN reward on every step, so every loss is non-finite."""

    def step(self, action):
        obs, _, terminated, truncated, info = super().step(action)
        return obs, float("nan"), terminated, truncated, info


gym.register("RaisingCartPole-v0", entry_point=RaisingCartPole, max_episode_steps=500)
gym.register("NanRewardCartPole-v0", entry_point=NanRewardCartPole, max_episode_steps=500)
