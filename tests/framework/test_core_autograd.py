"""The backward pass: accumulation, graph reuse, grad modes, broadcasting reduction, error messages."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import framework as F


def test_scalar_backward_and_accumulation():
    x = F.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.numpy().tolist() == [2.0, 4.0, 6.0]
    (x * 3).sum().backward()  # accumulates, as torch
    assert x.grad.numpy().tolist() == [5.0, 7.0, 9.0]
    x.grad = None
    x.mean().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1 / 3] * 3, rtol=1e-6)


def test_explicit_gradient_and_shape_errors():
    x = F.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.backward(F.tensor([1.0, -1.0]))
    assert x.grad.numpy().tolist() == [2.0, -2.0]
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match=r"gradient has shape \(3,\)"):
        (x * 2).backward(np.ones(3))
    with pytest.raises(RuntimeError, match="does not require grad"):
        F.ones(2).sum().backward()


def test_leaf_backward_and_gradient_is_copied():
    x = F.tensor([1.0, 2.0], requires_grad=True)
    g = F.tensor([5.0, 6.0])
    (x + 0).backward(g)
    x.grad.add_(1.0)
    assert g.numpy().tolist() == [5.0, 6.0], "the leaf's grad must not alias the caller's gradient"
    leaf = F.ones(2, requires_grad=True)
    leaf.backward(F.tensor([3.0, 4.0]))
    assert leaf.grad.numpy().tolist() == [3.0, 4.0]


def test_shared_subexpressions_sum_gradients():
    x = F.tensor(2.0, requires_grad=True)
    h = x * x           # used twice below (a diamond)
    y = h * h + h + x
    y.backward()
    assert x.grad.item() == pytest.approx(4 * 2.0 ** 3 + 2 * 2.0 + 1)
    z = F.tensor([1.0, 2.0], requires_grad=True)
    (z + z).sum().backward()
    assert z.grad.numpy().tolist() == [2.0, 2.0]


def test_broadcast_gradients_are_reduced_to_input_shapes():
    a = F.ones(3, 1, requires_grad=True)
    b = F.ones(4, requires_grad=True)
    c = F.tensor(2.0, requires_grad=True)
    ((a + b) * c).sum().backward()
    assert a.grad.shape == (3, 1) and a.grad.numpy().ravel().tolist() == [8.0] * 3
    assert b.grad.shape == (4,) and b.grad.numpy().tolist() == [6.0] * 4
    assert c.grad.shape == () and c.grad.item() == 24.0


def test_second_backward_needs_retain_graph():
    x = F.tensor(3.0, requires_grad=True)
    y = x * x
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.item() == 12.0
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_no_grad_records_nothing_and_decorates():
    x = F.ones(2, requires_grad=True)
    with F.no_grad():
        y = x * 2
        assert not F.is_grad_enabled()
        with F.enable_grad():
            assert (x * 2).requires_grad
    assert F.is_grad_enabled()
    assert not y.requires_grad and y.is_leaf

    @F.no_grad()
    def f(t):
        return t * 3
    assert not f(x).requires_grad and F.is_grad_enabled()
    with F.set_grad_enabled(False):
        assert not (x + 1).requires_grad
    assert (x + 1).requires_grad
    F.set_grad_enabled(False)
    assert not F.is_grad_enabled()
    F.set_grad_enabled(True)


def test_grad_mode_is_per_thread():
    seen = []
    with F.no_grad():
        worker = threading.Thread(target=lambda: seen.append(F.is_grad_enabled()))
        worker.start()
        worker.join()
    assert seen == [True]


def test_detach_cuts_the_graph_and_shares_storage():
    x = F.ones(2, requires_grad=True)
    d = (x * 2).detach()
    assert not d.requires_grad and d.is_leaf
    y = (x * d).sum()
    y.backward()
    assert x.grad.numpy().tolist() == [2.0, 2.0]


def test_requires_grad_rules():
    y = F.ones(2, requires_grad=True) * 2
    assert not y.is_leaf and y.grad_fn is not None and y.grad is None
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad = False
    t = F.ones(2).requires_grad_()
    assert t.requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        F.zeros(2, dtype=F.int64).requires_grad_()
    with pytest.raises(RuntimeError, match="shape"):
        t.grad = F.ones(3)
    with pytest.raises(TypeError, match="Tensor or None"):
        t.grad = np.ones(2)


def test_inputs_without_grad_get_none():
    w = F.ones(3, 2, requires_grad=True)
    x = F.ones(4, 3)
    (x @ w).sum().backward()
    assert x.grad is None and w.grad.numpy().tolist() == [[4.0, 4.0]] * 3


def test_long_chain_has_no_recursion_limit():
    x = F.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(5000):
        y = y * 1.0 + 0.0
    y.backward()
    assert x.grad.item() == 1.0


def test_integer_index_gives_zero_dim_view():
    x = F.tensor([1.0, 2.0], requires_grad=True)
    x[1].backward()
    assert x.grad.numpy().tolist() == [0.0, 1.0]


def test_set_grad_enabled_as_decorator():
    @F.set_grad_enabled(False)
    def frozen(t):
        return t * 2
    assert F.is_grad_enabled()
    x = F.ones(1, requires_grad=True)
    assert not frozen(x).requires_grad and F.is_grad_enabled()

    @F.enable_grad()
    def recorded(t):
        return t * 2
    with F.no_grad():
        assert recorded(x).requires_grad
