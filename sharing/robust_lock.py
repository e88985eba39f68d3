"""RobustLock: a process-shared lock that names nothing in /dev/shm and that its holder's death does not deadlock.

multiprocessing.Lock under spawn and forkserver is a named POSIX semaphore
(/dev/shm/sem.mp-*) that only the resource tracker unlinks, so SIGKILL of the
whole process group, tracker included, leaves it behind for good; and a
process killed while it holds the lock leaves it held. A RobustLock is the
ring queue's robust process-shared mutex (`_libc`) in an anonymous memfd
segment: nothing to unlink (the kernel frees it with its last mapping), and
when its holder dies the next process to acquire it takes it. It travels to
other processes like a shared array: as a Process argument (any start
method) or through a queue. It must be released by the thread that took it.
"""
from __future__ import annotations

import errno
import time

from . import _libc, memfd
from .storage import Storage


class RobustLock:
    """multiprocessing.Lock's interface (`acquire`, `release`, a context manager) over a robust mutex."""

    def __init__(self) -> None:
        storage = memfd.make_segment(_libc.MUTEX_BYTES, reserve=False)
        _libc.init_robust_mutex(storage.address)
        self._attach(storage)

    def _attach(self, storage: Storage) -> None:
        self._storage = storage
        self._try_lock_steps = _libc.try_lock_steps(storage.address)

    def __reduce__(self):
        return _attached, (self._storage,)

    def __repr__(self) -> str:
        return f"<sharing.RobustLock at {self._storage.address:#x}>"

    def acquire(self, block: bool = True, timeout: float | None = None) -> bool:
        """Take the lock, waiting (if `block`) up to `timeout` s; whether it was taken."""
        deadline = None if timeout is None or not block else time.monotonic() + timeout
        return _libc.take_mutex(self._try_lock_steps, self._storage.address, block, deadline)

    def release(self) -> None:
        """Release the lock; ValueError when this thread does not hold it."""
        if _libc.unlock_mutex(self._storage.address) == errno.EPERM:
            raise ValueError(f"{self!r} released by a thread that does not hold it")

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _attached(storage: Storage) -> RobustLock:
    """A RobustLock over a received segment (how a lock arrives in another process)."""
    lock = RobustLock.__new__(RobustLock)
    lock._attach(storage)
    return lock
