"""Bad input and running out of room: clear errors at the call, nothing left behind."""
from __future__ import annotations

import gc
import pickle
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import sharing
from sharing import room

MiB = 1 << 20


def test_share_array_wants_an_ndarray():
    with pytest.raises(TypeError, match="numpy.ndarray, got list"):
        sharing.share_array([1, 2, 3])


def test_object_arrays_cannot_live_in_shared_memory(strategy):
    with pytest.raises(TypeError, match="cannot live in shared memory"):
        sharing.share_array(np.array([1, "a"], dtype=object))
    with pytest.raises(TypeError, match="cannot live in shared memory"):
        sharing.empty_shared(3, [("a", "i4"), ("b", "O")])


@pytest.mark.parametrize("shape, dtype, order, error, match", [
    (-1, float, "C", ValueError, "negative dimension"),
    ((2, -3), float, "C", ValueError, "negative dimension"),
    (2.5, float, "C", TypeError, "shape must be an int or a sequence of ints"),
    ("ab", float, "C", TypeError, "shape must be"),
    (3, "no-such-type", "C", TypeError, "not understood"),
    (3, float, "K", ValueError, "order must be 'C' or 'F'"),
])
def test_empty_shared_rejects_bad_arguments(shape, dtype, order, error, match):
    with pytest.raises(error, match=match):
        sharing.empty_shared(shape, dtype, order)


def test_empty_shared_is_zero_filled_with_the_asked_layout(strategy):
    a = sharing.empty_shared((3, 4), np.int16, order="F")
    assert a.shape == (3, 4) and a.dtype == np.int16 and a.flags.f_contiguous and not a.any()
    assert sharing.empty_shared(np.int64(5)).shape == (5,)
    assert sharing.empty_shared(np.array([2, 3])).shape == (2, 3)


def test_share_array_copies_and_keeps_fortran_order(strategy):
    source = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    shared = sharing.share_array(source)
    assert shared.flags.f_contiguous and not np.shares_memory(shared, source)
    np.testing.assert_array_equal(shared, source)
    strided = sharing.share_array(np.arange(10)[::3])
    assert strided.flags.c_contiguous and strided.tolist() == [0, 3, 6, 9]


def test_zero_size_arrays_share_and_travel(strategy):
    for empty in (sharing.share_array(np.zeros((0, 4), np.float32)), sharing.empty_shared(0)):
        assert sharing.is_shared(empty) and empty.size == 0
        got = pickle.loads(ForkingPickler.dumps(empty))
        assert got.shape == empty.shape and got.dtype == empty.dtype
        assert sharing.storage_of(got) is sharing.storage_of(empty)
    assert sharing.storage_of(sharing.empty_shared(0)).nbytes == 0


def test_storage_refuses_plain_pickle():
    storage = sharing.storage_of(sharing.empty_shared(4))
    with pytest.raises(TypeError, match="travels only through multiprocessing"):
        pickle.dumps(storage)


def test_storage_is_a_byte_buffer_that_outlives_its_arrays():
    a = sharing.share_array(np.arange(4, dtype=np.uint8))
    storage = sharing.storage_of(a)
    del a
    assert len(storage) == storage.nbytes == 4
    assert np.asarray(storage).tolist() == [0, 1, 2, 3]
    assert sharing.is_shared(np.asarray(storage)) and "4 bytes" in repr(storage)


def test_quota_turns_too_big_an_allocation_into_memory_error(strategy, monkeypatch):
    gc.collect()  # the quota counts this process's live storages: earlier tests' that only a cycle holds go first
    monkeypatch.setenv(room.LIMIT_ENV, str(MiB))
    with pytest.raises(MemoryError, match=rf"2\.0 MiB \({2 * MiB} bytes\).*{strategy}.*only 1\.0 MiB.*{room.LIMIT_ENV}"):
        sharing.empty_shared(2 * MiB, np.uint8)
    first = sharing.empty_shared(MiB // 2, np.uint8)
    second = sharing.empty_shared(MiB // 2, np.uint8)
    with pytest.raises(MemoryError, match=r"only 0 bytes left"):
        sharing.empty_shared(1, np.uint8)
    del first, second                                     # live storages count, released ones do not
    sharing.empty_shared(MiB, np.uint8)


def test_asking_for_more_than_the_machine_holds_is_memory_error(strategy):
    where = "left in /dev/shm" if strategy == "file_system" else "memory"
    with pytest.raises(MemoryError, match=rf"cannot allocate 1024\.0 TiB .*only .* {where}"):
        sharing.empty_shared(1 << 50, np.uint8)


def test_quota_must_be_a_number(monkeypatch):
    monkeypatch.setenv(room.LIMIT_ENV, "lots")
    with pytest.raises(ValueError, match="HOGSHARE_SHM_LIMIT_BYTES='lots'"):
        sharing.empty_shared(1)


def test_format_bytes():
    assert room.format_bytes(512) == "512 bytes"
    assert room.format_bytes(3 * MiB // 2) == "1.5 MiB (1572864 bytes)"
