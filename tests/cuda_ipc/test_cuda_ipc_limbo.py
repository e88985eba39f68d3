"""The producer's limbo: sent blocks stay pinned until released, events, collection, the exit warning."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import warnings
import weakref
from pathlib import Path

import pytest

import cuda_ipc
from cuda_ipc import limbo
from cuda_ipc.limbo import Limbo, warn_if_in_use
from cuda_ipc.refcount import release
from cuda_ipc_host import device_array, host_backend


def _send(box: Limbo, value: float = 1.0) -> tuple[object, weakref.ref]:
    array = device_array([value, value])
    located = host_backend().locate(array)
    block = box.send(host_backend(), located)
    return block, weakref.ref(array.memory)


def test_sent_block_pins_its_memory_until_released_and_collected() -> None:
    box = Limbo()
    block, memory = _send(box)
    gc.collect()
    assert memory() is not None, "the producer dropped its array, but the consumer may still read it"
    assert box.collect() == 0 and len(box) == 1
    release(block.file.counts, block.slot)
    assert box.collect() == 1 and len(box) == 0
    del block
    gc.collect()
    assert memory() is None


def test_blocks_are_released_in_whatever_order_consumers_let_go() -> None:
    box = Limbo()
    blocks = [_send(box, v)[0] for v in range(4)]
    order = (2, 0, 3, 1)
    for n, index in enumerate(order):
        release(blocks[index].file.counts, blocks[index].slot)
        assert box.collect() == 1
        with pytest.raises(KeyError):
            box.block(blocks[index].file.id, blocks[index].slot)
        held = [blocks[i] for i in order[n + 1:]]
        assert all(box.block(b.file.id, b.slot) is b for b in held)
    assert len(box) == 0


def test_each_send_records_an_event_destroyed_on_collection() -> None:
    box = Limbo()
    block, _ = _send(box)
    assert block.event_handle in host_backend().live_events
    assert box.live_events == 1
    release(block.file.counts, block.slot)
    box.collect()
    assert block.event_handle not in host_backend().live_events
    assert box.live_events == 0


def test_past_the_event_budget_a_send_synchronises_instead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limbo, "MAX_LIVE_EVENTS", 2)
    box = Limbo()
    before = host_backend().synchronized
    blocks = [_send(box)[0] for _ in range(3)]
    assert [b.event is None for b in blocks] == [False, False, True]
    assert host_backend().synchronized == before + 1
    release(blocks[0].file.counts, blocks[0].slot)
    fourth = _send(box)[0]  # collection on send frees an event for it
    assert fourth.event is not None
    for block in blocks[1:] + [fourth]:
        release(block.file.counts, block.slot)
    assert box.collect() == 3


def test_ipc_collect_frees_released_blocks_of_this_process(drained: Limbo) -> None:
    block, _ = _send(drained)
    assert cuda_ipc.ipc_collect() == 0
    release(block.file.counts, block.slot)
    assert cuda_ipc.ipc_collect() == 1


def test_warning_names_blocks_still_in_use() -> None:
    box = Limbo()
    block, _ = _send(box)
    with pytest.warns(RuntimeWarning, match=r"1 CUDA block\(s\) it sent are still in use"):
        warn_if_in_use(box)
    release(block.file.counts, block.slot)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_in_use(box)


_EXITING_PRODUCER = """
from cuda_ipc.pickling import share
from cuda_ipc_host import device_array, host_backend
kept = device_array([1.0, 2.0])
message = share(kept, host_backend())
"""


@pytest.mark.timeout(120)
def test_producer_exiting_with_blocks_in_use_warns(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", _EXITING_PRODUCER], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=90)
    assert done.returncode == 0, done.stderr
    assert "still in use by other processes" in done.stderr
    assert "ipc_collect" in done.stderr
