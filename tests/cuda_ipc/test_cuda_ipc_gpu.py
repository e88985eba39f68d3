"""CUDA IPC of CuPy arrays between real processes on a GPU, modelled on PyTorch's CUDA multiprocessing tests.

Skipped with a reason where ``cuda_ipc.is_available()`` is false (see conftest.py).
"""
from __future__ import annotations

import gc
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np
import pytest

import cuda_ipc
import sharing as mp
from cuda_ipc import handles
from cuda_ipc_children import CTX, WAIT, copy_on, describe, joined, send_and_drop, start, sum_all, sums

pytestmark = pytest.mark.gpu

# A kernel that keeps the GPU busy for a given number of clock cycles, so that work queued
# after it is still pending when another process receives the array.
_SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""


def _fill(inbox: Any, outbox: Any) -> None:
    import cupy

    data = inbox.get(timeout=WAIT)
    data[0][:] = 4
    cupy.cuda.get_current_stream().synchronize()
    try:
        ForkingPickler.dumps(data[1])
        outbox.put("sent on")
    except ValueError as error:
        outbox.put(str(error))


@pytest.mark.timeout(240)
def test_child_writes_an_array_and_its_column_view_and_the_parent_sees_it() -> None:
    import cupy

    x = cupy.zeros((5, 5), dtype=cupy.float32)
    data = [x, x[:, 1]]
    inbox, outbox = CTX.Queue(), CTX.Queue()
    inbox.put(data)
    child = start(_fill, inbox, outbox)
    refusal = outbox.get(timeout=WAIT)
    joined(child)
    assert bool((data[0] == 4).all()) and bool((data[1] == 4).all())
    assert "copy()" in refusal, "a received array must not be sent on"
    cuda_ipc.ipc_collect()


@pytest.mark.timeout(240)
def test_producer_drops_arrays_right_after_put_and_the_consumer_still_reads_them() -> None:
    import cupy

    inbox, outbox = CTX.Queue(), CTX.Queue()
    size = 1 << 18
    for value in range(5):
        inbox.put(cupy.full(size, value, dtype=cupy.float32))
    gc.collect()
    churn = [cupy.full(size, -1, dtype=cupy.float32) for _ in range(10)]  # would reuse freed pool memory
    big = cupy.arange(4 * size, dtype=cupy.float32)
    inbox.put(big[size:size + 8])  # an array in the middle of its allocation
    del big
    child = start(sums, inbox, outbox, 6)
    seen = outbox.get(timeout=WAIT)
    joined(child)
    assert seen == [float(value * size) for value in range(5)] + [float(sum(range(size, size + 8)))]
    del churn
    cuda_ipc.ipc_collect()


def _multiply_two(inbox: Any, ready: Any, done: Any) -> None:
    import cupy

    ready.set()
    with cupy.cuda.Stream():
        tensor = inbox.get(timeout=WAIT)
        tensor *= 2
        cupy.cuda.get_current_stream().synchronize()
    done.set()


@pytest.mark.timeout(240)
def test_the_consumer_multiplies_only_after_the_producers_pending_add() -> None:
    import cupy

    inbox, ready, done = CTX.Queue(), CTX.Event(), CTX.Event()
    child = start(_multiply_two, inbox, ready, done)
    assert ready.wait(WAIT)
    spin = cupy.RawKernel(_SPIN, "spin")
    with cupy.cuda.Stream() as stream:
        tensor = cupy.ones(4, dtype=cupy.float32)
        stream.synchronize()
        spin((1,), (1,), (np.int64(500_000_000),))  # about a quarter of a second
        tensor += 1
        inbox.put(tensor)
        assert done.wait(WAIT)
        stream.synchronize()
        assert tensor.tolist() == [4.0, 4.0, 4.0, 4.0], "without the event the multiply runs before the add"
    joined(child)
    cuda_ipc.ipc_collect()


def five(value: int) -> Any:
    """Five int64s of value on the GPU."""
    import cupy

    return cupy.full(5, value, dtype=cupy.int64)


@pytest.mark.timeout(300)
def test_three_process_chain_passing_ten_thousand_small_arrays() -> None:
    count = 10_000
    first, second, result, done = CTX.Queue(), CTX.Queue(), CTX.Queue(), CTX.Event()
    chain = [start(send_and_drop, first, done, count, five), start(copy_on, first, second, done, count),
             start(sum_all, second, result, count, five)]
    total = result.get(timeout=4 * WAIT)
    done.set()
    for child in chain:
        joined(child)
    assert total == [count * (count - 1) // 2] * 5


def _write_floats_read_bytes(inbox: Any, outbox: Any) -> None:
    import cupy

    raw, floats = inbox.get(timeout=WAIT)
    floats[:] = 1.5
    outbox.put(cupy.asnumpy(raw).tobytes())
    raw[:4] = cupy.asarray(np.frombuffer(np.float32(2.5).tobytes(), np.uint8))
    cupy.cuda.get_current_stream().synchronize()


@pytest.mark.timeout(240)
def test_float_and_uint8_views_of_one_allocation() -> None:
    import cupy

    raw = cupy.zeros(16, dtype=cupy.uint8)
    floats = raw.view(cupy.float32)
    inbox, outbox = CTX.Queue(), CTX.Queue()
    inbox.put([raw, floats])
    child = start(_write_floats_read_bytes, inbox, outbox)
    seen = outbox.get(timeout=WAIT)
    joined(child)
    assert seen == np.full(4, 1.5, np.float32).tobytes()
    assert floats.tolist() == [2.5, 1.5, 1.5, 1.5]
    cuda_ipc.ipc_collect()


@pytest.mark.timeout(240)
def test_empty_arrays() -> None:
    import cupy

    arrays = [cupy.empty((0,), cupy.float32), cupy.empty((3, 0), cupy.uint8), cupy.arange(4.0)[2:2]]
    inbox, outbox = CTX.Queue(), CTX.Queue()
    inbox.put(arrays)
    child = start(describe, inbox, outbox)
    described = outbox.get(timeout=WAIT)
    joined(child)
    assert described == [((0,), "<f4", 0), ((3, 0), "|u1", 0), ((0,), "<f8", 0)]


def _send_twice(outbox: Any, done: Any) -> None:
    import cupy

    tensor = cupy.ones((5, 5), dtype=cupy.float32)
    outbox.put(tensor)
    outbox.put(tensor)
    done.wait(WAIT)


@pytest.mark.timeout(240)
def test_an_array_received_twice_is_one_mapping_of_the_same_memory() -> None:
    outbox, done = CTX.Queue(), CTX.Event()
    child = start(_send_twice, outbox, done)
    first, second = outbox.get(timeout=WAIT), outbox.get(timeout=WAIT)
    assert bool((first == 1).all())
    assert first.data.ptr == second.data.ptr and len(handles.current()) == 1
    first[0, 0] = 7
    assert float(second[0, 0]) == 7.0
    del first, second
    gc.collect()
    assert len(handles.current()) == 0, "the handle is closed with its last view"
    done.set()
    joined(child)


def test_the_sending_process_gets_its_own_memory_back() -> None:
    import cupy

    x = cupy.arange(6, dtype=cupy.float32)
    back = ForkingPickler.loads(ForkingPickler.dumps(x[2:]))
    back[0] = 42
    assert x.tolist() == [0.0, 1.0, 42.0, 3.0, 4.0, 5.0]
    assert cuda_ipc.ipc_collect() >= 1


def _receive_in_fork(inbox: Any, report: Any) -> None:
    try:
        inbox.get(timeout=WAIT)
        report.put("received")
    except RuntimeError as error:
        report.put(str(error))


@pytest.mark.timeout(120)
def test_a_forked_child_touching_cuda_gets_the_guards_error() -> None:
    import cupy

    x = cupy.ones(4, dtype=cupy.float32)  # this process has initialised CUDA
    context = mp.get_context("fork")
    inbox, report = context.Queue(), context.SimpleQueue()
    inbox.put(x)
    child = context.Process(target=_receive_in_fork, args=(inbox, report))
    child.start()
    outcome = report.get()
    child.join(WAIT)
    assert "'spawn'" in outcome and "'forkserver'" in outcome
    assert cuda_ipc.ipc_collect() >= 1, "the refused message gave its slot back"


def _add_one(inbox: Any, done: Any) -> None:
    import cupy

    tensor = inbox.get(timeout=WAIT)
    tensor.add_(1)
    cupy.cuda.Device(0).synchronize()
    done.set()


@pytest.mark.timeout(240)
def test_framework_cuda_tensors_travel_through_a_queue() -> None:
    import framework

    tensor = framework.tensor([1.0, 2.0, 3.0], device="cuda:0")
    inbox, done = CTX.Queue(), CTX.Event()
    inbox.put(tensor)
    child = start(_add_one, inbox, done)
    assert done.wait(WAIT)
    joined(child)
    assert tensor.to("cpu").numpy().tolist() == [2.0, 3.0, 4.0]
    cuda_ipc.ipc_collect()


def test_every_allocation_is_exportable_and_shareable_gives_one_of_its_own() -> None:
    import cupy

    from cuda_ipc.cupy_backend import cupy_backend
    from cuda_ipc.segments import SEGMENT_BYTES

    backend = cupy_backend()
    assert cupy.cuda.get_allocator() == cuda_ipc.memory_pool().malloc
    arrays = [cupy.full(5, value, dtype=cupy.int64) for value in range(3)] + [cupy.zeros(3 << 20, cupy.uint8)]
    assert all(backend.locate(a).base_size % SEGMENT_BYTES == 0 for a in arrays)
    own = cuda_ipc.shareable(arrays[0])
    located = backend.locate(own)
    assert (located.offset, located.base_size) == (0, SEGMENT_BYTES) and own.tolist() == [0] * 5
    assert cuda_ipc.shareable(own) is own


def _send_small_ones(outbox: Any, done: Any, count: int) -> None:
    for value in range(count):
        outbox.put(five(value))
    done.wait(4 * WAIT)


@pytest.mark.timeout(240)
def test_small_arrays_sent_one_by_one_share_a_handle() -> None:
    count = 1000
    outbox, done = CTX.Queue(), CTX.Event()
    child = start(_send_small_ones, outbox, done, count)
    opened = handles.current().opened
    held = [outbox.get(timeout=WAIT) for _ in range(count)]
    total = int(sum(int(a.sum()) for a in held))
    opened = handles.current().opened - opened
    del held
    gc.collect()
    done.set()
    joined(child)
    assert total == 5 * count * (count - 1) // 2
    assert opened <= 2, f"{count} arrays of 40 bytes opened {opened} handles: they are not packed"
    cuda_ipc.ipc_collect()


def _add_late_under_per_thread_streams(outbox: Any, done: Any) -> None:
    import cupy  # imported with CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1, from the parent's environment

    tensor = cupy.ones(4, dtype=cupy.float32)
    cupy.cuda.get_current_stream().synchronize()
    cupy.RawKernel(_SPIN, "spin")((1,), (1,), (np.int64(500_000_000),))  # about a quarter of a second
    tensor += 1
    outbox.put((cupy.cuda.get_current_stream().ptr, tensor))  # pickled by the feeder thread, on its own stream
    done.wait(WAIT)


@pytest.mark.timeout(240)
def test_under_per_thread_default_streams_the_consumer_waits_for_the_producers_work(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUPY_CUDA_PER_THREAD_DEFAULT_STREAM", "1")
    outbox, done = CTX.Queue(), CTX.Event()
    child = start(_add_late_under_per_thread_streams, outbox, done)
    stream, tensor = outbox.get(timeout=WAIT)
    tensor *= 2
    seen = tensor.tolist()
    del tensor
    gc.collect()
    done.set()
    joined(child)
    assert stream == 2, "the producer did not run on its per-thread default stream (cudaStreamPerThread)"
    assert seen == [4.0] * 4, "the multiply ran before the producer's add: the event was recorded too early"
    cuda_ipc.ipc_collect()
