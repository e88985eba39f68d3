"""Fixtures of the training-system tests: one short finished run, copied by each test that changes it."""
import shutil
from pathlib import Path

import pytest

from run_configs import cartpole_config
from train_cli import only_run_dir, run_cli, write_config


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory) -> Path:
    """A short finished CartPole run (2000 env steps); treat it as read-only."""
    logdir = tmp_path_factory.mktemp("finished")
    config = write_config(logdir.parent / "finished.yaml", cartpole_config(trainer={"total_steps": 2000}))
    done = run_cli("train", "--config", config, "--logdir", logdir)
    assert done.returncode == 0, done.stderr
    return only_run_dir(logdir)


@pytest.fixture
def run_copy(finished_run, tmp_path) -> Path:
    """A copy of finished_run for one test."""
    return shutil.copytree(finished_run, tmp_path / finished_run.name)
