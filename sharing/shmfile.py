"""The file_system strategy: named segments in /dev/shm whose names travel, reference-counted by hard links.

Each process that holds a storage keeps its own name for the segment,
``hogshare_<group>_c<client>_<64 random bits>`` (mode 0600). Sending links a
fresh *message name*, ``hogshare_<group>_m<64 random bits>``, to the segment
and puts it in the handle; the receiver opens it, maps it, closes the
descriptor at once and renames the message name into a name of its own (or,
when it already holds the storage, just unlinks it). So a message in flight
keeps its segment alive even if the sender drops the array or dies, and the
kernel's link count is the reference count: once every holder has dropped the
storage and every message is received, no name is left and the memory is
freed.

A process unlinks its own name when a storage dies; when the process itself
ends, however it ends, the group's manager daemon unlinks the names it still
had, and once the whole group is gone it unlinks what is left, such as
messages never received (see ``manager_client`` and ``shm_manager``). No
descriptor is kept, so any number of storages fit under a low ``ulimit -n``.

A fork child inherits its parent's mappings; when it sends one of the
parent's storages it first links a name of its own, so it can go on sending
after the parent let go (provided the parent had not already let go).
"""
from __future__ import annotations

import os

from . import _libc, manager_client, room
from .storage import Storage, register
from .strategies import FILE_SYSTEM

_OPEN_FLAGS = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW


def _path(name: str) -> str:
    return os.path.join(room.SHM_DIR, name)


def _own_name() -> str:
    """A fresh, unguessable name for a segment this process holds."""
    group, client = manager_client.membership()
    return f"hogshare_{group}_c{client}_{os.urandom(8).hex()}"


def _message_name() -> str:
    """A fresh, unguessable name for a message in flight."""
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
    storage.name, storage.owner_pid, storage.created = name, os.getpid(), False


def message_name(storage: Storage) -> str:
    """Link a new name to `storage`'s segment for one message and return it."""
    if storage.owner_pid != os.getpid():
        _claim(storage)
    name = _message_name()
    os.link(_path(storage.name), _path(name))
    return name


def open_message(token: bytes, nbytes: int, name: str) -> Storage:
    """Map the segment a message name refers to and take the name over as this process's own."""
    try:
        fd = os.open(_path(name), _OPEN_FLAGS)
    except FileNotFoundError:
        raise RuntimeError(f"shared storage {token.hex()[:12]} is gone: its message name {name} was already "
                           "received, or the sender's manager group ended and unlinked it") from None
    maplen = max(nbytes, 1)
    try:
        if os.fstat(fd).st_size < maplen:
            raise RuntimeError(f"shared segment {name} is smaller than the {nbytes} bytes its handle announces")
        addr = _libc.map_shared(fd, maplen, populate=False)
    finally:
        os.close(fd)
    storage = Storage(token=token, nbytes=nbytes, strategy=FILE_SYSTEM, addr=addr, maplen=maplen)
    own = _own_name()
    os.rename(_path(name), _path(own))
    storage.name = own
    return storage


def discard_message(name: str) -> None:
    """Unlink a message name whose storage this process already holds."""
    try:
        os.unlink(_path(name))
    except FileNotFoundError:
        pass
