"""Parameter: a leaf Tensor that a Module registers and optimizers update (requires grad by default)."""
from __future__ import annotations

import weakref
from typing import Any, Optional

import numpy as np

from ..tensor import Tensor, wrap


class Parameter(Tensor):
    """A Tensor registered as a module parameter; `Parameter(t)` shares `t`'s storage, as in torch.

    Packed into a `ParameterArena` (see `Module.pack_parameters`), its data is a
    view of the arena's flat array and its `.grad`, once created, a view of the
    arena's flat gradient: backward copies into that view the first time and
    adds in place after. Assigning `.grad` copies the values into the view, and
    assigning None zeroes it, so `arena.grad` is always the gradient of every
    packed parameter.
    """

    __slots__ = ("_arena_ref", "_slot")

    def __init__(self, data: Any = None, requires_grad: bool = True) -> None:
        super().__init__(np.empty((0,), np.float32) if data is None else data)
        self._arena_ref = None
        self._slot = -1
        if requires_grad:
            self.requires_grad = True

    @property
    def _arena(self) -> Any:
        """The ParameterArena this parameter is packed in, or None.

        Held weakly (the arena holds its parameters), so a dropped model frees
        its arena, and its shared memory, without waiting for the cycle collector.
        """
        ref = self._arena_ref
        return None if ref is None else ref()

    @_arena.setter
    def _arena(self, arena: Any) -> None:
        self._arena_ref = None if arena is None else weakref.ref(arena)

    @property
    def grad(self) -> Optional[Tensor]:
        return self._grad

    @grad.setter
    def grad(self, value: Optional[Tensor]) -> None:
        Tensor.grad.fset(self, value)
        arena = self._arena
        if arena is None:
            return
        view = arena.grad_view(self._slot)
        if value is None:
            view.fill(0)
        else:
            view[...] = value._data
            self._grad = wrap(view)

    def _accumulate(self, grad: Any) -> None:
        arena = self._arena
        if arena is None or self._grad is not None:
            Tensor._accumulate(self, grad)
            return
        view = arena.grad_view(self._slot)
        view[...] = grad
        self._grad = wrap(view)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + Tensor.__repr__(self)

    def __reduce_ex__(self, protocol: int) -> tuple:
        if self._arena is not None:
            return _arena_parameter, (self._arena, self._slot)
        return _rebuild_parameter, (self._data, self._rg)


def _rebuild_parameter(data: Any, requires_grad: bool) -> Parameter:
    return Parameter(data, requires_grad)


def _arena_parameter(arena: Any, slot: int) -> Parameter:
    """The parameter at `slot` of an arena (pickles of packed parameters point into their arena)."""
    return arena.params[slot]
