"""Module: the base of every layer and model, with torch's registration, naming and state_dict rules.

Parameters, buffers and submodules assigned as attributes are registered (and
stay plain attributes, so `self.fc` costs no lookup hook in forward). Names,
order and `state_dict` keys match torch's, so weights port across.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Set, Tuple

import numpy as np

from ..device import array_module, parse_device, to_device
from ..dtypes import resolve_dtype
from ..grad_mode import no_grad
from ..tensor import Tensor
from ..tracing import HOOK
from .arena import ParameterArena
from .parameter import Parameter


class Version:
    """How many times any Module's attributes were assigned or deleted (parameters, submodules, flags).

    framework.compile guards a graph on the modules it read with one comparison
    of this count, and compares the modules themselves only after it moved.
    """

    count = 0


class IncompatibleKeys(NamedTuple):
    """What load_state_dict(strict=False) could not match."""

    missing_keys: List[str]
    unexpected_keys: List[str]


class Module:
    """Base class for layers and models: subclasses set parameters/submodules in __init__ and define forward()."""

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_arena", None)
        object.__setattr__(self, "training", True)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        hook = HOOK.current
        if hook is not None:
            hook.module_call(self)
        return self.forward(*args, **kwargs)

    # ---- registration ---------------------------------------------------------------------------
    def _registries(self) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, Any]]:
        try:
            return self.__dict__["_parameters"], self.__dict__["_buffers"], self.__dict__["_modules"]
        except KeyError:
            raise AttributeError(f"cannot assign parameters, buffers or modules before Module.__init__() call "
                                 f"(call super().__init__() first in {type(self).__name__}.__init__)") from None

    def __setattr__(self, name: str, value: Any) -> None:
        Version.count += 1
        if isinstance(value, (Parameter, Module)) or name in self.__dict__.get("_parameters", ()) \
                or name in self.__dict__.get("_buffers", ()) or name in self.__dict__.get("_modules", ()):
            params, buffers, modules = self._registries()
            if isinstance(value, Parameter):
                buffers.pop(name, None)
                modules.pop(name, None)
                params[name] = value
            elif isinstance(value, Module):
                params.pop(name, None)
                buffers.pop(name, None)
                modules[name] = value
            elif name in params:
                if value is not None:
                    raise TypeError(f"cannot assign {type(value).__name__} as parameter '{name}' "
                                    f"(framework.nn.Parameter or None expected)")
                params[name] = None
            elif name in buffers:
                if value is not None and not isinstance(value, Tensor):
                    raise TypeError(f"cannot assign {type(value).__name__} as buffer '{name}' (Tensor or None "
                                    f"expected)")
                buffers[name] = value
            elif name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign {type(value).__name__} as child module '{name}' "
                                    f"(framework.nn.Module or None expected)")
                modules[name] = None
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        Version.count += 1
        for registry in ("_parameters", "_buffers", "_modules"):
            self.__dict__[registry].pop(name, None)
        self.__dict__["_non_persistent"].discard(name)
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Optional[Parameter]) -> None:
        """Register `param` (or None) under `name`."""
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign {type(param).__name__} as parameter '{name}' (framework.nn.Parameter "
                            f"or None expected)")
        self._check_name(name, "_parameters")
        Version.count += 1
        self._registries()[0][name] = param
        object.__setattr__(self, name, param)

    def register_buffer(self, name: str, tensor: Optional[Tensor], persistent: bool = True) -> None:
        """Register a non-parameter tensor (saved in state_dict unless persistent=False)."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign {type(tensor).__name__} as buffer '{name}' (Tensor or None expected)")
        self._check_name(name, "_buffers")
        Version.count += 1
        self._registries()[1][name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)
        object.__setattr__(self, name, tensor)

    def add_module(self, name: str, module: Optional["Module"]) -> None:
        """Register a child module under `name`."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "_modules")
        Version.count += 1
        self._registries()[2][name] = module
        object.__setattr__(self, name, module)

    def _check_name(self, name: str, registry: str) -> None:
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"attribute name must be a non-empty string without '.', got {name!r}")
        if name in self.__dict__ and name not in self.__dict__[registry]:
            raise KeyError(f"attribute '{name}' already exists")

    # ---- traversal ------------------------------------------------------------------------------
    def named_modules(self, memo: Optional[Set[int]] = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[Tuple[str, "Module"]]:
        """(name, module) for this module and every descendant, pre-order."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[Tuple[str, "Module"]]:
        seen: Set[int] = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator["Module"]:
        for _, module in self.named_children():
            yield module

    def _named_members(self, registry: str, prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[Tuple[str, Any]]:
        seen: Set[int] = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, registry).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield (f"{module_prefix}.{name}" if module_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[Tuple[str, Parameter]]:
        """(dotted name, parameter) pairs in registration order, each parameter once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[Tuple[str, Tensor]]:
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        """Call fn on every submodule (children first) and then on this module."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ---- state ----------------------------------------------------------------------------------
    def state_dict(self, destination: Optional[Dict[str, Any]] = None, prefix: str = "",
                   keep_vars: bool = False) -> "OrderedDict[str, Tensor]":
        """Parameters and persistent buffers by dotted name (detached tensors sharing storage, as torch)."""
        out: Dict[str, Any] = OrderedDict() if destination is None else destination
        for name, param in self._parameters.items():
            if param is not None:
                out[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent:
                out[prefix + name] = buf if keep_vars else buf.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(out, prefix + name + ".", keep_vars)
        return out  # type: ignore[return-value]

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copy values (tensors or arrays) into the parameters and buffers in place, as torch.

        Shape mismatches always raise, naming the key; missing or unexpected keys
        raise when `strict`, and are returned otherwise.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"expected a mapping from names to tensors or arrays, got {type(state_dict).__name__}")
        targets = self.state_dict(keep_vars=True)
        missing = [k for k in targets if k not in state_dict]
        unexpected = [k for k in state_dict if k not in targets]
        errors = []
        if strict:
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        values = {}
        for key, target in targets.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            array = value._data if isinstance(value, Tensor) else np.asarray(value)
            if tuple(array.shape) != tuple(target.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape {tuple(array.shape)} from "
                              f"checkpoint, the shape in current model is {tuple(target.shape)}.")
            values[key] = array
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        with no_grad():
            for key, array in values.items():
                target = targets[key]
                array_module(target._data).copyto(target._data, to_device(array, target.device), casting="unsafe")
        return IncompatibleKeys(missing, unexpected)

    # ---- modes, devices, gradients --------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Set training mode on this module and every descendant."""
        if not isinstance(mode, bool):
            raise ValueError(f"training mode is expected to be boolean, got {mode!r}")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        Version.count += 1
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset parameter gradients: to None (default, as torch) or to zeros; one fill for a packed module."""
        arena = self.arena
        params = list(self.parameters())
        if arena is not None and len(arena.params) == len(params):
            arena.zero_grad(set_to_none)
            return
        for p in params:
            if set_to_none:
                p.grad = None
            elif p._grad is not None:
                p._grad._data.fill(0)

    def to(self, *args: Any, **kwargs: Any) -> "Module":
        """Move/cast parameters and buffers in place (module.to(device), .to(dtype), .to(device, dtype))."""
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        if kwargs:
            raise TypeError(f"Module.to() got unexpected keyword arguments {sorted(kwargs)}")
        for arg in args:
            if isinstance(arg, str):
                device = arg
            else:
                dtype = arg
        dev = None if device is None else parse_device(device)
        dt = None if dtype is None else resolve_dtype(dtype)
        if dt is not None and dt.kind != "f":
            raise TypeError(f"Module.to() only accepts floating point dtypes, got {dt}")
        arena = self.arena
        if arena is not None:
            arena.to(dev or arena.device, dt)
        for tensor in [*self.parameters(), *self.buffers()]:
            if arena is not None and isinstance(tensor, Parameter) and tensor._arena is arena:
                continue
            moved = to_device(tensor._data, dev) if dev is not None else tensor._data
            if dt is not None and tensor._data.dtype.kind == "f" and moved.dtype != dt:
                moved = moved.astype(dt)
            if moved is not tensor._data:
                tensor._data = moved
                tensor._st = None
                tensor._grad = None
        return self

    def cpu(self) -> "Module":
        return self.to("cpu")

    def cuda(self, device: Optional[int] = None) -> "Module":
        return self.to("cuda" if device is None else f"cuda:{int(device)}")

    def float(self) -> "Module":
        return self.to(np.float32)

    def double(self) -> "Module":
        return self.to(np.float64)

    # ---- the parameter arena --------------------------------------------------------------------
    @property
    def arena(self) -> Optional[ParameterArena]:
        """The arena this module's parameters are packed in (see pack_parameters), or None."""
        arena = self.__dict__.get("_arena")
        return arena if arena is not None and arena.alive else None

    def pack_parameters(self, shared: bool = False) -> ParameterArena:
        """Pack every parameter (named_parameters() order) into one flat array; idempotent.

        Each parameter becomes a view of `arena.data` and its gradient a view of
        `arena.grad` (see ParameterArena). With `shared`, the arena moves to
        shared memory. Parameters already packed elsewhere (a submodule's arena)
        are moved into this one, and that arena is dissolved.
        """
        params = list(self.parameters())
        arena = self.arena
        if arena is None or len(arena.params) != len(params) or any(a is not b for a, b in zip(arena.params, params)):
            for old in {id(p._arena): p._arena for p in params if p._arena is not None}.values():
                old.dissolve()
            arena = ParameterArena.pack(params)
            object.__setattr__(self, "_arena", arena)
        if shared:
            arena.share_memory_()
        return arena

    def share_memory(self) -> "Module":
        """Pack the parameters into one shared arena and move buffers to shared memory; returns self."""
        self.pack_parameters(shared=True)
        for buf in self.buffers():
            buf.share_memory_()
        return self

    # ---- printing -------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): " + repr(module).replace("\n", "\n  ") for name, module in self._modules.items()]
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        body = "\n  ".join(([extra] if extra else []) + lines)
        return f"{type(self).__name__}(\n  {body}\n)"
