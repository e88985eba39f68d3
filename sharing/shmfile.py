"""The file_system strategy: named segments in /dev/shm whose names travel.

Each process that holds a storage keeps its own name for the segment,
``hogshare_<group>_c<client>_<64 random bits>`` (mode 0600). The first time a
process sends a storage it links a *published* name to the segment,
``hogshare_<group>_m<64 random bits>``, and every handle it sends carries that
name. A receiver that does not hold the storage yet opens the name, maps it,
closes the descriptor at once and links a name of its own; one that holds it
already does nothing at all. As with ``file_descriptor``, the sender lends the
storage to each message until the receiver acknowledges it (see ``lending``),
so it may drop the array right after ``put``.

Names go when their storage dies in the process that made them. A process's
own names go with the process, however it ends: the group's manager daemon
unlinks them when its connection closes. A process that exits normally also
unlinks them itself, and its published names except those of messages still in
flight, which stay so the messages can still be received (as do all of them
when the process is killed); whatever is left is unlinked by the daemon once
the whole group is gone (see ``manager_client`` and ``shm_manager``). With the
daemon gone, a process that exits normally unlinks all its names. No
descriptor is kept, so any number of storages fit under a low ``ulimit -n``.

A fork child inherits its parent's mappings; when it sends one of the
parent's storages it first links names of its own, so it can go on sending
after the parent let go (provided the parent had not already let go).
"""
from __future__ import annotations

import multiprocessing.util
import os
import threading

from . import _libc, lending, manager_client, room
from .storage import Storage, live_storages, register
from .strategies import FILE_SYSTEM

_OPEN_FLAGS = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
_publish_lock = threading.Lock()


def _path(name: str) -> str:
    return os.path.join(room.SHM_DIR, name)


def _own_name() -> str:
    """A fresh, unguessable name for a segment this process holds."""
    group, client = manager_client.membership()
    _register_exit_hook()
    return f"hogshare_{group}_c{client}_{os.urandom(8).hex()}"


def _new_published_name() -> str:
    """A fresh, unguessable name to publish a storage under."""
    group, _ = manager_client.membership()
    return f"hogshare_{group}_m{os.urandom(8).hex()}"


def make_segment(nbytes: int) -> Storage:
    """A new zero-filled named segment of `nbytes`, mapped and entered in the cache."""
    room.reserve(nbytes, FILE_SYSTEM)
    maplen = max(nbytes, 1)  # a zero-size array still needs a segment to travel
    try:
        name = _own_name()
        fd = os.open(_path(name), _OPEN_FLAGS | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            room.allocate(fd, maplen, FILE_SYSTEM)
            addr = _libc.map_shared(fd, maplen, populate=True)
        except BaseException:
            os.unlink(_path(name))
            raise
        finally:
            os.close(fd)
    except BaseException:
        room.release(nbytes)
        raise
    return register(Storage(token=os.urandom(16), nbytes=nbytes, strategy=FILE_SYSTEM, addr=addr,
                            maplen=maplen, name=name, created=True))


def _claim(storage: Storage) -> None:
    """Give a storage inherited through fork a name owned by this process."""
    name = _own_name()
    try:
        os.link(_path(storage.name), _path(name))
    except FileNotFoundError:
        raise RuntimeError(f"cannot send shared storage {storage.token.hex()[:12]} from this forked process: "
                           "the parent already released its segment; receive it through a queue instead of "
                           "inheriting it, or keep it alive in the parent") from None
    storage.name, storage.published, storage.owner_pid, storage.created = name, None, os.getpid(), False


def published_name(storage: Storage) -> str:
    """The name this process sends `storage` under, linked on first use."""
    if storage.published is None or storage.owner_pid != os.getpid():
        with _publish_lock:  # queues pickle in their own threads
            if storage.owner_pid != os.getpid():
                _claim(storage)
            if storage.published is None:
                name = _new_published_name()
                os.link(_path(storage.name), _path(name))
                storage.published = name
    return storage.published


_exit_hook_pid: int | None = None
_exit_hook: multiprocessing.util.Finalize | None = None


def _register_exit_hook() -> None:
    """Arrange, once per process, for `_unlink_at_exit` to run when the process exits normally."""
    global _exit_hook_pid, _exit_hook
    # A child that made names while unpickling its process arguments (spawn, forkserver) registered before
    # multiprocessing cleared its finalizers at bootstrap: register again then.
    if _exit_hook_pid != os.getpid() or not _exit_hook.still_active():
        _exit_hook_pid = os.getpid()
        # multiprocessing runs these at exit in every process, fork children included (which skip
        # atexit); priority -100 comes after queue feeder threads (-5) have sent what they hold.
        _exit_hook = multiprocessing.util.Finalize(None, _unlink_at_exit, exitpriority=-100)


def _unlink_at_exit() -> None:
    """Unlink this process's names: its own, and its published ones except those of messages still in flight.

    Fork and forkserver children end in ``os._exit``, so their storages never
    die: without this only the manager would unlink their own names. A
    published name of a message in flight is handed over: forgotten without
    unlinking, so that the storage dying later in this process's shutdown (a
    spawn child's interpreter clears everything, lending's hold included)
    leaves it for the message, and the manager unlinks it when the group ends.
    With the manager gone nobody would, so then those go too (their messages
    can no longer be received, as with file_descriptor), and so do the dead
    manager's socket and directory.
    """
    lending.reap()
    gone = manager_client.manager_gone()
    in_flight = set() if gone else {id(storage) for storage in lending.lent_storages()}
    pid = os.getpid()
    for storage in live_storages():
        if storage.strategy == FILE_SYSTEM and storage.owner_pid == pid:
            for name in (storage.name, None if id(storage) in in_flight else storage.published):
                if name is not None:
                    try:
                        os.unlink(_path(name))
                    except FileNotFoundError:
                        pass
            storage.name = storage.published = storage.handle = None  # the handle named the published one
    if gone:
        manager_client.remove_if_dead(manager_client.socket_path())


def open_published(token: bytes, nbytes: int, name: str) -> Storage:
    """Map the segment a sender published under `name` and give it a name of this process's own."""
    try:
        fd = os.open(_path(name), _OPEN_FLAGS)
    except FileNotFoundError:
        raise RuntimeError(f"shared storage {token.hex()[:12]} is gone: its sender released it, or the sender's "
                           f"manager group ended and unlinked {name}") from None
    maplen = max(nbytes, 1)
    try:
        if os.fstat(fd).st_size < maplen:
            raise RuntimeError(f"shared segment {name} is smaller than the {nbytes} bytes its handle announces")
        addr = _libc.map_shared(fd, maplen, populate=False)
    finally:
        os.close(fd)
    storage = Storage(token=token, nbytes=nbytes, strategy=FILE_SYSTEM, addr=addr, maplen=maplen)
    own = _own_name()
    os.link(_path(name), _path(own))
    storage.name = own
    return storage


def _after_fork_in_child() -> None:
    global _publish_lock
    _publish_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
