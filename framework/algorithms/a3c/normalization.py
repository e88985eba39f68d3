"""Observation and reward normalisation for A3C, as Stable-Baselines3's VecNormalize.

`RunningMeanStd` is a module of three buffers (mean, var, count) that merges
batches into running statistics (Chan et al.'s parallel update). An
`ActorCritic` built with `env.normalize_obs` or `env.normalize_reward` holds
one per statistic, so they live where the model lives: in the run's shared
memory (every worker updates the same statistics, lock-free like the
parameters: a rare concurrent update may be lost, none is torn into a
negative variance), in every checkpoint, and in the model that `evaluate` and
`--resume` load.

`Normalization` applies them to an `EnvBatch`'s steps. Observations become
(obs - mean) / sqrt(var + eps), clipped to +-`env.clip_obs`. Rewards are
divided by the standard deviation of the discounted return (each env's
running return, gamma from the algorithm section), clipped to
+-`env.clip_reward`; episode returns are still reported in the env's own
units. Workers update the statistics; evaluation only reads them.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import framework
from framework import nn
from framework.device import array_module, to_host

EPSILON = 1e-8
"""Added to the variance before the square root, as VecNormalize does."""

SCALAR_ELEMENTS = 16
"""Observation elements whose mean and std are logged as scalars (all are in the params/ histograms)."""


class RunningMeanStd(nn.Module):
    """Running mean and (population) variance of every element of a stream of (n, *shape) batches.

    The count starts at `prior_count` (as VecNormalize's 1e-4) so that the first batch's statistics dominate.
    """

    def __init__(self, shape: Sequence[int], prior_count: float = 1e-4):
        super().__init__()
        self.register_buffer("mean", framework.zeros(*shape, dtype=np.float64))
        self.register_buffer("var", framework.ones(*shape, dtype=np.float64))
        self.register_buffer("count", framework.full((1,), prior_count, dtype=np.float64))

    def statistics(self) -> tuple[np.ndarray, np.ndarray, float]:
        """(mean, var, count) as host copies."""
        return (to_host(self.mean.data_array, copy=True), to_host(self.var.data_array, copy=True),
                float(to_host(self.count.data_array)[0]))

    def update(self, batch: np.ndarray) -> None:
        """Merge the rows of a host batch into the statistics, in place."""
        batch = np.asarray(batch, dtype=np.float64)
        mean, var, count = self.statistics()
        n = batch.shape[0]
        delta = batch.mean(axis=0) - mean
        total = count + n
        new_var = (var * count + batch.var(axis=0) * n + delta * delta * (count * n / total)) / total
        for buffer, value in ((self.mean, mean + delta * (n / total)), (self.var, new_var),
                              (self.count, np.array([total]))):
            buffer.data_array[...] = array_module(buffer.data_array).asarray(value)

    def std(self) -> np.ndarray:
        """sqrt(var + EPSILON) on the host."""
        return np.sqrt(to_host(self.var.data_array) + EPSILON)

    def extra_repr(self) -> str:
        return f"shape={tuple(self.mean.shape)}"


class Normalization:
    """A model's normalisers applied to the steps of a batch of n envs (see the module docstring)."""

    def __init__(self, obs: RunningMeanStd | None, returns: RunningMeanStd | None, n: int, clip_obs: float,
                 clip_reward: float, gamma: float, update: bool):
        self.obs_stats, self.return_stats = obs, returns
        self.clip_obs, self.clip_reward, self.gamma, self.update = clip_obs, clip_reward, gamma, update
        self._returns = np.zeros(n)

    @classmethod
    def for_model(cls, model: Any, config: dict[str, Any], n: int, update: bool) -> "Normalization | None":
        """The normalisation of `model` (an ActorCritic) for n envs of config's env, or None when it has none."""
        if model.obs_norm is None and model.return_norm is None:
            return None
        env = config["env"]
        return cls(model.obs_norm, model.return_norm, n, env["clip_obs"], env["clip_reward"],
                   config["algorithm"]["gamma"], update)

    def observations(self, raw: np.ndarray, update: bool = True) -> np.ndarray:
        """A batch of observations normalised (float32), after merging it into the statistics when updating."""
        if self.obs_stats is None:
            return raw
        if update and self.update:
            self.obs_stats.update(raw)
        mean = to_host(self.obs_stats.mean.data_array)
        scaled = (raw - mean) / self.obs_stats.std()
        return np.clip(scaled, -self.clip_obs, self.clip_obs).astype(np.float32)

    def rewards(self, raw: np.ndarray, done: np.ndarray) -> np.ndarray:
        """A step's rewards scaled by the discounted return's standard deviation (float32); done envs' running
        returns start again."""
        if self.return_stats is None:
            return raw
        self._returns = self._returns * self.gamma + raw
        if self.update:
            self.return_stats.update(self._returns[:, None])
        scaled = np.clip(raw / self.return_stats.std()[0], -self.clip_reward, self.clip_reward)
        self._returns[done] = 0.0
        return scaled.astype(np.float32)

    def scalars(self) -> dict[str, float]:
        """The statistics as TensorBoard scalars: per-element obs mean and std (first 16 elements), return std."""
        values: dict[str, float] = {}
        if self.obs_stats is not None:
            mean, std = to_host(self.obs_stats.mean.data_array).ravel(), self.obs_stats.std().ravel()
            for i in range(min(mean.size, SCALAR_ELEMENTS)):
                values[f"normalization/obs_mean/{i}"] = float(mean[i])
                values[f"normalization/obs_std/{i}"] = float(std[i])
            values["normalization/obs_count"] = self.obs_stats.statistics()[2]
        if self.return_stats is not None:
            values["normalization/return_std"] = float(self.return_stats.std()[0])
        return values
