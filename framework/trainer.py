"""The trainer: shares the model, runs the workers, and watches the run from the main process.

The main process only monitors: it reads the workers' counters from shared
memory, logs TensorBoard scalars, shows progress, checkpoints atomically,
handles worker failures (abort or restart), and stops the run on total steps,
wall time, the target mean return, too many non-finite updates, SIGINT or
SIGTERM. A run directory holds config.yaml, the event files,
checkpoints/checkpoint.npz and, at the end, summary.json.

With `trainer.device: cuda:N` the shared model and the optimizer state live in
that GPU's memory (workers receive them as CUDA IPC handles) while the run's
counters stay in CPU shared memory; checkpoints and histograms copy the
parameters to the host, so a checkpoint resumes or evaluates on any device.
"""
from __future__ import annotations

import collections
import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

import sharing
from framework import algorithms
from framework.algorithms.base import Evaluation
from framework.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from framework.config import Config, ConfigError, dump_config, get_path
from framework.device import cuda_device_count, to_host, use_device
from framework.progress import Progress
from framework.run_stats import EPISODES, LAG_SUM, SKIP_STREAK, SKIPPED, STEPS, UPDATES, RunStats
from framework.workers import WorkerPool

CONFIG_FILE = "config.yaml"
CHECKPOINT = Path("checkpoints") / "checkpoint.npz"
_POLL_S = 0.05


class RunError(RuntimeError):
    """A run that cannot start (e.g. no room in shared memory for the model); the message is one line."""


@dataclass
class RunResult:
    """How a run ended: the process exit code and the summary written to summary.json."""

    exit_code: int
    summary: dict[str, Any]


def checkpoint_path(run_dir: str | Path) -> Path:
    """Where a run directory keeps its checkpoint."""
    return Path(run_dir) / CHECKPOINT


def model_state(model: Any) -> dict[str, np.ndarray]:
    """The model's parameters as named NumPy copies (copied to the host from a CUDA device)."""
    return {name: to_host(value.data_array, copy=True) for name, value in model.state_dict().items()}


def load_model_state(model: Any, state: dict[str, np.ndarray], source: Path) -> None:
    """Copy saved parameters into model; CheckpointError naming source when they do not fit."""
    try:
        model.load_state_dict(state)
    except (KeyError, ValueError, RuntimeError, TypeError) as exc:
        raise CheckpointError(f"checkpoint '{source}' does not fit the model of this config: {_one_line(exc)}") from None


def _one_line(exc: Exception) -> str:
    return " ".join(part.strip() for part in str(exc).splitlines() if part.strip())


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Write data as JSON to path atomically; on failure (OSError) no temp file is left."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


class Trainer:
    """One training run (new or resumed) in run_dir with a validated config."""

    def __init__(self, config: Config, run_dir: str | Path, *, resume: bool = False, log: TextIO | None = None):
        self.config = config
        self.run_dir = Path(run_dir)
        self.resume = resume
        self._log = log or sys.stderr
        self._algorithm = algorithms.get(config["algorithm"]["name"])
        self._signal: int | None = None

    def _say(self, text: str) -> None:
        print(text, file=self._log, flush=True)

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

    def run(self) -> RunResult:
        """Train until a stop condition; returns the exit code (0 finished or stopped by signal, 1 failed)."""
        cfg, tcfg = self.config, self.config["trainer"]
        self._check_device()
        device = tcfg["device"]
        use_device(device)
        sharing.set_sharing_strategy(tcfg["sharing_strategy"])
        model = self._algorithm.build_model(cfg)
        try:
            model.to(device).share_memory()  # on CUDA the arena is one device allocation, sent as an IPC handle
            optimizer = self._algorithm.build_optimizer(model, cfg)  # its state lives with the parameters
            optimizer.share_memory()
            stats = RunStats(tcfg["workers"], self._algorithm.metrics, ring=max(1024, tcfg["target_window"]))
        except (OSError, MemoryError) as exc:  # CuPy's OutOfMemoryError is a MemoryError
            where = "shared memory" if device == "cpu" else f"{device} memory and shared memory"
            raise RunError(f"cannot place the model, optimizer state and run statistics in {where} "
                           f"({tcfg['sharing_strategy']}): {exc}") from exc
        run = _RunState(tcfg["workers"], tcfg["target_window"])
        if self.resume:
            path = checkpoint_path(self.run_dir)
            saved = load_checkpoint(path)
            load_model_state(model, saved["model"], path)
            try:
                optimizer.load_state_dict(saved["optimizer"])
            except (KeyError, ValueError, RuntimeError, TypeError, IndexError) as exc:
                raise CheckpointError(f"checkpoint '{path}' holds optimizer state that does not fit: "
                                      f"{_one_line(exc)}") from None
            run.restore(saved["run"], stats)
        try:  # written once the checkpoint is known to fit, so a refused resume changes nothing
            dump_config(cfg, self.run_dir / CONFIG_FILE)
            (self.run_dir / CHECKPOINT.parent).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunError(f"cannot write the run directory '{self.run_dir}': {exc.strerror or exc}") from None
        self._say(f"run directory: {self.run_dir}")
        monitor = _Monitor(self, model, optimizer, stats, run)
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


class _RunState:
    """What a run carries across checkpoints and resumes: totals, the return window, seeds' generations."""

    def __init__(self, workers: int, window: int):
        self.wall_offset = 0.0
        self.solved_at: float | None = None
        self.window: collections.deque[float] = collections.deque(maxlen=window)
        self.generations = [0] * workers

    def restore(self, saved: dict[str, Any], stats: RunStats) -> None:
        counters = np.zeros(stats.counters.shape[1], dtype=np.int64)
        counters[[STEPS, UPDATES, EPISODES, SKIPPED]] = [saved["env_steps"], saved["updates"], saved["episodes"],
                                                         saved["skipped_updates"]]
        stats.restore(counters)
        self.wall_offset = float(saved["wall_seconds"])
        self.solved_at = saved["solved_at_seconds"]
        self.window.extend(float(r) for r in saved["recent_returns"])
        generations = list(saved["generations"])[:len(self.generations)]
        self.generations[:len(generations)] = generations

    def mean_return(self) -> float | None:
        return float(np.mean(self.window)) if self.window else None


class _Monitor:
    """The main process's loop for one run."""

    def __init__(self, trainer: Trainer, model: Any, optimizer: Any, stats: RunStats, run: _RunState):
        self.t = trainer
        self.cfg = trainer.config
        self.tcfg = trainer.config["trainer"]
        self.model, self.optimizer, self.stats, self.run_state = model, optimizer, stats, run
        self.writer = None
        if self.cfg["logging"]["tensorboard"]:
            from framework.tensorboard_writer import TensorBoardWriter  # tensorboard loads only when used
            self.writer = TensorBoardWriter(trainer.run_dir, on_error=trainer._say)
        self.seen = np.zeros(stats.workers, dtype=np.int64)
        self.interval_returns: list[np.ndarray] = []
        self.interval_lengths: list[np.ndarray] = []
        self.failed: str | None = None
        self.checkpoint_failed = False
        self.checkpoint_error: str | None = None  # the last periodic failure, reported once until it changes
        self.eval_stop: str | None = None
        self.start = time.monotonic()

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> RunResult:
        tcfg = self.tcfg
        context = sharing.get_context(tcfg["start_method"])
        shared = self.t._algorithm.build_shared(self.cfg, context)
        pool = WorkerPool(context, self.cfg, self.model, self.optimizer, self.stats, self.run_state.generations,
                          shared)
        start = self.start = time.monotonic()
        first = self.stats.snapshot()
        progress = Progress(tcfg["total_steps"], first.total(STEPS),
                            enabled=self.cfg["logging"]["progress"], stream=self.t._log)
        last_log = first
        last_log_time = last_ckpt = last_eval = start
        last_hist_updates = first.total(UPDATES)
        reason = None
        try:
            pool.start_all()
            while reason is None:
                time.sleep(_POLL_S)
                reason = self._handle_exits(pool)
                snap = self.stats.snapshot()
                self._collect_episodes()
                now = time.monotonic()
                reason = reason or self._stop_reason(snap, now)
                if now - last_log_time >= self.cfg["logging"]["log_every_s"]:
                    self._log_scalars(last_log, snap, now - last_log_time)
                    last_log, last_log_time = snap, now
                    last_hist_updates = self._maybe_histograms(snap, last_hist_updates)
                if now - last_ckpt >= tcfg["checkpoint_every_s"]:
                    self._checkpoint(snap, now)
                    last_ckpt = now
                if tcfg["eval_every_s"] > 0 and now - last_eval >= tcfg["eval_every_s"]:
                    self._evaluate(snap)
                    last_eval = now
                progress.update(snap.total(STEPS), snap.total(UPDATES), self.run_state.mean_return())
        finally:
            exits = pool.stop(tcfg["join_timeout_s"])
            progress.close()
        for ended in exits:
            if not ended.clean:
                self.t._say(ended.report())
        end = time.monotonic()
        self._collect_episodes()
        snap = self.stats.snapshot()
        self._log_scalars(last_log, snap, max(end - last_log_time, 1e-9))
        self._maybe_histograms(snap, last_hist_updates)  # a run shorter than one log interval gets them too
        self._checkpoint(snap, end, final=True)
        summary = self._summary(snap, end, first, reason, pool.restarts)
        if self.t._algorithm.evaluate_at_end:
            summary["evaluation"] = self._evaluate(snap).metrics
        exit_code = 1 if (self.failed or self.checkpoint_failed) else 0
        summary["exit_code"] = exit_code
        try:
            _write_json(self.t.run_dir / "summary.json", summary)
        except OSError as exc:
            self.t._say(f"could not write '{self.t.run_dir / 'summary.json'}': {exc.strerror or exc}")
            exit_code = summary["exit_code"] = 1
        if self.writer is not None:
            self._write_hparams(summary, snap)
            self.writer.close()
        return RunResult(exit_code, summary)

    def wall(self, now: float) -> float:
        return self.run_state.wall_offset + (now - self.start)

    # -- decisions --------------------------------------------------------------------------
    def _handle_exits(self, pool: WorkerPool) -> str | None:
        for ended in pool.poll():
            if ended.clean:
                continue
            self.t._say(ended.report())
            if self.tcfg["on_worker_failure"] == "restart" and pool.restarts < self.tcfg["max_restarts"]:
                pool.restart(ended.rank)
                self.t._say(f"restarting worker {ended.rank} with a new seed "
                            f"(restart {pool.restarts} of at most {self.tcfg['max_restarts']})")
                continue
            why = ("on_worker_failure: abort" if self.tcfg["on_worker_failure"] == "abort"
                   else f"max_restarts ({self.tcfg['max_restarts']}) used up")
            self.failed = ended.summary
            self.t._say(f"stopping the run ({why}): {self.failed}")
            return "worker failure"
        if pool.running == 0:
            return "workers finished"
        return None

    def _stop_reason(self, snap: Any, now: float) -> str | None:
        limit = self.cfg["algorithm"]["max_nonfinite_updates"]
        streaks = snap.counters[:, SKIP_STREAK]
        if streaks.max() >= limit:
            rank = int(streaks.argmax())
            self.failed = (f"worker {rank} produced {int(streaks[rank])} updates in a row with a non-finite loss "
                           f"or gradient (algorithm.max_nonfinite_updates = {limit}); none was applied to the "
                           f"shared parameters")
            self.t._say(f"stopping the run: {self.failed}")
            return "non-finite updates"
        if self.t._signal is not None:
            return signal.Signals(self.t._signal).name
        if self.eval_stop is not None:
            return self.eval_stop
        if self.run_state.solved_at is not None and self.tcfg["target_return"] is not None:
            return "target_return reached"
        if snap.total(STEPS) >= self.tcfg["total_steps"]:
            return "total_steps reached"
        if self.wall(now) >= self.tcfg["max_seconds"]:
            return "max_seconds reached"
        return None

    def _collect_episodes(self) -> None:
        returns, lengths = self.stats.new_episodes(self.seen)
        if returns.size == 0:
            return
        self.interval_returns.append(returns)
        self.interval_lengths.append(lengths)
        rs = self.run_state
        rs.window.extend(returns.tolist())
        target = self.tcfg["target_return"]
        if (rs.solved_at is None and target is not None and len(rs.window) == rs.window.maxlen
                and rs.mean_return() >= target):
            rs.solved_at = self.wall(time.monotonic())

    # -- logging ----------------------------------------------------------------------------
    def _log_scalars(self, before: Any, after: Any, seconds: float) -> None:
        returns = np.concatenate(self.interval_returns) if self.interval_returns else np.zeros(0)
        lengths = np.concatenate(self.interval_lengths) if self.interval_lengths else np.zeros(0)
        self.interval_returns, self.interval_lengths = [], []
        if self.writer is None:
            return
        values: dict[str, float] = {}
        if returns.size:
            values.update({"episode/return_mean": returns.mean(), "episode/return_min": returns.min(),
                           "episode/return_max": returns.max(), "episode/length_mean": lengths.mean()})
        mean = self.run_state.mean_return()
        if mean is not None:
            values["episode/return_window_mean"] = mean
        updates = after.total(UPDATES) - before.total(UPDATES)
        values["perf/env_steps_per_s"] = (after.total(STEPS) - before.total(STEPS)) / seconds
        values["perf/updates_per_s"] = updates / seconds
        if updates > 0:
            values["perf/policy_lag"] = (after.total(LAG_SUM) - before.total(LAG_SUM)) / updates
        values["perf/skipped_updates"] = after.total(SKIPPED)
        values.update({f"train/{k}": v for k, v in after.metric_means(before, self.stats.metrics).items()})
        self.writer.scalars(values, after.total(STEPS))

    def _maybe_histograms(self, snap: Any, last_updates: int) -> int:
        every = self.cfg["logging"]["histogram_every"]
        updates = snap.total(UPDATES)
        if self.writer is None or every == 0 or updates // every == last_updates // every:
            return last_updates
        for name, values in model_state(self.model).items():
            self.writer.histogram(f"params/{name}", values, snap.total(STEPS))
        return updates

    def _evaluate(self, snap: Any) -> Evaluation:
        result = self.t._algorithm.evaluate(self.model, self.cfg, self.tcfg["eval_episodes"], self.cfg["seed"])
        if self.writer is not None:
            self.writer.scalars({f"eval/{k}": v for k, v in result.metrics.items()}, snap.total(STEPS))
        if result.stop is not None and self.eval_stop is None:
            self.eval_stop = result.stop
            if self.run_state.solved_at is None:
                self.run_state.solved_at = self.wall(time.monotonic())
        return result

    def _write_hparams(self, summary: dict[str, Any], snap: Any) -> None:
        hparams = {key: get_path(self.cfg, key) for key in self.cfg["logging"]["hparams"]}
        metrics = {"final/mean_return": summary["mean_return"], "final/env_steps_per_s": summary["steps_per_second"]}
        if summary["solved_at_seconds"] is not None:
            metrics["final/solved_at_seconds"] = summary["solved_at_seconds"]
        metrics.update({f"final/{k}": v for k, v in summary.get("evaluation", {}).items()})
        metrics = {k: v for k, v in metrics.items() if v is not None}
        self.writer.hparams(hparams, metrics, snap.total(STEPS), run_name=self.t.run_dir.name)

    # -- checkpoints and summary --------------------------------------------------------------
    def _checkpoint(self, snap: Any, now: float, final: bool = False) -> None:
        rs = self.run_state
        state = {
            "algorithm": self.cfg["algorithm"]["name"],
            "model": model_state(self.model),
            "optimizer": self.optimizer.state_dict(),
            "run": {"env_steps": snap.total(STEPS), "updates": snap.total(UPDATES),
                    "episodes": snap.total(EPISODES), "skipped_updates": snap.total(SKIPPED),
                    "wall_seconds": self.wall(now), "solved_at_seconds": rs.solved_at,
                    "recent_returns": np.asarray(rs.window, dtype=np.float64),
                    "seed": self.cfg["seed"], "generations": list(rs.generations)},
        }
        try:
            save_checkpoint(checkpoint_path(self.t.run_dir), state)
        except CheckpointError as exc:
            if final or str(exc) != self.checkpoint_error:
                self.t._say(f"{'final ' if final else ''}checkpoint failed: {exc}")
            self.checkpoint_error = str(exc)
            self.checkpoint_failed = self.checkpoint_failed or final
            return
        if self.checkpoint_error is not None:
            self.t._say(f"checkpoint written again: '{checkpoint_path(self.t.run_dir)}'")
            self.checkpoint_error = None

    def _summary(self, snap: Any, end: float, first: Any, reason: str | None, restarts: int) -> dict[str, Any]:
        session_s = max(end - self.start, 1e-9)
        updates = snap.total(UPDATES) - first.total(UPDATES)
        return {
            "started_at": round(time.time() - (end - self.start), 3),
            "env_steps": snap.total(STEPS),
            "updates": snap.total(UPDATES),
            "episodes": snap.total(EPISODES),
            "wall_seconds": round(self.wall(end), 3),
            "mean_return": self.run_state.mean_return(),
            "target_window": self.tcfg["target_window"],
            "target_return": self.tcfg["target_return"],
            "solved_at_seconds": (None if self.run_state.solved_at is None
                                  else round(self.run_state.solved_at, 3)),
            "steps_per_second": round((snap.total(STEPS) - first.total(STEPS)) / session_s, 1),
            "policy_lag_mean": (snap.total(LAG_SUM) - first.total(LAG_SUM)) / updates if updates else None,
            "skipped_updates": snap.total(SKIPPED),
            "worker_restarts": restarts,
            "stop_reason": reason,
            "failure": self.failed,
        }
