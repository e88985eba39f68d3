"""Workspace: scratch arrays an op reuses across calls of the same shapes, owned by the layer that runs it.

A convolution over a batch of Atari frames makes and drops megabytes of
temporaries per call (its patch matrix, its per-offset products, the shifted
copies of its gradient). Allocating them afresh costs page faults and cold
caches on every call; a Workspace keeps them, keyed by (device, shape, dtype,
zeroed), for the next call of the same shapes.

Reuse only what is provably dead. A buffer is in the workspace only while
nothing can read it: the forward gives back its temporaries before it returns,
and what its backward will read travels in a `Saved`, which gives its buffers
back when it is dropped (autograd drops a node's backward after running it, or
with the graph; a compiled graph's saved values go the same way). So the next
step's forward can never overwrite arrays that the previous step's backward has
yet to read: while they are alive the forward gets other buffers, and a run
holds as many sets as it has graphs alive, no more.

A buffer taken `zeroed` starts as zeros; `zeroed` is then a key naming the
region its users write (the interior of a padded input, say), the same on every
call with that key, so what lies outside it stays zero across reuse (borders,
padding): a buffer comes back only to a taker with the same key. Results handed to the caller never come
from a workspace. The workspace keeps the buffers of its last KEPT_SHAPES keys
and drops older ones; it pickles and deep-copies as an empty workspace, so a
module copied to another process or device starts with none. Thread-safe.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Tuple

from ..device import device_of

KEPT_SHAPES = 8
"""Keys (device, shape, dtype, zeroed) whose buffers a workspace keeps; the least recently used go past it."""


class Workspace:
    """Free buffers by (device, shape, dtype, zeroed) (see the module docstring)."""

    def __init__(self) -> None:
        self._free: Dict[tuple, List[Any]] = {}
        self._lock = threading.Lock()

    def take(self, xp: Any, like: Any, shape: Tuple[int, ...], dtype: Any, zeroed: Any = False) -> Any:
        """A buffer of `shape` and `dtype` on the device of the array `like` (module `xp`), from the free ones if
        any; a new one otherwise (zeros when `zeroed`, a hashable key naming the region its users write)."""
        key = (device_of(like), shape, dtype, zeroed)
        with self._lock:
            free = self._free.pop(key, None)  # re-inserted below: the most recently used key comes last
            if free:
                buffer = free.pop()
                self._free[key] = free
                return buffer
            if free is not None:
                self._free[key] = free
        return xp.zeros(shape, dtype) if zeroed else xp.empty(shape, dtype)

    def give(self, buffer: Any, zeroed: Any = False) -> None:
        """Return a buffer taken with take(..., zeroed) that nothing reads any more."""
        key = (device_of(buffer), buffer.shape, buffer.dtype, zeroed)
        with self._lock:
            self._free.setdefault(key, []).append(buffer)
            while len(self._free) > KEPT_SHAPES:
                del self._free[next(iter(self._free))]

    def clear(self) -> None:
        """Drop every free buffer (the ones in use come back later)."""
        with self._lock:
            self._free.clear()

    def __len__(self) -> int:
        """How many free buffers it holds."""
        with self._lock:
            return sum(len(free) for free in self._free.values())

    def __reduce__(self) -> tuple:
        return Workspace, ()

    def __deepcopy__(self, memo: dict) -> "Workspace":
        return Workspace()

    def __repr__(self) -> str:
        return f"Workspace({len(self)} free buffers)"


class Saved:
    """Arrays a backward reads: `arrays` by name; the ones taken from `workspace` go back to it when this is
    dropped. With workspace None nothing goes back (a call without a workspace allocates per call)."""

    __slots__ = ("arrays", "workspace", "lent")

    def __init__(self, workspace: Optional[Workspace], lent: Tuple[Tuple[Any, Any], ...], **arrays: Any) -> None:
        self.arrays = arrays
        self.workspace = workspace
        self.lent = lent  # (buffer, zeroed key) pairs taken from the workspace

    def __getitem__(self, name: str) -> Any:
        return self.arrays[name]

    def __del__(self) -> None:
        workspace = self.workspace
        if workspace is not None:
            for buffer, zeroed in self.lent:
                workspace.give(buffer, zeroed)
