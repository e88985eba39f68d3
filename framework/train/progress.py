"""What a run shows on the terminal: a tqdm bar on stderr when it is a terminal, and streams a hangup cannot break.

Closing the terminal of a run sends it SIGHUP (it then stops as for SIGTERM),
and from then on every write to that terminal fails with EIO (a closed pipe:
EPIPE). `Output` wraps stderr and stdout so that such a failure only ends the
output: the descriptor is pointed at /dev/null, so neither the run's next line
nor Python's flush at exit fails (which would make the exit code 120).
"""
from __future__ import annotations

import os
import sys
from typing import TextIO

from tqdm import tqdm


class Output:
    """A text stream whose writes stop, silently, once its terminal or pipe has gone away."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self.lost = False

    def write(self, text: str) -> int:
        if not self.lost:
            try:
                return self._stream.write(text)
            except OSError:
                self._lose()
        return len(text)

    def flush(self) -> None:
        if not self.lost:
            try:
                self._stream.flush()
            except OSError:
                self._lose()

    def isatty(self) -> bool:
        return not self.lost and self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    def _lose(self) -> None:
        self.lost = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)
        except (OSError, ValueError, AttributeError):  # a stream without a descriptor (a StringIO)
            pass


class Progress:
    """Shows env steps, steps/s, updates and the mean return; silent when disabled or not on a terminal."""

    def __init__(self, total_steps: int, initial_steps: int = 0, enabled: bool = True, stream: TextIO | None = None):
        stream = stream or sys.stderr
        self._bar = None
        if enabled and stream.isatty():
            self._bar = tqdm(total=total_steps, initial=initial_steps, file=stream, unit="step",
                             unit_scale=True, dynamic_ncols=True, smoothing=0.3)

    def update(self, steps: int, updates: int, mean_return: float | None) -> None:
        """Show the current totals (steps is the global env step count; tqdm shows the rate)."""
        if self._bar is None:
            return
        ret = "n/a" if mean_return is None else f"{mean_return:.1f}"
        self._bar.update(steps - self._bar.n)
        self._bar.set_postfix_str(f"return {ret}, updates {updates}", refresh=False)

    def close(self) -> None:
        """Finish the bar."""
        if self._bar is not None:
            self._bar.close()
