"""Fixtures for the CUDA IPC tests: GPU tests skip without a device; the others leave the guard as they found it."""
from __future__ import annotations

from typing import Iterator

import pytest

import cuda_ipc
from cuda_ipc import guard, limbo


@pytest.fixture(autouse=True)
def _gpu_or_skip(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("gpu") and not cuda_ipc.is_available():
        pytest.skip("needs CuPy and a CUDA device: cuda_ipc.is_available() is False here")


@pytest.fixture(autouse=True)
def _guard_state(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    # Host-backend sends pass the guard as CUDA ones do, which marks this process as a CUDA
    # user; undo that after each CPU test so later forks in the session are not refused.
    if request.node.get_closest_marker("gpu") is None:
        monkeypatch.setattr(guard, "_initialised_pid", guard._initialised_pid)


@pytest.fixture
def drained(monkeypatch: pytest.MonkeyPatch) -> Iterator[limbo.Limbo]:
    """A fresh limbo for this process during the test, checked to hold no sent block once it is over.

    It is dropped afterwards, with its reference-count file, so no shared memory stays live in the session.
    """
    monkeypatch.setattr(limbo, "_limbo", limbo.Limbo())
    yield limbo.current()
    cuda_ipc.ipc_collect()
    assert len(limbo.current()) == 0, "blocks sent during the test were never released by their consumers"
