"""Helpers for the GPU training tests: small configs and the real `train`/`evaluate` commands."""
from __future__ import annotations

from pathlib import Path

from train_cli import events


def a3c_config(device: str, total_steps: int) -> dict:
    """A3C on CartPole with 2 spawn workers on `device`; evaluation and histograms often, so they run too."""
    return {
        "experiment": "gpu-a3c",
        "seed": 2,
        "env": {"id": "CartPole-v1", "envs_per_worker": 4},
        "model": {"hidden": [32]},
        "algorithm": {"name": "a3c", "n_steps": 10},
        "optimizer": {"name": "adam", "lr": 0.003},
        "trainer": {"workers": 2, "start_method": "spawn", "device": device, "total_steps": total_steps,
                    "max_seconds": 90, "target_return": None, "checkpoint_every_s": 30, "eval_every_s": 0.3,
                    "eval_episodes": 2},
        "logging": {"progress": False, "log_every_s": 0.2, "histogram_every": 10},
    }


def hogwild_config(device: str, total_steps: int) -> dict:
    """Hogwild on a small mnist_teacher task with 2 spawn workers sharing one Adam state on `device`."""
    return {
        "experiment": "gpu-hogwild",
        "seed": 3,
        "dataset": {"kind": "mnist_teacher", "train_size": 4000, "test_size": 1000},
        "model": {"hidden": [32]},
        "algorithm": {"name": "hogwild", "batch_size": 64, "optimizer_state": "shared"},
        "optimizer": {"name": "adam", "lr": 0.003},
        "trainer": {"workers": 2, "start_method": "spawn", "device": device, "total_steps": total_steps,
                    "max_seconds": 90, "checkpoint_every_s": 30},
        "logging": {"progress": False, "log_every_s": 0.2},
    }


def event_tags(run_dir: Path) -> dict[str, list[str]]:
    """The TensorBoard tags of a run directory, by kind (scalars, histograms, ...)."""
    return events(run_dir).Tags()
