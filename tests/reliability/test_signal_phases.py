"""Stop signals in every phase of `train` (fault 13): SIGINT (Ctrl-C, to the process group), SIGTERM (to the main
process) and SIGHUP (a closed terminal: to the group, or a real pty hangup), during imports, start-up, the start of
the workers, training, a checkpoint write and shutdown. Each phase has the outcome stop_signals documents.

SIGINT is not sent while Python imports the tensor library: before the command's first line runs, Python's own
handler raises KeyboardInterrupt, and CPython loses one now and then (a C path that clears errors); about one in
forty tries here went on running. The command records signals from its first line on."""
import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import termios
import threading
import time

import pytest

from framework.train.checkpoint import load_checkpoint
from reliability_support import (Train, fast_config, run_cli, still_alive, wait_for_file, wait_for_run_dir,
                                 wait_until, worker_pids, write_config)
from train_cli import cli_command, summary

pytestmark = pytest.mark.timeout(240)
SIGNALS = {"INT to the group": (signal.SIGINT, True), "TERM to the main process": (signal.SIGTERM, False),
           "HUP to the group": (signal.SIGHUP, True)}
BAD_OUTPUT = ("Fatal Python error", "worker failure", "was killed by signal", "Exception in thread")


def _send(run: Train, signum: int, group: bool) -> None:
    (os.killpg if group else os.kill)(run.pid, signum)


def _start(watch, tmp_path, logdir, python_flags=(), process_env=None, prefix=(), **sections) -> Train:
    config = write_config(tmp_path / "c.yaml", fast_config(**sections))
    return Train(watch, "--config", config, "--logdir", logdir, python_flags=python_flags, start_new_session=True,
                 env=process_env, prefix=prefix)


def _assert_nothing_written(logdir) -> None:
    assert os.listdir(logdir) == [], os.listdir(logdir)


def _assert_stopped_cleanly(run: Train, logdir, signum: int) -> dict:
    """Exit 0, no stray output, the stop reason, a final checkpoint that matches the summary."""
    assert run.finish() == 0, run.stderr
    assert not any(bad in run.stderr for bad in BAD_OUTPUT) and "Traceback" not in run.stderr, run.stderr
    run_dir = wait_for_run_dir(logdir)
    result = summary(run_dir)
    assert result["stop_reason"] == signal.Signals(signum).name and result["exit_code"] == 0
    saved = load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")["run"]
    assert saved["env_steps"] == result["env_steps"]
    return result


@pytest.mark.fault("13", "SIGTERM or SIGHUP while Python imports the tensor library, before any of the command's "
                         "code runs (once `-X importtime` shows numpy imported)",
                   "Python's default: the process ends by the signal (or, landing a moment later, as in start-up); "
                   "no run directory, no process left")
@pytest.mark.parametrize("how", ["TERM to the main process", "HUP to the group"])
def test_signal_while_python_imports_the_library_ends_the_process(watch, tmp_path, logdir, how):
    signum, group = SIGNALS[how]
    run = _start(watch, tmp_path, logdir, python_flags=["-X", "importtime"])
    run.wait_for(r"\| +numpy$")
    _send(run, signum, group)
    code = run.finish()
    assert code in (-signum, 128 + signum), (code, run.stderr)
    _assert_nothing_written(logdir)


@pytest.mark.fault("13", "SIGINT, SIGTERM or SIGHUP during start-up (config checks and building the model take "
                         "seconds: an environment slow to make)",
                   "the start is abandoned at its next step: exit 128 + the signal's number, one line 'stopped by "
                   "SIG... before the run started; nothing was written'; no run directory, no process left")
@pytest.mark.parametrize("how", [pytest.param(how, marks=[pytest.mark.slow] if how.startswith("HUP") else [])
                                 for how in SIGNALS])
def test_signal_during_start_up_abandons_the_start(watch, tmp_path, logdir, how):
    signum, group = SIGNALS[how]
    run = _start(watch, tmp_path, logdir, env={"id": "fault_envs:SlowToMakeCartPole-v0", "kwargs": {"seconds": 2}})
    run.wait_for("^making SlowToMakeCartPole$")
    _send(run, signum, group)
    assert run.finish() == 128 + signum, run.stderr
    name = signal.Signals(signum).name
    assert run.stderr.endswith(f"train: stopped by {name} before the run started; nothing was written\n"), run.stderr
    _assert_nothing_written(logdir)


@pytest.mark.fault("13", "SIGINT, SIGTERM or SIGHUP while 8 spawn workers start (as soon as the first worker "
                         "process exists)",
                   "no worker dies half-started (they block SIGINT and SIGHUP from birth): exit 0, stop reason the "
                   "signal, final checkpoint; no traceback, no 'Fatal Python error', no worker reported killed; "
                   "`--resume` continues (after SIGINT)")
# HUP stops a run as INT does (nohup and a closed terminal have tests of their own): its case is a long run
@pytest.mark.parametrize("how", [pytest.param(how, marks=[pytest.mark.slow] if how.startswith("HUP") else [])
                                 for how in SIGNALS])
def test_signal_while_workers_start_stops_with_a_final_checkpoint(watch, tmp_path, logdir, how):
    signum, group = SIGNALS[how]
    run = _start(watch, tmp_path, logdir, trainer={"workers": 8, "start_method": "spawn"})
    run.wait_for("^run directory: ")
    worker_pids(run.pid, 1)
    _send(run, signum, group)
    result = _assert_stopped_cleanly(run, logdir, signum)
    run_dir = wait_for_run_dir(logdir)
    generations = load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")["run"]["generations"]
    assert 1 <= sum(generations) <= 8
    if signum == signal.SIGINT:
        done = run_cli(watch, "--resume", run_dir, "--set", f"trainer.total_steps={result['env_steps'] + 2000}")
        assert done.returncode == 0, done.stderr


@pytest.mark.fault("13", "Ctrl-C (SIGINT to the process group) 0.3 s and 1 s into the start of 8 spawn workers "
                         "(after the run directory appears)",
                   "exit 0 with a final checkpoint, stop reason SIGINT; never a 'Fatal Python error', a traceback "
                   "or a worker reported killed (today: hundreds of lines of mixed tracebacks and exit 1, 'worker "
                   "failure'); no process left")
@pytest.mark.parametrize("delay", [0.3, pytest.param(1.0, marks=pytest.mark.slow)])
def test_ctrl_c_into_the_start_of_8_workers_stops_cleanly(watch, tmp_path, logdir, delay):
    run = _start(watch, tmp_path, logdir, trainer={"workers": 8, "start_method": "spawn"})
    run.wait_for("^run directory: ")
    time.sleep(delay)  # the injection: a Ctrl-C at this moment, whatever the workers are doing
    os.killpg(run.pid, signal.SIGINT)
    _assert_stopped_cleanly(run, logdir, signal.SIGINT)


@pytest.mark.fault("13", "SIGHUP to the process group while training (the shell of a closed terminal forwards it)",
                   "treated like SIGTERM: exit 0, stop reason SIGHUP, final checkpoint; the workers and the "
                   "resource tracker ignore it")
def test_sighup_while_training_checkpoints_like_sigterm(watch, tmp_path, logdir):
    run = _start(watch, tmp_path, logdir, trainer={"checkpoint_every_s": 0.3})
    run_dir = wait_for_run_dir(logdir)
    wait_for_file(run_dir / "checkpoints" / "checkpoint.npz")
    workers = worker_pids(run.pid, 2)
    os.killpg(run.pid, signal.SIGHUP)
    _assert_stopped_cleanly(run, logdir, signal.SIGHUP)
    assert still_alive(workers, 5) == []


@pytest.mark.fault("13", "SIGHUP to the process group of `nohup train ...` while training (nohup started it with "
                         "SIGHUP ignored)",
                   "SIGHUP stays ignored: the run keeps training; a SIGTERM then stops it (stop reason SIGTERM, "
                   "exit 0, final checkpoint)")
def test_nohup_keeps_a_run_training_through_sighup(watch, tmp_path, logdir):
    run = _start(watch, tmp_path, logdir, prefix=["nohup"], trainer={"checkpoint_every_s": 0.3})
    run_dir = wait_for_run_dir(logdir)
    wait_for_file(run_dir / "checkpoints" / "checkpoint.npz")
    workers = worker_pids(run.pid, 2)
    os.killpg(run.pid, signal.SIGHUP)
    assert still_alive([run.pid, *workers], 2) == [run.pid, *workers], run.stderr
    os.kill(run.pid, signal.SIGTERM)
    _assert_stopped_cleanly(run, logdir, signal.SIGTERM)


@pytest.mark.fault("13", "the terminal of a run closes: `train` runs as the session leader of a pty (progress bar "
                         "on, workers that stall so that shutdown has lines to say), and the pty's master side is "
                         "closed while it trains",
                   "the kernel's SIGHUP stops the run like SIGTERM; writes to the dead terminal (EIO) end its output "
                   "quietly: exit 0, stop reason SIGHUP, final checkpoint")
def test_closing_the_terminal_stops_the_run_with_a_final_checkpoint(watch, tmp_path, logdir):
    config = write_config(tmp_path / "c.yaml", fast_config(
        logging={"progress": True}, trainer={"join_timeout_s": 1},
        env={"id": "fault_envs:StallingCartPole-v0", "kwargs": {"stall_after": 300}}))
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal of 100 columns

    def take_terminal():
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([*cli_command("train"), "--config", str(config), "--logdir", str(logdir)],
                            stdin=slave, stdout=slave, stderr=slave, env=watch.env(), start_new_session=True,
                            preexec_fn=take_terminal)
    os.close(slave)
    seen = bytearray()

    def read():
        try:
            while chunk := os.read(master, 4096):
                seen.extend(chunk)
        except OSError:  # EIO once the other side is gone
            pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert wait_until(lambda: b"run directory:" in seen and b"step" in seen, 60), bytes(seen)
    os.close(master)  # the terminal goes away: SIGHUP to its session leader
    assert proc.wait(120) == 0
    run_dir = wait_for_run_dir(logdir)
    assert summary(run_dir)["stop_reason"] == "SIGHUP"
    load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")


@pytest.mark.fault("13", "SIGTERM while a checkpoint is being written (a 12 MiB checkpoint every 50 ms; the signal "
                         "is sent as soon as the temp file exists)",
                   "the write is not cut short: exit 0, stop reason SIGTERM, a loadable final checkpoint, no temp "
                   "file left")
def test_sigterm_during_a_checkpoint_write_lets_it_finish(watch, tmp_path, logdir):
    run = _start(watch, tmp_path, logdir, model={"hidden": [1024, 1024]},
                 trainer={"checkpoint_every_s": 0.05, "workers": 1})
    checkpoints = wait_for_run_dir(logdir) / "checkpoints"
    wait_for_file(checkpoints / "checkpoint.npz")
    assert wait_until(lambda: any(p.name.endswith(".tmp") for p in checkpoints.iterdir()), 120, interval=0.002)
    run.proc.send_signal(signal.SIGTERM)
    _assert_stopped_cleanly(run, logdir, signal.SIGTERM)
    assert os.listdir(checkpoints) == ["checkpoint.npz"]


@pytest.mark.fault("13", "a second and third signal (SIGINT and SIGHUP to the group) during shutdown, while the "
                         "trainer waits for stalled workers (`join_timeout_s: 3`) after a SIGTERM",
                   "later signals change nothing: the workers are terminated after join_timeout_s and reported as "
                   "such; exit 0, stop reason SIGTERM, final checkpoint")
def test_signals_during_shutdown_change_nothing(watch, tmp_path, logdir):
    run = _start(watch, tmp_path, logdir, env={"id": "fault_envs:StallingCartPole-v0", "kwargs": {"stall_after": 200}},
                 trainer={"join_timeout_s": 3})
    wait_for_run_dir(logdir)
    worker_pids(run.pid, 2)
    time.sleep(0.5)  # the workers stall in their environments by now
    run.proc.send_signal(signal.SIGTERM)
    time.sleep(1.0)  # the injection: the main process is waiting for its workers
    os.killpg(run.pid, signal.SIGINT)
    os.killpg(run.pid, signal.SIGHUP)
    assert run.finish() == 0, run.stderr
    assert re.search(r"did not stop within trainer\.join_timeout_s \(3 s\) and was terminated by the trainer",
                     run.stderr), run.stderr
    assert summary(wait_for_run_dir(logdir))["stop_reason"] == "SIGTERM"


@pytest.mark.fault("13", "SIGTERM while a run with 1000 spawn workers starts (as soon as the first worker exists)",
                   "honoured at once: no further worker is started, the started ones are stopped (terminated after "
                   "`join_timeout_s: 2` if still booting) and reported in one line; exit 0 within a minute, "
                   "stop reason SIGTERM, final checkpoint with fewer than 1000 ranks ever started")
def test_sigterm_during_a_slow_start_of_1000_workers_is_honoured(watch, tmp_path, logdir):
    # The room check would refuse 1000 workers' memory on a small machine; this test never lets more than a few
    # start, so it says a worker takes 1 byte.
    run = _start(watch, tmp_path, logdir, process_env=watch.env(HOGSHARE_WORKER_BYTES="1"),
                 trainer={"workers": 1000, "start_method": "spawn", "join_timeout_s": 2})
    run.wait_for("^run directory: ")
    worker_pids(run.pid, 1)
    run.proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    assert run.finish(timeout=120) == 0, run.stderr
    assert time.monotonic() - sent < 60
    assert len([line for line in run.stderr.splitlines() if "did not stop" in line]) <= 4, run.stderr
    run_dir = wait_for_run_dir(logdir)
    assert summary(run_dir)["stop_reason"] == "SIGTERM"
    started = load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")["run"]["generations"]
    assert 1 <= sum(started) < 1000
