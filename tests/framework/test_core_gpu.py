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


def test_shared_arena_and_optimizer_state_get_device_allocations_of_their_own():
    from cuda_ipc.cupy_backend import cupy_backend
    from cuda_ipc.segments import SEGMENT_BYTES

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to("cuda:0").share_memory()
    opt = optim.Adam(model.parameters(), lr=0.01).share_memory()
    for array in [model.arena.data, *opt._flats[0].values()]:
        located = cupy_backend().locate(array)
        assert (located.offset, located.base_size) == (0, SEGMENT_BYTES)
    arena = model.arena.data
    assert all(arena.data.ptr <= p.data_array.data.ptr < arena.data.ptr + arena.nbytes for p in model.parameters())
    model(F.ones(3, 4, device="cuda:0")).sum().backward()
    opt.step()
    assert opt._plan(0) is not None, "the parameters still are the arena's views, so the step is fused"


def test_the_optimizer_works_on_the_parameters_device_whichever_is_current():
    import cupy

    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two CUDA devices")
    model = nn.Linear(4, 2).to("cuda:1")
    opt = optim.Adam(model.parameters(), lr=0.01)
    with cupy.cuda.Device(1):
        model(F.ones(3, 4, device="cuda:1")).sum().backward()
    with cupy.cuda.Device(0):  # a current device the parameters are not on
        optim.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    assert opt._scratch[0].device.id == 1
    assert {a.device.id for a in opt._flats[0].values()} == {1}


def test_compiled_actor_critic_step_on_the_device_equals_eager():
    """framework.compile replays on CuPy arrays: the A3C loss and its gradients as eager computes them."""
    from framework import compiler
    from compile_models import ActorCritic, a3c_loss, grads_of, rollout
    compiler.reset()
    F.manual_seed(0)
    model = ActorCritic(hidden=64).to("cuda:0")
    loss = a3c_loss(model)
    compiled = F.compile(loss)
    data = [t.to("cuda:0") for t in rollout(32)]
    params = list(model.parameters())
    expected = grads_of(params, lambda: loss(*data))
    for _ in range(3):
        for got, want in zip(grads_of(params, lambda: compiled(*data)), expected):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert compiler.counters["captures"] == 1 and compiler.counters["graph_breaks"] == 0
    compiler.reset()
