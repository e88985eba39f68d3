"""explain(fn, *args): what a capture of fn finds, without caching it (as torch._dynamo.explain).

It runs fn once, eagerly, under a Recorder (capture.py) and reports the graphs
(segments between breaks), each break's reason and user line, and the guards
the graph would be cached under, as readable strings.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, List

from ..nn.module import Module
from .capture import Recorder
from .frontend import CompiledFunction, CompiledModule


@dataclass
class Explanation:
    """What one capture of a function found."""

    graph_count: int
    graph_break_count: int
    break_reasons: List[str] = field(default_factory=list)
    guards: List[str] = field(default_factory=list)
    ops_per_graph: List[List[str]] = field(default_factory=list)
    result: Any = None

    def __str__(self) -> str:
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}",
                 f"Op count: {sum(len(ops) for ops in self.ops_per_graph)}"]
        lines += ["Break reasons:"] + [f"  {i + 1}. {reason}" for i, reason in enumerate(self.break_reasons)]
        lines += ["Ops per graph:"] + [f"  {i + 1}. {', '.join(ops)}" for i, ops in enumerate(self.ops_per_graph)]
        lines += ["Guards:"] + [f"  - {guard}" for guard in self.guards]
        return "\n".join(lines)


def explain(fn: Callable, *args: Any, **kwargs: Any) -> Explanation:
    """Capture `fn(*args, **kwargs)` once and say what the graph would be; fn may be compiled or not."""
    dynamic = False
    owner = None
    if isinstance(fn, CompiledModule):
        fn = fn._compiled
    if isinstance(fn, CompiledFunction):
        fn, owner, dynamic = fn.fn, fn.owner, fn.dynamic
    elif isinstance(fn, Module):
        owner = fn
    recorder = Recorder(fn, owner, dynamic, fullgraph=False)
    result = recorder.run(args, kwargs)
    graph = recorder.graph
    return Explanation(graph_count=len(graph.segments()), graph_break_count=len(graph.breaks),
                       break_reasons=[str(b) for b in graph.breaks], guards=recorder.guards.descriptions(),
                       ops_per_graph=graph.ops_per_segment(), result=result)
