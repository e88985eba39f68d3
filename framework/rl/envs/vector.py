"""One vector env for a worker's n environments, where gymnasium registers one for the id that is the same
environment (same spaces) and can reset a finished env within the step that ended it.

SAME_STEP autoreset puts the final observation in info["final_obs"] and the
reset one in the step's observations, as a loop of envs (envs.loop) reports
them. ale-py's AtariVectorEnv steps all of a worker's games in C++ with the
preprocessing built in. A NEXT_STEP-only vector env is not used: it reports
the reset observation one call later, when every other env has moved on too,
and cannot reset one env alone. CartPole's (gymnasium's CartPoleVectorEnv)
is, in the version that resets in the same step (`cartpole_vector`).
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.envs.registration import load_env_creator
from gymnasium.vector import AutoresetMode

from framework.rl.envs.cartpole_vector import SameStepCartPoleVectorEnv
from framework.rl.envs.faults import EnvError
from framework.rl.envs.ids import env_source
from framework.rl.envs.info import EnvInfo

SAME_STEP_VERSIONS = {CartPoleVectorEnv: SameStepCartPoleVectorEnv}
"""Vector entry points that reset one call late (NEXT_STEP), and the version of each that resets in the same
step: EnvBatch uses the latter in their place."""


class VectorEnvs:
    """One vector env from the id's vector entry point, resetting ended episodes in the same step."""

    def __init__(self, vector_env: gym.vector.VectorEnv, env_id: str, rank: int):
        self.vector_env, self.env_id, self.rank = vector_env, env_id, rank
        self.lives: np.ndarray | None = None
        """As LoopEnvs.lives, from the vector env's info["lives"]."""

    @classmethod
    def build(cls, env: EnvInfo, n: int, rank: int) -> "VectorEnvs | None":
        """The vector env of n envs for the described environment when one is registered for its id, accepts its
        kwargs, resets in the same step and has the environment's spaces; None otherwise (a loop of envs is then
        used)."""
        env_id = env.id
        source = env_source(env_id, env.kwargs)
        spec = None if source.gym_id is None else gym.envs.registry.get(source.gym_id)
        if spec is None or spec.vector_entry_point is None:
            return None
        creator = load_env_creator(spec.vector_entry_point) if isinstance(spec.vector_entry_point, str) \
            else spec.vector_entry_point
        creator = SAME_STEP_VERSIONS.get(creator, creator)
        kwargs = dict(source.kwargs)
        if "autoreset_mode" in inspect.signature(creator).parameters:
            kwargs["autoreset_mode"] = AutoresetMode.SAME_STEP
        elif getattr(creator, "metadata", {}).get("autoreset_mode") != AutoresetMode.SAME_STEP:
            return None
        try:
            vector_env = gym.make_vec(dataclasses.replace(spec, vector_entry_point=creator), num_envs=n,
                                      vectorization_mode="vector_entry_point", **kwargs)
        except TypeError:  # arguments that only the single env takes
            return None
        except (Exception, SystemExit) as exc:
            raise EnvError(f"environment {env_id} (worker {rank}) could not be built as a vector env: {exc}") from exc
        same = (env.layout.space == vector_env.single_observation_space
                and env.action_head.space == vector_env.single_action_space)
        if same and vector_env.metadata.get("autoreset_mode") == AutoresetMode.SAME_STEP:
            return cls(vector_env, env_id, rank)
        vector_env.close()
        return None

    def _error(self, what: str, exc: BaseException) -> EnvError:
        return EnvError(f"environment {self.env_id} (worker {self.rank}, vector env) raised in {what}: "
                        f"{type(exc).__name__}: {exc}")

    def reset(self, seed: int) -> np.ndarray:
        """Reset every env (env i with seed + i, as gymnasium's vector envs do); their first observations.

        seed is first taken modulo 2**31 - n, so that every env's seed fits the int32 that ALE takes.
        """
        seed %= 2**31 - self.vector_env.num_envs
        self.vector_env.action_space.seed(seed)
        try:
            return self.vector_env.reset(seed=seed)[0]
        except (Exception, SystemExit) as exc:
            raise self._error("reset", exc) from exc

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Any]:
        """As LoopEnvs.step, from one call of the vector env."""
        try:
            observations, rewards, terminated, truncated, info = self.vector_env.step(actions)
        except (Exception, SystemExit) as exc:
            raise self._error("step", exc) from exc
        if self.lives is not None:
            self.lives[...] = info.get("lives", -1)
        done = terminated | truncated
        return observations, np.asarray(rewards, dtype=np.float64), terminated, truncated, \
            info["final_obs"] if done.any() else None

    def close(self) -> None:
        self.vector_env.close()

