"""The `device` fixture: every test here runs on the CPU and, marked `gpu`, on cuda:0 (skipped without one)."""
from __future__ import annotations

import pytest

import cuda_ipc


@pytest.fixture(params=["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)])
def device(request: pytest.FixtureRequest) -> str:
    """'cpu', or 'cuda:0' when CuPy sees a CUDA device (skipped with the reason otherwise)."""
    if request.param != "cpu" and not cuda_ipc.is_available():
        pytest.skip("needs CuPy and a CUDA device: cuda_ipc.is_available() is False here")
    return request.param
