"""hogshare's CPU sharing layer: a drop-in for ``multiprocessing`` that moves shared NumPy memory as handles.

``import sharing as mp`` offers everything ``multiprocessing`` does (Process,
Queue, Pool, get_context, Value, Manager, ...). Importing it registers
reducers on multiprocessing's ForkingPickler, so an array in shared memory (or
any view of one) put on a queue or pipe, handed to a pool, or passed to a
spawn/forkserver process travels as a handle and the receiver's array aliases
the sender's memory; other arrays are copied as usual. On top come
``share_array``, ``empty_shared`` and ``is_shared``, the two sharing strategies
of ``torch.multiprocessing``, a ``spawn`` that reports failed children, and
``RingQueue``, a Queue over a ring buffer in shared memory for when the
queue's own cost matters, and ``RobustLock``, a Lock that names nothing in
/dev/shm and that a killed holder does not deadlock.
"""
import importlib
import multiprocessing
from multiprocessing import *  # noqa: F401,F403  (the drop-in part)

from . import lifecycle, pickling, pool_results  # noqa: F401  (registers the reducers, guards Pool results)
from .arrays import empty_shared, is_shared, share_array, storage_of
from .ring_queue import RingQueue
from .robust_lock import RobustLock
from .spawning import (ProcessContext, ProcessException, ProcessExitedException, ProcessRaisedException,
                       spawn)
from .storage import Storage
from .strategies import get_all_sharing_strategies, get_sharing_strategy, set_sharing_strategy

__all__ = [*multiprocessing.__all__, "RingQueue", "RobustLock", "Storage", "empty_shared",
           "get_all_sharing_strategies", "get_sharing_strategy", "is_shared", "set_sharing_strategy", "share_array",
           "spawn", "storage_of", "ProcessContext", "ProcessException", "ProcessExitedException",
           "ProcessRaisedException"]


def __getattr__(name: str):
    """Anything else multiprocessing has, submodules included (``sharing.connection``, ``sharing.pool``)."""
    try:
        return getattr(multiprocessing, name)
    except AttributeError:
        pass
    try:
        return importlib.import_module(f"multiprocessing.{name}")
    except ModuleNotFoundError:
        raise AttributeError(f"module 'sharing' has no attribute {name!r}") from None
