"""Terminal progress for a run: a tqdm bar on stderr when it is a terminal, nothing otherwise."""
from __future__ import annotations

import sys
from typing import TextIO

from tqdm import tqdm


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
