"""A batch of environments stepped together with auto-reset: what a worker, an evaluation and a recording step.

`EnvBatch` keeps the current observations of its n environments in one array,
so a worker acts with one batched forward pass per step; episodes that end are
reset in place and their returns and lengths reported. Its envs are one vector
env where the id has a suitable one (envs.vector), else a loop of envs
(envs.loop; always for a recording, whose frames it keeps). Both give the same
steps: the reset observation right after the step that ended an episode, the
last observation before it for bootstrapping on truncation.

A batch is made from the run's description of its environment (envs.info):
observations are read as its `ObservationLayout` says (uint8 images (C, H, W)
stay uint8, the model reads them as [0, 1]; other observations are float32)
and actions are the policy's (`ActionHead`), given to the envs offset by the
space's start or clipped to a Box's bounds. Observations and rewards are the
environment's own: normalising them is the acting path's and the rollout's
(rl.actor, rl.rollout), and episode returns are the environment's units.

With `life_loss_done`, the step that lost a life (an env whose info reports
`lives`, as ALE's do) is marked in `BatchStep.life_lost`, which a rollout
treats as the end of an episode, as Stable-Baselines3's AtariWrapper does,
while the game goes on: a learning signal of the Atari literature that
changes what the learner sees and nothing else.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from framework.rl.envs.faults import EnvError
from framework.rl.envs.info import EnvInfo
from framework.rl.envs.loop import LoopEnvs
from framework.rl.envs.vector import VectorEnvs


@dataclass
class BatchStep:
    """What one step of every env in a batch produced (observations are in EnvBatch.obs)."""

    rewards: np.ndarray        # (n,) float64, the environments' own
    terminated: np.ndarray     # (n,) bool
    truncated: np.ndarray      # (n,) bool, False where terminated
    truncated_index: np.ndarray  # indices of truncated envs
    truncated_obs: np.ndarray  # their last observations before the reset, for bootstrapping
    episode_index: list[int]   # envs whose episode ended, in order
    episode_returns: list[float]
    episode_lengths: list[int]
    life_lost: np.ndarray      # (n,) bool: lost a life without ending the episode (with life_loss_done only)


class EnvBatch:
    """n environments of one described environment stepped together (one vector env, or a loop of envs: see the
    module docstring); obs holds their current observations as the layout reads them. With render, `frames` holds
    each env's latest screen (envs.loop). With life_loss_done, `BatchStep.life_lost` marks the steps that lost a
    life (see the module docstring)."""

    def __init__(self, env: EnvInfo, n: int, seed: int, rank: int = 0, render: bool = False,
                 life_loss_done: bool = False):
        self.env_id, self.rank = env.id, rank
        self.layout, self.action_head = env.layout, env.action_head
        if render:  # offscreen: pygame's SDL then opens no window and looks for no display
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        vector = VectorEnvs.build(env, n, rank) if env.vectorize and not render else None
        self.vectorized = vector is not None
        self._envs = vector if vector is not None else LoopEnvs(env.id, env.kwargs, n, rank, render)
        self._n = n
        self.obs = np.zeros((n, *self.layout.shape), dtype=self.layout.dtype)
        self._returns = np.zeros(n)
        self._lengths = np.zeros(n, dtype=np.int64)
        self._life_lost = np.zeros(n, dtype=bool)
        self._last_lives: np.ndarray | None = None
        if life_loss_done:  # -1: not known yet (after a reset the next step's info tells)
            self._envs.lives = np.full(n, -1, dtype=np.int64)
            self._last_lives = self._envs.lives.copy()
        self.obs[...] = self.layout.batch(self._envs.reset(seed))

    def __len__(self) -> int:
        return self._n

    @property
    def returns(self) -> np.ndarray:
        """Each env's return so far in the episode under way, in the environment's own units."""
        return self._returns

    @property
    def frames(self) -> list[np.ndarray]:
        """Each env's latest rgb_array frame (H, W, 3) uint8; only for a batch made with render."""
        assert isinstance(self._envs, LoopEnvs) and self._envs.frames is not None, "a batch made with render"
        return self._envs.frames

    def step(self, actions: np.ndarray) -> BatchStep:
        """Step every env with its action; finished episodes are reset and their stats returned."""
        observations, rewards, terminated, truncated, final = self._envs.step(self.action_head.for_env(actions))
        terminated = np.asarray(terminated, dtype=bool)
        truncated = np.asarray(truncated, dtype=bool) & ~terminated
        self._returns += rewards
        self._lengths += 1
        ended = np.flatnonzero(terminated | truncated)
        episode_returns = self._returns[ended].tolist()
        episode_lengths = self._lengths[ended].tolist()
        self._returns[ended] = 0.0
        self._lengths[ended] = 0
        truncated_index = np.flatnonzero(truncated)
        self.obs[...] = self.layout.batch(observations)
        if self._last_lives is not None:
            self._lives_lost(ended)
        return BatchStep(rewards, terminated, truncated, truncated_index,
                         self.layout.batch([final[i] for i in truncated_index]), ended.tolist(),
                         episode_returns, episode_lengths, self._life_lost.copy())

    def _lives_lost(self, ended: np.ndarray) -> None:
        """Mark in _life_lost the envs that lost a life in this step without ending their episode."""
        lives, last = self._envs.lives, self._last_lives
        assert lives is not None and last is not None
        if (lives < 0).all():
            raise EnvError(f"environment {self.env_id} (worker {self.rank}) reports no 'lives' in its step info, "
                           f"which env.life_loss_done needs (ALE games report it); allowed: life_loss_done: false "
                           f"for this environment")
        np.logical_and(last >= 0, lives < last, out=self._life_lost)
        self._life_lost[ended] = False
        last[...] = lives
        last[ended] = -1

    def close(self) -> None:
        self._envs.close()
