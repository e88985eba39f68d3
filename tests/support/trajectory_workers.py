"""Processes that use a TrajectoryBuffer as actors and learners do (targets for tests/rl/test_trajectories)."""
from __future__ import annotations

import os
import signal

import numpy as np

from framework.rl.trajectories import TrajectoryBuffer


def write_rollouts(buffer: TrajectoryBuffer, actor: int, first: int, count: int, max_wait_s: float,
                   dropped: np.ndarray) -> None:
    """Publish `count` rollouts as actor `actor`, rollout k (from `first`) with every obs byte k % 256 and every
    reward k; the rollouts it overwrote unread are added to dropped[actor]."""
    for k in range(first, first + count):
        slot, _, lost = buffer.acquire(actor, max_wait_s, lambda: False)
        dropped[actor] += lost
        views = buffer.slot_views(slot)
        views.obs[...] = k % 256
        views.rewards[...] = k
        buffer.publish(slot, version=k)


def die_holding(buffer: TrajectoryBuffer, role: str, inside_lock: bool) -> None:
    """SIGKILL this process holding buffer slots: as actor 0 with a slot half written, or as learner 0 with a
    batch taken; with inside_lock, while it holds the buffer's lock too."""
    if role == "actor":
        buffer.acquire(0, 0.0, lambda: False)
    else:
        buffer.take(0, 1, 10.0, lambda: False)
    if inside_lock:
        buffer.lock.acquire()
    os.kill(os.getpid(), signal.SIGKILL)
