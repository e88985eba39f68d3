"""CartPole's vector env resetting in the same step, with each env's resets drawn as a lone CartPoleEnv draws them.

gymnasium registers `CartPoleVectorEnv` as CartPole-v0/v1's vector entry point:
all envs stepped as NumPy arrays, several times faster than a loop of
CartPoleEnv. It resets an ended episode one call later (NEXT_STEP autoreset),
when that call's action is thrown away, so EnvBatch could not use it as it is.
`SameStepCartPoleVectorEnv` keeps its physics, rewards and time limit and moves
the reset into the step that ended the episode (SAME_STEP): the step returns the
reset observation, with the last one in `info["final_obs"]` (rows where
`info["_final_obs"]`), as a loop of envs reports it.

Each env draws its reset states from a generator of its own, seeded with
`seed + i` at `reset(seed=seed)`, as a CartPoleEnv reset with that seed does:
env i's episodes start where those of a lone env seeded `seed + i` start, so
the vector path and the loop step the same episodes (and `evaluate` and its
recording play the same ones).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode


class SameStepCartPoleVectorEnv(CartPoleVectorEnv):
    """gymnasium's CartPoleVectorEnv with SAME_STEP autoreset and per-env reset generators (module docstring)."""

    metadata = {**CartPoleVectorEnv.metadata, "autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, num_envs: int = 1, max_episode_steps: int = 500, render_mode: str | None = None,
                 sutton_barto_reward: bool = False, autoreset_mode: AutoresetMode = AutoresetMode.SAME_STEP):
        if autoreset_mode != AutoresetMode.SAME_STEP:
            raise ValueError(f"SameStepCartPoleVectorEnv resets in the same step; got autoreset_mode "
                             f"{autoreset_mode}")
        super().__init__(num_envs, max_episode_steps, render_mode, sutton_barto_reward)
        self._env_random: list[np.random.Generator] = []

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Every env anew: env i's state from its generator, seeded with seed + i (from the vector env's own
        generator when seed is None)."""
        super().reset(seed=seed, options=options)  # the bounds (options), counters and vector generator
        seeds = range(seed, seed + self.num_envs) if seed is not None else \
            self.np_random.integers(2**62, size=self.num_envs).tolist()
        self._env_random = [seeding.np_random(s)[0] for s in seeds]
        for i in range(self.num_envs):
            self._draw(i)
        return self.state.T.astype(np.float32), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """CartPoleVectorEnv's step; an env whose episode ended is reset before the step returns."""
        observations, rewards, terminated, truncated, info = super().step(action)
        done = terminated | truncated
        self.prev_done[:] = False  # reset below, not on the next call
        if not done.any():
            return observations, rewards, terminated, truncated, info
        for i in np.flatnonzero(done).tolist():
            self._draw(i)
        self.steps[done] = 0
        info = {**info, "final_obs": observations, "_final_obs": done}
        return self.state.T.astype(np.float32), rewards, terminated, truncated, info

    def _draw(self, i: int) -> None:
        """Env i's new state, drawn as CartPoleEnv.reset draws it."""
        self.state[:, i] = self._env_random[i].uniform(low=self.low, high=self.high, size=(4,))
