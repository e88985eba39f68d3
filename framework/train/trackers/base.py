"""What every tracker shares: a Callback whose calls run, in order, on a thread of its own, and whose first
failure costs one line.

The monitor's calls only queue work (a copy of the metrics): the thread takes it in order and calls what a
tracker implements in its service's terms, `open` (once, at the start), `log(metrics, step)` and `close(summary)`.
So a slow or dead server never holds up the monitor's loop, its stop checks or its checkpoints; the price is one
thread per tracker. The first exception there (a refused connection, no credentials, a full disk) is said in one
line naming the tracker, and the tracker does nothing more; the run goes on as without it. At the end `on_end`
queues the final/ metrics and `close` (the summary and artifacts), then waits for the thread, at most
FINISH_TIMEOUT_S: a tracker still sending then is said to be, and left behind (a daemon thread, which does not
keep the process alive).
"""
from __future__ import annotations

import copy
import hashlib
import queue
import threading
from pathlib import Path
from typing import Any, Callable

from framework.runtime.schema import one_line, printable
from framework.train.callbacks import Callback
from framework.train.outcome import final_metrics
from framework.train.run_checkpoint import BEST, CHECKPOINT
from framework.train.run_dir import CONFIG_FILE

FINISH_TIMEOUT_S = 120.0
"""How long the end of a run waits for a tracker to send what it has (the checkpoint: megabytes to a server)."""
ARTIFACTS = (Path(CONFIG_FILE), CHECKPOINT, BEST)
"""The run directory's files a tracker keeps as artifacts, where they exist."""


def run_key(run_dir: Path) -> str:
    """A short id of a run directory (of its absolute path), by which a resumed run finds its tracker run again."""
    return hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:32]


def flat_config(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """config's values by dotted key path (optimizer.lr), as trackers list parameters."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            flat.update(flat_config(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


class Tracker(Callback):
    """A tracker of one run: subclasses name their config section (`name`, under logging) and implement `open`,
    `log` and `close`, which run on the tracker's thread (see the module docstring)."""

    name = ""

    def __init__(self, config: dict[str, Any], run_dir: Path, say: Callable[[str], None]):
        self.config, self.section = config, config["logging"][self.name]
        self.run_dir, self.say = Path(run_dir), say
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=f"hogshare-{self.name}", daemon=True)
        self._failed = False

    def artifacts(self) -> list[Path]:
        """The ARTIFACTS the run directory holds, relative to it."""
        return [path for path in ARTIFACTS if (self.run_dir / path).is_file()]

    # -- the monitor's side: queue the work and return ----------------------------------------
    def on_start(self, run_dir: Path) -> None:
        self._thread.start()
        self._queue.put((self.open, ()))

    def on_log(self, metrics: dict[str, float]) -> None:
        self._queue.put((self.log, (dict(metrics), self.env_steps)))

    def on_eval(self, result: Any) -> None:
        self._queue.put((self.log, ({f"eval/{k}": float(v) for k, v in result.metrics.items()}, self.env_steps)))

    def on_end(self, summary: dict[str, Any]) -> None:
        self._queue.put((self.log, (final_metrics(summary), summary["env_steps"])))
        self._queue.put((self.close, (copy.deepcopy(summary),)))
        self._queue.put(None)
        self._thread.join(FINISH_TIMEOUT_S)
        if self._thread.is_alive():
            self.say(f"logging.{self.name}: still sending after {FINISH_TIMEOUT_S:g} s; the run ends without waiting "
                     f"for it")

    # -- the tracker's thread -----------------------------------------------------------------
    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            method, args = item
            if self._failed:
                continue
            try:
                method(*args)
            except BaseException as exc:  # whatever the service's library raises, the run goes on
                self._failed = True
                self.say(f"logging.{self.name}: {method.__name__} failed ({type(exc).__name__}: "
                         f"{printable(one_line(exc), limit=500)}); the run goes on without it")

    # -- what a tracker implements, on its thread ----------------------------------------------
    def open(self) -> None:
        """Start (or, for a resumed run, continue) the service's run, with the config as its parameters."""
        raise NotImplementedError

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Scalars by tag at step (env steps)."""
        raise NotImplementedError

    def close(self, summary: dict[str, Any]) -> None:
        """Keep the summary and the artifacts, and end the service's run (failed when the run failed)."""
        raise NotImplementedError
