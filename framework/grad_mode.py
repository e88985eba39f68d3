"""Gradient recording mode: `no_grad`, `enable_grad`, `set_grad_enabled`, as in torch (per thread)."""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class _GradMode(threading.local):
    """Whether operations record the graph in the current thread."""

    enabled = True


MODE = _GradMode()


def is_grad_enabled() -> bool:
    """True when operations on tensors that require grad record the autograd graph."""
    return MODE.enabled


class set_grad_enabled:
    """Context manager (and decorator) that turns graph recording on or off; as a call it sets it at once."""

    def __init__(self, mode: bool) -> None:
        self.prev = MODE.enabled
        self.mode = bool(mode)
        MODE.enabled = self.mode

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        MODE.enabled = self.prev

    def __call__(self, fn: F) -> F:
        MODE.enabled = self.prev
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class _Switch:
    """Base for no_grad/enable_grad: a context manager usable as a decorator."""

    mode = True

    def __enter__(self) -> None:
        self.prev = MODE.enabled
        MODE.enabled = self.mode

    def __exit__(self, *exc: object) -> None:
        MODE.enabled = self.prev

    def __call__(self, fn: F) -> F:
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            prev = MODE.enabled
            MODE.enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                MODE.enabled = prev

        return wrapper  # type: ignore[return-value]


class no_grad(_Switch):
    """Disable graph recording inside a `with` block or a decorated function."""

    mode = False


class enable_grad(_Switch):
    """Enable graph recording inside a `with` block or a decorated function (e.g. within no_grad)."""

    mode = True
