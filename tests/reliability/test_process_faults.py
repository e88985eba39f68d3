"""Faults in the processes of a run (faults 1-5): killed workers, a killed main process, stop signals,
environments that raise, non-finite updates. Each runs the real `train` CLI (or a program using
`sharing.spawn`) in a subprocess."""
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from framework.train.checkpoint import load_checkpoint
from reliability_support import (GRACE_ENV, HERE, Train, cmdline, fast_config, group_names, is_alive, mapped_groups,
                                 only_run_dir, run_cli, still_alive, wait_for_file, wait_for_run_dir, wait_until,
                                 worker_pids, write_config)

pytestmark = pytest.mark.timeout(180)


def _checkpoint(run_dir):
    return run_dir / "checkpoints" / "checkpoint.npz"


def _summary(run_dir) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def _start(watch, tmp_path, logdir, env=None, new_session=False, **sections) -> tuple[Train, Path]:
    """A long run with a checkpoint every 0.3 s, once it is training (a checkpoint counts env steps)."""
    sections.setdefault("trainer", {})
    sections["trainer"] = {"checkpoint_every_s": 0.3, **sections["trainer"]}
    config = write_config(tmp_path / "c.yaml", fast_config(**sections))
    run = Train(watch, "--config", config, "--logdir", logdir, env=env, start_new_session=new_session)
    run_dir = wait_for_run_dir(logdir)
    wait_for_file(_checkpoint(run_dir))
    assert wait_until(lambda: _steps(run_dir) > 0, 60), f"the run made no env step:\n{run.stderr}"
    return run, run_dir


def _steps(run_dir) -> int:
    return load_checkpoint(_checkpoint(run_dir))["run"]["env_steps"]


@pytest.mark.fault("1", "SIGKILL of the only worker mid-run, `on_worker_failure: restart`",
                   "the death is reported with rank and signal; a new worker process replaces it and the env-step "
                   "count keeps growing; SIGTERM then ends the run with exit 0 and `worker_restarts: 1`")
def test_killed_worker_is_replaced_and_training_continues(watch, tmp_path, logdir):
    run, run_dir = _start(watch, tmp_path, logdir, trainer={"workers": 1, "on_worker_failure": "restart"})
    [worker] = worker_pids(run.pid, 1)
    os.kill(worker, signal.SIGKILL)
    run.wait_for(r"^worker 0 was killed by signal SIGKILL$")
    run.wait_for(r"^restarting worker 0 with a new seed \(restart 1 of at most 10\)$")
    assert still_alive([worker], 5) == []
    [replacement] = worker_pids(run.pid, 1)
    assert replacement != worker
    before = _steps(run_dir)
    assert wait_until(lambda: _steps(run_dir) > before + 2000, 60), "no progress after the restart"
    run.proc.send_signal(signal.SIGTERM)
    assert run.finish() == 0, run.stderr
    summary = _summary(run_dir)
    assert summary["worker_restarts"] == 1 and summary["stop_reason"] == "SIGTERM"
    assert run.stderr.count("was killed by signal") == 1


@pytest.mark.fault("1", "SIGKILL of one of two forkserver workers mid-run, `on_worker_failure: abort`",
                   "exit 1; stderr names the worker and SIGKILL and says the run stops (abort); the other worker "
                   "and the fork server exit; summary and final checkpoint written")
def test_killed_worker_aborts_the_run(watch, tmp_path, logdir):
    run, run_dir = _start(watch, tmp_path, logdir, trainer={"start_method": "forkserver"})
    workers = worker_pids(run.pid, 2)
    os.kill(workers[1], signal.SIGKILL)
    assert run.finish() == 1, run.stderr
    killed = re.findall(r"^worker (\d) was killed by signal SIGKILL$", run.stderr, re.MULTILINE)
    assert len(killed) == 1, run.stderr
    assert f"stopping the run (on_worker_failure: abort): worker {killed[0]} was killed by signal SIGKILL" \
           in run.stderr
    assert still_alive(workers, 5) == []
    summary = _summary(run_dir)
    assert summary["stop_reason"] == "worker failure" and summary["exit_code"] == 1
    assert load_checkpoint(_checkpoint(run_dir))["run"]["env_steps"] == summary["env_steps"]


@pytest.mark.fault("2", "SIGKILL of the main process (file_system strategy; fork, spawn and forkserver workers)",
                   "every worker exits within 5 s; the run's segments were in /dev/shm before and none is left "
                   "after the manager's grace period; the manager daemon exits and removes its socket directory")
@pytest.mark.parametrize("start_method", ["fork", "spawn", pytest.param("forkserver", marks=pytest.mark.slow)])
def test_killed_main_process_leaves_no_worker_and_no_segment(watch, tmp_path, logdir, start_method):
    run, _ = _start(watch, tmp_path, logdir, env=watch.env(**{GRACE_ENV: "1.0"}),
                    trainer={"start_method": start_method, "sharing_strategy": "file_system"})
    workers = worker_pids(run.pid, 2)
    [group] = mapped_groups(run.pid)
    assert group_names(group), "the run has no segment in /dev/shm"
    managers = [p for p in watch.tagged() if "shm_manager.py" in cmdline(p)]
    assert len(managers) == 1
    run.proc.kill()
    assert run.finish() == -signal.SIGKILL
    assert still_alive(workers, 5) == []
    assert wait_until(lambda: not group_names(group), 1.0 + 10), group_names(group)
    assert still_alive(managers, 10) == []
    assert list(watch.tmpdir.glob("hogshare-*")) == []


@pytest.mark.fault("2", "SIGKILL of the main process of an IMPALA run (2 actors, 1 learner; spawn, file_system "
                        "strategy)",
                   "the actors and the learner exit within 5 s; the run's segments, its trajectory buffer's among "
                   "them, were in /dev/shm before and none is left after the manager's grace period")
def test_killed_main_process_of_an_actor_learner_run_leaves_nothing(watch, tmp_path, logdir):
    run, _ = _start(watch, tmp_path, logdir, env=watch.env(**{GRACE_ENV: "1.0"}), algorithm={"name": "impala"},
                    trainer={"start_method": "spawn", "sharing_strategy": "file_system"})
    processes = worker_pids(run.pid, 3)
    [group] = mapped_groups(run.pid)
    assert group_names(group), "the run has no segment in /dev/shm"
    run.proc.kill()
    assert run.finish() == -signal.SIGKILL
    assert still_alive(processes, 5) == []
    assert wait_until(lambda: not group_names(group), 1.0 + 10), group_names(group)
    assert list(watch.tmpdir.glob("hogshare-*")) == []


@pytest.mark.fault("2", "SIGKILL of a program that started two children with `sharing.spawn` (fork, spawn and "
                        "forkserver)",
                   "both children exit within 5 s, and so does the fork server")
@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
def test_children_of_sharing_spawn_die_with_their_killed_parent(watch, start_method):
    program = subprocess.Popen([sys.executable, str(HERE / "programs.py"), "spawn_and_wait", start_method],
                               stdout=subprocess.PIPE, text=True, env=watch.env())
    children = json.loads(program.stdout.readline())["children"]
    program.stdout.close()
    assert all(is_alive(c) for c in children)
    program.kill()
    program.wait(30)
    assert still_alive(children, 5) == []
    assert still_alive(watch.tagged(), 5) == []


@pytest.mark.fault("3", "SIGTERM to the main process (forkserver workers, file_system strategy)",
                   "exit 0, stop reason SIGTERM, the final checkpoint holds the summary's step count; "
                   "`--resume` continues from it to a higher step target with exit 0")
def test_sigterm_checkpoints_and_the_run_resumes(watch, tmp_path, logdir):
    run, run_dir = _start(watch, tmp_path, logdir,
                          trainer={"start_method": "forkserver", "sharing_strategy": "file_system"})
    workers = worker_pids(run.pid, 2)
    run.proc.send_signal(signal.SIGTERM)
    assert run.finish() == 0, run.stderr
    assert still_alive(workers, 5) == []
    _assert_stopped_and_resumable(watch, run_dir, "SIGTERM")


@pytest.mark.fault("3", "Ctrl-C: SIGINT to the whole process group of the run (workers included)",
                   "workers ignore it and finish their update; exit 0, stop reason SIGINT, final checkpoint; "
                   "`--resume` continues with exit 0")
def test_ctrl_c_to_the_process_group_checkpoints_and_the_run_resumes(watch, tmp_path, logdir):
    run, run_dir = _start(watch, tmp_path, logdir, new_session=True)
    workers = worker_pids(run.pid, 2)
    os.killpg(run.pid, signal.SIGINT)
    assert run.finish() == 0, run.stderr
    assert "Traceback" not in run.stderr and "KeyboardInterrupt" not in run.stderr
    assert still_alive(workers, 5) == []
    _assert_stopped_and_resumable(watch, run_dir, "SIGINT")


def _assert_stopped_and_resumable(watch, run_dir, signame: str) -> None:
    summary = _summary(run_dir)
    assert summary["stop_reason"] == signame and summary["exit_code"] == 0 and summary["env_steps"] > 0
    saved = load_checkpoint(_checkpoint(run_dir))["run"]
    assert saved["env_steps"] == summary["env_steps"] and saved["updates"] == summary["updates"]
    target = summary["env_steps"] + 2000
    done = run_cli(watch, "--resume", run_dir, "--set", f"trainer.total_steps={target}")
    assert done.returncode == 0, done.stderr
    resumed = _summary(run_dir)
    assert resumed["stop_reason"] == "total_steps reached"
    assert resumed["env_steps"] >= target and resumed["updates"] > summary["updates"]
    assert resumed["wall_seconds"] > summary["wall_seconds"]
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 2


@pytest.mark.fault("4", "an environment that raises RuntimeError in `step` (spawn workers)",
                   "exit 1; stderr has the worker's traceback naming the env id, the worker rank and the env's own "
                   "exception; the run stops (abort) with summary and a loadable, finite final checkpoint")
def test_environment_raising_in_step_is_reported_and_stops_the_run(watch, tmp_path, logdir):
    config = write_config(tmp_path / "c.yaml", fast_config(
        env={"id": "fault_envs:RaisingCartPole-v0", "kwargs": {"fail_after": 150}},
        trainer={"start_method": "spawn"}))
    done = run_cli(watch, "--config", config, "--logdir", logdir)
    assert done.returncode == 1, done.stderr
    report = re.search(r"^worker (\d) raised an exception: framework\.rl\.envs\.faults\.EnvError: environment "
                       r"fault_envs:RaisingCartPole-v0 \(worker \1, env \d\) raised in step: RuntimeError: "
                       r"injected fault in step\nTraceback \(most recent call last\):\n(.*\n)*?"
                       r"RuntimeError: injected fault in step\n", done.stderr, re.MULTILINE)
    assert report, done.stderr
    assert f"stopping the run (on_worker_failure: abort): worker {report[1]} raised an exception" in done.stderr
    run_dir = only_run_dir(logdir)
    summary = _summary(run_dir)
    assert summary["stop_reason"] == "worker failure" and summary["exit_code"] == 1
    state = load_checkpoint(_checkpoint(run_dir))
    assert all(np.isfinite(v).all() for v in state["model"].values())


@pytest.mark.fault("5", "NaN or inf in every rollout (reward NaN, reward inf, observation inf), "
                        "`max_nonfinite_updates: 5`",
                   "exit 1 with a message naming the limit; no update counted; the shared optimizer never stepped "
                   "(step counts and moments all zero); all parameters in the final checkpoint finite")
@pytest.mark.parametrize("where, value", [("reward", "nan"), ("reward", "inf"), ("observation", "inf")])
def test_non_finite_updates_are_never_applied_and_stop_the_run(watch, tmp_path, logdir, where, value):
    config = write_config(tmp_path / "c.yaml", fast_config(
        env={"id": "fault_envs:NonFiniteCartPole-v0", "kwargs": {"where": where, "value": value}},
        algorithm={"max_nonfinite_updates": 5}))
    done = run_cli(watch, "--config", config, "--logdir", logdir)
    assert done.returncode == 1, done.stderr
    assert re.search(r"^stopping the run: worker \d produced \d+ updates in a row with a non-finite loss or "
                     r"gradient \(algorithm\.max_nonfinite_updates = 5\); none was applied to the shared "
                     r"parameters$", done.stderr, re.MULTILINE), done.stderr
    run_dir = only_run_dir(logdir)
    summary = _summary(run_dir)
    assert summary["stop_reason"] == "non-finite updates" and summary["updates"] == 0
    assert summary["skipped_updates"] >= 5
    state = load_checkpoint(_checkpoint(run_dir))
    entries = state["optimizer"]["state"].values()
    assert entries and all(np.all(np.asarray(v) == 0) for entry in entries for v in entry.values())
    assert all(np.isfinite(v).all() for v in state["model"].values())


@pytest.mark.fault("5", "NaN rewards in some rollouts only (every 50th step of each env)",
                   "the poisoned updates are skipped and counted, the others applied; the run reaches its step "
                   "target with exit 0 and every shared parameter and optimizer moment finite")
def test_occasional_non_finite_updates_are_skipped_and_training_goes_on(watch, tmp_path, logdir):
    config = write_config(tmp_path / "c.yaml", fast_config(
        env={"id": "fault_envs:NonFiniteCartPole-v0", "kwargs": {"where": "reward", "every": 50}},
        trainer={"total_steps": 8000}))
    done = run_cli(watch, "--config", config, "--logdir", logdir)
    assert done.returncode == 0, done.stderr
    run_dir = only_run_dir(logdir)
    summary = _summary(run_dir)
    assert summary["updates"] > 0 and summary["skipped_updates"] > 0
    state = load_checkpoint(_checkpoint(run_dir))
    assert all(np.isfinite(v).all() for v in state["model"].values())
    moments = [v for entry in state["optimizer"]["state"].values() for v in entry.values()]
    assert moments and all(np.isfinite(m).all() for m in moments)


def _actor_learner_config(name: str, **sections) -> dict:
    """fast_config as a run of actor-learner algorithm `name`: 2 actors of 4 envs, one learner taking 2
    trajectories at a time."""
    config = fast_config(**sections)
    config["algorithm"] = {"name": name, "n_steps": 10, "batch_trajectories": 2, **sections.get("algorithm", {})}
    return config


@pytest.mark.fault("5", "IMPALA and APPO: a NaN observation every 7th step of each env (every trajectory holds some)",
                   "no actor raises (today: `Categorical: logits ... contain NaN` in the actor ends the run); the "
                   "learner cuts the poisoned steps out of its batches, counted in summary.json's "
                   "counts.nonfinite_steps, and learns from the rest: every update applied, exit 0 at the step target "
                   "with every shared parameter finite")
@pytest.mark.parametrize("algorithm", ["impala", "appo"])
def test_non_finite_observations_in_actor_learner_runs_are_skipped(watch, tmp_path, logdir, algorithm):
    config = write_config(tmp_path / "c.yaml", _actor_learner_config(
        algorithm, env={"id": "fault_envs:NonFiniteCartPole-v0", "kwargs": {"where": "observation", "every": 7}},
        trainer={"total_steps": 6000}))
    done = run_cli(watch, "--config", config, "--logdir", logdir)
    assert done.returncode == 0, done.stderr
    assert "raised an exception" not in done.stderr
    run_dir = only_run_dir(logdir)
    summary = _summary(run_dir)
    assert summary["stop_reason"] == "total_steps reached"
    assert summary["updates"] > 0 and summary["skipped_updates"] == 0 and summary["counts"]["nonfinite_steps"] > 0
    assert all(np.isfinite(v).all() for v in load_checkpoint(_checkpoint(run_dir))["model"].values())


@pytest.mark.fault("5", "IMPALA and APPO with a model.factory whose policy weights are NaN (every policy output "
                        "NaN), `max_nonfinite_updates: 5`",
                   "the actors act on (an action the env takes) and mark their trajectories; the learner skips "
                   "them, and the run stops as A3C's does: exit 1, stop reason `non-finite updates`, the message "
                   "naming the limit; no actor raised")
@pytest.mark.parametrize("algorithm", ["impala", "appo"])
def test_non_finite_policy_outputs_in_actor_learner_runs_stop_as_a3c_does(watch, tmp_path, logdir, algorithm):
    config = write_config(tmp_path / "c.yaml", _actor_learner_config(
        algorithm, model={"factory": "custom_envs:nan_model"}, algorithm={"max_nonfinite_updates": 5}))
    done = run_cli(watch, "--config", config, "--logdir", logdir)
    assert done.returncode == 1, done.stderr
    assert "raised an exception" not in done.stderr
    assert re.search(r"^stopping the run: learner 0 produced \d+ updates in a row with a non-finite loss or "
                     r"gradient \(algorithm\.max_nonfinite_updates = 5\)", done.stderr, re.MULTILINE), done.stderr
    summary = _summary(only_run_dir(logdir))
    assert summary["stop_reason"] == "non-finite updates" and summary["updates"] == 0
    assert summary["skipped_updates"] >= 5
