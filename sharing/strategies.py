"""The two CPU sharing strategies and the process-wide choice between them.

As in ``torch.multiprocessing``, the strategy decides how *new* shared storages
are made in this process; a received storage keeps the kind its sender chose,
so processes with different settings still exchange arrays.
"""
from __future__ import annotations

FILE_DESCRIPTOR = "file_descriptor"
FILE_SYSTEM = "file_system"
_ALL = (FILE_DESCRIPTOR, FILE_SYSTEM)
_current = FILE_DESCRIPTOR


def get_all_sharing_strategies() -> set[str]:
    """The strategies this platform supports: ``{"file_descriptor", "file_system"}``."""
    return set(_ALL)


def get_sharing_strategy() -> str:
    """The strategy new shared storages are made with (default ``file_descriptor``)."""
    return _current


def set_sharing_strategy(new_strategy: str) -> None:
    """Choose how new shared storages are made in this process.

    ``file_descriptor``: anonymous memory (memfd) that can never be left behind
    in /dev/shm; each live storage holds one open descriptor.
    ``file_system``: named files in /dev/shm, cleaned up by a manager daemon; no
    descriptor is kept open, so it suits programs with very many storages.
    """
    global _current
    if new_strategy not in _ALL:
        raise ValueError(f"unknown sharing strategy {new_strategy!r}; "
                         f"valid strategies are {', '.join(repr(s) for s in _ALL)}")
    _current = new_strategy
