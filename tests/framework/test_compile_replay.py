"""framework.compile replays what eager computes: outputs and gradients of real models, the backward as one
program, parameters updated in place between calls, buffers that never leak into results."""
from __future__ import annotations

import numpy as np
import pytest

import framework as F
from framework import compiler, nn, optim
from framework.nn import functional as Fn

from compile_models import ActorCritic, a3c_loss, assert_same, grads_of, rollout


pytestmark = pytest.mark.usefixtures("fresh_compiler")


@pytest.mark.parametrize("batch", [1, 32])
@pytest.mark.parametrize("continuous", [False, True], ids=["categorical", "normal"])
def test_actor_critic_loss_and_gradients_equal_eager(batch, continuous):
    F.manual_seed(0)
    model = ActorCritic(continuous=continuous)
    loss = a3c_loss(model)
    compiled = F.compile(loss)
    data = rollout(batch, continuous=continuous)
    params = list(model.parameters())
    expected = grads_of(params, lambda: loss(*data))
    for _ in range(3):  # the capture, then replays
        assert_same(compiled(*data), loss(*data))
        assert_same(grads_of(params, lambda: compiled(*data)), expected)
    assert compiler.counters["captures"] == 1 and compiler.counters["cache_hits"] >= 2


def test_mlp_classifier_training_matches_eager_step_for_step():
    def train(compile_step: bool) -> list:
        F.manual_seed(1)
        net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 16), nn.Sigmoid(), nn.Linear(16, 3))
        opt = optim.Adam(net.parameters(), lr=0.01)

        def loss_fn(x, y):
            return Fn.cross_entropy(net(x), y) + 0.001 * (net[0].weight ** 2).sum()
        step = F.compile(loss_fn) if compile_step else loss_fn
        rng = np.random.default_rng(0)
        losses = []
        for _ in range(20):
            x, y = F.tensor(rng.standard_normal((8, 3)).astype(np.float32)), F.tensor(rng.integers(0, 3, 8))
            opt.zero_grad()
            loss = step(x, y)
            loss.backward()
            opt.step()  # in place: the compiled graph must see the new weights on the next call
            losses.append(loss.item())
        return losses
    np.testing.assert_allclose(train(True), train(False), rtol=1e-5)
    assert compiler.counters["recompiles"] == 0


def test_backward_runs_the_graph_as_one_autograd_node():
    F.manual_seed(0)
    model = ActorCritic()
    compiled = F.compile(a3c_loss(model))
    data = rollout(4)
    compiled(*data)
    loss, *parts = compiled(*data)
    graph_node = loss._prev[0]
    assert all(p._prev == (graph_node,) for p in parts)  # every output routes into the same node
    assert set(map(id, graph_node._prev)) == set(map(id, model.parameters()))
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_parameters_updated_in_place_are_seen():
    F.manual_seed(0)
    net = nn.Linear(3, 2)
    compiled = F.compile(net)
    x = F.randn(4, 3)
    compiled(x)
    with F.no_grad():
        net.weight.mul_(2.0)
        net.bias.add_(1.0)
    assert_same(compiled(x), net(x))
    arena = net.pack_parameters()  # moves the parameters into one array: a guard fails, the graph is rebuilt
    assert_same(compiled(x), net(x))
    other = nn.Linear(3, 2)
    arena.copy_from(other.pack_parameters())  # an arena sync, as A3C workers do: in place
    assert_same(compiled(x), other(x))
    assert compiler.counters["recompiles"] == 1


def test_results_are_never_overwritten_by_the_next_call():
    F.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64))  # 64x64 results use preallocated buffers
    compiled = F.compile(lambda x: (net(x), net(x)[:, :4] * 2))
    x1, x2 = F.randn(64, 8), F.randn(64, 8)
    compiled(x1)
    first = compiled(x1)
    copies = [t.detach().numpy().copy() for t in first]
    compiled(x2)
    for t, copy in zip(first, copies):
        np.testing.assert_array_equal(t.detach().numpy(), copy)


def test_backward_after_another_forward_uses_its_own_saved_values():
    F.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 64))
    compiled = F.compile(lambda x: net(x).sum())
    params = list(net.parameters())
    x1, x2 = F.randn(64, 8), F.randn(64, 8)
    expected = grads_of(params, lambda: net(x1).sum())
    compiled(x1)
    for p in params:
        p.grad = None
    pending = compiled(x1)
    compiled(x2).backward()  # a second call while the first one's graph is pending: it takes other buffers
    for p in params:
        p.grad = None
    pending.backward()
    assert_same([p.grad for p in params], expected)


def test_retain_graph_and_non_leaf_inputs():
    w = F.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    compiled = F.compile(lambda h: (h.tanh() * h).sum())
    for _ in range(2):
        w.grad = None
        h = w * 3  # a non-leaf input: the gradient flows on through the engine
        out = compiled(h)
        out.backward(retain_graph=True)
        out.backward()
    expected_w = F.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    h = expected_w * 3
    ((h.tanh() * h).sum() * 2).backward()
    assert_same(w.grad, expected_w.grad)


def test_compiled_module_shares_the_original_parameters_and_attributes():
    model = ActorCritic(hidden=8)
    compiled = F.compile(model)
    assert isinstance(compiled, nn.Module) and compiled._orig_mod is model
    assert [id(p) for p in compiled.parameters()] == [id(p) for p in model.parameters()]
    assert compiled.pi is model.pi and compiled.distribution(F.zeros(1, 2)).num_events == 2
    x = F.randn(5, 4)
    for _ in range(2):
        assert_same(compiled(x), model(x))


def test_output_structures_constants_and_pass_through_inputs():
    def fn(x, scale):
        return {"y": x * scale, "pair": [x, 3], "none": None, "name": "z"}
    compiled = F.compile(fn)
    x = F.randn(3)
    for _ in range(2):
        out = compiled(x, 2.0)
        assert set(out) == {"y", "pair", "none", "name"} and out["pair"][0] is x and out["pair"][1] == 3
        assert out["none"] is None and out["name"] == "z"
        assert_same(out["y"], x * 2.0)


def test_nested_compiled_functions_join_the_outer_graph():
    inner = F.compile(lambda x: x.exp() + 1)
    outer = F.compile(lambda x: inner(x * 2).log().sum())
    x = F.randn(4, requires_grad=True)
    for _ in range(2):
        x.grad = None
        outer(x).backward()
        e = np.exp(2 * x.detach().numpy())
        np.testing.assert_allclose(x.grad.numpy(), 2 * e / (e + 1), rtol=1e-5)
    assert compiler.counters["captures"] == 1  # inner was part of outer's graph


def test_no_grad_calls_return_plain_tensors():
    F.manual_seed(0)
    model = ActorCritic()
    act = F.compile(lambda obs: model(obs)[0])
    obs = F.randn(4, 4)
    with F.no_grad():
        heads = [act(obs) for _ in range(3)]
    assert all(h.grad_fn is None and not h.requires_grad for h in heads)
    assert_same(heads[-1], model(obs)[0])


OPS = {
    "arithmetic": lambda x, y: ((x + y) * (x - 2.0) / (y.abs() + 1.0) - (-x) ** 2 + 3.0 / (y * y + 1.0)).sum(),
    "pointwise": lambda x, y: (x.exp() + (y * y + 1).log() + (x.abs() + 1).sqrt() + x.tanh() + x.sigmoid()
                               + x.relu() + F.elu(x) + F.softplus(y) + x.clamp(-0.5, 0.5)).sum(),
    "reductions": lambda x, y: (x.sum(axis=0) + x.mean(axis=1).sum() + x.max(axis=1).sum() + x.min()
                                + x.logsumexp(axis=1).sum()).sum(),
    "normalisations": lambda x, y: (x.softmax(axis=1) * y).sum() + (x.log_softmax(axis=0) * y).sum(),
    "shapes": lambda x, y: (x.reshape(-1, 2).transpose(0, 1).permute(1, 0).flatten().unsqueeze(0).squeeze(0)
                            * y.view(-1)).sum() + (x.T @ y).sum(),
    "selection": lambda x, y: (x[1:, ::2] * 2).sum() + x.gather(1, F.tensor([[0], [2], [1], [0]])).sum()
    + F.where(x > y, x, y * 2).sum() + x[F.tensor([0, 3, 3])].sum(),
    "joins": lambda x, y: (F.cat([x, y], axis=1) ** 2).sum() + F.stack([x, y]).mean()
    + sum(c.sum() for c in x.chunk(2, axis=0)),
    "linear": lambda x, y: F.linear(x, y, y[0]).sum() + F.matmul(x, y.T).mean(),
    "losses": lambda x, y: Fn.mse_loss(x, y) + Fn.cross_entropy(x, F.tensor([0, 1, 2, 3])),
    "infinite constants": lambda x, y: (x.clamp(-float("inf"), 0.5) + y.clamp(max=float("inf"))).sum(),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_each_primitive_family_matches_eager_in_value_and_gradient(name):
    fn = OPS[name]
    rng = np.random.default_rng(3)
    x = F.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    y = F.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    expected = grads_of([x, y], lambda: fn(x, y))
    compiled = F.compile(fn)
    for _ in range(2):
        assert_same(compiled(x, y), fn(x, y))
        assert_same(grads_of([x, y], lambda: compiled(x, y)), expected)
    assert compiler.counters["graph_breaks"] == 0, compiler.explain(fn, x, y).break_reasons


def test_calls_from_several_threads_never_share_buffers():
    import threading
    F.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh())  # buffered sizes
    compiled = F.compile(lambda x: net(x) * 2)
    inputs = [F.randn(32, 16) for _ in range(4)]
    with F.no_grad():
        expected = [(net(x) * 2).numpy() for x in inputs]
        compiled(inputs[0])
    failures = []

    def hammer(i: int) -> None:
        with F.no_grad():
            for _ in range(200):
                if not np.allclose(compiled(inputs[i]).numpy(), expected[i], rtol=1e-5, atol=1e-6):
                    failures.append(i)
    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_gradients_are_inline_expressions_where_nothing_broadcasts_and_calls_where_something_does():
    rng = np.random.default_rng(5)
    x = F.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    row = F.tensor(rng.standard_normal(3), requires_grad=True)

    def fn(x, row):
        same_shape = ((x * x).tanh() - x.exp() / (x * x + 1.0)).sigmoid()  # every argument has the output's shape
        return (same_shape - row).sum() + (-row * 2.0).relu().sum()       # `row` is broadcast against (4, 3)
    expected = grads_of([x, row], lambda: fn(x, row))
    compiled = F.compile(fn)
    for _ in range(2):  # the capture, then a replay
        got = grads_of([x, row], lambda: compiled(x, row))
        for g, e in zip(got, expected):  # eager's backward comes from the same expressions: equal bit for bit
            np.testing.assert_array_equal(g, e)
    (program,) = compiled.entries[0].backward.programs.values()
    called = set(_called_backwards(program))
    assert called == {"_sub_backward", "_sum_backward"}  # the broadcast subtraction and the reductions only
    assert "(1 - " in program.source and " > 0)" in program.source  # tanh's and relu's gradients, written inline


def _called_backwards(program) -> list:
    """The names of the backward functions a generated backward program calls (the rest is written inline)."""
    calls = [line.split("= ")[1].split("(")[0] for line in program.source.splitlines()
             if line.lstrip().startswith("r = ")]
    return sorted(program.__globals__[name].__name__ for name in calls)


@pytest.mark.parametrize("dynamic", [False, True])
def test_an_index_that_selects_everything_passes_its_gradient_reshaped(dynamic):
    """x[:n] with n the whole length and v[:, 0] of a single column are reshapes of the gradient: written inline
    for static shapes, called in a dynamic capture (the slice's bound may be shorter at the next size); an
    index that drops elements is always a call. Gradients equal eager's bit for bit."""
    rng = np.random.default_rng(6)
    x = F.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    v = F.tensor(rng.standard_normal((5, 1)), requires_grad=True)

    def fn(x, v):
        n = 5
        return (x[:n] * x[:n][:, None][:, 0]).sum() + (v[:, 0] ** 2).sum() + x[1:].sum()
    expected = grads_of([x, v], lambda: fn(x, v))
    compiled = F.compile(fn, dynamic=dynamic)
    for _ in range(2):
        for g, e in zip(grads_of([x, v], lambda: compiled(x, v)), expected):
            np.testing.assert_array_equal(g, e)
    (program,) = compiled.entries[0].backward.programs.values()
    getitems = [name for name in _called_backwards(program) if name == "_getitem_backward"]
    assert len(getitems) == (6 if dynamic else 1)  # six indexes; static: only x[1:] is a call
    assert (".reshape((5, 3))" in program.source) != dynamic and (".reshape((5, 1))" in program.source) != dynamic
