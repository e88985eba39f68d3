"""Segmented replay: a graph that broke replays its captured parts while the function's Python runs the rest.

The function runs again each call (its Python decides things from values, calls
other code, returns objects), with a Replayer as the tracing hook. Each
primitive op it reaches is matched against the next captured node (the same
primitive, the same constants, the same tensors); a match computes the node's
array forward directly, with no backward closure and no per-op autograd node:
the results of one segment share one autograd node whose backward is that
segment's generated program (replay.Backward), and whatever the Python code did
with them between segments joins through ordinary autograd. The first op that
does not match (the call took another path) ends replay for the rest of the call,
which runs eagerly: never a wrong result, counted as a divergence.

What it costs against eager: the per-op Python call and a match, but no closure
and no graph node per op, and one backward program per segment.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from ..ops.primitive import Primitive, link_view, run
from ..tensor import Tensor, node, wrap
from ..tracing import HOOK
from .graph import CONSTANT, EXTERNAL, INPUT, STATE, Graph, Ref
from .guards import Guards, check_lines, first_failure
from .replay import MISS, Backward, Source, route, saves_intermediates
from .symbolic import ShapeEnv, Sym

def same_constant(recorded: Any, actual: Any, symbols: Dict[str, int]) -> bool:
    """True when a call's constant argument is the one the capture recorded (symbolic sizes evaluated)."""
    if isinstance(recorded, Sym):
        return actual.__class__ is int and actual == eval(recorded.expr, {"__builtins__": {}}, symbols)  # noqa
    if recorded.__class__ in (tuple, list):
        return actual.__class__ is recorded.__class__ and len(actual) == len(recorded) and \
            all(same_constant(r, a, symbols) for r, a in zip(recorded, actual))
    if recorded.__class__ is slice:
        return actual.__class__ is slice and all(same_constant(getattr(recorded, k), getattr(actual, k), symbols)
                                                 for k in ("start", "stop", "step"))
    if isinstance(recorded, np.ndarray):
        return isinstance(actual, np.ndarray) and actual.dtype == recorded.dtype and \
            np.array_equal(actual, recorded)
    return recorded.__class__ is actual.__class__ and (recorded is actual or recorded == actual)


class SegmentedEntry:
    """A cached graph with breaks: guards, then the function run under a Replayer."""

    def __init__(self, graph: Graph, guards: Guards, env: ShapeEnv, fn: Callable, fn_name: str,
                 on_divergence: Callable[[str], None]) -> None:
        self.graph, self.guards, self.fn, self.fn_name = graph, guards, fn, fn_name
        self.on_divergence = on_divergence
        self.backwards: Dict[Tuple[int, int], Tuple[Backward, Tuple[int, ...]]] = {}
        src = Source(dict(guards.namespace))
        src.lines += check_lines(guards)
        src.lines.append("return {" + ", ".join(f"{s!r}: {s}" for s in env.sources) + "}")
        src.namespace["MISS"] = MISS
        self.check = src.compile("check", "args, kwargs")

    def why(self, args: tuple, kwargs: dict) -> str:
        """The first guard this call fails, with the value it found."""
        return first_failure(self.guards, args, kwargs)

    def call(self, args: tuple, kwargs: dict) -> Any:
        symbols = self.check(args, kwargs)
        if symbols is MISS:
            return MISS
        replayer = Replayer(self, symbols)
        replayer.bind_inputs(args, kwargs)
        previous, HOOK.current = HOOK.current, replayer
        try:
            return self.fn(*args, **kwargs)
        finally:
            HOOK.current = previous
            replayer.finish()  # even when the function raised: its tensors' autograd node must be complete

    def backward(self, lo: int, hi: int) -> Tuple[Backward, Tuple[int, ...]]:
        """The backward of nodes lo..hi-1 and the outside values it returns gradients for."""
        key = (lo, hi)
        found = self.backwards.get(key)
        if found is None:
            graph = self.graph
            produced = {graph.nodes[i].out for i in range(lo, hi)}
            outside = tuple(dict.fromkeys(v for i in range(lo, hi) for v in graph.nodes[i].refs()
                                          if v not in produced and graph.values[v].requires_grad))
            found = self.backwards[key] = (Backward(graph, range(lo, hi), outside), outside)
        return found


class Replayer:
    """The tracing hook of one segmented replay (see the module docstring)."""

    def __init__(self, entry: SegmentedEntry, symbols: Dict[str, int]) -> None:
        self.entry, self.graph, self.symbols = entry, entry.graph, symbols
        self.cuts = sorted({b.at for b in self.graph.breaks})
        self.cursor = 0
        self.diverged = False
        self.arrays: Dict[Any, Any] = {}  # by value id; ("s", id): a node's saved intermediates
        self.tensors: Dict[int, Any] = {}
        self.segment_start = 0
        self.segment_node: Optional[Tensor] = None

    def bind_inputs(self, args: tuple, kwargs: dict) -> None:
        space = {"args": args, "kwargs": kwargs}
        for vid, value in enumerate(self.graph.values):
            if value.kind == INPUT:
                obj = eval(value.path, space)  # noqa: S307 - a path the capture wrote, e.g. args[0][1]
                self.tensors[vid] = obj
                self.arrays[vid] = obj._data if isinstance(obj, Tensor) else obj
            elif value.kind == STATE:
                self.tensors[vid] = value.tensor
                self.arrays[vid] = value.tensor._data
            elif value.kind == CONSTANT:
                self.arrays[vid] = value.tensor

    # ---- the hook ------------------------------------------------------------------------------------
    def apply(self, prim: Primitive, args: tuple) -> Tensor:
        if self.diverged or not self._matches(prim, args):
            return run(prim, args)
        graph, i = self.graph, self.cursor
        if i > self.segment_start and i in self.cuts:
            self._close_segment()
            self.segment_start = i
        n = graph.nodes[i]
        arrays = [self.arrays[a.vid] if isinstance(a, Ref) else b for a, b in zip(n.args, args)]
        if saves_intermediates(graph, n):
            out, self.arrays[("s", n.out)] = prim.forward(*arrays, save=True)
        else:
            out = prim.forward(*arrays)
        if out.__class__ is not np.ndarray and isinstance(out, np.generic):
            out = np.asarray(out)
        self.arrays[n.out] = out
        if graph.values[n.out].requires_grad:
            if self.segment_node is None:
                self.segment_node = node(np.zeros(0, np.float32), None, ())
            result = node(out, partial(route, n.out), (self.segment_node,))
        else:
            result = wrap(out)
        if prim.view:
            link_view(prim, args[0], result)
        self.tensors[n.out] = result
        self.cursor = i + 1
        return result

    def _matches(self, prim: Primitive, args: tuple) -> bool:
        graph = self.graph
        if self.cursor >= len(graph.nodes):
            return self._diverge(f"{prim.name} after the last captured op")
        n = graph.nodes[self.cursor]
        if prim is not n.prim or len(args) != len(n.args):
            return self._diverge(f"{prim.name} where {n.prim.name} was captured")
        for arg, recorded in zip(args, n.args):
            if isinstance(recorded, Ref):
                if not isinstance(arg, Tensor) or not self._same_tensor(recorded.vid, arg):
                    return self._diverge(f"{prim.name} on another tensor than at capture")
            elif not same_constant(recorded, arg, self.symbols):
                return self._diverge(f"{prim.name} with {arg!r} where {recorded!r} was captured")
        return True

    def _same_tensor(self, vid: int, tensor: Tensor) -> bool:
        known = self.tensors.get(vid)
        if known is not None:
            return known is tensor
        value = self.graph.values[vid]
        if value.kind == CONSTANT:  # made again by this call's Python: it must hold the same numbers
            return not tensor._rg and same_constant(value.tensor, tensor._data, self.symbols)
        if value.kind != EXTERNAL or tensor._data.dtype != value.dtype or tensor._rg != value.requires_grad or \
                tensor._data.ndim != len(value.shape):
            return False
        self.tensors[vid], self.arrays[vid] = tensor, tensor._data
        return True

    def _diverge(self, what: str) -> bool:
        self._close_segment()
        self.diverged = True
        self.entry.on_divergence(f"replay of {self.entry.fn_name} left its captured path at op {self.cursor} "
                                 f"({what}); the rest of the call ran eagerly")
        return False

    def _close_segment(self) -> None:
        """Give the segment's autograd node its backward program, saved arrays and outside inputs."""
        g = self.segment_node
        if g is None:
            return
        self.segment_node = None
        backward, outside = self.entry.backward(self.segment_start, self.cursor)
        g._prev = tuple(self.tensors[v] for v in outside)
        g._bw = partial(backward, tuple(self.arrays[v] for v in backward.saved), g._prev)

    def finish(self) -> None:
        if not self.diverged and self.cursor < len(self.graph.nodes):
            self._diverge("the call returned before the last captured op")
        self._close_segment()

    def shape(self, tensor: Tensor) -> tuple:
        return tensor._data.shape

    def escape(self, tensor: Any, what: str) -> None:
        """A value goes to Python (a segment boundary at capture): the segment's autograd node is complete."""
        if not self.diverged:
            self._close_segment()
            self.segment_start = self.cursor

    def module_call(self, module: Any) -> None:
        return None
