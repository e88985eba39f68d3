"""Optimizer base: parameter groups, state created up front as flat arrays, sharing, state_dict, fused stepping.

All state of a group (moments, the per-parameter step counts) lives in flat
arrays allocated in the constructor, one element per parameter element; the
per-parameter state of `opt.state[p]` is views of them. So `share_memory()`
moves a handful of arrays into shared memory (on CUDA, into device allocations
of their own that workers map through IPC handles), and when a group's parameters
are consecutive in one `ParameterArena` (a packed module, the intended layout)
`step()` updates them all with a few vectorised operations on
`arena.data`/`arena.grad` instead of a Python loop over parameters.

Fused steps read the gradient of every packed parameter from `arena.grad`
(zeros for a parameter that has no `.grad` after `zero_grad()`), so a
parameter without a gradient still moves by its momentum, and set every step
count of the group to the first one's plus one (lock-free workers may race on
the shared counts; this keeps them equal). The per-parameter path skips
parameters whose `.grad` is None and counts steps per parameter, as torch.

Lock-free workers also read state another worker is writing, and lose some
of each other's writes (each update is a read-modify-write): Adam's m can hold
a gradient its v lacks, RMSprop's v can lack the worker's own, and a parameter
would then move by about lr / eps. Each update's denominator is floored at
the least a single process's state implies (never binding there, so one
process steps exactly as torch), which keeps every step within its optimizer's
step size.

An optimizer pickled to another process (a spawn argument, a `sharing` queue)
carries its state arrays (as handles when shared, so both processes update
the same memory) and its parameters, which resolve to the received model's
parameters when both travel in one message or when the model's arena already
arrived (see ParameterArena).

Everything runs on the device of the parameters it concerns (state, scratch,
the update itself), whichever CUDA device is current.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..device import array_module, device_of, on_device, shareable, to_device
from ..tensor import Tensor

Flat = Dict[str, Any]


class _Plan:
    """Where a group's parameters sit in an arena: elements [start, stop) of arena.data."""

    __slots__ = ("arena", "start", "stop")

    def __init__(self, arena: Any, start: int, stop: int) -> None:
        self.arena, self.start, self.stop = arena, start, stop


class Optimizer:
    """Base class: subclasses define `state_keys(group)` and the update in `_update(...)`."""

    def __init__(self, params: Any, defaults: Dict[str, Any]) -> None:
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got a Tensor")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.param_groups: List[Dict[str, Any]] = []
        self._flats: List[Flat] = []
        self.state: Dict[Tensor, Dict[str, Any]] = {}
        self._plans: List[Tuple[Any, Optional[_Plan]]] = []
        self._scratch: List[Any] = []
        for group in groups:
            self.add_param_group(group)

    # ---- subclass interface ---------------------------------------------------------------------
    initial_state: Dict[str, float] = {}
    """The value a state array starts at, where it is not 0."""

    temporaries = 1
    """The scratch arrays like param that `_update` needs (more than one arrive stacked)."""

    def state_keys(self, group: Dict[str, Any]) -> Tuple[str, ...]:
        """Names of the element-wise state arrays the group needs (besides the step counts)."""
        raise NotImplementedError

    def _update(self, group: Dict[str, Any], param: Any, grad: Any, state: Dict[str, Any], step: float,
                scratch: Any) -> None:
        """Update `param` in place from `grad` (never modified); `state` maps state_keys to arrays shaped like
        param; `step` is this update's step number (1 for the first); `scratch` a temporary like param (with
        `temporaries` > 1, that many stacked: shape (temporaries, *param.shape))."""
        raise NotImplementedError

    def _state_dict_keys(self, group: Dict[str, Any], started: bool) -> Tuple[str, ...]:
        """The per-parameter state torch would report (subclasses hide what torch has not created yet)."""
        return ("step",) + self.state_keys(group)

    # ---- groups and state -----------------------------------------------------------------------
    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        """Add a group of parameters (with per-group options) and allocate its state."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param group must be a dict, got {type(param_group).__name__}")
        params = param_group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in params}) != len(params) or any(id(p) in seen for p in params):
            raise ValueError("some parameters appear more than once in the optimizer's parameter groups")
        group = dict(self.defaults)
        group.update(param_group)
        group["params"] = params
        self._validate(group)
        self.param_groups.append(group)
        self._flats.append(self._allocate(group))
        self._plans.append((None, None))
        self._scratch.append(None)
        self._bind_views(len(self.param_groups) - 1)

    def _validate(self, group: Dict[str, Any]) -> None:
        lr = group["lr"]
        if not isinstance(lr, (int, float)) or lr < 0:
            raise ValueError(f"Invalid learning rate: {lr!r} (expected a float >= 0)")

    def _allocate(self, group: Dict[str, Any]) -> Flat:
        params = group["params"]
        total = sum(p._data.size for p in params)
        xp = array_module(params[0]._data)
        dtype = np.result_type(*[p._data.dtype for p in params])
        with on_device(device_of(params[0]._data)):  # the state lives with the parameters
            flat: Flat = {key: xp.full((total,), self.initial_state.get(key, 0.0), dtype)
                          for key in self.state_keys(group)}
            flat["step"] = xp.zeros((len(params),), np.float32)
        return flat

    def _bind_views(self, index: int) -> None:
        """Rebuild opt.state[p] as views of the group's flat arrays (after allocation, sharing or unpickling)."""
        group, flat = self.param_groups[index], self._flats[index]
        offset = 0
        for i, p in enumerate(group["params"]):
            size = p._data.size
            entry = {key: flat[key][offset:offset + size].reshape(p._data.shape) for key in self.state_keys(group)}
            entry["step"] = flat["step"][i:i + 1].reshape(())
            self.state[p] = entry
            offset += size

    def share_memory(self) -> "Optimizer":
        """Move all state (the step counts too) into memory other processes map; returns self.

        Shared memory on the CPU; on CUDA, a device allocation of its own for
        each state array (see `framework.device.shareable`).
        """
        for index, flat in enumerate(self._flats):
            for key, array in flat.items():
                flat[key] = shareable(array)
            self._bind_views(index)
        return self

    # ---- stepping -------------------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter (to None by default, as torch; packed ones zero arena.grad)."""
        for index, group in enumerate(self.param_groups):
            plan = self._plan(index)
            if plan is not None:
                plan.arena.grad[plan.start:plan.stop] = 0
                if set_to_none:
                    for p in group["params"]:
                        p._grad = None
                continue
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p._grad is not None:
                    p._grad._data.fill(0)

    def _plan(self, index: int) -> Optional[_Plan]:
        """The fused plan for a group when its parameters are consecutive in one live arena, else None."""
        params = self.param_groups[index]["params"]
        arena = getattr(params[0], "_arena", None)
        cached_arena, plan = self._plans[index]
        if arena is cached_arena and (arena is None or arena.alive):
            return plan
        plan = None
        if arena is not None and arena.alive:
            first = params[0]._slot
            if all(getattr(p, "_arena", None) is arena and p._slot == first + i for i, p in enumerate(params)):
                last = first + len(params) - 1
                plan = _Plan(arena, arena.offsets[first], arena.offsets[last] + arena.sizes[last])
        self._plans[index] = (arena, plan)
        return plan

    def step(self, closure: Any = None) -> Any:
        """One update of every parameter from its gradient; returns closure() when given (evaluated first)."""
        loss = None
        if closure is not None:
            from ..grad_mode import enable_grad
            with enable_grad():
                loss = closure()
        for index, group in enumerate(self.param_groups):
            flat = self._flats[index]
            plan = self._plan(index)
            if plan is not None:
                data, grad = plan.arena.data, plan.arena.grad
                if plan.start or plan.stop != data.size:
                    data, grad = data[plan.start:plan.stop], grad[plan.start:plan.stop]
                steps = flat["step"]
                step = float(steps[0]) + 1
                with on_device(device_of(data)):
                    steps.fill(step)
                    self._update(group, data, grad, {k: flat[k] for k in self.state_keys(group)}, step,
                                 self._scratch_for(index, data))
                continue
            for p in group["params"]:
                if p._grad is None:
                    continue
                entry = self.state[p]
                data = p._data
                with on_device(device_of(data)):
                    count = entry["step"]
                    count += 1
                    self._update(group, data, p._grad._data, entry, float(count), self._scratch_for(index, data))
        return loss

    def _scratch_for(self, index: int, like: Any) -> Any:
        """`temporaries` arrays shaped and typed like `like` on its device (stacked when more than one), views of
        one flat buffer per group kept between steps."""
        size = like.size * self.temporaries
        scratch = self._scratch[index]
        device = device_of(like)
        if scratch is None or scratch.size < size or scratch.dtype != like.dtype or device_of(scratch) != device:
            with on_device(device):
                scratch = self._scratch[index] = array_module(like).empty((size,), like.dtype)
        shape = like.shape if self.temporaries == 1 else (self.temporaries, *like.shape)
        return scratch[:size].reshape(shape)

    # ---- state_dict -----------------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """{"state": {index: {name: array}}, "param_groups": [{options..., "params": [indices]}]} as torch.

        Indices number parameters across groups in order; arrays are copies.
        """
        state: Dict[int, Dict[str, Any]] = {}
        groups = []
        index = 0
        for group in self.param_groups:
            indices = []
            for p in group["params"]:
                entry = self.state[p]
                keys = self._state_dict_keys(group, float(entry["step"]) > 0)
                if keys:
                    state[index] = {k: _host_copy(entry[k]) for k in keys}
                indices.append(index)
                index += 1
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": indices})
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Load a state_dict of the same structure: options into the groups, arrays copied into the state."""
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError("optimizer state_dict must be a dict with 'state' and 'param_groups' keys")
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(saved_groups)} parameter groups, the optimizer has "
                             f"{len(self.param_groups)}")
        for saved, group in zip(saved_groups, self.param_groups):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                                 f"optimizer's group ({len(saved['params'])} vs {len(group['params'])} parameters)")
        saved_state = state_dict["state"]
        updates = []
        for saved, group in zip(saved_groups, self.param_groups):
            for saved_index, p in zip(saved["params"], group["params"]):
                entry = saved_state.get(saved_index, saved_state.get(str(saved_index)))
                if entry is None:
                    continue
                for key, value in entry.items():
                    if key not in self.state[p]:
                        raise KeyError(f"state[{saved_index}] has key {key!r}, which {type(self).__name__} with "
                                       f"these options does not keep (it keeps {sorted(self.state[p])})")
                    target = self.state[p][key]
                    array = value._data if isinstance(value, Tensor) else np.asarray(value)
                    if array.size != target.size or (array.ndim and tuple(array.shape) != tuple(target.shape)):
                        raise ValueError(f"state[{saved_index}][{key!r}] has shape {tuple(array.shape)}, the "
                                         f"parameter's state has shape {tuple(target.shape)}")
                    updates.append((target, array))
                if entry and "step" not in entry:  # state saved without a count (SGD's) was made by at least one step
                    count = self.state[p]["step"]
                    updates.append((count, np.maximum(_host_copy(count), 1)))
        for target, array in updates:
            device = device_of(target)
            with on_device(device):
                array_module(target).copyto(target, to_device(array.reshape(target.shape), device), casting="unsafe")
        for saved, group in zip(saved_groups, self.param_groups):
            group.update({k: v for k, v in saved.items() if k != "params"})

    # ---- pickling -------------------------------------------------------------------------------
    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state["state"] = None
        state["_plans"] = [(None, None)] * len(self.param_groups)
        state["_scratch"] = [None] * len(self.param_groups)
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.state = {}
        for index in range(len(self.param_groups)):
            self._bind_views(index)

    def __repr__(self) -> str:
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params"]
        return "\n".join(lines + [")"])


def _host_copy(array: Any) -> np.ndarray:
    return array.get() if hasattr(array, "get") else np.array(array, copy=True)


def check_range(name: str, value: Any, low: float, high: Optional[float] = None, high_open: bool = True) -> None:
    """ValueError naming an option outside [low, high) (or [low, high] when not high_open)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        bound = "" if high is None else f" and {'<' if high_open else '<='} {high}"
        raise ValueError(f"Invalid {name} value: {value!r} (expected a number >= {low}{bound})")
