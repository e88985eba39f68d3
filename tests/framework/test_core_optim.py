"""Optimizers step by step against their published update rules (written out here in NumPy), fused and not;
state, state_dict, sharing, clipping and the linear lr schedule."""
from __future__ import annotations

import math

import numpy as np
import pytest

import framework as F
from framework import nn, optim
from framework.optim.lr_scheduler import LinearLR


# ---- reference update rules ------------------------------------------------------------------------
def ref_sgd(p, g, s, t, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    if momentum:
        s["buf"] = g.copy() if t == 1 else momentum * s["buf"] + (1 - dampening) * g
        g = g + momentum * s["buf"] if nesterov else s["buf"]
    return p - lr * g


def ref_adam(p, g, s, t, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False):
    b1, b2 = betas
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0) + (1 - b2) * g * g
    v = s["v"]
    if amsgrad:
        s["vmax"] = np.maximum(s.get("vmax", 0), s["v"])
        v = s["vmax"]
    m_hat = s["m"] / (1 - b1 ** t)
    v_hat = v / (1 - b2 ** t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps)


def ref_rmsprop(p, g, s, t, lr, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                maximize=False, eps_inside_sqrt=False):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    s["sq"] = alpha * s.get("sq", 0) + (1 - alpha) * g * g
    avg = s["sq"]
    if centered:
        s["ga"] = alpha * s.get("ga", 0) + (1 - alpha) * g
        avg = avg - s["ga"] ** 2
    denom = np.sqrt(avg + eps) if eps_inside_sqrt else np.sqrt(avg) + eps
    if momentum:
        s["buf"] = momentum * s.get("buf", 0) + g / denom
        return p - lr * s["buf"]
    return p - lr * g / denom


def ref_rmsprop_tf(p, g, s, t, lr, **options):
    """TensorFlow's RMSprop: the running average of g^2 starts at 1 and eps is inside the square root."""
    s.setdefault("sq", 1.0)
    return ref_rmsprop(p, g, s, t, lr, eps_inside_sqrt=True, **options)


CASES = [
    (optim.SGD, ref_sgd, dict(lr=0.1)),
    (optim.SGD, ref_sgd, dict(lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.01)),
    (optim.SGD, ref_sgd, dict(lr=0.05, momentum=0.8, nesterov=True, maximize=True)),
    (optim.Adam, ref_adam, dict(lr=0.01)),
    (optim.Adam, ref_adam, dict(lr=0.02, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1, amsgrad=True)),
    (optim.Adam, ref_adam, dict(lr=0.01, maximize=True)),
    (optim.RMSprop, ref_rmsprop, dict(lr=0.01)),
    (optim.RMSprop, ref_rmsprop, dict(lr=0.01, alpha=0.9, centered=True, momentum=0.5, weight_decay=0.05)),
    (optim.RMSprop, ref_rmsprop, dict(lr=0.007, alpha=0.99, eps=0.1, eps_inside_sqrt=True)),
    (optim.RMSprop, ref_rmsprop, dict(lr=0.007, centered=True, eps=0.1, eps_inside_sqrt=True, maximize=True)),
    (optim.RMSpropTFLike, ref_rmsprop_tf, dict(lr=0.01)),
    (optim.RMSpropTFLike, ref_rmsprop_tf, dict(lr=0.007, alpha=0.9, eps=1e-5, centered=True, momentum=0.5)),
]


def make_net(pack):
    F.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4, dtype=F.float64), nn.Tanh(), nn.Linear(4, 2, dtype=F.float64))
    if pack:
        net.pack_parameters()
    return net


@pytest.mark.parametrize("pack", [False, True], ids=["per-parameter", "fused"])
@pytest.mark.parametrize("cls, ref, options", CASES, ids=[f"{c.__name__}-{i}" for i, (c, _, _) in enumerate(CASES)])
def test_update_rules(cls, ref, options, pack):
    net = make_net(pack)
    opt = cls(net.parameters(), **options)
    params = list(net.parameters())
    expected = [p.detach().numpy().copy() for p in params]
    states = [{} for _ in params]
    rng = np.random.default_rng(1)
    for t in range(1, 6):
        opt.zero_grad()
        grads = [rng.standard_normal(p.shape) for p in params]
        for p, g in zip(params, grads):
            p.grad = F.tensor(g)
        opt.step()
        expected = [ref(e, g, s, t, **options) for e, g, s in zip(expected, grads, states)]
        for p, e in zip(params, expected):
            np.testing.assert_allclose(p.detach().numpy(), e, rtol=1e-10, atol=1e-12)
    assert all(float(opt.state[p]["step"]) == 5 for p in params)


@pytest.mark.parametrize("betas", [(0.9, 0.999), (0.8, 0.9), (0.0, 0.99)])
def test_adams_floor_on_v_never_binds_in_one_process_even_at_the_largest_ratio_of_m_to_sqrt_v(betas):
    """Gradients growing as (b2 / b1)^k drive |m| / sqrt(v) towards its supremum (b1 = 0: any first step reaches
    it), the bound the lock-free floor uses: one process still steps as torch's rule does."""
    from framework.optim.adam import ratio_bound

    b1, b2 = betas
    param = F.zeros(3, dtype=F.float64, requires_grad=True)
    opt = optim.Adam([param], lr=0.01, betas=betas)
    expected, state, largest = np.zeros(3), {}, 0.0
    for t in range(1, 61):
        g = np.array([1.0, -1.0, 0.5]) * (b2 / b1 if b1 else 1.0) ** t
        param.grad = F.tensor(g)
        opt.step()
        expected = ref_adam(expected, g, state, t, lr=0.01, betas=betas)
        np.testing.assert_allclose(param.detach().numpy(), expected, rtol=1e-12, atol=0)
        largest = max(largest, np.abs(state["m"] / np.sqrt(state["v"])).max())
    assert largest > 0.95 * ratio_bound(b1, b2) / 1.001


def test_centered_rmsprop_steps_by_its_floor_when_a_lost_write_left_the_square_average_below_the_mean_squared():
    """A lock-free worker's write to the square average lost (reset to 0 here) while the gradient average kept it:
    torch's rule would take sqrt(s - mean(g)^2) of a negative number, a NaN step; the floor (1-alpha)/alpha
    (g - mean(g))^2, which one process's estimate never falls below, keeps the step finite."""
    from framework.optim.rmsprop import centered_floor

    alpha, lr, g = 0.9, 0.01, np.array([1.0, -2.0, 0.5])
    param = F.zeros(3, dtype=F.float64, requires_grad=True)
    opt = optim.RMSprop([param], lr=lr, alpha=alpha, centered=True)
    for _ in range(3):
        param.grad = F.tensor(g)
        opt.step()
    state = opt.state[param]
    state["square_avg"][...] = 0.0
    before = param.detach().numpy().copy()
    param.grad = F.tensor(g)
    opt.step()
    grad_avg = state["grad_avg"]
    assert np.all(state["square_avg"] < grad_avg ** 2), "the estimate torch's rule would take is negative"
    floor = (1 - alpha) / alpha * (g - grad_avg) ** 2
    np.testing.assert_allclose(centered_floor(g, grad_avg, alpha), floor)
    np.testing.assert_allclose(before - param.detach().numpy(), lr * g / (np.sqrt(floor) + 1e-8), rtol=1e-12)


def test_rmsprop_tf_like_starts_its_average_at_one_in_shared_memory_and_steps_gently():
    """The first step is about lr * g, where torch's RMSprop moves every parameter by about 10 * lr."""
    moved = {}
    for cls in (optim.RMSpropTFLike, optim.RMSprop):
        net = make_net(True)
        opt = cls(net.parameters(), lr=0.01).share_memory()
        before = net.arena.data.copy()
        for p in net.parameters():
            p.grad = F.full(p.shape, 1e-3, dtype=F.float64)
        if cls is optim.RMSpropTFLike:
            assert all(np.all(opt.state[p]["square_avg"] == 1.0) for p in net.parameters())
        opt.step()
        moved[cls] = np.abs(net.arena.data - before).max()
    assert moved[optim.RMSpropTFLike] == pytest.approx(0.01 * 1e-3 / np.sqrt(0.99 + 0.01 * 1e-6 + 1e-8))
    assert moved[optim.RMSprop] == pytest.approx(0.01 * 10, rel=1e-3)


def test_fused_path_is_used_for_an_arena_and_matches_a_backward_pass():
    a, b = make_net(False), make_net(True)
    opt_a, opt_b = optim.Adam(a.parameters(), lr=0.01), optim.Adam(b.parameters(), lr=0.01)
    assert opt_b._plan(0) is not None and opt_a._plan(0) is None
    x = F.ones(5, 3, dtype=F.float64)
    for _ in range(3):
        for net, opt in ((a, opt_a), (b, opt_b)):
            opt.zero_grad()
            (net(x) ** 2).sum().backward()
            opt.step()
    for pa, pb in zip(a.parameters(), b.parameters()):
        np.testing.assert_allclose(pa.detach().numpy(), pb.detach().numpy(), rtol=1e-12)


def test_plan_follows_packing_after_construction():
    net = make_net(False)
    opt = optim.SGD(net.parameters(), lr=0.1)
    assert opt._plan(0) is None
    net.share_memory()
    assert opt._plan(0) is not None
    sub = optim.SGD([net[0].weight, net[2].weight], lr=0.1)
    assert sub._plan(0) is None, "non-consecutive parameters take the per-parameter path"
    part = optim.SGD(list(net[2].parameters()), lr=0.1)
    plan = part._plan(0)
    assert (plan.start, plan.stop) == (16, 26)


def test_per_parameter_path_skips_params_without_grad_like_torch():
    net = make_net(False)
    opt = optim.Adam(net.parameters(), lr=0.1)
    before = net[0].weight.detach().numpy().copy()
    net[2].weight.grad = F.ones(2, 4, dtype=F.float64)
    opt.step()
    assert np.array_equal(net[0].weight.detach().numpy(), before)
    assert float(opt.state[net[0].weight]["step"]) == 0 and float(opt.state[net[2].weight]["step"]) == 1


def test_fused_step_reads_arena_grad_for_every_parameter():
    net = make_net(True)
    opt = optim.SGD(net.parameters(), lr=1.0)
    before = net.arena.data.copy()
    net.arena.grad[...] = 0.5  # e.g. a worker copying its local gradient into the shared model's buffer
    opt.step()
    np.testing.assert_allclose(net.arena.data, before - 0.5)


def test_state_is_created_in_the_constructor_and_shared_by_share_memory():
    net = make_net(True)
    opt = optim.Adam(net.parameters(), lr=0.01, amsgrad=True)
    state = opt.state[net[0].weight]
    assert sorted(state) == ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]
    assert state["exp_avg"].shape == (4, 3) and float(state["step"]) == 0 and not state["exp_avg"].any()
    assert opt.share_memory() is opt
    import sharing
    for p in net.parameters():
        assert all(sharing.is_shared(a) for a in opt.state[p].values())
    net.arena.grad[...] = 1.0
    opt.step()
    assert float(opt.state[net[2].bias]["step"]) == 1 and opt.state[net[0].weight]["exp_avg"].all()


def test_state_dict_structure_and_round_trip():
    net = make_net(True)
    opt = optim.RMSprop(net.parameters(), lr=0.01, momentum=0.9, centered=True)
    x = F.ones(2, 3, dtype=F.float64)
    for _ in range(2):
        opt.zero_grad()
        net(x).sum().backward()
        opt.step()
    sd = opt.state_dict()
    assert sorted(sd) == ["param_groups", "state"] and sorted(sd["state"]) == [0, 1, 2, 3]
    assert sorted(sd["state"][0]) == ["grad_avg", "momentum_buffer", "square_avg", "step"]
    assert isinstance(sd["state"][0]["square_avg"], np.ndarray) and float(sd["state"][0]["step"]) == 2
    assert sd["param_groups"][0]["params"] == [0, 1, 2, 3] and sd["param_groups"][0]["lr"] == 0.01
    copy_net = make_net(True)
    copy_net.load_state_dict(net.state_dict())
    resumed = optim.RMSprop(copy_net.parameters(), lr=0.5, momentum=0.9, centered=True)
    resumed.load_state_dict(sd)
    assert resumed.param_groups[0]["lr"] == 0.01
    for model, o in ((net, opt), (copy_net, resumed)):
        o.zero_grad()
        model(x).sum().backward()
        o.step()
    for pa, pb in zip(net.parameters(), copy_net.parameters()):
        np.testing.assert_allclose(pa.detach().numpy(), pb.detach().numpy(), rtol=1e-12)


def test_sgd_state_dict_mirrors_torch():
    net = make_net(False)
    plain = optim.SGD(net.parameters(), lr=0.1)
    momentum = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    assert plain.state_dict()["state"] == {} and momentum.state_dict()["state"] == {}
    for p in net.parameters():
        p.grad = F.ones(p.shape, dtype=F.float64)
    momentum.step()
    sd = momentum.state_dict()
    assert sorted(sd["state"][0]) == ["momentum_buffer"]
    fresh = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    fresh.load_state_dict(sd)
    before = net[0].weight.detach().numpy().copy()
    fresh.step()  # continues the loaded buffer: 0.9 * 1 + 1
    np.testing.assert_allclose(net[0].weight.detach().numpy(), before - 0.1 * 1.9)


def test_load_state_dict_errors_name_the_problem():
    net = make_net(False)
    opt = optim.Adam(net.parameters())
    sd = opt.state_dict()
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        opt.load_state_dict({"state": {}})
    with pytest.raises(ValueError, match="doesn't match the size"):
        optim.Adam(list(net.parameters())[:2]).load_state_dict(sd)
    bad = {"state": {0: dict(sd["state"][0], exp_avg=np.zeros((2, 2)))}, "param_groups": sd["param_groups"]}
    with pytest.raises(ValueError, match=r"state\[0\]\['exp_avg'\] has shape \(2, 2\)"):
        opt.load_state_dict(bad)
    odd = {"state": {1: {"momentum_buffer": np.zeros(4)}}, "param_groups": sd["param_groups"]}
    with pytest.raises(KeyError, match="does not keep"):
        opt.load_state_dict(odd)


@pytest.mark.parametrize("call, message", [
    (lambda p: optim.SGD(p, lr=-1), "Invalid learning rate"),
    (lambda p: optim.SGD(p, nesterov=True), "Nesterov momentum requires"),
    (lambda p: optim.Adam(p, betas=(1.0, 0.9)), "beta parameter at index 0"),
    (lambda p: optim.Adam(p, eps=-1), "Invalid epsilon"),
    (lambda p: optim.RMSprop(p, momentum=-0.1), "Invalid momentum"),
    (lambda p: optim.Adam([]), "empty parameter list"),
    (lambda p: optim.Adam(p[0]), "iterable of Tensors"),
    (lambda p: optim.Adam([p[0], p[0]]), "more than once"),
    (lambda p: optim.Adam([p[0] * 2]), "non-leaf"),
    (lambda p: optim.Adam([np.zeros(2)]), "can only optimize Tensors"),
])
def test_bad_options_are_refused(call, message):
    params = list(make_net(False).parameters())
    with pytest.raises((ValueError, TypeError), match=message):
        call(params)


def test_param_groups_closure_and_zero_grad():
    net = make_net(False)
    opt = optim.SGD([{"params": net[0].parameters()}, {"params": net[2].parameters(), "lr": 1.0}], lr=0.0)
    assert [g["lr"] for g in opt.param_groups] == [0.0, 1.0]
    w0, w2 = net[0].weight.detach().numpy().copy(), net[2].weight.detach().numpy().copy()

    def closure():
        opt.zero_grad()
        loss = net(F.ones(1, 3, dtype=F.float64)).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert loss.requires_grad
    assert np.array_equal(net[0].weight.detach().numpy(), w0) and not np.array_equal(net[2].weight.detach().numpy(), w2)
    opt.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    assert "Parameter Group 1" in repr(opt)


# ---- clipping ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pack", [False, True])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_clip_grad_norm(pack, norm_type):
    net = make_net(pack)
    grads = [np.random.default_rng(i).standard_normal(p.shape) for i, p in enumerate(net.parameters())]
    for p, g in zip(net.parameters(), grads):
        p.grad = F.tensor(g)
    flat = np.concatenate([g.ravel() for g in grads])
    total = np.linalg.norm(flat, ord=norm_type)
    returned = nn.utils.clip_grad_norm_(net.parameters(), max_norm=0.5, norm_type=norm_type)
    assert returned.item() == pytest.approx(total, rel=1e-9)
    clipped = np.concatenate([p.grad.numpy().ravel() for p in net.parameters()])
    np.testing.assert_allclose(clipped, flat * 0.5 / (total + 1e-6), rtol=1e-9)
    unchanged = optim.clip_grad_norm_(net.parameters(), max_norm=100.0, norm_type=norm_type)
    assert unchanged.item() == pytest.approx(0.5, rel=1e-5)


def test_clip_grad_norm_edge_cases():
    assert optim.clip_grad_norm_([F.ones(2, requires_grad=True)], 1.0).item() == 0.0
    t = F.ones(2, requires_grad=True)
    t.grad = F.tensor([np.inf, 1.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        optim.clip_grad_norm_(t, 1.0, error_if_nonfinite=True)
    with pytest.raises(ValueError, match="norm_type must be positive"):
        optim.clip_grad_norm_(t, 1.0, norm_type=0)


# ---- learning-rate schedule --------------------------------------------------------------------------------
def test_linear_lr_matches_torch_schedule():
    net = make_net(False)
    opt = optim.SGD(net.parameters(), lr=0.1)
    sched = LinearLR(opt, start_factor=1.0, end_factor=0.0, total_iters=4)
    seen = [opt.param_groups[0]["lr"]]
    for _ in range(6):
        opt.step()
        sched.step()
        seen.append(sched.get_last_lr()[0])
    np.testing.assert_allclose(seen, [0.1, 0.075, 0.05, 0.025, 0.0, 0.0, 0.0], atol=1e-15)
    default = LinearLR(optim.SGD(net.parameters(), lr=0.3))
    assert default.get_last_lr()[0] == pytest.approx(0.1)
    state = sched.state_dict()
    other = LinearLR(optim.SGD(net.parameters(), lr=0.1), start_factor=1.0, end_factor=0.0, total_iters=4)
    other.load_state_dict(state)
    assert other.last_epoch == 6
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        LinearLR(opt, start_factor=0.0)
    with pytest.raises(ValueError, match="total_iters must be a positive int"):
        LinearLR(opt, total_iters=0)
    with pytest.raises(KeyError, match="initial_lr"):
        LinearLR(optim.SGD(net.parameters(), lr=0.1), last_epoch=3)
