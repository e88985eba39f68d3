"""The two strategies: names, file_system's segments and manager, file_descriptor's absence from /dev/shm."""
from __future__ import annotations

import collections
import gc
import itertools
import json
import os
import re
import resource
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import sharing
from sharing_helpers import group_names
from sharing import lending, manager_client, memfd
from sharing_workers import hold_forever, send_and_exit, sum_received, wait_for_exit

PROGRAMS = Path(__file__).with_name("sharing_programs.py")
TIMEOUT = 60


def run_program(*args: str, env: dict | None = None, timeout: float = 120) -> dict:
    """Run a sharing_programs.py program to completion and return its JSON report."""
    done = subprocess.run([sys.executable, str(PROGRAMS), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def names_of_inode(ino: int) -> list[str]:
    """Every /dev/shm name of one segment."""
    found = []
    for entry in os.scandir("/dev/shm"):
        try:
            if entry.inode() == ino:
                found.append(entry.name)
        except OSError:
            pass
    return found


def wait_until(predicate, timeout: float = 15.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def test_strategy_names_and_default():
    assert sharing.get_all_sharing_strategies() == {"file_descriptor", "file_system"}
    assert sharing.get_sharing_strategy() == "file_descriptor"


def test_unknown_strategy_is_rejected_naming_the_valid_ones():
    with pytest.raises(ValueError, match="'shm'.*'file_descriptor', 'file_system'"):
        sharing.set_sharing_strategy("shm")
    assert sharing.get_sharing_strategy() == "file_descriptor"


def test_strategy_decides_new_storages_and_received_ones_keep_theirs():
    a = sharing.share_array(np.arange(3))
    sharing.set_sharing_strategy("file_system")
    try:
        b = sharing.share_array(np.arange(3))
    finally:
        sharing.set_sharing_strategy("file_descriptor")
    assert sharing.storage_of(a).strategy == "file_descriptor"
    assert sharing.storage_of(b).strategy == "file_system"
    q = sharing.SimpleQueue()
    q.put([a, b])
    got_a, got_b = q.get()
    assert sharing.storage_of(got_b) is sharing.storage_of(b) and sharing.storage_of(got_a) is sharing.storage_of(a)


@pytest.mark.timeout(90)
def test_file_system_segment_lives_while_in_flight_and_is_gone_after(monkeypatch, start_method):
    monkeypatch.setattr(sharing.strategies, "_current", "file_system")
    a = sharing.share_array(np.full(1000, 3.0))
    ino = os.stat(f"/dev/shm/{sharing.storage_of(a).name}").st_ino
    ctx = sharing.get_context(start_method)
    inbox, outbox = ctx.Queue(), ctx.Queue()
    inbox.put(a)
    assert wait_until(lambda: len(names_of_inode(ino)) == 2)   # the sender's own name and the one it sent
    del a
    gc.collect()
    assert len(names_of_inode(ino)) == 2                       # lent to the message: still there
    child = ctx.Process(target=sum_received, args=(inbox, outbox))
    child.start()
    assert outbox.get(timeout=TIMEOUT) == 3000.0
    child.join(TIMEOUT)
    lending.reap()                                             # received: the sender lets go
    assert wait_until(lambda: not names_of_inode(ino)), names_of_inode(ino)


@pytest.mark.timeout(90)
def test_message_in_flight_when_its_sender_exits(strategy, start_method):
    ctx = sharing.get_context(start_method)  # a file_system child joins this session's group (see conftest)
    outbox = ctx.Queue()
    child = ctx.Process(target=send_and_exit, args=(strategy, outbox, 5.0))
    child.start()
    child.join(TIMEOUT)
    assert child.exitcode == 0
    if strategy == "file_descriptor":
        with pytest.raises(RuntimeError, match=rf"process {child.pid} .*exited.*file_system"):
            outbox.get(timeout=TIMEOUT)
        return
    received = outbox.get(timeout=TIMEOUT)
    np.testing.assert_array_equal(received, 5.0)
    ino = os.stat(f"/dev/shm/{sharing.storage_of(received).name}").st_ino
    del received
    gc.collect()
    left = names_of_inode(ino)                                 # the dead sender's published name:
    assert len(left) == 1 and re.search(r"_m[0-9a-f]{16}$", left[0])   # kept until the group ends
    os.unlink(f"/dev/shm/{left[0]}")                          # (what the manager does then)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])  # a fork child inherits, not receives
def test_killed_receiver_loses_its_names_while_the_group_lives(monkeypatch, start_method):
    monkeypatch.setattr(sharing.strategies, "_current", "file_system")
    a = sharing.share_array(np.ones(10))
    ino = os.stat(f"/dev/shm/{sharing.storage_of(a).name}").st_ino
    ctx = sharing.get_context(start_method)
    ready = ctx.SimpleQueue()
    child = ctx.Process(target=hold_forever, args=(a, ready))
    child.start()
    ready.get()
    assert len(names_of_inode(ino)) == 3                       # ours, the one we sent it under, the child's
    os.kill(child.pid, signal.SIGKILL)
    child.join(TIMEOUT)
    assert wait_until(lambda: len(names_of_inode(ino)) == 2)   # the manager removed the child's name


def test_file_system_names_are_private_and_unguessable(monkeypatch):
    monkeypatch.setattr(sharing.strategies, "_current", "file_system")
    a = sharing.share_array(np.ones(10))
    name = sharing.storage_of(a).name
    assert re.fullmatch(r"hogshare_[0-9a-f]{16}_c\d+_[0-9a-f]{16}", name)
    assert stat.S_IMODE(os.stat(f"/dev/shm/{name}").st_mode) == 0o600
    socket_path = manager_client.socket_path()
    assert stat.S_IMODE(os.stat(os.path.dirname(socket_path)).st_mode) == 0o700
    assert stat.S_ISSOCK(os.stat(socket_path).st_mode)
    q = sharing.get_context("fork").Queue()
    q.put(a)
    ino = os.stat(f"/dev/shm/{name}").st_ino
    assert wait_until(lambda: len(names_of_inode(ino)) == 2)
    published = [n for n in names_of_inode(ino) if n != name]
    assert re.fullmatch(r"hogshare_[0-9a-f]{16}_m[0-9a-f]{16}", published[0])
    assert stat.S_IMODE(os.stat(f"/dev/shm/{published[0]}").st_mode) == 0o600
    q.get()


@pytest.mark.timeout(120)
def test_file_descriptor_never_touches_dev_shm(fresh_group_env):
    report = run_program("descriptor_only", env=fresh_group_env)
    assert report == {"memfd": True, "dev_shm": [], "joined": False, "values": [2.0, 2.0, 2.0]}


@pytest.mark.timeout(120)
def test_low_ulimit(fresh_group_env):
    report = run_program("low_ulimit", "64", env=fresh_group_env)
    assert 0 < report["fd_count"] < 64
    assert "too many open files" in report["error"] and "file_system" in report["error"]
    assert report["fs_count"] == 256 and report["fs_aliases"]


@pytest.mark.timeout(120)
def test_sigkill_of_every_file_system_process_leaves_nothing(fresh_group_env):
    program = subprocess.Popen([sys.executable, str(PROGRAMS), "hold_and_wait", "2"], stdout=subprocess.PIPE,
                               text=True, env=fresh_group_env, start_new_session=True)
    try:
        report = json.loads(program.stdout.readline())
        assert len(group_names(report["group"])) == 6        # 2 held and sent (2 names each), 1 per child
    finally:
        os.killpg(program.pid, signal.SIGKILL)               # the program and its children; not the manager
        program.wait()
        program.stdout.close()
    assert wait_until(lambda: not group_names(report["group"]), timeout=30), group_names(report["group"])
    assert wait_until(lambda: not os.path.exists(os.path.dirname(report["socket"])))


def manager_pid(socket_path: str) -> int:
    """The pid of the manager daemon serving `socket_path` (its command line names the socket)."""
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and socket_path.encode() in Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0"):
                return int(name)
        except OSError:
            pass
    raise AssertionError(f"no manager daemon serves {socket_path}")


@pytest.mark.timeout(180)
def test_processes_that_outlive_a_killed_manager_leave_nothing(fresh_group_env):
    program = subprocess.Popen([sys.executable, str(PROGRAMS), "outlive_manager", "fork,spawn,forkserver"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=fresh_group_env)
    try:
        first = json.loads(program.stdout.readline())
        assert group_names(first["group"])
        manager = manager_pid(first["socket"])
        os.kill(manager, signal.SIGKILL)
        wait_for_exit(manager)
        out, _ = program.communicate("the manager is dead\n", timeout=120)
    finally:
        program.kill()
        program.wait()
    assert program.returncode == 0
    last = json.loads(out.strip().splitlines()[-1])
    assert last["exitcodes"] == [0, 0, 0, 0]
    late = last["late"]  # a child started after the kill finds the dead manager, removes its socket, starts anew
    assert late["pointed_to"] == first["socket"] and not late["pointed_to_left"] and late["group"] != first["group"]
    assert wait_until(lambda: not group_names(first["group"])), group_names(first["group"])
    assert not os.path.exists(os.path.dirname(first["socket"]))
    assert wait_until(lambda: not group_names(late["group"]) and not os.path.exists(os.path.dirname(late["socket"])))


def test_raising_the_descriptor_limit_keeps_the_hard_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft == hard or hard == resource.RLIM_INFINITY


def test_lent_storages_are_released_once_received():
    """Counts this test's storages only: a message of an earlier test in this process may still be lent."""
    lending.reap()
    earlier = lending.lent_storages()  # held here, so that no storage of this test can take an earlier one's id

    def lent_here() -> int:
        lending.reap()
        return sum(all(s is not e for e in earlier) for s in lending.lent_storages())

    q = sharing.SimpleQueue()
    for _ in range(3):
        q.put(sharing.share_array(np.ones(100)))   # dropped by the sender at once
        q.get()
    assert lent_here() == 0
    q.put(sharing.share_array(np.ones(100)))       # never received: held
    assert lent_here() == 1
    q.get()
    assert lent_here() == 0


def test_a_message_unacknowledged_past_the_board_is_held_until_exit(monkeypatch):
    monkeypatch.setattr(lending, "BOARD_SLOTS", 2)
    for name, fresh in [("_board", None), ("_acks", None), ("_tickets", itertools.count(1)),
                        ("_held", collections.deque()), ("_kept", []), ("_peers", {})]:
        monkeypatch.setattr(lending, name, fresh)
    storages = [sharing.storage_of(sharing.empty_shared(4)) for _ in range(3)]
    board = lending.board()
    tickets = [lending.lend(s) for s in storages]  # the third message takes the first one's cell
    lending.acknowledge(board, tickets[2])
    lending.acknowledge(board, tickets[1])
    lending.reap()
    assert lending.lent_storages() == [storages[0]] and lending.lent_count() == 1


def test_a_recycled_descriptor_is_not_mistaken_for_the_segment():
    storage = sharing.storage_of(sharing.empty_shared(8))
    with pytest.raises(RuntimeError, match="now names another file"):
        memfd.open_segment(b"t" * 16, 8, os.getpid(), storage.fd, storage.ino + 1)
    with pytest.raises(RuntimeError, match="no longer available: the sender exited"):
        memfd.open_segment(b"t" * 16, 8, os.getpid(), 99999, storage.ino)


def test_manager_grace_must_be_a_number(monkeypatch):
    monkeypatch.setenv(manager_client.GRACE_ENV, "soon")
    with pytest.raises(ValueError, match="HOGSHARE_SHM_MANAGER_GRACE_S='soon'"):
        manager_client._grace_s()
