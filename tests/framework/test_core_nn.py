"""Modules: layers' shapes, layouts, values and init; registration, naming, state_dict, modes."""
from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest

import framework as F
from framework import nn
from framework.nn import functional as Fn
from framework.nn import init


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
        self.pi = nn.Linear(8, 2)
        self.v = nn.Linear(8, 1, bias=False)
        self.scale = nn.Parameter(F.ones(2))
        self.register_buffer("count", F.zeros(1))
        self.register_buffer("scratch", F.zeros(1), persistent=False)

    def forward(self, x):
        h = self.body(x)
        return self.pi(h) * self.scale, self.v(h)


# ---- layers -------------------------------------------------------------------------------------------
def test_linear_layout_values_and_init_bounds():
    F.manual_seed(0)
    layer = nn.Linear(50, 30)
    assert layer.weight.shape == (30, 50) and layer.bias.shape == (30,)
    bound = 1 / math.sqrt(50)
    assert np.abs(layer.weight.detach().numpy()).max() <= bound
    assert np.abs(layer.weight.detach().numpy()).max() > 0.8 * bound
    assert np.abs(layer.bias.detach().numpy()).max() <= bound
    x = np.random.default_rng(0).standard_normal((3, 50)).astype(np.float32)
    expected = x @ layer.weight.detach().numpy().T + layer.bias.detach().numpy()
    np.testing.assert_allclose(layer(F.tensor(x)).detach().numpy(), expected, rtol=1e-5, atol=1e-6)
    assert layer(F.tensor(x[0])).shape == (30,)
    with pytest.raises(ValueError, match="in_features must be a positive int"):
        nn.Linear(0, 3)
    with pytest.raises(ValueError, match="expects 50"):
        layer(F.zeros(2, 3))


def test_conv2d_layout_and_values_against_direct_loops():
    F.manual_seed(1)
    conv = nn.Conv2d(2, 3, kernel_size=3, stride=2, padding=1)
    assert conv.weight.shape == (3, 2, 3, 3) and conv.bias.shape == (3,)
    assert np.abs(conv.weight.detach().numpy()).max() <= 1 / math.sqrt(18)
    x = np.random.default_rng(1).standard_normal((2, 2, 7, 6)).astype(np.float32)
    out = conv(F.tensor(x)).detach().numpy()
    assert out.shape == (2, 3, 4, 3)
    w, b = conv.weight.detach().numpy(), conv.bias.detach().numpy()
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    expected = np.zeros_like(out)
    for n in range(2):
        for o in range(3):
            for i in range(4):
                for j in range(3):
                    expected[n, o, i, j] = (padded[n, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3] * w[o]).sum() + b[o]
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    assert conv(F.tensor(x[0])).shape == (3, 4, 3)
    frames = np.random.default_rng(2).integers(0, 256, (2, 2, 7, 6), dtype=np.uint8)  # integer input: as floats
    np.testing.assert_allclose(conv(F.tensor(frames)).detach().numpy(),
                               conv(F.tensor(frames.astype(np.float32))).detach().numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="groups=1"):
        nn.Conv2d(2, 2, 3, groups=2)
    with pytest.raises(ValueError, match="does not fit input with 5 channels"):
        conv(F.zeros(1, 5, 7, 7))
    with pytest.raises(ValueError, match="expected input of shape"):
        conv(F.zeros(7, 7))


def test_max_pool2d_values():
    x = F.arange(16, dtype=F.float32).reshape(1, 1, 4, 4)
    assert nn.MaxPool2d(2)(x).numpy().reshape(-1).tolist() == [5.0, 7.0, 13.0, 15.0]
    assert F.max_pool2d(x, 3, stride=1).shape == (1, 1, 2, 2)
    assert F.max_pool2d(x, 2, padding=1).numpy().reshape(-1).tolist() == [0.0, 2.0, 3.0, 8.0, 10.0, 11.0, 12.0,
                                                                        14.0, 15.0]
    with pytest.raises(ValueError, match="at most half the kernel"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match="kernel_size must be"):
        nn.MaxPool2d(0)


def test_lstm_cell_layout_gate_order_and_values():
    F.manual_seed(2)
    cell = nn.LSTMCell(3, 4)
    names = [n for n, _ in cell.named_parameters()]
    assert names == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    assert cell.weight_ih.shape == (16, 3) and cell.weight_hh.shape == (16, 4) and cell.bias_hh.shape == (16,)
    assert max(np.abs(p.detach().numpy()).max() for p in cell.parameters()) <= 0.5
    rng = np.random.default_rng(2)
    x, h, c = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3), (2, 4), (2, 4)))
    h1, c1 = cell(F.tensor(x), (F.tensor(h), F.tensor(c)))
    p = {n: t.detach().numpy() for n, t in cell.named_parameters()}
    gates = x @ p["weight_ih"].T + p["bias_ih"] + h @ p["weight_hh"].T + p["bias_hh"]
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    i, f, g, o = sig(gates[:, :4]), sig(gates[:, 4:8]), np.tanh(gates[:, 8:12]), sig(gates[:, 12:])
    c_ref = f * c + i * g
    np.testing.assert_allclose(c1.detach().numpy(), c_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h1.detach().numpy(), o * np.tanh(c_ref), rtol=1e-5, atol=1e-6)
    with F.no_grad():  # the raw-array path for acting
        for ours, theirs in zip(cell(F.tensor(x), (F.tensor(h), F.tensor(c))), (h1, c1)):
            np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-6)
        assert cell(F.tensor(x[0]), (F.tensor(h[0]), F.tensor(c[0])))[1].shape == (4,)
    h0, c0 = cell(F.tensor(x))
    assert h0.shape == (2, 4) and cell(F.tensor(x[0]))[0].shape == (4,)
    with pytest.raises(ValueError, match=r"expected h and c of shape \(2, 4\)"):
        cell(F.tensor(x), (F.zeros(1, 4), F.zeros(1, 4)))


def test_lstm_unroll_equals_stepping_the_cell():
    F.manual_seed(3)
    cell = nn.LSTMCell(5, 4)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 3, 5)).astype(np.float32)
    keep = (rng.random((6, 3)) > 0.3).astype(np.float32)
    state = (F.zeros(3, 4), F.zeros(3, 4))
    expected = []
    for t in range(6):
        mask = F.tensor(keep[t][:, None])
        state = cell(F.tensor(x[t]), (state[0] * mask, state[1] * mask))
        expected.append(state[0].detach().numpy())
    np.testing.assert_allclose(cell.unroll(F.tensor(x), keep=keep).detach().numpy(), np.stack(expected),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cell.unroll(F.tensor(x)).detach().numpy()[0], expected[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"expected input of shape \(steps, batch, 5\)"):
        cell.unroll(F.tensor(x[0]))


def test_activation_and_flatten_modules():
    x = F.tensor([[-1.0, 0.5], [2.0, -3.0]])
    assert nn.ReLU()(x).numpy().tolist() == [[0.0, 0.5], [2.0, 0.0]]
    np.testing.assert_allclose(nn.Tanh()(x).numpy(), np.tanh(x.numpy()))
    np.testing.assert_allclose(nn.Sigmoid()(x).numpy(), 1 / (1 + np.exp(-x.numpy())), rtol=1e-6)
    np.testing.assert_allclose(nn.ELU(0.5)(x).numpy(), np.where(x.numpy() > 0, x.numpy(), 0.5 * np.expm1(x.numpy())),
                               rtol=1e-6)
    np.testing.assert_allclose(nn.Softplus()(x).numpy(), np.log1p(np.exp(x.numpy())), rtol=1e-6)
    np.testing.assert_allclose(nn.Softmax(axis=1)(x).numpy().sum(axis=1), [1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(np.exp(nn.LogSoftmax(axis=0)(x).numpy()).sum(axis=0), [1.0, 1.0], rtol=1e-6)
    assert nn.Identity()(x) is x
    assert nn.Flatten()(F.zeros(2, 3, 4)).shape == (2, 12) and nn.Flatten(0)(F.zeros(2, 3)).shape == (6,)
    assert F.softplus(F.tensor([30.0]), beta=1.0).item() == 30.0  # linear above the threshold
    assert F.sigmoid(F.tensor([-200.0, 200.0])).numpy().tolist() == [0.0, 1.0]


def test_losses_values():
    x = F.tensor([[1.0, 2.0], [3.0, 5.0]])
    y = F.tensor([[1.0, 1.0], [1.0, 1.0]])
    assert Fn.mse_loss(x, y).item() == pytest.approx((0 + 1 + 4 + 16) / 4)
    assert Fn.mse_loss(x, y, reduction="sum").item() == 21.0
    assert Fn.smooth_l1_loss(x, y).item() == pytest.approx((0 + 0.5 + 1.5 + 3.5) / 4)
    logits = np.array([[1.0, 2.0, 0.5], [0.1, 0.2, 3.0]], np.float32)
    target = np.array([1, 2])
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    assert Fn.cross_entropy(F.tensor(logits), F.tensor(target)).item() == pytest.approx(
        -logp[[0, 1], target].mean(), rel=1e-6)
    assert Fn.nll_loss(F.tensor(logp), F.tensor(target), reduction="none").shape == (2,)
    with pytest.raises(ValueError, match="reduction must be one of"):
        Fn.mse_loss(x, y, reduction="avg")
    with pytest.raises(IndexError, match=r"class indices in \[0, 3\)"):
        Fn.nll_loss(F.tensor(logp), F.tensor([0, 3]))
    with pytest.raises(TypeError, match="integer class indices"):
        Fn.nll_loss(F.tensor(logp), F.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="target shape"):
        Fn.mse_loss(x, F.zeros(3))


# ---- init ---------------------------------------------------------------------------------------------
def test_init_schemes():
    F.manual_seed(3)
    w = F.empty(200, 100)
    init.xavier_uniform_(w, gain=2.0)
    assert np.abs(w.numpy()).max() <= 2.0 * math.sqrt(6 / 300)
    init.xavier_normal_(w)
    assert abs(w.numpy().std() - math.sqrt(2 / 300)) < 0.01
    init.kaiming_normal_(w, nonlinearity="relu")
    assert abs(w.numpy().std() - math.sqrt(2 / 100)) < 0.01
    init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu")
    assert np.abs(w.numpy()).max() <= math.sqrt(6 / 200)
    q = F.empty(6, 4)
    init.orthogonal_(q, gain=1.5)
    np.testing.assert_allclose(q.numpy().T @ q.numpy(), 2.25 * np.eye(4), atol=1e-5)
    wide = F.empty(3, 2, 2)
    init.orthogonal_(wide)
    flat = wide.numpy().reshape(3, 4)
    np.testing.assert_allclose(flat @ flat.T, np.eye(3), atol=1e-5)
    assert init.constant_(F.empty(2), 0.3).numpy().tolist() == pytest.approx([0.3, 0.3])
    assert init.zeros_(F.ones(2)).numpy().sum() == 0 and init.ones_(F.zeros(2)).numpy().sum() == 2
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    with pytest.raises(ValueError, match="unsupported nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(F.empty(3))
    with pytest.raises(ValueError, match="mode 'fan' not supported"):
        init.kaiming_uniform_(w, mode="fan")


def test_init_is_seeded():
    F.manual_seed(7)
    a = nn.Linear(3, 3).weight.detach().numpy().copy()
    F.manual_seed(7)
    assert np.array_equal(a, nn.Linear(3, 3).weight.detach().numpy())


# ---- Module -------------------------------------------------------------------------------------------
def test_registration_and_names_follow_torch():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["scale", "body.0.weight", "body.0.bias", "pi.weight", "pi.bias", "v.weight"]
    assert list(net.state_dict()) == ["scale", "count", "body.0.weight", "body.0.bias", "pi.weight", "pi.bias",
                                      "v.weight"]
    assert [n for n, _ in net.named_buffers()] == ["count", "scratch"]
    assert [n for n, _ in net.named_children()] == ["body", "pi", "v"]
    assert [n for n, _ in net.named_modules()] == ["", "body", "body.0", "body.1", "pi", "v"]
    assert len(list(net.parameters(recurse=False))) == 1
    shared = nn.Linear(2, 2)
    twice = nn.Sequential(shared, shared)
    assert len(list(twice.parameters())) == 2  # each parameter once
    logits, value = net(F.zeros(5, 4))
    assert logits.shape == (5, 2) and value.shape == (5, 1)
    assert "Linear(in_features=8, out_features=2, bias=True)" in repr(net)


def test_attribute_rules():
    net = Net()
    with pytest.raises(TypeError, match="cannot assign ndarray as parameter 'scale'"):
        net.scale = np.ones(2)
    with pytest.raises(TypeError, match="child module 'pi'"):
        net.pi = 3
    net.pi = None
    assert "pi.weight" not in dict(net.named_parameters())
    del net.v
    assert "v.weight" not in net.state_dict()

    class Forgot(nn.Module):
        def __init__(self):
            self.layer = nn.Linear(1, 1)
    with pytest.raises(AttributeError, match=r"super\(\).__init__\(\)"):
        Forgot()
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(1)
    with pytest.raises(KeyError, match="already exists"):
        net.register_buffer("training", F.zeros(1))


def test_state_dict_round_trip_shares_storage_and_loads_in_place():
    F.manual_seed(0)
    a, b = Net(), Net()
    sd = a.state_dict()
    assert all(not t.requires_grad for t in sd.values())
    assert np.shares_memory(sd["pi.weight"].numpy(), a.pi.weight.data_array)
    weight_before = b.pi.weight
    result = b.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert b.pi.weight is weight_before
    for key, value in a.state_dict().items():
        assert np.array_equal(value.numpy(), b.state_dict()[key].numpy())
    b.load_state_dict({k: v.numpy().astype(np.float64) for k, v in sd.items()})  # arrays and casts are fine


def test_state_dict_errors_name_the_key():
    net = Net()
    sd = OrderedDict((k, v.numpy().copy()) for k, v in net.state_dict().items())
    bad = dict(sd, **{"pi.weight": np.zeros((3, 8))})
    with pytest.raises(RuntimeError, match=r"size mismatch for pi.weight: copying a param with shape \(3, 8\)"):
        net.load_state_dict(bad)
    missing = {k: v for k, v in sd.items() if k != "v.weight"}
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "v.weight"'):
        net.load_state_dict(missing)
    extra = dict(sd, extra=np.zeros(1))
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "extra"'):
        net.load_state_dict(extra)
    result = net.load_state_dict(dict(missing, extra=np.zeros(1)), strict=False)
    assert result.missing_keys == ["v.weight"] and result.unexpected_keys == ["extra"]
    with pytest.raises(TypeError, match="expected a mapping"):
        net.load_state_dict([1, 2])


def test_train_eval_zero_grad_requires_grad_apply_and_to():
    net = Net()
    assert net.training and not net.eval().training and not net.body[0].training
    assert net.train().body[1].training
    with pytest.raises(ValueError, match="boolean"):
        net.train("yes")
    out = net(F.ones(1, 4))[0].sum()
    out.backward()
    assert net.pi.weight.grad is not None
    net.zero_grad(set_to_none=False)
    assert net.pi.weight.grad.numpy().sum() == 0
    net.zero_grad()
    assert net.pi.weight.grad is None
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    visited = []
    net.apply(lambda m: visited.append(type(m).__name__))
    assert visited[-1] == "Net" and visited.count("Linear") == 3
    weight = net.pi.weight
    net.double()
    assert net.pi.weight is weight and weight.dtype == np.float64 and net.count.dtype == np.float64
    assert net.to(F.float32).pi.weight.dtype == np.float32 and net.cpu() is net
    with pytest.raises(TypeError, match="floating point dtypes"):
        net.to(F.int64)


def test_sequential_and_module_list():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[1], nn.ReLU) and isinstance(seq[-1], nn.Linear)
    assert len(seq[:2]) == 2 and seq(F.zeros(4, 2)).shape == (4, 1)
    named = nn.Sequential(OrderedDict([("first", nn.Linear(2, 2)), ("act", nn.Tanh())]))
    assert [n for n, _ in named.named_parameters()] == ["first.weight", "first.bias"]
    seq.append(nn.Sigmoid())
    assert len(list(iter(seq))) == 4
    with pytest.raises(IndexError, match="out of range"):
        seq[9]
    layers = nn.ModuleList([nn.Linear(1, 1)]).append(nn.Linear(1, 2)).extend([nn.Linear(2, 2)])
    assert len(layers) == 3 and layers[1].out_features == 2
    assert [n for n, _ in layers.named_parameters()][:2] == ["0.weight", "0.bias"]
    assert len(list(layers)) == 3
