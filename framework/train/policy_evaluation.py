"""`evaluate_policy(policy, env, episodes=10, seed=None, deterministic=True) -> (mean, std)`: the return of a policy
over episodes of any gymnasium env or vector env, as Stable-Baselines3's `evaluate_policy` gives it.

It plays what `evaluate` plays: with a seed, episode i of a single env starts from `reset(seed=seed + i)`, and a
vector env of n envs is reset once with the seed (env j with seed + j, gymnasium's rule), so the episodes are
`evaluate --seed` 's on the same env wherever its envs are seeded one by one (`evaluate --episodes n` and a vector
env of n envs, or a single env). A vector env plays `episodes` episodes in all, env j taking (episodes + j) // n
of them, the first ones to finish (Stable-Baselines3's split); after its first, an env's episodes are its
autoresets. Every autoreset mode of gymnasium's vector envs is read as it works: next-step (the step after an
episode's end only resets), same-step (the observation of the step that ended it is the next episode's first),
and disabled (the ended envs are reset here). A recurrent policy's state starts each episode at None (zero rows
of a batch's state for the envs that begin one).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from framework.runtime.schema import short_repr


def evaluate_policy(policy: Any, env: gym.Env | gym.vector.VectorEnv, episodes: int = 10, seed: int | None = None,
                    deterministic: bool = True, *, return_episode_rewards: bool = False
                    ) -> tuple[float, float] | tuple[list[float], list[int]]:
    """(mean, standard deviation) of the return over `episodes` episodes of env played by policy (a `Policy`, or
    anything with its `act(obs, state, deterministic) -> (action, state)`); with return_episode_rewards, (the
    returns, the lengths) of the episodes instead, as Stable-Baselines3 has it. ValueError for a bad argument."""
    if not isinstance(episodes, int) or isinstance(episodes, bool) or episodes < 1:
        raise ValueError(f"episodes: got {short_repr(episodes)}; allowed: an integer >= 1")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise ValueError(f"seed: got {short_repr(seed)}; allowed: None or an integer >= 0")
    if not callable(getattr(policy, "act", None)):
        raise ValueError(f"policy: got {short_repr(policy)}; allowed: a Policy (load_policy, Run.policy) or an "
                         f"object with act(obs, state, deterministic)")
    if isinstance(env, gym.vector.VectorEnv):
        returns, lengths = _vector_episodes(policy, env, episodes, seed, deterministic)
    elif isinstance(env, gym.Env):
        returns, lengths = _single_episodes(policy, env, episodes, seed, deterministic)
    else:
        raise ValueError(f"env: got {short_repr(env)}; allowed: a gymnasium Env or VectorEnv")
    if return_episode_rewards:
        return returns, lengths
    return float(np.mean(returns)), float(np.std(returns))


def _single_episodes(policy: Any, env: gym.Env, episodes: int, seed: int | None,
                     deterministic: bool) -> tuple[list[float], list[int]]:
    returns, lengths = [], []
    for i in range(episodes):
        obs, _ = env.reset(seed=None if seed is None else seed + i)
        state, total, steps, done = None, 0.0, 0, False
        while not done:
            action, state = policy.act(obs, state, deterministic)
            obs, reward, terminated, truncated, _ = env.step(action)
            total, steps, done = total + float(reward), steps + 1, bool(terminated or truncated)
        returns.append(total)
        lengths.append(steps)
    return returns, lengths


def _vector_episodes(policy: Any, env: gym.vector.VectorEnv, episodes: int, seed: int | None,
                     deterministic: bool) -> tuple[list[float], list[int]]:
    n = env.num_envs
    wanted = np.array([(episodes + j) // n for j in range(n)])
    mode = env.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
    returns: list[list[float]] = [[] for _ in range(n)]
    lengths: list[list[int]] = [[] for _ in range(n)]
    totals, steps = np.zeros(n), np.zeros(n, dtype=np.int64)
    resetting = np.zeros(n, dtype=bool)  # next-step autoreset: this step only resets these envs
    obs, _ = env.reset(seed=seed)
    state = None
    while any(len(returns[j]) < wanted[j] for j in range(n)):
        action, state = policy.act(obs, state, deterministic)
        obs, rewards, terminated, truncated, _ = env.step(action)
        playing = ~resetting
        totals[playing] += np.asarray(rewards, dtype=np.float64)[playing]
        steps[playing] += 1
        ended = np.asarray(terminated | truncated) & playing
        for j in np.flatnonzero(ended):
            if len(returns[j]) < wanted[j]:
                returns[j].append(float(totals[j]))
                lengths[j].append(int(steps[j]))
        totals[ended], steps[ended] = 0.0, 0
        if mode == gym.vector.AutoresetMode.DISABLED and ended.any():
            obs, _ = env.reset(options={"reset_mask": ended})
        starting = resetting if mode == gym.vector.AutoresetMode.NEXT_STEP else ended
        resetting = ended if mode == gym.vector.AutoresetMode.NEXT_STEP else np.zeros(n, dtype=bool)
        if state is not None and starting.any():
            state = tuple(np.where(starting.reshape(-1, *[1] * (np.ndim(part) - 1)), 0, part) for part in state)
    return [r for per_env in returns for r in per_env], [s for per_env in lengths for s in per_env]
