"""The monitor: the main process's loop over one run, the same for every backend.

It reads the workers' counters from shared memory (no queue traffic), logs
TensorBoard scalars and histograms, shows progress, checkpoints atomically,
evaluates every `trainer.eval_every_s`, records a video of a greedy episode
every `logging.video_every_s`, handles workers that end (abort, or restart up
to `max_restarts`, but not once as many have failed as the run has processes
before its first step; workers lost with their machine, a Ray node, are restarted
under the same budget or left out while others run), logs the backend's own
metrics and summary entries, and stops the run on total steps, wall time, the
target mean return, an evaluation's own target, too many non-finite updates
in a row, a backend that cannot go on (`BackendError`), or a stop signal
(which also ends the start of workers early), or a callback that asks to stop
or raises. Everything it works with is passed in: the launch (config,
algorithm, shared model, optimizer, statistics), the backend, the writer,
where the checkpoint, summary and videos go, the best checkpoint
(`trainer.keep_best`) and the callbacks (`RunHooks`: the user's, then the
trackers), which get what TensorBoard gets when it gets it.

A video is recorded here, in the main process, as evaluations are: the
algorithm plays one greedy episode (seeded with the run's seed, so each video
starts from the same state) in an environment that renders, up to
`logging.video_max_frames` frames; the GIF goes into videos/step-<env
steps>.gif and TensorBoard. Meanwhile the monitor neither logs nor checks
its stop conditions (the workers train on): a 500-step CartPole episode takes
about 5 s, so the next video is due `video_every_s` after the last one ended.
An evaluation or a video is bounded (`trainer.eval_max_steps` steps an
episode, `trainer.eval_max_seconds`, and, but for the final ones, what is left
of `max_seconds`), and a stop signal cuts a periodic one at once.
"""
from __future__ import annotations

import collections
import contextlib
import signal
import time
from pathlib import Path
from typing import Any, Callable, ContextManager, TextIO

import numpy as np

from framework.runtime.algorithm import Evaluation
from framework.train.backends.base import Backend, BackendError, Launch, WorkerExit
from framework.train.best_checkpoint import BestCheckpoint
from framework.train.callbacks import RunHooks
from framework.train.checkpoint import CheckpointError, save_checkpoint
from framework.train.config import get_path
from framework.runtime.formatting import finite_json
from framework.train.progress import Progress
from framework.train.run_checkpoint import checkpoint_state, model_state
from framework.train.run_dir import write_atomically
from framework.runtime.run_stats import EPISODES, LAG_SUM, SKIP_STREAK, SKIPPED, STEPS, UPDATES, RunStats
from framework.train.stop_signals import Interrupted
from framework.train.video import GifFrames

_POLL_S = 0.05


def _ranges(numbers: list[int]) -> str:
    """Sorted numbers as runs: [0, 1, 2, 5] -> '0-2, 5'."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


_ALIKE_LIMIT = 3


def exit_lines(exits: list[WorkerExit]) -> list[str]:
    """What to say about workers that did not end cleanly: each report, but one line for more than _ALIKE_LIMIT
    that ended the same way without a traceback (hundreds of workers stopped while still starting)."""
    lines: list[str] = []
    alike: dict[tuple[str, str], list[int]] = {}
    for ended in exits:
        if ended.clean:
            continue
        how = ended.summary.removeprefix(f"{ended.name} ")
        if ended.traceback or how == ended.summary:
            lines.append(ended.report())
        else:
            alike.setdefault((ended.role, how), []).append(ended.position)
    for (role, how), indices in alike.items():
        if len(indices) > _ALIKE_LIMIT:
            lines.append(f"{role}s {_ranges(indices)} ({len(indices)} in all) each {how}")
        else:
            lines += [f"{role} {index} {how}" for index in indices]
    return lines


def final_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """The final/ scalars of a run's summary (TensorBoard's hparams metrics, and the trackers')."""
    metrics = {"final/mean_return": summary["mean_return"], "final/env_steps_per_s": summary["steps_per_second"],
               "final/solved_at_seconds": summary["solved_at_seconds"]}
    metrics.update({f"final/{k}": v for k, v in summary.get("evaluation", {}).items()})
    return {k: v for k, v in metrics.items() if v is not None}


class RunState:
    """What a run carries across checkpoints and resumes: totals, the return window, seeds' generations.

    A resumed run starts with the saved window of returns but not with the saved `solved_at`: its target (which
    the resume may have changed: `--set trainer.target_return=HIGHER`) is reached only when episodes of its own
    bring the mean of the last `target_window` returns to it (`Monitor._collect_episodes` checks as episodes
    arrive), so a resume never stops at once on what an earlier session reached.
    """

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
        self.window.extend(float(r) for r in saved["recent_returns"])
        generations = list(saved["generations"])[:len(self.generations)]
        self.generations[:len(generations)] = generations

    def mean_return(self) -> float | None:
        return float(np.mean(self.window)) if self.window else None


class Monitor:
    """The main process's loop for one run."""

    def __init__(self, launch: Launch, backend: Backend, run: RunState, writer: Any,
                 checkpoint_file: Path, summary_file: Path, videos_dir: Path, *, say: Callable[[str], None],
                 stop_signal: Callable[[], int | None], progress_stream: TextIO | None = None,
                 interruptible: Callable[[], ContextManager[None]] = contextlib.nullcontext,
                 hooks: RunHooks | None = None, best: BestCheckpoint | None = None):
        self.launch, self.backend = launch, backend
        self.algorithm = launch.algorithm
        self.cfg = launch.config
        self.tcfg = launch.config["trainer"]
        self.model, self.optimizer, self.stats, self.run_state = launch.model, launch.optimizer, launch.stats, run
        self.plugin_state = launch.state
        self.writer = writer
        self.checkpoint_file, self.summary_file, self.videos_dir = checkpoint_file, summary_file, videos_dir
        self.run_dir = summary_file.parent
        self.hooks = hooks if hooks is not None else RunHooks()
        self.best = best
        self.say, self.stop_signal, self.progress_stream = say, stop_signal, progress_stream
        self.interruptible = interruptible
        self.target_return = self.algorithm.target_return(self.cfg)
        # Episodes already counted (a resumed run's restored total): their ring slots hold no returns.
        self.seen = self.stats.snapshot().counters[:, EPISODES].astype(np.int64)
        self.interval_returns: list[np.ndarray] = []
        self.interval_lengths: list[np.ndarray] = []
        self.failed: str | None = None
        self.checkpoint_failed = False
        self.checkpoint_error: str | None = None  # the last periodic failure, reported once until it changes
        self.eval_stop: str | None = None
        self.evaluation_error: str | None = None  # the last failed evaluation, reported once until it changes
        self.video_error: str | None = None  # the last failed video, the same
        self.video_steps: int | None = None  # env steps of the last video
        self.first_steps = self.stats.snapshot().total(STEPS)  # a resumed run's restored count
        self.failures_before_a_step = 0
        """Workers that failed before this session took its first step: as many as it has processes, and no
        restart is tried (an environment that fails in every worker's first reset)."""
        self.last_train_metrics: dict[str, float] = {}
        """The algorithm's per-update metrics (train/ in TensorBoard) averaged over the last logging interval that
        had updates: summary.json's `train`."""
        self.start = time.monotonic()

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Run until a stop condition; the summary (summary.json's, exit_code included)."""
        tcfg = self.tcfg
        backend = self.backend
        start = self.start = time.monotonic()
        first = self.stats.snapshot()
        progress = Progress(tcfg["total_steps"], first.total(STEPS), enabled=self.cfg["logging"]["progress"],
                            stream=self.progress_stream, max_seconds=tcfg["max_seconds"],
                            initial_seconds=self.wall(start), unit=self.algorithm.units[0],
                            show_return=self.algorithm.units[1] == "episodes")
        last_log = first
        last_log_time = last_ckpt = last_eval = last_video = start
        video_every_s = self.cfg["logging"]["video_every_s"]
        last_hist_updates = first.total(UPDATES)
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
                reason = reason or self._stop_reason(snap, now) or ("workers finished" if backend.running == 0 else None)
                # the moment the run decides to stop is logged: the return curve holds the window that reached
                # the target, whatever the episodes the workers finish after it do to the window
                if reason is not None or now - last_log_time >= self.cfg["logging"]["log_every_s"]:
                    asked = self._log_scalars(last_log, snap, now - last_log_time)
                    reason = reason or asked
                    last_log, last_log_time = snap, now
                    last_hist_updates = self._maybe_histograms(snap, last_hist_updates)
                if now - last_ckpt >= tcfg["checkpoint_every_s"]:
                    self._checkpoint(snap, now)
                    last_ckpt = now
                if tcfg["eval_every_s"] > 0 and now - last_eval >= tcfg["eval_every_s"]:
                    self._evaluate(snap)
                    last_eval = now
                if video_every_s > 0 and now - last_video >= video_every_s:
                    self._record_video(snap)
                    last_video = time.monotonic()
                progress.update(snap.total(STEPS), snap.total(UPDATES), self.run_state.mean_return(), self.wall(now))
        finally:
            exits = backend.stop(tcfg["join_timeout_s"])
            progress.close()
        for line in exit_lines(exits):
            self.say(line)
        end = time.monotonic()
        self._collect_episodes()
        snap = self.stats.snapshot()
        self._log_scalars(last_log, snap, max(end - last_log_time, 1e-9))
        self._maybe_histograms(snap, last_hist_updates)  # a run shorter than one log interval gets them too
        self._checkpoint(snap, end, final=True)
        summary = self._summary(snap, end, first, reason, backend.restarts)
        final_evaluation_failed = False
        if self.algorithm.evaluate_at_end or tcfg["eval_every_s"] > 0:  # the eval/ series ends at the final model
            result = self._evaluate(snap, final=True)
            final_evaluation_failed = result is None
            if result is not None:
                summary["evaluation"] = result.metrics
        if video_every_s > 0 and self.video_steps != snap.total(STEPS):  # the last video shows the final model
            self._record_video(snap, final=True)
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
        if self.writer is not None:
            self._write_hparams(summary, snap)
            self.writer.close()
        return summary

    def wall(self, now: float) -> float:
        return self.run_state.wall_offset + (now - self.start)

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
            return self._handle(backend.poll(), backend)
        except BackendError as exc:
            self.failed = str(exc)
            self.say(f"stopping the run: {self.failed}")
            return "backend failure"

    def _handle(self, exits: list[WorkerExit], backend: Backend) -> str | None:
        for ended in exits:
            if ended.clean:
                continue
            self.say(ended.report())
            if self.stats.snapshot().total(STEPS) == self.first_steps:
                self.failures_before_a_step += 1
            may_restart = (self.tcfg["on_worker_failure"] == "restart" and backend.restarts < self.tcfg["max_restarts"]
                           and self.failures_before_a_step < self.stats.workers)
            if may_restart:
                backend.restart(ended.rank)
                what = "the lost workers on another node" if ended.lost else ended.name
                self.say(f"restarting {what} with a new seed "
                         f"(restart {backend.restarts} of at most {self.tcfg['max_restarts']})")
                continue
            if ended.lost and backend.running > 0:  # the machine's fault, not the workers': go on without them
                continue
            if ended.lost:
                why = "no workers left"
            elif self.tcfg["on_worker_failure"] == "abort":
                why = "on_worker_failure: abort"
            elif self.failures_before_a_step >= self.stats.workers:
                why = (f"{self.failures_before_a_step} failures, as many as the run has processes, before its first "
                       f"step: a restart would fail alike")
            else:
                why = f"max_restarts ({self.tcfg['max_restarts']}) used up"
            self.failed = ended.summary
            self.say(f"stopping the run ({why}): {self.failed}")
            return "worker failure"
        return None

    def _callback_failure(self) -> str | None:
        """'callback failure' once a callback raised (its exception becomes the run's failure)."""
        if self.hooks.failure is None:
            return None
        self.failed = self.hooks.failure
        return "callback failure"

    def _stop_reason(self, snap: Any, now: float) -> str | None:
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
        if self.eval_stop is not None:
            return self.eval_stop
        if self.run_state.solved_at is not None and self.target_return is not None:
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
        target = self.target_return
        if (rs.solved_at is None and target is not None and len(rs.window) == rs.window.maxlen
                and rs.mean_return() >= target):
            rs.solved_at = self.wall(time.monotonic())

    # -- logging ----------------------------------------------------------------------------
    def _log_scalars(self, before: Any, after: Any, seconds: float) -> str | None:
        """The interval's scalars to TensorBoard and the callbacks; the stop reason when a callback asks to stop."""
        returns = np.concatenate(self.interval_returns) if self.interval_returns else np.zeros(0)
        lengths = np.concatenate(self.interval_lengths) if self.interval_lengths else np.zeros(0)
        self.interval_returns, self.interval_lengths = [], []
        train = after.metric_means(before, self.stats.metrics)
        if train:
            self.last_train_metrics = train
        if self.writer is None and not self.hooks:
            return None
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
        values.update({f"train/{k}": v for k, v in train.items()})
        values.update({f"perf/{k}": v for k, v in after.count_totals(self.stats.metrics, self.stats.counts).items()})
        values.update(self.algorithm.scalars(self.model, self.cfg))
        values.update(self.backend.metrics())
        if self.writer is not None:
            self.writer.scalars(values, after.total(STEPS))
        return self.hooks.log(values, after.total(STEPS))

    def _maybe_histograms(self, snap: Any, last_updates: int) -> int:
        every = self.cfg["logging"]["histogram_every"]
        updates = snap.total(UPDATES)
        if self.writer is None or every == 0 or updates // every == last_updates // every:
            return last_updates
        for name, values in model_state(self.model).items():
            self.writer.histogram(f"params/{name}", values, snap.total(STEPS))
        return updates

    def _bounded_config(self, final: bool) -> dict[str, Any]:
        """The config an evaluation or video plays under: a periodic one ends by the end of max_seconds too."""
        if final:
            return self.cfg
        left = max(self.tcfg["max_seconds"] - self.wall(time.monotonic()), 1e-3)
        return {**self.cfg, "trainer": {**self.tcfg, "eval_max_seconds": min(self.tcfg["eval_max_seconds"], left)}}

    def _evaluate(self, snap: Any, final: bool = False) -> Evaluation | None:
        """Evaluate the shared model (a copy of it with keep_best: see best_checkpoint) and log it; None when the
        evaluation raised (reported, training goes on) or a stop signal cut it (a periodic one: the run then
        stops)."""
        model = self.model if self.best is None else self._model_copy()
        try:
            with contextlib.nullcontext() if final else self.interruptible():
                result = self.algorithm.evaluate(model, self._bounded_config(final), self.tcfg["eval_episodes"],
                                                 self.cfg["seed"])
        except Interrupted:
            return None
        except Exception as exc:  # an environment that raises, no memory for the test set: the run's own problem
            message = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
            if final or message != self.evaluation_error:
                self.say(f"{'final ' if final else ''}evaluation failed: {message}")
            self.evaluation_error = message
            return None
        steps = snap.total(STEPS)
        if self.writer is not None:
            self.writer.scalars({f"eval/{k}": v for k, v in result.metrics.items()}, steps)
        if self.best is not None and self.best.offer(result.metrics,
                                                     lambda: self._checkpoint_state(snap, time.monotonic(), model)):
            self.hooks.checkpointed(self.best.path, steps)
        if result.stop is not None and self.eval_stop is None:
            self.eval_stop = result.stop
            if self.run_state.solved_at is None:
                self.run_state.solved_at = self.wall(time.monotonic())
        self.hooks.evaluated(result, steps)
        return result

    def _model_copy(self) -> Any:
        """A model of this config holding a copy of the shared parameters, which the workers do not change."""
        model = self.algorithm.build_model(self.cfg)
        model.load_state_dict(model_state(self.model))
        return model

    def _record_video(self, snap: Any, final: bool = False) -> None:
        """One greedy episode into videos/step-<env steps>.gif and TensorBoard (see the module docstring); a failure
        is reported, and training goes on."""
        steps = snap.total(STEPS)
        frames = GifFrames(self.cfg["logging"]["video_max_frames"])
        try:
            with contextlib.nullcontext() if final else self.interruptible():
                self.algorithm.record(self.model, self._bounded_config(final), 1, self.cfg["seed"], frames.add)
            gif = frames.gif()
            self.videos_dir.mkdir(exist_ok=True)
            write_atomically(self.videos_dir / f"step-{steps}.gif", lambda f: f.write(gif))
        except Interrupted:
            return
        except Exception as exc:  # an environment that raises, a full disk: the run's own problem
            message = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
            if final or message != self.video_error:
                self.say(f"{'final ' if final else ''}video failed: {message}")
            self.video_error = message
            return
        self.video_steps = steps
        if self.writer is not None:
            self.writer.gif("video/greedy_episode", gif, *frames.shape, steps)

    def _write_hparams(self, summary: dict[str, Any], snap: Any) -> None:
        hparams = {key: get_path(self.cfg, key) for key in self.cfg["logging"]["hparams"]}
        self.writer.hparams(hparams, final_metrics(summary), snap.total(STEPS), run_name=self.run_dir.name)

    # -- checkpoints and summary --------------------------------------------------------------
    def _checkpoint_state(self, snap: Any, now: float, model: Any) -> dict[str, Any]:
        """What a checkpoint of the run holds at snap, with model's parameters."""
        rs = self.run_state
        return checkpoint_state(self.cfg["algorithm"]["name"], model, self.optimizer, {
            "env_steps": snap.total(STEPS), "updates": snap.total(UPDATES), "episodes": snap.total(EPISODES),
            "skipped_updates": snap.total(SKIPPED), "wall_seconds": self.wall(now), "solved_at_seconds": rs.solved_at,
            "recent_returns": np.asarray(rs.window, dtype=np.float64), "seed": self.cfg["seed"],
            "generations": list(rs.generations)}, self.plugin_state)

    def _checkpoint(self, snap: Any, now: float, final: bool = False) -> None:
        try:
            save_checkpoint(self.checkpoint_file, self._checkpoint_state(snap, now, self.model))
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
            "target_window": self.run_state.window.maxlen,
            "target_return": self.target_return,
            "solved_at_seconds": (None if self.run_state.solved_at is None
                                  else round(self.run_state.solved_at, 3)),
            "steps_per_second": round((snap.total(STEPS) - first.total(STEPS)) / session_s, 1),
            "policy_lag_mean": (snap.total(LAG_SUM) - first.total(LAG_SUM)) / updates if updates else None,
            "skipped_updates": snap.total(SKIPPED),
            "train": self.last_train_metrics,
            "counts": snap.count_totals(self.stats.metrics, self.stats.counts),
            "worker_restarts": restarts,
            "stop_reason": reason,
            "failure": self.failed,
            **self.backend.summary(),
        }
