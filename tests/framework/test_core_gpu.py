"""CUDA tensors (CuPy): the same values and gradients as on the CPU, packed modules, and transfer to a child."""
from __future__ import annotations

import numpy as np
import pytest

import cuda_ipc
import framework as F
import sharing
from framework import nn, optim
from framework.distributions import Categorical

import core_workers

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(180)]


@pytest.fixture(autouse=True)
def _gpu_or_skip() -> None:
    if not cuda_ipc.is_available():
        pytest.skip("needs CuPy and a CUDA device: cuda_ipc.is_available() is False here")


def test_ops_and_gradients_match_the_cpu():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    results = []
    for device in ("cpu", "cuda:0"):
        x = F.tensor(a, device=device, requires_grad=True)
        w = F.tensor(b, device=device, requires_grad=True)
        y = F.log_softmax(F.tanh(x @ w), axis=1).sum() + (x ** 2).mean()
        y.backward()
        assert x.device == device and x.grad.device == device
        results.append((y.item(), x.grad.cpu().numpy(), w.grad.cpu().numpy()))
    (y0, gx0, gw0), (y1, gx1, gw1) = results
    assert y0 == pytest.approx(y1, rel=1e-10)
    np.testing.assert_allclose(gx0, gx1, rtol=1e-10)
    np.testing.assert_allclose(gw0, gw1, rtol=1e-10)
    assert F.zeros(2, device="cuda").device == "cuda:0" and F.randn(3, device="cuda:0").is_cuda
    with pytest.raises(TypeError, match="Tensor.cpu"):
        F.ones(2, device="cuda").numpy()


def test_packed_module_steps_on_the_device_like_on_the_cpu():
    F.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    gpu = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    gpu.load_state_dict(cpu.state_dict())
    gpu.to("cuda:0")
    for model in (cpu, gpu):
        model.pack_parameters()
    assert gpu.arena.device == "cuda:0"
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    for model in (cpu, gpu):
        opt = optim.Adam(model.parameters(), lr=0.01)
        device = model.arena.device
        for _ in range(3):
            opt.zero_grad()
            logits = model(F.tensor(x, device=device))
            dist = Categorical(logits=logits)
            (-dist.log_prob(F.tensor([0, 1, 0, 1, 1], device=device)).mean()).backward()
            opt.step()
    np.testing.assert_allclose(gpu.arena.data.get(), cpu.arena.data, rtol=1e-4, atol=1e-6)


def test_cuda_tensor_travels_as_a_view_of_device_memory():
    t = F.zeros(8, device="cuda:0")
    ctx = sharing.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=core_workers.fill_cuda, args=(inbox, outbox))
    child.start()
    inbox.put(t)
    assert outbox.get(timeout=core_workers.TIMEOUT) == "cuda:0"
    child.join(core_workers.TIMEOUT)
    assert child.exitcode == 0
    assert t.cpu().numpy().tolist() == [4.0] * 8
