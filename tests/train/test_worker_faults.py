"""Faults injected into real runs of the `train` command: signals to the main process, workers that raise or
are killed, non-finite updates, checkpoint writes that fail, damaged checkpoints; and no process left behind."""
import json
import re
import os
import resource
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from run_configs import cartpole_config
from train_cli import cli_command, cli_env, only_run_dir, run_cli, start_cli, write_config
from framework.train.checkpoint import load_checkpoint

LONG = {"total_steps": 10**9, "max_seconds": 120}


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except FileNotFoundError:
        return []
    return [int(c) for c in text.split()]


def _worker_pids(main: subprocess.Popen, count: int, timeout: float = 30) -> list[int]:
    """PIDs of the forked workers of a `train` process (children running the same command line)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and main.poll() is None:
        cmdline = Path(f"/proc/{main.pid}/cmdline").read_bytes()  # read each time: exec may not be done yet
        pids = []
        for child in _children(main.pid):
            try:
                if Path(f"/proc/{child}/cmdline").read_bytes() == cmdline:
                    pids.append(child)
            except FileNotFoundError:
                pass
        if len(pids) >= count:
            return pids
        time.sleep(0.1)
    raise AssertionError(f"train did not start {count} workers (exit {main.poll()})")


def _gone(pids, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if Path(f"/proc/{p}").exists()
                 and "Z" not in Path(f"/proc/{p}/stat").read_text().split(")")[-1][:3]]
        if not alive:
            return True
        time.sleep(0.1)
    return False


def _wait_for_steps(run_dir_parent: Path, timeout: float = 30) -> Path:
    """The run directory once its first event file exists (the run is training)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = [p for p in run_dir_parent.iterdir() if p.is_dir()]
        if runs and any(p.name.startswith("events") for p in runs[0].iterdir()):
            return runs[0]
        time.sleep(0.1)
    raise AssertionError("the run did not start logging")


def _summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def _finish(proc: subprocess.Popen, timeout: float = 60) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_with_final_checkpoint_exit_zero_and_resumes(logdir, signum):
    config = write_config(logdir.parent / "c.yaml", cartpole_config(trainer=LONG))
    proc = start_cli("train", "--config", config, "--logdir", logdir)
    workers = _worker_pids(proc, 2)
    run_dir = _wait_for_steps(logdir)
    time.sleep(1.0)
    proc.send_signal(signum)
    code, _, err = _finish(proc)
    assert code == 0, err
    assert _gone(workers)
    summary = _summary(run_dir)
    assert summary["stop_reason"] == signal.Signals(signum).name and summary["env_steps"] > 0
    state = load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")
    assert state["run"]["env_steps"] == summary["env_steps"]
    if signum == signal.SIGINT:
        target = summary["env_steps"] + 3000
        done = run_cli("train", "--resume", run_dir, "--set", f"trainer.total_steps={target}")
        assert done.returncode == 0, done.stderr
        resumed = _summary(run_dir)
        assert resumed["env_steps"] >= target and resumed["updates"] > summary["updates"]


def test_worker_exception_is_reported_with_traceback_env_and_rank(logdir):
    config = write_config(logdir.parent / "c.yaml", cartpole_config(
        env={"id": "fault_envs:RaisingCartPole-v0", "kwargs": {"fail_after": 200}}, trainer=LONG))
    done = run_cli("train", "--config", config, "--logdir", logdir)
    assert done.returncode == 1
    assert re.search(r"^worker (\d) raised an exception: framework.rl.envs.faults.EnvError: environment "
                     r"fault_envs:RaisingCartPole-v0 \(worker \1, env \d\) raised in step: RuntimeError: injected "
                     r"fault in step\nTraceback \(most recent call last\):", done.stderr,
                     flags=re.MULTILINE), done.stderr
    assert "\nRuntimeError: injected fault in step\n" in done.stderr  # the env's own traceback, chained
    assert "stopping the run (on_worker_failure: abort): worker" in done.stderr
    summary = _summary(only_run_dir(logdir))
    assert summary["stop_reason"] == "worker failure" and summary["exit_code"] == 1
    assert (only_run_dir(logdir) / "checkpoints" / "checkpoint.npz").exists()


def test_restart_policy_restarts_then_gives_up(logdir):
    config = write_config(logdir.parent / "c.yaml", cartpole_config(
        env={"id": "fault_envs:RaisingCartPole-v0", "kwargs": {"fail_after": 100}},
        trainer={**LONG, "workers": 1, "on_worker_failure": "restart", "max_restarts": 2}))
    done = run_cli("train", "--config", config, "--logdir", logdir)
    assert done.returncode == 1
    reports = re.findall(r"^worker 0 raised an exception: framework.rl.envs.faults.EnvError: .* injected fault in "
                         r"step\nTraceback", done.stderr, flags=re.MULTILINE)
    assert len(reports) == 3, done.stderr
    assert "restart 1 of at most 2" in done.stderr and "restart 2 of at most 2" in done.stderr
    assert "stopping the run (max_restarts (2) used up): worker 0 raised an exception" in done.stderr
    assert _summary(only_run_dir(logdir))["worker_restarts"] == 2


def test_a_worker_that_does_not_stop_in_time_is_terminated_and_reported_as_such(logdir):
    config = write_config(logdir.parent / "c.yaml", cartpole_config(
        env={"id": "fault_envs:StallingCartPole-v0", "kwargs": {"stall_after": 30}},
        trainer={"max_seconds": 2, "join_timeout_s": 0.5}))
    done = run_cli("train", "--config", config, "--logdir", logdir)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^worker \d did not stop within trainer.join_timeout_s \(0.5 s\) and was terminated by the "
                     r"trainer$", done.stderr, re.MULTILINE), done.stderr
    assert "killed by signal" not in done.stderr
    assert _summary(only_run_dir(logdir))["stop_reason"] == "max_seconds reached"


def test_sigkill_of_a_worker_aborts(logdir):
    config = write_config(logdir.parent / "c.yaml", cartpole_config(trainer=LONG))
    proc = start_cli("train", "--config", config, "--logdir", logdir)
    workers = _worker_pids(proc, 2)
    _wait_for_steps(logdir)
    os.kill(workers[1], signal.SIGKILL)
    code, _, err = _finish(proc)
    assert code == 1
    assert re.search(r"worker \d was killed by signal SIGKILL", err), err
    assert "on_worker_failure: abort" in err
    assert _gone(workers)


def test_sigkill_of_a_worker_with_restart_continues(logdir):
    config = write_config(logdir.parent / "c.yaml", cartpole_config(
        trainer={"on_worker_failure": "restart", "total_steps": 15_000}))
    proc = start_cli("train", "--config", config, "--logdir", logdir)
    workers = _worker_pids(proc, 2)
    run_dir = _wait_for_steps(logdir)
    os.kill(workers[0], signal.SIGKILL)
    code, _, err = _finish(proc)
    assert code == 0, err
    assert re.search(r"worker \d was killed by signal SIGKILL", err)
    assert re.search(r"restarting worker \d with a new seed \(restart 1 of at most 10\)", err)
    summary = _summary(run_dir)
    assert summary["worker_restarts"] == 1 and summary["env_steps"] >= 15_000
    assert _gone(workers)


def test_sigkill_of_the_main_process_leaves_no_worker(logdir):
    config = write_config(logdir.parent / "c.yaml", cartpole_config(trainer=LONG))
    proc = start_cli("train", "--config", config, "--logdir", logdir)
    workers = _worker_pids(proc, 2)
    proc.kill()
    proc.communicate(timeout=30)
    assert _gone(workers, timeout=10)


def test_non_finite_updates_are_never_applied_and_stop_the_run(logdir):
    config = write_config(logdir.parent / "c.yaml", cartpole_config(
        env={"id": "fault_envs:NonFiniteCartPole-v0"}, algorithm={"max_nonfinite_updates": 5}, trainer=LONG))
    done = run_cli("train", "--config", config, "--logdir", logdir)
    assert done.returncode == 1
    assert "updates in a row with a non-finite loss or gradient (algorithm.max_nonfinite_updates = 5)" in done.stderr
    run_dir = only_run_dir(logdir)
    summary = _summary(run_dir)
    assert summary["stop_reason"] == "non-finite updates"
    assert summary["updates"] == 0 and summary["skipped_updates"] >= 5
    state = load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")
    assert all(np.isfinite(v).all() for v in state["model"].values())
    assert all(np.all(v == 0) for k, v in state["optimizer"]["state"][0].items() if k == "exp_avg")


def _limit_file_size():
    """Files may grow to 48 KiB: room for the shared-memory segments of the run, not for its checkpoint."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (48 * 1024, 48 * 1024))


def test_checkpoint_write_failure_keeps_previous_checkpoint(logdir):
    config = write_config(logdir.parent / "c.yaml", cartpole_config(
        trainer={"total_steps": 3000}, model={"hidden": [1024]}, logging={"tensorboard": False}))
    assert run_cli("train", "--config", config, "--logdir", logdir).returncode == 0
    run_dir = only_run_dir(logdir)
    checkpoint = run_dir / "checkpoints" / "checkpoint.npz"
    before = checkpoint.read_bytes()
    assert len(before) > 64 * 1024
    done = subprocess.run([*cli_command("train"), "--resume", str(run_dir), "--set", "trainer.total_steps=6000"],
                          capture_output=True, text=True, timeout=120, env=cli_env(), preexec_fn=_limit_file_size)
    assert done.returncode == 1, done.stderr
    assert f"final checkpoint failed: could not write checkpoint '{checkpoint}': File too large; the previous " \
           f"checkpoint is kept" in done.stderr
    assert checkpoint.read_bytes() == before
    assert os.listdir(checkpoint.parent) == ["checkpoint.npz"]
    load_checkpoint(checkpoint)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "other model"])
def test_bad_checkpoint_on_resume_is_refused_and_left_alone(run_copy, damage):
    run_dir = run_copy
    checkpoint = run_dir / "checkpoints" / "checkpoint.npz"
    data = checkpoint.read_bytes()
    overrides = []
    if damage == "other model":
        overrides = ["--set", "model.hidden=[16]"]
        message = "config key 'model.hidden': got [16] on --resume; allowed: [32], what the run was trained with"
    else:
        checkpoint.write_bytes(data[: len(data) // 3] if damage == "truncate" else os.urandom(len(data)))
        message = f"checkpoint '{checkpoint}' is truncated or corrupt and cannot be loaded ("
    before = checkpoint.read_bytes()
    files = sorted(p.name for p in run_dir.iterdir())
    config_text = (run_dir / "config.yaml").read_text()
    done = run_cli("train", "--resume", run_dir, *overrides)
    assert done.returncode == 2
    assert done.stderr.startswith(f"train: error: {message}"), done.stderr
    assert done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
    assert checkpoint.read_bytes() == before
    assert sorted(p.name for p in run_dir.iterdir()) == files
    assert (run_dir / "config.yaml").read_text() == config_text


def _tiny_file_limit():
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


def test_no_room_in_shared_memory_is_a_clear_error_before_any_worker_starts(logdir):
    """Shared segments count against the file-size limit: a model bigger than it cannot be shared."""
    config = write_config(logdir.parent / "c.yaml", cartpole_config(model={"hidden": [1024]}))
    done = subprocess.run([*cli_command("train"), "--config", str(config), "--logdir", str(logdir)],
                          capture_output=True, text=True, timeout=120, env=cli_env(), preexec_fn=_tiny_file_limit)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("train: error: cannot place the model, optimizer state and run statistics in shared "
                           "memory (file_descriptor): "), done.stderr
    assert not logdir.exists() or not any(logdir.iterdir())  # a run refused before it starts leaves no directory


def test_unwritable_logdir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    config = write_config(tmp_path / "c.yaml", cartpole_config())
    done = run_cli("train", "--config", config, "--logdir", blocker / "runs")
    assert done.returncode == 2
    assert done.stderr == f"train: error: cannot create a run directory in '{blocker / 'runs'}': Not a directory\n"


def test_an_evaluation_that_raises_is_reported_once_and_training_goes_on(logdir):
    config = write_config(logdir.parent / "c.yaml", cartpole_config(
        env={"id": "fault_envs:EvaluationFaultCartPole-v0"},
        trainer={"total_steps": 6000, "eval_every_s": 0.2, "eval_episodes": 2}))
    done = run_cli("train", "--config", config, "--logdir", logdir)
    assert done.returncode == 1, done.stderr  # the final evaluation failed too
    periodic = re.findall(r"^evaluation failed: .*injected fault in an evaluation$", done.stderr, re.MULTILINE)
    assert len(periodic) == 1, done.stderr
    assert re.search(r"^final evaluation failed: .*injected fault in an evaluation$", done.stderr, re.MULTILINE)
    assert "Traceback" not in done.stderr
    result = _summary(only_run_dir(logdir))
    assert result["stop_reason"] == "total_steps reached" and result["env_steps"] >= 6000
    assert "evaluation" not in result and result["exit_code"] == 1
    evaluated = run_cli("evaluate", "--run", only_run_dir(logdir), "--episodes", 2)  # the same env raises there
    assert evaluated.returncode == 1 and evaluated.stdout == ""
    assert evaluated.stderr == ("evaluate: evaluation failed: EnvError: environment "
                                "fault_envs:EvaluationFaultCartPole-v0 (worker 0, env 0) raised in step: RuntimeError: "
                                "injected fault in an evaluation\n"), evaluated.stderr
