"""Environments broken before their first step (fault 26): no observation space, an empty Box, sys.exit() while
being built, a reset that raises (in every process, or in the workers only). Each runs the real `train` CLI in a
subprocess."""
import json
import re

import pytest

from reliability_support import fast_config, only_run_dir, run_cli, write_config

pytestmark = pytest.mark.timeout(180)

BROKEN = {
    "no observation_space": ({"id": "fault_envs:SpacelessEnv"},
                             "config key 'env.id': got 'fault_envs:SpacelessEnv', whose observation_space is missing; "
                             "allowed: an Env that sets observation_space and action_space to gymnasium spaces"),
    "empty observation Box": ({"id": "fault_envs:EmptyBoxCartPole"},
                              "config key 'env.id': got 'fault_envs:EmptyBoxCartPole' with observation space "
                              "Box([], [], (0,), float32), which has no elements; allowed: a space of at least one "
                              "element"),
    "empty action Box": ({"id": "fault_envs:EmptyBoxCartPole", "kwargs": {"space": "action"}},
                         "config key 'env.id': got 'fault_envs:EmptyBoxCartPole' with action space Box([], [], (0,), "
                         "float32), which has no elements; allowed: a space of at least one element"),
    "sys.exit(3) in __init__": ({"id": "fault_envs:ExitingOnBuildCartPole"},
                                "config key 'env.id': got 'fault_envs:ExitingOnBuildCartPole' with env.kwargs {}, "
                                "which called sys.exit(3) while being built"),
    "reset raises": ({"id": "fault_envs:RaisingOnResetCartPole"},
                     "config key 'env.id': got 'fault_envs:RaisingOnResetCartPole' with env.kwargs {}, which raised in "
                     "its first reset: RuntimeError: injected fault in reset"),
}


@pytest.mark.fault("26", "environments broken before their first step, under `on_worker_failure: restart`: a class "
                         "that never sets observation_space, a Box of shape (0,) as observation or action space, "
                         "sys.exit(3) in __init__, a reset that raises",
                   "exit 2 before a run directory exists, one line naming env.id, the env and what is wrong; no "
                   "traceback, no restart (today: an AttributeError or `Linear: in_features must be a positive int` "
                   "traceback, exit 1; exit 3 with no message; a run directory, 10 restarts and hundreds of lines "
                   "of traceback)")
@pytest.mark.parametrize("case", list(BROKEN))
def test_an_environment_broken_before_its_first_step_is_refused_in_one_line(watch, tmp_path, logdir, case):
    env, message = BROKEN[case]
    config = write_config(tmp_path / "c.yaml", fast_config(env=env, trainer={"on_worker_failure": "restart"}))
    done = run_cli(watch, "--config", config, "--logdir", logdir)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"train: error: {message}\n"
    assert list(logdir.iterdir()) == []


@pytest.mark.fault("26", "a reset that raises in the workers only (config checks in the main process pass), 2 "
                         "workers under `on_worker_failure: restart` with max_restarts 10",
                   "the run stops once as many workers have failed as it has, before any step (1 restart, not 10), "
                   "exit 1, its end line suggesting no `evaluate` of a run that took no step (today: all 10 "
                   "restarts used, then `next: evaluate --run ...` for a checkpoint of 0 steps)")
def test_workers_that_all_fail_before_a_step_stop_the_run_without_burning_restarts(watch, tmp_path, logdir):
    config = write_config(tmp_path / "c.yaml", fast_config(
        env={"id": "fault_envs:RaisingOnResetCartPole", "kwargs": {"where": "workers"}},
        trainer={"on_worker_failure": "restart", "max_restarts": 10}))
    done = run_cli(watch, "--config", config, "--logdir", logdir)
    assert done.returncode == 1, done.stderr
    assert re.search(r"^stopping the run \(2 failures, as many as the run has processes, before its first step: a "
                     r"restart would fail alike\): worker \d raised an exception: "
                     r"framework\.rl\.envs\.faults\.EnvError: "
                     r"environment fault_envs:RaisingOnResetCartPole \(worker \d, env 0\) raised in reset",
                     done.stderr, re.MULTILINE), done.stderr
    summary = json.loads((only_run_dir(logdir) / "summary.json").read_text())
    assert summary["env_steps"] == 0 and summary["worker_restarts"] == 1
    assert "evaluate --run" not in done.stdout
    assert re.search(r"^next: tensorboard --logdir .*\n {6}train --resume ", done.stdout, re.MULTILINE), done.stdout
