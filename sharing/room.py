"""Room checks for new shared storages, so running out is a clear MemoryError at allocation, never a SIGBUS later.

Before a segment is made, the bytes asked for are compared with the room left:
free space in /dev/shm for ``file_system``; for ``file_descriptor`` (whose
anonymous segments are charged to memory, not to /dev/shm) the kernel's
MemAvailable and, when the process runs under a cgroup memory limit (v2
memory.max or v1 memory.limit_in_bytes), what that
limit leaves. The segment is then reserved with ``posix_fallocate``, which
fails cleanly where a concurrent user took the room in between.

``HOGSHARE_SHM_LIMIT_BYTES`` caps the bytes of live shared storages one process
may have created (read at each allocation): a quota for programs that share a
machine, and the way to exercise the out-of-room path without filling memory.
"""
from __future__ import annotations

import errno
import functools
import os
import threading

from .strategies import FILE_SYSTEM

SHM_DIR = "/dev/shm"
LIMIT_ENV = "HOGSHARE_SHM_LIMIT_BYTES"

_lock = threading.RLock()  # re-entrant: a Storage freed by the GC inside reserve() calls release()
_created_bytes = 0  # live storages this process created, counted against LIMIT_ENV


def _reset_after_fork() -> None:
    global _lock, _created_bytes
    _lock = threading.RLock()
    _created_bytes = 0


os.register_at_fork(after_in_child=_reset_after_fork)


def format_bytes(n: int) -> str:
    """`n` bytes in binary units, with the exact count: '1.5 GiB (1610612736 bytes)'."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{value:.1f} {unit} ({n} bytes)" if unit != "B" else f"{n} bytes"


def _meminfo_available() -> int:
    with open("/proc/meminfo", "rb") as f:
        for line in f:
            if line.startswith(b"MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise OSError("MemAvailable missing from /proc/meminfo")


CGROUP_ROOT = "/sys/fs/cgroup"
_NO_LIMIT_V1 = 1 << 60
"""cgroup v1 reports "no limit" as a page-rounded LONG_MAX; anything this large is no limit."""


def memory_cgroup_files(proc_cgroup: str, root: str = CGROUP_ROOT) -> tuple[str, str] | None:
    """(limit file, usage file) of the memory cgroup that /proc/self/cgroup text names, v2 or v1; None if none.

    A container without a cgroup namespace sees the host's path in
    /proc/self/cgroup, which does not exist under its own cgroup mount: the
    mounted root's files are then the container's.
    """
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            base, files = root, ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            base, files = os.path.join(root, "memory"), ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        for directory in (base + path.rstrip("/"), base):
            if os.path.exists(os.path.join(directory, files[0])):
                return os.path.join(directory, files[0]), os.path.join(directory, files[1])
    return None


@functools.cache
def _cgroup_files() -> tuple[str, str] | None:
    try:
        with open("/proc/self/cgroup") as f:
            return memory_cgroup_files(f.read())
    except (OSError, ValueError):
        return None


def cgroup_room(files: tuple[str, str] | None) -> int | None:
    """Bytes left under a memory cgroup's limit (its files as memory_cgroup_files gives them); None: no limit."""
    if files is None:
        return None
    try:
        with open(files[0]) as f:
            limit = f.read().strip()
        if limit == "max" or int(limit) >= _NO_LIMIT_V1:
            return None
        with open(files[1]) as f:
            return max(0, int(limit) - int(f.read()))
    except (OSError, ValueError):
        return None


def system_room(strategy: str) -> tuple[int, str]:
    """The bytes a new segment of `strategy` can take now, and where that room is."""
    if strategy == FILE_SYSTEM:
        st = os.statvfs(SHM_DIR)
        return st.f_bavail * st.f_frsize, f"left in {SHM_DIR}"
    room, where = _meminfo_available(), "of available memory (MemAvailable)"
    cgroup = cgroup_room(_cgroup_files())
    if cgroup is not None and cgroup < room:
        room, where = cgroup, "under this cgroup's memory limit"
    return room, where


def _quota_left() -> int | None:
    value = os.environ.get(LIMIT_ENV)
    if not value:
        return None
    try:
        limit = int(value)
    except ValueError:
        raise ValueError(f"{LIMIT_ENV}={value!r} is not a whole number of bytes") from None
    return max(0, limit - _created_bytes)


def _no_room(nbytes: int, strategy: str, room: int, where: str) -> MemoryError:
    return MemoryError(f"cannot allocate {format_bytes(nbytes)} of shared memory with the {strategy} "
                       f"strategy: only {format_bytes(room)} {where}")


def reserve(nbytes: int, strategy: str) -> None:
    """Count `nbytes` as created by this process, or raise MemoryError if there is no room for them."""
    global _created_bytes
    with _lock:
        quota = _quota_left()
        if quota is not None and nbytes > quota:
            raise _no_room(nbytes, strategy, quota, f"left under {LIMIT_ENV}={os.environ[LIMIT_ENV]}")
        room, where = system_room(strategy)
        if nbytes > room:
            raise _no_room(nbytes, strategy, room, where)
        _created_bytes += nbytes


def release(nbytes: int) -> None:
    """Give back bytes counted by `reserve` (the storage is gone, or was never made)."""
    global _created_bytes
    with _lock:
        _created_bytes = max(0, _created_bytes - nbytes)


def allocate(fd: int, nbytes: int, strategy: str) -> None:
    """Size the segment behind `fd` and back every page now, turning a shortage into MemoryError."""
    os.ftruncate(fd, nbytes)
    try:
        os.posix_fallocate(fd, 0, nbytes)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.ENOMEM, errno.EDQUOT):
            room, where = system_room(strategy)
            raise _no_room(nbytes, strategy, room, where) from e
        raise
