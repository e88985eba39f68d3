"""Keeps a storage alive in its sender until each receiver of a message holds it.

A receiver opens the segment through the sender's descriptor
(``file_descriptor``) or the sender's published name (``file_system``), so the
sender must keep the storage until the message is received, even when the
program dropped the array right after ``put``. Each sending process lends:
every message takes the next *ticket* of the process, the sender holds
(ticket, storage) in a list, and the handle carries the ticket and the address
of the sender's *board*, a small shared segment of ``uint32`` cells. The
receiver, once it holds the segment, writes the ticket into cell
``ticket % BOARD_SLOTS``; the lender drops the entries whose cells hold their
ticket every few lends and before each allocation.

This runs for every message on both sides, so it is as small as Python allows:
the sender takes a ticket and appends to a deque (both atomic under the GIL, so
no lock), the receiver makes one store to shared memory. No system call, no
server thread, no round trip.

Receivers reach the board through ``/proc/<sender>/fd`` like a
``file_descriptor`` segment. A message that is never received (or whose
receiver cannot reach the board) keeps its storage until the sender exits, as
with torch's descriptor sharing. So does a message still unacknowledged once
``BOARD_SLOTS`` later messages have been lent: its cell has been reused and the
lender can no longer tell.
"""
from __future__ import annotations

import collections
import itertools
import os
import threading

from . import memfd
from .storage import Storage

BOARD_SLOTS = 1 << 16
_TICKETS = 0xFFFFFFFF  # tickets run 1 .. 2**32 - 1: a cell's 0 means "never written"
_REAP_EVERY = 8
_PEER_BOARDS = 64  # boards of other processes kept mapped (the oldest dropped first)

_tickets = itertools.count(1)
_held: collections.deque[tuple[int, Storage]] = collections.deque()  # (count, storage) per message in flight
_kept: list[Storage] = []     # storages of messages the lender can no longer tell about: held until exit
_reap_at = _REAP_EVERY        # the count at which the next lend looks at the acknowledgements
_board: Storage | None = None
_acks: memoryview | None = None
_peers: dict[tuple[int, int, int], memoryview] = {}  # board address -> its cells
_lock = threading.Lock()      # board creation and reaping


def board() -> tuple[int, int, int]:
    """This process's board address, (pid, descriptor, inode): the part of a handle no message changes."""
    global _board, _acks
    with _lock:
        if _board is None:
            _board = memfd.make_segment(BOARD_SLOTS * 4, reserve=False)
            _acks = memoryview(_board.as_bytes()).cast("I")
        return os.getpid(), _board.fd, _board.ino


def lend(storage: Storage) -> int:
    """Hold `storage` for one message and return the message's ticket (call `board` once first)."""
    count = next(_tickets)
    _held.append((count, storage))
    if count >= _reap_at:
        reap()
    return count % _TICKETS + 1


def reap() -> None:
    """Drop the storages whose messages have been received (also called before allocating)."""
    global _reap_at
    if _acks is None or not _lock.acquire(blocking=False):
        return  # nothing lent yet, or another thread is reaping
    try:
        acks, now = _acks, next(_tickets)  # `now` is past every count lent so far
        for _ in range(len(_held)):  # entries lent meanwhile are appended behind these
            entry = _held.popleft()
            count, storage = entry
            ticket = count % _TICKETS + 1
            if acks[ticket % BOARD_SLOTS] == ticket:
                continue  # received: let go
            if now - count > BOARD_SLOTS:
                _kept.append(storage)  # a later message took its cell
            else:
                _held.append(entry)
        # Amortised O(1) per lend. Allocation reaps in full, so storages dropped by
        # the program are not kept waiting for this countdown when memory is asked for.
        _reap_at = now + max(_REAP_EVERY, len(_held) // _REAP_EVERY)
    finally:
        _lock.release()


def lent_storages() -> list[Storage]:
    """The storages held for messages not yet acknowledged (as of the last look)."""
    with _lock:
        return [storage for _, storage in _held] + _kept


def lent_count() -> int:
    """How many messages this process has in flight (sent, not yet acknowledged when last looked)."""
    with _lock:
        return len(_held) + len(_kept)


def acknowledge(board_address: tuple[int, int, int], ticket: int) -> None:
    """Tell the lender whose board is at `board_address` that this process now holds the storage of
    message `ticket`."""
    acks = _peers.get(board_address)
    if acks is None:
        acks = _map_board(board_address)
        if acks is None:
            return  # the lender is gone: nobody is waiting for this acknowledgement
    acks[ticket % BOARD_SLOTS] = ticket


def _map_board(board_address: tuple[int, int, int]) -> memoryview | None:
    """The cells of a lender's board, mapped once and kept (oldest dropped past a bound)."""
    pid, board_fd, board_ino = board_address
    with _lock:
        if _board is not None and pid == os.getpid() and board_ino == _board.ino:
            acks = _acks
        else:
            try:
                peer = memfd.open_segment(b"board", BOARD_SLOTS * 4, pid, board_fd, board_ino)
            except (OSError, RuntimeError):
                return None
            acks = memoryview(peer.as_bytes()).cast("I")
        _peers[board_address] = acks
        if len(_peers) > _PEER_BOARDS:
            del _peers[next(iter(_peers))]
        return acks


def _after_fork_in_child() -> None:
    # The board is shared with the parent after fork; the child lends from its own.
    global _tickets, _held, _kept, _reap_at, _board, _acks, _lock
    _tickets, _held, _kept, _reap_at = itertools.count(1), collections.deque(), [], _REAP_EVERY
    _board = _acks = None
    _lock = threading.Lock()
    _peers.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
