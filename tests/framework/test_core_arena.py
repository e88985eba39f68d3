"""The parameter arena: packing, gradient buffer, sharing, copying, pickling."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import framework as F
from framework import nn


def make_net():
    F.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def test_pack_makes_every_parameter_a_view_in_named_order():
    net = make_net()
    params = list(net.parameters())
    values = [p.detach().numpy().copy() for p in params]
    view_of_weight = net[0].weight[0]
    arena = net.pack_parameters()
    assert net.arena is arena and arena.params == params and not arena.is_shared()
    assert arena.data.shape == (3 * 4 + 4 + 4 * 2 + 2,) and arena.data.dtype == np.float32
    offset = 0
    for p, value in zip(params, values):
        assert np.shares_memory(p.data_array, arena.data)
        np.testing.assert_array_equal(arena.data[offset:offset + p.numel()].reshape(p.shape), value)
        offset += p.numel()
    arena.data[:12] = 1.0
    assert net[0].weight.detach().numpy().sum() == 12
    assert view_of_weight.detach().numpy().tolist() == [1.0] * 3, "views taken before packing follow the parameter"
    assert net.pack_parameters() is arena  # idempotent
    assert repr(arena).startswith("ParameterArena(4 parameters, 26 elements")


def test_backward_fills_the_flat_gradient():
    net = make_net()
    arena = net.pack_parameters()
    assert arena.grad.shape == arena.data.shape and not arena.grad.any()
    x = F.ones(5, 3)
    net(x).sum().backward()
    first = arena.grad.copy()
    assert first.any()
    for p in net.parameters():
        assert np.shares_memory(p.grad.data_array, arena.grad)
    net(x).sum().backward()
    np.testing.assert_allclose(arena.grad, 2 * first, rtol=1e-6)
    arena.grad[...] = 0.0  # zeroing the buffer keeps the views: accumulation restarts from zero
    net(x).sum().backward()
    np.testing.assert_allclose(arena.grad, first, rtol=1e-6)
    net.zero_grad()
    assert not arena.grad.any() and all(p.grad is None for p in net.parameters())
    net(x).sum().backward()
    np.testing.assert_allclose(arena.grad, first, rtol=1e-6)
    net.zero_grad(set_to_none=False)
    assert not arena.grad.any() and net[0].weight.grad is not None


def test_assigning_grad_writes_into_the_arena():
    net = make_net()
    arena = net.pack_parameters()
    w = net[2].weight
    w.grad = F.ones(2, 4)
    assert arena.grad[-10:-2].tolist() == [1.0] * 8 and np.shares_memory(w.grad.data_array, arena.grad)
    w.grad = None
    assert not arena.grad.any()


def test_existing_grads_move_into_the_arena():
    net = make_net()
    net(F.ones(1, 3)).sum().backward()
    grads = [p.grad.numpy().copy() for p in net.parameters()]
    arena = net.pack_parameters()
    np.testing.assert_array_equal(arena.grad, np.concatenate([g.ravel() for g in grads]))


def test_copy_from_is_one_copy_and_checks_layout():
    a, b = make_net(), make_net()
    for p in b.parameters():
        with F.no_grad():
            p.fill_(0.5)
    a.pack_parameters().copy_from(b.pack_parameters())
    assert all((p.detach().numpy() == 0.5).all() for p in a.parameters())
    with pytest.raises(ValueError, match="differ in layout"):
        a.arena.copy_from(nn.Linear(2, 2).pack_parameters())


def test_share_memory_moves_the_arena_and_buffers():
    net = make_net()
    net.register_buffer("steps", F.zeros(1))
    weight = net[0].weight
    assert net.share_memory() is net
    arena = net.arena
    assert arena.is_shared() and net[0].weight is weight and weight.is_shared() and net.steps.is_shared()
    assert all(np.shares_memory(p.data_array, arena.data) for p in net.parameters())
    assert net.pack_parameters(shared=True) is arena


def test_repacking_a_parent_dissolves_the_child_arena():
    child = nn.Linear(2, 2)
    child_arena = child.pack_parameters()
    parent = nn.Sequential(child, nn.Linear(2, 1))
    parent_arena = parent.pack_parameters()
    assert child.arena is None and not child_arena.alive and parent.arena is parent_arena
    assert all(p._arena is parent_arena for p in parent.parameters())
    parent.add_module("extra", nn.Linear(1, 1))
    assert parent.pack_parameters() is not parent_arena and not parent_arena.alive


def test_deepcopy_and_pickle_give_a_private_arena():
    net = make_net()
    net.share_memory()
    for clone in (copy.deepcopy(net), pickle.loads(pickle.dumps(net))):
        arena = clone.arena
        assert arena is not None and not arena.is_shared() and arena is not net.arena
        assert [p._arena for p in clone.parameters()] == [arena] * 4
        np.testing.assert_array_equal(arena.data, net.arena.data)
        arena.data[...] = 0
        assert net.arena.data.any()
        clone(F.ones(1, 3)).sum().backward()
        assert arena.grad.any() and not net.arena.grad.any()


def test_to_float64_keeps_identity_and_packing():
    net = make_net()
    arena = net.pack_parameters()
    weight = net[0].weight
    net.double()
    assert net.arena is arena and net[0].weight is weight and arena.data.dtype == np.float64
    assert np.shares_memory(weight.data_array, arena.data)
    net(F.ones(1, 3, dtype=F.float64)).sum().backward()
    assert arena.grad.dtype == np.float64 and arena.grad.any()


def test_mixed_dtypes_cannot_share_an_arena():
    net = make_net()
    net[2].weight.data = F.zeros(2, 4, dtype=F.float64)
    with pytest.raises(ValueError, match="one dtype and device"):
        net.pack_parameters()


def test_empty_module_packs_and_shares():
    empty = nn.ReLU()
    assert empty.share_memory().arena.numel == 0


def test_a_dropped_shared_model_frees_its_shared_memory_at_once():
    import weakref

    import sharing
    net = make_net().share_memory()
    opt = F.optim.Adam(net.parameters()).share_memory()
    net(F.ones(1, 3)).sum().backward()
    opt.step()
    arrays = [net.arena.data] + [a for entry in opt.state.values() for a in entry.values()]
    segments = [weakref.ref(sharing.storage_of(a)) for a in arrays]
    del net, opt, arrays  # reference counting alone (no cycle collection) must release every segment
    assert all(ref() is None for ref in segments)
