"""A batch of environments stepped together with auto-reset: what a worker, an evaluation and a recording step.

`EnvBatch` keeps the current observations of its n environments in one array,
so a worker acts with one batched forward pass per step; episodes that end are
reset in place and their returns and lengths reported. Its envs are one vector
env where the id has a suitable one (envs.vector), else a loop of envs
(envs.loop; always for a recording, whose frames it keeps). Both give the same
steps: the reset observation right after the step that ended an episode, the
last observation before it for bootstrapping on truncation.

Observations and actions are read as rl.spaces says: uint8 images (C, H, W)
stay uint8 (the model reads them as [0, 1]); other observations are float32. With a `Normalization` (rl.normalization), the batch
gives normalised observations and scaled rewards, as VecNormalize does, and
reports episode returns in the environment's own units.

Two learning signals of the Atari literature change what the learner sees and
nothing else (episodes, returns and evaluation stay the game's):
`sign_rewards` gives the sign of each reward (-1, 0, 1), as the DQN, A3C and
IMPALA papers clip Atari's; `life_loss_done` marks the step that lost a life
(an env whose info reports `lives`, as ALE's do) in `BatchStep.life_lost`, which
a rollout treats as the end of an episode, as Stable-Baselines3's AtariWrapper
does, while the game goes on.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from framework.rl.envs.faults import EnvError
from framework.rl.envs.loop import LoopEnvs
from framework.rl.envs.vector import VectorEnvs
from framework.rl.normalization import Normalization
from framework.rl.spaces import ActionHead, ObservationLayout, SpaceError


@dataclass
class BatchStep:
    """What one step of every env in a batch produced (observations are in EnvBatch.obs)."""

    rewards: np.ndarray        # (n,) float32
    terminated: np.ndarray     # (n,) bool
    truncated: np.ndarray      # (n,) bool, False where terminated
    truncated_index: np.ndarray  # indices of truncated envs
    truncated_obs: np.ndarray  # their last observations before the reset, for bootstrapping
    episode_index: list[int]   # envs whose episode ended, in order
    episode_returns: list[float]
    episode_lengths: list[int]
    life_lost: np.ndarray      # (n,) bool: lost a life without ending the episode (with life_loss_done only)


class EnvBatch:
    """n environments of one id stepped together (one vector env, or a loop of envs: see the module docstring);
    obs holds their current observations as the model reads them (`layout`: rl.spaces.ObservationLayout),
    uint8 for uint8 images (C, H, W) and float32 otherwise; actions are the policy's (`action_head`:
    rl.spaces.ActionHead), given to the envs offset by the space's start or clipped to a Box's bounds.
    With `normalization`, observations and rewards are normalised (see the module docstring).
    With render, `frames` holds each env's latest screen (see the module docstring). With vectorize false the
    envs are a loop even where a vector env would serve. `sign_rewards` and `life_loss_done` change the
    learning signal (see the module docstring).
    """

    def __init__(self, env_id: str, kwargs: Mapping[str, Any] | None, n: int, seed: int, rank: int = 0,
                 normalization: Normalization | None = None, render: bool = False, vectorize: bool = True,
                 sign_rewards: bool = False, life_loss_done: bool = False):
        self.env_id, self.rank, self.normalization = env_id, rank, normalization
        self.sign_rewards = sign_rewards
        if render:  # offscreen: pygame's SDL then opens no window and looks for no display
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        vector = VectorEnvs.build(env_id, kwargs, n, rank) if vectorize and not render else None
        self.vectorized = vector is not None
        self._envs = vector if vector is not None else LoopEnvs(env_id, kwargs, n, rank, render)
        self._n = n
        try:
            self.layout = ObservationLayout.of(self._envs.observation_space)
            self.action_head = ActionHead(self._envs.action_space)
        except SpaceError as exc:
            self._envs.close()
            raise EnvError(f"environment {env_id} (worker {rank}): {exc}") from None
        self.action_space = self._envs.action_space
        self.obs_shape: tuple[int, ...] = self.layout.shape
        dtype = self.layout.dtype
        self.obs = np.zeros((n, *self.obs_shape), dtype=dtype)
        self._returns = np.zeros(n)
        self._lengths = np.zeros(n, dtype=np.int64)
        self._life_lost = np.zeros(n, dtype=bool)
        self._last_lives: np.ndarray | None = None
        if life_loss_done:  # -1: not known yet (after a reset the next step's info tells)
            self._envs.lives = np.full(n, -1, dtype=np.int64)
            self._last_lives = self._envs.lives.copy()
        self.obs[...] = self._observe(self._envs.reset(seed))

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

    def _observe(self, observations: Any, update: bool = True) -> np.ndarray:
        """Raw observations as a batch, normalised when the batch normalises (merged into the statistics when
        `update`)."""
        batch = self.layout.batch(observations)
        return batch if self.normalization is None else self.normalization.observations(batch, update)

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
        self.obs[...] = self._observe(observations)
        if self._last_lives is not None:
            self._lives_lost(ended)
        if self.sign_rewards:
            rewards = np.sign(rewards)
        if self.normalization is not None:
            rewards = self.normalization.rewards(rewards, terminated | truncated)
        return BatchStep(rewards.astype(np.float32), terminated, truncated, truncated_index,
                         self._observe([final[i] for i in truncated_index], update=False), ended.tolist(),
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
        """Merge the steps' pending normalisation statistics, then close every env."""
        if self.normalization is not None:
            self.normalization.flush()
        self._envs.close()
