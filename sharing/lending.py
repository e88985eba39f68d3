"""Keeps a storage alive in its sender until each receiver of a message holds it.

A receiver opens the segment through the sender's descriptor
(``file_descriptor``) or the sender's published name (``file_system``), so the
sender must keep the storage until the message is received, even when the
program dropped the array right after ``put``. Each sending process lends:
it holds a reference per message in a slot of its *board*, a small shared
segment of ``uint32`` acknowledgements, and puts the board's descriptor, the
slot and a generation number in the handle. The receiver, once it holds the
segment, writes the generation into the slot; the lender drops the references
whose slots hold their generation every few lends and before each allocation. That
costs one store to shared memory per message: no system call, no server
thread, no round trip.

Receivers reach the board through ``/proc/<sender>/fd`` like a
``file_descriptor`` segment. A message that is never received (or whose
receiver cannot reach the board) keeps its storage until the sender exits, as
with torch's descriptor sharing. If more than ``BOARD_SLOTS`` messages are in
flight at once, the overflow is held until the sender exits.
"""
from __future__ import annotations

import os
import threading

from . import memfd
from .storage import Storage

BOARD_SLOTS = 1 << 16
_REAP_EVERY = 8
_PEER_BOARDS = 64  # boards of other processes kept mapped (the oldest dropped first)


class _Board:
    """This process's board: slots of lent storages and the acknowledgements receivers write."""

    def __init__(self) -> None:
        self.storage = memfd.make_segment(BOARD_SLOTS * 4, reserve=False)
        self.acks = memoryview(self.storage.as_bytes()).cast("I")
        self.lent: dict[int, tuple[int, Storage]] = {}
        self.free: list[int] = []
        self.unused = 0            # slots from here on were never used
        self.generation = 0
        self.countdown = 0         # lends until the next look at the acknowledgements
        self.overflow: list[Storage] = []

    def reap(self) -> None:
        """Drop the storages whose receivers have acknowledged them."""
        acks = self.acks
        done = [slot for slot, (gen, _) in self.lent.items() if acks[slot] == gen]
        for slot in done:
            del self.lent[slot]
        self.free.extend(done)
        # Amortised O(1) per lend. Allocation reaps in full, so storages dropped by
        # the program are not kept waiting for this countdown when memory is asked for.
        self.countdown = max(_REAP_EVERY, len(self.lent) // _REAP_EVERY)

    def lend(self, storage: Storage) -> tuple[int, int]:
        self.countdown -= 1
        if self.countdown <= 0:
            self.reap()
        self.generation = self.generation % 0xFFFFFFFF + 1  # never 0, the value of a fresh slot
        if self.free:
            slot = self.free.pop()
        elif self.unused < BOARD_SLOTS:
            slot, self.unused = self.unused, self.unused + 1
        else:
            self.overflow.append(storage)
            return -1, 0
        self.acks[slot] = 0
        self.lent[slot] = (self.generation, storage)
        return slot, self.generation


_board: _Board | None = None
_peers: dict[tuple[int, int], memoryview] = {}
_lock = threading.Lock()


def lend(storage: Storage) -> tuple[int, int, int, int]:
    """Hold `storage` for one message; return (board fd, board inode, slot, generation) for its handle."""
    global _board
    with _lock:
        if _board is None:
            _board = _Board()
        slot, generation = _board.lend(storage)
        return _board.storage.fd, _board.storage.ino, slot, generation


def reap() -> None:
    """Drop every lent storage already received (called before allocating, when memory matters)."""
    with _lock:
        if _board is not None and _board.lent:
            _board.reap()


def lent_storages() -> list[Storage]:
    """The storages held for messages not yet acknowledged (as of the last look)."""
    with _lock:
        if _board is None:
            return []
        return [storage for _, storage in _board.lent.values()] + list(_board.overflow)


def lent_count() -> int:
    """How many messages this process has in flight (sent, not yet acknowledged when last looked)."""
    with _lock:
        return 0 if _board is None else len(_board.lent) + len(_board.overflow)


def acknowledge(pid: int, board_fd: int, board_ino: int, slot: int, generation: int) -> None:
    """Tell the lender that this process now holds the storage of message (`slot`, `generation`)."""
    if slot < 0:
        return
    acks = _peers.get((pid, board_ino))
    if acks is None:
        acks = _map_board(pid, board_fd, board_ino)
        if acks is None:
            return  # the lender is gone: nobody is waiting for this acknowledgement
    acks[slot] = generation


def _map_board(pid: int, board_fd: int, board_ino: int) -> memoryview | None:
    """The acknowledgements of process `pid`'s board, mapped once and kept (oldest dropped past a bound)."""
    with _lock:
        if _board is not None and pid == os.getpid() and board_ino == _board.storage.ino:
            acks = _board.acks
        else:
            try:
                board = memfd.open_segment(b"board", BOARD_SLOTS * 4, pid, board_fd, board_ino)
            except (OSError, RuntimeError):
                return None
            acks = memoryview(board.as_bytes()).cast("I")
        _peers[(pid, board_ino)] = acks
        if len(_peers) > _PEER_BOARDS:
            del _peers[next(iter(_peers))]
        return acks


def _after_fork_in_child() -> None:
    # The board is shared with the parent after fork; the child lends from its own.
    global _board, _lock
    _lock = threading.Lock()
    _board = None
    _peers.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
