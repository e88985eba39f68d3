"""Primitive: one array operation with its derivative, defined once for eager autograd and for framework.compile.

tinygrad's lesson: a small set of primitive ops, everything else composed from
them. Each Primitive here is that set's unit, in micrograd's shape (forward and
backward side by side), but on raw arrays rather than Tensors:

- `forward(*args) -> array`: args are arrays (NumPy or CuPy) and constants
  (scalars, axes, shapes, dtypes). With `out=True` it also takes `out=`, an
  array of the result's shape and dtype to write into (ufunc style).
- `backward(needs, args, out, g) -> tuple`: the gradient of each argument given
  the output's gradient `g`; None exactly where `needs[i]` is false (constants,
  tensors without grad), so an argument the output does not depend on is a
  constant, not a tensor. It only reads `args` and `out`, never writes them.
- `shape(*shapes) -> tuple`: the output shape from the arguments, each array
  replaced by its shape (whose entries may be symbolic sizes); the compiler's
  dynamic shapes use it, nothing else does. None where the shape depends on
  values (boolean masks): a dynamic capture then fixes the sizes it reads.
- `infix`: for ops that are a Python operator on arrays ("{0} + {1}"), the
  expression the compiler writes instead of a call: NumPy's operators skip the
  ufunc call's argument parsing, and on NumPy scalars (a loss's tail) they are
  several times faster. The same operation, so the same values.
- `grad_infix`: where each argument's gradient is an expression of the
  output's gradient `{g}`, the arguments (`{0}`, `{1}`) and `{out}`, those
  expressions, valid where the argument has the output's shape (no
  broadcasting to undo). `backward` is then generated from them
  (`_util.expression_primitive`), and the compiler, where it knows the shapes,
  writes them inline instead of a call: one definition, the same values.
- `saves`: for ops whose backward needs intermediates of the forward (a
  convolution's patch matrix), true. Forward then takes `save=`: with
  `save=True` it returns `(result, saved)`, and backward is called as
  `backward(needs, args, out, g, saved)`; without it, it returns the result
  alone and keeps nothing. Eager autograd and the compiler's replay both hold
  `saved` exactly as long as the backward that reads it, so a forward may
  hand out reusable buffers and take them back when `saved` is dropped.
- `grad_inline(shapes, constants)`: for gradients whose expression depends on
  the static shapes (a slice that selects everything is a reshape), the
  expressions for these shapes (each array argument's shape in `shapes`, each
  other argument in `constants`, None in the other tuple), in grad_infix's
  form, or None. The compiler writes them inline where it knows every shape;
  `backward` takes the same path for the same shapes.

`apply` is the eager op: it runs forward and records `partial(backward, needs,
args, out)` (plus `saved`) as the node's backward, with all arguments (constants too) as
`_prev`; the autograd engine skips the None gradients. `framework.compiler`
records the same primitives while it captures a function and replays their
forward and backward as flat array programs, so a primitive's math exists once.
What it costs eager: one hook check and one partial per op, no more than the
closure each op built before.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, Optional, Tuple

from .. import aliasing
from ..device import array_module
from ..grad_mode import MODE
from ..tensor import Tensor, node, wrap
from ..tracing import HOOK


class Primitive:
    """An array operation, its derivative and its shape rule (see the module docstring)."""

    __slots__ = ("name", "forward", "backward", "shape", "out", "view", "saves", "infix", "grad_infix", "grad_inline")

    def __init__(self, name: str, forward: Callable[..., Any], backward: Optional[Callable[..., tuple]] = None, *,
                 shape: Optional[Callable[..., tuple]], out: bool = False, view: Any = False, saves: bool = False,
                 infix: Optional[str] = None, grad_infix: Optional[Tuple[Optional[str], ...]] = None,
                 grad_inline: Optional[Callable[[tuple, tuple], Optional[Tuple[Optional[str], ...]]]] = None) -> None:
        self.name = name
        self.forward = forward
        self.backward = backward
        self.shape = shape
        self.infix = infix
        self.grad_infix = grad_infix
        self.grad_inline = grad_inline
        self.out = out      # forward accepts out= (the compiler preallocates the result)
        self.view = view    # the result views the first argument's memory: True, or "maybe" (a reshape may copy)
        self.saves = saves  # forward(..., save=True) returns (result, saved) and backward takes saved last

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"


def apply(prim: Primitive, *args: Any) -> Tensor:
    """Run `prim` on tensors and constants as an eager op (reported to a running capture, if any)."""
    hook = HOOK.current
    if hook is not None:
        return hook.apply(prim, args)
    return run(prim, args)


def run(prim: Primitive, args: tuple) -> Tensor:
    """The eager op: forward on the arrays, and a backward node when a tensor argument needs grad."""
    arrays, needs, record = [], [], False
    for a in args:  # one pass (a loop is quicker here than two comprehensions)
        if isinstance(a, Tensor):
            arrays.append(a._data)
            needs.append(a._rg)
            record = record or a._rg
        else:
            arrays.append(a)
            needs.append(False)
    if not (record and MODE.enabled and prim.backward is not None):
        result = wrap(prim.forward(*arrays))
    elif prim.saves:
        out, saved = prim.forward(*arrays, save=True)
        result = node(out, partial(prim.backward, tuple(needs), arrays, out, saved=saved), args)
    else:
        out = prim.forward(*arrays)
        result = node(out, partial(prim.backward, tuple(needs), arrays, out), args)
    if prim.view:
        link_view(prim, args[0], result)
    return result


def link_view(prim: Primitive, source: Tensor, result: Tensor) -> None:
    """Put a result that views its source's memory in the source's alias group (see framework.aliasing)."""
    if prim.view is True or array_module(source._data).may_share_memory(result._data, source._data):
        aliasing.link(source, result)


# ---- shape rules shared by several primitives -------------------------------------------------------------

def same_shape(x: tuple, *constants: Any) -> tuple:
    """The shape of the first argument (element-wise ops)."""
    return x


def broadcast_shape(*shapes: Any) -> tuple:
    """NumPy broadcasting of the arguments' shapes (constants count as scalars)."""
    shapes = [s for s in shapes if isinstance(s, tuple)]
    ndim = max((len(s) for s in shapes), default=0)
    out: list = []
    for axis in range(ndim):
        dim: Any = 1
        for s in shapes:
            d = s[axis - ndim + len(s)] if axis - ndim + len(s) >= 0 else 1
            if d is dim or (d.__class__ is int and d == 1):
                continue
            if dim.__class__ is int and dim == 1:
                dim = d
            elif d != dim:
                raise ValueError(f"shapes {shapes} do not broadcast")
        out.append(dim)
    return tuple(out)


def reduced_shape(x: tuple, axes: Optional[tuple], keepdims: bool) -> tuple:
    """The shape after reducing `axes` (None: all) of a shape."""
    if axes is None:
        return (1,) * len(x) if keepdims else ()
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(x))
    return tuple(n for i, n in enumerate(x) if i not in axes)


def product(dims: Any) -> Any:
    """The product of sizes (symbolic when one is)."""
    return math.prod(dims, start=1)
