"""The `train`, `evaluate` and `tune` commands.

    train --config PATH [--set key.path=value ...] [--logdir DIR] [--callback module:Name ...]
    train --env ID [--set key.path=value ...] [--logdir DIR] [--callback module:Name ...]
    train --resume RUN_DIR [--set key.path=value ...] [--trust-code] [--callback module:Name ...]
    evaluate --run RUN_DIR [--checkpoint latest|best] [--episodes N] [--seed S] [--max-steps N] [--max-seconds S]
             [--record FILE.gif|FILE.mp4] [--trust-code]
    evaluate --run RUN_DIR [--checkpoint latest|best] --export FILE.safetensors [--trust-code]
    tune --config C --space SPACE.yaml --trials N [--jobs J] [--set key.path=value ...] [--logdir D] [--name NAME]
         [--storage URL] [--metric mean_return|eval] [--pruner median|none]

`--trust-code` lets a run directory that this user's train did not write
import the code its config names (framework.train.trust).

A bad argument, config or checkpoint, or a run refused at start-up (no room),
ends with exit code 2 and one line on stderr naming what was wrong and what
is allowed, and leaves nothing behind; a run that fails ends with exit code 1;
a stop signal before the run started, with 128 + its number (see
`stop_signals` for every phase). `tune` (see `tuning`) ends with 0 once a
trial of the study completed (1 before), and with 128 + the number of a stop
signal that ended it early.
"""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Callable, NoReturn, Sequence, TypeVar

from framework import algorithms
from framework.runtime.algorithm import Evaluation, FrameSink
from framework.train import shipped_configs, video
from framework.train.checkpoint import CheckpointError
from framework.train.config import (CORE_SCHEMA, MAX_EVAL_EPISODES, ConfigError, apply_overrides, load_config,
                                    parse_override, string_override)
from framework.train.outcome import next_steps, outcome_line, profile_line
from framework.train.progress import Output, reopen_closed_streams
from framework.train.resume import resumed_config
from framework.train.run_checkpoint import CHECKPOINTS
from framework.train.run_dir import check_replaceable
from framework.runtime.schema import one_line, printable, short_repr
from framework.train.startup import RunError
from framework.train.stop_signals import Interrupted, StopSignals
from sharing.room import format_bytes

MAX_SEED = 2**31 - 1
MAX_OVERRIDES = 1000
"""`--set` arguments one command may give."""
MAX_MESSAGE = 2000
"""Characters of an error line (a message that quotes a long value is cut in the middle)."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line (exit 2)."""

    def error(self, message: str) -> NoReturn:
        usage = " ".join(self.format_usage().split()[1:])  # drop "usage:", join wrapped lines
        self.exit(2, f"{self.prog}: error: {printable(message, limit=300)} (usage: {usage})\n")


def _path(text: str) -> str:
    """An argparse type: a path, which may not be empty (Path('') would be the current directory)."""
    if not text:
        raise argparse.ArgumentTypeError("got ''; allowed: a path")
    return text


def _fail(command: str, message: str) -> None:
    Output(sys.stderr).line(f"{command}: {printable(one_line(message), limit=MAX_MESSAGE)}")


T = TypeVar("T")


def _unless_refused(command: str, signals: StopSignals, attempt: Callable[[], T]) -> tuple[T | None, int]:
    """(attempt(), 0) once no stop signal has come; (None, exit code) when it was refused (2: a bad config or
    checkpoint, no room) or a stop signal came before the run started (128 + its number), said in one line."""
    try:
        signals.check()
        return attempt(), 0
    except (ConfigError, CheckpointError, RunError) as exc:
        _fail(command, f"error: {exc}")
        return None, 2
    except Interrupted as exc:
        _fail(command, str(exc))
        return None, 128 + exc.signum


def _record(path: Path, play: Callable[[FrameSink], Evaluation]) -> Evaluation:
    """video.write_video(path, play), its result's text followed by what was written; ConfigError when path cannot
    be written (a missing or read-only directory)."""
    try:
        result, frames = video.write_video(path, play)
        return Evaluation(result.metrics, f"{result.text}\nwrote {path}: {frames} frames at {video.FPS} a second, "
                                          f"{format_bytes(path.stat().st_size)}", result.stop)
    except OSError as exc:
        raise ConfigError(f"--record: cannot write '{printable(str(path))}' ({exc.strerror or exc}); allowed: "
                          f"a file in a writable directory") from None


def _new_run_config(path: str | None, env_id: str | None, overrides: list[str]) -> tuple[str | Path, list[str]]:
    """The config file and overrides of a new run: --config as given (--env setting env.id), or the one --env picks."""
    if env_id is None:
        return path, overrides
    quoted = string_override("env.id", env_id)
    if path is not None:
        return path, [quoted, *overrides]
    kwargs = apply_overrides({"env": {"kwargs": {}}}, [text for text in overrides
                                                      if parse_override(text)[0][:2] == ["env", "kwargs"]])
    choice = shipped_configs.choose(env_id, kwargs["env"]["kwargs"])
    Output(sys.stderr).line(shipped_configs.describe(choice))
    return choice.path, [*choice.overrides, *overrides]


def train_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `train`; returns the exit code."""
    reopen_closed_streams()
    parser = _Parser(prog="train", description="Train with asynchronous workers on a shared model.")
    parser.add_argument("--config", type=_path, help="YAML experiment config (e.g. configs/a3c.yaml)")
    parser.add_argument("--env", metavar="ID",
                        help="train on this environment id: with --config, sets env.id; alone, with the shipped "
                             "config for ID, else the default for its spaces")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                        help="override one config value (parsed as YAML); repeatable")
    parser.add_argument("--logdir", type=_path,
                        help="parent directory of the run directory (overrides logging.logdir)")
    parser.add_argument("--resume", type=_path, metavar="RUN_DIR",
                        help="continue the run in RUN_DIR from its checkpoint")
    parser.add_argument("--trust-code", action="store_true",
                        help="with --resume: import the code RUN_DIR's config names (env.id, model.factory, "
                             "algorithm.name as module:name) although this user's train did not write it")
    parser.add_argument("--callback", dest="callbacks", action="append", default=[], metavar="MODULE:NAME",
                        help="a framework.train.Callback subclass (or instance) to call during the run, imported as "
                             "env.id's module:Name is; repeatable")
    with StopSignals() as signals:
        from framework.train.callbacks import load_callback  # the bulk of the imports, with signals recorded
        from framework.train.run_checkpoint import checkpoint_path
        from framework.train.trainer import Trainer
        args = parser.parse_args(argv)
        if args.resume is not None and args.env is not None:
            parser.error("--env applies to new runs only; a resumed run keeps its environment")
        if (args.config is None and args.env is None) == (args.resume is None):
            parser.error("give either --config PATH or --env ID (a new run) or --resume RUN_DIR (continue one)")
        if args.resume is not None and args.logdir is not None:
            parser.error("--logdir applies to new runs only; a resumed run continues in its RUN_DIR")
        if args.resume is None and args.trust_code:
            parser.error("--trust-code applies to --resume RUN_DIR only (a config given with --config is yours)")
        if len(args.overrides) > MAX_OVERRIDES:
            parser.error(f"argument --set: given {len(args.overrides)} times; allowed: at most {MAX_OVERRIDES}")
        overrides = list(args.overrides)
        if args.logdir is not None:
            overrides.append(string_override("logging.logdir", args.logdir))

        def start() -> Trainer:
            callbacks = [load_callback(spec) for spec in args.callbacks]
            if args.resume is not None:
                return Trainer(resumed_config(args.resume, overrides, args.trust_code), args.resume, resume=True,
                               signals=signals, callbacks=callbacks)
            return Trainer(load_config(*_new_run_config(args.config, args.env, overrides)), signals=signals,
                           callbacks=callbacks)

        trainer, code = _unless_refused("train", signals, start)
        result, code = (None, code) if trainer is None else _unless_refused("train", signals, trainer.run)
        if result is None:
            return code
    summary = result.summary
    after = next_steps(summary, trainer.config, trainer.run_dir, checkpoint_path(trainer.run_dir),
                       trainer.needs_trust_code)
    profiled = profile_line(summary)
    Output(sys.stdout).line(f"{trainer.run_dir}: {outcome_line(summary, trainer.algorithm, trainer.config)}\n"
                            f"{'' if profiled is None else profiled + chr(10)}{after}")
    return result.exit_code


def evaluate_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `evaluate`: loads a run's checkpoint and evaluates it; returns the exit code."""
    reopen_closed_streams()
    parser = _Parser(prog="evaluate", description="Evaluate the checkpoint of a training run.")
    parser.add_argument("--run", type=_path, required=True, metavar="RUN_DIR", help="a run directory made by train")
    parser.add_argument("--checkpoint", choices=tuple(CHECKPOINTS), default="latest", metavar="latest|best",
                        help="the run's latest checkpoint (default), or its best one (trainer.keep_best)")
    parser.add_argument("--episodes", type=int, default=10,
                        help=f"number of greedy episodes, 1 to {MAX_EVAL_EPISODES} (default 10)")
    parser.add_argument("--seed", type=int, default=12345, help=f"seed of the evaluation environments, 0 to {MAX_SEED}")
    parser.add_argument("--max-steps", type=int, metavar="N",
                        help="cut each episode after N steps (default: the run's trainer.eval_max_steps)")
    parser.add_argument("--max-seconds", type=float, metavar="S",
                        help="cut the episodes after S seconds (default: the run's trainer.eval_max_seconds)")
    parser.add_argument("--record", type=_path, metavar="FILE",
                        help="write the episodes, played one after another, as a video: an animated GIF (.gif) or "
                             "an MP4 (.mp4); needs the 'video' extra")
    parser.add_argument("--export", type=_path, metavar="FILE",
                        help="write the policy (weights by their PyTorch names, observation statistics under "
                             "obs_normalization.) as a .safetensors file, instead of evaluating")
    parser.add_argument("--trust-code", action="store_true",
                        help="import the code RUN_DIR's config names (env.id, model.factory, algorithm.name as "
                             "module:name) although this user's train did not write it")
    args = parser.parse_args(argv)
    if args.export is not None and args.record is not None:
        parser.error("argument --export: not with --record (--export writes the policy and plays no episode)")
    if not 1 <= args.episodes <= MAX_EVAL_EPISODES:
        parser.error(f"argument --episodes: got {short_repr(args.episodes)}; allowed: an integer from 1 to "
                     f"{MAX_EVAL_EPISODES}")
    if not 0 <= args.seed <= MAX_SEED:
        parser.error(f"argument --seed: got {short_repr(args.seed)}; allowed: an integer from 0 to {MAX_SEED}")
    bounds = {"eval_max_steps": args.max_steps, "eval_max_seconds": args.max_seconds}
    for key, value in bounds.items():
        if value is not None:  # checked as the config key it sets
            try:
                CORE_SCHEMA["trainer"][key].validate(key, value)
            except ConfigError as exc:
                parser.error(f"argument --{key[5:].replace('_', '-')}: got {short_repr(value)}; allowed: "
                             f"{str(exc).split('allowed: ', 1)[1]}")
    record = None if args.record is None else Path(args.record)
    if record is not None and record.suffix.lower() not in video.SUFFIXES:
        parser.error(f"argument --record: got {printable(repr(args.record))}; allowed: a file name ending in "
                     f"{' or '.join(video.SUFFIXES)}")
    try:
        for what, path in (("--record", record), ("--export", args.export)):
            if path is not None:
                check_replaceable(Path(path), what)
    except ConfigError as exc:
        _fail("evaluate", f"error: {exc}")
        return 2
    if record is not None and (missing := video.missing_extra()):
        _fail("evaluate", f"error: --record: {missing}")
        return 2
    run_dir = Path(args.run)
    from framework.train.policy import load_policy, load_trained  # imported where train imports the trainer
    try:
        if args.export is not None:
            policy = load_policy(run_dir, checkpoint=args.checkpoint, trust_code=args.trust_code)
            path = policy.export(args.export)
            statistics = ", its observation statistics as obs_normalization.*" * policy.config["env"]["normalize_obs"]
            result = Evaluation({}, f"wrote {path}: the policy's weights by their PyTorch names{statistics} "
                                    f"(read it with safetensors.torch.load_file)")
        else:
            config, algorithm, model = load_trained(run_dir, checkpoint=args.checkpoint, trust_code=args.trust_code)
            config["trainer"].update({key: value for key, value in bounds.items() if value is not None})
            if record is not None and not algorithm.can_record():
                raise ConfigError(f"--record: run '{printable(str(run_dir))}' trained algorithm {algorithm.name}, "
                                  f"which has no environment to record; allowed: runs of an algorithm with one "
                                  f"({', '.join(n for n in algorithms.names() if algorithms.get(n).can_record())})")
            with StopSignals() as signals, signals.raising():  # a recording's temp file goes with the play it cuts
                if record is None:
                    result = algorithm.evaluate(model, config, args.episodes, args.seed)
                else:
                    result = _record(record,
                                     lambda frames: algorithm.record(model, config, args.episodes, args.seed,
                                                                      signals.checked(frames)))
    except (ConfigError, CheckpointError) as exc:
        _fail("evaluate", f"error: {exc}")
        return 2
    except (KeyboardInterrupt, Interrupted) as exc:
        signum = getattr(exc, "signum", signal.SIGINT)
        _fail("evaluate", f"stopped by {signal.Signals(signum).name}" + ("; nothing was written" if record else ""))
        return 128 + signum
    except Exception as exc:  # an environment that raises while it plays: reported as train reports evaluations
        _fail("evaluate", f"evaluation failed: {type(exc).__name__}: {' '.join(str(exc).split())}"
                          + ("; nothing was written" if record else ""))
        return 1
    Output(sys.stdout).line(result.text)
    return 0


def tune_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `tune`: trials of a config on Optuna (framework.train.tuning); returns the exit code."""
    reopen_closed_streams()
    parser = _Parser(prog="tune", description="Search hyperparameters with Optuna: each trial is a run of the config.")
    parser.add_argument("--config", type=_path, required=True, help="YAML experiment config (e.g. configs/a3c.yaml)")
    parser.add_argument("--space", type=_path, required=True, metavar="SPACE.yaml",
                        help="config keys and their distributions, e.g. optimizer.lr: {type: float, low: 1e-4, "
                             "high: 1e-2, log: true}")
    parser.add_argument("--trials", type=int, required=True, metavar="N",
                        help="trials the study should hold, complete or pruned (more continue a study)")
    parser.add_argument("--jobs", type=int, default=1, metavar="J",
                        help="trials at once, each a process with its own workers (J x trainer.workers should fit "
                             "the cores; default 1)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                        help="override one config value for every trial (parsed as YAML); repeatable")
    parser.add_argument("--logdir", type=_path, help="parent of the study directory (overrides logging.logdir)")
    parser.add_argument("--name", help="the study's name and directory (default: tune-<experiment>)")
    parser.add_argument("--storage", metavar="URL",
                        help="an Optuna RDB storage URL (default: SQLite in the study directory)")
    parser.add_argument("--metric", choices=("mean_return", "eval"), default="mean_return",
                        help="what a trial maximises: the mean return of its last episodes (default) or its final "
                             "evaluation's (needs trainer.eval_every_s > 0)")
    parser.add_argument("--pruner", choices=("median", "none"), default="median",
                        help="stop trials below the median of earlier ones at the same log interval (default)")
    with StopSignals() as signals:
        from framework.train import tuning  # the bulk of the imports, with signals recorded
        args = parser.parse_args(argv)
        if len(args.overrides) > MAX_OVERRIDES:
            parser.error(f"argument --set: given {len(args.overrides)} times; allowed: at most {MAX_OVERRIDES}")
        for option, value, high in (("--trials", args.trials, tuning.MAX_TRIALS),
                                    ("--jobs", args.jobs, tuning.MAX_JOBS)):
            if not 1 <= value <= high:
                parser.error(f"argument {option}: got {value}; allowed: an integer from 1 to {high}")
        plan, code = _unless_refused("tune", signals, lambda: tuning.plan(
            args.config, args.space, args.trials, jobs=args.jobs, overrides=args.overrides, logdir=args.logdir,
            name=args.name, storage=args.storage, metric=args.metric, pruner=args.pruner))
        result, code = (None, code) if plan is None else _unless_refused(
            "tune", signals, lambda: tuning.run_study(plan, signals))
        if result is None:
            return code
    Output(sys.stdout).line(tuning.outcome(result, plan))
    if result.stopped_by is not None:
        return 128 + signal.Signals[result.stopped_by]
    return 0 if result.best_value is not None else 1
