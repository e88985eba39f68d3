"""Every way into CUDA from framework passes the start-method guard: in a child forked after its parent used
CUDA, each one raises the guard's error naming spawn and forkserver (before any CUDA call), while CPU work,
seeding included, goes on. Runs on the CPU: the guard decides before CuPy is even imported."""
from __future__ import annotations

import os
from typing import Any, Callable

import pytest

import framework as F
import sharing
from cuda_ipc import guard
from framework.device import use_device

pytestmark = pytest.mark.timeout(60)

ENTRIES: dict[str, Callable[[], Any]] = {
    "zeros": lambda: F.zeros(2, device="cuda"),
    "ones": lambda: F.ones(2, device="cuda:0"),
    "empty": lambda: F.empty(2, device="cuda"),
    "full": lambda: F.full((2,), 1.0, device="cuda"),
    "arange": lambda: F.arange(3, device="cuda"),
    "tensor": lambda: F.tensor([1.0], device="cuda"),
    "as_tensor": lambda: F.as_tensor([1.0], device="cuda"),
    "randn": lambda: F.randn(2, device="cuda"),
    "rand": lambda: F.rand(2, device="cuda"),
    "randint": lambda: F.randint(0, 3, (2,), device="cuda"),
    "to": lambda: F.ones(2).to("cuda"),
    "cuda": lambda: F.ones(2).cuda(),
    "module.to": lambda: F.nn.Linear(2, 2).to("cuda:0"),
    "use_device": lambda: use_device("cuda:0"),
}


def _try_everything(report: Any) -> None:
    outcomes = {}
    for name, entry in ENTRIES.items():
        try:
            entry()
            outcomes[name] = "allowed"
        except RuntimeError as error:
            outcomes[name] = str(error)
    F.manual_seed(1)
    outcomes["cpu"] = float(F.randn(3).sum().item())
    report.put(outcomes)


def test_a_forked_child_gets_the_guards_error_from_every_cuda_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "_initialised_pid", os.getpid())  # as after this process's first CUDA use
    F.manual_seed(0)
    context = sharing.get_context("fork")
    report = context.SimpleQueue()
    child = context.Process(target=_try_everything, args=(report,))
    child.start()
    outcomes = report.get()
    child.join(30)
    assert child.exitcode == 0
    cpu = outcomes.pop("cpu")
    assert sorted(outcomes) == sorted(ENTRIES)
    refused = {name: "forked" in text and "'spawn'" in text and "'forkserver'" in text
               for name, text in outcomes.items()}
    assert all(refused.values()), {name: outcomes[name] for name, ok in refused.items() if not ok}
    F.manual_seed(1)
    assert cpu == float(F.randn(3).sum().item())
