"""The producer's reference-count files: slot allocation, collection, and consumers releasing from other processes."""
from __future__ import annotations

import numpy as np
import pytest

import sharing as mp
from cuda_ipc.refcount import RefCountFile, RefCounts, release


def _release_slots(counts: np.ndarray, slots: list[int]) -> None:
    for slot in slots:
        release(counts, slot)


def test_allocate_sets_count_one_until_full() -> None:
    file = RefCountFile(3)
    slots = [file.allocate() for _ in range(3)]
    assert sorted(slots) == [0, 1, 2]
    assert file.counts.tolist() == [1, 1, 1]
    assert file.allocate() is None
    assert file.used == 3


def test_collect_frees_only_released_slots_for_reuse() -> None:
    file = RefCountFile(4)
    first, second, third = file.allocate(), file.allocate(), file.allocate()
    assert file.collect() == []
    release(file.counts, second)
    assert file.collect() == [second]
    assert file.collect() == []
    assert file.used == 2
    reused = [file.allocate(), file.allocate()]
    assert second in reused
    assert file.counts[second] == 1
    assert {first, third}.isdisjoint(reused)


def test_the_lowest_free_slot_is_reused_first() -> None:
    file = RefCountFile(8)
    slots = [file.allocate() for _ in range(5)]
    assert slots == [0, 1, 2, 3, 4]
    for slot in (4, 3, 1):
        release(file.counts, slot)
    assert sorted(file.collect()) == [1, 3, 4]
    assert [file.allocate(), file.allocate()] == [1, 3]
    release(file.counts, 0)
    assert file.collect() == [0]


def test_counts_live_in_shared_memory() -> None:
    assert mp.is_shared(RefCountFile(2).counts)


@pytest.mark.timeout(120)
def test_consumer_in_another_process_releases_slots_the_producer_sees() -> None:
    file = RefCountFile(8)
    slots = [file.allocate() for _ in range(3)]
    child = mp.get_context("spawn").Process(target=_release_slots, args=(file.counts, slots[:2]))
    child.start()
    child.join(90)
    assert child.exitcode == 0
    assert sorted(file.collect()) == sorted(slots[:2])
    assert file.counts[slots[2]] == 1


def test_release_twice_is_an_error() -> None:
    file = RefCountFile(2)
    slot = file.allocate()
    release(file.counts, slot)
    with pytest.raises(RuntimeError, match="released twice"):
        release(file.counts, slot)


@pytest.mark.parametrize("slots", [0, -1, 2.5, True])
def test_bad_file_size_is_refused(slots: object) -> None:
    with pytest.raises(ValueError, match="positive int number of slots"):
        RefCountFile(slots)  # type: ignore[arg-type]


def test_ref_counts_add_a_file_when_full_and_keep_one_spare() -> None:
    counts = RefCounts(slots_per_file=2)
    taken = [counts.allocate() for _ in range(5)]
    assert counts.files == 3
    assert len({(file.id, slot) for file, slot in taken}) == 5
    for file, slot in taken[2:]:
        release(file.counts, slot)
    done = counts.collect()
    assert sorted(done) == sorted((file.id, slot) for file, slot in taken[2:])
    assert counts.files == 2  # the full first file, and one empty spare
    for file, slot in taken[:2]:
        release(file.counts, slot)
    assert len(counts.collect()) == 2
    assert counts.files == 1
