"""HOGSHARE_LOGS: opt-in logs of what the compiler decided, as TORCH_LOGS does for TorchDynamo.

`HOGSHARE_LOGS=recompiles,graph_breaks,guards` (or `all`) turns on, per
artifact: each recompile and the guard that failed; each graph break with its
reason and user line (and each replay that left its captured path); the guards
of each new graph. Records go to the logger `framework.compiler.<artifact>` at
INFO, and to stderr. The variable is read when something is logged, so it can
be set after import; nothing is formatted while it is unset.
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Callable

ARTIFACTS = ("recompiles", "graph_breaks", "guards")


class _Stderr(logging.StreamHandler):
    """A handler writing to whatever sys.stderr is at the time (so test captures see it)."""

    @property  # type: ignore[override]
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


_ROOT = logging.getLogger("framework.compiler")
_HANDLER = _Stderr()
_HANDLER.setFormatter(logging.Formatter("[hogshare %(name)s] %(message)s"))


def enabled(artifact: str) -> bool:
    """True when HOGSHARE_LOGS names `artifact` (or says `all`)."""
    names = {name.strip().lstrip("+") for name in os.environ.get("HOGSHARE_LOGS", "").split(",")}
    return artifact in names or "all" in names


def log(artifact: str, message: Callable[[], str]) -> None:
    """Log `message()` under `artifact` when HOGSHARE_LOGS enables it."""
    if not enabled(artifact):
        return
    if _HANDLER not in _ROOT.handlers:
        _ROOT.addHandler(_HANDLER)
    logger = _ROOT.getChild(artifact)
    logger.setLevel(logging.INFO)
    logger.info(message())
