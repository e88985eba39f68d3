"""Real runs with the shared model on `trainer.device` (CPU, and cuda:0 when there is one): 2 spawn workers
update it, the main process evaluates, logs histograms and checkpoints it, and a resumed run loads it back."""
import numpy as np
import pytest

from framework.train.checkpoint import load_checkpoint
from gpu_training_helpers import a3c_config, event_tags, hogwild_config
from train_cli import run_cli, summary, train

pytestmark = pytest.mark.timeout(240)


def _checkpoint(run_dir):
    return load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")


def _resume(run_dir, total_steps, *overrides):
    sets = [item for value in (f"trainer.total_steps={total_steps}", *overrides) for item in ("--set", value)]
    return run_cli("train", "--resume", run_dir, *sets)


def _moved(before: dict, after: dict) -> bool:
    return any(not np.array_equal(before[name], after[name]) for name in before)


def test_a3c_trains_checkpoints_and_resumes_on_the_device(tmp_path, device):
    done, run_dir = train(tmp_path, a3c_config(device, total_steps=3000))
    assert done.returncode == 0, done.stderr
    first = summary(run_dir)
    assert first["stop_reason"] == "total_steps reached" and first["exit_code"] == 0, first
    assert first["updates"] > 0 and first["skipped_updates"] == 0 and first["episodes"] > 0
    saved = _checkpoint(run_dir)
    assert all(isinstance(v, np.ndarray) for v in saved["model"].values())
    assert saved["model"]["pi.weight"].shape == (2, 32) and saved["run"]["updates"] == first["updates"]
    tags = event_tags(run_dir)  # evaluation and histograms read the shared model from the main process
    assert "eval/return_mean" in tags["scalars"] and "params/pi.weight" in tags["histograms"]

    done = _resume(run_dir, 6000)
    assert done.returncode == 0, done.stderr
    second = summary(run_dir)
    assert second["env_steps"] >= 6000 and second["updates"] > first["updates"], second
    resumed = _checkpoint(run_dir)
    assert _moved(saved["model"], resumed["model"])  # the workers went on updating the loaded parameters
    steps = [int(entry["step"]) for entry in resumed["optimizer"]["state"].values()]
    assert min(steps) > int(saved["optimizer"]["state"][0]["step"])  # and the loaded Adam state

    done = run_cli("evaluate", "--run", run_dir, "--episodes", "2")  # on the CPU, from the host checkpoint
    assert done.returncode == 0, done.stderr
    assert "return over 2 greedy episodes" in done.stdout

    if device != "cpu":  # the host checkpoint of a GPU run continues on the CPU
        done = _resume(run_dir, 8000, "trainer.device=cpu")
        assert done.returncode == 0, done.stderr
        assert summary(run_dir)["updates"] > second["updates"]


def test_hogwild_trains_checkpoints_and_resumes_on_the_device(tmp_path, device):
    done, run_dir = train(tmp_path, hogwild_config(device, total_steps=20_000))
    assert done.returncode == 0, done.stderr
    first = summary(run_dir)
    assert first["stop_reason"] == "total_steps reached" and first["exit_code"] == 0, first
    assert first["env_steps"] == 64 * first["updates"] and first["skipped_updates"] == 0
    assert first["evaluation"]["test_accuracy"] > 0.2  # chance is 0.1
    saved = _checkpoint(run_dir)

    done = _resume(run_dir, 40_000)
    assert done.returncode == 0, done.stderr
    second = summary(run_dir)
    assert second["updates"] > first["updates"] and second["evaluation"]["test_accuracy"] > 0.2, second
    resumed = _checkpoint(run_dir)
    assert _moved(saved["model"], resumed["model"])
