"""Storage: one block of shared memory mapped into this process, and the per-process weak cache of them.

Arrays view a Storage through ``np.asarray(storage)`` (its ``__array_interface__``),
so every array and view keeps the Storage alive through its ``.base`` chain;
when the last one goes the block is unmapped and its descriptor or name given
back. The cache maps a storage's token (random, fixed when the block is made,
the same in every process) to the live Storage, so a block received twice, or
sent around inside one process, is one object and its views alias.
"""
from __future__ import annotations

import os
import threading
import weakref
from typing import Callable

import numpy as np

from . import _libc, room


class Storage:
    """A shared byte buffer: the memory that shared arrays view.

    ``np.asarray(storage)`` is a ``uint8`` view of all of it that keeps it
    alive. ``nbytes`` is its size, ``strategy`` the sharing strategy it was made
    with (``file_descriptor`` or ``file_system``). Made by ``empty_shared`` and
    ``share_array``, or on receipt; the other attributes are the strategies'
    bookkeeping.
    """

    __slots__ = ("nbytes", "strategy", "token", "fd", "ino", "name", "published", "owner_pid", "created",
                 "address", "handle", "_maplen", "_flat", "__weakref__")

    def __init__(self, *, token: bytes, nbytes: int, strategy: str, addr: int, maplen: int,
                 fd: int = -1, ino: int = 0, name: str | None = None, created: bool = False) -> None:
        self.nbytes = nbytes
        self.strategy = strategy
        self.token = token
        self.fd = fd            # file_descriptor: the open segment (one per process)
        self.ino = ino          # file_descriptor: its inode, checked by receivers
        self.name = name        # file_system: this process's name for the segment in /dev/shm
        self.published: str | None = None  # file_system: the name this process sends it under
        self.owner_pid = os.getpid()
        self.created = created  # counted against this process's room quota
        self.address = addr
        self.handle: tuple | None = None  # what this process sends it as (built by pickling, once per process)
        self._maplen = maplen
        self._flat: weakref.ref | None = None

    @property
    def __array_interface__(self) -> dict:
        return {"version": 3, "shape": (self.nbytes,), "typestr": "|u1", "data": (self.address, False)}

    def as_bytes(self) -> np.ndarray:
        """A ``uint8`` array over the whole storage (reused while one is alive)."""
        flat = self._flat() if self._flat is not None else None
        if flat is None:
            flat = np.asarray(self)
            self._flat = weakref.ref(flat)
        return flat

    def __len__(self) -> int:
        return self.nbytes

    def __repr__(self) -> str:
        return f"<sharing.Storage {self.nbytes} bytes, {self.strategy}, token {self.token.hex()[:12]}>"

    def __reduce__(self):
        raise TypeError("a sharing.Storage travels only through multiprocessing queues, pipes and process "
                        "arguments (ForkingPickler); pickle an array of it to copy its bytes")

    def __del__(self, _unmap=_libc.unmap, _close=os.close, _unlink=os.unlink, _getpid=os.getpid,
                _release=room.release, _shm_dir=room.SHM_DIR) -> None:
        _unmap(self.address, self._maplen)
        if self.fd >= 0:
            _close(self.fd)
        if self.owner_pid != _getpid():
            return  # inherited through fork: the name and the room quota are the parent's
        for name in (self.name, self.published):
            if name is not None:
                try:
                    _unlink(f"{_shm_dir}/{name}")
                except FileNotFoundError:
                    pass  # the manager already removed it
        if self.created:
            _release(self.nbytes)


_cache: dict[bytes, weakref.ref] = {}
_cache_lock = threading.Lock()


def _drop_entry(token: bytes, ref: weakref.ref) -> None:
    if _cache.get(token) is ref:
        del _cache[token]


def register(storage: Storage) -> Storage:
    """Enter a storage in the cache (it leaves when it dies)."""
    token = storage.token
    _cache[token] = weakref.ref(storage, lambda ref: _drop_entry(token, ref))
    return storage


def lookup(token: bytes) -> Storage | None:
    """The live storage with this token in this process, if any."""
    ref = _cache.get(token)
    return ref() if ref is not None else None


def lookup_or_open(token: bytes, open_storage: Callable[[], Storage]) -> tuple[Storage, bool]:
    """The cached storage for `token`, or a new one from `open_storage`; True when it was opened now."""
    with _cache_lock:
        storage = lookup(token)
        if storage is not None:
            return storage, False
        return register(open_storage()), True


def live_storages() -> list[Storage]:
    """Every storage alive in this process."""
    return [storage for storage in (ref() for ref in list(_cache.values())) if storage is not None]


def _after_fork_in_child() -> None:
    global _cache_lock
    _cache_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
