"""Child-process bodies for the GPU training tests (importable by spawned children)."""
from __future__ import annotations

from typing import Any

from framework.device import use_device

TIMEOUT = 120


def step_then_watch(device: str, model: Any, optimizer: Any, inbox: Any, outbox: Any) -> None:
    """As a worker does: make the device current, step the shared optimizer once with a gradient of ones,
    report the sum of the parameters it sees; then, when told, report that sum again."""
    use_device(device)
    arena = model.arena
    arena.grad[...] = 1.0
    optimizer.step()
    outbox.put((arena.device, float(arena.data.sum())))
    inbox.get(timeout=TIMEOUT)
    outbox.put(float(arena.data.sum()))
