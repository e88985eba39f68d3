"""Observation and reward normalisation for the actor-critic plugins, as Stable-Baselines3's VecNormalize.

`RunningMeanStd` is a module of three buffers (mean, var, count) that merges
batches into running statistics (Chan et al.'s parallel update). An
`ActorCritic` built with `env.normalize_obs` or `env.normalize_reward` holds
one per statistic, so they live where the model lives: in the run's shared
memory, in every checkpoint, and in the model that `evaluate` and `--resume`
load.

Every worker updates the same statistics, lock-free like the parameters.
A value that is not finite (a NaN or inf observation or reward, a return
that overflowed) never enters them: its row is left out, and an env's running
return starts again after it. The step itself still reaches the learner as
it was, so the update over it is skipped and counted (`skipped_updates`), and
the statistics, in the checkpoint too, stay finite for the run and its
resumes. A
worker gathers its steps' statistics locally (`BatchMoments`) and merges them
into the shared ones once every `flush_every` steps (a rollout), so the
read-merge-write of two workers rarely overlaps; when it does (a worker
preempted inside it), the other's merges of that moment are lost, never torn
into a negative variance.

`Normalization` applies them: to observations on the acting path (rl.actor,
the one place observations are normalised, for workers, evaluation and
`Policy` alike) and to a rollout's rewards (rl.rollout). Observations become
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
from framework.rl.envs.info import EnvInfo

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
        self.merge(BatchMoments.of(batch))

    def merge(self, moments: "BatchMoments") -> None:
        """Merge another stream's moments into the statistics, in place (one read, one write)."""
        mean, var, count = BatchMoments(*self.statistics()).merged(moments)
        for buffer, value in ((self.mean, mean), (self.var, var), (self.count, np.array([count]))):
            buffer.data_array[...] = array_module(buffer.data_array).asarray(value)

    def std(self) -> np.ndarray:
        """sqrt(var + EPSILON) on the host."""
        return np.sqrt(to_host(self.var.data_array) + EPSILON)

    def extra_repr(self) -> str:
        return f"shape={tuple(self.mean.shape)}"


class BatchMoments:
    """Mean, population variance and count of a stream of rows, merged with Chan et al.'s parallel update."""

    def __init__(self, mean: np.ndarray | float, var: np.ndarray | float, count: float):
        self.mean, self.var, self.count = mean, var, count

    @classmethod
    def of(cls, batch: np.ndarray) -> "BatchMoments":
        batch = np.asarray(batch, dtype=np.float64)
        if batch.shape[0] == 0:
            return cls(np.zeros(batch.shape[1:]), np.zeros(batch.shape[1:]), 0)
        return cls(batch.mean(axis=0), batch.var(axis=0), batch.shape[0])

    def merged(self, other: "BatchMoments") -> "BatchMoments":
        if other.count == 0:
            return self
        total = self.count + other.count
        delta = other.mean - self.mean
        var = (self.var * self.count + other.var * other.count
               + delta * delta * (self.count * other.count / total)) / total
        return BatchMoments(self.mean + delta * (other.count / total), var, total)

    def __iter__(self):
        return iter((self.mean, self.var, self.count))


class Normalization:
    """A model's normalisers applied to the steps of a batch of n envs (see the module docstring)."""

    def __init__(self, obs: RunningMeanStd | None, returns: RunningMeanStd | None, n: int, clip_obs: float,
                 clip_reward: float, gamma: float = 1.0, update: bool = False, flush_every: int = 1):
        self.obs_stats, self.return_stats = obs, returns
        self.clip_obs, self.clip_reward, self.gamma, self.update = clip_obs, clip_reward, gamma, update
        self.flush_every = flush_every
        self._returns = np.zeros(n)
        self._pending: dict[RunningMeanStd, BatchMoments] = {}
        self._pending_steps: dict[RunningMeanStd, int] = {}

    @classmethod
    def for_model(cls, model: Any, env: EnvInfo, n: int = 0, gamma: float = 1.0, update: bool = False,
                  flush_every: int = 1) -> "Normalization | None":
        """The normalisation of `model` (an ActorCritic) in the described environment, or None
        when the model has none: read only, or, for a worker's n envs, updating the statistics (its rewards'
        running returns discounted by gamma, merged every flush_every steps)."""
        if model.obs_norm is None and model.return_norm is None:
            return None
        return cls(model.obs_norm, model.return_norm, n, env.clip_obs, env.clip_reward, gamma, update, flush_every)

    def _gather(self, stats: RunningMeanStd, batch: np.ndarray) -> None:
        """Add a step's rows to what `stats` has pending (rows holding a value that is not finite are left out);
        merge them into it every `flush_every` steps."""
        batch = np.asarray(batch, dtype=np.float64)
        moments = BatchMoments.of(batch[np.isfinite(batch.reshape(len(batch), -1)).all(axis=1)])
        pending = self._pending.get(stats)
        self._pending[stats] = moments if pending is None else pending.merged(moments)
        self._pending_steps[stats] = self._pending_steps.get(stats, 0) + 1
        if self._pending_steps[stats] >= self.flush_every:
            stats.merge(self._pending.pop(stats))
            del self._pending_steps[stats]

    def flush(self) -> None:
        """Merge every pending step into the shared statistics."""
        for stats, moments in self._pending.items():
            stats.merge(moments)
        self._pending.clear()
        self._pending_steps.clear()

    def observations(self, raw: np.ndarray, update: bool = True) -> np.ndarray:
        """A batch of observations normalised (float32), after merging it into the statistics when updating."""
        if self.obs_stats is None:
            return raw
        if update and self.update:
            self._gather(self.obs_stats, raw)
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
            self._gather(self.return_stats, self._returns[:, None])
        scaled = np.clip(raw / self.return_stats.std()[0], -self.clip_reward, self.clip_reward)
        self._returns[done | ~np.isfinite(self._returns)] = 0.0  # a NaN or inf reward poisons no later return
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
