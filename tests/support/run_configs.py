"""Small training configs shared by the test folders that run the real `train` command."""
from __future__ import annotations


def with_sections(config: dict, sections: dict) -> dict:
    """`config` with each section in `sections` merged in (a dict updates its keys, anything else replaces it)."""
    for name, values in sections.items():
        if isinstance(values, dict):
            config.setdefault(name, {}).update(values)
        else:
            config[name] = values
    return config


def cartpole_config(*, experiment: str = "test", seed: int = 1, total_steps: int = 20_000, max_seconds: float = 60,
                    log_every_s: float = 0.2, **sections) -> dict:
    """A3C on CartPole for a few seconds: 2 forked workers, a small model, no progress bar; sections override keys."""
    config = {
        "experiment": experiment,
        "seed": seed,
        "env": {"id": "CartPole-v1", "envs_per_worker": 4},
        "model": {"hidden": [32]},
        "algorithm": {"name": "a3c", "n_steps": 10},
        "optimizer": {"name": "adam", "lr": 0.003},
        "trainer": {"workers": 2, "start_method": "fork", "total_steps": total_steps, "max_seconds": max_seconds,
                    "target_return": None, "checkpoint_every_s": 30, "join_timeout_s": 10},
        "logging": {"progress": False, "log_every_s": log_every_s},
    }
    return with_sections(config, sections)


def hogwild_config(**sections: dict) -> dict:
    """A small hogwild config (MLP on a reduced mnist_teacher task, forked workers); sections update keys."""
    base = {
        "experiment": "hw",
        "seed": 3,
        "dataset": {"kind": "mnist_teacher", "train_size": 8000, "test_size": 1000},
        "model": {"hidden": [32]},
        "algorithm": {"name": "hogwild", "batch_size": 64},
        "optimizer": {"name": "sgd", "lr": 0.1},
        "trainer": {"workers": 2, "start_method": "fork", "total_steps": 10_000_000, "max_seconds": 60,
                    "eval_every_s": 0.5, "checkpoint_every_s": 30},
        "logging": {"progress": False, "log_every_s": 0.2},
    }
    return with_sections(base, sections)
