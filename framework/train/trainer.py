"""The trainer: builds and shares the model, restores a checkpoint, and hands the run to a backend and the monitor.

`Trainer.run` works in two phases. Start-up does everything that can be
refused without leaving a trace: it builds the algorithm's model and
optimizer, moves them into shared memory (one parameter arena; on
`trainer.device: cuda:N` into that GPU's memory, reaching workers as CUDA
IPC handles), makes the run statistics, checks and loads the checkpoint of
a resumed run, checks the room the run needs (`startup`), makes the
backend (and with it the workers' shared objects), then checks the file
descriptors the run's processes need. Only then is the run directory made
(or, resumed, locked and cleared of leftovers), config.yaml written and the
`Monitor` started over the backend. A refusal in start-up (bad checkpoint, no room, a stop signal)
leaves no directory and a resumed one byte-identical; once training runs,
stopping is the monitor's. A run directory holds config.yaml, the event
files, checkpoints/checkpoint.npz (and checkpoints/best.npz with
`trainer.keep_best`) and, at the end, summary.json. The monitor calls the
run's callbacks, and after them the trackers its config turns on
(`logging.mlflow`, `logging.wandb`: see `trackers`).
Checkpoints and histograms hold host copies of the parameters, so a
checkpoint resumes or evaluates on any device.
"""
from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence, TextIO

import numpy as np

import sharing
from framework import algorithms
from framework.device import cuda_device_count, use_device
from framework.train import backends, run_dir, startup, trackers, trust
from framework.train.backends.base import Backend, Launch, share_model
from framework.train.best_checkpoint import BestCheckpoint
from framework.train.callbacks import Callback, RunHooks
from framework.train.config import Config, ConfigError, config_text
from framework.train.carryover import Carryover
from framework.train.monitor import Monitor
from framework.train.policy import Policy, load_policy
from framework.train.progress import Output
from framework.train.run_checkpoint import (CHECKPOINT, checkpoint_path, load_optimizer_state, max_checkpoint_bytes,
                                            model_state, read_checkpoint, restore_plugin_state)
from framework.runtime.run_stats import RunStats
from framework.runtime.schema import one_line, printable
from framework.train.startup import RunError
from framework.train.stop_signals import StopSignals

CONFIG_FILE = run_dir.CONFIG_FILE
__all__ = ["CONFIG_FILE", "Run", "RunError", "Trainer"]


@dataclass
class Run:
    """A finished run: its directory, its summary.json (`exit_code` is train's), and (loaded when first asked
    for) its policy."""

    run_dir: Path
    summary: dict[str, Any]
    _policy: Policy | None = field(default=None, repr=False)

    @property
    def exit_code(self) -> int:
        """0: finished or stopped by a signal; 1: failed (a worker or callback raised, a checkpoint failed)."""
        return self.summary["exit_code"]

    @property
    def policy(self) -> Policy:
        """The policy of the run's final checkpoint (`load_policy(run_dir)`; its code is trusted: this process
        trained it)."""
        if self._policy is None:
            self._policy = load_policy(self.run_dir, trust_code=True)
        return self._policy


class Trainer:
    """One training run: a new one (made under logging.logdir once it can start) or the one in run_dir, resumed.

    `signals` are the stop signals of the command (installed by the caller);
    without them, the run installs its own while it runs. `callbacks` are
    called by the monitor (see `callbacks`).
    """

    def __init__(self, config: Config, run_dir: str | Path | None = None, *, resume: bool = False,
                 log: TextIO | None = None, signals: StopSignals | None = None, callbacks: Sequence[Callback] = ()):
        self.config = config
        self.run_dir = None if run_dir is None else Path(run_dir)
        self.resume = resume
        self._log = Output(log or sys.stderr)
        self.algorithm = algorithms.get(config["algorithm"]["name"])
        self._own_signals = signals is None
        self.signals = signals or StopSignals()
        self.needs_trust_code = False
        """Whether this run's config.yaml names code and could not be signed: reading it back needs --trust-code."""
        self.callbacks = list(callbacks)

    def say(self, text: str) -> None:
        """One line for the person running train (stderr)."""
        self._log.line(text)

    def stop_signal(self) -> int | None:
        """The signal (SIGINT, SIGTERM, SIGHUP) that asked the run to stop, or None."""
        return self.signals.received

    def run(self) -> Run:
        """Train until a stop condition; the finished Run, whose exit code is 0 (finished or stopped by a signal)
        or 1 (failed).

        Raises ConfigError, CheckpointError or RunError when the run is refused,
        and stop_signals.Interrupted when a stop signal came first; either way
        nothing was written.
        """
        with self.signals if self._own_signals else contextlib.nullcontext():
            with contextlib.ExitStack() as held:
                if self.resume:
                    lock = run_dir.lock(self.run_dir)
                    held.callback(os.close, lock)
                launch, carryover, backend = self._start_up()
                try:
                    writer = self._fill_run_directory(held)
                except BaseException:
                    backend.stop(0.0)
                    raise
                hooks = RunHooks([*self.callbacks, *trackers.build_trackers(self.config, self.run_dir, self.say)],
                                 say=self.say)
                monitor = Monitor(launch, backend, carryover, writer, checkpoint_path(self.run_dir),
                                  self.run_dir / "summary.json", self.run_dir / run_dir.VIDEOS, say=self.say,
                                  stop_signal=self.stop_signal, progress_stream=self._log,
                                  interruptible=self.signals.raising, hooks=hooks, best=self._best_checkpoint(launch))
                return Run(self.run_dir, monitor.run())

    def _best_checkpoint(self, launch: Launch) -> BestCheckpoint | None:
        """With trainer.keep_best, the run's best checkpoint (a resumed run's best so far read back)."""
        if not self.config["trainer"]["keep_best"]:
            return None
        best = BestCheckpoint(checkpoint_path(self.run_dir, "best"), self.say)
        best.restore(self.config["algorithm"]["name"],
                     max_checkpoint_bytes(launch.model, sum(a.nbytes for a in launch.state.values())))
        return best

    # -- start-up: nothing is written -------------------------------------------------------------
    def _check_device(self) -> None:
        device = self.config["trainer"]["device"]
        if device == "cpu":
            return
        count = cuda_device_count()
        if count == 0:
            raise ConfigError(f"config key 'trainer.device': got {device!r}; allowed: cpu "
                              f"(no CUDA device with CuPy is available here)")
        if int(device[5:]) >= count:
            raise ConfigError(f"config key 'trainer.device': got {device!r}; allowed: cpu or cuda:0 to "
                              f"cuda:{count - 1} ({count} CUDA device{'s' if count > 1 else ''} here)")

    def _start_up(self) -> tuple[Launch, Carryover, Backend]:
        """The shared model, optimizer and statistics, the run state and the backend, once the run can start."""
        cfg, tcfg = self.config, self.config["trainer"]
        check = self.signals.check
        self._check_device()
        use_device(tcfg["device"])
        sharing.set_sharing_strategy(tcfg["sharing_strategy"])
        try:
            model = self.algorithm.build_model(cfg)
        except MemoryError as exc:
            raise RunError(f"cannot build the model of this config: {one_line(exc)}") from None
        roles = self.algorithm.roles(cfg)
        processes = sum(role.count for role in roles)
        if tcfg["backend"] != "local" and not all(role.central for role in roles[1:]):
            raise ConfigError(f"config key 'trainer.backend': got {tcfg['backend']!r}; allowed: local for algorithm "
                              f"{cfg['algorithm']['name']}, whose processes ({', '.join(map(str, roles))}) only the "
                              f"local backend starts")
        plugin_state = self.algorithm.build_state(cfg)
        if plugin_state and tcfg["backend"] != "local":
            raise ConfigError(f"config key 'trainer.backend': got {tcfg['backend']!r}; allowed: local for algorithm "
                              f"{cfg['algorithm']['name']}, whose own arrays ({', '.join(sorted(plugin_state))}) "
                              f"only the local backend carries")
        check()
        plugin_bytes = sum(a.nbytes for a in plugin_state.values())
        saved = read_checkpoint(self.run_dir, cfg, model, plugin_bytes) if self.resume else None
        check()
        startup.check_semaphore_room()
        if tcfg["backend"] == "local":
            startup.check_worker_memory(roles, sum(p.data_array.nbytes for p in model.parameters()))
        model, optimizer, stats = self._share(model, processes)
        plugin_state = {name: sharing.share_array(np.asarray(a)) for name, a in plugin_state.items()}
        check()
        carryover = Carryover(processes, self.algorithm.window(cfg))
        if saved is not None:
            path = checkpoint_path(self.run_dir)
            dropped = load_optimizer_state(optimizer, saved["optimizer"], path)
            if dropped:
                self.say(f"resuming with the config's optimizer options: the saved {', '.join(dropped)} "
                         f"(not kept with these options) is dropped")
            restore_plugin_state(plugin_state, saved, path, cfg["algorithm"]["name"])
            carryover.restore(saved["run"], stats)
        checkpoint_bytes = (sum(v.nbytes for v in model_state(model).values()) + 8 * carryover.window.maxlen
                            + (64 << 10)
                            + sum(a.nbytes for entry in optimizer.state.values() for a in entry.values())
                            + plugin_bytes)
        copies = 3 if tcfg["keep_best"] else 2  # the checkpoint and its temp file, and the best checkpoint
        startup.check_disk(self.run_dir if self.resume else Path(cfg["logging"]["logdir"]),
                           len(config_text(cfg)) + copies * checkpoint_bytes + startup.EVENTS_ROOM)
        check()
        launch = Launch(cfg, self.algorithm, model, optimizer, stats, carryover.generations, roles=roles,
                        state=plugin_state)
        try:
            backend = backends.backend_class(tcfg["backend"])(launch)
        except (OSError, MemoryError) as exc:
            raise RunError(f"cannot prepare the workers' shared objects: {one_line(exc)}") from None
        try:
            startup.ensure_descriptors(roles)  # with the descriptors of the shared objects the backend made
            check()
        except BaseException:
            backend.stop(0.0)
            raise
        return launch, carryover, backend

    def _share(self, model: Any, processes: int) -> tuple[Any, Any, RunStats]:
        """The model and optimizer in shared memory (on trainer.device), and the run statistics of `processes`."""
        cfg, tcfg = self.config, self.config["trainer"]
        device = tcfg["device"]
        try:
            model, optimizer, stats = share_model(cfg, self.algorithm, model, processes)
        except (OSError, MemoryError) as exc:  # CuPy's OutOfMemoryError is a MemoryError
            where = "shared memory" if device == "cpu" else f"{device} memory and shared memory"
            raise RunError(f"cannot place the model, optimizer state and run statistics in {where} "
                           f"({tcfg['sharing_strategy']}): {one_line(exc)}") from None
        return model, optimizer, stats

    # -- the run directory ------------------------------------------------------------------------
    def _signed_config(self) -> str:
        """config.yaml's text, signed as this user's (`trust`); unsigned, and `needs_trust_code` set, when the key
        cannot be made or read, which is said in one line where the config names code to import."""
        text = config_text(self.config)
        try:
            return trust.signed(text)
        except (OSError, ConfigError) as exc:
            named = trust.code_named(self.config)
            if named:
                self.needs_trust_code = True
                self.say(f"config.yaml is not signed as this user's ({one_line(exc)}): evaluate --run and train "
                         f"--resume of this run import its code ({', '.join(named)}) only with --trust-code")
            return text

    def _fill_run_directory(self, held: contextlib.ExitStack) -> Any:
        """Make (or, resumed, clear) the run directory, write config.yaml and open the event file; the writer.

        A new directory that cannot be filled is removed again (RunError).
        """
        made = None
        if not self.resume:
            made = run_dir.NewRunDir(self.config["logging"]["logdir"], self.config["experiment"])
            self.run_dir = made.path
            held.callback(os.close, run_dir.lock(self.run_dir))
        try:
            for leftover in run_dir.remove_leftovers(self.run_dir):
                self.say(f"removed '{printable(leftover)}', left by a write that never finished")
            text = self._signed_config().encode()
            run_dir.write_atomically(self.run_dir / CONFIG_FILE, lambda f: f.write(text))
            (self.run_dir / CHECKPOINT.parent).mkdir(exist_ok=True)
            writer = None
            if self.config["logging"]["tensorboard"]:
                from framework.train.tensorboard_writer import TensorBoardWriter  # tensorboard loads only when used
                writer = TensorBoardWriter(self.run_dir, on_error=self.say)
        except OSError as exc:
            if made is not None:
                made.remove()
            raise RunError(f"cannot write the run directory '{printable(str(self.run_dir))}': "
                           f"{exc.strerror or exc}") from None
        self.say(f"run directory: {self.run_dir}")
        return writer
