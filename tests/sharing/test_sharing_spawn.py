"""spawn(): ranks, failures surfaced as exceptions, siblings stopped; lifecycle helpers."""
from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import sharing
from sharing import lifecycle
from sharing_workers import (exit_with, ignore_sigterm_forever, kill_self, raise_on, rank_writer,
                             report_mask_then_ignore, sleep_forever)

PROGRAMS = Path(__file__).with_name("sharing_programs.py")


def gone(pid: int) -> bool:
    """True when `pid` no longer runs (it is reaped, or a zombie waiting for a reaper)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_gone(pid: int, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while not gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.timeout(60)
def test_spawn_runs_every_rank_with_its_args(start_method):
    out = sharing.share_array(np.zeros(3))
    context = sharing.spawn(rank_writer, args=(out,), nprocs=3, start_method=start_method)
    np.testing.assert_array_equal(out, [10, 11, 12])
    assert len(context.pids()) == 3 and context.join() is True
    assert all(p.exitcode == 0 for p in context.processes)


@pytest.mark.timeout(60)
def test_join_false_returns_a_context_to_poll(start_method):
    out = sharing.share_array(np.zeros(2))
    context = sharing.spawn(rank_writer, args=(out,), nprocs=2, join=False, start_method=start_method)
    while not context.join(timeout=10):
        pass
    np.testing.assert_array_equal(out, [10, 11])


@pytest.mark.timeout(60)
def test_exception_in_a_child_is_raised_with_its_traceback_and_siblings_stop(start_method):
    pids = sharing.share_array(np.zeros(2, dtype=np.int64))
    with pytest.raises(sharing.ProcessRaisedException) as info:
        sharing.spawn(raise_on, args=(1, pids), nprocs=2, start_method=start_method)
    error = info.value
    assert error.error_index == 1 and error.pid == pids[1]
    assert "Process 1 terminated with the following error" in str(error)
    assert "ValueError: rank 1 failed on purpose" in str(error) and "Traceback" in str(error)
    assert isinstance(error, sharing.ProcessException)
    assert gone(int(pids[0]))                                          # the sleeping sibling was stopped


@pytest.mark.timeout(60)
def test_death_by_signal_is_reported_with_the_signal_name(start_method):
    with pytest.raises(sharing.ProcessExitedException, match="process 0 terminated with signal SIGKILL") as info:
        sharing.spawn(kill_self, start_method=start_method)
    assert info.value.signal_name == "SIGKILL" and info.value.exit_code == -signal.SIGKILL
    assert info.value.error_index == 0


@pytest.mark.timeout(60)
def test_non_zero_exit_is_reported_with_the_code(start_method):
    with pytest.raises(sharing.ProcessExitedException, match="process 0 terminated with exit code 3") as info:
        sharing.spawn(exit_with, args=(3,), start_method=start_method)
    assert info.value.exit_code == 3 and info.value.signal_name is None


@pytest.mark.timeout(60)
def test_join_with_a_timeout_returns_false_while_children_run(start_method):
    pids = sharing.share_array(np.zeros(1, dtype=np.int64))
    context = sharing.spawn(raise_on, args=(-1, pids), join=False, start_method=start_method)
    assert context.join(timeout=0.2) is False
    lifecycle.terminate_processes(context.processes, grace_s=5)
    assert context.processes[0].exitcode == -signal.SIGTERM


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(fn=42), TypeError, "fn must be callable"),
    (dict(nprocs=0), ValueError, "nprocs must be a positive int"),
    (dict(nprocs=True), ValueError, "nprocs must be a positive int"),
    (dict(start_method="thread"), ValueError, "unknown start method 'thread'.*spawn"),
])
def test_spawn_rejects_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        sharing.spawn(**{"fn": rank_writer, **kwargs})


def test_process_exceptions_pickle():
    raised = pickle.loads(pickle.dumps(sharing.ProcessRaisedException("boom", 1, 123)))
    exited = pickle.loads(pickle.dumps(sharing.ProcessExitedException("gone", 2, 456, -9, "SIGKILL")))
    assert (raised.msg, raised.error_index, raised.pid) == ("boom", 1, 123)
    assert (exited.error_index, exited.pid, exited.exit_code, exited.signal_name) == (2, 456, -9, "SIGKILL")


@pytest.mark.timeout(60)
def test_terminate_processes_escalates_to_sigkill():
    ctx = sharing.get_context("fork")
    ignoring = ctx.Event()
    stubborn = ctx.Process(target=ignore_sigterm_forever, args=(ignoring,))
    polite = ctx.Process(target=sleep_forever)
    never_started = ctx.Process(target=sleep_forever)
    stubborn.start(), polite.start()
    assert ignoring.wait(30)                             # the stubborn one ignores SIGTERM from here on
    lifecycle.terminate_processes([stubborn, polite, never_started], grace_s=0.5)
    assert stubborn.exitcode == -signal.SIGKILL and polite.exitcode == -signal.SIGTERM
    with pytest.raises(ValueError, match="grace_s"):
        lifecycle.terminate_processes([], grace_s=-1)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("start_method", ["spawn", "fork"])  # a forkserver child gets the server's mask
def test_children_start_with_signals_blocked_and_ignore_them_from_then_on(start_method):
    """A child started in signals_blocked begins with SIGINT and SIGHUP blocked (a Ctrl-C while it still imports
    stays pending); after ignore_signals both are discarded and it lives on."""
    ctx = sharing.get_context(start_method)
    report = ctx.SimpleQueue()
    child = ctx.Process(target=report_mask_then_ignore, args=(report,), daemon=True)
    with lifecycle.signals_blocked((signal.SIGINT, signal.SIGHUP)):
        child.start()
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == set()  # the parent's mask is back
    blocked = report.get()
    assert blocked & (1 << (signal.SIGINT - 1)) and blocked & (1 << (signal.SIGHUP - 1))
    assert report.get() == "ignoring"
    for signum in (signal.SIGINT, signal.SIGHUP):
        os.kill(child.pid, signum)
    child.join(1.0)
    assert child.exitcode is None  # still alive
    lifecycle.terminate_processes([child], grace_s=5)


def _orphan(mode: str, start_method: str) -> tuple[subprocess.Popen, dict]:
    program = subprocess.Popen([sys.executable, str(PROGRAMS), "orphan", mode, start_method], stdout=subprocess.PIPE,
                               text=True)
    report = json.loads(program.stdout.readline())
    program.stdout.close()
    return program, report


def _kill_if_alive(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.mark.timeout(60)
def test_child_dies_when_its_parent_is_killed(start_method):
    program, report = _orphan("armed", start_method)
    try:
        assert report["armed"] and not gone(report["child"])
        program.kill()
        program.wait()
        assert wait_gone(report["child"])
    finally:
        _kill_if_alive(report["child"])


@pytest.mark.timeout(60)
def test_child_whose_parent_is_already_gone_dies_at_once(start_method):
    program, report = _orphan("early", start_method)
    try:
        assert not report["armed"]
        program.wait()
        assert wait_gone(report["child"])
    finally:
        _kill_if_alive(report["child"])
