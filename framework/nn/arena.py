"""ParameterArena: every parameter of a module packed into one flat array, each parameter a view of it.

One storage to send to other processes, one memcpy to sync a local copy
(`copy_from`), one flat gradient buffer and so one vectorised optimizer step
over all parameters. `data` moves into shared memory in place
(`share_memory_`); `grad` is private to each process (zeros where it is made).

Pickled through a `sharing` queue or as a spawn argument the arena is shared
first and travels as its shared array; the receiver rebuilds the parameters
as views of that memory, and a process receiving the same arena twice (say a
model and, separately, its optimizer) gets the same arena and parameters.
Plain pickling (checkpoints, `copy.deepcopy`) copies it into a private arena.
"""
from __future__ import annotations

import weakref
from typing import Any, List, Sequence, Tuple

import numpy as np

from .. import aliasing
from ..device import array_module, device_of, on_device, shareable, to_device
from ..tensor import wrap
from .parameter import Parameter

Layout = Tuple[Tuple[Tuple[int, ...], ...], Tuple[bool, ...]]

# Shared arenas alive in this process, by (memory address, bytes, layout): how a received arena finds its twin.
_SHARED: "weakref.WeakValueDictionary[tuple, ParameterArena]" = weakref.WeakValueDictionary()


def _address(array: Any) -> int:
    return aliasing.address(array) if isinstance(array, np.ndarray) else int(array.data.ptr)


class ParameterArena:
    """Parameters packed into one flat array `data` with a matching flat gradient buffer `grad`.

    `params[i]` is the i-th packed parameter (the module's `named_parameters()`
    order); `offsets[i]` its first element in `data`.
    """

    def __init__(self, data: Any, params: List[Parameter], shapes: Sequence[Tuple[int, ...]]) -> None:
        self.params = params
        self.shapes = [tuple(s) for s in shapes]
        sizes = [int(np.prod(s)) for s in self.shapes]
        self.offsets = [int(o) for o in np.cumsum([0] + sizes[:-1])] if sizes else []
        self.sizes = sizes
        self.alive = True
        self._anchor = wrap(data)
        self._grad = _zeros_like(data)
        self._grad_views = [self._segment(self._grad, i) for i in range(len(params))]
        for slot, p in enumerate(params):
            p._arena = self
            p._slot = slot

    # ---- construction ---------------------------------------------------------------------------
    @classmethod
    def pack(cls, params: Sequence[Parameter]) -> "ParameterArena":
        """Copy `params` into a new flat array and make each a view of it (aliases of a parameter follow it)."""
        params = list(params)
        if not params:
            return cls(np.empty((0,), np.float32), [], [])
        dtypes = {p._data.dtype for p in params}
        devices = {p.device for p in params}
        if len(dtypes) != 1 or len(devices) != 1:
            raise ValueError(f"pack_parameters: all parameters must share one dtype and device to live in one "
                             f"arena, got dtypes {sorted(map(str, dtypes))} on devices {sorted(devices)}")
        sample = params[0]._data
        shapes = [p._data.shape for p in params]
        total = sum(int(np.prod(s)) for s in shapes)
        with on_device(device_of(sample)):
            data = array_module(sample).empty((total,), sample.dtype)
        arena = cls.__new__(cls)
        grads = [p._grad for p in params]
        members = []
        offset = 0
        for p, shape in zip(params, shapes):
            size = int(np.prod(shape))
            segment = data[offset:offset + size].reshape(shape)
            segment[...] = p._data
            if isinstance(data, np.ndarray) and p._data.flags.c_contiguous:
                members += aliasing.repoint_into(p, data, offset * data.itemsize)
            else:
                p._data = segment
                members.append(p)
            offset += size
        cls.__init__(arena, data, params, shapes)
        if isinstance(data, np.ndarray):
            aliasing.join([arena._anchor, *members])
        for p, grad in zip(params, grads):
            p._grad = None
            if grad is not None:
                p.grad = grad
        return arena

    @classmethod
    def attach(cls, data: Any, layout: Layout) -> "ParameterArena":
        """The arena over existing memory `data`: the live one for a shared block, else new parameters viewing it."""
        shapes, requires = layout
        key = (device_of(data), _address(data), int(data.nbytes), shapes) if _is_shared(data) else None
        if key is not None:
            twin = _SHARED.get(key)
            if twin is not None and twin.alive:
                return twin
        arena = cls.__new__(cls)
        params = []
        offset = 0
        for shape, flag in zip(shapes, requires):
            size = int(np.prod(shape))
            p = Parameter(data[offset:offset + size].reshape(shape), requires_grad=flag)
            params.append(p)
            offset += size
        cls.__init__(arena, data, params, shapes)
        if isinstance(data, np.ndarray):
            aliasing.join([arena._anchor, *params])
        if key is not None:
            _SHARED[key] = arena
        return arena

    # ---- views ----------------------------------------------------------------------------------
    def _segment(self, flat: Any, slot: int) -> Any:
        start = self.offsets[slot]
        return flat[start:start + self.sizes[slot]].reshape(self.shapes[slot])

    @property
    def data(self) -> Any:
        """The flat array holding every parameter (parameters are views of it)."""
        return self._anchor._data

    @property
    def grad(self) -> Any:
        """The flat gradient buffer (this process's; each parameter's .grad is a view of it)."""
        return self._grad

    def grad_view(self, slot: int) -> Any:
        """The part of `grad` that is parameter `slot`'s gradient, in its shape."""
        return self._grad_views[slot]

    @property
    def numel(self) -> int:
        return int(self.data.size)

    @property
    def device(self) -> str:
        return device_of(self.data)

    def layout(self) -> Layout:
        """(shapes, requires_grad flags): what, with `data`, rebuilds the parameters elsewhere."""
        return tuple(self.shapes), tuple(p._rg for p in self.params)

    def is_shared(self) -> bool:
        return _is_shared(self.data)

    # ---- operations -----------------------------------------------------------------------------
    def copy_from(self, other: "ParameterArena") -> None:
        """Copy every parameter value from an arena of the same layout: one memcpy."""
        if other.shapes != self.shapes:
            raise ValueError(f"copy_from: arenas differ in layout ({len(other.shapes)} parameters of shapes "
                             f"{other.shapes} vs {len(self.shapes)} of shapes {self.shapes})")
        array_module(self.data).copyto(self.data, other.data)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero the flat gradient buffer; with set_to_none also drop each parameter's .grad (as torch)."""
        self._grad.fill(0)
        if set_to_none:
            for p in self.params:
                p._grad = None

    def share_memory_(self) -> "ParameterArena":
        """Move `data`, in place, into memory other processes map: shared memory on the CPU (parameters and their
        views follow), a device allocation of its own on CUDA (parameters follow; see `device.shareable`)."""
        data = self.data
        if isinstance(data, np.ndarray) and data.size and not _is_shared(data):
            import sharing
            aliasing.move(self._anchor, sharing.share_array)
        elif not isinstance(data, np.ndarray) and data.size:
            self._point_params_at(shareable(data))
        if self.data.size and _is_shared(self.data):
            _SHARED[(device_of(self.data), _address(self.data), int(self.data.nbytes), tuple(self.shapes))] = self
        return self

    def to(self, device: str, dtype: Any = None) -> None:
        """Move (or cast) the whole arena; parameters keep their identity and become views of the new array."""
        data = to_device(self.data, device)
        if dtype is not None and data.dtype != dtype:
            data = data.astype(dtype)
        if data is self.data:
            return
        self._point_params_at(data)
        self._grad = _zeros_like(data)
        self._grad_views = [self._segment(self._grad, i) for i in range(len(self.params))]
        for p in self.params:
            p._grad = None

    def _point_params_at(self, data: Any) -> None:
        """Make `data` (a copy of the arena's values) the arena's memory, each parameter a view of it."""
        if data is self.data:
            return
        self._anchor = wrap(data)
        for slot, p in enumerate(self.params):
            p._data = self._segment(data, slot)
            p._st = None
        if isinstance(data, np.ndarray):
            aliasing.join([self._anchor, *self.params])

    def dissolve(self) -> None:
        """Stop being an arena: parameters keep their memory but are no longer packed (before repacking them)."""
        for p in self.params:
            if p._arena is self:
                p._arena = None
                p._slot = -1
        self.params = []
        self.alive = False

    def __reduce_ex__(self, protocol: int) -> tuple:
        # Plain pickling copies; sharing queues and spawn arguments go through framework.pickling.
        return ParameterArena._by_value, (self.data, self.layout())

    @classmethod
    def _by_value(cls, data: Any, layout: Layout) -> "ParameterArena":
        return cls.attach(data, layout)

    def __repr__(self) -> str:
        return (f"ParameterArena({len(self.params)} parameters, {self.numel} elements of {self.data.dtype} on "
                f"{self.device}{', shared' if self.is_shared() else ''})")


def _zeros_like(data: Any) -> Any:
    """Zeros of data's shape and dtype on data's device (not whichever device happens to be current)."""
    with on_device(device_of(data)):
        return array_module(data).zeros(data.shape, data.dtype)


def _is_shared(data: Any) -> bool:
    if not isinstance(data, np.ndarray):
        return True
    import sharing
    return sharing.is_shared(data)
