"""Helpers for the hogwild tests: small configs and the real `train`/`evaluate` commands in a subprocess."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from run_configs import with_sections
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

BIN = Path(sys.executable).parent
CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def config(**sections: dict) -> dict:
    """A small hogwild config (MLP on a reduced mnist_teacher task, forked workers); sections update keys."""
    base = {
        "experiment": "hw",
        "seed": 3,
        "dataset": {"kind": "mnist_teacher", "train_size": 8000, "test_size": 1000},
        "model": {"hidden": [32]},
        "algorithm": {"name": "hogwild", "batch_size": 64},
        "optimizer": {"name": "sgd", "lr": 0.1},
        "trainer": {"workers": 2, "start_method": "fork", "total_steps": 10_000_000, "max_seconds": 60,
                    "target_return": None, "eval_every_s": 0.5, "checkpoint_every_s": 30},
        "logging": {"progress": False, "log_every_s": 0.2},
    }
    return with_sections(base, sections)


def run_cli(command: str, *args: Any, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run an installed console script (`train`, `evaluate`) and wait for it."""
    return subprocess.run([str(BIN / command), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def train(tmp_path: Path, cfg: dict, *extra: str) -> tuple[subprocess.CompletedProcess, Path | None]:
    """Write cfg, run `train` on it in tmp_path/runs; (the process, its run directory or None)."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    logdir = tmp_path / "runs"
    done = run_cli("train", "--config", path, "--logdir", logdir, *extra)
    runs = sorted(p for p in logdir.iterdir() if p.is_dir()) if logdir.exists() else []
    return done, (runs[-1] if runs else None)


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def scalars(run_dir: Path, tag: str) -> list[float]:
    """The values of one TensorBoard scalar series of a run, in order."""
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return [event.value for event in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []
