"""Hogwild!: supervised training by workers that update one shared model without locks.

Each worker trains on its own shard of the training set (built once, in
shared memory, by `hogwild.datasets`), reading and writing the shared
parameters directly, as in the Hogwild! paper and PyTorch's mnist_hogwild:

- dense data (`npz`, `mnist_teacher`): an MLP classifier, minibatches of
  cross-entropy through the autograd, and a step of the configured optimizer
  on the shared parameter arena, each worker with its own optimizer state
  (`optimizer_state: per_worker`, as mnist_hogwild) or all sharing one
  (`optimizer_state: shared`);
- sparse data (`sparse_svm`): a linear SVM (hinge loss, L2 penalty), whose
  minibatch SGD update touches only the coordinates active in the batch
  (`np.subtract.at` on the shared weights), as in the paper's RCV1 experiment.

`locked: true` takes a lock around every update (the paper's comparison): a
`sharing.RobustLock`, which leaves nothing in /dev/shm whatever kills the
run and which a worker killed while holding it does not deadlock.
With `trainer.device: cuda:N` (dense data only) the shared classifier and
the optimizer state live in GPU memory and each worker copies its minibatch
there once per step; the sparse SVM's scatter updates run on the CPU only.
The main process measures test accuracy and loss every `trainer.eval_every_s`,
at the end (summary.json), and stops the run at `algorithm.target_accuracy`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import framework
import sharing
from framework import nn
from framework.runtime.algorithm import MLP_SCHEMA, Algorithm, Config, Evaluation, WorkerContext
from framework.algorithms.hogwild import datasets
from framework.algorithms.hogwild.model import Classifier, LinearSVM
from framework.algorithms.hogwild.worker import SharedData, run_dense, run_sparse
from framework.device import to_device, to_host
from framework.nn import functional as F
from framework.runtime.schema import ConfigError, Field

_EVAL_ROWS = 4096


def _spec(config: Config) -> datasets.DataSpec:
    return datasets.describe(config["dataset"], config["trainer"]["workers"])


class Hogwild(Algorithm):
    """The `hogwild` algorithm plugin."""

    name = "hogwild"
    schema = {
        "batch_size": Field("int", 64, low=1, high=1 << 20, doc="rows per step"),
        "optimizer_state": Field("str", "per_worker", choices=("per_worker", "shared"),
                                 doc="each worker's own optimizer state, or one in shared memory"),
        "locked": Field("bool", False,
                        doc="take a lock around every update (`sharing.RobustLock`: nothing in /dev/shm, and a "
                            "worker killed holding it does not block the others)"),
        "l2": Field("float", 1e-4, low=0.0,
                    doc="the sparse SVM's L2 penalty (it uses `optimizer.lr` with plain `sgd`)"),
        "target_accuracy": Field("float", None, low=0.0, high=1.0, nullable=True,
                                 doc="stop once an evaluation reaches this test accuracy (`null`: never)"),
    }
    sections = {"dataset": datasets.SCHEMA, "model": MLP_SCHEMA}
    units = ("samples", "epochs")
    hparams = ("optimizer.name", "optimizer.lr", "algorithm.batch_size", "algorithm.optimizer_state",
               "algorithm.locked", "trainer.workers", "dataset.kind")
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

    def default_experiment(self, config: Config) -> str:
        """hogwild-<dataset.kind>, e.g. hogwild-mnist_teacher (hogwild-<file name> for an npz file)."""
        kind = config["dataset"]["kind"]
        return "hogwild-" + (Path(config["dataset"]["path"]).stem if kind == "npz" else kind)

    def episodes_done(self, config: Config, steps: int, episodes: int) -> float:
        """Epochs: the samples trained on over the training rows (every worker's shard)."""
        return steps / (_spec(config).rows_per_worker * config["trainer"]["workers"])

    def build_model(self, config: Config) -> nn.Module:
        """A classifier for dense data, a linear SVM for sparse data (initialised from the config's seed)."""
        spec = _spec(config)
        framework.manual_seed(config["seed"])
        if spec.sparse:
            return LinearSVM(spec.features)
        m = config["model"]
        return Classifier(spec.features, m["hidden"], m["activation"], spec.classes)

    def build_shared(self, config: Config, context: Any, ranks: range) -> SharedData:
        """The shards of `ranks` of the training set in shared memory, and the lock when `locked`."""
        data = datasets.build_training_data(config["dataset"], config["trainer"]["workers"], ranks)
        return SharedData(data, sharing.RobustLock() if config["algorithm"]["locked"] else None)

    def run_worker(self, ctx: WorkerContext) -> None:
        if isinstance(ctx.model, LinearSVM):
            run_sparse(ctx)
        else:
            run_dense(ctx)

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
