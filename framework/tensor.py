"""The Tensor: an array (NumPy on the CPU, CuPy on CUDA) plus what reverse-mode autograd needs.

A Tensor is deliberately thin (`__slots__`, no per-op objects besides a
closure) because small networks call thousands of ops per second. Operators and
math methods are installed by `framework.ops`; this module holds the state,
conversions, views bookkeeping, in-place updates and moving to shared memory.

Limits, compared with torch: in-place operations are not recorded by autograd
(they raise while the graph is being recorded for an operand that requires
grad; run them under `no_grad`, as optimizers do), and saved values are not
version-checked, so modifying a tensor in place between forward and backward
silently changes the gradients computed from it.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Iterator, Optional

import numpy as np

from . import aliasing
from .autograd import backward as _run_backward
from .device import array_module, device_of, parse_device, to_device
from .dtypes import default_dtype_for, is_floating, resolve_dtype
from .grad_mode import MODE
from .tracing import HOOK, escape

_new = object.__new__
_next_seq = itertools.count().__next__  # creation order of recorded results (see autograd)


def as_array(data: Any, dtype: Any = None) -> Any:
    """An array for `data` (no copy for arrays of the right dtype); Python numbers get torch's default dtypes."""
    if isinstance(data, Tensor):
        data = data._data
    if isinstance(data, np.ndarray) or hasattr(data, "__cuda_array_interface__"):
        return data if dtype is None or data.dtype == resolve_dtype(dtype) else data.astype(resolve_dtype(dtype))
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in data):
        data = [as_array(x) for x in data]
    array = np.asarray(data)
    if dtype is not None:
        return array.astype(resolve_dtype(dtype), copy=False)
    if isinstance(data, np.generic):
        return array
    return array.astype(default_dtype_for(array), copy=False)


class Tensor:
    """An n-dimensional array that can record the operations applied to it for `backward()`.

    `Tensor(data)` wraps an array without copying (a Tensor argument shares
    its storage); use `framework.tensor(...)` for a copy.
    """

    __slots__ = ("_data", "_st", "_rg", "_grad", "_bw", "_prev", "_seq", "__weakref__")
    __array_ufunc__ = None  # `ndarray <op> Tensor` defers to the Tensor's reflected operator
    __hash__ = object.__hash__

    def __init__(self, data: Any, requires_grad: bool = False) -> None:
        self._data = as_array(data)
        self._st = None
        self._rg = False
        self._grad = None
        self._bw = None
        self._prev = None
        if isinstance(data, Tensor):
            aliasing.link(data, self)
        if requires_grad:
            self.requires_grad = True

    # ---- state -------------------------------------------------------------------------------
    @property
    def data_array(self) -> Any:
        """The NumPy (or CuPy) array this tensor views: no copy, no autograd."""
        escape(self, ".data_array")
        return self._data

    @property
    def data(self) -> "Tensor":
        """A tensor sharing this one's storage, detached from the graph (as torch's `.data`)."""
        out = wrap(self._data)
        aliasing.link(self, out)
        return out

    @data.setter
    def data(self, value: "Tensor") -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"Tensor.data must be set to a Tensor, got {type(value).__name__}")
        self._data = value._data
        self._st = None
        aliasing.link(value, self)

    @property
    def shape(self) -> tuple:
        """The sizes; under a dynamic capture (framework.compile) some may be symbolic."""
        hook = HOOK.current
        return self._data.shape if hook is None else hook.shape(self)

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def device(self) -> str:
        """'cpu' or 'cuda:N'."""
        return device_of(self._data)

    @property
    def is_cuda(self) -> bool:
        return not isinstance(self._data, np.ndarray)

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return int(self._data.size) if HOOK.current is None else int(math.prod(self.shape))

    def size(self, dim: Optional[int] = None) -> Any:
        """The shape, or its length along `dim`."""
        shape = self.shape
        return shape if dim is None else shape[dim]

    @property
    def requires_grad(self) -> bool:
        return self._rg

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        if self._bw is not None:
            raise RuntimeError("you can only change requires_grad flags of leaf variables; use detach() to get a "
                               "leaf that does not require grad")
        if flag and not is_floating(self._data.dtype):
            raise RuntimeError(f"only Tensors of floating point dtype can require gradients, this one is "
                               f"{self._data.dtype}")
        self._rg = bool(flag)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        """True for tensors not computed by a recorded operation (user-created, or results under no_grad)."""
        return self._bw is None

    @property
    def grad_fn(self) -> Any:
        """The backward closure of a recorded operation, None for leaves."""
        return self._bw

    @property
    def grad(self) -> Optional["Tensor"]:
        """The accumulated gradient of a leaf after backward(); None until then (and for non-leaves)."""
        return self._grad

    @grad.setter
    def grad(self, value: Optional["Tensor"]) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad must be a Tensor or None, got {type(value).__name__}")
            if value.shape != self.shape:
                raise RuntimeError(f"assigned grad has shape {tuple(value.shape)} but the tensor has shape "
                                   f"{tuple(self.shape)}")
        self._grad = value

    def _accumulate(self, grad: Any) -> None:
        """Add a gradient from backward into `.grad` (a private copy the first time, in place after)."""
        current = self._grad
        if current is None:
            self._grad = wrap(grad.astype(self._data.dtype, copy=True))
        else:
            current._data += grad

    # ---- conversions -------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The underlying NumPy array itself (no copy), as torch's `numpy()`."""
        if self._rg:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if not isinstance(self._data, np.ndarray):
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy "
                            f"the tensor to host memory first.")
        escape(self, ".numpy()")
        return self._data

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.numpy()
        if dtype is not None and array.dtype != dtype:
            return array.astype(dtype)
        return array.copy() if copy else array

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            raise ValueError(f"only one element tensors can be converted to Python scalars; this one has shape "
                             f"{tuple(self._data.shape)}")
        escape(self, ".item()")
        return self._data.item()

    def tolist(self) -> Any:
        escape(self, ".tolist()")
        return to_device(self._data, "cpu").tolist()

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return int(self.shape[0])  # int(): a symbolic size gets fixed (and guarded) by a dynamic capture

    def __iter__(self) -> Iterator["Tensor"]:
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(len(self)))

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous (shape "
                               f"{tuple(self._data.shape)})")
        escape(self, "bool()")
        return bool(self._data.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iub":
            raise TypeError(f"only integer tensors of a single element can be converted to an index, "
                            f"this one is {self._data.dtype}")
        return int(self.item())

    def __repr__(self) -> str:
        escape(self, "repr()")
        host = to_device(self._data, "cpu")
        body = np.array2string(host, separator=", ", precision=4, prefix="tensor(")
        extras = []
        if self.is_cuda:
            extras.append(f"device='{self.device}'")
        if host.dtype not in (np.float32, np.int64, np.bool_) or host.size == 0:
            extras.append(f"dtype={host.dtype}")
        if self._bw is not None:  # a primitive's backward is a partial of its function (see ops.primitive)
            name = getattr(getattr(self._bw, "func", self._bw), "__name__", "backward").lstrip("_")
            extras.append(f"grad_fn=<{name}>")
        elif self._rg:
            extras.append("requires_grad=True")
        return "tensor(" + ", ".join([body, *extras]) + ")"

    def to(self, *args: Any, dtype: Any = None, device: Any = None, copy: bool = False) -> "Tensor":
        """This tensor on another device and/or dtype (itself when nothing changes); differentiable.

        Accepts `to(device)`, `to(dtype)`, `to(device, dtype)`, `to(other_tensor)`
        and the keywords.
        """
        for arg in args:
            if isinstance(arg, Tensor):
                device, dtype = arg.device, arg.dtype
            elif isinstance(arg, str) and (arg.startswith("cpu") or arg.startswith("cuda")):
                device = arg
            elif isinstance(arg, str):
                try:
                    dtype = resolve_dtype(arg)
                except TypeError:
                    raise ValueError(f"to(): {arg!r} is neither a device ('cpu', 'cuda', 'cuda:N') nor a dtype "
                                     f"name") from None
            else:
                dtype = arg
        target_device = self.device if device is None else parse_device(device)
        target_dtype = self._data.dtype if dtype is None else resolve_dtype(dtype)
        source_device, source_dtype = self.device, self._data.dtype
        if target_device == source_device and target_dtype == source_dtype and not copy:
            return self
        if target_device == source_device and not copy:
            return self._cast(target_dtype)  # ops' cast primitive (installed by framework.ops)
        moved = self._data
        if target_device != source_device:
            moved = to_device(moved, target_device)
        elif copy and target_dtype == source_dtype:
            moved = moved.copy()
        if moved.dtype != target_dtype:
            moved = moved.astype(target_dtype)
        if self._rg and MODE.enabled and is_floating(target_dtype):
            def to_backward(g: Any) -> tuple:
                return (to_device(g, source_device).astype(source_dtype, copy=False),)
            return node(moved, to_backward, (self,))
        return wrap(moved)

    def cpu(self) -> "Tensor":
        return self.to("cpu")

    def cuda(self, device: Optional[int] = None) -> "Tensor":
        return self.to("cuda" if device is None else f"cuda:{int(device)}")

    def float(self) -> "Tensor":
        return self.to(np.float32)

    def double(self) -> "Tensor":
        return self.to(np.float64)

    def long(self) -> "Tensor":
        return self.to(np.int64)

    def int(self) -> "Tensor":
        return self.to(np.int32)

    def bool(self) -> "Tensor":
        return self.to(np.bool_)

    # ---- autograd ----------------------------------------------------------------------------
    def backward(self, gradient: Any = None, retain_graph: bool = False) -> None:
        """Accumulate the gradient of this tensor into the `.grad` of the leaves it depends on."""
        escape(self, ".backward()")
        _run_backward(self, gradient, retain_graph)

    # ---- in-place updates (not recorded by autograd) -----------------------------------------
    def _check_inplace(self, other: Any = None) -> None:
        escape(self, "an in-place update")
        if MODE.enabled and (self._rg or (isinstance(other, Tensor) and other._rg)):
            if self._rg and self._bw is None:
                raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation; "
                                   "update it inside `with framework.no_grad():`")
            raise RuntimeError("in-place operations are not recorded by autograd: use the out-of-place form "
                               "(y = x + z) for tensors that require grad, or run the update under no_grad()")

    def _operand(self, other: Any) -> Any:
        if isinstance(other, Tensor):
            return other._data
        if isinstance(other, np.generic):
            return other.item()
        return other

    def add_(self, other: Any, alpha: float = 1) -> "Tensor":
        self._check_inplace(other)
        value = self._operand(other)
        self._data += value if alpha == 1 else value * alpha
        return self

    def sub_(self, other: Any, alpha: float = 1) -> "Tensor":
        self._check_inplace(other)
        value = self._operand(other)
        self._data -= value if alpha == 1 else value * alpha
        return self

    def mul_(self, other: Any) -> "Tensor":
        self._check_inplace(other)
        self._data *= self._operand(other)
        return self

    def div_(self, other: Any) -> "Tensor":
        self._check_inplace(other)
        self._data /= self._operand(other)
        return self

    def clamp_(self, min: Optional[float] = None, max: Optional[float] = None) -> "Tensor":
        self._check_inplace()
        if min is None and max is None:
            raise ValueError("clamp_: at least one of min and max must be given")
        array_module(self._data).clip(self._data, min, max, out=self._data)
        return self

    def fill_(self, value: Any) -> "Tensor":
        self._check_inplace(value)
        self._data.fill(self._operand(value))
        return self

    def zero_(self) -> "Tensor":
        self._check_inplace()
        self._data.fill(0)
        return self

    def copy_(self, src: Any) -> "Tensor":
        """Copy `src` (a tensor or array, broadcast to this shape, any dtype or device) into this tensor."""
        self._check_inplace(src)
        value = src._data if isinstance(src, Tensor) else src
        value = to_device(value, self.device) if hasattr(value, "shape") else value
        array_module(self._data).copyto(self._data, value, casting="unsafe")
        return self

    def uniform_(self, a: float = 0.0, b: float = 1.0) -> "Tensor":
        """Fill with samples of U[a, b) from the global generator."""
        from . import random
        self._check_inplace()
        self._data[...] = random.uniform(self.shape, self.dtype, a, b, self.device)
        return self

    def normal_(self, mean: float = 0.0, std: float = 1.0) -> "Tensor":
        """Fill with samples of N(mean, std^2) from the global generator."""
        from . import random
        self._check_inplace()
        self._data[...] = random.standard_normal(self.shape, self.dtype, self.device) * std + mean
        return self

    def __setitem__(self, index: Any, value: Any) -> None:
        self._check_inplace(value)
        if isinstance(index, Tensor):
            index = index._data
        elif isinstance(index, tuple):
            index = tuple(i._data if isinstance(i, Tensor) else i for i in index)
        self._data[index] = self._operand(value)

    def _augmented(self, other: Any, inplace: str, outplace: str) -> "Tensor":
        if MODE.enabled and (self._rg or (isinstance(other, Tensor) and other._rg)):
            if self._rg and self._bw is None:
                self._check_inplace(other)
            return getattr(self, outplace)(other)
        return getattr(self, inplace)(other)

    def __iadd__(self, other: Any) -> "Tensor":
        return self._augmented(other, "add_", "__add__")

    def __isub__(self, other: Any) -> "Tensor":
        return self._augmented(other, "sub_", "__sub__")

    def __imul__(self, other: Any) -> "Tensor":
        return self._augmented(other, "mul_", "__mul__")

    def __itruediv__(self, other: Any) -> "Tensor":
        return self._augmented(other, "div_", "__truediv__")

    # ---- sharing -----------------------------------------------------------------------------
    def share_memory_(self) -> "Tensor":
        """Move the storage into shared memory in place (every view of it follows); no-op if shared, and on CUDA,
        where the memory cuda_ipc's pool hands out is always exportable as an IPC handle."""
        import sharing
        if isinstance(self._data, np.ndarray) and not sharing.is_shared(self._data):
            aliasing.move(self, sharing.share_array)
        return self

    def is_shared(self) -> bool:
        """True when the storage is in shared memory (CUDA memory always is, through IPC handles)."""
        if not isinstance(self._data, np.ndarray):
            return True
        import sharing
        return sharing.is_shared(self._data)

    def __reduce_ex__(self, protocol: int) -> tuple:
        # Plain pickling (checkpoints, deepcopy) is by value; `sharing` queues use framework.pickling.
        return _rebuild_by_value, (type(self), self._data, self._rg)


def _rebuild_by_value(cls: type, data: Any, requires_grad: bool) -> Tensor:
    return cls(data, requires_grad=requires_grad)


def wrap(data: Any) -> Tensor:
    """A leaf tensor over `data` (an array), no copy, not requiring grad: the fast constructor for op results."""
    if data.__class__ is not np.ndarray and isinstance(data, np.generic):
        data = np.asarray(data)
    t = _new(Tensor)
    t._data = data
    t._st = None
    t._rg = False
    t._grad = None
    t._bw = None
    t._prev = None
    return t


def node(data: Any, backward: Any, inputs: tuple) -> Tensor:
    """A non-leaf tensor over `data` recorded with its backward closure and its tensor inputs."""
    if data.__class__ is not np.ndarray and isinstance(data, np.generic):
        data = np.asarray(data)
    t = _new(Tensor)
    t._data = data
    t._st = None
    t._rg = True
    t._grad = None
    t._bw = backward
    t._prev = inputs
    t._seq = _next_seq()
    return t


def view_of(source: Tensor, data: Any, backward: Any) -> Tensor:
    """A tensor over `data`, an array viewing `source`'s memory, recorded when `source` needs grad."""
    out = node(data, backward, (source,)) if source._rg and MODE.enabled else wrap(data)
    aliasing.link(source, out)
    return out
