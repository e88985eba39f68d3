"""The shared model played greedily from the main process while the workers train on: evaluations and videos.

Every `trainer.eval_every_s` the algorithm evaluates the model (logged under
eval/, offered to the best checkpoint with `trainer.keep_best`, which then
plays a copy of the parameters the workers do not change; an evaluation may
stop the run with its own target). Every `logging.video_every_s` it plays
one greedy episode (seeded with the run's seed, so each video starts from the
same state) in an environment that renders, up to
`logging.video_max_frames` frames, into videos/step-<env steps>.gif and
TensorBoard. Meanwhile the monitor neither logs nor checks its stop
conditions: a 500-step CartPole episode takes about 5 s. Both are bounded
(`trainer.eval_max_steps` steps an episode, `trainer.eval_max_seconds`, and,
but for the final ones, what is left of `max_seconds`), a stop signal cuts a
periodic one at once, and one that fails (an environment that raises, a full
disk) is reported, once until its message changes, while training goes on.
"""
from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, Callable, ContextManager

from framework.runtime.algorithm import Evaluation
from framework.runtime.run_stats import STEPS, StatsSnapshot
from framework.train.backends.base import Launch
from framework.train.best_checkpoint import BestCheckpoint
from framework.train.callbacks import RunHooks
from framework.train.carryover import Carryover
from framework.train.run_checkpoint import model_state
from framework.train.run_dir import write_atomically
from framework.train.stop_signals import Interrupted
from framework.train.video import GifFrames


class GreedyPlay:
    """A run's evaluations and videos (see the module docstring). `wall(now)` is the run's wall time at the
    monotonic time now; `checkpoint_state(snap, model)` what the best checkpoint holds."""

    def __init__(self, launch: Launch, writer: Any, hooks: RunHooks, best: BestCheckpoint | None,
                 videos_dir: Path, carryover: Carryover, *, say: Callable[[str], None],
                 interruptible: Callable[[], ContextManager[None]], wall: Callable[[float], float],
                 checkpoint_state: Callable[[StatsSnapshot, Any], dict[str, Any]]):
        self.algorithm, self.cfg, self.model = launch.algorithm, launch.config, launch.model
        self.tcfg = launch.config["trainer"]
        self.writer, self.hooks, self.best, self.videos_dir, self.carryover = writer, hooks, best, videos_dir, carryover
        self.say, self.interruptible, self.wall, self.checkpoint_state = say, interruptible, wall, checkpoint_state
        self.stop: str | None = None
        """The stop reason of the first evaluation that reached the algorithm's own target."""
        self.video_steps: int | None = None
        """The env steps of the last video."""
        self._errors: dict[str, str] = {}  # the last failure of each kind ("evaluation", "video")

    def _failed(self, what: str, exc: Exception, final: bool) -> None:
        """Report a failed evaluation or video, once until its message changes (always, for a final one)."""
        message = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        if final or message != self._errors.get(what):
            self.say(f"{'final ' if final else ''}{what} failed: {message}")
        self._errors[what] = message

    def _bounded_config(self, final: bool) -> dict[str, Any]:
        """The config an evaluation or video plays under: a periodic one ends by the end of max_seconds too."""
        if final:
            return self.cfg
        left = max(self.tcfg["max_seconds"] - self.wall(time.monotonic()), 1e-3)
        return {**self.cfg, "trainer": {**self.tcfg, "eval_max_seconds": min(self.tcfg["eval_max_seconds"], left)}}

    def evaluate(self, snap: StatsSnapshot, final: bool = False) -> Evaluation | None:
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
            self._failed("evaluation", exc, final)
            return None
        steps = snap.total(STEPS)
        if self.writer is not None:
            self.writer.scalars({f"eval/{k}": v for k, v in result.metrics.items()}, steps)
        if self.best is not None and self.best.offer(result.metrics, lambda: self.checkpoint_state(snap, model)):
            self.hooks.checkpointed(self.best.path, steps)
        if result.stop is not None and self.stop is None:
            self.stop = result.stop
            if self.carryover.solved_at is None:
                self.carryover.solved_at = self.wall(time.monotonic())
        self.hooks.evaluated(result, steps)
        return result

    def _model_copy(self) -> Any:
        """A model of this config holding a copy of the shared parameters, which the workers do not change."""
        model = self.algorithm.build_model(self.cfg)
        model.load_state_dict(model_state(self.model))
        return model

    def record_video(self, snap: StatsSnapshot, final: bool = False) -> None:
        """One greedy episode into videos/step-<env steps>.gif and TensorBoard (see the module docstring)."""
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
            self._failed("video", exc, final)
            return
        self.video_steps = steps
        if self.writer is not None:
            self.writer.gif("video/greedy_episode", gif, *frames.shape, steps)
