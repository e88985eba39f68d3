"""A plugin's roles (`Algorithm.roles`): several kinds of process in one run, each started, watched, restarted and
reported by its role and index, as workers are."""
import os

import pytest

from framework.train.backends.base import WorkerExit
from framework.train.checkpoint import load_checkpoint
from framework.train.worker_exits import exit_lines
from run_configs import cartpole_config
from train_cli import cli_env, summary, train

PLUGIN = "custom_envs:WatchedA3C"


def _config(total_steps: int = 2_000, **trainer) -> dict:
    return cartpole_config(total_steps=total_steps, algorithm={"name": PLUGIN, "n_steps": 10}, trainer=trainer)


def _seen(run_dir) -> list[int]:
    return load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")["plugin"]["seen"].tolist()


def test_each_role_runs_its_own_entry_point_with_its_rank_and_index(tmp_path):
    done, run_dir = train(tmp_path, _config())
    assert done.returncode == 0, done.stderr
    assert _seen(run_dir) == [1, 1, 100]  # workers 0 and 1 (ranks 0, 1), watcher 0 (rank 2)
    assert summary(run_dir)["updates"] > 0


def test_a_role_process_that_raises_is_named_by_its_role_and_restarted(tmp_path):
    env = cli_env({**os.environ, "HOGSHARE_WATCHER_FAILS_ONCE": str(tmp_path / "failed")})
    done, run_dir = train(tmp_path, _config(on_worker_failure="restart"), env=env)
    assert done.returncode == 0, done.stderr
    assert "watcher 0 raised an exception: RuntimeError: the watcher fails" in done.stderr
    assert "restarting watcher 0 with a new seed (restart 1 of at most" in done.stderr
    assert summary(run_dir)["worker_restarts"] == 1 and _seen(run_dir) == [1, 1, 100]


def test_a_role_process_that_raises_stops_the_run_under_abort(tmp_path):
    env = cli_env({**os.environ, "HOGSHARE_WATCHER_FAILS_ONCE": str(tmp_path / "failed")})
    # steps enough that the workers cannot finish before the watcher (started last) has failed
    done, run_dir = train(tmp_path, _config(10**8, on_worker_failure="abort"), env=env)
    assert done.returncode == 1
    assert ("stopping the run (on_worker_failure: abort): watcher 0 raised an exception: RuntimeError: the watcher "
            "fails") in done.stderr
    assert summary(run_dir)["stop_reason"] == "worker failure"


def test_a_plugin_with_other_roles_is_refused_on_the_ray_backend(tmp_path):
    pytest.importorskip("ray", reason="the ray backend needs the ray extra")
    done, run_dir = train(tmp_path, _config(backend="ray", ray={"nodes": 1, "workers_per_node": 2}))
    assert done.returncode == 2 and run_dir is None, done.stderr
    assert ("config key 'trainer.backend': got 'ray'; allowed: local for algorithm custom_envs:WatchedA3C, whose "
            "processes (2 workers, 1 watcher) only the local backend starts") in done.stderr


def test_alike_exits_are_grouped_per_role():
    exits = [WorkerExit(rank, False, f"actor {rank} was killed by signal SIGKILL", role="actor", index=rank)
             for rank in range(5)]
    exits += [WorkerExit(5 + i, False, f"learner {i} was killed by signal SIGKILL", role="learner", index=i)
              for i in range(2)]
    assert exit_lines(exits) == ["actors 0-4 (5 in all) each was killed by signal SIGKILL",
                                 "learner 0 was killed by signal SIGKILL", "learner 1 was killed by signal SIGKILL"]
