"""What a run shows on the terminal: a tqdm bar on stderr when it is a terminal (counting toward the budget that
will end the run), tqdm's notebook bar in a Jupyter kernel, and streams a hangup cannot break.

In a Jupyter kernel stderr is no terminal, but it is watched: the bar is tqdm's notebook widget when ipywidgets
is installed (the budget it counts may change, so the widget's maximum follows its total, and it ends green
however the run ended: the outcome line says how), else tqdm's text bar on the kernel's stderr.

Closing the terminal of a run sends it SIGHUP (it then stops as for SIGTERM),
and from then on every write to that terminal fails with EIO (a closed pipe:
EPIPE). `reopen_closed_streams` gives a command started with either closed
/dev/null in its place. `Output` wraps stderr and stdout so that such a failure only ends the
output: the descriptor is pointed at /dev/null, so neither the run's next line
nor Python's flush at exit fails (which would make the exit code 120).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any, TextIO

from tqdm import tqdm

from framework.runtime.formatting import significant


def reopen_closed_streams() -> None:
    """Give a command started with stdout or stderr closed (`train ... >&- 2>&-`) /dev/null in their place.

    Python then makes sys.stdout or sys.stderr None, so every print would
    fail; and the next file, pipe or socket opened takes descriptor 1 or 2,
    so a worker's (or a library's) writes to "stderr" would land in it. Each
    closed one gets /dev/null on its number (inherited by workers), and a
    None stream a stream on /dev/null.
    """
    for fd, name in ((1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:  # closed: /dev/null takes its number
            devnull = os.open(os.devnull, os.O_WRONLY)
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w"))


class Output:
    """A text stream whose writes stop, silently, once its terminal or pipe has gone away (or that never had one:
    None)."""

    def __init__(self, stream: TextIO | None):
        self._stream = stream
        self.lost = stream is None  # Python's sys.stderr of a process started with it closed

    def write(self, text: str) -> int:
        if not self.lost:
            try:
                return self._stream.write(text)
            except OSError:
                self._lose()
        return len(text)

    def line(self, text: str) -> None:
        """Write `text` and its newline in one write, then flush: on a pipe, a line of up to PIPE_BUF bytes (4,096
        on Linux) arrives whole beside other processes' writes (a worker's warning)."""
        self.write(text + "\n")
        self.flush()

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


def in_jupyter_kernel() -> bool:
    """Whether this process is a Jupyter kernel (tqdm.autonotebook's test: IPython's shell is the kernel's)."""
    ipython = sys.modules.get("IPython")
    return ipython is not None and type(ipython.get_ipython()).__name__ == "ZMQInteractiveShell"


_BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt}{unit} [{elapsed}<{remaining}{postfix}]"


class Progress:
    """Counts toward the budget that will end the run; silent when disabled or not on a terminal.

    A run ends at `total_steps` or at `max_seconds` of wall time, whichever
    comes first. From the rate so far, the bar estimates which one binds and
    counts toward it: steps (in the algorithm's unit, e.g. env steps or
    samples) while the step budget would run out first, seconds once the time
    budget would. The postfix shows the updates and the mean return (for
    algorithms that count episodes), and the steps and steps/s while it counts
    seconds.
    """

    def __init__(self, total_steps: int, initial_steps: int = 0, enabled: bool = True, stream: TextIO | None = None,
                 *, max_seconds: float = float("inf"), initial_seconds: float = 0.0, unit: str = "env steps",
                 show_return: bool = True):
        stream = stream or sys.stderr
        self._bar: Any = None
        self._widget: Any = None  # the notebook bar's progress widget
        self.total_steps, self.max_seconds, self.unit, self.show_return = total_steps, max_seconds, unit, show_return
        self._first = (initial_steps, initial_seconds)
        self.counting = "steps"
        if not enabled:
            return
        kernel = in_jupyter_kernel()
        if kernel and importlib.util.find_spec("ipywidgets") is not None:
            from tqdm.notebook import tqdm as notebook_tqdm

            self._bar = notebook_tqdm(total=total_steps, initial=initial_steps, unit=f" {unit}", unit_scale=True,
                                      smoothing=0.3, bar_format=_BAR_FORMAT)
            self._widget = self._bar.container.children[1]
        elif kernel or stream.isatty():
            self._bar = tqdm(total=total_steps, initial=initial_steps, file=stream, unit=f" {unit}",
                             unit_scale=True, dynamic_ncols=True, smoothing=0.3, bar_format=_BAR_FORMAT)

    def binding(self, steps: int, seconds: float) -> str:
        """'seconds' when, at the rate so far, max_seconds comes before total_steps, else 'steps'."""
        first_steps, first_seconds = self._first
        rate = (steps - first_steps) / max(seconds - first_seconds, 1e-9)
        if rate <= 0:
            return "seconds"
        return "seconds" if (self.total_steps - steps) / rate > self.max_seconds - seconds else "steps"

    def update(self, steps: int, updates: int, mean_return: float | None, seconds: float | None = None) -> None:
        """Show the current totals: steps is the run's step count, seconds its wall time (resumes included)."""
        if self._bar is None:
            return
        if seconds is not None:
            self.counting = self.binding(steps, seconds)
        bar = self._bar
        if self.counting == "seconds":
            bar.total, bar.unit, bar.unit_scale = round(self.max_seconds, 1), " s", False
            bar.n = round(min(seconds, self.max_seconds), 1)
            first_steps, first_seconds = self._first
            rate = (steps - first_steps) / max(seconds - first_seconds, 1e-9)
            counts = f"{steps:,} {self.unit} ({rate:,.0f}/s), "
        else:
            bar.total, bar.unit, bar.unit_scale = self.total_steps, f" {self.unit}", True
            bar.n = steps
            counts = ""
        if self._widget is not None:
            self._widget.max = bar.total
        shown = f"return {significant(mean_return)}, " if self.show_return else ""
        bar.set_postfix_str(f"{counts}{shown}updates {updates}", refresh=False)
        bar.refresh()

    def close(self) -> None:
        """Finish the bar."""
        if self._bar is not None:
            self._bar.close()
        if self._widget is not None:
            self._widget.bar_style = "success"
