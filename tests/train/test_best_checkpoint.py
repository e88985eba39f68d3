"""`trainer.keep_best`: checkpoints/best.npz holds the parameters of the best evaluation, which load_policy and
`evaluate --checkpoint best` take (real runs, the checkpoint read back with the checkpoint reader)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from framework.train import CheckpointError, ConfigError, load_policy, read_checkpoint
from framework.train.checkpoint import load_checkpoint, save_checkpoint
from framework.train.config import load_config
from framework.train.policy import load_trained
from run_configs import cartpole_config, hogwild_config
from train_cli import events, only_run_dir, run_cli, snapshot, summary, write_config

KEEP_BEST = {"eval_every_s": 0.1, "eval_episodes": 5, "keep_best": True}


@pytest.fixture(scope="module")
def best_run(tmp_path_factory):
    """A finished CartPole run with keep_best and an evaluation every 0.1 s (a few dozen in its 40,000 steps); treat it as read-only."""
    logdir = tmp_path_factory.mktemp("best")
    config = write_config(logdir.parent / "best.yaml", cartpole_config(total_steps=40_000, trainer=KEEP_BEST))
    done = run_cli("train", "--config", config, "--logdir", logdir)
    assert done.returncode == 0, done.stderr
    return only_run_dir(logdir)


def _best_part(run_dir):
    return load_checkpoint(run_dir / "checkpoints" / "best.npz")


def test_the_best_checkpoint_holds_the_best_evaluation_and_what_it_played(best_run):
    saved = _best_part(best_run)
    returns = [e.value for e in events(best_run).Scalars("eval/return_mean")]
    assert len(returns) >= 2
    assert saved["evaluation"]["return_mean"] == pytest.approx(max(returns))
    recorded = summary(best_run)["best_checkpoint"]
    assert recorded == {"checkpoint": "checkpoints/best.npz", "env_steps": saved["run"]["env_steps"],
                        **saved["evaluation"]}
    # the parameters are those the evaluation played: evaluating them again gives its numbers exactly
    config, algorithm, model = load_trained(best_run, checkpoint="best")
    again = algorithm.evaluate(model, config, config["trainer"]["eval_episodes"], config["seed"])
    assert again.metrics == saved["evaluation"]


def test_load_policy_and_evaluate_take_the_best_checkpoint(best_run, tmp_path):
    best = read_checkpoint(best_run, checkpoint="best")
    policy = load_policy(best_run, checkpoint="best")
    for name, value in policy.model.state_dict().items():
        assert np.array_equal(value.numpy(), best[name]), name
    latest = read_checkpoint(best_run)
    assert any(not np.array_equal(latest[n], best[n]) for n in best) or summary(best_run)["best_checkpoint"][
        "env_steps"] == summary(best_run)["env_steps"]
    done = run_cli("evaluate", "--run", best_run, "--checkpoint", "best", "--episodes", "5", "--seed", "1")
    assert done.returncode == 0, done.stderr
    from framework.runtime.formatting import significant
    assert done.stdout.startswith(f"return over 5 greedy episodes: "
                                  f"{significant(_best_part(best_run)['evaluation']['return_mean'])} ± ")
    exported = run_cli("evaluate", "--run", best_run, "--checkpoint", "best", "--export", tmp_path / "best.safetensors")
    assert exported.returncode == 0, exported.stderr
    from safetensors.numpy import load_file
    assert np.array_equal(load_file(str(tmp_path / "best.safetensors"))["body.0.weight"], best["body.0.weight"])


def test_the_train_outcome_names_the_best_checkpoint(tmp_path):
    config = write_config(tmp_path / "c.yaml", cartpole_config(total_steps=3000, trainer=KEEP_BEST))
    done = run_cli("train", "--config", config, "--logdir", tmp_path / "runs")
    assert done.returncode == 0, done.stderr
    run_dir = only_run_dir(tmp_path / "runs")
    assert f"      evaluate --run {run_dir} --checkpoint best\n" in done.stdout


def test_a_run_without_a_best_checkpoint_is_refused_in_one_line(finished_run):
    done = run_cli("evaluate", "--run", finished_run, "--checkpoint", "best")
    assert done.returncode == 2
    assert done.stderr == (f"evaluate: error: run '{finished_run}' has no best checkpoint (checkpoints/best.npz); "
                           f"allowed: a run trained with trainer.keep_best: true and trainer.eval_every_s > 0, once "
                           f"it evaluated\n")
    with pytest.raises(CheckpointError, match="has no best checkpoint"):
        load_policy(finished_run, checkpoint="best")
    with pytest.raises(ConfigError, match=r"^checkpoint: got 'newest'; allowed: latest or best$"):
        load_policy(finished_run, checkpoint="newest")
    wrong = run_cli("evaluate", "--run", finished_run, "--checkpoint", "newest")
    assert wrong.returncode == 2 and "argument --checkpoint: invalid choice: 'newest'" in wrong.stderr


@pytest.mark.parametrize("config, message", [
    (cartpole_config(trainer={"keep_best": True}),
     "config key 'trainer.keep_best': got true with trainer.eval_every_s 0 (no evaluation); allowed: false, or set "
     "trainer.eval_every_s > 0"),
    (hogwild_config(trainer={"keep_best": True}),
     "config key 'trainer.keep_best': got true; allowed: false for algorithm hogwild, whose evaluations have no mean "
     "return"),
])
def test_keep_best_without_evaluations_of_a_return_is_refused(config, message):
    with pytest.raises(ConfigError) as refused:
        load_config(config)
    assert str(refused.value) == message
    assert load_config(cartpole_config())["trainer"]["keep_best"] is False


def _set_best_return(run_dir, value):
    path = run_dir / "checkpoints" / "best.npz"
    state = load_checkpoint(path)
    state["evaluation"]["return_mean"] = value
    save_checkpoint(path, state)


def test_a_resumed_run_keeps_its_best_checkpoint_until_an_evaluation_beats_it(best_run, tmp_path):
    unbeatable = shutil.copytree(best_run, tmp_path / "unbeatable")
    _set_best_return(unbeatable, 1e9)
    before = (unbeatable / "checkpoints" / "best.npz").read_bytes()
    done = run_cli("train", "--resume", unbeatable, "--set", "trainer.total_steps=60000")
    assert done.returncode == 0, done.stderr
    assert (unbeatable / "checkpoints" / "best.npz").read_bytes() == before
    assert summary(unbeatable)["best_checkpoint"]["return_mean"] == 1e9

    beaten = shutil.copytree(best_run, tmp_path / "beaten")
    _set_best_return(beaten, -1e9)
    done = run_cli("train", "--resume", beaten, "--set", "trainer.total_steps=60000")
    assert done.returncode == 0, done.stderr
    assert _best_part(beaten)["evaluation"]["return_mean"] > 0
    assert summary(beaten)["best_checkpoint"]["env_steps"] > summary(best_run)["env_steps"]


def test_an_unreadable_best_checkpoint_is_said_and_replaced(best_run, tmp_path):
    run_dir = shutil.copytree(best_run, tmp_path / "run")
    (run_dir / "checkpoints" / "best.npz").write_bytes(b"not a checkpoint")
    done = run_cli("train", "--resume", run_dir, "--set", "trainer.total_steps=60000")
    assert done.returncode == 0, done.stderr
    assert f"checkpoint '{run_dir / 'checkpoints' / 'best.npz'}' is truncated or corrupt" in done.stderr
    assert "the next evaluation writes a new best checkpoint" in done.stderr
    assert _best_part(run_dir)["evaluation"]["return_mean"] > 0


def test_a_refused_resume_leaves_the_best_checkpoint_alone(best_run, tmp_path):
    run_dir = shutil.copytree(best_run, tmp_path / "run")
    before = snapshot(run_dir)
    done = run_cli("train", "--resume", run_dir, "--set", "trainer.keep_best=maybe")
    assert done.returncode == 2 and snapshot(run_dir) == before
