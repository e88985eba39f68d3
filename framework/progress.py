"""Terminal progress for a run: a tqdm bar on a terminal, a plain status line every few seconds otherwise."""
from __future__ import annotations

import sys
import time
from typing import TextIO

from tqdm import tqdm


class Progress:
    """Shows env steps, steps/s, updates and the mean return on stderr; silent when disabled."""

    def __init__(self, total_steps: int, initial_steps: int = 0, enabled: bool = True,
                 stream: TextIO | None = None, line_every_s: float = 10.0):
        self._stream = stream or sys.stderr
        self._enabled = enabled
        self._bar = None
        self._line_every_s = line_every_s
        self._last_line = time.monotonic()
        if enabled and self._stream.isatty():
            self._bar = tqdm(total=total_steps, initial=initial_steps, file=self._stream, unit="step",
                             unit_scale=True, dynamic_ncols=True, smoothing=0.3)

    def update(self, steps: int, steps_per_s: float, updates: int, mean_return: float | None) -> None:
        """Show the current totals (steps is the global env step count)."""
        if not self._enabled:
            return
        ret = "n/a" if mean_return is None else f"{mean_return:.1f}"
        if self._bar is not None:
            self._bar.update(steps - self._bar.n)
            self._bar.set_postfix_str(f"return {ret}, updates {updates}", refresh=False)
            return
        now = time.monotonic()
        if now - self._last_line >= self._line_every_s:
            self._last_line = now
            print(f"steps {steps}  steps/s {steps_per_s:,.0f}  updates {updates}  mean return {ret}",
                  file=self._stream, flush=True)

    def close(self) -> None:
        """Finish the bar (a no-op for plain lines)."""
        if self._bar is not None:
            self._bar.close()
