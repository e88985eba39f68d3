"""Room for a run, checked before it creates anything on disk: /dev/shm, file descriptors, disk space and inodes.

A run that cannot have what it needs is refused in one line (exit code 2)
before its run directory exists, instead of failing half-way with a traceback
and leaving a directory that holds nothing to resume:

- /dev/shm: multiprocessing keeps its locks there (POSIX semaphores, one
  page each) whatever the sharing strategy, and the file_system strategy
  keeps everything shared there. The model, optimizer state and run
  statistics are then allocated for real by `sharing`, whose room checks
  turn a shortage into the same kind of refusal (the trainer places them
  before any file is written).
- File descriptors: the main process keeps three per process of the run
  (every role's: A3C's workers, IMPALA's and APPO's actors and learners):
  multiprocessing's sentinel and its pipe to the child, both held until the
  process is closed, and the pipe its traceback would come back on; two more
  for a moment while starting one. It counts them on top of what it holds
  once every shared object is made (the model, the optimizer, a trajectory
  buffer's segments). A soft limit below that is raised as far as needed (up
  to the hard limit, as Go and Ray do); a hard limit below it refuses the
  run, naming the processes asked for ("16 actors + 2 learners").
- Memory: each worker process takes memory of its own (its interpreter,
  libraries, environments and a model copy), about WORKER_BYTES plus
  WORKER_MODEL_COPIES times the model's parameters; the run is refused when
  the run's processes (every role's) would not fit in available memory (MemAvailable,
  or what a cgroup memory limit leaves). `HOGSHARE_WORKER_BYTES` replaces
  the estimate where a worker is known to take more (large environments).
- Disk: the run directory's filesystem must hold the config, a checkpoint
  written beside the previous one before the rename, the summary and room
  for events; and a few inodes.

Each check costs a few system calls (statvfs, getrlimit, listing /proc/self/fd, reading /proc/meminfo).
"""
from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Sequence

from framework.runtime.algorithm import Role
from framework.runtime.schema import printable
from sharing.room import format_bytes, system_room
from sharing.strategies import FILE_DESCRIPTOR

SHM_DIR = "/dev/shm"
SEMAPHORE_ROOM = 64 << 10
"""/dev/shm bytes for multiprocessing's semaphores (a page each; a run makes a few)."""
DESCRIPTORS_PER_PROCESS = 3
"""What the main process holds per process it starts (see the module docstring); measured with /proc/PID/fd for
spawn, fork and forkserver alike (tests/reliability/test_resource_faults.py)."""
DESCRIPTORS_SPARE = 16
"""Descriptors opened for a moment while starting a worker, writing a checkpoint or an event file, and the fork
server's and resource tracker's pipes."""
EVENTS_ROOM = 1 << 20
"""Disk bytes kept for TensorBoard events and summary.json when a run starts."""
INODES = 8
"""Inodes a run directory takes: itself, checkpoints/, config.yaml, a checkpoint and its temp file, events, summary."""


class RunError(RuntimeError):
    """A run that cannot start (no room, no run directory): refused with exit code 2, leaving nothing behind."""


def check_semaphore_room() -> None:
    """RunError unless /dev/shm has room for multiprocessing's semaphores."""
    st = os.statvfs(SHM_DIR)
    free = st.f_bavail * st.f_frsize
    if free < SEMAPHORE_ROOM:
        raise RunError(f"no room in {SHM_DIR}: {format_bytes(free)} free; allowed: at least "
                       f"{format_bytes(SEMAPHORE_ROOM)} free there for multiprocessing's locks (whatever the "
                       f"sharing strategy)")


WORKER_BYTES = 32 << 20
"""A worker process's own memory, beyond its model copies: a spawn-started A3C CartPole worker (16 environments)
measured 25 MB of anonymous memory (RssAnon) here, plus room for its libraries' pages (about 20 MB of RssFile,
shared by workers that map the same files)."""
WORKER_MODEL_COPIES = 4
"""Copies of the model's parameters a worker holds of its own: its local model, gradients, and temporaries."""
WORKER_BYTES_ENV = "HOGSHARE_WORKER_BYTES"


def worker_bytes(parameter_bytes: int) -> int:
    """The memory one worker takes of its own: HOGSHARE_WORKER_BYTES if set, else the estimate above."""
    given = os.environ.get(WORKER_BYTES_ENV, "").strip()
    if given:
        try:
            return max(0, int(given))
        except ValueError:
            raise RunError(f"environment variable {WORKER_BYTES_ENV}: got {printable(given)!r}; allowed: a number "
                           f"of bytes") from None
    return WORKER_BYTES + WORKER_MODEL_COPIES * parameter_bytes


def _asked(roles: Sequence[Role]) -> str:
    """The processes of roles as the config asked for them: "config keys 'trainer.workers' and
    'algorithm.learners': got 16 actors + 2 learners"."""
    keys = list(dict.fromkeys(role.key for role in roles))
    asked = " + ".join(map(str, roles))
    return f"config key{'s' if len(keys) > 1 else ''} {' and '.join(map(repr, keys))}: got {asked}"


def check_worker_memory(roles: Sequence[Role], parameter_bytes: int) -> None:
    """RunError unless the processes of roles fit in the memory this machine (or cgroup) has available."""
    each = worker_bytes(parameter_bytes)
    processes = sum(role.count for role in roles)
    room, where = system_room(FILE_DESCRIPTOR)
    if processes * each > room:
        raise RunError(f"{_asked(roles)}, whose processes need about {format_bytes(processes * each)} of memory of "
                       f"their own ({format_bytes(each)} each); allowed: at most {room // each} processes here "
                       f"({format_bytes(room)} {where})")


def descriptors_needed(processes: int) -> int:
    """Descriptors the main process needs: those open now, plus what its processes and their start take."""
    return len(os.listdir("/proc/self/fd")) + processes * DESCRIPTORS_PER_PROCESS + DESCRIPTORS_SPARE


def ensure_descriptors(roles: Sequence[Role]) -> None:
    """Raise the soft RLIMIT_NOFILE to what the processes of `roles` need, or RunError when the hard limit is too
    low. Called once the run's shared objects are made, so that their descriptors are among those open."""
    processes = sum(role.count for role in roles)
    need = descriptors_needed(processes)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        raise RunError(f"{_asked(roles)}, which need about "
                       f"{need} file descriptors in the main process ({DESCRIPTORS_PER_PROCESS} per process, "
                       f"{need - processes * DESCRIPTORS_PER_PROCESS - DESCRIPTORS_SPARE} open now, "
                       f"{DESCRIPTORS_SPARE} spare); allowed: at most what the limit allows (ulimit -n is {soft}, "
                       f"hard limit {hard}): raise it or start fewer processes")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def _existing(directory: Path) -> Path:
    """directory, or its nearest ancestor that exists (where a new run directory would be made)."""
    for candidate in (directory, *directory.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def check_disk(directory: Path, nbytes: int) -> None:
    """RunError unless the filesystem of directory (or of the ancestor it would be made in) has nbytes and INODES."""
    where = _existing(directory)
    try:
        st = os.statvfs(where)
    except OSError as exc:
        raise RunError(f"cannot check the disk of '{printable(str(where))}': {exc.strerror or exc}") from None
    free = st.f_bavail * st.f_frsize
    shown = printable(str(directory))
    if free < nbytes:
        raise RunError(f"no room for the run in '{shown}': {format_bytes(free)} free on its disk; allowed: at least "
                       f"{format_bytes(nbytes)} (the config, a checkpoint beside the previous one, events)")
    if st.f_files and st.f_favail < INODES:  # f_files is 0 where the filesystem has no inode limit
        raise RunError(f"no room for the run in '{shown}': {st.f_favail} free inodes on its disk; allowed: at least "
                       f"{INODES}")
