"""Tensor creation, dtypes, conversions, views and in-place semantics (torch's behaviour)."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import framework as F


# ---- creation and dtypes ---------------------------------------------------------------------------
def test_tensor_default_dtypes_follow_torch():
    assert F.tensor([1.0, 2.0]).dtype == np.float32
    assert F.tensor(3.5).dtype == np.float32
    assert F.tensor([1, 2]).dtype == np.int64
    assert F.tensor([True, False]).dtype == np.bool_
    assert F.tensor(np.zeros(2, np.float64)).dtype == np.float64  # arrays keep their dtype
    assert F.tensor([1, 2], dtype=F.float64).dtype == np.float64
    assert F.tensor([1, 2], dtype="float32").dtype == np.float32


def test_tensor_copies_but_from_numpy_shares():
    a = np.arange(4, dtype=np.float32)
    copied, shared = F.tensor(a), F.from_numpy(a)
    a[0] = 9
    assert copied.numpy()[0] == 0
    assert shared.numpy()[0] == 9
    assert shared.numpy() is a  # numpy() returns the array itself, no copy
    assert F.as_tensor(a).data_array is a


def test_factories():
    assert F.zeros(2, 3).shape == (2, 3) and F.zeros((2, 3)).numpy().sum() == 0
    assert F.ones(4).numpy().sum() == 4 and F.ones(4).dtype == np.float32
    assert F.empty(0, 2).shape == (0, 2)
    assert F.full((2,), 7).dtype == np.int64 and F.full((2,), 1.5).numpy().tolist() == [1.5, 1.5]
    assert F.arange(3).numpy().tolist() == [0, 1, 2] and F.arange(3).dtype == np.int64
    assert F.arange(0, 1, 0.5).dtype == np.float32
    assert F.zeros_like(F.ones(2, dtype=F.float64)).dtype == np.float64
    assert F.ones_like(F.zeros(3)).numpy().tolist() == [1, 1, 1]
    assert F.randn(3, 2).shape == (3, 2) and F.rand(5).dtype == np.float32
    r = F.randint(0, 3, (100,)).numpy()
    assert r.dtype == np.int64 and r.min() >= 0 and r.max() <= 2
    assert F.zeros(2, requires_grad=True).requires_grad


@pytest.mark.parametrize("call, message", [
    (lambda: F.zeros(-1), "non-negative ints"),
    (lambda: F.zeros(2, dtype="complex64"), "unsupported dtype"),
    (lambda: F.tensor([1.0], device="tpu"), "unknown device"),
    (lambda: F.randn(2, dtype=F.int64), "floating point"),
    (lambda: F.tensor([1, 2], requires_grad=True), "floating point dtype"),
    (lambda: F.arange(0, 5, 0), "step must be non-zero"),
    (lambda: F.randint(3, 3, (2,)), "greater than low"),
    (lambda: F.from_numpy([1, 2]), "numpy.ndarray"),
    (lambda: F.tensor(["a"]), "cannot make a tensor"),
])
def test_bad_creation_arguments_name_the_problem(call, message):
    with pytest.raises((ValueError, TypeError, RuntimeError), match=message):
        call()


def test_manual_seed_reproduces_draws():
    F.manual_seed(123)
    a = F.randn(5).numpy().copy()
    F.manual_seed(123)
    assert np.array_equal(a, F.randn(5).numpy())
    assert F.initial_seed() == 123
    with pytest.raises(TypeError, match="expects an int"):
        F.manual_seed(1.5)


def test_scalar_conversions_and_errors():
    t = F.tensor([[2.5]])
    assert t.item() == 2.5 and float(t) == 2.5 and int(t) == 2 and bool(t)
    assert F.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    with pytest.raises(ValueError, match="one element tensors"):
        F.tensor([1.0, 2.0]).item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(F.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="0-d"):
        len(F.tensor(1.0))
    assert [x.item() for x in F.tensor([1.0, 2.0])] == [1.0, 2.0]
    assert list(range(10))[F.tensor(3)] == 3


def test_numpy_refuses_tensors_that_require_grad():
    t = F.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"detach\(\).numpy\(\)"):
        t.numpy()
    assert np.asarray(t.detach()).tolist() == [1, 1]


def test_properties():
    t = F.zeros(2, 3)
    assert t.shape == (2, 3) and t.ndim == 2 and t.dim() == 2 and t.numel() == 6 and t.size(1) == 3
    assert t.size() == (2, 3) and len(t) == 2 and t.device == "cpu" and not t.is_cuda
    assert t.is_leaf and t.grad is None and t.grad_fn is None


def test_dtype_promotion_follows_torch_categories():
    f32 = F.ones(2)
    assert (f32 + F.tensor([1, 2])).dtype == np.float32  # int tensor joins the float dtype
    assert (f32 * 2.5).dtype == np.float32 and (f32 + np.float64(1.0)).dtype == np.float32
    assert (F.tensor([1, 2]) * 0.5).dtype == np.float32
    assert (F.tensor([1, 2]) / F.tensor([2, 2])).dtype == np.float32
    assert (f32 + F.ones(2, dtype=F.float64)).dtype == np.float64
    assert (F.tensor([1, 2]) + 1).dtype == np.int64


def test_comparisons_give_bool_tensors():
    t = F.tensor([1.0, 2.0, 3.0])
    assert (t > 1.5).numpy().tolist() == [False, True, True]
    assert (t == F.tensor([1.0, 0.0, 3.0])).numpy().tolist() == [True, False, True]
    assert (t <= 2).dtype == np.bool_ and (t != 2).numpy().sum() == 2 and (t >= 3).numpy().sum() == 1
    assert (t < 2).numpy().sum() == 1
    assert hash(t) == hash(t) and {t: 1}[t] == 1  # hash by identity, as torch


def test_to_and_conversions():
    t = F.tensor([1.5, -2.5], requires_grad=True)
    assert t.to("cpu") is t and t.to(F.float32) is t
    d = t.double()
    assert d.dtype == np.float64 and d.requires_grad
    d.sum().backward()
    assert t.grad.dtype == np.float32 and t.grad.numpy().tolist() == [1, 1]
    assert t.detach().long().numpy().tolist() == [1, -2]
    assert t.detach().int().dtype == np.int32 and t.detach().bool().dtype == np.bool_
    assert t.to(dtype=F.float64).dtype == np.float64
    assert t.to(F.zeros(1, dtype=F.float64)).dtype == np.float64
    assert t.to("cpu", copy=True).data_array is not t.data_array
    with pytest.raises(ValueError, match="neither a device"):
        t.to("gpu")
    with pytest.raises(ValueError, match="unknown device"):
        t.to("cuda:x")


def test_repr():
    assert repr(F.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert "requires_grad=True" in repr(F.ones(1, requires_grad=True))
    assert "grad_fn=<mul_backward>" in repr(F.ones(1, requires_grad=True) * 2)
    assert "dtype=float64" in repr(F.ones(1, dtype=F.float64))
    assert repr(F.nn.Parameter(F.ones(1))).startswith("Parameter containing:")


# ---- views and in-place semantics -------------------------------------------------------------------
def test_views_share_storage_with_their_base():
    x = F.zeros(3, 4)
    row, col, flat, tr = x[1], x[:, 2], x.reshape(12), x.T
    x.add_(1.0)
    assert row.numpy().tolist() == [1.0] * 4 and col.numpy().sum() == 3 and flat.numpy().sum() == 12
    assert tr.numpy().sum() == 12
    row.fill_(5.0)
    assert x.numpy()[1].tolist() == [5.0] * 4 and tr.numpy()[:, 1].tolist() == [5.0] * 4
    x.unsqueeze(0).squeeze(0).permute(1, 0).transpose(0, 1).view(2, 6)[0, 0].fill_(-1.0)
    assert x.numpy()[0, 0] == -1.0
    assert x.detach().numpy() is x.numpy()
    assert np.shares_memory(x.data.numpy(), x.numpy())


def test_advanced_indexing_copies():
    x = F.arange(6).reshape(2, 3)
    picked = x[[0, 1], [1, 2]]
    x.zero_()
    assert picked.numpy().tolist() == [1, 5]


def test_in_place_ops():
    x = F.ones(3)
    x.add_(F.tensor([1.0, 2.0, 3.0]), alpha=2).sub_(1.0).mul_(2.0).div_(4.0)
    assert x.numpy().tolist() == [1.0, 2.0, 3.0]
    x.clamp_(max=2.5).copy_(x * 2)
    assert x.numpy().tolist() == [2.0, 4.0, 5.0]
    x[0] = 7.0
    x[F.tensor([1, 2])] = F.tensor([8.0, 9.0])
    assert x.numpy().tolist() == [7.0, 8.0, 9.0]
    x.zero_().fill_(3)
    assert x.numpy().tolist() == [3.0] * 3
    y = x
    y += 1
    assert y is x and x.numpy().tolist() == [4.0] * 3
    F.manual_seed(0)
    u = F.empty(1000).uniform_(-1, 1).numpy()
    assert -1 <= u.min() and u.max() < 1
    n = F.empty(2000).normal_(3.0, 0.5).numpy()
    assert abs(n.mean() - 3.0) < 0.1 and abs(n.std() - 0.5) < 0.1
    with pytest.raises(ValueError, match="at least one of min and max"):
        x.clamp_()


def test_in_place_on_leaf_requiring_grad_needs_no_grad():
    w = F.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.add_(1.0)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w += 1.0
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w[0] = 3.0
    with F.no_grad():
        w -= 0.5
        w[1] = 3.0
    assert w.detach().numpy().tolist() == [0.5, 3.0]


def test_in_place_on_recorded_tensor_is_refused_but_augmented_assignment_rebinds():
    w = F.ones(2, requires_grad=True)
    h = w * 2
    with pytest.raises(RuntimeError, match="not recorded by autograd"):
        h.mul_(3.0)
    before = h
    h += w  # out of place: a new node, the graph stays correct
    assert h is not before
    h.sum().backward()
    assert w.grad.numpy().tolist() == [3.0, 3.0]


def test_pickle_and_deepcopy_copy_by_value():
    t = F.tensor([1.0, 2.0], requires_grad=True)
    for clone in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
        assert clone.requires_grad
        assert clone.detach().numpy().tolist() == [1.0, 2.0]
        assert not np.shares_memory(clone.data_array, t.data_array)
    p = F.nn.Parameter(F.ones(2))
    q = pickle.loads(pickle.dumps(p))
    assert isinstance(q, F.nn.Parameter) and q.requires_grad


def test_data_setter_replaces_storage():
    a, b = F.zeros(2), F.ones(2)
    a.data = b
    b.fill_(4.0)
    assert a.numpy().tolist() == [4.0, 4.0]
    with pytest.raises(TypeError, match="must be set to a Tensor"):
        a.data = np.ones(2)


def test_index_errors_name_the_shape():
    with pytest.raises(IndexError, match=r"shape \(2,\)"):
        F.zeros(2)[5]
    with pytest.raises(ValueError, match="cannot reshape"):
        F.zeros(6).reshape(4, 2)
    with pytest.raises(RuntimeError, match="use .reshape"):
        F.zeros(2, 3).T.view(6)
    with pytest.raises(ValueError, match="not a permutation"):
        F.zeros(2, 3).permute(0, 0)
    with pytest.raises(IndexError, match="out of range"):
        F.zeros(2, 3).sum(axis=2)
    with pytest.raises(ValueError, match="cannot be multiplied"):
        F.zeros(2, 3) @ F.zeros(2, 3)
    with pytest.raises(ValueError, match="differ outside axis"):
        F.cat([F.zeros(2, 3), F.zeros(2, 2)], axis=0)


def test_function_forms_and_index_reductions():
    t = F.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    assert F.add(2.0, t).numpy()[0, 0] == 5.0 and F.sub(t, 1).numpy()[1, 1] == 4.0
    assert F.mul(t, t).numpy()[1, 2] == 16.0 and F.div(t, 2).numpy()[0, 0] == 1.5
    assert F.neg(t).numpy()[0, 0] == -3.0 and F.pow(t, 3).numpy()[1, 1] == 125.0
    assert F.matmul(t, F.ones(3)).numpy().tolist() == [6.0, 9.0]
    assert F.argmax(t, axis=1).numpy().tolist() == [0, 1] and t.argmax().item() == 4
    assert F.argmin(t, axis=0).numpy().tolist() == [1, 0, 0] and t.argmin(axis=1, keepdims=True).shape == (2, 1)
    assert F.squeeze(F.zeros(1, 2, 1), axis=0).shape == (2, 1) and F.zeros(1, 2, 1).squeeze(axis=1).shape == (1, 2, 1)
    assert F.logsumexp(F.tensor([1000.0, 1000.0]), axis=0).item() == pytest.approx(1000 + np.log(2))
    assert F.logsumexp(F.tensor([-np.inf, -np.inf]), axis=0).item() == -np.inf
    assert F.softmax(F.tensor([1000.0, 0.0]), axis=0).numpy().tolist() == [1.0, 0.0]
    assert F.sum(F.tensor(2.0), axis=0).item() == 2.0 and F.mean(F.tensor([1.0, 3.0])).item() == 2.0
    with pytest.raises(TypeError, match="floating point tensor"):
        F.mean(F.tensor([1, 2]))
    with pytest.raises(TypeError, match="bool tensor"):
        F.where(F.tensor([1, 0]), F.ones(2), F.zeros(2))
    with pytest.raises(IndexError, match=r"in \[0, 3\)"):
        F.gather(F.zeros(2, 3), 1, F.tensor([[3], [0]]))
