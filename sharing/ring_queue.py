"""RingQueue: a multiprocessing queue whose transport is a ring buffer in shared memory.

Why: ``multiprocessing.Queue`` pays, per message, a wake-up of its feeder
thread, a pickler built from scratch, a write to a pipe and a read from it.
A shared array's handle is small, so that is most of what sending one costs.
Here ``put`` pickles in the caller's thread (with a ForkingPickler kept per
thread, so the registered reducers apply and shared arrays travel as handles),
copies the bytes into a ring in shared memory under a lock and, if a consumer
sleeps, wakes it with a futex; ``get`` copies them out and unpickles. Many
producers and consumers, any start method, no thread.

Why not faster-fifo (the same design in C++, which sample-factory uses): its
mutex is not robust, so a process SIGKILLed while it holds the lock (mid-put
or mid-get) leaves every other process blocked in ``pthread_mutex_lock`` for
good, past any timeout (tried: a consumer hangs once a producer is killed
copying a message in); ``get`` and ``put`` give up after 10 s by default
and refuse ``timeout=None``; ``close()`` does not stop ``put``. Fixing the
first is a different lock, and then little of it is left: hence this module,
as fast as faster-fifo without its spin (the two were measured side by side
while this was written: within a few percent, for a tuple and for a shared
array alike; the handle's pickling, not the ring, is what costs).

The protocol. The ring's state is two 64-bit words, each packing (messages
moved, mod 2**32; byte offset): the write word, stored by producers, and the
read word, stored by consumers, both under one robust process-shared mutex. A
put copies ``[length][pickle]`` past the write offset, then stores the new
write word; a get copies a message out, then stores the new read word. A
process killed before its store leaves the ring as it was (bytes past the
write offset are not in the ring); after it, the message is in the ring (put)
or taken (get). The next process to lock a mutex whose owner died gets
EOWNERDEAD and carries on, as there is nothing to repair. So a kill mid-message
loses, tears or duplicates nothing; a consumer killed after it took a message
takes that message with it, as with any queue.

Waiting. A get that finds the ring empty first watches it for up to
``spin_s`` (200 us by default), yielding the CPU between looks
(``sched_yield``), so any process that wants the core gets it: in a
request/response exchange the answer usually comes within that, and a process
woken from a futex takes tens of microseconds to run again, more than the
message itself costs. Then it notes the count of messages put (the high half
of the write word), unlocks and sleeps on it (FUTEX_WAIT); a put changes it
and wakes one sleeper per message. Sleepers leave nothing behind when killed
(the count of sleepers is a hint, too high at worst, which costs a needless
wake), and sleep at most ``_WAIT_SLICE_S`` at a time, so a consumer woken and
killed before it took the message delays it by that much, no more. A full
ring is waited for the same way, on the count of messages taken.

What it costs: two copies per message (pickle into the ring, ring into bytes),
the lock held for those copies only, a futex wake when someone sleeps. The ring
is bounded (``capacity_bytes``, 1 MiB by default; a shared array's handle takes
about 150 bytes): ``put`` blocks while it is full, where
``multiprocessing.Queue`` buffers without bound in its feeder thread, and a
message larger than the ring is refused with a ValueError.
"""
from __future__ import annotations

import io
import os
import pickle
import sys
import threading
import time
from multiprocessing.reduction import ForkingPickler
from queue import Empty, Full

from . import _libc, memfd
from .storage import Storage

DEFAULT_CAPACITY = 1 << 20
DEFAULT_SPIN_S = 200e-6
_WAIT_SLICE_S = 0.25
_U32 = 0xFFFFFFFF
_LENGTH_BYTES = 4

# Layout of the segment: the mutex, four uint64 words, two uint32 hints, then the ring. The high half of the
# write and read words (messages put, messages taken) are the futexes that sleepers wait on.
_WRITE, _READ, _CAPACITY, _MAXSIZE = range(4)
_GETTERS_WAITING, _PUTTERS_WAITING = range(2)
_WORDS_AT = _libc.MUTEX_BYTES
_HINTS_AT = _WORDS_AT + 4 * 8
_RING_AT = _HINTS_AT + 2 * 4
_HIGH_HALF = 4 if sys.byteorder == "little" else 0

_unlock = _libc.unlock_mutex


class _LiveDispatch:
    """ForkingPickler's reducers as registered at this moment (a kept pickler would miss later registrations)."""

    __slots__ = ()

    def __getitem__(self, cls: type):
        reducer = ForkingPickler._extra_reducers.get(cls)
        return reducer if reducer is not None else ForkingPickler._copyreg_dispatch_table[cls]


class _ThreadPickler(threading.local):
    """One ForkingPickler per thread, reused: ForkingPickler.dumps builds one, dispatch table copy included,
    for every message."""

    def __init__(self) -> None:
        self.buffer = io.BytesIO()
        self.pickler = ForkingPickler(self.buffer, pickle.DEFAULT_PROTOCOL)
        self.pickler.dispatch_table = _LiveDispatch()
        self.busy = False

    def frame(self, obj: object) -> bytes:
        """`obj` pickled, after its length (4 bytes, little-endian): one message as the ring holds it."""
        if self.busy:  # a reducer that puts on a RingQueue: pickle this one apart
            data = ForkingPickler.dumps(obj)
            return len(data).to_bytes(_LENGTH_BYTES, "little") + data
        buffer, pickler = self.buffer, self.pickler
        try:  # reset first: a signal handler may have raised out of the last message's finally
            self.busy = True
            pickler.clear_memo()
            buffer.seek(0)
            buffer.truncate()
            buffer.write(b"\0" * _LENGTH_BYTES)
            pickler.dump(obj)
            size = buffer.tell() - _LENGTH_BYTES
            buffer.seek(0)
            buffer.write(size.to_bytes(_LENGTH_BYTES, "little"))
            return buffer.getvalue()
        finally:
            self.busy = False
            pickler.clear_memo()  # the memo holds what was pickled: let it go now


_pickler = _ThreadPickler()


class RingQueue:
    """A process-shared FIFO with multiprocessing.Queue's interface, over a ring buffer in shared memory.

    ``maxsize`` bounds the messages held (0: only ``capacity_bytes`` bounds
    them). Pass it to processes as an argument (any start method) or through
    another queue. ``put`` returns once the message is in shared memory, so
    ``join_thread`` and ``cancel_join_thread`` have nothing to wait for.
    """

    def __init__(self, maxsize: int = 0, *, capacity_bytes: int = DEFAULT_CAPACITY,
                 spin_s: float = DEFAULT_SPIN_S) -> None:
        if not 0 <= maxsize <= _U32:
            raise ValueError(f"maxsize must be between 0 and {_U32}, got {maxsize}")
        if not 16 <= capacity_bytes < 1 << 32:
            raise ValueError(f"capacity_bytes must be at least 16 and below 4 GiB, got {capacity_bytes}")
        if spin_s < 0:
            raise ValueError(f"spin_s must be >= 0, got {spin_s}")
        storage = memfd.make_segment(_RING_AT + capacity_bytes, reserve=False)
        _libc.init_robust_mutex(storage.address)
        words = memoryview(storage.as_bytes())[_WORDS_AT:_HINTS_AT].cast("Q")
        words[_CAPACITY], words[_MAXSIZE] = capacity_bytes, maxsize
        self._attach(storage, spin_s)

    def _attach(self, storage: Storage, spin_s: float) -> None:
        memory = memoryview(storage.as_bytes())
        self._storage = storage
        self._words = memory[_WORDS_AT:_HINTS_AT].cast("Q")
        self._hints = memory[_HINTS_AT:_RING_AT].cast("I")
        self._ring = memory[_RING_AT:]
        self._mutex = storage.address
        self._try_lock_steps = _libc.try_lock_steps(storage.address)
        self._puts_futex = storage.address + _WORDS_AT + 8 * _WRITE + _HIGH_HALF
        self._gets_futex = storage.address + _WORDS_AT + 8 * _READ + _HIGH_HALF
        self._capacity, self._maxsize = self._words[_CAPACITY], self._words[_MAXSIZE]
        self._spin_s = spin_s
        self._closed = False

    def __reduce__(self):
        return _attached, (self._storage, self._spin_s)

    def __repr__(self) -> str:
        return f"<sharing.RingQueue of {self._capacity} bytes{', closed' if self._closed else ''}>"

    # --- the Queue interface --------------------------------------------------------------------------

    def put(self, obj: object, block: bool = True, timeout: float | None = None) -> None:
        """Put `obj` on the queue, waiting (if `block`, up to `timeout` s) for room; queue.Full otherwise."""
        if self._closed:
            raise ValueError(f"Queue {self!r} is closed")
        self._put(_pickler.frame(obj), 1, block, timeout)

    def put_many(self, objs: list, block: bool = True, timeout: float | None = None) -> None:
        """Put every item of `objs`, in order and all at once (room for all of them, or queue.Full)."""
        if self._closed:
            raise ValueError(f"Queue {self!r} is closed")
        if objs:
            self._put(b"".join([_pickler.frame(obj) for obj in objs]), len(objs), block, timeout)

    def put_nowait(self, obj: object) -> None:
        self.put(obj, False)

    def get(self, block: bool = True, timeout: float | None = None) -> object:
        """Remove and return the oldest item, waiting (if `block`, up to `timeout` s); queue.Empty otherwise."""
        if self._closed:
            raise ValueError(f"Queue {self!r} is closed")
        return pickle.loads(self._take(1, block, timeout)[0])

    def get_many(self, block: bool = True, timeout: float | None = None, max_messages: int = 1 << 30) -> list:
        """Remove and return up to `max_messages` items, all there are, waiting for the first as `get` does."""
        if self._closed:
            raise ValueError(f"Queue {self!r} is closed")
        return [pickle.loads(data) for data in self._take(max_messages, block, timeout)]

    def get_nowait(self) -> object:
        return self.get(False)

    def qsize(self) -> int:
        """How many messages the queue holds (already stale when it returns, as with any queue)."""
        return (self._words[_WRITE] >> 32) - (self._words[_READ] >> 32) & _U32

    def empty(self) -> bool:
        return self.qsize() == 0

    def full(self) -> bool:
        write, read = self._words[_WRITE], self._words[_READ]
        count = (write >> 32) - (read >> 32) & _U32
        return bool(self._maxsize and count >= self._maxsize) or self._room(write, read) <= _LENGTH_BYTES

    def close(self) -> None:
        """This process puts and gets no more (other processes carry on)."""
        self._closed = True

    def join_thread(self) -> None:
        """Returns at once after `close`: every put message is already in shared memory."""
        if not self._closed:
            raise AssertionError(f"Queue {self!r} not closed")

    def cancel_join_thread(self) -> None:
        """Nothing to cancel: there is no feeder thread."""

    # --- the ring ---------------------------------------------------------------------------------------

    def _room(self, write: int, read: int) -> int:
        """Free bytes in the ring, from the two words (equal offsets: empty if the counts agree, else full)."""
        used = ((write & _U32) - (read & _U32)) % self._capacity
        return self._capacity - used if used or write >> 32 == read >> 32 else 0

    def _lock(self, block: bool, deadline: float | None) -> bool:
        """Take the mutex (waiting if `block`, until `deadline`); False if it was not taken.

        Call it inside a `try` whose `finally` unlocks, taken or not (see
        Note [taking the mutex under Python signal handlers] in `_libc`). A
        holder that died mid-message left the words as they were: nothing to
        repair, so EOWNERDEAD is a lock like any other.
        """
        return _libc.take_mutex(self._try_lock_steps, self._mutex, block, deadline)

    def _sleep(self, futex: int, seen: int, waiting: int, deadline: float | None) -> bool:
        """With the mutex held: release it, sleep while the futex holds `seen` (a slice at most), take it back.

        False once `deadline` has passed (the mutex then held or not: see `_lock_when`).
        """
        slice_s = _WAIT_SLICE_S if deadline is None else min(_WAIT_SLICE_S, deadline - time.monotonic())
        if slice_s <= 0:
            return False
        hints = self._hints
        hints[waiting] += 1
        _unlock(self._mutex)
        _libc.futex_wait(futex, seen, slice_s)
        if not self._lock(True, deadline):
            return False  # the sleepers hint stays one too high: a needless wake at worst
        hints[waiting] = max(hints[waiting] - 1, 0)
        return True

    def _lock_when(self, putting: bool, size: int, messages: int, block: bool,
                   timeout: float | None) -> tuple[int, int]:
        """Take the mutex and return the (write, read) words once the ring has room for `messages` messages
        of `size` bytes (`putting`) or holds a message (getting); queue.Full or queue.Empty if it will not
        (not `block`, or `timeout` passed). The caller unlocks in a `finally`, whatever this raised."""
        refused = Full if putting else Empty
        deadline = None if timeout is None or not block else time.monotonic() + timeout
        if not self._lock(block, deadline):
            raise refused
        words, maxsize = self._words, self._maxsize
        while True:
            write, read = words[_WRITE], words[_READ]
            count = (write >> 32) - (read >> 32) & _U32
            if putting:
                ready = self._room(write, read) >= size and not (maxsize and count + messages > maxsize)
            else:
                ready = count > 0
            if ready:
                return write, read
            if not block:
                raise refused
            if putting:  # sleep until a get moves the read word, or a put the write word
                slept = self._sleep(self._gets_futex, read >> 32, _PUTTERS_WAITING, deadline)
            else:
                slept = self._sleep(self._puts_futex, write >> 32, _GETTERS_WAITING, deadline)
            if not slept:
                raise refused

    def _put(self, data: bytes, messages: int, block: bool, timeout: float | None) -> None:
        size, capacity = len(data), self._capacity
        if size > capacity:
            raise ValueError(f"{size} bytes cannot fit in {self!r}: make it with a larger capacity_bytes, or put "
                             "large arrays in shared memory (sharing.share_array) so that only handles travel")
        mutex = self._mutex
        try:  # the lock is taken inside the try: a signal handler may raise as soon as it is held
            write, _ = self._lock_when(True, size, messages, block, timeout)
            offset = write & _U32
            end = offset + size
            if end <= capacity:
                self._ring[offset:end] = data
            else:
                first = capacity - offset
                self._ring[offset:] = memoryview(data)[:first]
                self._ring[:size - first] = memoryview(data)[first:]
            self._words[_WRITE] = ((write >> 32) + messages & _U32) << 32 | end % capacity  # the commit
            sleepers = self._hints[_GETTERS_WAITING]
        finally:
            _unlock(mutex)  # the first call here; EPERM (harmless) when the lock was not taken
        if sleepers:
            _libc.futex_wake(self._puts_futex, messages)

    def _take(self, most: int, block: bool, timeout: float | None) -> list[bytes]:
        words = self._words
        if block and self._spin_s and words[_WRITE] >> 32 == words[_READ] >> 32:
            self._spin(self._spin_s if timeout is None else min(self._spin_s, timeout))
        mutex = self._mutex
        try:  # as in _put
            write, read = self._lock_when(False, 0, 0, block, timeout)
            count = (write >> 32) - (read >> 32) & _U32
            taken = min(most, count)
            offset, messages = read & _U32, []
            for _ in range(taken):
                offset, length = self._copy_out(offset, _LENGTH_BYTES)
                offset, data = self._copy_out(offset, int.from_bytes(length, "little"))
                messages.append(data)
            words[_READ] = ((read >> 32) + taken & _U32) << 32 | offset  # the commit
            putters, getters = self._hints[_PUTTERS_WAITING], self._hints[_GETTERS_WAITING]
        finally:
            _unlock(mutex)
        if putters:
            _libc.futex_wake(self._gets_futex, putters)
        if getters and count > taken:
            _libc.futex_wake(self._puts_futex, 1)  # pass on a wake that this taker may have consumed
        return messages

    def _spin(self, seconds: float) -> None:
        """Watch the empty ring for up to `seconds`, yielding the CPU between looks."""
        words, give_up = self._words, time.perf_counter() + seconds
        while words[_WRITE] >> 32 == words[_READ] >> 32 and time.perf_counter() < give_up:
            os.sched_yield()

    def _copy_out(self, offset: int, length: int) -> tuple[int, bytes]:
        """Copy `length` bytes out of the ring at `offset`, wrapping at its end; return (offset after, bytes)."""
        ring, capacity = self._ring, self._capacity
        end = offset + length
        if end <= capacity:
            return end % capacity, ring[offset:end].tobytes()
        return end - capacity, ring[offset:].tobytes() + ring[:end - capacity].tobytes()


def _attached(storage: Storage, spin_s: float) -> RingQueue:
    """A RingQueue over a received segment (how a queue arrives in another process)."""
    queue = RingQueue.__new__(RingQueue)
    queue._attach(storage, spin_s)
    return queue
