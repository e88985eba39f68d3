"""End to end: small MLPs trained with the framework's own optimizers fit XOR and a regression target."""
from __future__ import annotations

import numpy as np
import pytest

import framework as F
from framework import nn, optim
from framework.nn import functional as Fn


@pytest.mark.timeout(60)
@pytest.mark.parametrize("pack", [False, True], ids=["per-parameter", "arena"])
def test_mlp_fits_xor(pack):
    F.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
    if pack:
        net.pack_parameters()
    opt = optim.Adam(net.parameters(), lr=0.05)
    x = F.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    y = F.tensor([0, 1, 1, 0])
    for _ in range(300):
        opt.zero_grad()
        loss = Fn.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    assert net(x).argmax(axis=1).numpy().tolist() == [0, 1, 1, 0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make_opt", [lambda p: optim.SGD(p, lr=0.05, momentum=0.9),
                                      lambda p: optim.RMSprop(p, lr=0.005)], ids=["sgd", "rmsprop"])
def test_mlp_fits_a_regression_target(make_opt):
    F.manual_seed(1)
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, (256, 1)).astype(np.float32)
    y = np.sin(2 * x) + 0.5 * x
    net = nn.Sequential(nn.Linear(1, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1)).share_memory()
    opt = make_opt(net.parameters())
    xt, yt = F.from_numpy(x), F.from_numpy(y)
    first = None
    for _ in range(600):
        opt.zero_grad()
        loss = Fn.mse_loss(net(xt), yt)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 5.0)
        opt.step()
        first = loss.item() if first is None else first
    assert loss.item() < 0.02 < first
