"""Dynamic dims: one graph serves every size of a dynamic dim (dynamic=True or mark_dynamic); guards become
relations between sizes; what Python fixes from a size stays correct."""
from __future__ import annotations

import numpy as np
import pytest

import framework as F
from framework import compiler

from compile_models import ActorCritic, a3c_loss, assert_same, grads_of, rollout


pytestmark = pytest.mark.usefixtures("fresh_compiler")


def test_one_graph_serves_every_batch_size_with_gradients():
    F.manual_seed(0)
    model = ActorCritic(hidden=16)
    loss = a3c_loss(model)
    compiled = F.compile(loss, dynamic=True)
    params = list(model.parameters())
    for batch in (3, 7, 2, 16, 5):
        data = rollout(batch, seed=batch)
        assert_same(compiled(*data), loss(*data))
        assert_same(grads_of(params, lambda: compiled(*data)), grads_of(params, lambda: loss(*data)))
    assert compiler.counters["captures"] == 1 and compiler.counters["recompiles"] == 0


def test_sizes_read_in_python_become_symbolic_arguments():
    def fn(x):
        flat = x.reshape(x.size(0), -1)  # (s0, -1) is recorded, not the first call's size
        return flat[:, : x.shape[1]].sum(axis=1) + x.mean() * len(x.shape)
    compiled = F.compile(fn, dynamic=True)
    for n in (4, 6, 9):
        x = F.tensor(np.arange(n * 21, dtype=np.float32).reshape(n, 3, 7))  # sizes apart: no duck sizing
        assert_same(compiled(x), fn(x))
    assert compiler.counters["captures"] == 1


def test_guards_become_relations_between_sizes():
    compiled = F.compile(lambda x, y: (x * y).sum(axis=0), dynamic=True)
    compiled(F.ones(4, 3), F.ones(4, 3))
    guards = compiler.explain(compiled, F.ones(4, 3), F.ones(4, 3)).guards
    assert "y.size(0) == x.size(0)" in guards and "x: shape (s0, s1)" in guards
    assert_same(compiled(F.ones(6, 5), F.full((6, 5), 2.0)), F.full((5,), 12.0))
    assert compiler.counters["captures"] == 1
    with pytest.raises(ValueError):  # the relation fails: a recapture, and eager's broadcasting error
        compiled(F.ones(6, 5), F.ones(7, 5))


def test_mark_dynamic_makes_one_dim_dynamic():
    compiled = F.compile(lambda x: (x.relu() * 2).sum(axis=1))
    x = F.randn(4, 3)
    compiler.mark_dynamic(x, 0)
    compiled(x)
    for n in (5, 9, 2):
        y = F.randn(n, 3)
        assert_same(compiled(y), (y.relu() * 2).sum(axis=1))
    assert compiler.counters["captures"] == 1
    compiled(F.randn(4, 5))  # dim 1 stayed static
    assert compiler.counters["captures"] == 2


def test_sizes_zero_and_one_are_not_symbolic():
    compiled = F.compile(lambda x: x * 2, dynamic=True)
    compiled(F.ones(1, 3))
    compiled(F.ones(2, 3))
    assert compiler.counters["captures"] == 2


def test_a_size_python_needs_as_an_int_fixes_the_symbol():
    def fn(x):
        return x * float(x.shape[0])  # the value is used: the graph is only good for this size
    compiled = F.compile(fn, dynamic=True)
    for n in (3, 4, 3):
        x = F.ones(n)
        assert_same(compiled(x), fn(x))
    assert compiler.counters["captures"] == 2 and compiler.counters["cache_hits"] == 1


def test_branch_on_a_size_guards_the_comparison():
    def fn(x):
        return x * 2 if x.shape[0] > 4 else x - 1
    compiled = F.compile(fn, dynamic=True)
    for n in (6, 8, 3, 2, 9):
        x = F.ones(n)
        assert_same(compiled(x), fn(x))
    assert compiler.counters["captures"] == 2
    assert any("x.size(0) > 4" in g for g in compiler.explain(compiled, F.ones(6)).guards)
