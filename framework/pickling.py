"""How tensors, parameters and parameter arenas travel between processes (ForkingPickler reducers).

As in torch, putting a CPU tensor on a `sharing` queue (or passing it to a
spawn/forkserver process) first moves its storage into shared memory in place,
so the sender's tensor and every view of it alias what the receiver gets. A
tensor travels as (its shared array, requires_grad): the array goes as a
`sharing` handle with offset, shape and strides. `.grad` is not carried
(the receiver's tensor has none), and a non-leaf tensor that requires grad
refuses to travel. CUDA tensors travel as their CuPy array (a CUDA IPC handle,
see `cuda_ipc`, whose reducer is registered when CuPy is imported, so a CPU
process never loads CuPy). Packed parameters travel as (arena, slot) so a
model arrives with its arena intact (see ParameterArena).
"""
from __future__ import annotations

from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np

import cuda_ipc  # noqa: F401  (registers the CuPy reducer once CuPy is imported)
import sharing  # noqa: F401  (registers the shared ndarray reducer this one builds on)

from .nn.arena import Layout, ParameterArena
from .nn.parameter import Parameter, _arena_parameter
from .tensor import Tensor, wrap

NON_LEAF_MESSAGE = (
    "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does not support crossing "
    "process boundaries.  If you just want to transfer the data, call detach() on the tensor before serializing "
    "(e.g., putting it on the queue).")


def _rebuild_tensor(data: Any, requires_grad: bool) -> Tensor:
    out = wrap(data)
    out._rg = requires_grad
    return out


def _rebuild_parameter(data: Any, requires_grad: bool) -> Parameter:
    return Parameter(data, requires_grad)


def _shared_data(tensor: Tensor) -> Any:
    if tensor._rg and tensor._bw is not None:
        raise RuntimeError(NON_LEAF_MESSAGE)
    if isinstance(tensor._data, np.ndarray):
        tensor.share_memory_()
    return tensor._data


def reduce_tensor(tensor: Tensor) -> tuple:
    """A tensor as its shared array and requires_grad flag."""
    return _rebuild_tensor, (_shared_data(tensor), tensor._rg)


def reduce_parameter(param: Parameter) -> tuple:
    """A packed parameter as (arena, slot); any other as its shared array and requires_grad flag."""
    if param._arena is not None:
        return _arena_parameter, (param._arena, param._slot)
    return _rebuild_parameter, (_shared_data(param), param._rg)


def _attach_arena(data: Any, layout: Layout) -> ParameterArena:
    return ParameterArena.attach(data, layout)


def reduce_arena(arena: ParameterArena) -> tuple:
    """An arena as its (shared) flat array and layout; the receiver's parameters view that memory."""
    arena.share_memory_()
    return _attach_arena, (arena.data, arena.layout())


def register() -> None:
    """Register the reducers on ForkingPickler (idempotent)."""
    ForkingPickler.register(Tensor, reduce_tensor)
    ForkingPickler.register(Parameter, reduce_parameter)
    ForkingPickler.register(ParameterArena, reduce_arena)


register()
