"""The shared model as the trainer sets it up (moved to the device, packed, shared, with its optimizer) and as a
spawned worker receives it: both processes see one copy of the parameters and of the optimizer state."""
import numpy as np
import pytest

import framework
import sharing
from framework import nn, optim
from framework.device import to_host, use_device

from gpu_training_children import TIMEOUT, step_then_watch

pytestmark = pytest.mark.timeout(180)


def _shared_model(device):
    framework.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).to(device).share_memory()
    optimizer = optim.Adam(model.parameters(), lr=0.01)
    optimizer.share_memory()
    return model, optimizer


def test_a_workers_update_is_seen_by_the_main_process_and_back(device):
    use_device(device)
    model, optimizer = _shared_model(device)
    assert model.arena.device == device and model.arena.is_shared()
    before = to_host(model.arena.data, copy=True)
    context = sharing.get_context("spawn")
    inbox, outbox = context.Queue(), context.Queue()
    child = context.Process(target=step_then_watch, args=(device, model, optimizer, inbox, outbox))
    child.start()
    try:
        seen_device, seen_sum = outbox.get(timeout=TIMEOUT)
        after = to_host(model.arena.data)
        # Adam's first step with a gradient of ones moves every parameter by -lr (to within eps)
        np.testing.assert_allclose(after, before - 0.01, atol=1e-6)
        assert seen_device == device and seen_sum == pytest.approx(float(after.sum()), rel=1e-5)
        assert float(optimizer.state[model[0].weight]["step"]) == 1.0  # the state the worker stepped is ours

        model.arena.grad[...] = -1.0  # the main process steps the same state: the worker sees the result
        optimizer.step()
        expected = float(to_host(model.arena.data).sum())
        inbox.put("look")
        assert outbox.get(timeout=TIMEOUT) == pytest.approx(expected, rel=1e-5)
        assert float(optimizer.state[model[2].bias]["step"]) == 2.0
    finally:
        child.join(TIMEOUT)
    assert child.exitcode == 0
