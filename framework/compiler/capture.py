"""Capture: run the function once, eagerly, with the tensor library reporting to a Recorder.

The Recorder is what `framework.tracing.HOOK` holds during the run. Each
primitive op computes as usual (the caller gets eager results and eager
autograd) and is appended to the Graph with its arguments resolved to values:
the call's tensors (inputs), tensors of the modules it ran or of its globals
(state, read by reference), results of earlier nodes. Anything else breaks the
graph, with a reason and the user line that caused it:

- a value handed to Python (`.item()`, `bool()`, `.numpy()`, `.tolist()`,
  `.data_array`, `repr`, `.backward()`): Python may branch on it;
- a tensor from outside the captured ops (made by an op that is not a
  primitive, e.g. max_pool2d, or by the RNG), and an in-place update (a tensor the
  function builds from Python numbers, `framework.tensor([0, 2])`, `zeros(3)`,
  is a constant of the graph instead);
- a call from user code into non-framework code (NumPy, `random`, `print`, a
  library, the framework's RNG or optimizers), found with `sys.setprofile`;
  pure builtins (len, isinstance, math.*) are fine, and so are list/dict
  methods unless the container they change outlives the call;
- a module attribute assigned during the call, or a return value replay cannot
  rebuild (anything but tensors, numbers, strings, None and tuples, lists,
  dicts of them).

Without rewriting bytecode a break cannot resume replay mid-function; it cuts
the graph into segments instead, which segmented_replay.py replays while the function's
Python runs. What a capture costs: one eager run plus a profiler callback per
Python call, once per new guard set.
"""
from __future__ import annotations

import sys
import sysconfig
import types
import weakref
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import numpy as np

from ..grad_mode import MODE
from ..nn.module import Module, Version
from ..nn.parameter import Parameter
from ..ops.primitive import Primitive, run
from ..tensor import Tensor
from ..tracing import HOOK
from .graph import CONSTANT, EXTERNAL, INPUT, NODE, STATE, Break, Graph, Node, Ref, Value
from .guards import (SCALARS, Guards, Leaf, ModuleSnapshot, flatten_call, free_names, is_plain, tensor_clauses,
                     value_clause)
from .symbolic import ShapeEnv, Sym, concrete, has_sym, symbols_in


class GraphBreakError(RuntimeError):
    """Raised by `framework.compile(..., fullgraph=True)` where the graph would break."""


_MARKED: Dict[int, Tuple[Any, Set[int]]] = {}
"""id(tensor) -> (a weak reference to it, its dynamic dims); keyed by identity (tensors compare by value)."""


def mark_dynamic(tensor: Tensor, dim: int) -> None:
    """Capture `tensor`'s size along `dim` as a symbol, so one graph serves every size of it."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"mark_dynamic: expected a Tensor, got {type(tensor).__name__}")
    if not -tensor.ndim <= dim < tensor.ndim:
        raise IndexError(f"mark_dynamic: dim {dim} is out of range for a tensor with {tensor.ndim} dimensions")
    key = id(tensor)
    if key not in _MARKED or _MARKED[key][0]() is not tensor:
        _MARKED[key] = (weakref.ref(tensor, lambda _, key=key: _MARKED.pop(key, None)), set())
    _MARKED[key][1].add(dim % tensor.ndim)


def marked_dims(tensor: Any) -> Set[int]:
    """The dims mark_dynamic made dynamic on `tensor`."""
    entry = _MARKED.get(id(tensor))
    return entry[1] if entry is not None and entry[0]() is tensor else set()


# ---- which code is whose -----------------------------------------------------------------------------------

_LIBRARY_PATHS = tuple({p for key, p in sysconfig.get_paths().items() if key in ("stdlib", "platstdlib", "purelib",
                                                                                     "platlib")})
_TRUSTED = ("framework.tensor", "framework.ops", "framework.nn", "framework.distributions", "framework.grad_mode",
            "framework.tracing", "framework.dtypes", "framework.creation", "framework.device", "framework.autograd",
            "framework.compiler")
"""The tensor library: what its Python does to tensors reaches the Recorder through the hook."""
_APPLICATION = ("framework.algorithms", "framework.rl", "framework.runtime", "framework.train")
"""Framework code that is application code to the compiler: traced through, its calls checked."""
USER, TRUSTED, LIBRARY = "user", "trusted", "library"

_CONSTANT_MAKERS = {"tensor", "as_tensor", "zeros", "ones", "full", "arange"}
"""framework.creation functions whose result, from Python numbers and shapes, is the same every call."""
_PURE_BUILTINS = {"len", "isinstance", "issubclass", "min", "max", "abs", "sum", "all", "any", "sorted", "reversed",
                  "getattr", "hasattr", "iter", "next", "round", "divmod", "repr", "format", "hash", "callable",
                  "id", "__build_class__", "locals", "vars", "chr", "ord", "pow"}
_PURE_MODULES = {"math", "operator", "cmath", "_operator", "itertools", "functools", "_functools"}
_IMMUTABLE = (str, bytes, tuple, int, float, complex, bool, frozenset, range, slice, type(None))
_CONTAINERS = (list, dict, set)
_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "add", "discard",
             "sort", "reverse", "popitem", "__setitem__", "__delitem__", "move_to_end", "__iadd__", "__ior__"}


def code_kind(module_name: str, filename: str) -> str:
    """USER (traced and checked), TRUSTED (the tensor library) or LIBRARY (non-framework code: a break)."""
    if module_name.startswith(_APPLICATION):
        return USER
    if module_name == "framework" or module_name.startswith(_TRUSTED):
        return LIBRARY if module_name == "framework.nn.init" else TRUSTED
    if module_name.startswith(("framework.", "sharing", "cuda_ipc")):
        return LIBRARY
    if filename.startswith("<frozen") or filename.startswith(_LIBRARY_PATHS):
        return LIBRARY
    return USER


# ---- the Recorder ------------------------------------------------------------------------------------------

class Recorder:
    """The tracing hook of one capture (see the module docstring): `run()` fills `graph`, `guards` and `env`."""

    def __init__(self, fn: Callable, owner: Optional[Module], dynamic: bool, fullgraph: bool) -> None:
        self.fn, self.owner, self.dynamic, self.fullgraph = fn, owner, dynamic, fullgraph
        self.graph = Graph()
        self.guards = Guards()
        self.env = ShapeEnv()
        self.snapshot = ModuleSnapshot()
        self.vids: Dict[int, int] = {}          # id(tensor) -> value
        self.keep: List[Any] = []               # the tensors in `vids`, alive so their ids stay theirs
        self.input_arrays: Dict[int, int] = {}  # id(ndarray argument) -> value
        self.state_names: Dict[int, str] = {}   # id(tensor) -> readable name, for state the call may read
        self.kinds: Dict[Any, str] = {}         # code object -> USER / TRUSTED / LIBRARY
        self.user_codes: Set[Any] = set()
        self.mutated: Dict[int, Any] = {}       # containers user code changed
        self.late_breaks: List[str] = []        # found by the profiler, raised at the end under fullgraph
        self.duck: Dict[int, Sym] = {}          # a dynamic size -> its symbol: equal sizes share one
        self.making: Set[Any] = set()           # frames of framework.creation calls that make a constant
        self.constants: Dict[int, Tensor] = {}  # id -> tensors those calls returned
        self.version = Version.count

    # ---- running ---------------------------------------------------------------------------------------
    def run(self, args: tuple, kwargs: dict) -> Any:
        """Call the function eagerly under this recorder; the eager result."""
        self.leaves, structure = flatten_call(self.fn if self.owner is None else self.owner.forward, args, kwargs)
        self.guards.clauses.extend(structure)
        for leaf in self.leaves:
            self._add_leaf(leaf)
        bound = self.owner if self.owner is not None else getattr(self.fn, "__self__", None)
        if isinstance(bound, Module):  # a module's forward, or a method of a module: its attributes are read
            self._add_module("self", bound)
        self._add_globals(self._code_and_globals())
        previous_hook, previous_profile = HOOK.current, sys.getprofile()
        HOOK.current = self
        sys.setprofile(self._profile)
        try:
            result = self.fn(*args, **kwargs)
        finally:
            sys.setprofile(previous_profile)
            HOOK.current = previous_hook
        self.graph.output = self._output(result)
        self._check_side_effects(result)
        if self.fullgraph and self.late_breaks:
            raise GraphBreakError(self.late_breaks[0])
        self._finish_guards()
        return result

    def _code_and_globals(self) -> tuple:
        target = self.owner.forward if self.owner is not None else self.fn
        target = getattr(target, "__func__", target)
        return getattr(target, "__code__", None), getattr(target, "__globals__", {}), \
            getattr(target, "__closure__", None)

    # ---- values ----------------------------------------------------------------------------------------
    def _value(self, seen: Any, kind: str, name: str, **extra: Any) -> int:
        """Register `seen` (a tensor or an ndarray argument) as a new value of the graph."""
        array = seen._data if isinstance(seen, Tensor) else seen
        vid = self.graph.add_value(Value(kind, name, array.dtype, tuple(array.shape),
                                         isinstance(seen, Tensor) and seen._rg, **extra))
        self.vids[id(seen)] = vid
        self.keep.append(seen)
        return vid

    def _add_leaf(self, leaf: Leaf) -> None:
        value = leaf.value
        if isinstance(value, (Tensor, np.ndarray)):
            seen = self.vids.get(id(value))
            if seen is not None:  # the same tensor twice: the graph reads it once, so the call must alias too
                first = self.graph.values[seen]
                self.guards.add(f"{leaf.code()} is {first.path}", f"{leaf.name} is {first.name} (the same tensor)",
                                "'another tensor'")
                return
            vid = self._value(value, INPUT, leaf.name, path=leaf.code(), tensor=value,
                              sym_shape=self._input_shape(leaf))
            if isinstance(value, np.ndarray):
                self.input_arrays[id(value)] = vid
        elif isinstance(value, Module):
            value_clause(self.guards, leaf.code(), leaf.name, value)
            self._add_module(leaf.name, value)
        else:
            value_clause(self.guards, leaf.code(), leaf.name, value)

    def _input_shape(self, leaf: Leaf) -> Optional[tuple]:
        """The input's shape with a symbol for each dynamic dim (sizes 0 and 1 stay fixed), or None."""
        value = leaf.value
        marked = marked_dims(value)
        if not (self.dynamic or marked) or isinstance(value, np.ndarray):
            return None
        shape: list = []
        for dim, size in enumerate(value._data.shape):
            if (self.dynamic or dim in marked) and size >= 2:
                sym = self.duck.get(size)
                if sym is None:
                    sym = self.duck[size] = self.env.symbol(size, f"{leaf.name}.size({dim})")
                shape.append(sym)
            else:
                shape.append(size)
        return tuple(shape)

    def _add_module(self, name: str, module: Module) -> None:
        if any(m is module for _, m, _ in self.snapshot.modules):
            return
        self.snapshot.add(name, module)
        for sub_name, sub in module.named_modules(prefix=name):
            for attr, value in vars(sub).items():
                if isinstance(value, Tensor):
                    self.state_names.setdefault(id(value), f"{sub_name}.{attr}" if sub_name else attr)
            for registry in ("_parameters", "_buffers"):
                for attr, value in getattr(sub, registry).items():
                    if value is not None:
                        self.state_names.setdefault(id(value), f"{sub_name}.{attr}" if sub_name else attr)

    def _add_globals(self, found: tuple) -> None:
        """Guards on what the function's code reads from its globals and closure cells."""
        code, globals_, closure = found
        if code is None:
            return
        self.user_codes.add(code)
        self._guard_globals(code, globals_)
        for name, cell in zip(code.co_freevars, closure or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            self._guard_read(f"{self.guards.constant(cell, 'cell')}.cell_contents", name, value)

    def _guard_globals(self, code: Any, globals_: dict) -> None:
        space = None
        for name in free_names(code):
            if name in globals_:
                space = space or self.guards.constant(globals_, "globals")
                self._guard_read(f"{space}[{name!r}]", f"G[{name!r}]", globals_[name])

    def _guard_read(self, code: str, name: str, value: Any) -> None:
        if isinstance(value, (types.ModuleType, type)) or callable(value) and not isinstance(value, Module):
            return  # modules, classes and functions: code, not data
        value_clause(self.guards, code, name, value)
        if isinstance(value, Module):
            self._add_module(name, value)
        elif isinstance(value, Tensor):
            self.state_names.setdefault(id(value), name)

    def _resolve(self, tensor: Tensor) -> int:
        """The value of a tensor the graph has not seen: an ndarray argument, state, a constant, or (a break) an
        external."""
        vid = self.input_arrays.get(id(tensor._data))
        if vid is not None:
            return vid
        if self.constants.get(id(tensor)) is tensor and not tensor._rg:
            return self._value(tensor, CONSTANT, f"constant {len(self.graph.values)}", tensor=tensor._data.copy())
        name = self.state_names.get(id(tensor))
        if name is None and isinstance(tensor, Parameter):
            name = f"a Parameter of shape {tuple(tensor._data.shape)}"
        if name is not None:
            return self._value(tensor, STATE, name, tensor=tensor)
        if tensor._bw is not None:
            made_by = getattr(getattr(tensor._bw, "func", tensor._bw), "__name__", "an op").lstrip("_")
            reason = f"a tensor computed by {made_by.replace('_backward', '')}, which is not a captured primitive"
        else:
            reason = ("a tensor from outside the captured ops (created inside the function, or made by an op "
                      "that is not a captured primitive)")
        self.break_(reason)
        return self._value(tensor, EXTERNAL, f"external {len(self.graph.values)}")

    # ---- the hook ------------------------------------------------------------------------------------
    def apply(self, prim: Primitive, args: tuple) -> Tensor:
        refs = []
        symbolic = False
        for a in args:
            if isinstance(a, Tensor):
                vid = self.vids.get(id(a))
                refs.append(Ref(self._resolve(a) if vid is None else vid))
            else:
                symbolic = symbolic or has_sym(a)
                refs.append(a)
        result = run(prim, tuple(concrete(a) for a in args) if symbolic else args)
        vid = self._value(result, NODE, f"v{len(self.graph.values)}", tensor=result,
                          sym_shape=self._node_shape(prim, refs, result))
        self.graph.add_node(Node(prim, tuple(refs), vid))
        return result

    def _node_shape(self, prim: Primitive, refs: list, result: Tensor) -> Optional[tuple]:
        """The result's shape in symbols (its primitive's shape rule), when a dynamic input flows into it."""
        shapes = [self.graph.values[r.vid].sym_shape or self.graph.values[r.vid].shape if isinstance(r, Ref)
                  else r for r in refs]
        if not any(symbols_in(s) for s, r in zip(shapes, refs) if isinstance(r, Ref)) \
                and not any(has_sym(r) for r in refs if not isinstance(r, Ref)):
            return None
        try:
            shape = tuple(prim.shape(*shapes)) if prim.shape is not None else None
        except Exception:  # noqa: BLE001 - a rule that cannot follow the symbols: fix them below
            shape = None
        concrete_shape = tuple(result._data.shape)
        if shape is None or tuple(concrete(shape)) != concrete_shape:
            for s in shapes:
                for sym in symbols_in(s if isinstance(s, tuple) else None):
                    self.env.fix(sym, f"{prim.name} has no shape rule for symbolic sizes")
            return None
        return shape

    def shape(self, tensor: Tensor) -> tuple:
        vid = self.vids.get(id(tensor))
        sym_shape = None if vid is None else self.graph.values[vid].sym_shape
        return tensor._data.shape if sym_shape is None else sym_shape

    def escape(self, tensor: Any, what: str) -> None:
        if what == "an in-place update":
            self.break_(f"an in-place update of a tensor ({tensor.__class__.__name__} of shape "
                        f"{tuple(tensor._data.shape)})")
        else:
            self.break_(f"{what} hands a tensor's value to Python")

    def module_call(self, module: Module) -> None:
        self._add_module(f"{type(module).__name__}@{id(module):#x}", module)

    def break_(self, reason: str, late: bool = False) -> None:
        where = user_location(self)
        message = f"{reason} at {where}" if where else reason
        if self.fullgraph and not late:
            raise GraphBreakError(f"graph break: {message}")
        if late:
            self.late_breaks.append(f"graph break: {message}")
        self.graph.breaks.append(Break(reason, where, len(self.graph.nodes)))

    # ---- watching Python calls -----------------------------------------------------------------------
    def kind(self, frame: Any) -> str:
        code = frame.f_code
        kind = self.kinds.get(code)
        if kind is None:
            kind = self.kinds[code] = USER if code in self.user_codes else code_kind(
                frame.f_globals.get("__name__", ""), code.co_filename)
        return kind

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            kind = self.kind(frame)
            if kind == USER and frame.f_code not in self.user_codes:
                self.user_codes.add(frame.f_code)
                self._guard_globals(frame.f_code, frame.f_globals)
            if frame.f_code.co_name in _CONSTANT_MAKERS and frame.f_globals.get("__name__") == "framework.creation" \
                    and all(is_plain(v) or isinstance(v, (np.dtype, type)) for v in frame.f_locals.values()):
                self.making.add(frame)  # from Python numbers and shapes alone (an LSTM's zero state, say)
            caller = frame.f_back
            if kind == LIBRARY and caller is not None and self.kind(caller) == USER:
                name = frame.f_globals.get("__name__", "?")
                self.break_(f"a call into non-framework code: {name}.{frame.f_code.co_qualname}", late=True)
        elif event == "return" and frame in self.making:
            self.making.discard(frame)
            if isinstance(arg, Tensor):
                self.constants[id(arg)] = arg
        elif event == "c_call" and self.kind(frame) == USER:
            self._check_builtin(arg)

    def _check_builtin(self, fn: Any) -> None:
        owner = getattr(fn, "__self__", None)
        name = getattr(fn, "__name__", "?")
        if isinstance(owner, types.ModuleType):
            if owner.__name__ in _PURE_MODULES or (owner.__name__ == "builtins" and name in _PURE_BUILTINS):
                return
        elif isinstance(owner, _IMMUTABLE):
            return
        elif isinstance(owner, _CONTAINERS):
            if name in _MUTATORS:
                self.mutated[id(owner)] = owner
            return
        where = owner.__name__ if isinstance(owner, types.ModuleType) else type(owner).__name__
        self.break_(f"a call into non-framework code: {where}.{name}", late=True)

    # ---- the end of the call ---------------------------------------------------------------------------
    def _output(self, value: Any) -> Any:
        """The return structure with Refs for tensors; a break for what replay cannot rebuild."""
        if isinstance(value, Tensor):
            vid = self.vids.get(id(value))
            if vid is None or self.graph.values[vid].kind == EXTERNAL:
                self.break_("returns a tensor made outside the captured ops", late=True)
                return None
            return Ref(vid)
        if value.__class__ in SCALARS:
            return value
        if isinstance(value, (tuple, list)):
            items = [self._output(v) for v in value]
            return (value.__class__, items)
        if value.__class__ is dict:
            return (dict, {k: self._output(v) for k, v in value.items()})
        self.break_(f"returns a {type(value).__name__}, which replay cannot rebuild", late=True)
        return None

    def _check_side_effects(self, result: Any) -> None:
        if Version.count != self.version:
            self.break_("assigns Module attributes (or builds modules) during the call", late=True)
        returned = {id(v) for v in _containers(result)}
        mutated = list(self.mutated.values())
        self.mutated.clear()
        for container in mutated:  # referenced by `mutated`, `container` and getrefcount's argument alone: dead
            if id(container) not in returned and sys.getrefcount(container) > 3:
                self.break_(f"changes a {type(container).__name__} that outlives the call", late=True)

    def _finish_guards(self) -> None:
        guards = self.guards
        state_clauses = []
        for vid, value in enumerate(self.graph.values):
            if value.kind == INPUT:
                tensor_clauses(guards, value.path, f"v{vid}", f"t{vid}", value.name, value.tensor, value.sym_shape)
                self._bind_symbols(vid, value)
            elif value.kind == STATE:
                tensor, array = guards.constant(value.tensor, "st"), guards.constant(value.tensor._data, "arr")
                state_clauses.append((f"{tensor}._data is {array}", f"{value.name}: the same array (not replaced)",
                                      "'another array'"))
                if MODE.enabled:  # under no_grad a parameter's flag changes nothing the graph computes
                    state_clauses.append((f"{tensor}._rg is {value.tensor._rg}",
                                          f"{value.name}: requires_grad {value.tensor._rg}", f"{tensor}._rg"))
        for condition, description in self.env.guards:
            guards.add(condition, description, "(" + ", ".join(
                f"{name}={name}" for name in self.env.sources if name in condition) + ")")
        for condition, description, actual in state_clauses:
            guards.add(condition, description, actual)
        guards.add(f"GRAD_MODE.enabled is {MODE.enabled}", f"grad mode: {'enabled' if MODE.enabled else 'disabled'}",
                   "GRAD_MODE.enabled")
        guards.namespace["GRAD_MODE"] = MODE
        if self.snapshot.modules:
            snapshot = guards.constant(self.snapshot, "modules")
            names = ", ".join(name for name, _, _ in self.snapshot.modules[:3])
            more = len(self.snapshot.modules) - 3
            guards.add(f"MODULE_VERSION.count == {snapshot}.version or {snapshot}.check()",
                       f"modules unchanged: {names}" + (f" and {more} more" if more > 0 else ""),
                       f"{snapshot}.difference()")
            guards.namespace["MODULE_VERSION"] = Version

    def _bind_symbols(self, vid: int, value: Value) -> None:
        """Bind each symbol on its first dim; later dims with it become relations ('y.size(0) == x.size(0)')."""
        for dim, size in enumerate(value.sym_shape or ()):
            if not isinstance(size, Sym):
                continue
            source = f"{value.name}.size({dim})"
            if self.env.sources[size.expr] == source:
                self.guards.clauses[-1].setup += (f"{size.expr} = v{vid}.shape[{dim}]",)
            else:
                self.guards.add(f"v{vid}.shape[{dim}] == {size.expr}", f"{source} == {self.env.sources[size.expr]}",
                                f"v{vid}.shape[{dim}]")


def _containers(value: Any) -> List[Any]:
    """The lists and dicts inside a return value (they are rebuilt by replay, so changing them is fine)."""
    if isinstance(value, (tuple, list)):
        return [value] + [c for v in value for c in _containers(v)]
    if isinstance(value, dict):
        return [value] + [c for v in value.values() for c in _containers(v)]
    return []


def user_location(recorder: Optional[Recorder] = None) -> str:
    """'file:line in function' of the innermost user frame on the stack."""
    frame = sys._getframe(1)
    while frame is not None:
        kind = recorder.kind(frame) if recorder is not None else code_kind(frame.f_globals.get("__name__", ""),
                                                                           frame.f_code.co_filename)
        if kind == USER:
            return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    return ""
