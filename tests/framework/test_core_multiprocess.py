"""Tensors, models and optimizers crossing process boundaries through `sharing` (real processes)."""
from __future__ import annotations

import functools
import queue
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import framework as F
import sharing
from framework import nn, optim

import core_workers

pytestmark = pytest.mark.timeout(120)
TIMEOUT = core_workers.TIMEOUT


def receive(box, *children):
    """The next message, failing fast (with the exit code) if a child died instead of answering."""
    for _ in range(TIMEOUT * 10):
        try:
            return box.get(timeout=0.1)
        except queue.Empty:
            dead = [c.exitcode for c in children if c.exitcode not in (None, 0)]
            assert not dead, f"child exited with {dead}"
    raise AssertionError("no message from the children")


def shared_model_and_optimizer():
    F.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).share_memory()
    return model, optim.Adam(model.parameters(), lr=0.1).share_memory()


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_tensor_and_view_alias_in_the_child(method):
    ctx = sharing.get_context(method)
    inbox, outbox = ctx.Queue(), ctx.Queue()
    x = F.zeros(5, 5, requires_grad=True)
    x.grad = F.ones(5, 5)
    column = x[:, 1].detach()
    child = ctx.Process(target=core_workers.fill_received, args=(inbox, outbox))
    child.start()
    inbox.put([x, column])
    report = receive(outbox, child)
    child.join(TIMEOUT)
    assert child.exitcode == 0
    assert report == {"shared": True, "grad": None, "requires_grad": True, "alias": True}
    assert x.is_shared() and column.is_shared()  # moved to shared memory in place, view still aliasing
    expected = np.full((5, 5), 7.0)
    expected[:, 1] = 3.0
    np.testing.assert_array_equal(x.detach().numpy(), expected)


def test_share_memory_in_place_keeps_views_and_round_trips_in_process():
    x = F.arange(12, dtype=F.float32).reshape(3, 4)
    views = [x[1], x.T, x[:, ::-1], x.reshape(12)[2:]]
    assert not x.is_shared() and x.share_memory_() is x and x.is_shared()
    assert all(v.is_shared() for v in views)
    x.fill_(1.0)
    assert all((v.numpy() == 1.0).all() for v in views)
    back = ForkingPickler.loads(ForkingPickler.dumps([x, views[2]]))
    back[1].fill_(5.0)
    assert (x.numpy() == 5.0).all() and np.shares_memory(back[0].numpy(), x.numpy())


def test_non_leaf_requiring_grad_refuses_to_travel():
    y = F.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="non-leaf tensor which requires_grad"):
        ForkingPickler.dumps(y)
    assert ForkingPickler.loads(ForkingPickler.dumps(y.detach())).numpy().tolist() == [2.0, 2.0]


def test_model_and_shared_optimizer_stepped_in_a_spawned_child():
    model, opt = shared_model_and_optimizer()
    before = model.arena.data.copy()
    ctx = sharing.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=core_workers.step_and_watch, args=(model, opt, inbox, outbox))
    child.start()
    report = receive(outbox, child)
    assert report == {"arena_shared": True, "views": True, "identity": True, "state_shared": True, "fused": True,
                      "grad_zero": True}
    assert receive(outbox, child) == "stepped"
    np.testing.assert_allclose(model.arena.data, before - 0.1, rtol=1e-5)  # Adam's first step is lr * sign
    assert all(float(s["step"]) == 1.0 for s in opt.state.values())
    assert all(np.allclose(s["exp_avg"], 0.1) for s in opt.state.values())
    with F.no_grad():
        for p in model.parameters():
            p.fill_(2.0)
    inbox.put("look")
    assert receive(outbox, child) == pytest.approx(2.0 * model.arena.numel)
    child.join(TIMEOUT)
    assert child.exitcode == 0


def test_model_and_optimizer_as_one_argument_and_as_separate_messages():
    model, opt = shared_model_and_optimizer()
    ctx = sharing.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    children = [ctx.Process(target=core_workers.step_pair, args=((model, opt), outbox)),
                ctx.Process(target=core_workers.receive_separately, args=(inbox, outbox))]
    for child in children:
        child.start()
    inbox.put(model)
    inbox.put(opt)
    reports = [receive(outbox, *children) for _ in range(4)]
    for child in children:
        child.join(TIMEOUT)
        assert child.exitcode == 0
    assert reports.count("stepped") == 2
    for report in (r for r in reports if r != "stepped"):
        assert all(report.values()), report
    assert all(float(s["step"]) == 2.0 for s in opt.state.values())


def test_hogwild_workers_update_one_shared_model():
    F.manual_seed(0)
    model = nn.Linear(3, 1).share_memory()
    before = model.arena.data.copy()
    sharing.spawn(core_workers.hogwild_sgd, args=(model, 5), nprocs=2)
    # every step moves each element by -lr * 2 = -0.02 (the gradient of the summed outputs is constant);
    # 10 steps in all, unless lock-free updates raced (at least the 5 of one worker land)
    moved = before - model.arena.data
    assert np.all(moved > 5 * 0.02 - 1e-5) and np.all(moved < 10 * 0.02 + 1e-5)


LR = 1e-3
STEP_BOUNDS = {"adam": LR / np.sqrt(1 - 0.9 ** 2 / 0.999), "rmsprop": LR / np.sqrt(1 - 0.99),
               "rmsprop_centered": LR * np.sqrt(0.99 / 0.01) / (1 - 6 * 0.01)}
"""The largest step of each optimizer (defaults apart from lr) once its denominator is floored. Centered RMSprop's
floor (1-alpha)/alpha (g - mean(g))^2 bounds a step of gradient 1 by lr sqrt(alpha/(1-alpha)) / (1 - mean(g)), and
mean(g) takes at most the 6 steps of a round, 1 - alpha each."""
OPTIMIZERS = {"adam": optim.Adam, "rmsprop": optim.RMSprop,
              "rmsprop_centered": functools.partial(optim.RMSprop, centered=True)}


@pytest.mark.parametrize("name", sorted(STEP_BOUNDS))
def test_lock_free_workers_never_step_beyond_their_optimizers_step_size(name):
    """One worker steps a shared optimizer with gradient 1, the other with 0, from zero state each round: each
    reads the state while the other writes it, and either can lose the other's writes (read-modify-writes). Had a
    step divided a gradient by a second moment without it (Adam's m holding the first's gradient, or RMSprop's v
    having lost a worker's own), a parameter would move by about lr / eps (1e5 here); centered RMSprop's s - mean(g)^2
    could turn negative, a NaN step."""
    rounds, steps = 80, 3
    model = nn.Linear(1_000_000, 1, bias=False).share_memory()
    opt = OPTIMIZERS[name](model.parameters(), lr=LR).share_memory()
    ctx = sharing.get_context("fork")
    barrier = ctx.Barrier(3)
    children = [ctx.Process(target=core_workers.lock_free_rounds, args=(model, opt, gradient, rounds, steps, barrier))
                for gradient in (1.0, 0.0)]
    for child in children:
        child.start()
    moved = []
    for _ in range(rounds):
        model.arena.data[...] = 0
        for state in opt.state.values():
            for array in state.values():
                array[...] = 0
        barrier.wait(TIMEOUT)
        barrier.wait(TIMEOUT)
        moved.append(float(np.abs(model.arena.data).max()))
    for child in children:
        child.join(TIMEOUT)
        assert child.exitcode == 0
    assert np.all(np.isfinite(moved)) and max(moved) <= 2 * steps * STEP_BOUNDS[name], moved


def test_unshared_arena_is_shared_when_sent():
    model = nn.Linear(2, 2)
    arena = model.pack_parameters()
    assert not arena.is_shared()
    clone = ForkingPickler.loads(ForkingPickler.dumps(model))
    assert arena.is_shared() and clone.arena is arena and clone.weight is model.weight
