"""How shared storages and arrays travel: reducers registered on multiprocessing's ForkingPickler.

ForkingPickler pickles everything multiprocessing sends between processes
(queues, pipes, pools, and the arguments of spawn and forkserver processes), so
registering here covers every context. A storage travels as a handle (see
``memfd`` and ``shmfile``); a shared array as its storage's handle plus offset,
shape, strides and dtype, so views of any layout alias the same memory on
arrival. An array that is not shared keeps NumPy's by-value
pickling.

Receiving a storage this process already holds returns that same Storage
object (the weak cache in ``storage``), so a round trip inside one process,
or the same storage received twice, yields arrays that alias. That is the
common case (workers exchanging the same parameters again and again), so for
either strategy the path for it makes no system call on either side and runs
as little Python as it can (see Note [the handle]): it is what a shared array
costs through a queue beyond what a small tuple costs.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from multiprocessing.reduction import ForkingPickler
from typing import Iterator

import numpy as np

from . import lending, memfd, shmfile
from .lending import acknowledge, lend
from .storage import Storage, live_storages, lookup, lookup_or_open
from .strategies import FILE_DESCRIPTOR

_BY_VALUE_PROTOCOL = 4  # NumPy's in-band reduction, valid under every protocol multiprocessing uses
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


# Note [the handle]
# A storage travels as (head, ticket). The head says how to open the storage and
# where its lender's board is; it is the same for every message a process sends
# of that storage, so it is built once per process and kept on the Storage
# (``handle``); only the lending ticket is new per message (see ``lending``).
#   file_descriptor: (token, nbytes, board address, segment fd, segment inode)
#   file_system:     (token, nbytes, board address, published name)
# The board address is (lender pid, board fd, board inode); a file_descriptor
# receiver opens the segment through that same pid. An array adds its layout:
# offset, shape, strides, dtype (its ``str`` when built in) and whether it is
# writeable. Every message runs these functions on both sides, and in a round
# trip between sleeping processes each Python step costs several times what it
# does in a loop, so they do as few as they can: the sender reads the cached head
# and takes a ticket, the receiver looks the token up, makes one store to the
# lender's board and one ndarray.
_FD_HEAD_LEN = 5


def _make_head(storage: Storage) -> tuple:
    """The constant part of this process's handles for `storage`, cached on it."""
    if storage.strategy == FILE_DESCRIPTOR:
        head = (storage.token, storage.nbytes, lending.board(), storage.fd, storage.ino)
    else:
        head = (storage.token, storage.nbytes, lending.board(), shmfile.published_name(storage))
    storage.handle = head
    return head


# Note [receiving where an exception would kill the thread]
# Opening a storage on first receipt can fail: a file_descriptor sender that
# exited first, no descriptor left, a file_system name already unlinked. In the
# receiver's own call (a queue's get) that failure is raised there. Some threads
# that unpickle belong to multiprocessing and die of it (the pool's result
# handler, see ``pool_results``); they receive inside ``failures_collected``,
# where the failure is recorded and the storage arrives as ``_Unreceived``, so
# unpickling the message completes and the thread can fail the message instead.
_receiving = threading.local()


class _Unreceived:
    """Stands in for a storage that could not be opened while failures are collected: private zeros, to discard."""

    __slots__ = ("nbytes",)

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes

    def as_bytes(self) -> np.ndarray:
        return np.zeros(self.nbytes, np.uint8)


@contextlib.contextmanager
def failures_collected() -> Iterator[list[Exception]]:
    """Within the block, this thread's receipts record a storage that cannot be opened in the list, not raise."""
    failures: list[Exception] = []
    _receiving.failures = failures
    try:
        yield failures
    finally:
        _receiving.failures = None


def _open(head: tuple) -> Storage | _Unreceived:
    """First receipt: map the segment a head names (unless another thread just did)."""
    token, nbytes, (pid, _, _) = head[:3]
    try:
        if len(head) == _FD_HEAD_LEN:
            fd, ino = head[3:]
            return lookup_or_open(token, lambda: memfd.open_segment(token, nbytes, pid, fd, ino))[0]
        return lookup_or_open(token, lambda: shmfile.open_published(token, nbytes, head[3]))[0]
    except Exception as e:
        failures = getattr(_receiving, "failures", None)
        if failures is None:
            raise
        failures.append(e)
        return _Unreceived(nbytes)


def rebuild_storage(head: tuple, ticket: int) -> Storage:
    """Receive a storage: the cached one, or on first receipt the sender's segment opened now."""
    storage = lookup(head[0])
    if storage is None:
        storage = _open(head)
    acknowledge(head[2], ticket)
    return storage


def reduce_storage(storage: Storage) -> tuple:
    """A storage as a handle for one message (the storage is lent to it)."""
    return rebuild_storage, (storage.handle or _make_head(storage), lend(storage))


def rebuild_array(head: tuple, ticket: int, offset: int, shape: tuple, strides: tuple, dtype: str | np.dtype,
                  writeable: bool) -> np.ndarray:
    """Receive an array: its storage viewed with the sender's layout."""
    storage = lookup(head[0])
    if storage is None:
        storage = _open(head)
    acknowledge(head[2], ticket)
    a = np.ndarray(shape, dtype, storage.as_bytes(), offset, strides)
    if not writeable:
        a.flags.writeable = False
    return a


_dtype_names: dict[np.dtype, str] = {}


def _dtype_name(dtype: np.dtype) -> str | np.dtype:
    """How a dtype travels: its ``str`` when built in (remembered: reading ``.str`` builds the string), else itself."""
    if dtype.isbuiltin != 1:
        return dtype
    if len(_dtype_names) > 256:  # string dtypes of every length are built in
        _dtype_names.clear()
    name = _dtype_names[dtype] = dtype.str
    return name


def reduce_ndarray(a: np.ndarray) -> tuple:
    """A shared array as its storage's handle plus its layout; any other array by value, as NumPy pickles it."""
    storage = a.base
    while type(storage) is not Storage:  # storage_of, inlined: usually array -> flat uint8 view -> Storage
        storage = getattr(storage, "base", None)
        if storage is None:
            return a.__reduce_ex__(_BY_VALUE_PROTOCOL)
    return rebuild_array, (storage.handle or _make_head(storage), lend(storage), _data_address(a) - storage.address,
                           a.shape, a.strides, _dtype_names.get(a.dtype) or _dtype_name(a.dtype), a.flags.writeable)


def _forget_handles_after_fork() -> None:
    # A handle names this process's board (and, for file_system, its published name): the child builds its own.
    for storage in live_storages():
        storage.handle = None


os.register_at_fork(after_in_child=_forget_handles_after_fork)


def register() -> None:
    """Register the reducers on ForkingPickler (idempotent)."""
    ForkingPickler.register(Storage, reduce_storage)
    ForkingPickler.register(np.ndarray, reduce_ndarray)


register()
