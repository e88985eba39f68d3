"""The one path from observation to action: workers, actors, evaluation and `Policy` all act through an `Actor`.

An `Actor` holds a model (an `ActorCriticBase`: the built-in ActorCritic or
a model.factory's), the run's description of its environment (envs.info:
how its spaces are read, rl.spaces) and the model's observation
normalisation (rl.normalization: read only, or a worker's, which updates
the shared statistics). A step goes:

1. `observe`: a batch of observations as the env batch reads them
   (`ObservationLayout.batch`; `encode` makes one from a user's raw
   observations: Dict and Tuple flattened, (H, W, C) images transposed,
   Discrete one-hot) normalised with the statistics the model carries
   (`env.normalize_obs`): the one place observations are normalised;
2. `choose`: the policy on them (a worker passes its compiled one,
   `trainer.compile`), carrying a recurrent state, its output turned into
   actions by the `ActionHead`: the most likely one of each component (or
   the mean) when deterministic, else drawn with the caller's noise (a worker
   draws a whole rollout's at once: `ActionHead.draw_noise`) or with noise
   drawn there; with `log_probs`, also each action's log-probability under
   that same output, on the device, before anything goes to the host: the
   behaviour policy an actor-learner's trajectory records (NaN where the
   output was not finite, which a learner cuts out: rl.actor_learner);
3. `act`: `choose`'s actions as the env takes them (`ActionHead.for_env`:
   offset by the space's start, clipped to a Box's bounds).

Workers observe after every env step and choose with their noise
(rl.rollout); evaluation and recordings observe and choose greedily
(rl.evaluation); `framework.train`'s public `Policy` encodes and acts. What
a user's loop plays is what `evaluate` measured and what the workers trained.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import gymnasium as gym
import numpy as np

from framework.device import to_device, to_host
from framework.rl import sde
from framework.rl.envs.info import EnvInfo
from framework.rl.model import ActorCriticBase
from framework.rl.normalization import EPSILON, Normalization

OBS_NORMALIZATION = "obs_normalization."
"""The prefix of the observation statistics in `named_arrays` (apart from the layers' parameters)."""
_NORMALIZERS = ("obs_norm.", "return_norm.")


class Choice(NamedTuple):
    """What `Actor.choose` decided for a batch of observations."""

    actions: np.ndarray  # on the host, as a rollout stores them
    log_probs: np.ndarray | None  # (batch,) on the host, when asked for: log pi(a|x), NaN where not finite
    state: Any  # the recurrent state after this step (None for a feed-forward model)


class Actor:
    """A model acting in its environment's observation and action spaces (see the module docstring).

    `normalization`: the worker's, which updates the statistics; by default the model's statistics, read only.
    `policy`: the policy on arrays that `choose` runs, `(obs on the device, state) -> (output array, state)`
    (a worker's compiled one); by default the model's `policy_array`.
    """

    def __init__(self, model: ActorCriticBase, env: EnvInfo, normalization: Normalization | None = None,
                 policy: Callable[[Any, Any], tuple[Any, Any]] | None = None):
        self.model, self.env = model, env
        self.layout, self.action_head = env.layout, env.action_head
        self.normalization = normalization if normalization is not None else Normalization.for_model(model, env)
        self.policy = policy if policy is not None else model.policy_array
        self.device = model.device

    @property
    def observation_space(self) -> gym.Space:
        return self.layout.space

    @property
    def action_space(self) -> gym.Space:
        return self.action_head.space

    def encode(self, observations: Any) -> np.ndarray:
        """Raw observations (a sequence of them) as the (n, *layout.shape) batch that `observe` takes."""
        return self.layout.batch(observations)

    def observe(self, batch: np.ndarray, update: bool = False) -> np.ndarray:
        """A batch of observations as the model reads them: normalised when the model carries the statistics
        (merged into them, when `update` and the normalisation is a worker's)."""
        return batch if self.normalization is None else self.normalization.observations(batch, update)

    def initial_state(self, batch: int) -> Any:
        """The model's state at the start of an episode for a batch (None for a feed-forward model)."""
        return self.model.initial_state(batch)

    def choose(self, obs: np.ndarray, state: Any, deterministic: bool = False, noise: Any = None,
               log_probs: bool = False) -> Choice:
        """The policy's actions for a batch of observed observations (`observe`'s), greedy or drawn with noise
        (drawn here when None); with log_probs, their log-probabilities (see the module docstring)."""
        head, state = self.policy(to_device(obs, self.device), state)
        log_std = None if self.model.log_std is None else self.model.log_std.data_array
        if deterministic:
            actions = self.action_head.greedy(head)
        else:
            if noise is None:
                noise = self.action_head.draw_noise(head.shape[:1], head.dtype, self.device,
                                                    latent=sde.latent_size(log_std))
            actions = self.action_head.sample(head, noise, log_std)
        behaviour = to_host(self.action_head.behaviour_log_prob(head, actions, log_std)) if log_probs else None
        return Choice(to_host(actions), behaviour, state)

    def act(self, batch: np.ndarray, state: Any, deterministic: bool = True) -> tuple[np.ndarray, Any]:
        """(actions as the env takes them, new state) for an encoded batch of raw observations."""
        choice = self.choose(self.observe(batch), state, deterministic)
        return self.action_head.for_env(choice.actions), choice.state

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
        return {OBS_NORMALIZATION + "epsilon": EPSILON, OBS_NORMALIZATION + "clip": self.env.clip_obs}
