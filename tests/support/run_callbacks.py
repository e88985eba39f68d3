"""Callbacks for the tests of `framework.train.Callback`, importable by name (`train --callback
run_callbacks:Name`): one that records what it is given, one that stops the run, ones that raise."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from framework.train import Callback

EVENTS = "HOGSHARE_TEST_CALLBACK_EVENTS"
"""The environment variable naming the file a Recorder made by `train --callback` appends its events to."""


class Recorder(Callback):
    """Keeps every call as (method, env_steps, what it was given), and appends them to $EVENTS as JSON lines."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, Any]] = []

    def _keep(self, method: str, given: Any) -> None:
        self.events.append((method, self.env_steps, given))
        if os.environ.get(EVENTS):
            with open(os.environ[EVENTS], "a") as f:
                f.write(json.dumps([type(self).__name__, method, self.env_steps, given]) + "\n")

    def on_start(self, run_dir: Path) -> None:
        self._keep("on_start", str(run_dir))

    def on_log(self, metrics: dict[str, float]) -> None:
        self._keep("on_log", metrics)

    def on_eval(self, result: Any) -> None:
        self._keep("on_eval", result.metrics)

    def on_checkpoint(self, path: Path) -> None:
        self._keep("on_checkpoint", str(path))

    def on_end(self, summary: dict[str, Any]) -> None:
        self._keep("on_end", dict(summary))


class SecondRecorder(Recorder):
    """A Recorder of another name, to give --callback twice."""


class StopAfter2000Steps(Callback):
    """Asks the run to stop at the first log interval with 2000 env steps or more."""

    def on_log(self, metrics: dict[str, float]) -> bool:
        return self.env_steps >= 2000


class Raising(Callback):
    """Raises ValueError in the method named by `method` (every call of it)."""

    def __init__(self, method: str = "on_log") -> None:
        self.method = method
        for name in ("on_start", "on_log", "on_eval", "on_checkpoint", "on_end"):
            if name == method:
                setattr(self, name, self._raise)

    def _raise(self, *args: Any) -> None:
        raise ValueError(f"boom in {self.method}")


class RaisingOnLog(Raising):
    """Raising in on_log, made with no arguments (for --callback)."""


class NeedsArgument(Callback):
    def __init__(self, value: int) -> None:
        self.value = value


RECORDER = Recorder()
"""A Callback instance, which --callback takes as it is."""
NOT_A_CALLBACK = 3
