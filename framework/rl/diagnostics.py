"""The numbers PPO users read beside the losses: explained variance, approximate KL, clip fraction.

All three are computed on the host from arrays an update already has (the
values and targets of its batch, the log ratios of its minibatch), so they
cost a few reductions over a batch, nothing on the device.

- `explained_variance(values, targets)`: 1 - Var(targets - values) / Var(targets), as Stable-Baselines3 and
  cleanrl log it: 1 when the value function predicts the targets, 0 when it does no better than their mean,
  negative when it does worse. Targets with no variance give 0 (SB3 gives NaN; a metric here must be finite,
  since a non-finite update part skips the update).
- `approx_kl(log_ratio)`: the KL divergence from the policy that acted to the current one, estimated from
  samples of the acting policy with Schulman's unbiased, never-negative estimator E[(r - 1) - log r]
  (cleanrl's `approx_kl`; SB3 logs the same).
- `clip_fraction(log_ratio, clip_range)`: the share of samples whose ratio r lies outside
  [1 - clip_range, 1 + clip_range], where the clipped surrogate gives no gradient.
"""
from __future__ import annotations

import numpy as np


def explained_variance(values: np.ndarray, targets: np.ndarray) -> float:
    """1 - Var(targets - values) / Var(targets) over all entries; 0 when the targets do not vary."""
    spread = float(np.var(targets))
    if not spread > 0.0:
        return 0.0
    return 1.0 - float(np.var(targets - values)) / spread


def approx_kl(log_ratio: np.ndarray) -> float:
    """E[(r - 1) - log r] with r = exp(log_ratio): KL(acting policy || current policy), estimated."""
    log_ratio = np.minimum(log_ratio, 50.0)  # a ratio past e^50 is as far off as any: keep the mean finite
    return float(np.mean(np.expm1(log_ratio) - log_ratio))


def clip_fraction(log_ratio: np.ndarray, clip_range: float) -> float:
    """The share of ratios outside [1 - clip_range, 1 + clip_range]."""
    return float(np.mean(np.abs(np.expm1(log_ratio)) > clip_range))
