"""Hogwild!: supervised training by workers that update one shared model without locks.

Each worker trains on its own shard of the training set (built once, in
shared memory, by `framework.datasets`), reading and writing the shared
parameters directly, as in the Hogwild! paper and PyTorch's mnist_hogwild:

- dense data (`npz`, `mnist_teacher`): an MLP classifier, minibatches of
  cross-entropy through the autograd, and a step of the configured optimizer
  on the shared parameter arena, each worker with its own optimizer state
  (`optimizer_state: per_worker`, as mnist_hogwild) or all sharing one
  (`optimizer_state: shared`);
- sparse data (`sparse_svm`): a linear SVM (hinge loss, L2 penalty), whose
  minibatch SGD update touches only the coordinates active in the batch
  (`np.subtract.at` on the shared weights), as in the paper's RCV1 experiment.

`locked: true` takes a lock around every update (the paper's comparison).
With `trainer.device: cuda:N` (dense data only) the shared classifier and
the optimizer state live in GPU memory and each worker copies its minibatch
there once per step; the sparse SVM's scatter updates run on the CPU only.
The main process measures test accuracy and loss every `trainer.eval_every_s`,
at the end (summary.json), and stops the run at `algorithm.target_accuracy`.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, ContextManager, Iterator

import numpy as np

import framework
from framework import datasets, nn
from framework.algorithms.base import Algorithm, Evaluation, WorkerContext, build_optimizer, learning_rate
from framework.config import SCHEMA, Config, ConfigError, Field
from framework.device import to_device, to_host
from framework.nn import functional as F
from framework.optim.clip import grad_norm

_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}
_EVAL_ROWS = 4096


class Classifier(nn.Module):
    """An MLP: Linear layers of model.hidden widths with the activation between them, then class logits."""

    def __init__(self, features: int, hidden: list[int], activation: str, classes: int):
        super().__init__()
        layers: list[nn.Module] = []
        size = features
        for width in hidden:
            layers += [nn.Linear(size, width), _ACTIVATIONS[activation]()]
            size = width
        self.layers = nn.Sequential(*layers, nn.Linear(size, classes))

    def forward(self, x: Any) -> Any:
        """Class logits for a batch of flat inputs."""
        return self.layers(x)


class LinearSVM(nn.Module):
    """A linear classifier sign(x . weight) over sparse inputs; weights start at zero."""

    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(framework.zeros(features))

    def scores(self, data: datasets.Sparse) -> np.ndarray:
        """x . weight for every row of data."""
        return data.scores(self.weight.data_array)


@dataclass
class SharedData:
    """What every worker of a run gets: the training data in shared memory and, when `locked`, the lock."""

    data: datasets.TrainingData
    lock: Any


def _guard(lock: Any) -> ContextManager[Any]:
    """The lock around an update, or nothing (lock-free)."""
    return nullcontext() if lock is None else lock


def _spec(config: Config) -> datasets.DataSpec:
    return datasets.describe(config["dataset"], config["trainer"]["workers"])


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
        self.stats.add_update([loss, norm, lr], self.stats.global_updates() - read_at)


def _run_dense(ctx: WorkerContext) -> None:
    """Minibatch training of the shared classifier with the configured optimizer."""
    data = ctx.shared.data.shard(ctx.rank)
    steps = _Steps(ctx, len(data))
    model = ctx.model
    if steps.algo["optimizer_state"] == "shared":
        optimizer = ctx.optimizer
    else:
        optimizer = build_optimizer(model, ctx.config["optimizer"])
    grad = model.arena.grad
    for start, stop in steps.batches_forever():
        read_at = ctx.stats.global_updates()
        optimizer.zero_grad()
        x, y = to_device(data.x[start:stop], ctx.device), to_device(data.y[start:stop], ctx.device)
        loss = F.cross_entropy(model(framework.as_tensor(x)), y)
        loss.backward()
        value, norm = loss.item(), grad_norm(grad)
        if not (np.isfinite(value) and np.isfinite(norm)):
            ctx.stats.add_skipped()
            continue
        lr = steps.lr()
        for group in optimizer.param_groups:
            group["lr"] = lr
        with steps.guard:
            optimizer.step()
        steps.finish(value, norm, lr, read_at)


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


def _run_sparse(ctx: WorkerContext) -> None:
    """Minibatch SGD of the shared linear SVM (see sparse_step) over the worker's shard."""
    shared = ctx.shared.data
    data = shared.shard(ctx.rank)
    steps = _Steps(ctx, len(data))
    w = ctx.model.weight.data_array
    for start, stop in steps.batches_forever():
        read_at = ctx.stats.global_updates()
        lr = steps.lr()
        loss, norm = sparse_step(w, data.rows(start, stop), shared.degrees, steps.algo["l2"], lr, ctx.shared.lock)
        if np.isfinite(loss) and np.isfinite(norm):
            steps.finish(loss, norm, lr, read_at)
        else:
            ctx.stats.add_skipped()


class Hogwild(Algorithm):
    """The `hogwild` algorithm plugin."""

    name = "hogwild"
    schema = {
        "batch_size": Field("int", 64, low=1),
        "optimizer_state": Field("str", "per_worker", choices=("per_worker", "shared")),
        "locked": Field("bool", False),
        "l2": Field("float", 1e-4, low=0.0),
        "target_accuracy": Field("float", None, low=0.0, high=1.0, nullable=True),
    }
    extra_sections = {
        "dataset": datasets.SCHEMA,
        # the common logging keys, with hparams defaults that name this algorithm's keys
        "logging": {**SCHEMA["logging"], "hparams": Field(
            "str_list", ["optimizer.name", "optimizer.lr", "algorithm.batch_size", "algorithm.optimizer_state",
                         "algorithm.locked", "trainer.workers", "dataset.kind"])},
    }
    metrics = ("loss", "grad_norm", "lr")
    evaluate_at_end = True

    def check_config(self, config: Config) -> None:
        """The dataset must be usable, a shard must hold a batch, and the model must suit the data."""
        spec = _spec(config)
        algo, opt = config["algorithm"], config["optimizer"]
        if spec.rows_per_worker < algo["batch_size"]:
            raise ConfigError(f"config key 'algorithm.batch_size': got {algo['batch_size']}; allowed: at most "
                              f"{spec.rows_per_worker}, the training rows of each of the "
                              f"{config['trainer']['workers']} workers' shards")
        if spec.sparse:
            device = config["trainer"]["device"]
            if device != "cpu":
                raise ConfigError(f"config key 'trainer.device': got {device!r} with dataset.kind sparse_svm; "
                                  f"allowed: cpu (the sparse SVM's scatter updates of the shared weights run on "
                                  f"NumPy only; dense datasets train on cuda:N)")
            if opt["name"] != "sgd" or opt["momentum"] or opt["weight_decay"]:
                raise ConfigError(f"config key 'optimizer.name': got {opt['name']!r} with momentum "
                                  f"{opt['momentum']} and weight_decay {opt['weight_decay']}; allowed: sgd without "
                                  f"momentum or weight_decay for dataset.kind sparse_svm (its sparse updates are "
                                  f"plain SGD; algorithm.l2 sets the penalty)")
        elif config["model"]["lstm"]:
            raise ConfigError("config key 'model.lstm': got True; allowed: false (hogwild trains an MLP)")

    def build_model(self, config: Config) -> nn.Module:
        """A classifier for dense data, a linear SVM for sparse data (initialised from the config's seed)."""
        spec = _spec(config)
        framework.manual_seed(config["seed"])
        if spec.sparse:
            return LinearSVM(spec.features)
        m = config["model"]
        return Classifier(spec.features, m["hidden"], m["activation"], spec.classes)

    def build_shared(self, config: Config, context: Any) -> SharedData:
        """The training set in shared memory, cut into one shard per worker, and the lock when `locked`."""
        data = datasets.build_training_data(config["dataset"], config["trainer"]["workers"])
        return SharedData(data, context.Lock() if config["algorithm"]["locked"] else None)

    def run_worker(self, ctx: WorkerContext) -> None:
        if isinstance(ctx.model, LinearSVM):
            _run_sparse(ctx)
        else:
            _run_dense(ctx)

    def evaluate(self, model: nn.Module, config: Config, episodes: int, seed: int) -> Evaluation:
        """Test accuracy and mean test loss (cross-entropy, or hinge for the SVM); episodes and seed are unused."""
        test = datasets.test_set(config["dataset"])
        if isinstance(model, LinearSVM):
            margins = test.y * model.scores(test)
            accuracy = float(np.mean(margins > 0))
            loss = float(np.maximum(1.0 - margins, 0.0).mean())
        else:
            correct, total_loss = 0, 0.0
            device = next(model.parameters()).device
            with framework.no_grad():
                for start in range(0, len(test), _EVAL_ROWS):
                    part = test.rows(start, start + _EVAL_ROWS)
                    logits = model(framework.as_tensor(to_device(part.x, device)))
                    total_loss += F.cross_entropy(logits, to_device(part.y, device), reduction="sum").item()
                    correct += int((to_host(logits.data_array.argmax(axis=1)) == part.y).sum())
            accuracy, loss = correct / len(test), total_loss / len(test)
        target = config["algorithm"]["target_accuracy"]
        return Evaluation({"test_accuracy": accuracy, "test_loss": loss},
                          f"test accuracy {accuracy:.4f}, test loss {loss:.4f} on {len(test)} samples",
                          stop="target_accuracy reached" if target is not None and accuracy >= target else None)


ALGORITHM = Hogwild()
