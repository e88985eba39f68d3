"""The captured graph: values, the primitive nodes that compute them, and the output's structure.

A value is an input (a tensor among the call's arguments), state (a tensor the
call reads from a module or a global: parameters, read by reference so in-place
updates are seen), a constant (a tensor the call built from Python numbers,
`framework.tensor([0, 2])`), a node's result, or an external (a tensor that
entered after a graph break). A node is one primitive applied to Refs (values) and
constants. Graph breaks cut the nodes into segments; a graph without a break
is one segment and replays without running the Python function at all.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..ops.primitive import Primitive

INPUT, STATE, CONSTANT, NODE, EXTERNAL = "input", "state", "constant", "node", "external"


class Ref:
    """A node argument that is a graph value (every other argument is a constant)."""

    __slots__ = ("vid",)

    def __init__(self, vid: int) -> None:
        self.vid = vid

    def __repr__(self) -> str:
        return f"v{self.vid}"


@dataclass
class Value:
    """What the graph knows of a value: where it comes from and what it looked like at capture."""

    kind: str
    name: str                       # readable: 'x', 'self.pi.weight', 'v12'
    dtype: Any
    shape: tuple                    # at capture
    requires_grad: bool
    sym_shape: Optional[tuple] = None   # with symbolic sizes, in a dynamic capture
    tensor: Any = None              # STATE: the tensor read by reference; CONSTANT: its values (a copy); else what
                                    # the capture saw (dropped after)
    path: Optional[str] = None      # INPUT: the code that reads it from (args, kwargs), e.g. "args[0]"


@dataclass
class Node:
    """One primitive applied to values and constants, producing value `out`."""

    prim: Primitive
    args: Tuple[Any, ...]
    out: int
    where: str = ""                 # the user line that ran it, for explain

    def refs(self) -> List[int]:
        return [a.vid for a in self.args if isinstance(a, Ref)]


@dataclass
class Break:
    """Why and where a graph broke; `at` is the index of the first node after the break."""

    reason: str
    where: str
    at: int

    def __str__(self) -> str:
        return f"{self.reason} ({self.where})" if self.where else self.reason


@dataclass
class Graph:
    """A captured call: values, nodes, breaks (segment boundaries) and the output structure."""

    values: List[Value] = field(default_factory=list)
    nodes: List[Node] = field(default_factory=list)
    breaks: List[Break] = field(default_factory=list)
    output: Any = None              # the return structure with Refs for tensors (see capture.Recorder.finish)
    producer: Dict[int, int] = field(default_factory=dict)   # value -> index of the node computing it

    def add_value(self, value: Value) -> int:
        self.values.append(value)
        return len(self.values) - 1

    def add_node(self, node: Node) -> None:
        self.producer[node.out] = len(self.nodes)
        self.nodes.append(node)

    def segments(self) -> List[Tuple[int, int]]:
        """(first, end) node indices of each segment that holds nodes."""
        cuts = sorted({b.at for b in self.breaks} | {0, len(self.nodes)})
        return [(lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:]) if hi > lo]

    def ops_per_segment(self) -> List[List[str]]:
        return [[n.prim.name for n in self.nodes[lo:hi]] for lo, hi in self.segments()]
