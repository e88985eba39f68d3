"""The producer's reference counts: one int64 slot per sent block, in small shared-memory files.

Each send takes a fresh slot set to 1; the message carries the file (a shared
NumPy array, sent by ``sharing`` as a handle) and the slot index, and the one
consumer that rebuilds the message decrements the slot when its array is
gone. A slot therefore has a single writer at any time (the producer before
the send, that consumer after it), so plain int64 stores are enough and no
cross-process atomics are needed. The producer frees the slot once it reads
zero, and may reuse it for a later send.
"""
from __future__ import annotations

import heapq
import itertools

import numpy as np

import sharing

SLOTS_PER_FILE = 4096

_file_ids = itertools.count(1)


class RefCountFile:
    """One shared int64 array of counters, with the producer's record of which slots are taken."""

    def __init__(self, slots: int = SLOTS_PER_FILE) -> None:
        if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
            raise ValueError(f"a reference-count file needs a positive int number of slots, got {slots!r}")
        self.id = next(_file_ids)
        self.counts = sharing.empty_shared((slots,), np.int64)
        self.counts[:] = 0
        self._in_use = np.zeros(slots, dtype=bool)
        self._free = list(range(slots))  # a heap: the lowest free slot is reused first ...
        self._high = 0                   # ... so that collecting scans only the slots below this mark

    @property
    def used(self) -> int:
        """Number of slots taken by sent blocks not yet collected."""
        return len(self._in_use) - len(self._free)

    def allocate(self) -> int | None:
        """Take a free slot and set its count to 1; None when the file is full."""
        if not self._free:
            return None
        slot = heapq.heappop(self._free)
        self.counts[slot] = 1
        self._in_use[slot] = True
        self._high = max(self._high, slot + 1)
        return slot

    def collect(self) -> list[int]:
        """Free the taken slots whose count reached zero and return them."""
        high = self._high
        done = np.flatnonzero(self._in_use[:high] & (self.counts[:high] <= 0)).tolist()
        self._in_use[done] = False
        for slot in done:
            heapq.heappush(self._free, slot)
        if done and not self._in_use[high - 1]:
            self._high = int(np.flatnonzero(self._in_use[:high])[-1]) + 1 if self.used else 0
        return done


class RefCounts:
    """All of a producer's reference-count files: hands out slots, adding a file when the others are full."""

    def __init__(self, slots_per_file: int = SLOTS_PER_FILE) -> None:
        self._slots_per_file = slots_per_file
        self._files: list[RefCountFile] = []

    @property
    def files(self) -> int:
        """Number of files currently held."""
        return len(self._files)

    def allocate(self) -> tuple[RefCountFile, int]:
        """A fresh slot (count 1) and the file it is in."""
        for file in self._files:
            slot = file.allocate()
            if slot is not None:
                return file, slot
        file = RefCountFile(self._slots_per_file)
        self._files.append(file)
        return file, file.allocate()

    def collect(self) -> list[tuple[int, int]]:
        """(file id, slot) of every slot released by its consumer since the last call; keeps one empty file at most."""
        done = [(file.id, slot) for file in self._files for slot in file.collect()]
        if done and len(self._files) > 1:
            kept, spare = [], False
            for file in self._files:
                if file.used or not spare:
                    spare = spare or not file.used
                    kept.append(file)
            self._files = kept
        return done


def release(counts: np.ndarray, slot: int) -> None:
    """Consumer side: give back the reference a received block holds on the producer's slot."""
    if counts[slot] <= 0:
        raise RuntimeError(f"slot {slot} of a CUDA IPC reference-count file was released twice "
                           f"(count {int(counts[slot])}); each received array releases its slot once")
    counts[slot] -= 1
