"""A run's own profile (runtime.profile) from a real run: summary.json's `profile` accounts for the worker
processes' time by phase, TensorBoard has each phase's share (profile/<phase>), and train's end says it in a line."""
import numpy as np
import pytest

from framework.runtime.profile import PHASES
from run_configs import cartpole_config
from train_cli import events, summary, train


@pytest.mark.parametrize("algorithm, phases", [
    ({"name": "a3c", "n_steps": 10}, {"sync", "act", "env", "learn"}),
    ({"name": "impala", "n_steps": 10, "batch_trajectories": 2}, {"sync", "act", "env", "learn", "wait", "copy"}),
], ids=["a3c", "impala"])
def test_a_runs_profile_accounts_for_its_workers_time_by_phase(tmp_path, algorithm, phases):
    done, run_dir = train(tmp_path, cartpole_config(algorithm=algorithm, total_steps=20_000))
    assert done.returncode == 0, done.stderr
    profile = summary(run_dir)["profile"]
    seconds, wall = profile["seconds"], profile["wall_seconds"]
    assert set(seconds) == set(PHASES) and {name for name, value in seconds.items() if value > 0} >= phases
    assert 0.5 < sum(seconds.values()) / wall <= 1.0  # forked workers: little of their time is their start
    assert f"profile of the workers' {wall:.1f} s: " in done.stdout
    shares = {name: [e.value for e in events(run_dir).Scalars(f"profile/{name}")] for name in PHASES}
    assert all(0.0 <= value <= 1.0 for values in shares.values() for value in values)
    totals = np.sum(list(shares.values()), axis=0)  # two clocks: a worker's late report moves time to the next
    assert totals.mean() <= 1.01 and (totals <= 1.5).all() and max(shares["env"]) > 0  # interval under load
