"""Datasets from config: the reference generator reproduced exactly, npz files and their errors, sparse rows."""
import numpy as np
import pytest
import yaml

import sharing
from framework.algorithms.hogwild import datasets
from framework.train.config import ConfigError, validate
from run_configs import hogwild_config as config
from train_cli import run_cli


def section(**values) -> dict:
    """A complete dataset section: the schema's defaults updated with values."""
    return {**{key: field.default for key, field in datasets.SCHEMA.items()}, **values}


def reference_make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`make_data` of ../shared/baselines/torch_hogwild_mlp.py, without the conversion to torch tensors."""
    rng = np.random.default_rng(seed)
    teacher = np.random.default_rng(1234).standard_normal((784, 10)).astype(np.float32)
    x = rng.standard_normal((n, 784)).astype(np.float32)
    y = (x @ teacher).argmax(1)
    return x, y


def test_mnist_teacher_matches_the_reference_generator():
    sec = section(kind="mnist_teacher", train_size=5000, test_size=700)  # more than one generation chunk
    data = datasets.build_training_data(sec, workers=3)
    for rank in range(3):
        x, y = reference_make_data(5000, 100 + rank)
        shard = data.shard(rank)
        np.testing.assert_array_equal(shard.x, x)
        np.testing.assert_array_equal(shard.y, y)
    x, y = reference_make_data(700, 7)
    test = datasets.test_set(sec)
    np.testing.assert_array_equal(test.x, x)
    np.testing.assert_array_equal(test.y, y)
    assert sharing.is_shared(data.train.x) and sharing.is_shared(data.train.y)
    assert datasets.describe(sec, 3) == datasets.DataSpec(784, 10, False, 5000)


def write_npz(path, **arrays):
    np.savez(path, **arrays)
    return str(path)


def test_npz_is_shuffled_split_and_sharded(tmp_path):
    n = 103
    x = np.arange(n * 6, dtype=np.float64).reshape(n, 2, 3)
    y = np.arange(n) % 4
    sec = section(kind="npz", path=write_npz(tmp_path / "d.npz", x=x, y=y), test_fraction=0.2, seed=5)
    assert datasets.describe(sec, 2) == datasets.DataSpec(6, 4, False, 41)
    data = datasets.build_training_data(sec, workers=2)
    test = datasets.test_set(sec)
    shards = [data.shard(0), data.shard(1)]
    assert [len(s) for s in shards] == [41, 41] and len(test) == 21
    assert data.train.x.dtype == np.float32 and data.train.x.shape == (82, 6)
    rows = np.concatenate([s.x[:, 0] for s in shards] + [test.x[:, 0]]) / 6
    assert sorted(rows.astype(int)) == list(range(n))  # every row exactly once
    assert not np.array_equal(rows[:82], np.sort(rows[:82]))  # shuffled before the split
    for part in [*shards, test]:
        np.testing.assert_array_equal(part.y, (part.x[:, 0] / 6).astype(int) % 4)  # rows keep their labels


@pytest.mark.parametrize("arrays, expected", [
    ({"x": np.zeros((5, 2))}, "the file lacks 'y'"),
    ({"x": np.zeros((5, 2)), "y": np.zeros(4, dtype=int)}, "'x' has 5 rows, 'y' 4"),
    ({"x": np.zeros((5, 2)), "y": np.zeros(5)}, "'y' has shape (5,) and dtype float64"),
    ({"x": np.zeros(5), "y": np.zeros(5, dtype=int)}, "'x' has shape (5,)"),
    ({"x": np.array([object()] * 5), "y": np.zeros(5, dtype=int)}, "allow_pickle=False"),
])
def test_bad_npz_files_are_config_errors(tmp_path, arrays, expected):
    path = write_npz(tmp_path / "bad.npz", **arrays)
    cfg = config(dataset={"kind": "npz", "path": path})
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    message = str(err.value)
    assert message.startswith(f"config key 'dataset.path': got '{path}'") and expected in message, message


def test_missing_npz_file_exits_2_naming_the_key(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config(dataset={"kind": "npz", "path": str(tmp_path / "nowhere.npz")})))
    done = run_cli("train", "--config", path, "--logdir", tmp_path / "runs")
    assert done.returncode == 2
    assert "config key 'dataset.path'" in done.stderr and "nowhere.npz" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_sparse_svm_rows_are_csr_in_shared_memory():
    sec = section(kind="sparse_svm", n_features=3000, density=0.01, train_size=400, test_size=300, seed=9)
    data = datasets.build_training_data(sec, workers=2)
    train = data.train
    for array in (train.indptr, train.indices, train.values, train.y, data.degrees):
        assert sharing.is_shared(array)
    assert train.indptr[0] == 0 and train.indptr[-1] == train.indices.size and len(train) == 800
    lengths = np.diff(train.indptr)
    assert lengths.min() >= 1 and lengths.max() <= 30
    for i in range(len(train)):
        row = train.indices[train.indptr[i]:train.indptr[i + 1]]
        assert np.all(np.diff(row) > 0) and row.min() >= 0 and row.max() < 3000  # sorted, distinct, in range
    norms = np.sqrt(np.add.reduceat(train.values.astype(np.float64) ** 2, train.indptr[:-1]))
    np.testing.assert_allclose(norms, 1.0, rtol=1e-5)
    assert set(np.unique(train.y)) == {-1.0, 1.0}
    np.testing.assert_array_equal(data.degrees, np.bincount(train.indices, minlength=3000))
    assert data.degrees.max() > 20 * np.median(data.degrees[data.degrees > 0])  # Zipf-like: a few hot features
    shard = data.shard(1)
    assert len(shard) == 400 and shard.indptr[0] == train.indptr[400]
    np.testing.assert_array_equal(shard.scores(np.ones(3000)), train.rows(400, 800).scores(np.ones(3000)))
    test = datasets.test_set(sec)
    assert len(test) == 300 and not np.array_equal(test.indices[:50], train.indices[:50])


def test_sparse_labels_follow_a_hidden_linear_model():
    """Without label noise a linear separator exists: the hidden weights classify every row."""
    sec = section(kind="sparse_svm", n_features=500, density=0.02, train_size=1, test_size=400, seed=4)
    truth = datasets._sparse_task(sec)[0]
    test = datasets.test_set(sec)
    np.testing.assert_array_equal(np.where(test.scores(truth) >= 0, 1.0, -1.0), test.y)
    noisy = datasets.test_set({**sec, "label_noise": 0.25})
    flipped = np.mean(noisy.y != test.y)
    assert 0.15 < flipped < 0.35


@pytest.mark.parametrize("kind", ["mnist_teacher", "sparse_svm", "npz"])
def test_a_node_builds_only_its_ranks_shards_and_they_match_the_whole_runs(tmp_path, kind):
    x = np.random.default_rng(0).standard_normal((203, 5))
    sec = section(kind=kind, train_size=300, n_features=2000, density=0.01,
                  path=write_npz(tmp_path / "d.npz", x=x, y=np.arange(203) % 3))
    whole = datasets.build_training_data(sec, workers=4)
    part = datasets.build_training_data(sec, workers=4, ranks=range(2, 4))
    assert len(part.train) == len(whole.shard(2)) + len(whole.shard(3))
    for rank in (2, 3):
        mine, theirs = part.shard(rank), whole.shard(rank)
        for name in ("x", "y") if kind != "sparse_svm" else ("y",):
            np.testing.assert_array_equal(getattr(mine, name), getattr(theirs, name))
        if kind == "sparse_svm":
            np.testing.assert_array_equal(mine.scores(np.arange(2000.0)), theirs.scores(np.arange(2000.0)))
    if kind == "sparse_svm":
        np.testing.assert_array_equal(part.degrees, whole.degrees)  # the L2 weights count every node's rows
    with pytest.raises(ValueError, match="rank 1 is outside 2..3"):
        part.shard(1)
