"""Hogwild's worker loops: minibatch steps on the worker's shard against the shared parameters, without locks.

Dense data: cross-entropy through the autograd (through framework.compile
with `trainer.compile`: a third less time per 784-128-10 batch of 64) and a
step of the configured optimizer (each worker's own state, or one shared). Sparse data: the SVM's
SGD step that touches only the batch's active features (`sparse_step`).
Each worker checks the run's step budget before every batch, so a run ends
at most one batch per worker past `trainer.total_steps`.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, ContextManager, Iterator

import numpy as np

import framework
from framework.runtime.algorithm import WorkerContext, build_optimizer, learning_rate
from framework.runtime.profile import LEARN
from framework.runtime.update import apply_gradient
from framework.algorithms.hogwild import datasets
from framework.device import to_device
from framework.nn import functional as F


@dataclass
class SharedData:
    """What every worker of a run gets: the training data in shared memory and, when `locked`, the lock."""

    data: datasets.TrainingData
    lock: Any


def _guard(lock: Any) -> ContextManager[Any]:
    """The lock around an update, or nothing (lock-free)."""
    return nullcontext() if lock is None else lock


class _Steps:
    """The bookkeeping common to both worker loops: batch order, lr schedule, lock, stats."""

    def __init__(self, ctx: WorkerContext, rows: int):
        self.stats = ctx.stats
        self.algo, self.opt_cfg = ctx.config["algorithm"], ctx.config["optimizer"]
        self.total_steps = ctx.config["trainer"]["total_steps"]
        self.batch = self.algo["batch_size"]
        self.batches = rows // self.batch
        self.rng = np.random.default_rng(ctx.seed)
        self.guard = _guard(ctx.shared.lock)

    def batches_forever(self) -> Iterator[tuple[int, int]]:
        """Row ranges [start, stop) of full batches, each epoch in a new random order, until the run stops."""
        while True:
            for b in self.rng.permutation(self.batches):
                if self.stats.should_stop():
                    return
                yield int(b) * self.batch, (int(b) + 1) * self.batch

    def lr(self) -> float:
        return learning_rate(self.opt_cfg, self.stats.global_steps(), self.total_steps)

    def finish(self, loss: float, norm: float, lr: float, read_at: int) -> None:
        self.stats.add_steps(self.batch)
        self.stats.add_update({"loss": loss, "grad_norm": norm, "lr": lr}, self.stats.global_updates() - read_at)


def classifier_loss(model: Any, x: Any, y: Any) -> Any:
    """Mean cross-entropy of the model's logits for inputs x and class indices y."""
    return F.cross_entropy(model(x), y)


def run_dense(ctx: WorkerContext) -> None:
    """Minibatch training of the shared classifier with the configured optimizer."""
    data = ctx.shared.data.shard(ctx.rank)
    steps = _Steps(ctx, len(data))
    model = ctx.model
    if steps.algo["optimizer_state"] == "shared":
        optimizer = ctx.optimizer
    else:
        optimizer = build_optimizer(model, ctx.config["optimizer"])
    grad = model.arena.grad
    loss_fn = framework.compile(classifier_loss) if ctx.config["trainer"]["compile"] else classifier_loss
    ctx.stats.profile.switch(LEARN)  # each step reads the shared parameters as they are: no sync, no env
    for start, stop in steps.batches_forever():
        read_at = ctx.stats.global_updates()
        optimizer.zero_grad()
        x, y = to_device(data.x[start:stop], ctx.device), to_device(data.y[start:stop], ctx.device)
        loss = loss_fn(model, framework.as_tensor(x), framework.as_tensor(y))
        loss.backward()
        if apply_gradient(ctx.stats, optimizer, grad, {"loss": loss.item()}, steps.lr(), read_at, guard=steps.guard):
            ctx.stats.add_steps(steps.batch)


def sparse_step(w: np.ndarray, batch: datasets.Sparse, degrees: np.ndarray, l2: float, lr: float,
                lock: Any = None) -> tuple[float, float]:
    """One SGD step on the batch's mean hinge loss plus L2 that reads and writes only the batch's features.

    The L2 penalty is split over rows as in the Hogwild! paper: a row that
    uses feature u pulls w_u towards zero by 2 * l2 * w_u / degrees[u], so a
    pass over the data applies the full penalty while touching only active
    coordinates. The write is `np.subtract.at` (features shared by several
    rows add up), under `lock` when one is given, and is skipped when the
    loss or gradient is not finite. Returns (mean hinge loss, gradient norm).
    """
    span = batch.span()
    idx, values = batch.indices[span], batch.values[span]
    active = w[idx]
    margins = batch.y * np.add.reduceat(values * active, batch.indptr[:-1] - span.start)
    coef = np.where(margins < 1.0, -batch.y, 0.0).astype(np.float32)
    g = np.repeat(coef, np.diff(batch.indptr)) * values + (2.0 * l2) * active / degrees[idx]
    loss, norm = float(np.maximum(1.0 - margins, 0.0).mean()), float(np.sqrt(np.dot(g, g)))
    if np.isfinite(loss) and np.isfinite(norm):
        g *= lr / len(batch)
        with _guard(lock):
            np.subtract.at(w, idx, g)
    return loss, norm


def run_sparse(ctx: WorkerContext) -> None:
    """Minibatch SGD of the shared linear SVM (see sparse_step) over the worker's shard."""
    shared = ctx.shared.data
    data = shared.shard(ctx.rank)
    steps = _Steps(ctx, len(data))
    w = ctx.model.weight.data_array
    ctx.stats.profile.switch(LEARN)
    for start, stop in steps.batches_forever():
        read_at = ctx.stats.global_updates()
        lr = steps.lr()
        loss, norm = sparse_step(w, data.rows(start, stop), shared.degrees, steps.algo["l2"], lr, ctx.shared.lock)
        if np.isfinite(loss) and np.isfinite(norm):
            steps.finish(loss, norm, lr, read_at)
        else:
            ctx.stats.add_skipped()
