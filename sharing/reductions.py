"""How shared storages and arrays travel: reducers registered on multiprocessing's ForkingPickler.

ForkingPickler pickles everything multiprocessing sends between processes
(queues, pipes, pools, and the arguments of spawn and forkserver processes), so
registering here covers every context. A storage travels as a handle (see
``memfd`` and ``shmfile``); a shared array as its storage's handle plus offset,
shape, strides and dtype, in one flat call, so views of any layout alias the
same memory on arrival. An array that is not shared keeps NumPy's by-value
pickling.

Receiving a storage this process already holds returns that same Storage
object (the weak cache in ``storage``), so a round trip inside one process,
or the same storage received twice, yields arrays that alias. That is the
common case (workers exchanging the same parameters again and again), so for
either strategy the path for it makes no system call on either side and runs
as little Python as it can: the sender lends the storage to the message, the
receiver looks it up and acknowledges (see ``lending``).
"""
from __future__ import annotations

import ctypes
import os
from multiprocessing.reduction import ForkingPickler

import numpy as np

from . import lending, memfd, shmfile
from .arrays import storage_of
from .storage import Storage, lookup, lookup_or_open
from .strategies import FILE_DESCRIPTOR

_BY_VALUE_PROTOCOL = 4  # NumPy's in-band reduction, valid under every protocol multiprocessing uses
_pid = os.getpid()  # os.getpid() is a system call; this follows forks


def _after_fork_in_child() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _array_interface_address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _choose_address_reader():
    """The fastest correct way to read an array's data pointer here.

    NumPy's C struct (``PyArrayObject``) starts with the data pointer right after
    the object header, which reads ten times faster through ctypes than
    ``__array_interface__`` builds its dict. Used only if it agrees with
    ``__array_interface__`` on a probe array (it would not on a debug build).
    """
    at = ctypes.c_void_p.from_address
    header = object.__basicsize__

    def struct_address(a: np.ndarray) -> int:
        return at(id(a) + header).value or 0

    probe = np.zeros((4, 4))[1:, ::2]
    return struct_address if struct_address(probe) == _array_interface_address(probe) else _array_interface_address


_data_address = _choose_address_reader()


def rebuild_fd_storage(token: bytes, nbytes: int, pid: int, fd: int, ino: int,
                       board_fd: int, board_ino: int, slot: int, generation: int) -> Storage:
    """Receive a file_descriptor storage: the cached one, or the sender's segment opened through /proc."""
    storage = lookup(token)
    if storage is None:
        storage, _ = lookup_or_open(token, lambda: memfd.open_segment(token, nbytes, pid, fd, ino))
    lending.acknowledge(pid, board_fd, board_ino, slot, generation)
    return storage


def rebuild_fs_storage(token: bytes, nbytes: int, name: str, pid: int, board_fd: int, board_ino: int,
                       slot: int, generation: int) -> Storage:
    """Receive a file_system storage: the cached one, or the segment its sender published under `name`."""
    storage = lookup(token)
    if storage is None:
        storage, _ = lookup_or_open(token, lambda: shmfile.open_published(token, nbytes, name))
    lending.acknowledge(pid, board_fd, board_ino, slot, generation)
    return storage


def _fd_handle(storage: Storage) -> tuple:
    """The arguments of `rebuild_fd_storage` for one message (the storage is lent to it)."""
    return (storage.token, storage.nbytes, _pid, storage.fd, storage.ino, *lending.lend(storage))


def _fs_handle(storage: Storage) -> tuple:
    """The arguments of `rebuild_fs_storage` for one message (the storage is lent to it)."""
    return (storage.token, storage.nbytes, shmfile.published_name(storage), _pid, *lending.lend(storage))


def reduce_storage(storage: Storage) -> tuple:
    """A storage as a handle for one message."""
    if storage.strategy == FILE_DESCRIPTOR:
        return rebuild_fd_storage, _fd_handle(storage)
    return rebuild_fs_storage, _fs_handle(storage)


def _view(storage: Storage, offset: int, shape: tuple, strides: tuple, dtype: str | np.dtype,
          writeable: bool) -> np.ndarray:
    """An array over a received storage with the sender's layout."""
    a = np.ndarray(shape, dtype, buffer=storage.as_bytes(), offset=offset, strides=strides)
    if not writeable:
        a.flags.writeable = False
    return a


def rebuild_fd_array(token: bytes, nbytes: int, pid: int, fd: int, ino: int, board_fd: int, board_ino: int,
                     slot: int, generation: int, offset: int, shape: tuple, strides: tuple,
                     dtype: str | np.dtype, writeable: bool) -> np.ndarray:
    """Receive an array of a file_descriptor storage."""
    storage = rebuild_fd_storage(token, nbytes, pid, fd, ino, board_fd, board_ino, slot, generation)
    return _view(storage, offset, shape, strides, dtype, writeable)


def rebuild_fs_array(token: bytes, nbytes: int, name: str, pid: int, board_fd: int, board_ino: int, slot: int,
                     generation: int, offset: int, shape: tuple, strides: tuple, dtype: str | np.dtype,
                     writeable: bool) -> np.ndarray:
    """Receive an array of a file_system storage."""
    storage = rebuild_fs_storage(token, nbytes, name, pid, board_fd, board_ino, slot, generation)
    return _view(storage, offset, shape, strides, dtype, writeable)


def reduce_ndarray(a: np.ndarray) -> tuple:
    """A shared array as its storage's handle plus its layout; any other array by value, as NumPy pickles it."""
    base = storage_of(a)
    if base is None:
        return a.__reduce_ex__(_BY_VALUE_PROTOCOL)
    dtype = a.dtype
    layout = (_data_address(a) - base.address, a.shape, a.strides, dtype.str if dtype.isbuiltin == 1 else dtype,
              a.flags.writeable)
    if base.strategy == FILE_DESCRIPTOR:
        return rebuild_fd_array, (*_fd_handle(base), *layout)
    return rebuild_fs_array, (*_fs_handle(base), *layout)


def register() -> None:
    """Register the reducers on ForkingPickler (idempotent)."""
    ForkingPickler.register(Storage, reduce_storage)
    ForkingPickler.register(np.ndarray, reduce_ndarray)


register()
