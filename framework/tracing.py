"""The hook through which `framework.compile` watches eager execution: None, and free, outside a capture.

While `framework.compiler` captures a function (or replays one whose graph broke),
it sets `HOOK.current` to an object that the tensor library reports to: every
primitive op (`ops.primitive.apply`), every Tensor method that hands a value to
Python (`item`, `bool`, `numpy`, ...), every in-place update, every shape read
and every Module call. The library never imports the compiler; the compiler
installs itself here. Outside a capture each of those places pays one read of
a thread-local attribute.
"""
from __future__ import annotations

import threading
from typing import Any


class _Hook(threading.local):
    """The capture (or segmented replay) running in this thread, if any."""

    current: Any = None


HOOK = _Hook()


def escape(tensor: Any, what: str) -> None:
    """Report that `what` (e.g. '.item()') hands `tensor`'s values to Python code."""
    hook = HOOK.current
    if hook is not None:
        hook.escape(tensor, what)


class SymbolicSize:
    """Base of the compiler's symbolic sizes: ops keep one as it is where they would take int() of a size."""

    __slots__ = ()
