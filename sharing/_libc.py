"""The few libc calls the standard library lacks: mmap returning a raw address, munmap, prctl,
and the robust mutex and futexes the ring queue and RobustLock are built on.

Mappings are made with libc rather than the ``mmap`` module because ``mmap.mmap``
duplicates the file descriptor it is given and hides the copy, which would
double the descriptors a shared storage costs.
"""
from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import time

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.prctl.restype = ctypes.c_int
_libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)

_PROT_READ_WRITE = 0x1 | 0x2
_MAP_SHARED = 0x01
_MAP_POPULATE = 0x8000
_MAP_FAILED = ctypes.c_void_p(-1).value
PR_SET_PDEATHSIG = 1


def _raise_errno(what: str) -> None:
    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")


def map_shared(fd: int, length: int, populate: bool) -> int:
    """Map `length` bytes of `fd` read-write and shared; return the address.

    `populate` pre-faults every page, which is cheaper than taking one fault per
    page when the caller is about to write the whole mapping.
    """
    flags = _MAP_SHARED | (_MAP_POPULATE if populate else 0)
    addr = _libc.mmap(None, length, _PROT_READ_WRITE, flags, fd, 0)
    if addr is None or addr == _MAP_FAILED:
        _raise_errno(f"mmap of {length} bytes failed")
    return addr


def unmap(addr: int, length: int) -> None:
    """Release a mapping made by `map_shared`."""
    if _libc.munmap(addr, length) != 0:
        _raise_errno("munmap failed")


def prctl(option: int, arg: int) -> None:
    """Call prctl(2) with one argument."""
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        _raise_errno(f"prctl({option}) failed")


# --- a robust process-shared mutex and futexes, for the ring queue (see ring_queue) and RobustLock ----------

class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _timespec(seconds: float) -> _Timespec:
    whole = int(seconds)
    return _Timespec(whole, int((seconds - whole) * 1e9))


MUTEX_BYTES = 64  # room for a pthread_mutex_t: 40 bytes on x86-64 glibc, 48 on aarch64
_PTHREAD_PROCESS_SHARED = 1
_PTHREAD_MUTEX_ROBUST = 1
# Non-blocking calls keep the GIL (PyDLL); calls that may block release it (CDLL).
_held_gil = ctypes.PyDLL(None)
for _lib in (_libc, _held_gil):
    for _name in ("pthread_mutex_lock", "pthread_mutex_trylock", "pthread_mutex_unlock", "pthread_mutex_consistent"):
        getattr(_lib, _name).argtypes = (ctypes.c_void_p,)
    _lib.pthread_mutex_timedlock.argtypes = (ctypes.c_void_p, ctypes.POINTER(_Timespec))
_libc.syscall.restype = ctypes.c_long

# syscall(2) is variadic: every argument is passed as a C long.
_SYS_FUTEX = ctypes.c_long({"x86_64": 202, "aarch64": 98, "arm64": 98, "riscv64": 98, "ppc64le": 221,
                            "s390x": 238}.get(platform.machine(), -1))
_FUTEX_WAIT, _FUTEX_WAKE = ctypes.c_long(0), ctypes.c_long(1)  # not the _PRIVATE forms: processes share the word
_ZERO = ctypes.c_long(0)


def init_robust_mutex(addr: int) -> None:
    """Make a process-shared, robust mutex at `addr` (MUTEX_BYTES of shared memory).

    Robust: when its owner dies holding it, the next locker takes it (EOWNERDEAD,
    marked consistent at once by `lock_mutex` and `try_lock_mutex`) instead of
    waiting forever.
    """
    attr = ctypes.create_string_buffer(16)  # a pthread_mutexattr_t is 4 bytes on x86-64, 8 on aarch64
    for call, args in (("pthread_mutexattr_init", ()), ("pthread_mutexattr_setpshared", (_PTHREAD_PROCESS_SHARED,)),
                       ("pthread_mutexattr_setrobust", (_PTHREAD_MUTEX_ROBUST,))):
        err = getattr(_libc, call)(attr, *args)
        if err:
            raise OSError(err, f"{call}: {os.strerror(err)}")
    err = _libc.pthread_mutex_init(ctypes.c_void_p(addr), attr)
    _libc.pthread_mutexattr_destroy(attr)
    if err:
        raise OSError(err, f"pthread_mutex_init: {os.strerror(err)}")


# Note [taking the mutex under Python signal handlers]
# A Python signal handler (SIGINT's raises KeyboardInterrupt) runs in the main
# thread between bytecodes: in CPython 3.11 and later at a function's entry, at
# a backward jump and right after a call returns. So a handler can raise right
# after the call that took the mutex, before its result is even stored: the
# caller must take the mutex inside a `try` whose `finally` unlocks whatever
# happened (unlocking a robust mutex this thread does not hold is refused with
# EPERM, harmlessly), the unlock being the finally's first call. That is not
# enough after EOWNERDEAD: a handler raising between the lock and
# pthread_mutex_consistent would have the finally unlock an inconsistent mutex,
# which makes it unrecoverable for every process. So the lock and the marking
# run as one step: `map` calls both C functions from C, and no bytecode (so no
# handler) runs between them. Marking a consistent mutex is refused (EINVAL),
# and marking one another process holds inconsistent marks it on that holder's
# behalf; both are harmless, since the ring has nothing to repair (see
# ring_queue). Blocking signals instead (pthread_sigmask) is not exact: a signal
# sent to the process is taken by any thread that does not block it, and the
# main thread then runs the handler at its next bytecode anyway; it also costs
# two system calls per message (4.7 us measured here, against 0.5 us for this).
_run = functools.partial.__call__
_consistent = _held_gil.pthread_mutex_consistent
unlock_mutex = _held_gil.pthread_mutex_unlock  # unlock_mutex(addr) -> 0 or EPERM; called for every message


def try_lock_steps(addr: int) -> tuple[functools.partial, functools.partial]:
    """What `try_lock_mutex` runs for the mutex at `addr` (built once per mutex: it is called for every message)."""
    return functools.partial(_held_gil.pthread_mutex_trylock, addr), functools.partial(_consistent, addr)


def try_lock_mutex(steps: tuple[functools.partial, functools.partial]) -> int:
    """Try to lock a mutex (`try_lock_steps`) without waiting, keeping the GIL: 0 (locked; after a dead owner,
    already marked consistent) or EBUSY. See Note [taking the mutex under Python signal handlers]."""
    return tuple(map(_run, steps))[0]


def lock_mutex(addr: int, timeout_s: float | None) -> int:
    """Lock the mutex at `addr` within `timeout_s` seconds (None: however long it takes), releasing the GIL.

    Returns 0 (locked; after an owner that died holding it, already marked
    consistent) or ETIMEDOUT. See Note [taking the mutex under Python signal handlers].
    """
    if timeout_s is None:
        lock = functools.partial(_libc.pthread_mutex_lock, addr)
    else:
        lock = functools.partial(_libc.pthread_mutex_timedlock, addr, _timespec(time.time() + max(timeout_s, 0.0)))
    return tuple(map(_run, (lock, functools.partial(_consistent, addr))))[0]


def take_mutex(steps: tuple[functools.partial, functools.partial], addr: int, block: bool,
               deadline: float | None) -> bool:
    """Lock the mutex at `addr` (`steps` its `try_lock_steps`), waiting if `block` until `deadline` (monotonic;
    None: however long it takes); False if it was not taken. After an owner that died holding it the mutex is
    taken like any other (marked consistent): its users have nothing to repair. Call it inside a `try` whose
    `finally` unlocks, taken or not (see Note [taking the mutex under Python signal handlers])."""
    err = try_lock_mutex(steps)
    if err == errno.EBUSY:
        if not block:
            return False
        err = lock_mutex(addr, None if deadline is None else deadline - time.monotonic())
    if err == errno.ETIMEDOUT:
        return False
    if err and err != errno.EOWNERDEAD:
        raise OSError(err, f"locking the mutex at {addr:#x}: {os.strerror(err)}")
    return True


def futex_wait(addr: int, expected: int, timeout_s: float) -> None:
    """Sleep while the uint32 at `addr` holds `expected`, at most `timeout_s` (a wake, a signal or a change ends it)."""
    _libc.syscall(_SYS_FUTEX, ctypes.c_void_p(addr), _FUTEX_WAIT, ctypes.c_long(expected),
                  ctypes.byref(_timespec(timeout_s)), None, _ZERO)


def futex_wake(addr: int, count: int) -> None:
    """Wake up to `count` processes sleeping in `futex_wait` on `addr`."""
    _libc.syscall(_SYS_FUTEX, ctypes.c_void_p(addr), _FUTEX_WAKE, ctypes.c_long(count), None, None, _ZERO)
