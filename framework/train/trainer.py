"""The trainer: builds and shares the model, restores a checkpoint, and hands the run to a backend and the monitor.

`Trainer.run` builds the algorithm's model and optimizer, moves them into
shared memory (one parameter arena; on `trainer.device: cuda:N` into that
GPU's memory, reaching workers as CUDA IPC handles), makes the run statistics,
loads the checkpoint of a resumed run, writes the resolved config, and runs
the `Monitor` over the backend named by `trainer.backend`. A run directory
holds config.yaml, the event files, checkpoints/checkpoint.npz and, at the
end, summary.json. Checkpoints and histograms hold host copies of the
parameters, so a checkpoint resumes or evaluates on any device.
"""
from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

import sharing
from framework import algorithms
from framework.device import cuda_device_count, use_device
from framework.train import backends
from framework.train.backends.base import Launch
from framework.train.checkpoint import CheckpointError, load_checkpoint
from framework.train.config import Config, ConfigError, config_text
from framework.train.monitor import Monitor, RunResult, RunState, model_state
from framework.train.run_stats import RunStats

CONFIG_FILE = "config.yaml"
CHECKPOINT = Path("checkpoints") / "checkpoint.npz"

__all__ = ["CONFIG_FILE", "RunError", "RunResult", "Trainer", "checkpoint_path", "load_model_state", "model_state"]


class RunError(RuntimeError):
    """A run that cannot start (e.g. no room in shared memory for the model); the message is one line."""


def checkpoint_path(run_dir: str | Path) -> Path:
    """Where a run directory keeps its checkpoint."""
    return Path(run_dir) / CHECKPOINT


def one_line(exc: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(part.strip() for part in str(exc).splitlines() if part.strip())


def load_model_state(model: Any, state: dict[str, Any], source: Path) -> None:
    """Copy saved parameters into model; CheckpointError naming source when they do not fit."""
    try:
        model.load_state_dict(state)
    except (KeyError, ValueError, RuntimeError, TypeError) as exc:
        raise CheckpointError(f"checkpoint '{source}' does not fit the model of this config: {one_line(exc)}") from None


class Trainer:
    """One training run (new or resumed) in run_dir with a validated config."""

    def __init__(self, config: Config, run_dir: str | Path, *, resume: bool = False, log: TextIO | None = None):
        self.config = config
        self.run_dir = Path(run_dir)
        self.resume = resume
        self._log = log or sys.stderr
        self.algorithm = algorithms.get(config["algorithm"]["name"])
        self._signal: int | None = None

    def say(self, text: str) -> None:
        """One line for the person running train (stderr)."""
        print(text, file=self._log, flush=True)

    def stop_signal(self) -> int | None:
        """The signal (SIGINT, SIGTERM) that asked the run to stop, or None."""
        return self._signal

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

    def _build(self) -> tuple[Any, Any, RunStats]:
        """The model and optimizer in shared memory (on trainer.device), and the run statistics."""
        cfg, tcfg = self.config, self.config["trainer"]
        device = tcfg["device"]
        model = self.algorithm.build_model(cfg)
        try:
            model.to(device).share_memory()  # on CUDA the arena is one device allocation, sent as an IPC handle
            optimizer = self.algorithm.build_optimizer(model, cfg)  # its state lives with the parameters
            optimizer.share_memory()
            stats = RunStats(tcfg["workers"], self.algorithm.metrics, ring=max(1024, self.algorithm.window(cfg)),
                             step_budget=tcfg["total_steps"])
        except (OSError, MemoryError) as exc:  # CuPy's OutOfMemoryError is a MemoryError
            where = "shared memory" if device == "cpu" else f"{device} memory and shared memory"
            raise RunError(f"cannot place the model, optimizer state and run statistics in {where} "
                           f"({tcfg['sharing_strategy']}): {exc}") from exc
        return model, optimizer, stats

    def _restore(self, model: Any, optimizer: Any, stats: RunStats, run: RunState) -> None:
        """Load the run directory's checkpoint into the run; CheckpointError (nothing written) if it does not fit."""
        path = checkpoint_path(self.run_dir)
        saved = load_checkpoint(path)
        load_model_state(model, saved["model"], path)
        try:
            optimizer.load_state_dict(saved["optimizer"])
        except (KeyError, ValueError, RuntimeError, TypeError, IndexError) as exc:
            raise CheckpointError(f"checkpoint '{path}' holds optimizer state that does not fit: "
                                  f"{one_line(exc)}") from None
        run.restore(saved["run"], stats)

    def run(self) -> RunResult:
        """Train until a stop condition; returns the exit code (0 finished or stopped by signal, 1 failed)."""
        tcfg = self.config["trainer"]
        self._check_device()
        use_device(tcfg["device"])
        sharing.set_sharing_strategy(tcfg["sharing_strategy"])
        model, optimizer, stats = self._build()
        run = RunState(tcfg["workers"], self.algorithm.window(self.config))
        if self.resume:
            self._restore(model, optimizer, stats, run)
        try:  # written once the checkpoint is known to fit, so a refused resume changes nothing
            (self.run_dir / CONFIG_FILE).write_text(config_text(self.config))
            (self.run_dir / CHECKPOINT.parent).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunError(f"cannot write the run directory '{self.run_dir}': {exc.strerror or exc}") from None
        self.say(f"run directory: {self.run_dir}")
        launch = Launch(self.config, self.algorithm, model, optimizer, stats, run.generations)
        writer = None
        if self.config["logging"]["tensorboard"]:
            from framework.train.tensorboard_writer import TensorBoardWriter  # tensorboard loads only when used
            writer = TensorBoardWriter(self.run_dir, on_error=self.say)
        monitor = Monitor(launch, backends.backend_class(tcfg["backend"]), run, writer,
                          checkpoint_path(self.run_dir), self.run_dir / "summary.json", say=self.say,
                          stop_signal=self.stop_signal, progress_stream=self._log)
        previous = self._install_signal_handlers()
        try:
            return monitor.run()
        finally:
            self._restore_signal_handlers(previous)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._signal = signum

    def _install_signal_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        return {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}

    @staticmethod
    def _restore_signal_handlers(previous: dict[int, Any]) -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
