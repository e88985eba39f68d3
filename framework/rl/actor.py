"""The one way a trained A3C model acts: raw observations in, the env's actions out.

An `Actor` holds a model (an `ActorCriticBase`: the built-in ActorCritic or
a model.factory's), the run's config and how its env's spaces are read
(rl.spaces: the `ObservationLayout` and `ActionHead` an `EnvBatch` has). It
encodes raw observations as the envs' batch does (`ObservationLayout.batch`:
Dict and Tuple flattened, (H, W, C) images transposed, Discrete one-hot),
normalises them with the statistics the model carries (`env.normalize_obs`,
read only), runs the policy (carrying a recurrent state) and turns its
output into actions with the `ActionHead`: greedy actions are the most
likely one of each component (or the mean), sampled ones drawn as the
workers draw them (`ActionHead.draw_noise`, `sample`); `act` then gives them
as the env takes them (`ActionHead.for_env`: offset by the space's start,
clipped to a Box's bounds). The plugin's `evaluate` and `record` act through
it (`choose`, whose actions `EnvBatch.step` converts), and so does
`framework.train`'s public `Policy` (`act`): what a user's loop plays is
what `evaluate` measured.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from framework.rl.model import ActorCriticBase
from framework.rl.normalization import EPSILON, Normalization
from framework.rl.spaces import ActionHead, ObservationLayout
from framework.runtime.algorithm import Config
from framework.device import to_device, to_host

OBS_NORMALIZATION = "obs_normalization."
"""The prefix of the observation statistics in `named_arrays` (apart from the layers' parameters)."""
_NORMALIZERS = ("obs_norm.", "return_norm.")


class Actor:
    """A model acting in its env's observation and action spaces (see the module docstring)."""

    def __init__(self, model: ActorCriticBase, config: Config, layout: ObservationLayout, action_head: ActionHead):
        self.model, self.config = model, config
        self.layout, self.action_head = layout, action_head
        self._normalization = Normalization.for_model(model, config, 0, update=False)

    @property
    def observation_space(self) -> gym.Space:
        return self.layout.space

    @property
    def action_space(self) -> gym.Space:
        return self.action_head.space

    def encode(self, observations: Any) -> np.ndarray:
        """Raw observations (a sequence of them) as the (n, *layout.shape) batch that `act` takes."""
        return self.layout.batch(observations)

    def initial_state(self, batch: int) -> Any:
        """The model's state at the start of an episode for a batch (None for a feed-forward model)."""
        return self.model.initial_state(batch)

    def choose(self, batch: np.ndarray, state: Any, deterministic: bool = True) -> tuple[np.ndarray, Any]:
        """(the policy's actions on the host, as a rollout stores them, new state) for an encoded batch."""
        if self._normalization is not None:
            batch = self._normalization.observations(batch, update=False)
        head, state = self.model.policy_array(to_device(batch, self.model.device), state)
        if deterministic:
            return to_host(self.action_head.greedy(head)), state
        log_std = None if self.model.log_std is None else self.model.log_std.data_array
        noise = self.action_head.draw_noise(head.shape[:1], head.dtype, self.model.device)
        return to_host(self.action_head.sample(head, noise, log_std)), state

    def act(self, batch: np.ndarray, state: Any, deterministic: bool = True) -> tuple[np.ndarray, Any]:
        """(actions as the env takes them, new state) for an encoded batch of raw observations."""
        actions, state = self.choose(batch, state, deterministic)
        return self.action_head.for_env(actions), state

    def named_arrays(self) -> dict[str, np.ndarray]:
        """The model's parameters by their (PyTorch) names, and the observation statistics under
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
