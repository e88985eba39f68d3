"""Datasets for supervised Hogwild: loaded or generated from a config's `dataset` section.

The training set is built once in the main process (on Ray, once per node,
holding only that node's workers' shards), in shared memory, and each worker
trains on its own contiguous shard of it (`TrainingData.shard`); the
test set is built where it is evaluated (`test_set`, cached per process).
Three kinds:

- `npz`: a file with arrays `x` (N, features...) and `y` (N,) of class indices,
  read with `allow_pickle=False`; rows are shuffled with `seed`, and the last
  `test_fraction` of them is the test set.
- `mnist_teacher`: the MNIST-shaped task of the PyTorch Hogwild reference
  (`torch_hogwild_mlp.py`): Gaussian 784-d inputs labelled by the argmax of a
  fixed random linear teacher drawn from `default_rng(seed)` (1234 there);
  worker r's `train_size` rows come from `default_rng(100 + r)`, the
  `test_size` test rows from `default_rng(7)`.
- `sparse_svm`: a sparse binary task in the style of the Hogwild! paper's RCV1
  experiment: about `density * n_features` active features per row, drawn
  with Zipf-like frequencies (a few features appear in most rows, as words do
  in text), positive values normalised per row, labels the sign of a hidden
  linear model (`label_noise` of them flipped). Rows are CSR arrays
  (indptr, indices, values), so an update can touch only a row's features.
"""
from __future__ import annotations

import functools
import math
import os
import zipfile
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

import sharing
from framework.runtime.schema import ConfigError, Field

KINDS = ("npz", "mnist_teacher", "sparse_svm")

SCHEMA: dict[str, Field] = {
    "kind": Field("str", "mnist_teacher", choices=KINDS,
                  doc="`npz` (your own arrays), `mnist_teacher` (MNIST-shaped inputs labelled by a fixed random "
                      "teacher) or `sparse_svm` (an RCV1-like sparse task)"),
    "path": Field("str", None, nullable=True,
                  doc="npz: a file with `x` (N, features...) and integer `y` (N,), read with `allow_pickle=False`; "
                      "a missing file or array, or lengths that differ, is a config error"),
    "test_fraction": Field("float", 0.1, low=0.0, high=0.9, low_open=True,
                           doc="npz: the last fraction of the rows, shuffled with `dataset.seed`, is the test set"),
    "train_size": Field("int", 20_000, low=1, high=10**7, doc="generators: training rows per worker"),
    "test_size": Field("int", 5_000, low=1, high=10**6, doc="generators: test rows"),
    "seed": Field("int", 1234, low=0, high=2**32 - 1,
                  doc="mnist_teacher: the teacher's seed (worker r's rows come from seed 100 + r and the test rows "
                      "from seed 7, exactly as `torch_hogwild_mlp.py`); sparse_svm: the task's seed; npz: the "
                      "shuffle"),
    "n_features": Field("int", 47_236, low=2, high=2**31 - 1, doc="sparse_svm: features"),
    "density": Field("float", 0.0016, low=0.0, high=1.0, low_open=True,
                     doc="sparse_svm: about `density * n_features` features drawn per row, with Zipf-like "
                         "frequencies (values normalised per row)"),
    "label_noise": Field("float", 0.0, low=0.0, high=0.5, doc="sparse_svm: the share of flipped labels"),
}
"""The `dataset` config section. `path` and `test_fraction` belong to npz; `train_size` (rows per worker),
`test_size` and `seed` to the generators; `n_features`, `density` and `label_noise` to sparse_svm."""

MNIST_FEATURES, MNIST_CLASSES = 784, 10
MNIST_TEST_SEED = 7
_CHUNK_ROWS = 4096


def mnist_train_seed(rank: int) -> int:
    """The seed of worker rank's mnist_teacher rows (as in the reference program)."""
    return 100 + rank


@dataclass
class Dense:
    """Dense rows: x (N, features) float32 and y (N,) int64 class indices."""

    x: np.ndarray
    y: np.ndarray

    def __len__(self) -> int:
        return len(self.y)

    def rows(self, start: int, stop: int) -> "Dense":
        """Rows [start, stop) as views."""
        return Dense(self.x[start:stop], self.y[start:stop])


@dataclass
class Sparse:
    """CSR rows: row i's features are indices[indptr[i]:indptr[i+1]] with those values; y is +1 or -1.

    indptr holds absolute offsets into indices/values, so a block of rows is a
    view that shares them (see `rows`).
    """

    indptr: np.ndarray   # (N+1,) int64
    indices: np.ndarray  # (nnz,) int32
    values: np.ndarray   # (nnz,) float32
    y: np.ndarray        # (N,) float32
    n_features: int

    def __len__(self) -> int:
        return len(self.y)

    def rows(self, start: int, stop: int) -> "Sparse":
        """Rows [start, stop) as views."""
        return Sparse(self.indptr[start:stop + 1], self.indices, self.values, self.y[start:stop], self.n_features)

    def span(self) -> slice:
        """The part of indices/values that these rows use."""
        return slice(int(self.indptr[0]), int(self.indptr[-1]))

    def scores(self, w: np.ndarray) -> np.ndarray:
        """x @ w for every row (float64)."""
        span = self.span()
        products = self.values[span].astype(np.float64) * w[self.indices[span]]
        return np.add.reduceat(products, self.indptr[:-1] - span.start) if len(self) else np.zeros(0)


Split = Dense | Sparse


@dataclass
class TrainingData:
    """The shards of some workers' ranks of a training set, in shared memory.

    The run's training rows are cut into `workers` contiguous shards; this
    holds those of `ranks` (all of them, or a Ray node's part), `train` starting
    at the first of them. `degrees[u]` (sparse data only) is how many of the
    run's training rows use feature u, which weighs the per-row share of the L2
    penalty in the sparse SVM.
    """

    train: Split
    workers: int
    bounds: np.ndarray
    """Row bounds of the run's shards: rank r's rows are bounds[r]:bounds[r+1] of the whole training set."""
    ranks: range
    degrees: np.ndarray | None = None

    def shard(self, rank: int) -> Split:
        """Worker rank's rows."""
        if rank not in self.ranks:
            raise ValueError(f"shard: rank {rank} is outside {self.ranks.start}..{self.ranks.stop - 1}")
        first = self.bounds[self.ranks.start]
        return self.train.rows(int(self.bounds[rank] - first), int(self.bounds[rank + 1] - first))


@dataclass(frozen=True)
class DataSpec:
    """What a model needs to know of a dataset: input size, classes, sparsity, and training rows per worker."""

    features: int
    classes: int
    sparse: bool
    rows_per_worker: int


def _bad(key: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f"config key 'dataset.{key}': got {value!r}; allowed: {allowed}")


# ---- npz files ------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=2)
def _read_npz(path: str, stamp: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """x (N, features) float32 and y (N,) int64 from an npz file; ConfigError naming what is wrong."""
    del stamp  # part of the cache key only: a rewritten file is read again
    allowed = "an .npz file with a numeric array 'x' (N, features...) and an integer array 'y' (N,)"
    try:
        with np.load(path, allow_pickle=False) as data:
            names = list(data.files)
            arrays = {name: data[name] for name in ("x", "y") if name in names}
    except (OSError, zipfile.BadZipFile, EOFError, ValueError) as exc:  # ValueError: a pickled object array
        raise _bad("path", path, f"{allowed} (reading it failed: {exc})") from None
    missing = [name for name in ("x", "y") if name not in arrays]
    if missing:
        raise _bad("path", path, f"{allowed} (the file lacks {', '.join(map(repr, missing))}; "
                                 f"it holds {', '.join(map(repr, names)) or 'no arrays'})")
    x, y = arrays["x"], arrays["y"]
    if x.dtype.kind not in "biuf" or x.ndim < 2:
        raise _bad("path", path, f"{allowed} ('x' has shape {x.shape} and dtype {x.dtype})")
    if y.dtype.kind not in "iu" or y.ndim != 1:
        raise _bad("path", path, f"{allowed} ('y' has shape {y.shape} and dtype {y.dtype})")
    if len(x) != len(y):
        raise _bad("path", path, f"{allowed} of equal lengths ('x' has {len(x)} rows, 'y' {len(y)})")
    if len(y) < 2:
        raise _bad("path", path, f"{allowed} with at least 2 rows (it has {len(y)})")
    if y.min() < 0:
        raise _bad("path", path, f"{allowed} ('y' holds the negative class index {int(y.min())})")
    return x.reshape(len(x), -1).astype(np.float32, copy=False), y.astype(np.int64, copy=False)


def _npz(section: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    path = section["path"]
    if path is None:
        raise _bad("path", path, "the path of an .npz file (dataset.kind is npz)")
    try:
        info = os.stat(path)
    except OSError as exc:
        raise _bad("path", path, f"an existing .npz file ({exc.strerror})") from None
    return _read_npz(os.path.abspath(path), (info.st_mtime_ns, info.st_size))


def _npz_split(section: Mapping[str, Any]) -> tuple[np.ndarray, int]:
    """The seeded row order of an npz file and how many of its first rows are for training."""
    n = len(_npz(section)[1])
    n_test = max(1, math.ceil(section["test_fraction"] * n))
    return np.random.default_rng(section["seed"]).permutation(n), n - n_test


# ---- mnist_teacher ----------------------------------------------------------------------------------
def mnist_teacher(seed: int = 1234) -> np.ndarray:
    """The (784, 10) float32 teacher of the mnist_teacher task."""
    return np.random.default_rng(seed).standard_normal((MNIST_FEATURES, MNIST_CLASSES)).astype(np.float32)


def _fill_mnist(x: np.ndarray, y: np.ndarray, seed: int, teacher: np.ndarray) -> None:
    """Fill x and y with rows drawn from default_rng(seed), in chunks (same stream as one big draw)."""
    rng = np.random.default_rng(seed)
    for start in range(0, len(x), _CHUNK_ROWS):
        stop = min(start + _CHUNK_ROWS, len(x))
        x[start:stop] = rng.standard_normal((stop - start, MNIST_FEATURES))
        y[start:stop] = (x[start:stop] @ teacher).argmax(1)


# ---- sparse_svm ------------------------------------------------------------------------------------
def _sparse_task(section: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(hidden weights, feature ids by popularity, cumulative popularity) of a sparse_svm task."""
    rng = np.random.default_rng([section["seed"], 0])
    n = section["n_features"]
    truth = rng.standard_normal(n)
    popularity = np.cumsum(1.0 / np.arange(1, n + 1))
    return truth, rng.permutation(n).astype(np.int32), popularity / popularity[-1]


def _sparse_rows(section: Mapping[str, Any], rows: int, stream: int) -> Sparse:
    """`rows` rows of the sparse_svm task drawn from the seed stream `stream` (private memory)."""
    truth, ids, cdf = _sparse_task(section)
    rng = np.random.default_rng([section["seed"], 1, stream])
    draws = max(1, round(section["density"] * section["n_features"]))
    features = ids[np.minimum(np.searchsorted(cdf, rng.random((rows, draws))), len(ids) - 1)]
    features.sort(axis=1)
    keep = np.ones(features.shape, dtype=bool)
    keep[:, 1:] = features[:, 1:] != features[:, :-1]
    lengths = keep.sum(axis=1)
    indptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    indices = features[keep].astype(np.int32)
    values = rng.exponential(1.0, indices.size) + 0.1
    norms = np.sqrt(np.add.reduceat(values * values, indptr[:-1]))
    values /= np.repeat(norms, lengths)
    y = np.where(np.add.reduceat(values * truth[indices], indptr[:-1]) >= 0, 1.0, -1.0)
    y[rng.random(rows) < section["label_noise"]] *= -1
    return Sparse(indptr, indices, values.astype(np.float32), y.astype(np.float32), section["n_features"])


def _concat_shared(parts: list[Sparse]) -> Sparse:
    """One Sparse in shared memory from consecutive blocks of rows."""
    offsets = np.cumsum([0] + [p.indptr[-1] for p in parts[:-1]])
    indptr = np.concatenate([parts[0].indptr[:1]] + [p.indptr[1:] + o for p, o in zip(parts, offsets)])
    return Sparse(sharing.share_array(indptr), sharing.share_array(np.concatenate([p.indices for p in parts])),
                  sharing.share_array(np.concatenate([p.values for p in parts])),
                  sharing.share_array(np.concatenate([p.y for p in parts])), parts[0].n_features)


# ---- public entry points ---------------------------------------------------------------------------
def describe(section: Mapping[str, Any], workers: int) -> DataSpec:
    """Input size, classes, sparsity and rows per worker; ConfigError when an npz file is unusable."""
    kind = section["kind"]
    if kind == "mnist_teacher":
        return DataSpec(MNIST_FEATURES, MNIST_CLASSES, False, section["train_size"])
    if kind == "sparse_svm":
        return DataSpec(section["n_features"], 2, True, section["train_size"])
    x, y = _npz(section)
    _, n_train = _npz_split(section)
    return DataSpec(x.shape[1], max(2, int(y.max()) + 1), False, n_train // workers)


def _bounds(rows: int, workers: int) -> np.ndarray:
    return np.linspace(0, rows, workers + 1).astype(np.int64)


def build_training_data(section: Mapping[str, Any], workers: int, ranks: range | None = None) -> TrainingData:
    """The shards of `ranks` (default: all `workers`) of a dataset section's training set, in shared memory."""
    ranks = range(workers) if ranks is None else ranks
    kind = section["kind"]
    if kind == "npz":
        x, y = _npz(section)
        order, n_train = _npz_split(section)
        bounds = _bounds(n_train, workers)
        rows = order[bounds[ranks.start]:bounds[ranks.stop]]
        return TrainingData(Dense(sharing.share_array(x[rows]), sharing.share_array(y[rows])), workers, bounds,
                            ranks)
    n = section["train_size"]
    bounds = _bounds(workers * n, workers)
    if kind == "mnist_teacher":
        teacher = mnist_teacher(section["seed"])
        x = sharing.empty_shared((len(ranks) * n, MNIST_FEATURES), np.float32)
        y = sharing.empty_shared((len(ranks) * n,), np.int64)
        for i, rank in enumerate(ranks):
            block = slice(i * n, (i + 1) * n)
            _fill_mnist(x[block], y[block], mnist_train_seed(rank), teacher)
        return TrainingData(Dense(x, y), workers, bounds, ranks)
    degrees = np.zeros(section["n_features"], dtype=np.float32)
    parts = []
    for rank in range(workers):  # every rank's rows count in the degrees; only ranks' are kept
        part = _sparse_rows(section, n, stream=1 + rank)
        degrees += np.bincount(part.indices, minlength=part.n_features)
        if rank in ranks:
            parts.append(part)
    return TrainingData(_concat_shared(parts), workers, bounds, ranks, sharing.share_array(degrees))


def test_set(section: Mapping[str, Any]) -> Split:
    """The test set of a dataset section (private memory, cached per process for the section's values)."""
    return _test_set(tuple(sorted(section.items())))


@functools.lru_cache(maxsize=2)
def _test_set(items: tuple[tuple[str, Any], ...]) -> Split:
    section = dict(items)
    kind = section["kind"]
    if kind == "npz":
        x, y = _npz(section)
        order, n_train = _npz_split(section)
        return Dense(x[order[n_train:]], y[order[n_train:]])
    n = section["test_size"]
    if kind == "mnist_teacher":
        data = Dense(np.empty((n, MNIST_FEATURES), np.float32), np.empty(n, np.int64))
        _fill_mnist(data.x, data.y, MNIST_TEST_SEED, mnist_teacher(section["seed"]))
        return data
    return _sparse_rows(section, n, stream=0)
