"""Guards: what a captured graph assumed about a call, checked before each replay (TorchDynamo's guards).

For each tensor argument: class, device, dtype, requires_grad, ndim, sizes and
strides (a dynamic size is a symbol bound on first sight, later sizes a
relation to it, `y.size(0) == x.size(0)`). For each Python scalar argument:
its value; for any other object: its identity. The grad mode. For state the
trace read by reference (parameters, a global tensor): the same tensor over the
same array. For the modules it ran: nn.Module's `Version.count`, and only when
that moved, a comparison of their attributes with a snapshot (scalar values,
tensor and submodule identities), so a changed flag or a swapped layer
recompiles while an unrelated module being built does not. For the compiled
function's globals and closure cells (and those of the user functions it
called): scalar values and object identities.

What is not guarded, because a trace that runs Python rather than reading its
bytecode cannot see where a value came from: attributes of plain objects (not
modules) and closure cells of the functions the call reaches; such values are
baked into the graph, so pass what changes as an argument. Likewise a list
attribute changed in place (rather than assigned) goes unnoticed.

Each guard is a Clause: setup statements, a condition, a readable description
("x: shape (4, 3)") and how to show the actual value. replay.py compiles the
clauses into the front of the replay function, so a call that passes them all
costs one straight-line run of comparisons; the same clauses, evaluated one by
one, say which guard failed and why.
"""
from __future__ import annotations

import inspect
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np

from ..device import device_of
from ..nn.module import Module, Version
from ..tensor import Tensor

SCALARS = (int, float, bool, str, type(None), complex)


@dataclass
class Clause:
    """One guard: `setup` lines, then `condition` must be true; `actual` is an expression shown on failure."""

    condition: str
    description: str
    actual: str = ""
    setup: Tuple[str, ...] = ()


@dataclass
class Leaf:
    """One argument of the call, flattened: where it is, its readable name, and what it is."""

    path: tuple
    name: str
    value: Any

    def code(self) -> str:
        """Python source that reads this argument from `args` and `kwargs`."""
        root, *steps = self.path
        return root + "".join(f"[{step!r}]" for step in steps)


def flatten_call(fn: Callable, args: tuple, kwargs: dict) -> Tuple[List[Leaf], List[Clause]]:
    """The call's arguments as leaves (tensors, arrays, scalars, objects) and the clauses on their structure."""
    names = _parameter_names(fn, len(args))
    leaves: List[Leaf] = []
    clauses = [Clause(f"len(args) == {len(args)}", f"called with {len(args)} positional arguments", "len(args)"),
               Clause(f"kwargs.keys() == {set(kwargs)!r}" if kwargs else "not kwargs",
                      f"keyword arguments {sorted(kwargs)}", "sorted(kwargs)")]
    for i, value in enumerate(args):
        _flatten(("args", i), names[i], value, leaves, clauses)
    for key, value in kwargs.items():
        _flatten(("kwargs", key), key, value, leaves, clauses)
    return leaves, clauses


def _parameter_names(fn: Callable, count: int) -> List[str]:
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i].name if i < len(params) else f"args[{i}]" for i in range(count)]


def _flatten(path: tuple, name: str, value: Any, leaves: List[Leaf], clauses: List[Clause]) -> None:
    leaf = Leaf(path, name, value)
    code = leaf.code()
    if value.__class__ in (tuple, list) and not isinstance(value, Tensor):
        clauses.append(Clause(f"{code}.__class__ is {value.__class__.__name__} and len({code}) == {len(value)}",
                              f"{name}: {value.__class__.__name__} of {len(value)}", f"{code}"))
        for i, item in enumerate(value):
            _flatten(path + (i,), f"{name}[{i}]", item, leaves, clauses)
    elif value.__class__ is dict and all(isinstance(k, (str, int)) for k in value):
        clauses.append(Clause(f"{code}.__class__ is dict and {code}.keys() == {set(value)!r}",
                              f"{name}: dict with keys {sorted(value, key=str)}", f"sorted({code})"))
        for key, item in value.items():
            _flatten(path + (key,), f"{name}[{key!r}]", item, leaves, clauses)
    else:
        leaves.append(leaf)


@dataclass
class Guards:
    """The clauses of one captured graph, in the order the replay function checks them."""

    clauses: List[Clause] = field(default_factory=list)
    namespace: Dict[str, Any] = field(default_factory=dict)   # objects the conditions refer to by name

    def constant(self, value: Any, hint: str = "k") -> str:
        """A name for `value` in the generated code (objects are compared by identity, never copied)."""
        name = f"{hint}{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def add(self, condition: str, description: str, actual: str = "", setup: Iterable[str] = ()) -> None:
        self.clauses.append(Clause(condition, description, actual, tuple(setup)))

    def descriptions(self) -> List[str]:
        return [c.description for c in self.clauses]


def tensor_clauses(guards: Guards, tensor_code: str, array_var: str, tensor_var: str, name: str, value: Any,
                   sym_shape: Optional[tuple]) -> None:
    """Guards on a tensor (or ndarray) argument; binds `tensor_var` and `array_var` for the replay code."""
    is_tensor = isinstance(value, Tensor)
    array = value._data if is_tensor else value
    cls = guards.constant(value.__class__, "cls")
    guards.add(f"{tensor_var}.__class__ is {cls}", f"{name}: class {value.__class__.__name__}",
               f"{tensor_var}.__class__.__name__", (f"{tensor_var} = {tensor_code}",))
    array_cls = guards.constant(array.__class__, "cls")
    device_test = f"{array_var}.__class__ is {array_cls}"
    if not isinstance(array, np.ndarray):  # CuPy: the class, then the device index
        device_test += f" and {array_var}.device.id == {array.device.id}"
    guards.add(device_test, f"{name}: device {device_of(array)}", f"{array_var}.__class__.__name__",
               (f"{array_var} = {tensor_var}._data" if is_tensor else f"{array_var} = {tensor_var}",))
    dtype = guards.constant(array.dtype, "dtype")
    guards.add(f"{array_var}.dtype is {dtype} or {array_var}.dtype == {dtype}", f"{name}: dtype {array.dtype}",
               f"{array_var}.dtype")
    if is_tensor:
        guards.add(f"{tensor_var}._rg is {value._rg}", f"{name}: requires_grad {value._rg}", f"{tensor_var}._rg")
    guards.add(f"{array_var}.ndim == {array.ndim}", f"{name}: ndim {array.ndim}", f"{array_var}.ndim")
    if sym_shape is None or all(d.__class__ is int for d in sym_shape):
        guards.add(f"{array_var}.shape == {tuple(array.shape)!r}", f"{name}: shape {tuple(array.shape)}",
                   f"{array_var}.shape")
        strides = tuple(s // array.itemsize for s in array.strides)
        guards.add(f"{array_var}.strides == {tuple(array.strides)!r}", f"{name}: stride {strides}",
                   f"tuple(s // {array.itemsize} for s in {array_var}.strides)")
        return
    shown = "(" + ", ".join(str(d) for d in sym_shape) + ("," if len(sym_shape) == 1 else "") + ")"
    sizes = " and ".join(f"{array_var}.shape[{i}] == {d}" for i, d in enumerate(sym_shape) if d.__class__ is int)
    guards.add(sizes or "True", f"{name}: shape {shown}", f"{array_var}.shape")
    guards.add(f"{array_var}.flags.c_contiguous", f"{name}: contiguous", f"{array_var}.strides")


@dataclass
class ModuleSnapshot:
    """The attributes of every module a capture ran, to compare after `Version.count` moved."""

    modules: List[Tuple[str, Module, Dict[str, Any]]] = field(default_factory=list)
    version: int = 0

    def add(self, name: str, root: Module) -> None:
        """Snapshot `root` and its descendants (once each)."""
        known = {id(m) for _, m, _ in self.modules}
        for sub_name, module in root.named_modules(prefix=name):
            if id(module) not in known:
                known.add(id(module))
                self.modules.append((sub_name, module, _attributes(module)))
        self.version = Version.count

    def difference(self) -> Optional[str]:
        """What changed since the snapshot ('self.fc.weight: another object'), or None."""
        for name, module, before in self.modules:
            now = _attributes(module)
            for key in sorted(set(before) | set(now)):
                if key not in now or key not in before:
                    return f"{name}.{key}: {'removed' if key in before else 'added'}"
                was, got = before[key], now[key]
                if was.__class__ is _Identity:
                    if was.obj is not got.obj:
                        return f"{name}.{key}: another object ({type(got.obj).__name__})"
                elif was != got:
                    return f"{name}.{key}: {was!r}, got {got!r}"
        return None

    def check(self) -> bool:
        """True when the modules are as snapshot (replay tests `Version.count == version` first, inline)."""
        if Version.count == self.version:
            return True
        if self.difference() is None:
            self.version = Version.count
            return True
        return False


class _Identity:
    """An attribute compared by identity (tensors, modules, any object that is not plain data)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj


def _attributes(module: Module) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in vars(module).items():
        if key in ("_parameters", "_buffers", "_modules"):
            for sub, item in value.items():
                out[f"{key}[{sub!r}]"] = _Identity(item)
        elif key != "_non_persistent":
            out[key] = plain(value) if is_plain(value) else _Identity(value)
    return out


def is_plain(value: Any) -> bool:
    """Plain data guarded by value: scalars and tuples, lists and dicts of them."""
    if value.__class__ in SCALARS:
        return True
    if value.__class__ in (tuple, list):
        return all(is_plain(v) for v in value)
    if value.__class__ is dict:
        return all(is_plain(k) and is_plain(v) for k, v in value.items())
    return False


def plain(value: Any) -> Any:
    """A copy of plain data that later mutation of the original does not change."""
    if value.__class__ in (tuple, list):
        return value.__class__(plain(v) for v in value)
    if value.__class__ is dict:
        return {k: plain(v) for k, v in value.items()}
    return value


def value_clause(guards: Guards, code: str, name: str, value: Any) -> None:
    """A guard on something the trace read: plain data by value (and type), anything else by identity."""
    if is_plain(value):
        expected, cls = guards.constant(plain(value), "val"), guards.constant(value.__class__, "cls")
        guards.add(f"{code}.__class__ is {cls} and {code} == {expected}", f"{name}: == {value!r}", code)
    elif not isinstance(value, types.ModuleType):
        obj = guards.constant(value, "obj")
        guards.add(f"{code} is {obj}", f"{name}: the same {type(value).__name__} (id {id(value):#x})",
                   f"type({code}).__name__")


def free_names(code: types.CodeType) -> List[str]:
    """The global names a code object (and the functions and comprehensions nested in it) reads."""
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += free_names(const)
    return list(dict.fromkeys(names))


def check_lines(guards: Guards) -> List[str]:
    """The guard clauses as the first lines of a generated function: `return MISS` unless all hold.

    Conditions between two setup lines are joined into one `and` chain (one jump where they hold).
    """
    lines = ["try:"]
    chain: List[str] = []
    for clause in guards.clauses:
        if clause.setup and chain:
            lines.append(f"    if not ({' and '.join(chain)}): return MISS")
            chain = []
        lines += [f"    {line}" for line in clause.setup]
        chain.append(f"({clause.condition})")
    if chain:
        lines.append(f"    if not ({' and '.join(chain)}): return MISS")
    return lines + ["except Exception:", "    return MISS"]


def first_failure(guards: Guards, args: tuple, kwargs: dict) -> str:
    """The first guard a call fails, with the value it found (the slow path, for logs and recompiles)."""
    env: Dict[str, Any] = dict(guards.namespace, args=args, kwargs=kwargs)
    for clause in guards.clauses:
        try:
            for line in clause.setup:
                exec(line, env)  # noqa: S102 - guard code this package generated
            if not eval(clause.condition, env):  # noqa: S307
                actual = eval(clause.actual, env) if clause.actual else "false"  # noqa: S307
                return f"{clause.description}, got {actual}"
        except Exception as exc:  # noqa: BLE001 - a guard that cannot be evaluated fails
            return f"{clause.description} (could not check: {type(exc).__name__}: {exc})"
    return "no guard failed"
