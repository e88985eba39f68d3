"""Fixtures for the sharing tests, and a session check that they leave /dev/shm clean."""
from __future__ import annotations

import gc
import multiprocessing
import time

import pytest

import sharing
from sharing import lending, manager_client
from sharing_helpers import group_names
from train_cli import cli_env

STRATEGIES = ["file_descriptor", "file_system"]
START_METHODS = ["spawn", "forkserver", "fork"]
QUEUE_KINDS = ["Queue", "RingQueue"]


@pytest.fixture(params=STRATEGIES)
def strategy(request):
    """Run the test under each sharing strategy, restoring the default afterwards."""
    before = sharing.get_sharing_strategy()
    sharing.set_sharing_strategy(request.param)
    yield request.param
    sharing.set_sharing_strategy(before)


@pytest.fixture(params=START_METHODS)
def start_method(request):
    return request.param


@pytest.fixture(params=QUEUE_KINDS)
def new_queue(request):
    """Run the test with multiprocessing's Queue and with sharing's RingQueue: new_queue(ctx, maxsize=0)."""
    if request.param == "Queue":
        return lambda ctx, maxsize=0: ctx.Queue(maxsize)
    return lambda ctx, maxsize=0: sharing.RingQueue(maxsize)


@pytest.fixture(scope="session", autouse=True)
def dev_shm_left_clean():
    """The session joins a file_system manager group first (so every process it starts, fork servers included,
    joins it too); afterwards no segment of the group is left in /dev/shm."""
    manager_client.membership()
    yield
    for child in multiprocessing.active_children():
        child.join(timeout=10)
    gc.collect()
    lending.reap()                    # storages this process sent and dropped, received by now
    group = manager_client.joined_group()
    if group is not None:
        deadline = time.monotonic() + 10  # the manager unlinks names of exited processes asynchronously
        while group_names(group) and time.monotonic() < deadline:
            time.sleep(0.1)
        leftover = group_names(group)
        assert not leftover, f"sharing tests left segments in /dev/shm: {leftover}"


@pytest.fixture
def fresh_group_env(monkeypatch):
    """An environment in which child programs import this checkout and start their own manager group, with a
    short grace period."""
    monkeypatch.delenv(manager_client.MANAGER_ENV, raising=False)
    monkeypatch.setenv(manager_client.GRACE_ENV, "0.3")
    return cli_env()
