"""The producer's limbo: every sent block stays referenced here until its consumer has let go.

Holding the block's memory object keeps CuPy from freeing or reusing the
bytes (even when the producer dropped its own array right after ``put``)
while a consumer may still read them. Released blocks are collected on each
new send and on :func:`ipc_collect`; a producer that exits with blocks still
in use says so in a warning.
"""
from __future__ import annotations

import atexit
import os
import threading
import warnings
from dataclasses import dataclass
from typing import Any

from cuda_ipc.backend import Backend, Located
from cuda_ipc.refcount import SLOTS_PER_FILE, RefCountFile, RefCounts

# Live interprocess events are a limited driver resource; past this many, a send
# waits for the device instead of recording an event (as PyTorch does).
MAX_LIVE_EVENTS = 1000


@dataclass(frozen=True)
class SentBlock:
    """One send: what keeps the bytes alive, the event consumers wait on, and the slot they release."""

    backend: Backend
    located: Located
    event: Any               # None when the device was synchronised instead
    event_handle: bytes | None
    file: RefCountFile
    slot: int


class Limbo:
    """The blocks a producer has sent, each held until the consumer's count on it reaches zero."""

    def __init__(self, slots_per_file: int = SLOTS_PER_FILE) -> None:
        self._lock = threading.Lock()
        self._counts = RefCounts(slots_per_file)
        self._blocks: dict[tuple[int, int], SentBlock] = {}
        self._events = 0

    def __len__(self) -> int:
        return len(self._blocks)

    @property
    def live_events(self) -> int:
        """Events recorded for blocks not yet collected."""
        return self._events

    def send(self, backend: Backend, located: Located) -> SentBlock:
        """Collect released blocks, then hold this one under a fresh slot with an event recorded for it."""
        with self._lock:
            self._collect()
            event, event_handle = None, None
            if self._events < MAX_LIVE_EVENTS:
                event, event_handle = backend.record_event(located.device)
                self._events += 1
            else:
                backend.synchronize(located.device)
            file, slot = self._counts.allocate()
            block = SentBlock(backend, located, event, event_handle, file, slot)
            self._blocks[(file.id, slot)] = block
        _watch_exit()
        return block

    def block(self, file_id: int, slot: int) -> SentBlock:
        """The block sent under (file id, slot); KeyError once it was collected."""
        with self._lock:
            return self._blocks[(file_id, slot)]

    def collect(self) -> int:
        """Let go of every block whose consumer has released it; returns how many."""
        with self._lock:
            return self._collect()

    def _collect(self) -> int:
        done = self._counts.collect()
        for key in done:
            block = self._blocks.pop(key)
            if block.event is not None:
                block.backend.destroy_event(block.event, block.located.device)
                self._events -= 1
        return len(done)


_limbo = Limbo()
_inherited: list[Limbo] = []
_exit_watched = False


def current() -> Limbo:
    """This process's limbo."""
    return _limbo


def ipc_collect() -> int:
    """Free the sent CUDA blocks that every consumer has released; returns how many were freed."""
    return _limbo.collect()


def warn_if_in_use(limbo: Limbo) -> None:
    """Collect, then warn when blocks sent to other processes are still in use (called at exit)."""
    limbo.collect()
    if len(limbo):
        warnings.warn(
            f"process {os.getpid()} exits while {len(limbo)} CUDA block(s) it sent are still in use by "
            "other processes: their memory is freed now, and a consumer still reading it gets undefined "
            "results. Keep the producer alive until the consumers have let go (join them, then call "
            "cuda_ipc.ipc_collect()).", RuntimeWarning, stacklevel=1)


def _at_exit() -> None:
    warn_if_in_use(_limbo)


def _watch_exit() -> None:
    global _exit_watched
    if not _exit_watched:
        _exit_watched = True
        atexit.register(_at_exit)


def _after_fork_in_child() -> None:
    # The parent's blocks are the parent's to free; a forked child starts with an empty limbo
    # and keeps the inherited one referenced so that nothing is freed from the child.
    global _limbo
    _inherited.append(_limbo)
    _limbo = Limbo()


os.register_at_fork(after_in_child=_after_fork_in_child)
