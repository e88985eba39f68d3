"""Storage aliasing: the tensors that view one block of memory, and moving that block with every view following.

A tensor's array may be a view of another tensor's array (slices, reshapes,
transposes). Like torch, moving a tensor into shared memory (or packing a
parameter into a flat arena) must keep all those views aliasing each other, so
tensors that share memory belong to one *alias group*: a list of weak
references, created lazily when the first view is taken. A move copies the
memory once and re-derives every live member's array at the same byte offset
and strides in the new block.
"""
from __future__ import annotations

import weakref
from typing import Any, Iterable, List, Optional

import numpy as np

Group = List["weakref.ReferenceType[Any]"]
_PRUNE_EVERY = 64


def link(source: Any, view: Any) -> None:
    """Record that `view`'s array views `source`'s memory (both tensors)."""
    group = source._st
    if group is None:
        group = source._st = [weakref.ref(source)]
    elif len(group) % _PRUNE_EVERY == 0:
        group[:] = [r for r in group if r() is not None]
    group.append(weakref.ref(view))
    view._st = group


def members(tensor: Any) -> list:
    """The live tensors of `tensor`'s alias group (just the tensor when it has none)."""
    group = tensor._st
    if group is None:
        return [tensor]
    live = [t for t in (r() for r in group) if t is not None and t._st is group]
    group[:] = [weakref.ref(t) for t in live]
    return live


def join(tensors: Iterable[Any]) -> Group:
    """Make one alias group of `tensors` (after their arrays were re-pointed into one block)."""
    group: Group = []
    for t in tensors:
        group.append(weakref.ref(t))
        t._st = group
    return group


def root_of(array: np.ndarray) -> np.ndarray:
    """The last ndarray in `array`'s base chain: the array that holds the memory the view looks at."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def address(array: np.ndarray) -> int:
    """The address of an array's first element."""
    return array.__array_interface__["data"][0]


def _extent(array: np.ndarray) -> tuple:
    """(lowest, highest+1) byte offsets an array touches relative to its first element."""
    if array.size == 0:
        return 0, 0
    low = sum((n - 1) * s for n, s in zip(array.shape, array.strides) if s < 0)
    high = sum((n - 1) * s for n, s in zip(array.shape, array.strides) if s > 0)
    return low, high + array.itemsize


def rebase(array: np.ndarray, old_anchor: int, new_block: np.ndarray, new_anchor: int = 0) -> np.ndarray:
    """A view of `new_block` with `array`'s shape, dtype and strides at the same offset from the anchor.

    `old_anchor` is the address that maps to byte `new_anchor` of `new_block`
    (a C-contiguous array); negative strides are rebuilt by reversing axes.
    """
    offset = address(array) - old_anchor + new_anchor
    low, _ = _extent(array)
    strides = array.strides
    view = np.ndarray(array.shape, array.dtype, buffer=new_block, offset=offset + low,
                      strides=tuple(abs(s) for s in strides))
    if low:
        view = view[tuple(slice(None, None, -1) if s < 0 else slice(None) for s in strides)]
    return view


def contiguous_block(root: np.ndarray) -> Optional[np.ndarray]:
    """`root` as a C-contiguous array over the same bytes (itself, or its transpose); None if it has gaps."""
    if root.flags.c_contiguous:
        return root
    if root.flags.f_contiguous:
        return root.T
    return None


def move(tensor: Any, new_block_for: Any) -> None:
    """Copy the memory under `tensor` into a new block and re-point every alias of it there.

    `new_block_for(block)` returns the new C-contiguous array holding a copy of
    `block` (e.g. `sharing.share_array`). Members of the group that view other
    memory are left alone. A root with gaps (rare: a strided array over a
    foreign buffer) cannot be moved as a whole, so only `tensor` is copied.
    """
    root = root_of(tensor._data)
    block = contiguous_block(root)
    if block is None:
        fresh = new_block_for(np.ascontiguousarray(tensor._data))
        tensor._data = fresh
        tensor._st = None
        return
    new_block = new_block_for(block)
    anchor = address(block)
    group = members(tensor)
    moved = [t for t in group if isinstance(t._data, np.ndarray) and root_of(t._data) is root]
    for t in moved:
        t._data = rebase(t._data, anchor, new_block)
    join(moved)
    rest = [t for t in group if not any(t is m for m in moved)]
    if rest:
        join(rest)


def repoint_into(tensor: Any, block: np.ndarray, byte_offset: int) -> list:
    """Re-point `tensor` (C-contiguous) and the aliases inside its bytes to `block` at `byte_offset`.

    The caller has copied the tensor's values there. Returns the tensors now
    viewing `block`; aliases reaching outside the tensor's bytes keep the old
    memory in a group of their own.
    """
    data = tensor._data
    anchor = address(data)
    end = anchor + data.nbytes
    root = root_of(data)
    inside, outside = [], []
    for t in members(tensor):
        arr = t._data
        if t is tensor:
            inside.append(t)
            continue
        if not isinstance(arr, np.ndarray) or root_of(arr) is not root:
            outside.append(t)
            continue
        low, high = _extent(arr)
        start = address(arr)
        (inside if anchor <= start + low and start + high <= end else outside).append(t)
    for t in inside:
        t._data = rebase(t._data, anchor, block, byte_offset)
    if outside:
        join(outside)
    return inside
