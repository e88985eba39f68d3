"""The tail of every gradient update: skip what is not finite, clip, set the learning rate, step, record.

A worker loop computes a loss and its gradient its own way (A3C over a
rollout, Hogwild over a minibatch); what it then does with the gradient is
the same everywhere, so it is written once here.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Any, ContextManager, Mapping

import numpy as np

from framework.optim.clip import grad_norm
from framework.runtime.run_stats import WorkerStats


def apply_gradient(stats: WorkerStats, optimizer: Any, grad: Any, parts: Mapping[str, float], lr: float,
                   synced_at: int, *, max_grad_norm: float | None = None, shared_grad: Any = None,
                   guard: ContextManager[Any] | None = None) -> bool:
    """Step optimizer with the gradient in grad (one flat arena gradient) and record the update; whether it did.

    Nothing is applied, and the update counts as skipped, when the gradient's
    norm or one of parts (the update's named numbers: its losses) is not
    finite. Otherwise grad is scaled down to max_grad_norm (when given and
    exceeded), every param group's lr is set, grad is copied into shared_grad
    (a worker's local gradient into the shared model's, one copy; None when
    grad is the shared model's own) and the optimizer steps, under guard (a
    lock, for Hogwild's `locked`) when one is given. The update is recorded
    with parts, grad_norm and lr, and its lag since synced_at (the run's
    update count when the worker read the shared parameters).
    """
    norm = grad_norm(grad)
    if not (np.isfinite(norm) and np.isfinite(list(parts.values())).all()):
        stats.add_skipped()
        return False
    if max_grad_norm is not None and norm > max_grad_norm:
        grad *= max_grad_norm / norm
    for group in optimizer.param_groups:
        group["lr"] = lr
    if shared_grad is not None:
        shared_grad[...] = grad  # one device-to-device copy on a GPU
    with nullcontext() if guard is None else guard:
        optimizer.step()
    stats.add_update({**parts, "grad_norm": norm, "lr": lr}, stats.global_updates() - synced_at)
    return True
