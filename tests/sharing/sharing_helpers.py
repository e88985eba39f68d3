"""Helpers the sharing tests import (a module of its own: `conftest` names several modules in one session)."""
from __future__ import annotations

import glob

import sharing


def group_names(group: str) -> list[str]:
    """The /dev/shm names of one file_system manager group."""
    return glob.glob(f"/dev/shm/hogshare_{group}_*")


def make_queue(ctx, kind: str, maxsize: int = 0):
    """A queue of `kind` ("Queue": the context's multiprocessing.Queue; "RingQueue")."""
    return ctx.Queue(maxsize) if kind == "Queue" else sharing.RingQueue(maxsize)
