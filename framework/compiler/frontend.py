"""framework.compile: a function (or a Module's forward) with a cache of captured graphs, as torch.compile.

Each call tries the cached graphs, most recent first: the first whose guards
pass replays (replay.py, or segmented_replay.py when the graph broke). When none does,
the call is captured (capture.py), which runs it eagerly once, and its graph
joins the cache; the guard that failed is logged as the reason for the
recompile. Past `config.cache_size_limit` graphs per function, a call that no
graph accepts runs eagerly, with one warning. Inside another capture or replay
a compiled function is simply called, so its ops join the outer graph.
"""
from __future__ import annotations

import functools
import inspect
import warnings
import weakref
from typing import Any, Callable, List, Optional, Union

from ..nn.module import Module
from ..tracing import HOOK
from . import logs
from .capture import Recorder
from .graph import CONSTANT, STATE
from .replay import MISS, Entry
from .segmented_replay import SegmentedEntry


class Config:
    """Compiler settings."""

    cache_size_limit = 8
    """Graphs kept per compiled function; past it, calls no graph accepts run eagerly (one warning)."""


config = Config()

counters = {"captures": 0, "recompiles": 0, "cache_hits": 0, "graph_breaks": 0, "guard_failures": 0,
            "eager_fallbacks": 0, "divergences": 0}
"""What the compiler did since the last reset(): graphs captured, of which recompiles (a cached graph's guards
failed), calls served by a cached graph, graph breaks found, calls no cached graph accepted, calls run eagerly
past the cache limit, segmented replays that left their captured path."""

_COMPILED: "weakref.WeakSet[CompiledFunction]" = weakref.WeakSet()


def reset() -> None:
    """Forget every cached graph and zero the counters (as torch._dynamo.reset)."""
    for compiled in list(_COMPILED):
        compiled.entries.clear()
        compiled.warned = False
    for key in counters:
        counters[key] = 0


def _location(fn: Any) -> str:
    target = fn.forward if isinstance(fn, Module) else fn
    target = inspect.unwrap(getattr(target, "__func__", target))
    code = getattr(target, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "?"


class CompiledFunction:
    """A callable with a cache of captured graphs (see the module docstring)."""

    def __init__(self, fn: Callable, dynamic: bool, fullgraph: bool, owner: Optional[Module] = None) -> None:
        self.fn, self.dynamic, self.fullgraph, self.owner = fn, dynamic, fullgraph, owner
        self.entries: List[Any] = []
        self.warned = False
        target = owner.forward if owner is not None else fn
        self.name = getattr(target, "__qualname__", type(target).__name__)
        self.location = _location(fn)
        _COMPILED.add(self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if HOOK.current is not None:
            return self.fn(*args, **kwargs)
        for entry in self.entries:
            result = entry.call(args, kwargs)
            if result is not MISS:
                counters["cache_hits"] += 1
                return result
        return self._miss(args, kwargs)

    def _miss(self, args: tuple, kwargs: dict) -> Any:
        if self.entries:
            counters["guard_failures"] += 1
            reason = self.entries[0].why(args, kwargs)
            if len(self.entries) >= config.cache_size_limit:
                counters["eager_fallbacks"] += 1
                if not self.warned:
                    self.warned = True
                    warnings.warn(f"framework.compile: {self.name} ({self.location}) reached "
                                  f"config.cache_size_limit ({config.cache_size_limit}); calls that no cached graph "
                                  f"accepts run eagerly. Last guard failure: {reason}", stacklevel=3)
                return self.fn(*args, **kwargs)
            logs.log("recompiles", lambda: f"Recompiling {self.name} ({self.location}), graph "
                                           f"{len(self.entries)}: guard failed: {reason}")
        return self._capture(args, kwargs)

    def _capture(self, args: tuple, kwargs: dict) -> Any:
        recorder = Recorder(self.fn, self.owner, self.dynamic, self.fullgraph)
        result = recorder.run(args, kwargs)
        counters["captures"] += 1
        counters["recompiles"] += bool(self.entries)
        counters["graph_breaks"] += len(recorder.graph.breaks)
        self.entries.insert(0, build_entry(recorder, self.name))
        for item in recorder.graph.breaks:
            logs.log("graph_breaks", lambda: f"Graph break in {self.name} ({self.location}): {item}")
        logs.log("guards", lambda: f"GUARDS for {self.name} ({self.location}), graph {len(self.entries) - 1}:\n  "
                                   + "\n  ".join(recorder.guards.descriptions()))
        return result


def _divergence(message: str) -> None:
    counters["divergences"] += 1
    logs.log("graph_breaks", lambda: message)


def build_entry(recorder: Recorder, name: str) -> Any:
    """The cache entry for a capture: whole-graph replay, or segmented replay when the graph broke."""
    graph = recorder.graph
    if graph.breaks:
        entry: Any = SegmentedEntry(graph, recorder.guards, recorder.env, recorder.fn, name, _divergence)
    else:
        entry = Entry(graph, recorder.guards, bool(recorder.env.sources), name)
    for value in graph.values:  # only state and constants are read at replay; drop what the capture saw
        if value.kind not in (STATE, CONSTANT):
            value.tensor = None
    return entry


class CompiledModule(Module):
    """A Module whose forward is compiled; its parameters (and submodules) are the original module's.

    As torch's OptimizedModule the original is registered as `_orig_mod`, and
    attributes this wrapper lacks are read from it.
    """

    def __init__(self, module: Module, dynamic: bool, fullgraph: bool) -> None:
        super().__init__()
        self._orig_mod = module
        object.__setattr__(self, "_compiled", CompiledFunction(module, dynamic, fullgraph, owner=module))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        modules = self.__dict__.get("_modules")
        if modules is None or "_orig_mod" not in modules:
            raise AttributeError(name)
        return getattr(modules["_orig_mod"], name)


def compile(fn_or_module: Optional[Union[Callable, Module]] = None, *, dynamic: bool = False,
            fullgraph: bool = False) -> Any:
    """Capture `fn_or_module` on its first call and replay the graph while its guards hold (see framework.compiler).

    A Module gives a CompiledModule (same parameters); a function gives a
    callable; with no argument, a decorator. `dynamic=True` makes every input
    size symbolic (mark_dynamic does it per dim); `fullgraph=True` raises
    GraphBreakError instead of breaking the graph.
    """
    if fn_or_module is None:
        return functools.partial(compile, dynamic=dynamic, fullgraph=fullgraph)
    if isinstance(fn_or_module, Module):
        return CompiledModule(fn_or_module, dynamic, fullgraph)
    if not callable(fn_or_module):
        raise TypeError(f"framework.compile expects a function or a Module, got {type(fn_or_module).__name__}")
    compiled = CompiledFunction(fn_or_module, dynamic, fullgraph)
    functools.update_wrapper(compiled, fn_or_module, updated=())
    return compiled
