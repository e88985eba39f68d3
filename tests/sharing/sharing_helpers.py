"""Helpers the sharing tests import (a module of its own: `conftest` names several modules in one session)."""
from __future__ import annotations

import glob


def group_names(group: str) -> list[str]:
    """The /dev/shm names of one file_system manager group."""
    return glob.glob(f"/dev/shm/hogshare_{group}_*")
