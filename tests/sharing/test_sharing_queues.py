"""Shared arrays through queues, pipes, pools and process arguments: they alias, they are not copied."""
from __future__ import annotations

import gc
import pickle
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sharing
from sharing import storage_of
from sharing_workers import (add_one, echo, fork_send_inherited, fork_write, send_inherited_after_parent_released,
                             result_that_cannot_be_unpickled, shared_result_after_exit, sum_received,
                             write_through_views)

TIMEOUT = 60


def round_trip(obj):
    """Send `obj` through ForkingPickler and receive it in this same process."""
    return pickle.loads(ForkingPickler.dumps(obj))


def data_pointer(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.mark.timeout(120)
def test_child_writes_through_array_and_view_and_sends_views_back(strategy, start_method, new_queue):
    ctx = sharing.get_context(start_method)
    inbox, outbox = new_queue(ctx), new_queue(ctx)
    x = sharing.share_array(np.zeros((3, 4)))
    arg = sharing.share_array(np.zeros(5))
    child = ctx.Process(target=write_through_views, args=(strategy, inbox, outbox, arg))
    child.start()
    inbox.put([x, x[:, 1]])
    assert outbox.get(timeout=TIMEOUT) == ("written", True)
    assert x[0, 0] == 100.0 and x[2, 1] == 200.0
    assert np.all(arg == 1)

    first, second = outbox.get(timeout=TIMEOUT)
    assert first is second                        # one message, one array
    again = outbox.get(timeout=TIMEOUT)
    assert storage_of(again) is storage_of(first)  # two messages, one storage
    transposed, strided, reshaped, column = outbox.get(timeout=TIMEOUT)
    expected = np.arange(24, dtype=np.int32).reshape(4, 6)
    np.testing.assert_array_equal(transposed, expected.T)
    np.testing.assert_array_equal(strided, expected[::-1, ::2])
    np.testing.assert_array_equal(reshaped, expected[1:3].reshape(-1))
    again[3, 4] = -1                               # every view aliases the child's memory
    assert transposed[4, 3] == -1 and strided[0, 2] == -1 and column[3] == -1
    empty = outbox.get(timeout=TIMEOUT)
    assert empty.shape == (0, 3) and empty.dtype == np.float32 and sharing.is_shared(empty)
    inbox.put("done")
    child.join(TIMEOUT)
    assert child.exitcode == 0


@pytest.mark.timeout(120)
def test_pool_workers_modify_shared_inputs_in_place(strategy, start_method):
    arrays = [sharing.share_array(np.zeros(3)) for _ in range(4)]
    with sharing.get_context(start_method).Pool(2) as pool:
        pool.map(add_one, arrays)
    for a in arrays:
        np.testing.assert_array_equal(a, 1)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_pool_result_that_cannot_be_received_fails_its_task_not_the_pool(start_method):
    # Each task's array is opened only after its worker (maxtasksperchild=1) exited: its segment is gone.
    pool = sharing.get_context(start_method).Pool(2, maxtasksperchild=1)
    try:
        gone = r"could not be received: shared storage \w+ sent by process \d+ is no longer available"
        with pytest.raises(RuntimeError, match=gone):
            pool.map_async(shared_result_after_exit, [1.0, 2.0], chunksize=1).get(TIMEOUT)
        with pytest.raises(RuntimeError, match=gone):
            pool.apply_async(shared_result_after_exit, (3.0,)).get(TIMEOUT)
        assert pool.map_async(abs, [-1, -2, -3]).get(TIMEOUT) == [1, 2, 3]   # the pool still works
    finally:
        pool.terminate()
        pool.join()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_pool_result_whose_unpickling_raises_fails_the_waiting_tasks_not_the_pool(start_method):
    # An OSError raised while a result is unpickled would end the pool's result thread as a closed pipe does.
    pool = sharing.get_context(start_method).Pool(2)
    try:
        unknown = r"could not be received \(ProcessLookupError: .*every task waiting for a result fails with it"
        with pytest.raises(RuntimeError, match=unknown):
            pool.apply_async(result_that_cannot_be_unpickled, (1.0,)).get(TIMEOUT)
        assert pool.map_async(abs, [-1, -2, -3]).get(TIMEOUT) == [1, 2, 3]   # the pool still works
    finally:
        pool.terminate()
        pool.join()


@pytest.mark.timeout(60)
def test_sender_may_drop_its_array_right_after_put(strategy, start_method, new_queue):
    ctx = sharing.get_context(start_method)
    inbox, outbox = new_queue(ctx), new_queue(ctx)
    child = ctx.Process(target=sum_received, args=(inbox, outbox))
    child.start()
    inbox.put(sharing.share_array(np.full(1000, 2.0)))   # no reference kept
    gc.collect()
    assert outbox.get(timeout=TIMEOUT) == 2000.0
    child.join(TIMEOUT)


@pytest.mark.timeout(60)
def test_round_trip_through_an_echo_child_returns_the_same_storage(strategy, start_method, new_queue):
    ctx = sharing.get_context(start_method)
    inbox, outbox = new_queue(ctx), new_queue(ctx)
    child = ctx.Process(target=echo, args=(inbox, outbox))
    child.start()
    a = sharing.empty_shared((100,), np.float32)
    for _ in range(5):
        inbox.put(a[10:])
        back = outbox.get(timeout=TIMEOUT)
        assert storage_of(back) is storage_of(a) and data_pointer(back) == data_pointer(a[10:])
    inbox.put(None)
    child.join(TIMEOUT)


def test_fork_child_write_is_visible_to_parent(strategy):
    a = sharing.share_array(np.zeros(8))
    child = sharing.get_context("fork").Process(target=fork_write, args=(a,))
    child.start()
    child.join(TIMEOUT)
    assert child.exitcode == 0
    np.testing.assert_array_equal(a, 7)


def test_fork_child_can_send_an_inherited_array(strategy, new_queue):
    ctx = sharing.get_context("fork")
    outbox, done = new_queue(ctx), ctx.Event()
    a = sharing.share_array(np.arange(5.0))
    child = ctx.Process(target=fork_send_inherited, args=(a, outbox, done))
    child.start()
    received = outbox.get(timeout=TIMEOUT)
    done.set()
    child.join(TIMEOUT)
    assert storage_of(received) is storage_of(a)
    np.testing.assert_array_equal(received, [1, 2, 3, 4])


def test_fork_child_cannot_send_what_its_parent_already_released(monkeypatch):
    monkeypatch.setattr(sharing.strategies, "_current", "file_system")
    ctx = sharing.get_context("fork")
    outbox, released = ctx.SimpleQueue(), ctx.Event()
    a = sharing.share_array(np.ones(3))
    child = ctx.Process(target=send_inherited_after_parent_released, args=(a, released, outbox))
    child.start()
    del a                                          # the parent's name for the segment goes
    gc.collect()
    released.set()
    message = outbox.get()
    child.join(TIMEOUT)
    assert "the parent already released its segment" in message


def test_drop_in_for_multiprocessing():
    import multiprocessing
    assert set(multiprocessing.__all__) <= set(sharing.__all__)
    assert sharing.Process is multiprocessing.Process and sharing.connection is multiprocessing.connection
    assert sharing.get_start_method() == multiprocessing.get_start_method()
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        sharing.nonexistent


def test_plain_multiprocessing_queues_carry_handles_too(strategy):
    import multiprocessing
    x = sharing.share_array(np.zeros(3))
    q = multiprocessing.get_context("spawn").SimpleQueue()
    q.put(x[1:])
    got = q.get()
    got[0] = 4
    assert x[1] == 4


@pytest.mark.timeout(60)
def test_manager_proxies_carry_handles(strategy, start_method):
    x = sharing.share_array(np.zeros(3))
    with sharing.get_context(start_method).Manager() as manager:
        shared_list = manager.list()
        shared_list.append(x)
        got = shared_list[0]                       # a round trip through the manager process
    got[2] = 9
    assert x[2] == 9 and storage_of(got) is storage_of(x)


def test_round_trip_in_one_process_keeps_identity(strategy):
    x = sharing.share_array(np.arange(12.0).reshape(3, 4))
    y, column = round_trip([x, x[:, 1]])
    assert storage_of(y) is storage_of(x) and storage_of(column) is storage_of(x)
    assert data_pointer(y) == data_pointer(x)
    column[0] = -5
    assert x[0, 1] == -5
    storage = storage_of(x)
    assert round_trip(storage) is storage


def test_pipe_carries_handles(strategy):
    a, b = sharing.Pipe()
    x = sharing.share_array(np.ones(4))
    a.send(x[::2])
    got = b.recv()
    got[:] = 3
    np.testing.assert_array_equal(x, [3, 1, 3, 1])
    a.close(), b.close()


def test_array_that_is_not_shared_is_copied_by_value(strategy):
    plain = np.arange(6.0)
    shared = sharing.share_array(np.zeros(2))
    got_plain, got_shared = round_trip([plain, shared])
    assert not sharing.is_shared(got_plain) and not np.shares_memory(got_plain, plain)
    np.testing.assert_array_equal(got_plain, plain)
    assert storage_of(got_shared) is storage_of(shared)
    assert ForkingPickler.dumps(plain) == pickle.dumps(plain, protocol=4)


def test_is_shared_false_then_true():
    a = np.zeros((2, 3))
    assert not sharing.is_shared(a)
    s = sharing.share_array(a)
    assert sharing.is_shared(s) and sharing.is_shared(s[1]) and sharing.is_shared(s.T[::-1].reshape(-1)[::2]) is False and sharing.is_shared(s.reshape(-1)[::2])
    assert not sharing.is_shared(s.copy())
    assert not sharing.is_shared([1, 2]) and not sharing.is_shared(None)


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_, np.complex128, ">f8", "U3", "M8[s]",
                                   [("a", "<i4"), ("b", "<f8", (2,))]])
def test_any_plain_dtype_travels(strategy, dtype):
    x = sharing.share_array(np.zeros(4, dtype=dtype))
    got = round_trip(x[1:])
    assert got.dtype == np.dtype(dtype) and storage_of(got) is storage_of(x)


def test_read_only_view_stays_read_only(strategy):
    x = sharing.share_array(np.zeros(4))
    view = x[1:]
    view.flags.writeable = False
    assert not round_trip(view).flags.writeable
    assert round_trip(x).flags.writeable


@st.composite
def views(draw):
    shape = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    index = tuple(slice(draw(st.integers(0, n - 1)), None, draw(st.sampled_from([1, 2, -1, -2]))) for n in shape)
    return shape, index, draw(st.booleans())


@settings(max_examples=40, deadline=None)
@given(views())
def test_views_of_any_layout_alias_after_a_round_trip(view_spec):
    shape, index, transpose = view_spec
    x = sharing.share_array(np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape))
    v = x[index]
    if transpose:
        v = v.T
    got = round_trip(v)
    np.testing.assert_array_equal(got, v)
    assert got.strides == v.strides and storage_of(got) is storage_of(x)
    if got.size:
        assert data_pointer(got) == data_pointer(v)
        got.flat[0] = -1
        assert v.flat[0] == -1
