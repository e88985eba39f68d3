"""Replay: a captured graph as generated Python, a flat list of array operations with no Tensor or closure per op.

For a graph without a break, `build_entry` writes one function that checks the
guards (guards.py), binds the input arrays, calls each node's primitive forward
on arrays (`v7 = F7(v3, v5, out=b7)`), and wraps only the outputs in Tensors.
The Python function itself never runs again while the guards hold.

Buffers. Each node whose primitive takes `out=` and whose result has at least
BUFFER_MIN elements writes into a preallocated buffer, except the outputs and
whatever they view (those get fresh arrays, so results of one call are never
overwritten by the next). Smaller results are allocated per call:
NumPy's allocator is as quick as `out=`'s argument parsing there, and 0-d
results stay NumPy scalars, whose arithmetic is several times faster than 0-d
arrays' (the loss's tail is all scalars). For the same reason a primitive that
is a Python operator is written as that operator. A dynamic graph allocates
per call (sizes change). A call takes a buffer set from the graph's pool (a new
one when the pool is empty: a call in another thread holds it, or a pending
backward) and gives it back when done, or, when its outputs need grad, when
its autograd node dies, since until then its backward may read the saved
buffers (a weakref callback). List pop and append are atomic, so calls from
several threads never share a set.

Backward. A call whose outputs need grad gets one autograd node for the whole
graph; each output's node routes its gradient into it (a Bundle keyed by value),
so the engine runs the graph's backward once with every output's gradient. The
backward is generated per set of outputs that received a gradient: a fixed list
of primitive backward calls (`r = B7(needs, (v3, v5), v7, g7)`) and sums where
paths join, returning the gradients of the inputs and parameters that need them.

On a GPU the same programs run on CuPy arrays, one kernel launch per node on the
current stream. What a GPU replay would add: since buffers are fixed and the
programs straight-line, capture each program once with CUDA stream capture
(cupy.cuda.Graph) and replay it as one graph launch (per size for dynamic
graphs), run it on a dedicated stream with an event recorded for the outputs so
the host only waits where it reads them, and keep the buffer sets in a
stream-ordered pool. None of that is needed for correctness, and testing it
needs a device.
"""
from __future__ import annotations

import math
import weakref
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import numpy as np

from .. import aliasing
from ..device import array_module
from ..tensor import node, wrap
from .graph import CONSTANT, INPUT, NODE, STATE, Graph, Ref
from .guards import Guards, check_lines, first_failure
from .symbolic import Sym, has_sym

MISS = object()
"""What a replay function returns when a guard fails."""

BUFFER_MIN = 1024
"""Results with fewer elements are not preallocated (see the module docstring)."""

_EMPTY = np.zeros(0, np.float32)


class Bundle(dict):
    """Gradients arriving at a graph's autograd node, by value id; the engine sums two bundles with `+`."""

    def __add__(self, other: "Bundle") -> "Bundle":
        merged = Bundle(self)
        for vid, grad in other.items():
            merged[vid] = merged[vid] + grad if vid in merged else grad
        return merged


def route(vid: int, grad: Any) -> tuple:
    """An output's backward: hand its gradient to the graph's node."""
    return (Bundle({vid: grad}),)


class Source:
    """Python source being generated, and the objects it names."""

    def __init__(self, namespace: Dict[str, Any]) -> None:
        self.lines: List[str] = []
        self.namespace = namespace

    def name(self, value: Any, hint: str) -> str:
        name = f"{hint}{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def constant(self, value: Any) -> str:
        """Source for a node's constant argument: a literal, a symbolic expression, or a name."""
        if value is None or value.__class__ in (bool, int, str) or (value.__class__ is float and math.isfinite(value)):
            return repr(value)
        if isinstance(value, Sym):
            return value.expr
        if has_sym(value):
            if value.__class__ is slice:
                return f"slice({self.constant(value.start)}, {self.constant(value.stop)}, {self.constant(value.step)})"
            items = ", ".join(self.constant(v) for v in value)
            return f"({items},)" if value.__class__ is tuple else f"[{items}]"
        return self.name(value, "c")

    def compile(self, name: str, signature: str) -> Callable:
        text = f"def {name}({signature}):\n" + "\n".join("    " + line for line in self.lines) + "\n"
        scope: Dict[str, Any] = {}
        exec(compile(text, f"<framework.compile {name}>", "exec"), self.namespace, scope)  # noqa: S102
        function = scope[name]
        function.source = text
        return function


def value_source(graph: Graph, arg: Any, src: Source) -> str:
    return f"v{arg.vid}" if isinstance(arg, Ref) else src.constant(arg)


def backward_function(graph: Graph, nodes: range, seeds: Tuple[int, ...], returns: Tuple[int, ...],
                      saved: Tuple[int, ...]) -> Callable:
    """`backward(saved, inputs, grads) -> tuple`: gradients of the `returns` values given those of the `seeds`.

    `saved` are the array values the program reads (in that order), `inputs`
    the tensors of the `returns` values, `grads` each seed's gradient. Values of
    state are named directly. A leaf input's gradient is accumulated into its
    `.grad` here, as the autograd engine would (one step less per parameter), and
    returned as None; any other input's gradient goes back to the engine.
    """
    src = Source({})
    if saved:
        src.lines.append("".join(f"{name}, " for name in saved_names(graph, saved)) + "= saved")
    src.lines += constant_lines(graph, src)
    live: Set[int] = set()
    for vid in seeds:  # a 0-d gradient as a NumPy scalar: the arithmetic after it is the scalar kind
        src.lines.append(f"g{vid} = grads[{vid}]" + ("[()]" if graph.values[vid].shape == () else ""))
        live.add(vid)
    for i in reversed(nodes):
        n = graph.nodes[i]
        if n.out not in live or n.prim.backward is None:
            continue
        needs = tuple(isinstance(a, Ref) and graph.values[a.vid].requires_grad for a in n.args)
        if not any(needs):
            continue
        grads = inline_grads(graph, n, needs, src)
        if grads is None:
            args = ", ".join(value_source(graph, a, src) for a in n.args)
            saved_slot = f", s{n.out}" if n.prim.saves else ""
            src.lines.append(f"r = {src.name(n.prim.backward, 'B')}({needs!r}, ({args},), v{n.out}, g{n.out}"
                             f"{saved_slot})")
            grads = [f"r[{j}]" for j in range(len(n.args))]
        for j, a in enumerate(n.args):
            if needs[j]:
                src.lines.append(f"g{a.vid} = g{a.vid} + ({grads[j]})" if a.vid in live else f"g{a.vid} = {grads[j]}")
                live.add(a.vid)
    for i, vid in enumerate(returns):
        if vid in live:
            src.lines += [f"t = inputs[{i}]", "if t._bw is None:", "    c = t._grad",
                          f"    if c is None: t._accumulate(g{vid})", f"    else: c._data += g{vid}",
                          f"    g{vid} = None"]
    src.lines.append("return (" + "".join(f"g{v}, " if v in live else "None, " for v in returns) + ")")
    return src.compile("backward", "saved, inputs, grads")


def inline_grads(graph: Graph, n: Any, needs: Tuple[bool, ...], src: Source) -> Optional[List[str]]:
    """The gradients of node `n`'s arguments as expressions, or None where a call is needed: its primitive's
    `grad_infix` where no argument that needs one is broadcast (equal sizes at capture are one size for every
    call: a dynamic capture gives them one symbol), else its `grad_inline` for shapes that are the same for
    every call (none symbolic)."""
    shape = graph.values[n.out].shape
    templates = n.prim.grad_infix
    if templates is None or any(need and graph.values[a.vid].shape != shape for a, need in zip(n.args, needs)):
        templates = None
        values = [graph.values[a.vid] if isinstance(a, Ref) else None for a in n.args]
        if n.prim.grad_inline is not None and all(v is None or v.sym_shape is None for v in values):
            templates = n.prim.grad_inline(tuple(None if v is None else v.shape for v in values),
                                           tuple(a if v is None else None for a, v in zip(n.args, values)))
    if templates is None or any(need and templates[j] is None for j, need in enumerate(needs)):
        return None
    args = [f"({value_source(graph, a, src)})" for a in n.args]
    return [template and template.format(*args, g=f"g{n.out}", out=f"v{n.out}") for template in templates]


def constant_lines(graph: Graph, src: Source) -> List[str]:
    """Bind the arrays of state (guarded to be the same arrays) and of constants to their value names."""
    return [f"v{vid} = {src.name(value.tensor._data if value.kind == STATE else value.tensor, value.kind)}"
            for vid, value in enumerate(graph.values) if value.kind in (STATE, CONSTANT)]


def saved_values(graph: Graph, nodes: range) -> Tuple[Any, ...]:
    """What the backward of `nodes` may read: the non-state arguments and results of nodes that need grad (value
    ids), and the intermediates of those whose primitive saves some (`("s", vid)`, vid being the node's result)."""
    saved: Dict[Any, None] = {}
    for i in nodes:
        n = graph.nodes[i]
        if n.prim.backward is None or not graph.values[n.out].requires_grad:
            continue
        for vid in n.refs() + [n.out]:
            if graph.values[vid].kind not in (STATE, CONSTANT):
                saved[vid] = None
        if n.prim.saves:
            saved[("s", n.out)] = None
    return tuple(saved)


def saved_names(graph: Graph, saved: Tuple[Any, ...]) -> List[str]:
    """The variable names of saved_values' entries in generated code: v7 for a value, s7 for node 7's
    intermediates."""
    return [f"s{entry[1]}" if isinstance(entry, tuple) else f"v{entry}" for entry in saved]


def saves_intermediates(graph: Graph, n: Any) -> bool:
    """True when replay must run node `n`'s forward with save=True: its primitive saves intermediates and its
    result needs grad."""
    return n.prim.saves and n.prim.backward is not None and graph.values[n.out].requires_grad


class Backward:
    """The backward programs of one graph (or segment), generated per set of values that receive a gradient."""

    def __init__(self, graph: Graph, nodes: range, returns: Tuple[int, ...]) -> None:
        self.graph, self.nodes, self.returns = graph, nodes, returns
        self.saved = saved_values(graph, nodes)
        self.programs: Dict[Tuple[int, ...], Callable] = {}

    def __call__(self, saved: tuple, inputs: tuple, bundle: Bundle) -> tuple:
        seeds = tuple(sorted(bundle))
        program = self.programs.get(seeds)
        if program is None:
            program = self.programs[seeds] = backward_function(self.graph, self.nodes, seeds, self.returns,
                                                               self.saved)
        return program(saved, inputs, bundle)


def graph_node(backward: Backward, saved: tuple, inputs: tuple) -> Any:
    """The autograd node of one replayed call: its backward runs the graph's backward program."""
    return node(_EMPTY, partial(backward, saved, inputs), inputs)


def output_node(array: Any, graph_call: Any, route_fn: Callable) -> Any:
    """An output that needs grad: its gradient is routed into the call's graph node."""
    return node(array, route_fn, (graph_call,))


class Entry:
    """One cached graph: its replay function (guards, forward, outputs), buffers and backward programs."""

    def __init__(self, graph: Graph, guards: Guards, dynamic: bool, fn_name: str) -> None:
        self.graph, self.guards, self.fn_name = graph, guards, fn_name
        grad_inputs = tuple(vid for vid, v in enumerate(graph.values)
                            if v.kind in (INPUT, STATE) and v.requires_grad)
        self.backward = Backward(graph, range(len(graph.nodes)), grad_inputs)
        unbuffered = _output_bases(graph)
        self.buffered = [] if dynamic else [n.out for n in graph.nodes if n.prim.out and n.out not in unbuffered
                                            and int(np.prod(graph.values[n.out].shape)) >= BUFFER_MIN]
        self._layout = [(array_module(graph.values[v].tensor._data), graph.values[v].shape, graph.values[v].dtype)
                        for v in self.buffered]
        self.pool = [self._allocate()]
        self.leases: Dict[Any, tuple] = {}
        self.call = self._generate(grad_inputs)

    def _allocate(self) -> tuple:
        return tuple(xp.empty(shape, dtype) for xp, shape, dtype in self._layout)

    def take(self) -> tuple:
        """A buffer set no other call uses."""
        try:
            return self.pool.pop()
        except IndexError:
            return self._allocate()

    def lease(self, graph_call: Any, buffers: tuple) -> None:
        """Give `buffers` back to the pool once `graph_call` (whose backward reads them) is gone."""
        self.leases[weakref.ref(graph_call, self._release)] = buffers

    def _release(self, ref: Any) -> None:
        self.pool.append(self.leases.pop(ref))

    def _generate(self, grad_inputs: Tuple[int, ...]) -> Callable:
        graph = self.graph
        src = Source(dict(self.guards.namespace))
        src.namespace.update(MISS=MISS, W=wrap, GRAPH=graph_node, OUT=output_node, LINK=aliasing.link,
                             E=self, BACKWARD=self.backward)
        src.lines += check_lines(self.guards)
        src.lines += constant_lines(graph, src)
        needs_node = any(graph.values[v].requires_grad and graph.values[v].kind == NODE
                         for v in _output_refs(graph.output))
        if self.buffered:
            src.lines.append("buffers = E.take()")
            src.lines.append(", ".join(f"b{v}" for v in self.buffered) + ", = buffers")
        buffered = set(self.buffered)
        for n in graph.nodes:
            args = [value_source(graph, a, src) for a in n.args]
            if needs_node and saves_intermediates(graph, n):
                src.lines.append(f"v{n.out}, s{n.out} = {src.name(n.prim.forward, 'F')}({', '.join(args)}, save=True)")
            elif n.out in buffered:
                src.lines.append(f"v{n.out} = {src.name(n.prim.forward, 'F')}({', '.join(args)}, out=b{n.out})")
            elif n.prim.infix:
                src.lines.append(f"v{n.out} = " + n.prim.infix.format(*[f"({a})" for a in args]))
            else:
                src.lines.append(f"v{n.out} = {src.name(n.prim.forward, 'F')}({', '.join(args)})")
        if needs_node:
            saved = ", ".join(saved_names(graph, self.backward.saved))
            inputs = ", ".join(_tensor_source(graph, v, src) for v in grad_inputs)
            src.lines.append(f"g = GRAPH(BACKWARD, ({saved},), ({inputs},))")
            if self.buffered:
                src.lines.append("E.lease(g, buffers)")
        elif self.buffered:
            src.lines.append("E.pool.append(buffers)")
        made: Set[int] = set()
        for vid in _output_refs(graph.output):
            value = graph.values[vid]
            if value.kind != NODE or vid in made:
                continue
            made.add(vid)
            if value.requires_grad:
                src.lines.append(f"o{vid} = OUT(v{vid}, g, {src.name(partial(route, vid), 'R')})")
            else:
                src.lines.append(f"o{vid} = W(v{vid})")
            base = _view_base(graph, vid)
            if base is not None:
                src.lines.append(f"LINK({_tensor_source(graph, base, src)}, o{vid})")
        src.lines.append(f"return {_output_source(graph, graph.output, src)}")
        return src.compile("replay", "args, kwargs")

    def why(self, args: tuple, kwargs: dict) -> str:
        """The first guard this call fails, with the value it found."""
        return first_failure(self.guards, args, kwargs)


def _output_refs(spec: Any) -> List[int]:
    if isinstance(spec, Ref):
        return [spec.vid]
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], type):
        items = spec[1].values() if isinstance(spec[1], dict) else spec[1]
        return [vid for item in items for vid in _output_refs(item)]
    return []


def _output_bases(graph: Graph) -> Set[int]:
    """The outputs and every value an output views: they must not live in reused buffers."""
    found: Set[int] = set()
    for vid in _output_refs(graph.output):
        while vid not in found:
            found.add(vid)
            producer = graph.producer.get(vid)
            if producer is None:
                break
            n = graph.nodes[producer]
            if not (n.prim.view and isinstance(n.args[0], Ref)):
                break
            vid = n.args[0].vid
    return found


def _view_base(graph: Graph, vid: int) -> Optional[int]:
    """The input or state value whose memory output `vid` views (as the capture found it), or None."""
    start = vid
    while True:
        producer = graph.producer.get(vid)
        if producer is None:
            break
        n = graph.nodes[producer]
        if not (n.prim.view and isinstance(n.args[0], Ref)):
            return None
        vid = n.args[0].vid
    base = graph.values[vid]
    if base.kind not in (INPUT, STATE) or vid == start:
        return None
    base_array = base.tensor._data if hasattr(base.tensor, "_data") else base.tensor
    shares = array_module(base_array).may_share_memory(graph.values[start].tensor._data, base_array)
    return vid if shares and hasattr(base.tensor, "_data") else None


def _tensor_source(graph: Graph, vid: int, src: Source) -> str:
    value = graph.values[vid]
    return f"t{vid}" if value.kind == INPUT else src.name(value.tensor, "tensor")


def _output_source(graph: Graph, spec: Any, src: Source) -> str:
    if isinstance(spec, Ref):
        value = graph.values[spec.vid]
        return f"o{spec.vid}" if value.kind == NODE else _tensor_source(graph, spec.vid, src)
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], type):
        cls, items = spec
        if cls is dict:
            return "{" + ", ".join(f"{k!r}: {_output_source(graph, v, src)}" for k, v in items.items()) + "}"
        parts = "".join(f"{_output_source(graph, v, src)}, " for v in items)
        if cls is tuple:
            return f"({parts})"
        if cls is list:
            return f"[{parts}]"
        return f"{src.name(cls._make if hasattr(cls, '_make') else cls, 'cls')}(({parts}))"
    return src.constant(spec)
