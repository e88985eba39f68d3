"""Run directories written before the training system moved to framework/train (and before the algorithms owned
their config sections) still resume and evaluate: their config.yaml holds keys such as env and model.lstm for a
Hogwild run, and their checkpoints the same arrays and metadata."""
import shutil
from pathlib import Path

import pytest
import yaml

from train_cli import run_cli, summary

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "legacy_runs"


def _overshoot_bound(config: dict) -> int:
    """At most this many steps past total_steps: one rollout (a3c) or one batch (hogwild) per worker."""
    per_worker = (config["algorithm"]["batch_size"] if config["algorithm"]["name"] == "hogwild"
                  else config["env"]["envs_per_worker"] * config["algorithm"]["n_steps"])
    return config["trainer"]["workers"] * per_worker


@pytest.mark.parametrize("algorithm", ["a3c", "hogwild"])
def test_a_run_directory_from_before_the_move_resumes_and_evaluates(tmp_path, algorithm):
    run_dir = tmp_path / algorithm
    shutil.copytree(FIXTURES / algorithm, run_dir)
    before = summary(run_dir)
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert "lstm" in config["model"] and "env" in config  # as the old layout wrote them, for hogwild too
    done = run_cli("train", "--resume", run_dir, "--set", f"trainer.total_steps={before['env_steps'] + 3000}",
                   "--set", "trainer.start_method=fork", "--set", "logging.progress=false")
    assert done.returncode == 0, done.stderr
    after = summary(run_dir)
    assert after["stop_reason"] == "total_steps reached"
    assert before["env_steps"] + 3000 <= after["env_steps"] <= before["env_steps"] + 3000 + _overshoot_bound(config)
    assert after["updates"] > before["updates"]
    done = run_cli("evaluate", "--run", run_dir, "--episodes", "2")
    assert done.returncode == 0, done.stderr
    assert ("return over 2 greedy episodes" if algorithm == "a3c" else "test accuracy") in done.stdout
