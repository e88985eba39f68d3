"""Guards: each kind makes a changed call recompile (and only then), the cache keeps several graphs per function,
and past config.cache_size_limit a call runs eagerly with one warning."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import framework as F
from framework import compiler, nn

from compile_models import assert_same

SCALE = 2.0


pytestmark = pytest.mark.usefixtures("fresh_compiler")


def _recompiles_on(fn, first_args, second_args, reason: str) -> None:
    """Calling with first_args twice replays; second_args fails `reason`'s guard and recompiles, correctly."""
    compiled = F.compile(fn)
    compiled(*first_args)
    assert_same(compiled(*first_args), fn(*first_args))
    assert compiler.counters["cache_hits"] == 1 and compiler.counters["recompiles"] == 0
    why = compiled.entries[0].why(second_args, {})
    assert reason in why, why
    assert_same(compiled(*second_args), fn(*second_args))
    assert compiler.counters["recompiles"] == 1 and compiler.counters["guard_failures"] == 1


class Doubled(F.Tensor):
    """A Tensor subclass (another class for the class guard)."""


@pytest.mark.parametrize("case", ["class", "dtype", "requires_grad", "ndim", "shape", "strides"])
def test_each_tensor_guard_recompiles(case):
    x = F.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    other = {
        "class": Doubled(x.numpy().copy()),
        "dtype": F.tensor(np.arange(6.0).reshape(2, 3)),
        "requires_grad": F.tensor(x.numpy(), requires_grad=True),
        "ndim": F.tensor(np.arange(6.0, dtype=np.float32)),
        "shape": F.tensor(np.arange(9.0, dtype=np.float32).reshape(3, 3)),
        "strides": F.tensor(np.arange(6.0, dtype=np.float32).reshape(3, 2)).T,
    }[case]
    reason = {"class": "class Tensor", "dtype": "dtype float32", "requires_grad": "requires_grad False",
              "ndim": "ndim 2", "shape": "shape (2, 3)", "strides": "stride (3, 1)"}[case]
    _recompiles_on(lambda t: (t * 3).sum(axis=-1), (x,), (other,), reason)


def test_python_scalar_arguments_are_guarded_by_value_and_type():
    x = F.ones(3)
    _recompiles_on(lambda t, s: t * s, (x, 2.0), (x, 3.0), "s: == 2.0")
    compiler.reset()
    _recompiles_on(lambda t, s: t * s, (x, 2), (x, 2.0), "s: == 2")  # an int and a float differ


def test_globals_and_closure_cells_the_code_reads_are_guarded():
    global SCALE
    x = F.ones(2)

    def uses_global(t):
        return t * SCALE
    compiled = F.compile(uses_global)
    assert_same(compiled(x), x * 2.0)
    SCALE = 5.0
    try:
        assert_same(compiled(x), x * 5.0)
    finally:
        SCALE = 2.0
    assert compiler.counters["recompiles"] == 1

    factor = 3.0
    compiled = F.compile(lambda t: t * factor)
    assert_same(compiled(x), x * 3.0)
    factor = 4.0
    assert_same(compiled(x), x * 4.0)
    assert compiler.counters["recompiles"] == 2


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.scale = 2.0

    def forward(self, x):
        return self.fc(x) * self.scale


def test_module_attributes_and_submodules_are_guarded():
    F.manual_seed(0)
    model = Scaled()
    compiled = F.compile(model)
    x = F.randn(2, 3)
    compiled(x)
    compiled(x)
    model.scale = 3.0  # a scalar attribute the forward reads
    assert_same(compiled(x), model(x))
    model.fc = nn.Linear(3, 3)  # a swapped layer: other parameters
    assert_same(compiled(x), model(x))
    model.train(False)  # a mode flag
    assert_same(compiled(x), model(x))
    assert compiler.counters["recompiles"] == 3
    nn.Linear(2, 2)  # building an unrelated module moves nn.Module's version: compared, still valid
    compiled(x)
    assert compiler.counters["recompiles"] == 3


def test_replaced_parameter_arrays_and_requires_grad_are_guarded():
    net, x = nn.Linear(3, 2), F.randn(4, 3)
    compiled = F.compile(net)
    compiled(x)
    net.weight.data = F.randn(2, 3)
    assert_same(compiled(x), net(x))
    net.bias.requires_grad_(False)
    out = compiled(x)
    out.sum().backward()
    assert net.bias.grad is None and net.weight.grad is not None
    assert compiler.counters["recompiles"] == 2


def test_grad_mode_is_guarded():
    x = F.randn(3, requires_grad=True)
    compiled = F.compile(lambda t: (t * 2).sum())
    assert compiled(x).requires_grad
    with F.no_grad():
        assert not compiled(x).requires_grad
    assert compiled(x).requires_grad
    assert compiler.counters["captures"] == 2 and compiler.counters["cache_hits"] == 1


def test_an_argument_passed_twice_must_alias_at_replay():
    compiled = F.compile(lambda a, b: a + b)
    x, y = F.ones(3), F.full((3,), 5.0)
    compiled(x, x)
    assert_same(compiled(y, y), y + y)
    assert_same(compiled(x, y), x + y)  # the graph read one tensor twice: two tensors recompile
    assert compiler.counters["recompiles"] == 1 and compiler.counters["cache_hits"] == 1


def test_the_cache_keeps_several_graphs_per_function():
    compiled = F.compile(lambda t: t.exp().sum())
    a, b, c = F.ones(2), F.ones(3), F.ones(2, 2)
    for _ in range(3):
        for t in (a, b, c):
            assert_same(compiled(t), t.exp().sum())
    assert compiler.counters["captures"] == 3 and compiler.counters["cache_hits"] == 6
    assert len(compiled.entries) == 3


def test_past_the_cache_size_limit_calls_run_eagerly_with_one_warning():
    compiler.config.cache_size_limit = 2
    compiled = F.compile(lambda t: t + 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 7):
            assert_same(compiled(F.ones(n)), F.full((n,), 2.0))
    limit_warnings = [w for w in caught if "cache_size_limit" in str(w.message)]
    assert len(limit_warnings) == 1
    assert compiler.counters["captures"] == 2 and compiler.counters["eager_fallbacks"] == 4
    assert_same(compiled(F.ones(1)), F.full((1,), 2.0))  # the cached graphs still serve
    assert compiler.counters["cache_hits"] == 1


def test_reset_forgets_graphs_and_zeroes_counters():
    compiled = F.compile(lambda t: t * 2)
    compiled(F.ones(2))
    compiled(F.ones(2))
    compiler.reset()
    assert all(v == 0 for v in compiler.counters.values()) and not compiled.entries
    compiled(F.ones(2))
    assert compiler.counters["captures"] == 1 and compiler.counters["recompiles"] == 0
