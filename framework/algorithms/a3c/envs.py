"""Gymnasium environments for workers: construction, and a batch of envs stepped together with auto-reset.

`EnvBatch` keeps the current observations of its n environments in one array,
so a worker acts with one batched forward pass per step; episodes that end are
reset in place and their returns and lengths reported. An environment that
raises is reported as `EnvError` naming the env id and the worker's rank.

Environments that need an optional extra (Box2D for LunarLander, ale-py for
Atari) are refused at config validation with the `pip install` to run, and
`hogshare/Atari-v0` is an ALE game with the usual A3C/DQN preprocessing.
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any, Mapping

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

ATARI_ID = "hogshare/Atari-v0"

EXTRAS = {"box2d": ("Box2D", "pygame"), "atari": ("ale_py", "cv2")}
"""The optional extras (pyproject.toml) that some environments need, and the modules each one installs."""


class EnvError(RuntimeError):
    """An environment that failed to build, reset or step; names the env id and the worker rank."""


def extra_needed(env_id: str) -> str | None:
    """The name of the optional extra env_id needs (see EXTRAS), or None."""
    module, _, name = env_id.rpartition(":")
    if module == "ale_py" or name.startswith("ALE/") or name == ATARI_ID:
        return "atari"
    spec = gym.envs.registry.get(name)
    entry = spec.entry_point if spec is not None and isinstance(spec.entry_point, str) else ""
    return "box2d" if entry.startswith("gymnasium.envs.box2d") else None


def missing_extra_message(env_id: str) -> str | None:
    """What to install when env_id needs an extra that is not installed, else None."""
    extra = extra_needed(env_id)
    if extra is None or all(importlib.util.find_spec(m) is not None for m in EXTRAS[extra]):
        return None
    return (f"{env_id} needs the optional '{extra}' extra, which is not installed: run "
            f"pip install -e '.[{extra}]' in a checkout (or pip install 'hogshare[{extra}]')")


def env_id_problem(env_id: str) -> str | None:
    """None when env_id is a registered gymnasium id whose extra (if any) is installed, else what is allowed.

    As in `gym.make`, "module:EnvId" first imports module (which registers EnvId).
    """
    missing = missing_extra_message(env_id)
    if missing:
        return f"an environment whose dependencies are installed ({missing})"
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            return f"an importable module before ':' (importing {module!r} failed: {exc})"
    if name in gym.envs.registry:
        return None
    return "a registered gymnasium environment id, e.g. CartPole-v1, Acrobot-v1, Pendulum-v1, or module:EnvId"


def make_atari(game: str = "ALE/Pong-v5", frame_stack: int = 4, screen_size: int = 84, noop_max: int = 30,
               terminal_on_life_loss: bool = False, **kwargs: Any) -> gym.Env:
    """An ALE game preprocessed as in A3C/DQN: up to noop_max no-ops at reset, 4 frames per action (max of the
    last two), 84x84 grayscale scaled to [0, 1], the last frame_stack frames stacked: observations (k, 84, 84).

    kwargs go to the ALE environment (e.g. repeat_action_probability); registered as `hogshare/Atari-v0`.
    """
    importlib.import_module("ale_py")  # registers the ALE/ ids
    env = gym.make(game, frameskip=1, **kwargs)
    env = AtariPreprocessing(env, noop_max=noop_max, frame_skip=4, screen_size=screen_size,
                             terminal_on_life_loss=terminal_on_life_loss, grayscale_obs=True, scale_obs=True)
    return FrameStackObservation(env, frame_stack)


if ATARI_ID not in gym.envs.registry:
    gym.register(ATARI_ID, entry_point=make_atari)


def make_env(env_id: str, kwargs: Mapping[str, Any] | None = None, rank: int = 0) -> gym.Env:
    """gym.make(env_id, **kwargs) without the passive checker; EnvError naming the env if it fails."""
    try:
        return gym.make(env_id, disable_env_checker=True, **dict(kwargs or {}))
    except Exception as exc:
        raise EnvError(f"environment {env_id} (worker {rank}) could not be built: {exc}") from exc


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


class EnvBatch:
    """n environments of one id, stepped in a loop; obs holds their current observations as float32.

    Box observations keep their shape, Discrete ones become one-hot vectors.
    Discrete actions are ints, Box actions are clipped to the space's bounds.
    """

    def __init__(self, env_id: str, kwargs: Mapping[str, Any] | None, n: int, seed: int, rank: int = 0):
        self.env_id, self.rank = env_id, rank
        self.envs = [make_env(env_id, kwargs, rank) for _ in range(n)]
        space = self.envs[0].observation_space
        if isinstance(space, gym.spaces.Box):
            self._one_hot = 0
            self.obs_shape: tuple[int, ...] = tuple(space.shape)
        elif isinstance(space, gym.spaces.Discrete):
            self._one_hot = int(space.n)
            self.obs_shape = (self._one_hot,)
        else:
            raise EnvError(f"environment {env_id} (worker {rank}): observation space {space} is not supported; "
                           f"allowed: Box or Discrete")
        self.action_space = self.envs[0].action_space
        if not isinstance(self.action_space, (gym.spaces.Discrete, gym.spaces.Box)):
            raise EnvError(f"environment {env_id} (worker {rank}): action space {self.action_space} is not "
                           f"supported; allowed: Discrete or Box")
        self.obs = np.zeros((n, *self.obs_shape), dtype=np.float32)
        self._returns = [0.0] * n
        self._lengths = [0] * n
        first = []
        for i, env in enumerate(self.envs):
            env.action_space.seed(seed + i)
            first.append(self._reset(i, seed + i))
        self.obs[...] = self._as_obs(first)

    def __len__(self) -> int:
        return len(self.envs)

    def _as_obs(self, observations: list[Any]) -> np.ndarray:
        """Raw observations as a float32 batch (one-hot for Discrete spaces)."""
        if self._one_hot:
            out = np.zeros((len(observations), self._one_hot), dtype=np.float32)
            out[np.arange(len(observations)), np.asarray(observations, dtype=np.int64)] = 1.0
            return out
        return np.asarray(observations, dtype=np.float32)

    def _actions(self, actions: np.ndarray) -> list[Any]:
        """Per-env actions: NumPy ints for Discrete (gymnasium checks those faster than Python ints), rows
        clipped to the bounds for Box."""
        if isinstance(self.action_space, gym.spaces.Discrete):
            return list(np.asarray(actions, dtype=np.int64))
        return list(np.clip(actions, self.action_space.low, self.action_space.high))

    def _error(self, i: int, what: str, exc: Exception) -> EnvError:
        return EnvError(f"environment {self.env_id} (worker {self.rank}, env {i}) raised in {what}: "
                        f"{type(exc).__name__}: {exc}")

    def _reset(self, i: int, seed: int | None = None) -> Any:
        try:
            return self.envs[i].reset(seed=seed)[0]
        except Exception as exc:
            raise self._error(i, "reset", exc) from exc

    def step(self, actions: np.ndarray) -> BatchStep:
        """Step every env with its action; finished episodes are reset and their stats returned."""
        n = len(self.envs)
        acts = self._actions(actions)
        observations: list[Any] = [None] * n
        rewards = [0.0] * n
        terminated = np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        trunc_index, trunc_obs, ep_index, ep_returns, ep_lengths = [], [], [], [], []
        returns, lengths = self._returns, self._lengths
        for i, env in enumerate(self.envs):
            try:
                observation, reward, term, trunc, _ = env.step(acts[i])
            except Exception as exc:
                raise self._error(i, "step", exc) from exc
            rewards[i] = reward
            returns[i] += reward
            lengths[i] += 1
            if term or trunc:
                if term:
                    terminated[i] = True
                else:
                    truncated[i] = True
                    trunc_index.append(i)
                    trunc_obs.append(observation)
                ep_index.append(i)
                ep_returns.append(float(returns[i]))
                ep_lengths.append(lengths[i])
                returns[i] = 0.0
                lengths[i] = 0
                observation = self._reset(i)
            observations[i] = observation
        self.obs[...] = self._as_obs(observations)
        return BatchStep(np.asarray(rewards, dtype=np.float32), terminated, truncated,
                         np.asarray(trunc_index, dtype=np.int64),
                         self._as_obs(trunc_obs).reshape(len(trunc_obs), *self.obs_shape),
                         ep_index, ep_returns, ep_lengths)

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()
