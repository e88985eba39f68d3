"""framework.compiler: capture a step once and replay it without Python's per-op cost, guarded like TorchDynamo.

At A3C's sizes the framework's time goes to Python's per-op work (a Tensor, a
closure and a dispatch per op), not to NumPy's arithmetic. `framework.compile`
runs a function once with the tensor library reporting each primitive op
(capture.py), guards the graph on what the run assumed (guards.py, symbolic.py),
and replays it as generated straight-line array code, forward and backward
(replay.py), while the guards hold; a graph that broke replays in segments
while the function's Python runs (segmented_replay.py). The frontend (frontend.py) keeps
several graphs per function; explain.py and logs.py say what happened.

API: compile(fn_or_module, *, dynamic=False, fullgraph=False), reset(),
counters, config.cache_size_limit, mark_dynamic(tensor, dim),
explain(fn, *args), GraphBreakError; HOGSHARE_LOGS=recompiles,graph_breaks,guards.
"""
from .capture import GraphBreakError, mark_dynamic
from .explain import Explanation, explain
from .frontend import CompiledFunction, CompiledModule, compile, config, counters, reset

__all__ = ["compile", "reset", "counters", "config", "mark_dynamic", "explain", "Explanation", "GraphBreakError",
           "CompiledFunction", "CompiledModule"]
