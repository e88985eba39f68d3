"""What bounds a run and its evaluations, with real processes and real signals: an episode that never ends cannot
hold up max_seconds, a stop signal or `evaluate`; a worker that exits with code 0 before it was told to stop is a
failure; workers that would not fit in memory are refused and a start-up longer than max_seconds ends the run;
`evaluate --record` stops cleanly on SIGTERM, SIGHUP and SIGINT and its killed temp files go; and both commands
work with stdout or stderr closed."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from framework.train.checkpoint import load_checkpoint
from run_configs import cartpole_config
from train_cli import cli_command, run_cli, start_cli, summary, train, write_config

ENDLESS = {"id": "fault_envs:EndlessCartPole-v0", "envs_per_worker": 2}
"""Episodes that never end: no termination, no time limit."""


def _endless_run(tmp_path: Path, **trainer) -> dict:
    return cartpole_config(total_steps=10**9, max_seconds=60, env=ENDLESS,
                           trainer={"workers": 1, "eval_every_s": 0.3, "eval_episodes": 1, "eval_max_steps": 10**9,
                                    **trainer})


def _wait_for_line(proc: subprocess.Popen, start: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if line.startswith(start):
            return
        assert line or proc.poll() is None, "train ended before printing " + start
    raise AssertionError(f"no line starting {start!r} within {timeout} s")


@pytest.mark.fault("21", "an env without a time limit whose episodes never end, evaluated every 0.3 s of a 2 s run",
                   "the run ends at max_seconds (the periodic evaluation cut there), the final evaluation at eval_max_seconds")
def test_max_seconds_ends_a_run_whose_evaluation_never_ends(tmp_path, watch):
    """The periodic evaluation stops at what is left of max_seconds: without, it ran its whole 12 s and the run
    ended after 12.3 s. The bound between (4 times the run's 2 s) leaves a loaded machine room."""
    done, run = train(tmp_path, _endless_run(tmp_path, max_seconds=2, eval_max_seconds=12), timeout=90,
                      env=watch.env())
    assert done.returncode == 0, done.stderr
    s = summary(run)
    assert s["stop_reason"] == "max_seconds reached" and s["wall_seconds"] < 8, s
    assert s["evaluation"]["episodes_cut"] == 1  # the final evaluation, cut at eval_max_seconds


@pytest.mark.fault("21", "SIGTERM or SIGINT during an evaluation episode that never ends",
                   "the run stops at once, final checkpoint written, exit 0")
@pytest.mark.parametrize("signum", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)])
def test_a_stop_signal_cuts_an_evaluation_that_never_ends(tmp_path, watch, signum):
    """A stop signal during the periodic evaluation stops the run at once (without, the evaluation ran its 12 s
    first: the run ended after 12.3 s; the bound between leaves a loaded machine 6 s); the final checkpoint is
    written and the run exits 0."""
    config = write_config(tmp_path / "c.yaml", _endless_run(tmp_path, eval_max_seconds=12))
    proc = start_cli("train", "--config", config, "--logdir", tmp_path / "runs", env=watch.env())
    try:
        _wait_for_line(proc, "run directory: ")
        time.sleep(1.5)  # the first evaluation started at 0.3 s and runs until 12.3 s
        proc.send_signal(signum)
        proc.wait(timeout=90)
    finally:
        proc.kill()
    run = next((tmp_path / "runs").iterdir())
    s = summary(run)
    assert proc.returncode == 0 and s["stop_reason"] == signal.Signals(signum).name, s
    assert s["wall_seconds"] < 8, s
    assert load_checkpoint(run / "checkpoints" / "checkpoint.npz")["run"]["env_steps"] == s["env_steps"]


@pytest.fixture(scope="module")
def endless_run_dir(tmp_path_factory):
    """A short run on the endless env, whose config bounds evaluation episodes at 300 steps."""
    done, run = train(tmp_path_factory.mktemp("endless"),
                      cartpole_config(total_steps=400, env=ENDLESS, trainer={"eval_max_steps": 300}))
    assert done.returncode == 0, done.stderr
    return run


@pytest.mark.fault("21", "evaluate of a run whose episodes never end",
                   "episodes cut at trainer.eval_max_steps or --max-steps, and said so")
def test_evaluate_cuts_episodes_at_the_step_bound(endless_run_dir):
    done = run_cli("evaluate", "--run", endless_run_dir, "--episodes", 2, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("return over 2 greedy episodes: 300 ± 0 (2 cut short, at "
                                  "trainer.eval_max_steps = 300 steps"), done.stdout
    done = run_cli("evaluate", "--run", endless_run_dir, "--episodes", 2, "--max-steps", 50, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("return over 2 greedy episodes: 50.0 ± 0 (2 cut"), done


@pytest.mark.fault("19", "evaluate --max-steps 0",
                   "exit 2, one line naming the argument and what is allowed")
def test_evaluate_refuses_a_bad_step_bound(endless_run_dir):
    done = run_cli("evaluate", "--run", endless_run_dir, "--max-steps", 0)
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith("evaluate: error: argument --max-steps: got 0; allowed: an integer >= 1")


def _temp_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def _start_recording(run: Path, target: Path, env: dict) -> subprocess.Popen:
    """evaluate --record of a long episode, returned once its temp file is being written."""
    target.parent.mkdir(exist_ok=True)
    proc = start_cli("evaluate", "--run", run, "--episodes", 1, "--max-steps", 10**6, "--record", target, env=env)
    deadline = time.monotonic() + 60
    while not _temp_files(target.parent):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    time.sleep(1.0)  # rendering (SDL) has started and frames are being encoded
    return proc


@pytest.mark.fault("13", "SIGTERM, SIGHUP or SIGINT to evaluate --record while it renders (SDL running)",
                   "exit 128 + the signal, one line, no file and no temp file")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_ends_a_recording_and_removes_its_temp_file(endless_run_dir, tmp_path, watch, signum):
    target = tmp_path / "videos" / "agent.mp4"
    proc = _start_recording(endless_run_dir, target, watch.env())
    proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signum, err
    assert err == f"evaluate: stopped by {signal.Signals(signum).name}; nothing was written\n" and out == ""
    assert list(target.parent.iterdir()) == []


@pytest.mark.fault("13", "SIGTERM to evaluate --record of an env whose render swallows every exception",
                   "the recording stops at its next frame: exit 143, one line, no file and no temp file")
def test_a_stop_signal_whose_exception_an_env_swallows_still_ends_a_recording(tmp_path, watch):
    done, run = train(tmp_path, cartpole_config(total_steps=400, env={
        "id": "fault_envs:SwallowingRenderCartPole-v0", "envs_per_worker": 2}))
    assert done.returncode == 0, done.stderr
    target = tmp_path / "videos" / "agent.gif"
    proc = _start_recording(run, target, watch.env())
    proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err == "evaluate: stopped by SIGTERM; nothing was written\n" and out == ""
    assert list(target.parent.iterdir()) == []


@pytest.mark.fault("15", "SIGKILL of evaluate --record mid-recording",
                   "the next recording of the same file removes the temp file left")
def test_a_recording_removes_the_temp_file_of_one_killed_before_it(endless_run_dir, tmp_path, watch):
    target = tmp_path / "videos" / "agent.gif"
    proc = _start_recording(endless_run_dir, target, watch.env())
    proc.kill()
    proc.communicate()
    assert len(_temp_files(target.parent)) == 1  # SIGKILL leaves it
    done = run_cli("evaluate", "--run", endless_run_dir, "--episodes", 1, "--max-steps", 5, "--record", target,
                   env=watch.env())
    assert done.returncode == 0, done.stderr
    assert [p.name for p in target.parent.iterdir()] == [target.name]


@pytest.mark.fault("15", "a second recording of a file being recorded",
                   "the live recording's temp file is kept (it is locked)")
def test_a_recording_keeps_the_temp_file_of_a_live_one(endless_run_dir, tmp_path, watch):
    target = tmp_path / "videos" / "agent.gif"
    proc = _start_recording(endless_run_dir, target, watch.env())
    try:
        live = _temp_files(target.parent)
        done = run_cli("evaluate", "--run", endless_run_dir, "--episodes", 1, "--max-steps", 5, "--record", target,
                   env=watch.env())
        assert done.returncode == 0, done.stderr
        assert _temp_files(target.parent) == live  # still being written
    finally:
        proc.kill()
        proc.communicate()


@pytest.mark.fault("22", "an env calling os._exit(0) or os._exit(3) in every worker",
                   "the run fails (exit 1) naming the rank and the exit code")
@pytest.mark.parametrize("code", [0, 3])
def test_a_worker_that_exits_before_it_was_told_to_stop_fails_the_run(tmp_path, watch, code):
    done, run = train(tmp_path, cartpole_config(total_steps=10**9, env={"id": "fault_envs:ExitingCartPole-v0",
                                                                        "kwargs": {"code": code}}),
                      env=watch.env())
    assert done.returncode == 1
    s = summary(run)
    assert s["stop_reason"] == "worker failure", s
    how = "exited with code 0 before it was told to stop" if code == 0 else f"exited with code {code}"
    assert re.search(rf"^worker [01] {how}$", done.stderr, re.M), done.stderr
    assert re.search(rf"^stopping the run \(on_worker_failure: abort\): worker [01] {how}$", done.stderr, re.M)


@pytest.mark.fault("22", "an env calling os._exit(0) under on_worker_failure: restart",
                   "restarted up to max_restarts, then the run fails")
def test_a_worker_that_exits_with_code_0_is_restarted_under_restart(tmp_path, watch):
    done, run = train(tmp_path, cartpole_config(total_steps=10**9, env={"id": "fault_envs:ExitingCartPole-v0"},
                                                trainer={"on_worker_failure": "restart", "max_restarts": 3}),
                      env=watch.env())
    assert done.returncode == 1
    s = summary(run)
    assert s["worker_restarts"] == 3 and s["stop_reason"] == "worker failure", s
    assert "restarting worker" in done.stderr and "max_restarts (3) used up" in done.stderr, done.stderr


@pytest.mark.fault("14", "workers whose own memory exceeds what the machine has (HOGSHARE_WORKER_BYTES = 10 TB)",
                   "exit 2, one line naming trainer.workers and the room, no run directory")
def test_workers_that_would_not_fit_in_memory_are_refused_before_anything_starts(tmp_path, watch):
    done, run = train(tmp_path, cartpole_config(), env=watch.env(HOGSHARE_WORKER_BYTES=str(10**13)))  # 10 TB each
    assert done.returncode == 2 and run is None and not (tmp_path / "runs").exists()
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr
    assert re.fullmatch(r"train: error: config key 'trainer.workers': got 2 workers, whose processes need about .* of "
                        r"memory of their own \(.* each\); allowed: at most 0 processes here \(.* of available "
                        r"memory.*\)\n",
                        done.stderr), done.stderr


@pytest.mark.fault("14", "max_seconds spent while 8 workers start",
                   "no further worker started, the run ends cleanly (exit 0, max_seconds reached)")
def test_starting_workers_counts_against_max_seconds(tmp_path, watch):
    """A budget spent while workers start ends the run cleanly with the workers started so far."""
    done, run = train(tmp_path, cartpole_config(total_steps=10**9, max_seconds=0.001, trainer={"workers": 8}),
                      env=watch.env())
    assert done.returncode == 0, done.stderr
    s = summary(run)
    assert s["stop_reason"] == "max_seconds reached", s
    started = sum(load_checkpoint(run / "checkpoints" / "checkpoint.npz")["run"]["generations"])
    assert started < 8


def _closing(*fds: int):
    return lambda: [os.close(fd) for fd in fds]


@pytest.mark.fault("23", "train and evaluate started with stdout, stderr or both closed",
                   "both run normally (exit 0, summary written)")
@pytest.mark.parametrize("fds", [pytest.param((1,), marks=pytest.mark.slow), (2,), (1, 2)])
def test_train_and_evaluate_work_with_stdout_or_stderr_closed(tmp_path, watch, fds):
    config = write_config(tmp_path / "c.yaml", cartpole_config(total_steps=2000))
    streams = {name: subprocess.DEVNULL for fd, name in ((1, "stdout"), (2, "stderr")) if fd not in fds}
    trained = subprocess.run([*cli_command("train"), "--config", str(config), "--logdir", str(tmp_path / "runs")],
                             env=watch.env(), preexec_fn=_closing(*fds), timeout=120, **streams)
    assert trained.returncode == 0
    run = next((tmp_path / "runs").iterdir())
    assert summary(run)["stop_reason"] == "total_steps reached" and summary(run)["exit_code"] == 0
    evaluated = subprocess.run([*cli_command("evaluate"), "--run", str(run), "--episodes", "1"], env=watch.env(),
                               preexec_fn=_closing(*fds), timeout=120, **streams)
    assert evaluated.returncode == 0
    assert json.loads((run / "summary.json").read_text())["env_steps"] >= 2000


@pytest.mark.fault("23", "a Trainer run from Python in a process started with stderr closed",
                   "it trains and ends normally (its lines dropped)")
def test_a_trainer_runs_from_python_with_stderr_closed(tmp_path, watch):
    config = cartpole_config(total_steps=1000, logging={"logdir": str(tmp_path / "runs"), "progress": True})
    script = ("import sys, json; from framework.train.config import validate; from framework.train.trainer import "
              f"Trainer; result = Trainer(validate(json.loads({json.dumps(json.dumps(config))}))).run(); "
              "sys.exit(result.exit_code)")
    done = subprocess.run([sys.executable, "-c", script], env=watch.env(), preexec_fn=_closing(2), timeout=120,
                          stdout=subprocess.DEVNULL)
    assert done.returncode == 0
    assert summary(next((tmp_path / "runs").iterdir()))["stop_reason"] == "total_steps reached"
