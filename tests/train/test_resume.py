"""What `--resume` may change (applied) and may not (refused, naming the key), optimizer options over saved state,
the run directory's lock, and the temp files a killed write left."""
import fcntl
import os
import re

import numpy as np
import pytest
import yaml

from framework import algorithms
from framework.train import resume
from framework.train.run_checkpoint import load_optimizer_state
from framework.train.checkpoint import CheckpointError, load_checkpoint
from framework.train.config import ConfigError, validate
from framework.train.run_dir import NewRunDir, RunError, write_atomically
from train_cli import run_cli, scalars, snapshot


def _checkpoint(run_dir):
    return load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")


def test_optimizer_options_set_on_resume_apply_to_the_rest_of_the_run(run_copy):
    before = _checkpoint(run_copy)
    saved_steps = float(before["optimizer"]["state"][0]["step"])
    done = run_cli("train", "--resume", run_copy, "--set", "optimizer.eps=0.5", "--set", "optimizer.betas=[0.5,0.6]",
                   "--set", "optimizer.weight_decay=0.1", "--set", "optimizer.lr=0.0005", "--set",
                   f"trainer.total_steps={before['run']['env_steps'] + 2000}")
    assert done.returncode == 0, done.stderr
    after = _checkpoint(run_copy)
    [group] = after["optimizer"]["param_groups"]
    assert (group["eps"], group["betas"], group["weight_decay"], group["lr"]) == (0.5, [0.5, 0.6], 0.1, 0.0005)
    assert float(after["optimizer"]["state"][0]["step"]) > saved_steps  # the saved moments and counts went on
    assert yaml.safe_load((run_copy / "config.yaml").read_text())["optimizer"]["eps"] == 0.5


@pytest.mark.parametrize("override, key", [
    ("model.hidden=[64]", "model.hidden"), ("model.activation=tanh", "model.activation"),
    ("optimizer.name=sgd", "optimizer.name"), ("env.id=Acrobot-v1", "env.id"),
    ("env.kwargs={max_episode_steps: 10}", "env.kwargs.max_episode_steps"), ("experiment=other", "experiment"),
    ("logging.logdir=/tmp/elsewhere", "logging.logdir"),
])
def test_changes_a_resume_cannot_make_are_refused_naming_the_key(run_copy, override, key):
    before = snapshot(run_copy)
    done = run_cli("train", "--resume", run_copy, "--set", override)
    assert done.returncode == 2, done.stderr
    assert re.match(rf"train: error: config key '{re.escape(key)}': got .* on --resume; allowed: .*, what the run "
                    rf"was trained with", done.stderr), done.stderr
    assert done.stderr.count("\n") == 1
    assert snapshot(run_copy) == before


def test_check_changes_allows_everything_else():
    trained = validate({})
    resumed = validate({"seed": 7, "trainer": {"workers": 3, "total_steps": 10, "start_method": "fork"},
                        "algorithm": {"gamma": 0.9}, "env": {"envs_per_worker": 2, "vectorize": False},
                        "optimizer": {"lr": 0.1, "momentum": 0.5, "lr_decay": "linear"},
                        "logging": {"tensorboard": False}})
    resume.check_changes(trained, resumed)
    with pytest.raises(ConfigError, match="'optimizer.name'"):
        resume.check_changes(trained, validate({"optimizer": {"name": "rmsprop"}}))


def _sgd(momentum: float):
    config = validate({"optimizer": {"name": "sgd", "momentum": momentum}})
    algo = algorithms.get("a3c")
    model = algo.build_model(config)
    return algo.build_optimizer(model, config)


def test_momentum_turned_off_drops_the_saved_buffers_and_another_optimizer_is_refused(tmp_path):
    trained = _sgd(0.9)
    for entry in trained.state.values():
        entry["momentum_buffer"][...] = 1.0
        entry["step"][...] = 5
    saved = trained.state_dict()
    resumed = _sgd(0.0)
    assert load_optimizer_state(resumed, saved, tmp_path / "c.npz") == ["momentum_buffer"]
    assert resumed.param_groups[0]["momentum"] == 0.0  # the config's option, not the checkpoint's
    with_momentum = _sgd(0.5)
    assert load_optimizer_state(with_momentum, saved, tmp_path / "c.npz") == []
    assert with_momentum.param_groups[0]["momentum"] == 0.5
    assert all(np.all(entry["momentum_buffer"] == 1.0) for entry in with_momentum.state.values())
    adam = algorithms.get("a3c").build_optimizer(algorithms.get("a3c").build_model(validate({})), validate({}))
    with pytest.raises(CheckpointError, match="holds the state of another kind of optimizer .*; allowed: the state "
                                              "of a Adam optimizer"):
        load_optimizer_state(adam, saved, tmp_path / "c.npz")


def test_a_run_directory_in_use_is_not_resumed(run_copy):
    before = snapshot(run_copy)
    fd = os.open(run_copy, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # what a train running in it holds
    try:
        done = run_cli("train", "--resume", run_copy)
    finally:
        os.close(fd)
    assert done.returncode == 2
    assert done.stderr == (f"train: error: run directory '{run_copy}' is in use by another train process; allowed: "
                           f"a run directory no train is running in\n")
    assert snapshot(run_copy) == before


def test_temp_files_of_unfinished_writes_are_removed_when_the_run_resumes(run_copy):
    leftovers = [run_copy / "checkpoints" / ".checkpoint.npz.k3v9q2.tmp", run_copy / ".summary.json.x1.tmp"]
    for leftover in leftovers:
        leftover.write_bytes(b"half a write")
    steps = _checkpoint(run_copy)["run"]["env_steps"]
    done = run_cli("train", "--resume", run_copy, "--set", f"trainer.total_steps={steps + 1000}")
    assert done.returncode == 0, done.stderr
    for leftover in leftovers:
        assert not leftover.exists()
        assert f"removed '{leftover.relative_to(run_copy)}', left by a write that never finished" in done.stderr
    assert sorted(os.listdir(run_copy / "checkpoints")) == ["checkpoint.npz"]


def test_a_new_run_directory_that_cannot_be_filled_is_removed_with_the_parents_made_for_it(tmp_path):
    made = NewRunDir(tmp_path / "a" / "b", "exp")
    assert made.path.parent == tmp_path / "a" / "b" and made.path.name.startswith("exp-")
    with pytest.raises(OSError):
        write_atomically(made.path / "missing" / "config.yaml", lambda f: f.write(b"x"))
    made.remove()
    assert os.listdir(tmp_path) == []
    with pytest.raises(RunError, match=r"cannot create a run directory in '.*file/runs': Not a directory"):
        (tmp_path / "file").write_text("")
        NewRunDir(tmp_path / "file" / "runs", "exp")


def test_a_resumed_run_counts_only_the_episodes_it_plays(run_copy):
    """The restored episode total must not be read back as returns (zeros in the window: a negative target, as
    Acrobot's or Pendulum's, would be met at once)."""
    done = run_cli("train", "--resume", run_copy, "--set", "trainer.total_steps=8000",
                   "--set", "trainer.target_return=null")
    assert done.returncode == 0, done.stderr
    assert min(scalars(run_copy, "episode/return_min")) >= 8  # a CartPole episode lasts at least 8 steps
    assert min(scalars(run_copy, "episode/return_window_mean")) >= 8
