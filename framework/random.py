"""The global random number generator behind randn, rand, parameter init and sampling.

One `numpy.random.Generator` per process, seeded like torch's default
generator until `manual_seed` reseeds it (CuPy's generator too, when CuPy is
loaded; it keeps one generator per device). Samplers return raw arrays on
the requested device, drawn from that device's generator.
"""
from __future__ import annotations

import sys
from typing import Any, Sequence

import numpy as np

from .device import cupy_module, on_device

DEFAULT_SEED = 67280421310721  # torch's default seed
_state = {"generator": np.random.default_rng(DEFAULT_SEED), "seed": DEFAULT_SEED}


def manual_seed(seed: int) -> np.random.Generator:
    """Reseed the global generator (and CuPy's, when loaded); returns the generator."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"manual_seed expects an int, got {type(seed).__name__} {seed!r}")
    seed = int(seed)
    if seed < 0:
        raise ValueError(f"manual_seed expects a non-negative int, got {seed}")
    _state["generator"] = np.random.default_rng(seed)
    _state["seed"] = seed
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        cupy.random.seed(seed % 2**63)
    return _state["generator"]


def initial_seed() -> int:
    """The seed the global generator was last seeded with."""
    return _state["seed"]


def generator() -> np.random.Generator:
    """The global NumPy generator (the one every sampler in framework draws from)."""
    return _state["generator"]


def standard_normal(shape: Sequence[int], dtype: np.dtype, device: str = "cpu") -> Any:
    """Samples of N(0, 1) as an array of `shape` and floating `dtype` on `device`."""
    if device != "cpu":
        with on_device(device):
            return cupy_module().random.standard_normal(shape, dtype=dtype)
    if dtype in (np.float32, np.float64):
        return _state["generator"].standard_normal(shape, dtype=dtype)
    return _state["generator"].standard_normal(shape).astype(dtype)


def uniform(shape: Sequence[int], dtype: np.dtype, low: float = 0.0, high: float = 1.0, device: str = "cpu") -> Any:
    """Samples of U[low, high) as an array of `shape` and floating `dtype` on `device`."""
    if device != "cpu":
        with on_device(device):
            return cupy_module().random.uniform(low, high, shape).astype(dtype)
    if dtype in (np.float32, np.float64):
        out = _state["generator"].random(shape, dtype=dtype)
    else:
        out = _state["generator"].random(shape).astype(dtype)
    if low != 0.0 or high != 1.0:
        out *= high - low
        out += low
    return out


def integers(low: int, high: int, shape: Sequence[int], device: str = "cpu") -> Any:
    """Uniform int64 samples from [low, high) on `device`."""
    if device != "cpu":
        with on_device(device):
            return cupy_module().random.randint(low, high, shape, dtype=np.int64)
    return _state["generator"].integers(low, high, shape, dtype=np.int64)
