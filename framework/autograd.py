"""Reverse-mode automatic differentiation: the backward pass over the recorded graph.

Each non-leaf tensor holds `_bw`, a closure mapping the gradient of its output
to a tuple of gradients for `_prev` (its tensor inputs, None where an input
needs none), and `_seq`, its creation number. The engine keeps gradients as
raw arrays keyed by tensor (tensors hash by identity), sums them where paths
join, and hands gradients of leaves to the leaf (which accumulates into `.grad`).
"""
from __future__ import annotations

import heapq
from typing import Any, Optional

import numpy as np

from .device import array_module


def _freed(grad: Any) -> tuple:
    raise RuntimeError(
        "Trying to backward through the graph a second time (or directly access saved tensors after they "
        "have already been freed). Saved intermediate values of the graph are freed when you call .backward(). "
        "Specify retain_graph=True if you need to backward through the graph a second time.")


def _seed(root: Any, gradient: Any) -> Any:
    """The gradient array to start from: ones for a one-element output, else the explicit gradient."""
    data = root._data
    if gradient is None:
        if data.size != 1:
            raise RuntimeError(f"grad can be implicitly created only for scalar outputs; this output has "
                               f"shape {tuple(data.shape)}, so pass gradient= of that shape")
        seed = array_module(data).empty(data.shape, data.dtype)
        seed.fill(1)
        return seed
    grad = getattr(gradient, "_data", gradient)
    if not hasattr(grad, "shape"):
        grad = np.asarray(grad, dtype=data.dtype)
    if tuple(grad.shape) != tuple(data.shape):
        raise RuntimeError(f"backward: gradient has shape {tuple(grad.shape)} but the output has shape "
                           f"{tuple(data.shape)}; they must match")
    return grad


def backward(root: Any, gradient: Optional[Any] = None, retain_graph: bool = False) -> None:
    """Accumulate d(root)/d(leaf) (times `gradient`) into the `.grad` of every leaf that requires grad.

    Nodes are processed in decreasing creation order (`_seq`) from a heap, which
    is a topological order since every node is created after its inputs: one
    pass, no separate sort, no recursion.
    """
    if not root._rg:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    seed = _seed(root, gradient)
    if root._bw is None:
        root._accumulate(seed)
        return
    grads = {root: seed}
    heap = [(-root._seq, root)]
    pop, push = heapq.heappop, heapq.heappush
    while heap:
        node = pop(heap)[1]
        for parent, pgrad in zip(node._prev, node._bw(grads.pop(node))):
            if pgrad is None or not parent._rg:
                continue
            if parent._bw is None:
                parent._accumulate(pgrad)
                continue
            prev = grads.get(parent)
            if prev is None:
                grads[parent] = pgrad
                push(heap, (-parent._seq, parent))
            else:
                grads[parent] = prev + pgrad
        if not retain_graph:
            node._bw = _freed
            node._prev = ()
