"""The global random number generator behind randn, rand, parameter init and sampling.

One `numpy.random.Generator` per process, seeded like torch's default
generator until `manual_seed` reseeds it. Samplers return raw arrays on the
requested device, drawn from that device's generator; CuPy keeps one per
device. Like torch's CUDA seeding, `manual_seed` only remembers the seed for
CUDA: a device's generator is seeded on this process's first draw there after
it, so seeding never imports CuPy nor touches CUDA in a process that does not
use a CUDA device (a CPU worker, a forked child, a machine with CuPy and no
driver).
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Sequence

import numpy as np

from .device import cupy_module, on_device

DEFAULT_SEED = 67280421310721  # torch's default seed
_state: dict[str, Any] = {"generator": np.random.default_rng(DEFAULT_SEED), "seed": DEFAULT_SEED,
                          "cuda_seed": None, "cuda_seeded": set()}


def manual_seed(seed: int) -> np.random.Generator:
    """Reseed the global generator, and every CUDA device's at its next draw here; returns the generator."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"manual_seed expects an int, got {type(seed).__name__} {seed!r}")
    seed = int(seed)
    if seed < 0:
        raise ValueError(f"manual_seed expects a non-negative int, got {seed}")
    _state["generator"] = np.random.default_rng(seed)
    _state["seed"] = seed
    _state["cuda_seed"] = seed % 2**63
    _state["cuda_seeded"] = set()
    return _state["generator"]


def initial_seed() -> int:
    """The seed the global generator was last seeded with."""
    return _state["seed"]


def generator() -> np.random.Generator:
    """The global NumPy generator (the one every sampler in framework draws from)."""
    return _state["generator"]


def _cuda_random(device: str) -> ModuleType:
    """cupy.random, with `device`'s generator seeded first if manual_seed was called since its last draw here.

    Call with `device` current (CuPy seeds the current device's generator).
    """
    cupy = cupy_module()
    seed = _state["cuda_seed"]
    if seed is not None and device not in _state["cuda_seeded"]:
        cupy.random.seed(seed)
        _state["cuda_seeded"].add(device)
    return cupy.random


def standard_normal(shape: Sequence[int], dtype: np.dtype, device: str = "cpu") -> Any:
    """Samples of N(0, 1) as an array of `shape` and floating `dtype` on `device`."""
    if device != "cpu":
        with on_device(device):
            return _cuda_random(device).standard_normal(shape, dtype=dtype)
    if dtype in (np.float32, np.float64):
        return _state["generator"].standard_normal(shape, dtype=dtype)
    return _state["generator"].standard_normal(shape).astype(dtype)


def uniform(shape: Sequence[int], dtype: np.dtype, low: float = 0.0, high: float = 1.0, device: str = "cpu") -> Any:
    """Samples of U[low, high) as an array of `shape` and floating `dtype` on `device`."""
    if device != "cpu":
        with on_device(device):
            return _cuda_random(device).uniform(low, high, shape).astype(dtype)
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
            return _cuda_random(device).randint(low, high, shape, dtype=np.int64)
    return _state["generator"].integers(low, high, shape, dtype=np.int64)
