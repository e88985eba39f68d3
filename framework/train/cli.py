"""The `train` and `evaluate` commands.

    train --config PATH [--set key.path=value ...] [--logdir DIR]
    train --env ID [--set key.path=value ...] [--logdir DIR]
    train --resume RUN_DIR [--set key.path=value ...] [--trust-code]
    evaluate --run RUN_DIR [--episodes N] [--seed S] [--max-steps N] [--max-seconds S] [--record FILE.gif|FILE.mp4]
             [--trust-code]
    evaluate --run RUN_DIR --export FILE.safetensors [--trust-code]

`--trust-code` lets a run directory that this user's train did not write
import the code its config names (framework.train.trust).

A bad argument, config or checkpoint, or a run refused at start-up (no room),
ends with exit code 2 and one line on stderr naming what was wrong and what
is allowed, and leaves nothing behind; a run that fails ends with exit code 1;
a stop signal before the run started, with 128 + its number (see
`stop_signals` for every phase).
"""
from __future__ import annotations

import argparse
import shlex
import signal
import sys
from pathlib import Path
from typing import Callable, NoReturn, Sequence

from framework import algorithms
from framework.plugin.algorithm import Algorithm, Evaluation, FrameSink
from framework.train import shipped_configs, video
from framework.train.checkpoint import CheckpointError
from framework.train.config import (CORE_SCHEMA, MAX_EVAL_EPISODES, ConfigError, apply_overrides, load_config,
                                    parse_override, string_override, validate)
from framework.plugin.formatting import significant
from framework.train.progress import Output, reopen_closed_streams
from framework.train.resume import check_changes
from framework.train.run_dir import check_replaceable
from framework.plugin.schema import one_line, printable, short_repr
from framework.train.startup import RunError
from framework.train.stop_signals import Interrupted, StopSignals
from framework.train.trust import read_run_config
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
    print(f"{command}: {printable(one_line(message), limit=MAX_MESSAGE)}", file=Output(sys.stderr), flush=True)


def _outcome(s: dict, algorithm: Algorithm, config: dict) -> str:
    """The outcome line of `train`: why it stopped, the counts (in the algorithm's units), and the return or the
    final evaluation (3 significant figures)."""
    steps_unit, episodes_unit = algorithm.units
    done = algorithm.episodes_done(config, s["env_steps"], s["episodes"])
    line = (f"{s['stop_reason']}; {s['env_steps']} {steps_unit}, {s['updates']} updates, "
            f"{done if isinstance(done, int) else significant(done)} {episodes_unit} "
            f"in {s['wall_seconds']:.1f} s ({s['steps_per_second']:,.0f} {steps_unit}/s)")
    if s["episodes"] == 0 and s.get("evaluation"):
        return line + "; final evaluation: " + ", ".join(f"{k} {significant(v)}" for k, v in s["evaluation"].items())
    solved = ("not set" if s["target_return"] is None else "not reached" if s["solved_at_seconds"] is None
              else f"{significant(s['target_return'])} reached at {s['solved_at_seconds']:.1f} s")
    return (line + f"; mean return {significant(s['mean_return'])} over the last {s['target_window']} episodes; "
            f"target {solved}")


def _next_steps(s: dict, config: dict, run_dir: Path, checkpoint: Path, trust_code: bool = False) -> str:
    """The lines after the outcome: where the checkpoint is and the commands that use the run next (a resume that
    would stop at once raises the budget that stopped it, to twice its value; --trust-code where the run's code
    needs it: its config.yaml could not be signed; no evaluation of a run that took no step: it learned nothing)."""
    run = shlex.quote(str(run_dir)) + " --trust-code" * trust_code
    more = {"total_steps reached": "total_steps", "max_seconds reached": "max_seconds"}.get(s["stop_reason"])
    doubled = None if more is None else config["trainer"][more] * 2
    budget = "" if more is None else f" --set trainer.{more}={doubled if isinstance(doubled, int) else f'{doubled:g}'}"
    saved = f"checkpoint: {checkpoint}" if checkpoint.is_file() else "checkpoint: none was written"
    commands = [f"evaluate --run {run}"] * (s["env_steps"] > 0) + [
        f"tensorboard --logdir {shlex.quote(str(run_dir.parent))}", f"train --resume {run}{budget}"]
    return "\n".join([saved, *(("next: " if i == 0 else " " * 6) + command for i, command in enumerate(commands))])


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
    print(shipped_configs.describe(choice), file=Output(sys.stderr), flush=True)
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
    with StopSignals() as signals:
        from framework.train.run_checkpoint import checkpoint_path  # the bulk of the imports, with signals recorded
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
        try:
            if args.resume is not None:
                raw = read_run_config(Path(args.resume), args.trust_code)
                config = validate(apply_overrides(raw, overrides))
                check_changes(validate(raw), config)
                trainer = Trainer(config, args.resume, resume=True, signals=signals)
            else:
                trainer = Trainer(load_config(*_new_run_config(args.config, args.env, overrides)), signals=signals)
            signals.check()
            result = trainer.run()
        except (ConfigError, CheckpointError, RunError) as exc:
            _fail("train", f"error: {exc}")
            return 2
        except Interrupted as exc:
            _fail("train", str(exc))
            return 128 + exc.signum
    summary = result.summary
    after = _next_steps(summary, trainer.config, trainer.run_dir, checkpoint_path(trainer.run_dir),
                        trainer.needs_trust_code)
    print(f"{trainer.run_dir}: {_outcome(summary, trainer.algorithm, trainer.config)}\n{after}",
          file=Output(sys.stdout), flush=True)
    return result.exit_code


def evaluate_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `evaluate`: loads a run's checkpoint and evaluates it; returns the exit code."""
    reopen_closed_streams()
    parser = _Parser(prog="evaluate", description="Evaluate the checkpoint of a training run.")
    parser.add_argument("--run", type=_path, required=True, metavar="RUN_DIR", help="a run directory made by train")
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
            policy = load_policy(run_dir, args.trust_code)
            path = policy.export(args.export)
            statistics = ", its observation statistics as obs_normalization.*" * policy.config["env"]["normalize_obs"]
            result = Evaluation({}, f"wrote {path}: the policy's weights by their PyTorch names{statistics} "
                                    f"(read it with safetensors.torch.load_file)")
        else:
            config, algorithm, model = load_trained(run_dir, args.trust_code)
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
    print(result.text, file=Output(sys.stdout), flush=True)
    return 0
