"""How `train` stops on a signal: SIGINT (Ctrl-C), SIGTERM and SIGHUP (the terminal closed) are recorded, never raised.

A handler that raises (Python's KeyboardInterrupt) can strike anywhere: in an
import, half-way through placing shared memory, between writing a temp file
and renaming it. Here the first of these signals is only recorded, and each
phase of a run acts on it where it can do so cleanly:

- start-up, from the command's first line (the bulk of its imports, config
  checks, the model and shared memory, room checks; the run directory does
  not exist yet): the start is abandoned at its next step, nothing is
  written, exit code 128 + the signal's number (130 for Ctrl-C); before that
  line (Python importing the tensor library) Python's own handling applies;
- worker start: no further worker is started, then as in training;
- training: the workers finish their update, the final checkpoint and
  summary are written, exit code 0; the run can be resumed;
- an evaluation or a video of the monitor (`raising`): cut where it is
  (it writes nothing that outlives it), then as in training;
- a checkpoint being written: the write is never cut short; then as in training;
- shutdown (workers stopping, the final checkpoint): later signals change
  nothing; stopping workers get `trainer.join_timeout_s`, then are terminated.

A stop signal that is ignored when the command starts stays ignored, as
Python leaves an ignored SIGINT alone: `nohup train ...` keeps training when
its terminal closes (SIGHUP), and a script's background job (`train ... &`,
SIGINT ignored) is not stopped by a Ctrl-C meant for the foreground.

SDL (pygame's rendering, for videos) takes SIGINT and SIGTERM when it starts
wherever they still have their default action, turning them into an event
nothing reads: installed first, these handlers stay (`evaluate --record`
installs them before rendering for that reason).

The terminal sends SIGINT and SIGHUP to the whole process group, workers
included: workers are started with both blocked (`lifecycle.signals_blocked`)
and ignore them from their first instruction on (`lifecycle.ignore_signals`),
so they never die half-started; they stop when the main process tells them.
The cost: one flag, read where a phase can stop.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Callable, Iterator, TypeVar

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
WORKER_IGNORED = (signal.SIGINT, signal.SIGHUP)
"""Signals a terminal sends to a whole process group: the main process decides for its workers."""
T = TypeVar("T")
R = TypeVar("R")


class Interrupted(BaseException):
    """A stop signal arrived before the run directory existed (the start is abandoned, nothing was written), or
    during work that `StopSignals.raising` lets it cut. A BaseException, as KeyboardInterrupt: code that handles
    failures (`except Exception`) lets it through."""

    def __init__(self, signum: int, when: str = "before the run started; nothing was written"):
        super().__init__(f"stopped by {signal.Signals(signum).name} {when}".rstrip())
        self.signum = signum


class StopSignals:
    """The stop signals of one command: installed for a `with` block, the first one recorded in `received`."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}
        self._raising = False

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            ignored = {s for s in STOP_SIGNALS if signal.getsignal(s) == signal.SIG_IGN}  # nohup's SIGHUP
            self._previous = {s: signal.signal(s, self._record) for s in STOP_SIGNALS if s not in ignored}
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def _record(self, signum: int, frame: Any) -> None:
        if self.received is None:
            self.received = signum
        if self._raising:
            self._raising = False  # raised once: the code that handles it runs undisturbed
            raise Interrupted(signum, "")

    @contextlib.contextmanager
    def raising(self) -> Iterator[None]:
        """Within the block, a stop signal (or one that came before it) raises Interrupted at once: for work that
        may be cut anywhere because it changes nothing that outlives it (an evaluation, a video)."""
        self.check()
        self._raising = True
        try:
            yield
        finally:
            self._raising = False

    def checked(self, sink: Callable[[T], R]) -> Callable[[T], R]:
        """sink, raising Interrupted before each call once a stop signal has arrived: a recording ends at its next
        frame even where the signal's own exception was swallowed (a library that catches everything)."""
        def call(item: T) -> R:
            self.check()
            return sink(item)
        return call

    def check(self) -> None:
        """Raise Interrupted when a stop signal has arrived (start-up calls it between its steps)."""
        if self.received is not None:
            raise Interrupted(self.received)
