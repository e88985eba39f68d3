"""Process plumbing and child-process bodies shared by the host-memory and the GPU transfer tests.

The bodies take a ``make(value)`` function where they create arrays, so the
same scenario runs on host memory (test_cuda_ipc_transfer) and on CuPy arrays
(test_cuda_ipc_gpu).
"""
from __future__ import annotations

from typing import Any, Callable

import sharing as mp

CTX = mp.get_context("spawn")
WAIT = 120


def start(target: Callable[..., None], *args: Any) -> Any:
    """A started spawn process running target(*args)."""
    child = CTX.Process(target=target, args=args)
    child.start()
    return child


def joined(child: Any) -> None:
    """Join child and check it ended well."""
    child.join(WAIT)
    assert child.exitcode == 0


def send_and_drop(outbox: Any, done: Any, count: int, make: Callable[[int], Any]) -> None:
    """Producer of a chain: put make(0) ... make(count - 1), keeping none, then stay alive until done."""
    for value in range(count):
        outbox.put(make(value))
    done.wait(4 * WAIT)


def copy_on(inbox: Any, outbox: Any, done: Any, count: int) -> None:
    """Middle of a chain: forward a copy of each received array (received ones cannot be sent on)."""
    for _ in range(count):
        outbox.put(inbox.get(timeout=WAIT).copy())
    done.wait(4 * WAIT)


def sum_all(inbox: Any, result: Any, count: int, make: Callable[[int], Any]) -> None:
    """End of a chain: add up what arrives, into make(0)."""
    total = make(0)
    for _ in range(count):
        total += inbox.get(timeout=WAIT)
    result.put(total.tolist())


def sums(inbox: Any, outbox: Any, count: int) -> None:
    """Answer with the sum of each of count received arrays."""
    outbox.put([float(inbox.get(timeout=WAIT).sum()) for _ in range(count)])


def describe(inbox: Any, outbox: Any) -> None:
    """Answer with (shape, dtype, size) of each array in one received list."""
    outbox.put([(a.shape, a.dtype.str, a.size) for a in inbox.get(timeout=WAIT)])
