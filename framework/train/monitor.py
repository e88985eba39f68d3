"""The monitor: the main process's loop over one run, the same for every backend.

It reads the workers' counters from shared memory (no queue traffic) every
_POLL_S and, in this order: handles workers that end (`worker_exits`:
report, restart or stop), collects finished episodes into the run's window
(`carryover`), decides whether to stop, logs the interval when due or when
it decided to stop (`run_log`: TensorBoard and the callbacks), runs its
periodic tasks when due (`periodic`: the checkpoint every
`trainer.checkpoint_every_s`, an evaluation every `trainer.eval_every_s`, a
video every `logging.video_every_s`: `greedy_play`) and shows progress.

It stops the run on total steps, wall time, the target mean return, an
evaluation's own target, too many non-finite updates in a row, a backend
that cannot go on (`BackendError`), a stop signal (which also ends the start
of workers early), a callback that asks to stop or raises, workers that
failed beyond what `worker_exits` restarts, or all workers finished. Then it
stops the workers, logs, checkpoints, evaluates and records a last time
(the final model), and writes summary.json. Everything it works with is
passed in: the launch (config, algorithm, shared model, optimizer,
statistics), the backend, the carryover, the writer, where the checkpoint,
summary and videos go, the best checkpoint (`trainer.keep_best`) and the
callbacks (`RunHooks`: the user's, then the trackers).
"""
from __future__ import annotations

import contextlib
import signal
import time
from pathlib import Path
from typing import Any, Callable, ContextManager, TextIO

import numpy as np

from framework.runtime import profile
from framework.runtime.formatting import finite_json
from framework.runtime.run_stats import EPISODES, LAG_SUM, SKIP_STREAK, SKIPPED, STEPS, UPDATES, StatsSnapshot
from framework.train.backends.base import Backend, BackendError, Launch
from framework.train.best_checkpoint import BestCheckpoint
from framework.train.callbacks import RunHooks
from framework.train.carryover import Carryover
from framework.train.checkpoint import CheckpointError, save_checkpoint
from framework.train.greedy_play import GreedyPlay
from framework.train.periodic import Periodic
from framework.train.progress import Progress
from framework.train.run_checkpoint import checkpoint_state
from framework.train.run_dir import write_atomically
from framework.train.run_log import RunLog
from framework.train.worker_exits import Restarts, exit_lines

_POLL_S = 0.05


class Monitor:
    """The main process's loop for one run."""

    def __init__(self, launch: Launch, backend: Backend, carryover: Carryover, writer: Any,
                 checkpoint_file: Path, summary_file: Path, videos_dir: Path, *, say: Callable[[str], None],
                 stop_signal: Callable[[], int | None], progress_stream: TextIO | None = None,
                 interruptible: Callable[[], ContextManager[None]] = contextlib.nullcontext,
                 hooks: RunHooks | None = None, best: BestCheckpoint | None = None):
        self.launch, self.backend, self.carryover = launch, backend, carryover
        self.algorithm, self.cfg, self.tcfg = launch.algorithm, launch.config, launch.config["trainer"]
        self.stats = launch.stats
        self.checkpoint_file, self.summary_file = checkpoint_file, summary_file
        self.run_dir = summary_file.parent
        self.hooks = hooks if hooks is not None else RunHooks()
        self.best = best
        self.say, self.stop_signal, self.progress_stream = say, stop_signal, progress_stream
        self.target_return = self.algorithm.target_return(self.cfg)
        # Episodes already counted (a resumed run's restored total): their ring slots hold no returns.
        self.seen = self.stats.snapshot().counters[:, EPISODES].astype(np.int64)
        self.failed: str | None = None
        self.checkpoint_failed = False
        self.checkpoint_error: str | None = None  # the last periodic failure, reported once until it changes
        self.restarts = Restarts(self.tcfg, self.stats.workers, lambda: self.stats.snapshot().total(STEPS), say)
        self.writer = writer
        self.start = time.monotonic()
        self.log: RunLog | None = None
        """The run's logging, from the start of `run` on."""
        self.play = GreedyPlay(launch, writer, self.hooks, best, videos_dir, carryover, say=say,
                               interruptible=interruptible, wall=self.wall,
                               checkpoint_state=lambda snap, model: self._checkpoint_state(snap, time.monotonic(),
                                                                                           model))

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Run until a stop condition; the summary (summary.json's, exit_code included)."""
        tcfg, backend = self.tcfg, self.backend
        start = self.start = time.monotonic()
        first = self.stats.snapshot()
        self.log = RunLog(self.launch, backend, self.writer, self.hooks, self.carryover, first, start)
        progress = Progress(tcfg["total_steps"], first.total(STEPS), enabled=self.cfg["logging"]["progress"],
                            stream=self.progress_stream, max_seconds=tcfg["max_seconds"],
                            initial_seconds=self.wall(start), unit=self.algorithm.units[0],
                            show_return=self.algorithm.units[1] == "episodes")
        periodic = [Periodic(tcfg["checkpoint_every_s"], self._checkpoint, start),
                    Periodic(tcfg["eval_every_s"], self.play.evaluate, start),
                    Periodic(self.cfg["logging"]["video_every_s"], self.play.record_video, start, from_end=True)]
        reason = None
        try:
            self.hooks.start(self.run_dir, first.total(STEPS))
            reason = self._callback_failure() or self._start_workers(backend)
            while reason is None:
                time.sleep(_POLL_S)
                reason = self._handle_exits(backend)
                snap = self.stats.snapshot()
                self._collect_episodes()
                now = time.monotonic()
                reason = (reason or self._stop_reason(snap, now)
                          or ("workers finished" if backend.running == 0 else None))
                # the moment the run decides to stop is logged: the return curve holds the window that reached
                # the target, whatever the episodes the workers finish after it do to the window
                if reason is not None or self.log.due(now):
                    asked = self.log.write(snap, now)
                    reason = reason or asked
                for task in periodic:
                    task.run_if_due(now, snap)
                progress.update(snap.total(STEPS), snap.total(UPDATES), self.carryover.mean_return(), self.wall(now))
        finally:
            exits = backend.stop(tcfg["join_timeout_s"])
            progress.close()
        for line in exit_lines(exits):
            self.say(line)
        return self._end(first, reason)

    def _end(self, first: StatsSnapshot, reason: str | None) -> dict[str, Any]:
        """The end of a run whose workers stopped: the last interval logged (with histograms: a run shorter than one
        log interval gets them too), the last checkpoint, evaluation and video (of the final model), summary.json;
        the summary."""
        end = time.monotonic()
        self._collect_episodes()
        snap = self.stats.snapshot()
        self.log.write(snap, end)
        self._checkpoint(snap, final=True)
        summary = self._summary(snap, end, first, reason)
        final_evaluation_failed = False
        if self.algorithm.evaluate_at_end or self.tcfg["eval_every_s"] > 0:  # the eval/ series ends at the final model
            result = self.play.evaluate(snap, final=True)
            final_evaluation_failed = result is None
            if result is not None:
                summary["evaluation"] = result.metrics
        if self.cfg["logging"]["video_every_s"] > 0 and self.play.video_steps != snap.total(STEPS):
            self.play.record_video(snap, final=True)  # the last video shows the final model
        if self.best is not None:
            summary["best_checkpoint"] = self.best.summary()
        self.failed = summary["failure"] = self.failed or self.hooks.failure
        summary["exit_code"] = 1 if (self.failed or self.checkpoint_failed or final_evaluation_failed) else 0
        self.hooks.end(summary)  # a callback that raises here fails the run too
        try:
            text = (finite_json(summary) + "\n").encode()
            write_atomically(self.summary_file, lambda f: f.write(text))
        except OSError as exc:
            self.say(f"could not write '{self.summary_file}': {exc.strerror or exc}")
            summary["exit_code"] = 1
        self.log.close(summary, snap, self.run_dir.name)
        return summary

    def wall(self, now: float) -> float:
        return self.carryover.wall_offset + (now - self.start)

    # -- decisions --------------------------------------------------------------------------
    def _start_workers(self, backend: Backend) -> str | None:
        """Start the workers, no further one once a stop signal came or max_seconds are spent (starting a
        thousand takes minutes on two cores); a failure to start one stops the run."""
        try:
            backend.start(cancelled=lambda: (self.stop_signal() is not None
                                             or self.wall(time.monotonic()) >= self.tcfg["max_seconds"]))
        except OSError as exc:
            self.failed = f"a worker could not be started: {exc.strerror or exc}"
            self.say(f"stopping the run: {self.failed}")
            return "worker failure"
        return None

    def _handle_exits(self, backend: Backend) -> str | None:
        try:
            failure = self.restarts.handle(backend.poll(), backend)
        except BackendError as exc:
            self.failed = str(exc)
            self.say(f"stopping the run: {self.failed}")
            return "backend failure"
        if failure is None:
            return None
        self.failed = failure
        return "worker failure"

    def _callback_failure(self) -> str | None:
        """'callback failure' once a callback raised (its exception becomes the run's failure)."""
        if self.hooks.failure is None:
            return None
        self.failed = self.hooks.failure
        return "callback failure"

    def _stop_reason(self, snap: StatsSnapshot, now: float) -> str | None:
        if failed := self._callback_failure():
            return failed
        limit = self.cfg["algorithm"]["max_nonfinite_updates"]
        streaks = snap.counters[:, SKIP_STREAK]
        if streaks.max() >= limit:
            rank = int(streaks.argmax())
            role, index = self.launch.role_of(rank)
            self.failed = (f"{role.name} {index} produced {int(streaks[rank])} updates in a row with a non-finite "
                           f"loss or gradient (algorithm.max_nonfinite_updates = {limit}); none was applied to the "
                           f"shared parameters")
            self.say(f"stopping the run: {self.failed}")
            return "non-finite updates"
        signum = self.stop_signal()
        if signum is not None:
            return signal.Signals(signum).name
        if self.play.stop is not None:
            return self.play.stop
        if self.carryover.solved_at is not None and self.target_return is not None:
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
        self.log.add_episodes(returns, lengths)
        self.carryover.add_returns(returns, self.target_return, self.wall(time.monotonic()))

    # -- checkpoints and summary --------------------------------------------------------------
    def _checkpoint_state(self, snap: StatsSnapshot, now: float, model: Any) -> dict[str, Any]:
        """What a checkpoint of the run holds at snap, with model's parameters."""
        launch = self.launch
        return checkpoint_state(self.cfg["algorithm"]["name"], model, launch.optimizer,
                                self.carryover.saved(snap, self.wall(now), self.cfg["seed"]), launch.state)

    def _checkpoint(self, snap: StatsSnapshot, final: bool = False) -> None:
        """Write checkpoints/checkpoint.npz; a failure is said once until it changes (a final one fails the run)."""
        try:
            save_checkpoint(self.checkpoint_file, self._checkpoint_state(snap, time.monotonic(), self.launch.model))
        except CheckpointError as exc:
            if final or str(exc) != self.checkpoint_error:
                self.say(f"{'final ' if final else ''}checkpoint failed: {exc}")
            self.checkpoint_error = str(exc)
            self.checkpoint_failed = self.checkpoint_failed or final
            return
        if self.checkpoint_error is not None:
            self.say(f"checkpoint written again: '{self.checkpoint_file}'")
            self.checkpoint_error = None
        self.hooks.checkpointed(self.checkpoint_file, snap.total(STEPS))

    @staticmethod
    def _profile(snap: StatsSnapshot) -> dict[str, Any]:
        """summary.json's `profile`: this session's seconds per phase summed over the worker processes, and their
        wall time (runtime.profile)."""
        seconds, wall = profile.totals(snap.profile)
        return {"seconds": {name: round(value, 3) for name, value in seconds.items()}, "wall_seconds": round(wall, 3)}

    def _summary(self, snap: StatsSnapshot, end: float, first: StatsSnapshot, reason: str | None) -> dict[str, Any]:
        session_s = max(end - self.start, 1e-9)
        updates = snap.total(UPDATES) - first.total(UPDATES)
        carried = self.carryover
        return {
            "started_at": round(time.time() - (end - self.start), 3),
            "env_steps": snap.total(STEPS),
            "updates": snap.total(UPDATES),
            "episodes": snap.total(EPISODES),
            "wall_seconds": round(self.wall(end), 3),
            "mean_return": carried.mean_return(),
            "target_window": carried.window.maxlen,
            "target_return": self.target_return,
            "solved_at_seconds": None if carried.solved_at is None else round(carried.solved_at, 3),
            "steps_per_second": round((snap.total(STEPS) - first.total(STEPS)) / session_s, 1),
            "policy_lag_mean": (snap.total(LAG_SUM) - first.total(LAG_SUM)) / updates if updates else None,
            "skipped_updates": snap.total(SKIPPED),
            "train": self.log.train_metrics,
            "counts": snap.count_totals(self.stats.metrics, self.stats.counts),
            "profile": self._profile(snap),
            "worker_restarts": self.backend.restarts,
            "stop_reason": reason,
            "failure": self.failed,
            **self.backend.summary(),
        }
