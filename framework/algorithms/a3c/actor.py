"""The one way a trained A3C model acts: raw observations in, the env's actions out.

An `Actor` holds an `ActorCritic`, the run's config and its env's spaces. It
encodes raw observations as an `EnvBatch` does (`ObservationEncoder`: one-hot
for Discrete spaces, float32 or uint8 images), normalises them with the
statistics the model carries (`env.normalize_obs`, read only), runs the
policy (carrying an LSTM's state) and turns its output into actions the env
takes (`env_actions`: ints, Box actions clipped to the bounds). Greedy
actions are the most likely action or the mean action; otherwise they are
sampled from the policy's distribution. The plugin's `evaluate` and `record`
act through it, and so does `framework.train`'s public `Policy`: what a
user's loop plays is what `evaluate` measured.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

import framework
from framework.algorithms.a3c.envs import ObservationEncoder, env_actions
from framework.algorithms.a3c.model import ActorCritic
from framework.algorithms.a3c.normalization import EPSILON, Normalization
from framework.algorithms.base import Config
from framework.device import to_device, to_host

OBS_NORMALIZATION = "obs_normalization."
"""The prefix of the observation statistics in `named_arrays` (apart from the layers' parameters)."""
_NORMALIZERS = ("obs_norm.", "return_norm.")


class Actor:
    """An ActorCritic acting in its env's observation and action spaces (see the module docstring)."""

    def __init__(self, model: ActorCritic, config: Config, observation_space: gym.Space, action_space: gym.Space):
        self.model, self.config = model, config
        self.observation_space, self.action_space = observation_space, action_space
        self.encode = ObservationEncoder(observation_space)
        """Raw observations (a sequence) as the (n, *shape) batch that `act` takes."""
        self._normalization = Normalization.for_model(model, config, 0, update=False)

    def initial_state(self, batch: int) -> tuple[Any, Any] | None:
        """The LSTM state at the start of an episode for a batch (None without an LSTM)."""
        return self.model.initial_state(batch)

    def act(self, batch: np.ndarray, state: tuple[Any, Any] | None,
            deterministic: bool = True) -> tuple[np.ndarray, tuple[Any, Any] | None]:
        """(actions as the env takes them, new LSTM state) for an encoded batch of raw observations."""
        if self._normalization is not None:
            batch = self._normalization.observations(batch, update=False)
        head, state = self.model.policy_array(to_device(batch, self.model.device), state)
        if deterministic:
            head = to_host(head)
            chosen = head if self.model.continuous else np.argmax(head, axis=1)
        else:
            chosen = to_host(self.model.distribution(framework.as_tensor(head)).sample().data_array)
        return env_actions(self.action_space, chosen), state

    def named_arrays(self) -> dict[str, np.ndarray]:
        """The layers' parameters by their (PyTorch) names, and the observation statistics under
        OBS_NORMALIZATION (mean, var, count); the return statistics, which acting never uses, are left out."""
        arrays = {name: to_host(value.data_array, copy=True) for name, value in self.model.state_dict().items()
                  if not name.startswith(_NORMALIZERS)}
        if self.model.obs_norm is not None:
            mean, var, count = self.model.obs_norm.statistics()
            arrays.update({OBS_NORMALIZATION + "mean": mean, OBS_NORMALIZATION + "var": var,
                           OBS_NORMALIZATION + "count": np.array([count])})
        return arrays

    def normalization_settings(self) -> dict[str, float]:
        """How the observation statistics apply: (obs - mean) / sqrt(var + epsilon), clipped to +-clip."""
        if self.model.obs_norm is None:
            return {}
        return {OBS_NORMALIZATION + "epsilon": EPSILON, OBS_NORMALIZATION + "clip": self.config["env"]["clip_obs"]}
