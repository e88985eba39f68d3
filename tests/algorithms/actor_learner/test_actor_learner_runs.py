"""IMPALA and APPO from the command line: the shipped configs reach CartPole's target, the buffer's waits and drops
are in TensorBoard, actors and learners that die holding trajectory slots are restarted and the slots come back,
runs resume and evaluate."""
import os

import pytest

from run_configs import cartpole_config
from train_cli import CHECKOUT, cli_env, run_cli, scalars, summary, train

CONFIGS = CHECKOUT / "configs"


def _config(name: str = "impala", total_steps: int = 20_000, **algorithm) -> dict:
    return cartpole_config(total_steps=total_steps, algorithm={"name": name, "n_steps": 10, **algorithm})


@pytest.mark.parametrize("config", ["impala.yaml", "appo.yaml"])
def test_the_shipped_actor_learner_configs_reach_cartpoles_target(tmp_path, config):
    done = run_cli("train", "--config", CONFIGS / config, "--logdir", tmp_path, "--set", "trainer.max_seconds=90",
                   "--set", "logging.progress=false", timeout=180)
    assert done.returncode == 0, done.stderr
    run_dir = next(tmp_path.iterdir())
    result = summary(run_dir)
    assert result["stop_reason"] == "target_return reached" and result["solved_at_seconds"] is not None
    assert result["mean_return"] >= 450  # the last 100 episodes hold those that ended while the processes stopped
    assert result["policy_lag_mean"] > 0  # learners update while actors act: the data lags
    for tag in ("perf/actor_wait_s", "perf/learner_wait_s", "perf/trajectories_dropped", "perf/policy_lag"):
        assert scalars(run_dir, tag), tag
    assert scalars(run_dir, "perf/trajectories_dropped")[-1] == 0  # the actors' default wait is never used up
    diagnostics = ["explained_variance"] + (["approx_kl", "clip_fraction"] if config == "appo.yaml" else [])
    for name in diagnostics:  # in TensorBoard and in the summary (the last logging interval's mean)
        assert scalars(run_dir, f"train/{name}"), name
        assert result["train"][name] == pytest.approx(scalars(run_dir, f"train/{name}")[-1], rel=1e-5), name
    assert result["train"]["explained_variance"] <= 1  # any value below: a last interval can be a bad one
    if config == "appo.yaml":
        assert 0 <= result["train"]["clip_fraction"] <= 1 and result["train"]["approx_kl"] >= 0
    evaluated = run_cli("evaluate", "--run", run_dir, "--episodes", "2")
    assert evaluated.returncode == 0 and "greedy episodes" in evaluated.stdout, evaluated.stderr


@pytest.mark.parametrize("name, algorithm", [
    pytest.param("impala", {"vtrace": False}, marks=pytest.mark.slow),
    ("impala", {"learners": 2}),
    ("appo", {"targets": "vtrace", "learners": 2, "epochs": 1, "minibatches": 4}),
], ids=["uncorrected", "hogwild learners", "appo vtrace"])
def test_variants_train_with_an_lstm(tmp_path, name, algorithm):
    done, run_dir = train(tmp_path, _config(name, **algorithm) | {"model": {"hidden": [32], "lstm": True}})
    assert done.returncode == 0, done.stderr
    result = summary(run_dir)
    assert result["stop_reason"] == "total_steps reached" and result["updates"] > 0 and result["failure"] is None


def test_a_batch_larger_than_the_buffer_is_refused_in_one_line(tmp_path):
    done, run_dir = train(tmp_path, _config(batch_trajectories=5, slots_per_actor=2))
    assert done.returncode == 2 and run_dir is None
    assert done.stderr.strip() == ("train: error: config key 'algorithm.batch_trajectories': got 5; allowed: at most "
                                   "trainer.workers x algorithm.slots_per_actor = 4 (the trajectories the buffer "
                                   "holds)")


def test_a_synchronous_run_acts_every_batch_with_the_parameters_of_the_last_update(tmp_path):
    """2 epochs of 2 minibatches: 4 updates per batch, lagging 0, 1, 2 and 3 updates behind the parameters that
    acted, whatever the actors' and the learner's speeds."""
    done, run_dir = train(tmp_path, _config("appo", synchronous=True, batch_trajectories=4, epochs=2,
                                            minibatches=2))
    assert done.returncode == 0, done.stderr
    result = summary(run_dir)
    assert result["stop_reason"] == "total_steps reached" and result["updates"] == 4 * 20_000 // (10 * 4 * 4)
    assert result["policy_lag_mean"] == pytest.approx(1.5) and result["counts"]["trajectories_dropped"] == 0
    assert max(scalars(run_dir, "perf/policy_lag")) <= 3


@pytest.mark.parametrize("algorithm, trainer, refusal", [
    ({"learners": 2, "batch_trajectories": 4}, {},
     "config key 'algorithm.learners': got 2 with algorithm.synchronous; allowed: 1"),
    ({"batch_trajectories": 2}, {},
     "config key 'algorithm.batch_trajectories': got 2 with algorithm.synchronous; allowed: trainer.workers x "
     "algorithm.slots_per_actor = 4"),
    ({"batch_trajectories": 4}, {"backend": "ray", "start_method": "spawn"},
     "config key 'algorithm.synchronous': got true with trainer.backend 'ray'; allowed: false, or trainer.backend "
     "local"),
], ids=["two learners", "a batch short of the slots", "ray"])
def test_a_synchronous_run_that_cannot_take_turns_is_refused_in_one_line(tmp_path, algorithm, trainer, refusal):
    config = _config("appo", synchronous=True, slots_per_actor=2, **algorithm)
    config["trainer"].update(trainer)
    done, run_dir = train(tmp_path, config)
    assert done.returncode == 2 and run_dir is None
    assert done.stderr.startswith(f"train: error: {refusal}") and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize("synchronous", [False, True], ids=["asynchronous", "synchronous"])
@pytest.mark.parametrize("role, variable", [("learner", "HOGSHARE_LEARNER_DIES_ONCE"),
                                            ("actor", "HOGSHARE_ACTOR_DIES_ONCE")])
def test_a_process_killed_holding_trajectory_slots_is_restarted_and_the_slots_come_back(tmp_path, role, variable,
                                                                                        synchronous):
    """One slot per actor and a wait longer than the run: a slot not taken back would stall the run to its
    max_seconds (synchronous, the learner waits for every slot, and the actors for the learner)."""
    env = cli_env({**os.environ, variable: str(tmp_path / "died")})
    config = _config("custom_envs:DyingImpala", slots_per_actor=1, batch_trajectories=2 if synchronous else 1,
                     max_actor_wait_s=600, synchronous=synchronous)
    config["trainer"].update(on_worker_failure="restart", max_seconds=60)
    done, run_dir = train(tmp_path, config, env=env)
    assert done.returncode == 0, done.stderr
    assert f"{role} 0 was killed by signal SIGKILL" in done.stderr
    assert f"restarting {role} 0 with a new seed" in done.stderr
    result = summary(run_dir)
    assert result["stop_reason"] == "total_steps reached" and result["worker_restarts"] == 1
    if role == "learner":  # the batch it held is counted as dropped
        assert scalars(run_dir, "perf/trajectories_dropped")[-1] == 1


def test_an_impala_run_resumes(tmp_path):
    done, run_dir = train(tmp_path, _config(total_steps=10_000))
    assert done.returncode == 0, done.stderr
    first = summary(run_dir)
    resumed = run_cli("train", "--resume", run_dir, "--set", "trainer.total_steps=20000")
    assert resumed.returncode == 0, resumed.stderr
    again = summary(run_dir)
    assert again["env_steps"] >= 20_000 > first["env_steps"] and again["updates"] > first["updates"]
