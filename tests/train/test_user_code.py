"""A user's own environments, networks and plugins (`module:name` in env.id, model.factory, algorithm.name),
trained and evaluated by the real commands in spawned and forkserver workers; the refusals in one line (exit
2); and what a config may make hogshare import (nothing, for a config that is refused)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from extras import ATARI
from framework.train import read_checkpoint
from run_configs import cartpole_config
from train_cli import CHECKOUT, cli_env, run_cli, train, write_config

MARKER_MODULE = """
from pathlib import Path
Path(__file__).with_name("imported.marker").write_text("imported")
from custom_envs import MoveToGoal as X
"""


def _config(env_id: str, start_method: str = "spawn", **sections) -> dict:
    return cartpole_config(env={"id": env_id, "envs_per_worker": 2}, max_seconds=2,
                           trainer={"workers": 1, "start_method": start_method, "max_seconds": 2,
                                    "total_steps": 1_000_000},
                           logging={"progress": False, "tensorboard": False}, **sections)


def _trained_and_evaluated(tmp_path: Path, config: dict, env: dict | None = None) -> Path:
    done, run_dir = train(tmp_path, config, env=env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    evaluated = run_cli("evaluate", "--run", run_dir, "--episodes", 2, env=env)
    assert evaluated.returncode == 0 and "return over 2 greedy episodes" in evaluated.stdout, evaluated.stderr
    return run_dir


@pytest.mark.parametrize("env_id", ["custom_envs:MoveToGoal", "custom_envs:DictGoal", "custom_envs:ImageGoal",
                                    # the other forms of id resolve as these do (tests/rl/test_env_ids.py)
                                    pytest.param("custom_envs:make_move_to_goal", marks=pytest.mark.slow),
                                    pytest.param("custom_envs:MoveToGoal-v0", marks=pytest.mark.slow)])
def test_each_env_id_form_trains_and_evaluates_in_spawned_workers(tmp_path, env_id):
    run_dir = _trained_and_evaluated(tmp_path, _config(env_id))
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["env"]["id"] == env_id


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_a_console_script_finds_the_users_module_in_the_current_directory(tmp_path, start_method):
    """A script outside the current directory (as the console scripts are) imports cwd's module, in its workers
    too; without PYTHONPATH naming the module's folder."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "goal_env.py").write_text((CHECKOUT / "tests/support/custom_envs.py").read_text())
    script = tmp_path / "bin" / "train"
    script.parent.mkdir()
    script.write_text("import sys\nfrom framework.train.cli import train_main, evaluate_main\n"
                      "if __name__ == '__main__':\n"
                      "    sys.exit({'train': train_main, 'evaluate': evaluate_main}[sys.argv[1]](sys.argv[2:]))\n")
    config = write_config(work / "config.yaml", _config("goal_env:MoveToGoal", start_method))
    env = {**cli_env(), "PYTHONPATH": str(CHECKOUT)}
    done = subprocess.run([sys.executable, script, "train", "--config", config, "--logdir", work / "runs"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (work / "runs").iterdir()
    evaluated = subprocess.run([sys.executable, script, "evaluate", "--run", run_dir, "--episodes", "1"], cwd=work,
                               env=env, capture_output=True, text=True, timeout=120)
    assert evaluated.returncode == 0 and "return over 1 greedy episodes" in evaluated.stdout, evaluated.stderr


def test_model_factory_trains_resumes_and_evaluates(tmp_path):
    """A network without normalisation statistics of its own, under env.normalize_obs and normalize_reward: the
    ones hogshare adds are shared and checkpointed."""
    config = _config("custom_envs:MoveToGoal", model={"factory": "custom_envs:tiny_model", "kwargs": {"width": 8}})
    config["env"].update(normalize_obs=True, normalize_reward=True)
    run_dir = _trained_and_evaluated(tmp_path, config)
    saved = read_checkpoint(run_dir)
    assert saved["obs_norm.mean"].shape == (1,) and saved["return_norm.mean"].shape == (1,)
    assert saved["obs_norm.count"][0] > 100 and saved["return_norm.count"][0] > 100  # the workers' updates
    resumed = run_cli("train", "--resume", run_dir, "--set", "trainer.max_seconds=4")
    assert resumed.returncode == 0, resumed.stderr
    evaluated = run_cli("evaluate", "--run", run_dir, "--episodes", 1)
    assert evaluated.returncode == 0, evaluated.stderr


def test_plugin_class_trains_and_evaluates_in_spawned_workers(tmp_path):
    run_dir = _trained_and_evaluated(tmp_path, _config("custom_envs:MoveToGoal",
                                                       algorithm={"name": "custom_envs:MyA3C", "n_steps": 10}))
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["algorithm"]["name"] == "custom_envs:MyA3C"


@pytest.mark.parametrize("sections, message", [
    ({"env": {"id": "custom_envs:TextObservation"}},
     "config key 'env.id': got 'custom_envs:TextObservation' with observation space Text("),
    ({"env": {"id": "custom_envs:not_an_env"}}, "which returned a int; allowed: a gymnasium.Env subclass"),
    ({"env": {"id": "no_such_module:X"}}, "allowed: a module that can be imported (no module 'no_such_module'"),
    pytest.param({"env": {"id": "ALE/Breakout-v5", "kwargs": {"bogus": 1}}},
                 "config key 'env.kwargs': got {'bogus': 1}; allowed: keyword arguments ALE/Breakout-v5 accepts "
                 "(TypeError: AtariEnv.__init__() got an unexpected keyword argument 'bogus')", marks=ATARI),
    ({"env": {"id": "LunarLander-v2"}}, "Please use `LunarLander-v3` instead."),
    ({"model": {"factory": "custom_envs:linear_module"}},
     "config key 'model.factory': got 'custom_envs:linear_module'; its Linear lacks policy, policy_array"),
    ({"model": {"factory": "custom_envs:model_without_value"}},
     "its forward gave a value of shape (2, 1) for 2 observations; allowed: (2,)"),
    ({"algorithm": {"name": "custom_envs:MoveToGoal"}},
     "config key 'algorithm.name': got 'custom_envs:MoveToGoal', a type; allowed: a subclass of"),
])
def test_refusals_name_the_real_cause_in_one_line(tmp_path, sections, message):
    config = _config("custom_envs:MoveToGoal")
    for name, values in sections.items():
        config[name].update(values)
    done, run_dir = train(tmp_path, config)
    assert done.returncode == 2 and run_dir is None
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize("refused", [True, False])
def test_a_refused_config_imports_nothing(tmp_path, refused):
    """evilmod writes a marker when imported: a config refused for another key never imports it, even trusted (the
    valid config shows that the marker would be written)."""
    (tmp_path / "evilmod.py").write_text(MARKER_MODULE)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = _config("evilmod:X")
    if refused:
        config["trainer"]["no_such_key"] = 1
    write_config(run_dir / "config.yaml", config)
    done = run_cli("evaluate", "--run", run_dir, "--trust-code", cwd=tmp_path)
    assert done.returncode == 2
    assert (tmp_path / "imported.marker").exists() is not refused, done.stderr
    if refused:
        assert "config key 'trainer.no_such_key': unknown key" in done.stderr


def test_a_refused_plugin_config_imports_nothing(tmp_path):
    (tmp_path / "evilmod.py").write_text(MARKER_MODULE)
    config = _config("CartPole-v1", algorithm={"name": "evilmod:X"})
    config["trainer"]["workers"] = 0
    done = run_cli("train", "--config", write_config(tmp_path / "c.yaml", config), cwd=tmp_path)
    assert done.returncode == 2 and "config key 'trainer.workers': got 0" in done.stderr
    assert not (tmp_path / "imported.marker").exists()
