"""Callbacks: the user's code watching a run from the main process, and the one seam the monitor calls them through.

A `Callback` has five methods, each doing nothing here:

- `on_start(run_dir)`: the run directory exists, the workers are about to start;
- `on_log(metrics)`: every `logging.log_every_s`, the scalars TensorBoard gets at that moment, by tag
  (`episode/return_window_mean`, `perf/env_steps_per_s`, ...); returning True stops the run as a stop
  condition does (the workers stop, the final checkpoint and summary are written) with the stop reason
  "stopped by callback <Name>";
- `on_eval(result)`: after each evaluation (`trainer.eval_every_s`, and the final one), the algorithm's
  `Evaluation` (`result.metrics`, logged as eval/<name>, and `result.text`);
- `on_checkpoint(path)`: after each checkpoint written (checkpoints/checkpoint.npz, and best.npz);
- `on_end(summary)`: what summary.json is about to hold, before it is written.

Before each call `env_steps` holds the run's env steps (the TensorBoard step) and `run_dir` the run directory.
They run in the monitor's loop: a slow callback delays logging and the stop checks, never the workers. A
callback that raises ends the run as a worker that raises does: the workers stop, the final checkpoint and
summary are written with `failure` naming the callback and its exception, and the exit code is 1 (`RunFailed`
from Python); a failed callback is called no more.

`RunHooks` is what the monitor holds: it calls every callback in order, turns an exception into the run's
failure (said once, as other failures are) and on_log's True into a stop reason. The trackers of
`logging.mlflow` and `logging.wandb` are callbacks too, placed last, that never raise (`trackers`).
`load_callback` makes one from `train --callback module:Name`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from framework.runtime import user_code
from framework.runtime.schema import ConfigError, one_line, printable, short_repr
from framework.train.stop_signals import Interrupted


class Callback:
    """Hooks into a run, called in the main process (see the module docstring); override the ones you need."""

    env_steps: int = 0
    """The run's env steps when the method was called (the step TensorBoard logs it at)."""
    run_dir: Path | None = None
    """The run directory, from on_start on."""

    def on_start(self, run_dir: Path) -> None:
        """The run directory exists; the workers start next."""

    def on_log(self, metrics: dict[str, float]) -> bool | None:
        """The scalars of one log interval by TensorBoard tag; True stops the run."""
        return None

    def on_eval(self, result: Any) -> None:
        """An evaluation's result (`result.metrics`: its numbers by name; `result.text`: its line)."""

    def on_checkpoint(self, path: Path) -> None:
        """A checkpoint was written to path."""

    def on_end(self, summary: dict[str, Any]) -> None:
        """The run ended; summary is what summary.json will hold."""


def callback_name(callback: Callback) -> str:
    """How messages name a callback: its class's name."""
    return type(callback).__name__


class RunHooks:
    """The callbacks of one run, called in order by the monitor; `failure` holds the first one's exception."""

    def __init__(self, callbacks: Iterable[Callback] = (), say: Callable[[str], None] = print):
        self.callbacks = list(callbacks)
        self.say = say
        self.failure: str | None = None
        self._live = list(self.callbacks)

    def __bool__(self) -> bool:
        return bool(self.callbacks)

    def _call(self, callback: Callback, method: str, env_steps: int, *args: Any) -> Any:
        """callback.method(*args); None when it raised, which fails the callback and the run."""
        callback.env_steps = env_steps
        try:
            return getattr(callback, method)(*args)
        except Interrupted:
            raise
        except BaseException as exc:  # a callback's SystemExit or KeyboardInterrupt fails it the same way
            self._live.remove(callback)
            message = (f"callback {callback_name(callback)}.{method} raised {type(exc).__name__}: "
                       f"{printable(one_line(exc), limit=1000)}")
            if self.failure is None:
                self.failure = message
                self.say(f"stopping the run: {message}")
            return None

    def start(self, run_dir: Path, env_steps: int) -> None:
        for callback in list(self._live):
            callback.run_dir = run_dir
            self._call(callback, "on_start", env_steps, run_dir)

    def log(self, metrics: Mapping[str, float], env_steps: int) -> str | None:
        """Give each callback the interval's scalars (a dict of its own); the stop reason when one asks to stop."""
        plain = {tag: float(value) for tag, value in metrics.items()}
        stop = None
        for callback in list(self._live):
            if self._call(callback, "on_log", env_steps, dict(plain)) and stop is None:
                stop = f"stopped by callback {callback_name(callback)}"
        return stop

    def evaluated(self, result: Any, env_steps: int) -> None:
        for callback in list(self._live):
            self._call(callback, "on_eval", env_steps, result)

    def checkpointed(self, path: Path, env_steps: int) -> None:
        for callback in list(self._live):
            self._call(callback, "on_checkpoint", env_steps, path)

    def end(self, summary: dict[str, Any]) -> None:
        """on_end for each callback; one that raises makes the summary a failed run's (exit code 1) for the
        callbacks after it (the trackers, placed last, record it so)."""
        for callback in list(self._live):
            failed_before = self.failure is not None
            self._call(callback, "on_end", summary["env_steps"], summary)
            if self.failure is not None and not failed_before:
                summary["failure"] = summary["failure"] or self.failure
                summary["exit_code"] = 1


def check_callbacks(callbacks: Any) -> list[Callback]:
    """callbacks (one Callback, or several) as a list of Callback instances; ConfigError naming what was given
    otherwise."""
    if isinstance(callbacks, (Callback, type)):
        callbacks = [callbacks]
    if isinstance(callbacks, (str, bytes)) or not isinstance(callbacks, Iterable):
        raise ConfigError(f"callbacks=: got {short_repr(callbacks)}; allowed: a list of Callback instances")
    found = list(callbacks)
    for callback in found:
        if not isinstance(callback, Callback):
            hint = " (a class: pass an instance, Name())" if isinstance(callback, type) else ""
            raise ConfigError(f"callbacks=: got {short_repr(callback)}{hint}; allowed: instances of "
                              f"framework.train.Callback")
    return found


def load_callback(spec: str) -> Callback:
    """The Callback that `--callback module:Name` names: an instance of a Callback subclass made with no
    arguments, or a Callback instance; ConfigError (one line) otherwise."""
    shown = printable(repr(spec))
    problem = user_code.spec_problem(spec, "Name")
    if problem:
        raise ConfigError(f"--callback: got {shown}; allowed: {problem}")
    module, name = spec.split(":")
    found = user_code.find_attribute(user_code.import_module("--callback", spec, module, where="--callback"), name)
    if isinstance(found, Callback):
        return found
    if not (isinstance(found, type) and issubclass(found, Callback)):
        what = f"module {module!r} has no {name!r}" if found is None else f"{name} is {short_repr(found)}"
        raise ConfigError(f"--callback: got {shown} ({what}); allowed: a framework.train.Callback subclass "
                          f"taking no arguments, or a Callback instance")
    try:
        return found()
    except Exception as exc:
        raise ConfigError(f"--callback: got {shown}; {name}() raised {type(exc).__name__}: {one_line(exc)}; "
                          f"allowed: a Callback subclass taking no arguments") from None


__all__ = ["Callback", "RunHooks", "callback_name", "check_callbacks", "load_callback"]
