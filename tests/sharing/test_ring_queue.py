"""The Queue contract, kept by multiprocessing's Queue and by RingQueue alike, and RingQueue's own promises:
batches, a bounded ring, and no message lost, torn or duplicated when a process is SIGKILLed mid-message."""
from __future__ import annotations

import os
import pickle
import queue as queue_module
import random
import signal
import time
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import sharing
from sharing import ring_queue
from sharing_workers import (consume_until_none, get_stopping_mid_message, put_after, put_stopping_mid_message,
                             produce, take)

TIMEOUT = 60
CLOCK_SLACK_S = 0.01  # multiprocessing.Queue times out against the wall clock, which may run slightly fast
pytestmark = pytest.mark.timeout(120)


def wait_until(predicate, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def kill(process) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.join(TIMEOUT)
    assert process.exitcode == -signal.SIGKILL


# --- the contract, for both queues ----------------------------------------------------------------------

def test_get_waits_up_to_its_timeout_then_raises_empty(new_queue):
    q = new_queue(sharing.get_context("spawn"))
    with pytest.raises(queue_module.Empty):
        q.get_nowait()
    start = time.monotonic()
    with pytest.raises(queue_module.Empty):
        q.get(timeout=0.3)
    assert 0.3 - CLOCK_SLACK_S <= time.monotonic() - start < 5


def test_put_on_a_full_queue_waits_up_to_its_timeout_then_raises_full(new_queue):
    q = new_queue(sharing.get_context("spawn"), maxsize=2)
    q.put("a")
    q.put_nowait("b")
    assert q.qsize() == 2 and q.full()
    with pytest.raises(queue_module.Full):
        q.put_nowait("c")
    start = time.monotonic()
    with pytest.raises(queue_module.Full):
        q.put("c", timeout=0.3)
    assert 0.3 - CLOCK_SLACK_S <= time.monotonic() - start < 5
    assert [q.get(timeout=TIMEOUT), q.get_nowait()] == ["a", "b"]
    assert q.qsize() == 0 and q.empty() and not q.full()


def test_close_stops_this_process_and_join_thread_then_returns(new_queue):
    q = new_queue(sharing.get_context("spawn"))
    q.put("flushed before close returns")
    with pytest.raises(AssertionError, match="not closed"):
        q.join_thread()
    q.close()
    with pytest.raises(ValueError, match="is closed"):
        q.put(1)
    with pytest.raises(ValueError, match="is closed"):
        q.get()
    q.join_thread()
    q.cancel_join_thread()


def test_a_get_blocked_in_one_process_wakes_for_a_put_in_another(new_queue, start_method):
    ctx = sharing.get_context(start_method)
    q = new_queue(ctx)
    child = ctx.Process(target=put_after, args=(q, 0.3, ("late", 1)))
    child.start()
    assert q.get(timeout=TIMEOUT) == ("late", 1)
    child.join(TIMEOUT)
    assert child.exitcode == 0


def test_many_producers_and_consumers_get_every_message_once_in_each_producers_order(new_queue):
    ctx = sharing.get_context("fork")
    q, results = new_queue(ctx), ctx.Queue()
    count = 300
    producers = [ctx.Process(target=produce, args=(q, name, count)) for name in "ab"]
    consumers = [ctx.Process(target=consume_until_none, args=(q, results, many and isinstance(q, sharing.RingQueue)))
                 for many in (False, True)]
    for p in producers + consumers:
        p.start()
    for p in producers:
        p.join(TIMEOUT)
    q.put(None)
    q.put(None)
    got = [results.get(timeout=TIMEOUT) for _ in consumers]
    for p in consumers:
        p.join(TIMEOUT)
    assert sorted(sum(got, [])) == sorted((name, i) for name in "ab" for i in range(count))
    for mine in got:
        for name in "ab":
            seen = [i for n, i in mine if n == name]
            assert seen == sorted(seen)


# --- RingQueue's own ---------------------------------------------------------------------------------------

def test_batches_keep_their_order():
    q = sharing.RingQueue()
    q.put_many([1, "two", (3,)])
    q.put(4)
    assert q.qsize() == 4
    assert q.get_many(max_messages=2) == [1, "two"]
    assert q.get_many() == [(3,), 4]
    with pytest.raises(queue_module.Empty):
        q.get_many(timeout=0.05)


def test_messages_wrap_around_a_small_ring_intact():
    capacity = 256
    q = sharing.RingQueue(capacity_bytes=capacity)
    model, rng = [], random.Random(0)
    framed = lambda item: 4 + len(ForkingPickler.dumps(item))  # noqa: E731  (a message's bytes in the ring)
    for step in range(3000):
        if model and rng.random() < 0.5:
            assert q.get_nowait() == model.pop(0)
        else:
            item = bytes([step % 256]) * rng.randrange(0, 90)
            fits = sum(map(framed, model)) + framed(item) <= capacity
            try:
                q.put_nowait(item)
                model.append(item)
                assert fits
            except queue_module.Full:
                assert not fits
        assert q.qsize() == len(model)


def test_a_message_larger_than_the_ring_is_refused():
    q = sharing.RingQueue(capacity_bytes=1024)
    with pytest.raises(ValueError, match="larger capacity_bytes.*share_array"):
        q.put(np.zeros(1000))
    q.put(sharing.share_array(np.zeros(1000)))  # shared: only its handle travels
    assert q.get().shape == (1000,)


def test_a_ring_queue_travels_through_another_queue_but_not_through_plain_pickle():
    ctx = sharing.get_context("spawn")
    q, carrier, results = sharing.RingQueue(), ctx.Queue(), ctx.Queue()
    carrier.put(q)
    child = ctx.Process(target=take, args=(carrier.get(timeout=TIMEOUT), 1, results))
    child.start()
    q.put("through the carried queue")
    assert results.get(timeout=TIMEOUT) == ["through the carried queue"]
    child.join(TIMEOUT)
    with pytest.raises(TypeError, match="travels only through multiprocessing"):
        pickle.dumps(q)


class _Interrupting:
    """A ring whose every copy is interrupted, as by Ctrl-C."""

    def __setitem__(self, where, data):
        raise KeyboardInterrupt

    def __getitem__(self, where):
        raise KeyboardInterrupt


def test_an_exception_mid_message_leaves_the_ring_unlocked_and_as_it_was():
    q = sharing.RingQueue()
    q.put("kept")
    ring, q._ring = q._ring, _Interrupting()
    with pytest.raises(KeyboardInterrupt):
        q.put("interrupted")
    with pytest.raises(KeyboardInterrupt):
        q.get()
    q._ring = ring
    assert q.get(timeout=5) == "kept" and q.empty()  # a lock left held would time out here


# --- kills mid-message ---------------------------------------------------------------------------------------

def test_a_producer_killed_mid_put_adds_nothing_and_releases_the_lock():
    ctx = sharing.get_context("spawn")
    q, results, stuck = sharing.RingQueue(), ctx.Queue(), ctx.Event()
    q.put("before")
    producer = ctx.Process(target=put_stopping_mid_message, args=(q, "x" * 5000, stuck))
    producer.start()
    assert stuck.wait(TIMEOUT)                  # it holds the lock, half its message copied in
    consumer = ctx.Process(target=take, args=(q, 2, results))
    consumer.start()                            # gets "before", then waits for the lock
    kill(producer)
    q.put("after")                              # the lock passes on (EOWNERDEAD): nothing to repair
    assert results.get(timeout=TIMEOUT) == ["before", "after"]
    consumer.join(TIMEOUT)
    assert q.empty()


def test_a_consumer_killed_mid_get_leaves_the_message_for_the_next():
    ctx = sharing.get_context("forkserver")
    q, stuck = sharing.RingQueue(), ctx.Event()
    q.put_many(["first", "second"])
    consumer = ctx.Process(target=get_stopping_mid_message, args=(q, stuck))
    consumer.start()
    assert stuck.wait(TIMEOUT)                  # it holds the lock, copying "first" out
    kill(consumer)
    assert [q.get(timeout=TIMEOUT), q.get(timeout=TIMEOUT)] == ["first", "second"]
    assert q.empty()


def test_processes_killed_while_they_wait_hold_up_nobody():
    ctx = sharing.get_context("fork")
    empty, full, results = sharing.RingQueue(), sharing.RingQueue(maxsize=1), ctx.Queue()
    full.put("filler")
    sleepers = [ctx.Process(target=take, args=(empty, 1, results)), ctx.Process(target=produce, args=(full, "p", 1))]
    for p in sleepers:
        p.start()
    wait_until(lambda: empty._hints[ring_queue._GETTERS_WAITING] == 1
               and full._hints[ring_queue._PUTTERS_WAITING] == 1)
    for p in sleepers:
        kill(p)
    consumer = ctx.Process(target=take, args=(empty, 1, results))
    consumer.start()
    empty.put("for the live one")
    assert results.get(timeout=TIMEOUT) == ["for the live one"]
    consumer.join(TIMEOUT)
    assert full.get(timeout=TIMEOUT) == "filler" and full.empty()
    full.put("room again", timeout=TIMEOUT)
