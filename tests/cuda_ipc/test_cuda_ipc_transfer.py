"""The whole protocol between real processes, run on host memory: the GPU tests' scenarios, checked on the CPU."""
from __future__ import annotations

import gc
import threading
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np
import pytest

import cuda_ipc
import sharing as mp
from cuda_ipc import guard, handles
from cuda_ipc.limbo import Limbo
from cuda_ipc.pickling import IpcArray, rebuild, share
from cuda_ipc_children import CTX, WAIT, copy_on, describe, joined, send_and_drop, start, sum_all, sums
from cuda_ipc_host import device_array, empty, host_backend


def five(value: int) -> Any:
    """Five int64s of value, in an allocation of their own."""
    return device_array(np.full(5, value, dtype=np.int64))


def _write_through(inbox: Any, outbox: Any) -> None:
    whole, column, reversed_every_other = inbox.get(timeout=WAIT)
    whole[:] = 4
    column[:] = 5
    outbox.put((reversed_every_other.tolist(), host_backend().opens, list(host_backend().waited)))


@pytest.mark.timeout(120)
def test_child_writes_through_an_array_and_its_views(drained: Limbo) -> None:
    x = device_array(np.zeros((5, 5)))
    inbox, outbox = CTX.Queue(), CTX.Queue()
    inbox.put([x, x[:, 1], x[::-1, ::2]])
    child = start(_write_through, inbox, outbox)
    seen, opens, waited = outbox.get(timeout=WAIT)
    events = set(host_backend().live_events)
    joined(child)
    expected = np.full((5, 5), 4.0)
    expected[:, 1] = 5
    assert x.tolist() == expected.tolist()
    assert seen == expected[::-1, ::2].tolist()
    assert opens == 1, "three views of one allocation must open it once"
    assert len(waited) == 3 and set(waited) <= events


@pytest.mark.timeout(120)
def test_producer_drops_arrays_right_after_put(drained: Limbo) -> None:
    inbox, outbox = CTX.Queue(), CTX.Queue()
    for value in range(5):
        inbox.put(device_array(np.full(1000, float(value))))
    gc.collect()
    churn = [device_array(np.full(1000, -1.0)) for _ in range(10)]  # would reuse freed memory
    child = start(sums, inbox, outbox, 5)
    assert outbox.get(timeout=WAIT) == [1000.0 * value for value in range(5)]
    joined(child)
    del churn


def _receive_twice(inbox: Any, outbox: Any) -> None:
    first, second = inbox.get(timeout=WAIT), inbox.get(timeout=WAIT)
    first[0] = 9.0
    report = [float(second[0]), host_backend().opens]
    del first
    gc.collect()
    report.append(host_backend().open_blocks)
    del second
    gc.collect()
    report += [host_backend().open_blocks, host_backend().closes]
    outbox.put(report)


@pytest.mark.timeout(120)
def test_an_array_received_twice_is_opened_once_and_closed_with_its_last_view(drained: Limbo) -> None:
    x = device_array(np.zeros(3))
    inbox, outbox = CTX.Queue(), CTX.Queue()
    inbox.put(x)
    inbox.put(x)
    child = start(_receive_twice, inbox, outbox)
    aliased, opens, open_after_first, open_after_both, closes = outbox.get(timeout=WAIT)
    joined(child)
    assert aliased == 9.0 and x[0] == 9.0
    assert (opens, open_after_first, open_after_both, closes) == (1, 1, 0, 1)
    assert cuda_ipc.ipc_collect() == 2


def _forward(inbox: Any, outbox: Any, done: Any) -> None:
    received = inbox.get(timeout=WAIT)
    try:
        ForkingPickler.dumps(received)
        refusal = None
    except ValueError as error:
        refusal = str(error)
    outbox.put((refusal, received.copy()))
    done.wait(WAIT)


@pytest.mark.timeout(120)
def test_a_received_array_is_refused_for_sending_on_but_its_copy_travels(drained: Limbo) -> None:
    inbox, outbox, done = CTX.Queue(), CTX.Queue(), CTX.Event()
    inbox.put(device_array([1.0, 2.0]))
    child = start(_forward, inbox, outbox, done)
    refusal, copy = outbox.get(timeout=WAIT)
    assert "received from another process" in refusal and "copy()" in refusal
    assert copy.tolist() == [1.0, 2.0]
    del copy
    gc.collect()
    done.set()
    joined(child)


@pytest.mark.timeout(180)
def test_three_process_chain_of_many_small_arrays() -> None:
    count = 300
    first, second, result = CTX.Queue(), CTX.Queue(), CTX.Queue()
    done = CTX.Event()
    chain = [start(send_and_drop, first, done, count, five), start(copy_on, first, second, done, count),
             start(sum_all, second, result, count, five)]
    assert result.get(timeout=150) == [count * (count - 1) // 2] * 5
    done.set()
    for child in chain:
        joined(child)


@pytest.mark.timeout(120)
def test_empty_arrays_travel_without_taking_a_slot(drained: Limbo) -> None:
    arrays = [empty((0,), np.float32), empty((3, 0), np.uint8), device_array(np.zeros(4))[2:2]]
    messages = [share(a, host_backend()) for a in arrays]
    assert all(m.handle is None and m.counts is None for m in messages)
    assert len(drained) == 0
    inbox, outbox = CTX.Queue(), CTX.Queue()
    inbox.put(arrays)
    child = start(describe, inbox, outbox)
    assert outbox.get(timeout=WAIT) == [((0,), "<f4", 0), ((3, 0), "|u1", 0), ((0,), "<f8", 0)]
    joined(child)


def _write_floats_read_bytes(inbox: Any, outbox: Any) -> None:
    raw, floats = inbox.get(timeout=WAIT)
    floats[:] = 1.5
    seen = raw.tobytes()
    raw[:4] = np.frombuffer(np.float32(2.5).tobytes(), np.uint8)
    outbox.put(seen)


@pytest.mark.timeout(120)
def test_float_and_uint8_views_of_one_allocation(drained: Limbo) -> None:
    raw = device_array(np.zeros(16, np.uint8))
    floats = raw.view(np.float32)
    inbox, outbox = CTX.Queue(), CTX.Queue()
    inbox.put([raw, floats])
    child = start(_write_floats_read_bytes, inbox, outbox)
    assert outbox.get(timeout=WAIT) == np.full(4, 1.5, np.float32).tobytes()
    joined(child)
    assert floats.tolist() == [2.5, 1.5, 1.5, 1.5]


def test_the_sending_process_receives_a_view_of_its_own_memory(drained: Limbo) -> None:
    x = device_array([1.0, 2.0, 3.0])
    opens = host_backend().opens
    back = ForkingPickler.loads(ForkingPickler.dumps(x[1:]))
    back[0] = 42.0
    assert x.tolist() == [1.0, 42.0, 3.0]
    assert host_backend().opens == opens
    assert cuda_ipc.ipc_collect() == 1, "the slot is released at once; the view holds the memory itself"
    del x
    gc.collect()
    assert back.tolist() == [42.0, 3.0]


def test_the_message_places_the_array_in_its_allocation(drained: Limbo) -> None:
    x = device_array(np.arange(12.0).reshape(3, 4))
    message = share(x[1:, ::-2], host_backend())
    assert isinstance(message, IpcArray)
    segment = x.memory.segment
    assert message.handle == host_backend().export_memory(segment.ptr, 0)
    assert (message.base_size, message.offset) == (2 << 20, x.memory.ptr - segment.ptr + 1 * 32 + 3 * 8)
    assert (message.shape, message.strides, message.dtype) == ((2, 2), (32, -16), np.dtype(np.float64))
    assert message.counts[message.slot] == 1 and message.event is not None
    assert rebuild(message).tolist() == [[7.0, 5.0], [11.0, 9.0]]
    assert message.counts[message.slot] == 0


def _send_one_by_one(outbox: Any, report: Any, done: Any, count: int) -> None:
    allocations = host_backend().allocations
    for value in range(count):
        outbox.put(device_array(np.full(5, value, dtype=np.int64)))
    report.put(host_backend().allocations - allocations)
    done.wait(WAIT)


def _hold_all_then_drop(inbox: Any, report: Any, count: int) -> None:
    cache, backend = handles.current(), host_backend()
    opened, closes = cache.opened, backend.closes
    held = [inbox.get(timeout=WAIT) for _ in range(count)]
    total = sum(int(array.sum()) for array in held)
    opened = cache.opened - opened
    del held
    gc.collect()
    report.put((total, opened, backend.closes - closes, len(cache)))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("method", ["spawn", "fork", "forkserver"])
def test_small_arrays_sent_one_by_one_travel_in_one_segment(method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "_initialised_pid", None)  # forked children may use the (host) device
    context, count = mp.get_context(method), 300
    arrays, producer_report, consumer_report, done = context.Queue(), context.Queue(), context.Queue(), \
        context.Event()
    producer = context.Process(target=_send_one_by_one, args=(arrays, producer_report, done, count))
    consumer = context.Process(target=_hold_all_then_drop, args=(arrays, consumer_report, count))
    producer.start()
    consumer.start()
    allocations = producer_report.get(timeout=WAIT)
    total, opened, closed, still_open = consumer_report.get(timeout=WAIT)
    done.set()
    for child in (producer, consumer):
        child.join(WAIT)
        assert child.exitcode == 0
    assert total == 5 * count * (count - 1) // 2
    assert allocations == 1, "300 small arrays fit in one 2 MiB segment"
    assert (opened, closed, still_open) == (1, 1, 0), "one open for the segment, one close with its last view"


def _drop_in_another_thread(inbox: Any, outbox: Any) -> None:
    backend = host_backend()
    backend.use_stream("receiving")
    held = [inbox.get(timeout=WAIT)]

    def drop() -> None:
        backend.use_stream("dropping")
        held.clear()
        gc.collect()

    dropper = threading.Thread(target=drop)
    dropper.start()
    dropper.join(WAIT)
    outbox.put(list(backend.log))


@pytest.mark.timeout(120)
def test_a_release_waits_for_the_stream_the_array_was_received_on(drained: Limbo) -> None:
    inbox, outbox = CTX.Queue(), CTX.Queue()
    inbox.put(device_array([1.0, 2.0]))
    child = start(_drop_in_another_thread, inbox, outbox)
    log = outbox.get(timeout=WAIT)
    joined(child)
    assert log == ["wait receiving", "close"]
