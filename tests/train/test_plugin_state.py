"""A plugin's own arrays (`Algorithm.build_state`): shared by its workers, saved in the checkpoint, restored on
resume, and checked like the rest of a checkpoint before any of it is used."""
import numpy as np
import pytest

from framework.train.checkpoint import load_checkpoint, save_checkpoint
from run_configs import cartpole_config
from train_cli import run_cli, summary, train

PLUGIN = "custom_envs:CountingA3C"


def _config(total_steps: int) -> dict:
    return cartpole_config(total_steps=total_steps, algorithm={"name": PLUGIN, "n_steps": 10})


def _saved(run_dir) -> dict:
    return load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")


def test_the_plugin_arrays_are_shared_by_the_workers_and_saved_with_the_run(tmp_path):
    done, run_dir = train(tmp_path, _config(2_000))
    assert done.returncode == 0, done.stderr
    counts = _saved(run_dir)["plugin"]["updates"]
    assert counts.dtype == np.int64 and counts.shape == (2,)
    assert counts.sum() == summary(run_dir)["updates"] and (counts > 0).all()  # each worker wrote its own slot


def test_a_resumed_run_continues_from_the_saved_arrays(tmp_path):
    done, run_dir = train(tmp_path, _config(2_000))
    assert done.returncode == 0, done.stderr
    first = int(_saved(run_dir)["plugin"]["updates"].sum())
    done = run_cli("train", "--resume", run_dir, "--set", "trainer.total_steps=4000")
    assert done.returncode == 0, done.stderr
    total = summary(run_dir)["updates"]
    assert total > first and _saved(run_dir)["plugin"]["updates"].sum() == total


@pytest.mark.parametrize("damage, message", [
    (lambda plugin: plugin.update(updates=np.zeros(3, dtype=np.int64)),
     "holds plugin array 'updates' of shape (3,) and dtype int64; allowed: shape (2,) and dtype int64"),
    (lambda plugin: plugin.update(updates=np.zeros(2, dtype=np.float32)),
     "holds plugin array 'updates' of shape (2,) and dtype float32; allowed: shape (2,) and dtype int64"),
    (lambda plugin: plugin.clear(), "holds the plugin arrays (none); allowed: updates, what algorithm"),
    (lambda plugin: plugin.update(other=np.zeros(1)), "holds the plugin arrays other, updates; allowed: updates"),
], ids=["shape", "dtype", "missing", "unknown"])
def test_a_checkpoint_whose_plugin_arrays_do_not_fit_is_refused_in_one_line(tmp_path, damage, message):
    done, run_dir = train(tmp_path, _config(1_000))
    assert done.returncode == 0, done.stderr
    path = run_dir / "checkpoints" / "checkpoint.npz"
    state = load_checkpoint(path)
    damage(state["plugin"])
    if not state["plugin"]:
        del state["plugin"]
    save_checkpoint(path, state)
    before = path.read_bytes()
    done = run_cli("train", "--resume", run_dir, "--set", "trainer.total_steps=2000")
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and path.read_bytes() == before


def test_a_plugin_with_arrays_of_its_own_is_refused_on_the_ray_backend(tmp_path):
    pytest.importorskip("ray", reason="the ray backend needs the ray extra")
    config = _config(1_000)
    config["trainer"].update(backend="ray", ray={"nodes": 1, "workers_per_node": 2})
    done, run_dir = train(tmp_path, config)
    assert done.returncode == 2 and run_dir is None, done.stderr
    assert ("config key 'trainer.backend': got 'ray'; allowed: local for algorithm custom_envs:CountingA3C, whose "
            "own arrays (updates) only the local backend carries") in done.stderr
