"""The sparse SVM step: the hinge + L2 gradient of the batch, written only to the batch's active weights."""
import numpy as np

import sharing
from framework.algorithms.hogwild import datasets
from framework.algorithms.hogwild.worker import sparse_step


def batch_with_shared_features() -> datasets.Sparse:
    """Three rows over 10 features; feature 2 is in every row, so its updates must add up."""
    indptr = np.array([0, 3, 5, 8])
    indices = np.array([0, 2, 5, 2, 7, 1, 2, 5], dtype=np.int32)
    values = np.array([0.6, 0.5, 0.62, 0.8, 0.6, 0.3, 0.9, 0.31], dtype=np.float32)
    return datasets.Sparse(indptr, indices, values, np.array([1, -1, 1], dtype=np.float32), 10)


def dense_rows(batch: datasets.Sparse) -> np.ndarray:
    out = np.zeros((len(batch), batch.n_features))
    for i in range(len(batch)):
        s = slice(batch.indptr[i], batch.indptr[i + 1])
        out[i, batch.indices[s]] = batch.values[s]
    return out


def gradient_entries(w: np.ndarray, batch: datasets.Sparse, degrees: np.ndarray,
                     l2: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per row, the gradient on its features: hinge' x + 2 l2 w_u / d_u (computed from dense rows)."""
    x = dense_rows(batch)
    entries = []
    for i in range(len(batch)):
        u = batch.indices[batch.indptr[i]:batch.indptr[i + 1]]
        hinge = -batch.y[i] if batch.y[i] * (x[i] @ w) < 1 else 0.0
        entries.append((u, hinge * x[i, u] + 2 * l2 * w[u] / degrees[u]))
    return entries


def test_step_matches_the_dense_gradient_and_touches_only_active_weights():
    batch = batch_with_shared_features()
    degrees = np.arange(1, 11, dtype=np.float32)
    w = sharing.share_array(np.linspace(-0.3, 0.4, 10).astype(np.float32))
    before = w.copy()
    loss, norm = sparse_step(w, batch, degrees, l2=0.05, lr=0.5)
    entries = gradient_entries(before.astype(np.float64), batch, degrees, 0.05)
    expected = np.zeros(10)
    for u, g in entries:
        expected[u] += g / len(batch)
    np.testing.assert_allclose(w, before - 0.5 * expected, rtol=1e-5, atol=1e-7)
    untouched = np.setdiff1d(np.arange(10), batch.indices)
    assert untouched.size == 5
    np.testing.assert_array_equal(w[untouched], before[untouched])  # bit for bit: never written
    margins = batch.y * (dense_rows(batch) @ before)
    assert np.isclose(loss, np.maximum(1 - margins, 0).mean(), rtol=1e-5)
    assert np.isclose(norm, np.linalg.norm(np.concatenate([g for _, g in entries])), rtol=1e-5)


def test_locked_step_writes_the_same_values():
    batch = batch_with_shared_features()
    degrees = np.ones(10, dtype=np.float32)
    free = np.full(10, 0.1, dtype=np.float32)
    locked = free.copy()
    sparse_step(free, batch, degrees, l2=0.01, lr=0.3)
    lock = sharing.get_context("spawn").Lock()
    sparse_step(locked, batch, degrees, l2=0.01, lr=0.3, lock=lock)
    np.testing.assert_array_equal(free, locked)
    assert lock.acquire(block=False)  # released again after the update
    lock.release()


def test_non_finite_step_is_not_applied():
    batch = batch_with_shared_features()
    w = np.zeros(10, dtype=np.float32)
    w[2] = np.inf
    before = w.copy()
    loss, norm = sparse_step(w, batch, np.ones(10, dtype=np.float32), l2=0.01, lr=0.3)
    assert not (np.isfinite(loss) and np.isfinite(norm))
    np.testing.assert_array_equal(w, before)
