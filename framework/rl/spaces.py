"""How the actor-critic plugins read a gymnasium env's spaces: observations as one array per env, actions as a
policy output.

Observations (`ObservationLayout`): Box spaces keep their shape, except
(height, width, channels) images with 1 to 4 channels (CarRacing), which are
transposed to (channels, height, width) for the convolutions; Discrete ones
become one-hot vectors, MultiDiscrete ones concatenated one-hot vectors,
MultiBinary ones 0/1 floats. Dict and Tuple spaces are flattened in their
spaces' order (nested ones too): every entry but an image becomes part of
one float vector; one image entry (a 3-axis Box) may come with them, and is
then packed first, flattened, into the same float row, which the model splits
again (`ActorCritic` with `image_shape`): the image goes through the
convolutions and the vector joins their output before the MLP. uint8 images
alone stay uint8 (the first convolution reads them as [0, 1]).

Actions (`ActionHead`): Discrete is a categorical over n logits, Box a Normal
around the policy's mean (a learned log standard deviation), MultiDiscrete
independent categoricals (the logits of each component one after the other)
and MultiBinary independent Bernoullis (one logit each); log-probabilities and
entropies are summed over the components, and a greedy action is the most
likely one of each (p > 0.5 for a Bernoulli). A Box policy whose log_std is a
(latent, dimensions) matrix explores with generalized state-dependent noise
(rl.sde): its output carries the policy's latent features after the mean.

Any other space (Text, Graph, Sequence, two images in one Dict) is refused
with the gymnasium wrapper that would make it one of these.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

import framework
from framework.device import array_module
from framework.distributions import NORMAL_LOG_PROB, Bernoulli, Categorical, Normal
from framework.ops.pointwise import SOFTPLUS
from framework.ops.reduction import LOG_SOFTMAX
from framework.random import standard_normal, uniform
from framework.rl import sde

MAX_CHANNELS = 4
"""Channels of a (height, width, channels) image that is transposed for the convolutions."""


class SpaceError(ValueError):
    """A space the actor-critic plugins cannot read; the message names the gymnasium wrapper that would fix it."""


def _channels_last(space: gym.spaces.Box) -> bool:
    """A (height, width, channels) image: 1 to 4 channels last, both sides larger than that."""
    h, w, c = space.shape
    return c <= MAX_CHANNELS < min(h, w)


def _is_image(space: gym.Space) -> bool:
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3


def _leaves(space: gym.Space, where: str) -> list[tuple[str, gym.Space]]:
    """The spaces of a Dict or Tuple (nested ones flattened), in order, each with where it is; SpaceError for
    one they cannot read."""
    if isinstance(space, gym.spaces.Dict):
        return [leaf for key, sub in space.spaces.items() for leaf in _leaves(sub, f"{where}[{key!r}]")]
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for i, sub in enumerate(space.spaces) for leaf in _leaves(sub, f"{where}[{i}]")]
    if isinstance(space, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return [(where, space)]
    raise SpaceError(f"observation space {space}{' at ' + where if where else ''}, which hogshare cannot read; "
                     f"allowed: Box, Discrete, MultiDiscrete, MultiBinary, and Dict or Tuple of them (wrap the env in "
                     f"gymnasium.wrappers.TransformObservation to turn it into a Box)")


def _vector_size(space: gym.Space) -> int:
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    return int(np.prod(space.shape))


def _as_vector(space: gym.Space, values: list[Any]) -> np.ndarray:
    """A batch of one leaf's raw values as float32 rows (one-hot for Discrete and MultiDiscrete)."""
    n = len(values)
    if isinstance(space, gym.spaces.Discrete):
        out = np.zeros((n, int(space.n)), dtype=np.float32)
        out[np.arange(n), np.asarray(values, dtype=np.int64) - int(space.start)] = 1.0
        return out
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = space.nvec.reshape(-1)
        index = np.asarray(values, dtype=np.int64).reshape(n, -1) - space.start.reshape(-1)
        out = np.zeros((n, int(nvec.sum())), dtype=np.float32)
        out[np.arange(n)[:, None], index + np.concatenate([[0], np.cumsum(nvec)[:-1]])] = 1.0
        return out
    return np.asarray(values, dtype=np.float32).reshape(n, -1)


def _image_chw(space: gym.spaces.Box, values: Any, dtype: Any) -> np.ndarray:
    """A batch of images as (n, C, H, W) of dtype."""
    batch = np.asarray(values, dtype=dtype)
    return batch.transpose(0, 3, 1, 2) if _channels_last(space) else batch


@dataclass
class ObservationLayout:
    """What the model reads for one observation of a space (see the module docstring): `shape` and `dtype` of
    its array; `image_shape` (C, H, W) of the image in it (None without one), packed first and flattened when
    `vector_size` > 0 floats come with it."""

    space: gym.Space
    shape: tuple[int, ...]
    dtype: Any
    image_shape: tuple[int, ...] | None
    vector_size: int

    def __post_init__(self) -> None:
        if int(np.prod(self.shape)) == 0:
            raise SpaceError(f"observation space {self.space}, which has no elements; allowed: a space of at least "
                             f"one element")

    @classmethod
    def of(cls, space: gym.Space) -> "ObservationLayout":
        """The layout of space; SpaceError for a space that cannot be read."""
        if isinstance(space, gym.spaces.Box) and len(space.shape) == 3:
            h, w, c = space.shape
            shape = (c, h, w) if _channels_last(space) else tuple(int(d) for d in space.shape)
            dtype = np.uint8 if space.dtype == np.uint8 else np.float32
            return cls(space, shape, dtype, shape, 0)
        if isinstance(space, gym.spaces.Box):
            return cls(space, tuple(int(d) for d in space.shape), np.float32, None, 0)
        leaves = _leaves(space, "")
        images = [(where, leaf) for where, leaf in leaves if _is_image(leaf)]
        if len(images) > 1:
            raise SpaceError(f"observation space {space} has {len(images)} image entries "
                             f"({', '.join(w for w, _ in images)}); allowed: at most one (keep one with "
                             f"gymnasium.wrappers.FilterObservation, or combine them with TransformObservation)")
        vector = sum(_vector_size(leaf) for _, leaf in leaves if not _is_image(leaf))
        if not images:
            return cls(space, (vector,), np.float32, None, vector)
        image = cls.of(images[0][1]).shape
        return cls(space, (int(np.prod(image)) + vector,), np.float32, image, vector)

    def batch(self, observations: Any) -> np.ndarray:
        """Raw observations of n envs as one (n, *shape) array of dtype."""
        space, n = self.space, len(observations)
        if n == 0:  # no env's episode was truncated: nothing to read (and no shape to infer from)
            return np.zeros((0, *self.shape), dtype=self.dtype)
        if isinstance(space, gym.spaces.Box):
            if self.image_shape is not None:
                return _image_chw(space, observations, self.dtype)
            return np.asarray(observations, dtype=self.dtype).reshape(n, *self.shape)
        if not isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
            return _as_vector(space, observations)
        parts = []
        for leaf, values in _leaf_values(space, observations):
            if _is_image(leaf):
                parts.insert(0, _image_chw(leaf, values, np.float32).reshape(n, -1))
            else:
                parts.append(_as_vector(leaf, values))
        return np.concatenate(parts, axis=1)


def _leaf_values(space: gym.Space, observations: list[Any]) -> list[tuple[gym.Space, list[Any]]]:
    """Each leaf space of a Dict or Tuple with the n observations' values of it, in _leaves' order."""
    if isinstance(space, gym.spaces.Dict):
        return [pair for key, sub in space.spaces.items() for pair in _leaf_values(sub, [o[key] for o in observations])]
    if isinstance(space, gym.spaces.Tuple):
        return [pair for i, sub in enumerate(space.spaces) for pair in _leaf_values(sub, [o[i] for o in observations])]
    return [(space, observations)]


class ActionHead:
    """How a policy output maps to actions of a space (see the module docstring): its width `size`, the
    per-env `shape` and `dtype` of a rollout's stored actions, sampling, greedy actions, log-probabilities."""

    def __init__(self, space: gym.Space):
        self.space = space
        if isinstance(space, gym.spaces.Discrete):
            self.kind, self.size, self.shape, self.dtype = "categorical", int(space.n), (), np.int64
        elif isinstance(space, gym.spaces.Box):
            n = int(np.prod(space.shape))
            self.kind, self.size, self.shape, self.dtype = "normal", n, (n,), np.float32
        elif isinstance(space, gym.spaces.MultiDiscrete) and space.nvec.ndim == 1:
            self.nvec = [int(k) for k in space.nvec]
            self.kind, self.size, self.shape, self.dtype = "multi_categorical", sum(self.nvec), (len(self.nvec),), \
                np.int64
            self.bounds = np.concatenate([[0], np.cumsum(self.nvec)]).tolist()
        elif isinstance(space, gym.spaces.MultiBinary) and len(space.shape) == 1:
            n = int(space.shape[0])
            self.kind, self.size, self.shape, self.dtype = "bernoulli", n, (n,), np.float32
        else:
            raise SpaceError(f"action space {space} is not one hogshare can act in; allowed: Discrete, Box, "
                             f"MultiDiscrete or MultiBinary of one axis (wrap the env in a gymnasium.ActionWrapper "
                             f"that maps one of these to its actions)")
        if self.size == 0:
            raise SpaceError(f"action space {space}, which has no elements; allowed: a space of at least one "
                             f"element")

    @property
    def continuous(self) -> bool:
        return self.kind == "normal"

    def noise(self, xp_uniform: Any) -> Any:
        """The noise of sample() from uniform draws in (0, 1) of shape (..., size): Gumbel for categoricals,
        logistic for Bernoullis (Normal actions draw N(0, 1) instead)."""
        xp = array_module(xp_uniform)
        if self.kind == "bernoulli":
            return xp.log(xp_uniform + 1e-12) - xp.log1p(-xp_uniform + 1e-12)
        return -xp.log(-xp.log(xp_uniform + 1e-12) + 1e-12)

    def draw_noise(self, leading: tuple[int, ...], dtype: Any, device: str, latent: int = 0,
                   every: int = 0) -> Any:
        """The noise of sample() for actions of shape (*leading, size), drawn at once on device: N(0, 1) for a
        Normal, else from uniform draws (noise()). With `latent` features (a gSDE policy: rl.sde), N(0, 1)
        exploration matrices of shape (*leading, latent, size) instead, each kept for `every` steps of the
        first axis when it is > 0 (`sde.draw`)."""
        if latent:
            return sde.draw(leading, latent, self.size, dtype, device, every)
        shape = (*leading, self.size)
        if self.continuous:
            return standard_normal(shape, dtype, device)
        return self.noise(uniform(shape, dtype, device=device))

    def sample(self, head: Any, noise: Any, log_std: Any = None) -> Any:
        """Actions for policy outputs `head` (batch, size) with noise: Gumbel-max for categoricals, mean + std *
        noise for a Normal (mean + latent @ (std * noise) with gSDE: rl.sde), logit + logistic noise > 0 for
        Bernoullis. A policy output that is not finite (a NaN observation, NaN weights) still gives an action the
        env takes: argmax and `> 0` give one of NaN, and a Normal's non-finite action is 0 (clipped into the Box
        by for_env), so an actor never hands the env a NaN."""
        xp = array_module(head)
        if self.kind == "normal":
            if sde.latent_size(log_std):
                actions = sde.actions(head, noise, log_std, self.size)
            else:
                actions = head + xp.exp(log_std) * noise
            return xp.where(xp.isfinite(actions), actions, 0.0).astype(actions.dtype, copy=False)
        if self.kind == "bernoulli":
            return (head + noise > 0).astype(np.float32)
        return self.greedy(head + noise)

    def greedy(self, head: Any) -> Any:
        """The most likely action of each component (the mean for a Normal, p > 0.5 for a Bernoulli)."""
        xp = array_module(head)
        if self.kind == "normal":
            return head[:, :self.size]
        if self.kind == "bernoulli":
            return (head > 0).astype(np.float32)
        if self.kind == "categorical":
            return xp.argmax(head, axis=1)
        return xp.stack([xp.argmax(head[:, a:b], axis=1) for a, b in zip(self.bounds, self.bounds[1:])], axis=1)

    def for_env(self, actions: np.ndarray) -> np.ndarray:
        """Host actions as the env takes them: offset by the space's start, clipped to a Box's bounds."""
        space = self.space
        if self.kind == "categorical":
            return np.asarray(actions, dtype=np.int64) + int(space.start)
        if self.kind == "multi_categorical":
            return np.asarray(actions, dtype=np.int64) + space.start
        if self.kind == "bernoulli":
            return np.asarray(actions, dtype=np.int8)
        return np.clip(np.asarray(actions).reshape(len(actions), *space.shape), space.low, space.high)

    def log_prob(self, head: Any, actions: Any, log_std: Any = None) -> Any:
        """The log-probability of actions (batch,), summed over the components, with grad."""
        return self.log_prob_entropy(head, actions, log_std, entropy=False)[0]

    def log_prob_entropy(self, head: Any, actions: Any, log_std: Any = None,
                         entropy: bool = True) -> tuple[Any, Any]:
        """(log-probability of actions, entropy; None without `entropy`), each (batch,) and summed over the
        components, with grad."""
        if self.kind == "categorical":
            dist = Categorical(logits=head)
            return dist.log_prob(actions), dist.entropy() if entropy else None
        if self.kind in ("normal", "bernoulli"):
            dist = self._normal(head, log_std) if self.kind == "normal" else Bernoulli(logits=head)
            return dist.log_prob(actions).sum(axis=1), dist.entropy().sum(axis=1) if entropy else None
        parts = [Categorical(logits=head[:, a:b]) for a, b in zip(self.bounds, self.bounds[1:])]
        log_prob = sum(dist.log_prob(actions[:, i]) for i, dist in enumerate(parts))
        return log_prob, sum(dist.entropy() for dist in parts) if entropy else None

    def _normal(self, head: Any, log_std: Any) -> Normal:
        """The Normal of a Box policy's output tensor: around the mean, with exp(log_std), or gSDE's
        state-dependent standard deviation (rl.sde)."""
        if sde.latent_size(log_std):
            mean, latent = sde.split(head, self.size)
            return Normal(mean, sde.scale(latent, log_std))
        return Normal(head, framework.exp(log_std))

    def behaviour_log_prob(self, head: Any, actions: Any, log_std: Any = None) -> Any:
        """log mu(a|x) of actions just drawn from the policy outputs head (arrays on the device; log_std the
        Normal's log standard deviation, an array): log_prob's math, run as its primitives' forwards on the arrays
        (no tensor, no graph, no check of the actions it drew itself), the same numbers in a few microseconds,
        which an actor pays at every step. A row whose policy output is not finite (a NaN observation, NaN
        weights) gets NaN: a learner cuts that step out of its batch (rl.actor_learner)."""
        xp = array_module(head)
        if not bool(xp.isfinite(head).all()):  # the rows that are not finite computed on zeros (no warning), then NaN
            finite = xp.isfinite(head).all(axis=1)
            log_prob = self.behaviour_log_prob(xp.where(finite[:, None], head, 0.0), actions, log_std)
            return xp.where(finite, log_prob, xp.nan)
        if self.kind == "categorical":
            return LOG_SOFTMAX.forward(head, -1)[xp.arange(len(head)), actions]
        if self.kind == "multi_categorical":
            rows = xp.arange(len(head))
            return sum(LOG_SOFTMAX.forward(head[:, a:b], -1)[rows, actions[:, i]]
                       for i, (a, b) in enumerate(zip(self.bounds, self.bounds[1:])))
        if self.kind == "normal":
            if sde.latent_size(log_std):
                mean, latent = sde.split(head, self.size)
                return NORMAL_LOG_PROB.forward(actions, mean, sde.scale(latent, log_std)).sum(axis=1)
            return NORMAL_LOG_PROB.forward(actions, head, xp.exp(log_std)).sum(axis=1)
        return (actions * head - SOFTPLUS.forward(head, 1.0, 20.0)).sum(axis=1)
