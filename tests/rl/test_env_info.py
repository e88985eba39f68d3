"""The environment described once (rl.envs.info): the main process builds one environment to describe it, every
process gets the description, and a run builds environments only where they are stepped: at most
trainer.workers x env.envs_per_worker + 1 per run, whatever the algorithm."""
import pickle

import pytest

from counting_envs import constructions
from framework.algorithms.a3c.plugin import ALGORITHM
from framework.train.config import validate
from run_configs import cartpole_config
from train_cli import summary, train

WORKERS, ENVS = 2, 4

ALGORITHMS = {
    "a3c": {"name": "a3c", "n_steps": 10},
    "impala": {"name": "impala", "n_steps": 10, "batch_trajectories": 2},
    "appo": {"name": "appo", "n_steps": 10, "batch_trajectories": 2},
}


@pytest.mark.parametrize("algorithm, env_id", [
    ("a3c", "counting_envs:CountingCartPole"), ("a3c", "counting_envs:CountingCartPole-v0"),
    ("impala", "counting_envs:CountingCartPole-v0"), ("appo", "counting_envs:CountingCartPole"),
], ids=["a3c-loop", "a3c-vector", "impala-vector", "appo-loop"])
def test_a_run_builds_the_envs_its_workers_step_and_one_more(tmp_path, algorithm, env_id):
    count_file = tmp_path / "built"
    config = cartpole_config(env={"id": env_id, "kwargs": {"count_file": str(count_file)}, "envs_per_worker": ENVS},
                             algorithm=ALGORITHMS[algorithm], total_steps=3000,
                             trainer={"workers": WORKERS, "start_method": "spawn"})
    done, run_dir = train(tmp_path, config, timeout=180)
    assert done.returncode == 0, done.stderr
    assert summary(run_dir)["env_steps"] >= 3000
    assert WORKERS * ENVS <= constructions(str(count_file)) <= WORKERS * ENVS + 1


def test_the_description_is_made_once_a_process_and_pickles_small(tmp_path):
    count_file = str(tmp_path / "built")
    config = validate({"env": {"id": "counting_envs:CountingCartPole", "kwargs": {"count_file": count_file}}})
    assert constructions(count_file) == 1  # the check of the config described it
    model = ALGORITHM.build_model(config)
    shared = ALGORITHM.build_shared(config, None, range(2))
    ALGORITHM.actor(model, config)
    assert constructions(count_file) == 1 and shared.env is ALGORITHM.env_info(config)
    assert len(pickle.dumps(shared)) < 4096
