"""n environments stepped one after the other in Python, each reset as soon as its episode ends; and rendering.

The batch of any id that has no suitable vector env (see envs.vector), of
`env.vectorize: false`, and of a recording. Made with `render=True`, its
envs are built with render_mode="rgb_array" and `frames` holds each env's
screen after its reset and after every step, rendered before any auto-reset,
so the frame of an episode's last step is there too. For Atari that is the
game screen (210x160 colour), not the 84x84 observation.
"""
from __future__ import annotations

import warnings
from typing import Any, Mapping

import numpy as np

from framework.rl.envs.faults import EnvError, NoFrames
from framework.rl.envs.ids import make_env



class LoopEnvs:
    """n `gym.make` envs stepped one after the other; an env whose episode ends is reset at once."""

    def __init__(self, env_id: str, kwargs: Mapping[str, Any] | None, n: int, rank: int, render: bool = False):
        self.env_id, self.rank = env_id, rank
        self.lives: np.ndarray | None = None
        """Set to an (n,) int array to have step() keep each env's info["lives"] there (-1 where absent)."""
        with warnings.catch_warnings():
            if render:  # gymnasium's warning for an env without rgb_array: NoFrames says it, in one line
                kwargs = {**(kwargs or {}), "render_mode": "rgb_array"}
                warnings.filterwarnings("ignore", message=".*render_mode='rgb_array' that is not in the possible")
            self.envs = [make_env(env_id, kwargs, rank) for _ in range(n)]
        self.frames: list[Any] | None = [None] * n if render else None
        """With render: each env's latest rgb_array frame (see the module docstring); else None."""

    def _error(self, i: int, what: str, exc: BaseException) -> EnvError:
        return EnvError(f"environment {self.env_id} (worker {self.rank}, env {i}) raised in {what}: "
                        f"{type(exc).__name__}: {exc}")

    def _reset(self, i: int, seed: int | None = None) -> Any:
        try:
            observation = self.envs[i].reset(seed=seed)[0]
        except (Exception, SystemExit) as exc:
            raise self._error(i, "reset", exc) from exc
        self._render(i)
        return observation

    def _render(self, i: int) -> None:
        """Keep env i's screen in frames, when rendering."""
        if self.frames is None:
            return
        try:
            frame = self.envs[i].render()
        except (Exception, SystemExit) as exc:
            raise self._error(i, "render", exc) from exc
        if not (isinstance(frame, np.ndarray) and frame.dtype == np.uint8 and frame.ndim == 3
                and frame.shape[2] == 3):
            modes = self.envs[i].metadata.get("render_modes")
            raise NoFrames(f"environment {self.env_id} rendered {type(frame).__name__} where an rgb_array frame "
                           f"(height, width, 3) uint8 was asked for (its render modes: {modes})")
        self.frames[i] = frame

    def reset(self, seed: int) -> list[Any]:
        """Reset env i with seed + i; their first observations."""
        for i, env in enumerate(self.envs):
            env.action_space.seed(seed + i)
        return [self._reset(i, seed + i) for i in range(len(self.envs))]

    def step(self, actions: Any) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[Any]]:
        """(observations after any reset, rewards, terminated, truncated, last observations of ended episodes)."""
        n = len(self.envs)
        observations: list[Any] = [None] * n
        final: list[Any] = [None] * n
        rewards = np.zeros(n)
        terminated = np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        for i, env in enumerate(self.envs):
            try:
                observation, rewards[i], terminated[i], truncated[i], info = env.step(actions[i])
            except (Exception, SystemExit) as exc:
                raise self._error(i, "step", exc) from exc
            if self.lives is not None:
                self.lives[i] = info.get("lives", -1)
            self._render(i)
            if terminated[i] or truncated[i]:
                final[i] = observation
                observation = self._reset(i)
            observations[i] = observation
        return observations, rewards, terminated, truncated, final

    def close(self) -> None:
        for env in self.envs:
            env.close()

