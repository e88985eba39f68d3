"""Graph breaks: .item() feeding control flow, calls into non-framework code, ops that are not primitives. The
function still runs correctly (captured parts replay, the rest eager), every break is reported, and
fullgraph=True raises GraphBreakError instead."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

import framework as F
from framework import compiler, nn

from compile_models import assert_same, grads_of


pytestmark = pytest.mark.usefixtures("fresh_compiler")


def branchy(x):
    y = x * 2
    if y.sum().item() > 0:
        return (y + 1).tanh()
    return (y - 1).exp()


def test_item_feeding_control_flow_breaks_and_stays_correct_on_both_branches():
    compiled = F.compile(branchy)
    rng = np.random.default_rng(0)
    for i in range(8):
        x = F.tensor(rng.standard_normal(5) + (3 if i % 3 else -3), requires_grad=True)
        assert_same(compiled(x), branchy(x))
        assert_same(grads_of([x], lambda: compiled(x).sum()), grads_of([x], lambda: branchy(x).sum()))
    assert compiler.counters["captures"] == 1 and compiler.counters["graph_breaks"] == 1
    assert compiler.counters["divergences"] > 0  # the other branch ran eagerly past the break


def test_explain_reports_the_graphs_either_side_of_a_break():
    explanation = compiler.explain(branchy, F.ones(3))
    assert explanation.graph_count == 2 and explanation.graph_break_count == 1
    assert len(explanation.break_reasons) == 1 and ".item()" in explanation.break_reasons[0]
    assert "test_compile_breaks.py" in explanation.break_reasons[0]
    assert explanation.ops_per_graph == [["mul", "sum"], ["add", "tanh"]]
    assert "x: shape (3,)" in explanation.guards
    assert "Graph break count: 1" in str(explanation)


def test_fullgraph_raises_where_the_graph_would_break():
    with pytest.raises(compiler.GraphBreakError, match=r"\.item\(\)"):
        F.compile(branchy, fullgraph=True)(F.ones(3))

    def calls_numpy(x):
        return x * float(np.random.default_rng(0).random())
    with pytest.raises(compiler.GraphBreakError, match="non-framework code"):
        F.compile(calls_numpy, fullgraph=True)(F.ones(3))
    assert_same(F.compile(lambda x: x.relu() * 2, fullgraph=True)(F.ones(2)), F.full((2,), 2.0))


def test_calls_into_non_framework_code_break_and_run_every_call():
    def noisy(x):
        return x * random.random()  # Python's RNG: a new value each call
    compiled = F.compile(noisy)
    x = F.ones(4)
    random.seed(1)
    outs = [compiled(x).numpy().copy() for _ in range(3)]
    random.seed(1)
    expected = [noisy(x).numpy().copy() for _ in range(3)]
    np.testing.assert_array_equal(outs, expected)
    assert any("random" in r for r in compiler.explain(noisy, x).break_reasons)


def test_pure_builtins_and_local_lists_do_not_break():
    def tidy(x):
        parts = []
        for i in range(len(x.shape) + 1):
            parts.append(x * math.sqrt(i + 1))
        return F.stack(parts).sum(axis=0) + max(abs(-2), 1)
    explanation = compiler.explain(tidy, F.ones(2, 3))
    assert explanation.graph_break_count == 0, explanation.break_reasons


class Log:
    def __init__(self) -> None:
        self.items: list = []


def test_changing_a_list_that_outlives_the_call_breaks():
    log = Log()

    def remembers(x):
        log.items.append(x.shape[0])  # a side effect replay would skip: the call keeps running its Python
        return x * 2
    compiled = F.compile(remembers)
    for _ in range(3):
        assert_same(compiled(F.ones(2)), F.full((2,), 2.0))
    assert log.items == [2, 2, 2]
    assert compiler.counters["captures"] == 1 and compiler.counters["graph_breaks"] == 1
    assert "outlives the call" in compiler.explain(remembers, F.ones(2)).break_reasons[0]


def test_ops_that_are_not_primitives_break_with_their_name():
    F.manual_seed(0)
    conv = nn.Conv2d(2, 3, 3)
    pool = nn.MaxPool2d(2)
    head = nn.Linear(3 * 3 * 3, 2)

    def net(x):
        h = F.relu(pool(conv(x * 0.5)))  # max_pool2d is not a captured primitive
        return head(h.reshape(x.shape[0], -1)).tanh().sum()
    compiled = F.compile(net)
    params = list(conv.parameters()) + list(head.parameters())
    x = F.randn(2, 2, 8, 8)
    for _ in range(3):
        assert_same(compiled(x), net(x))
        assert_same(grads_of(params, lambda: compiled(x)), grads_of(params, lambda: net(x)))
    explanation = compiler.explain(net, x)
    assert any("max_pool2d" in r for r in explanation.break_reasons), explanation.break_reasons
    assert explanation.ops_per_graph[0] == ["mul", "conv2d"]  # conv2d is one, and replays with its saved patches


def test_tensors_from_python_numbers_are_constants_but_random_ones_break():
    def with_constant(x):
        return x * F.tensor([1.0, 2.0, 3.0]) + F.zeros(3)
    assert compiler.explain(with_constant, F.ones(3)).graph_break_count == 0
    cell = nn.LSTMCell(3, 4)  # builds its zero state with framework.zeros
    assert compiler.explain(lambda x: cell(x)[0], F.ones(2, 3)).graph_break_count == 0

    def with_noise(x):
        return x + F.randn(3)
    compiled = F.compile(with_noise)
    x = F.zeros(3)
    first, second = compiled(x).numpy().copy(), compiled(x).numpy().copy()
    assert not np.array_equal(first, second)  # drawn again each call, never replayed as a constant
    assert compiler.counters["graph_breaks"] == 1


def test_in_place_updates_and_backward_inside_the_function_break():
    def steps(w, x):
        loss = (w * x).sum()
        loss.backward()
        with F.no_grad():
            w.sub_(0.1 * w.grad)
        return loss
    w = F.ones(3, requires_grad=True)
    compiled = F.compile(steps)
    values = [compiled(w, F.full((3,), 2.0)).item() for _ in range(3)]
    np.testing.assert_allclose(values, [6.0, 4.8, 2.4], rtol=1e-5)  # w: 1, then 1 - 0.2, then 0.8 - 0.4
    reasons = compiler.explain(lambda a: (a * 2).sum().backward(), F.ones(2, requires_grad=True)).break_reasons
    assert any("backward" in r for r in reasons)


def test_returning_what_replay_cannot_rebuild_breaks():
    F.manual_seed(0)

    def policy(x):
        return F.distributions.Categorical(logits=x * 2)
    compiled = F.compile(policy)
    x = F.randn(3, 4)
    for _ in range(2):
        assert_same(compiled(x).probs, policy(x).probs)
    assert "Categorical" in compiler.explain(policy, x).break_reasons[0]
