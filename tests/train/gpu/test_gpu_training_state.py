"""What the trainer and the workers do with device arrays, on the CPU and on cuda:0: checkpoints copy the shared
model and optimizer state to the host and load back onto the device; clipping, the fused optimizer steps and
sampling work on the device's arrays."""
import numpy as np
import pytest

import framework
from framework import nn, optim
from framework.train.checkpoint import load_checkpoint, save_checkpoint
from framework.device import device_of, to_host
from framework.distributions import Categorical, Normal
from framework.optim.clip import grad_norm
from framework.train.run_checkpoint import load_model_state, model_state

pytestmark = pytest.mark.timeout(120)

OPTIMIZERS = {
    "adam": lambda params: optim.Adam(params, lr=0.01, amsgrad=True),
    "rmsprop": lambda params: optim.RMSprop(params, lr=0.01, momentum=0.9, centered=True),
    "sgd": lambda params: optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True),
}


def _packed(device, seed, make_optimizer):
    framework.manual_seed(seed)
    model = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2)).to(device)
    model.pack_parameters()
    return model, make_optimizer(model.parameters())


def _step(model, optimizer, gradient):
    model.arena.grad[...] = framework.tensor(gradient, device=model.arena.device).data_array
    optimizer.step()


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_checkpoint_goes_to_the_host_and_resumes_onto_the_device(tmp_path, device, name):
    gradients = np.random.default_rng(1).standard_normal((3, 32)).astype(np.float32)
    model, optimizer = _packed(device, 0, OPTIMIZERS[name])
    for g in gradients[:2]:
        _step(model, optimizer, g)
    state = {"model": model_state(model), "optimizer": optimizer.state_dict()}
    arrays = [*state["model"].values(), *(a for e in state["optimizer"]["state"].values() for a in e.values())]
    assert arrays and all(isinstance(a, np.ndarray) for a in arrays)
    path = tmp_path / "checkpoint.npz"
    save_checkpoint(path, state)

    saved = load_checkpoint(path)
    resumed, resumed_optimizer = _packed(device, 1, OPTIMIZERS[name])  # other initial values, overwritten
    load_model_state(resumed, saved["model"], path)
    resumed_optimizer.load_state_dict(saved["optimizer"])
    assert resumed.arena.device == device
    assert all(device_of(s) == device for entry in resumed_optimizer.state.values() for s in entry.values())
    _step(model, optimizer, gradients[2])
    _step(resumed, resumed_optimizer, gradients[2])
    np.testing.assert_allclose(to_host(resumed.arena.data), to_host(model.arena.data), rtol=1e-6, atol=1e-7)


def test_gradient_norm_and_clipping_on_the_device(device):
    model, _ = _packed(device, 0, OPTIMIZERS["sgd"])
    grad = np.arange(32, dtype=np.float32) - 10
    model.arena.grad[...] = framework.tensor(grad, device=device).data_array
    assert grad_norm(model.arena.grad) == pytest.approx(float(np.linalg.norm(grad)), rel=1e-6)
    assert np.isnan(grad_norm(framework.tensor([1.0, np.nan], device=device).data_array))
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    assert total.device == device and total.item() == pytest.approx(float(np.linalg.norm(grad)), rel=1e-6)
    assert grad_norm(model.arena.grad) == pytest.approx(1.0, rel=1e-4)


def test_sampling_on_the_device(device):
    framework.manual_seed(0)
    probs = np.array([0.2, 0.3, 0.5])
    logits = framework.tensor(np.log(np.tile(probs, (4, 1))), device=device)
    samples = Categorical(logits=logits).sample((5000,))
    assert samples.device == device and samples.dtype == np.int64 and samples.shape == (5000, 4)
    counts = np.bincount(to_host(samples.data_array).ravel(), minlength=3)
    np.testing.assert_allclose(counts / counts.sum(), probs, atol=0.02)

    normal = Normal(framework.tensor([1.0, -2.0], device=device), framework.tensor([0.5, 2.0], device=device))
    draws = normal.sample((20000,))
    assert draws.device == device and draws.shape == (20000, 2)
    host = to_host(draws.data_array)
    np.testing.assert_allclose(host.mean(axis=0), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(host.std(axis=0), [0.5, 2.0], rtol=0.05)
    assert normal.log_prob(draws).device == device and normal.entropy().device == device
