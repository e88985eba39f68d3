"""The monitor's periodic tasks: each one due every so many seconds of the run, counted from when it last ran.

A task with a period of 0 never runs. Each remembers when it last ran: when
it started, or, for one that takes long and during which the monitor does
nothing else (a video), when it ended, so that the next one is due a whole
period after it.
"""
from __future__ import annotations

import time
from typing import Any, Callable


class Periodic:
    """A task due every `every_s` seconds (never when 0), from `start` on (see the module docstring)."""

    def __init__(self, every_s: float, task: Callable[..., Any], start: float, from_end: bool = False):
        self.every_s, self.task, self.last, self.from_end = every_s, task, start, from_end

    def due(self, now: float) -> bool:
        return self.every_s > 0 and now - self.last >= self.every_s

    def run(self, now: float, *args: Any) -> Any:
        """Run the task now (due or not) with args; what it returns."""
        result = self.task(*args)
        self.last = time.monotonic() if self.from_end else now
        return result

    def run_if_due(self, now: float, *args: Any) -> Any:
        """Run the task when it is due; what it returns, or None."""
        return self.run(now, *args) if self.due(now) else None
