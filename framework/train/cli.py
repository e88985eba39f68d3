"""The `train` and `evaluate` commands.

    train --config PATH [--set key.path=value ...] [--logdir DIR] [--resume RUN_DIR]
    evaluate --run RUN_DIR [--episodes N] [--seed S]

A bad argument or config ends with exit code 2 and one line on stderr naming
what was wrong and what is allowed; a run that fails ends with exit code 1.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import NoReturn, Sequence

from framework import algorithms
from framework.train.checkpoint import CheckpointError, load_checkpoint
from framework.train.config import ConfigError, apply_overrides, load_config, read_yaml, validate
from framework.train.trainer import CONFIG_FILE, RunError, Trainer, checkpoint_path, load_model_state


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line (exit 2)."""

    def error(self, message: str) -> NoReturn:
        usage = " ".join(self.format_usage().split()[1:])  # drop "usage:", join wrapped lines
        self.exit(2, f"{self.prog}: error: {message} (usage: {usage})\n")


def make_run_dir(logdir: str | Path, experiment: str) -> Path:
    """A new directory <logdir>/<experiment>-<YYYYmmdd-HHMMSS>[-N]; RunError if none can be made."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    try:
        Path(logdir).mkdir(parents=True, exist_ok=True)
        for n in range(1000):
            path = Path(logdir) / (f"{experiment}-{stamp}" + (f"-{n}" if n else ""))
            try:
                path.mkdir()
                return path
            except FileExistsError:
                continue
    except OSError as exc:
        raise RunError(f"cannot create a run directory in '{logdir}': {exc.strerror or exc}") from None
    raise RunError(f"cannot create a run directory in '{logdir}': every name {experiment}-{stamp}[-N] is taken")


def _run_config(run_dir: Path) -> Path:
    path = run_dir / CONFIG_FILE
    if not run_dir.is_dir():
        raise ConfigError(f"run directory '{run_dir}': not found; allowed: a directory made by train")
    if not path.is_file():
        raise ConfigError(f"run directory '{run_dir}': holds no {CONFIG_FILE}; allowed: a directory made by train")
    return path


def _drop_unstarted(run_dir: Path | None, resumed: str | None) -> None:
    """Remove the new run directory of a run refused before it wrote anything (a resumed one is kept)."""
    if run_dir is None or resumed:
        return
    try:
        run_dir.rmdir()  # only succeeds while the directory is still empty
    except OSError:
        pass


def _outcome(s: dict) -> str:
    """The last line of `train`: why it stopped, the counters, and the return or the final evaluation."""
    line = (f"{s['stop_reason']}; {s['env_steps']} env steps, {s['updates']} updates, {s['episodes']} episodes "
            f"in {s['wall_seconds']:.1f} s ({s['steps_per_second']:,.0f} steps/s)")
    if s["episodes"] == 0 and s.get("evaluation"):
        return line + "; final evaluation: " + ", ".join(f"{k} {v:.4g}" for k, v in s["evaluation"].items())
    mean = "n/a" if s["mean_return"] is None else f"{s['mean_return']:.1f}"
    solved = ("not set" if s["target_return"] is None else "not reached" if s["solved_at_seconds"] is None
              else f"{s['target_return']:g} reached at {s['solved_at_seconds']:.1f} s")
    return line + f"; mean return {mean} over the last {s['target_window']} episodes; target {solved}"


def train_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `train`; returns the exit code."""
    parser = _Parser(prog="train", description="Train with asynchronous workers on a shared model.")
    parser.add_argument("--config", help="YAML experiment config (e.g. configs/a3c.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                        help="override one config value (parsed as YAML); repeatable")
    parser.add_argument("--logdir", help="parent directory of the run directory (overrides logging.logdir)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its checkpoint")
    args = parser.parse_args(argv)
    if (args.config is None) == (args.resume is None):
        parser.error("give either --config PATH (a new run) or --resume RUN_DIR (continue one)")
    if args.resume and args.logdir is not None:
        parser.error("--logdir applies to new runs only; a resumed run continues in its RUN_DIR")
    overrides = list(args.overrides)
    if args.logdir is not None:
        overrides.append(f"logging.logdir={args.logdir}")
    run_dir = None
    try:
        if args.resume:
            run_dir = Path(args.resume)
            config = validate(apply_overrides(read_yaml(_run_config(run_dir)), args.overrides))
        else:
            config = load_config(args.config, overrides)
            run_dir = make_run_dir(config["logging"]["logdir"], config["experiment"])
        result = Trainer(config, run_dir, resume=bool(args.resume)).run()
    except (ConfigError, CheckpointError) as exc:
        _drop_unstarted(run_dir, args.resume)
        print(f"train: error: {exc}", file=sys.stderr)
        return 2
    except RunError as exc:
        _drop_unstarted(run_dir, args.resume)
        print(f"train: error: {exc}", file=sys.stderr)
        return 1
    print(f"{run_dir}: {_outcome(result.summary)}")
    return result.exit_code


def evaluate_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `evaluate`: loads a run's checkpoint and evaluates it; returns the exit code."""
    parser = _Parser(prog="evaluate", description="Evaluate the checkpoint of a training run.")
    parser.add_argument("--run", required=True, metavar="RUN_DIR", help="a run directory made by train")
    parser.add_argument("--episodes", type=int, default=10, help="number of greedy episodes (default 10)")
    parser.add_argument("--seed", type=int, default=12345, help="seed of the evaluation environments")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"argument --episodes: got {args.episodes}; allowed: an integer >= 1")
    run_dir = Path(args.run)
    try:
        config = validate(read_yaml(_run_config(run_dir)))
        path = checkpoint_path(run_dir)
        saved = load_checkpoint(path)
        algorithm = algorithms.get(config["algorithm"]["name"])
        model = algorithm.build_model(config)
        load_model_state(model, saved["model"], path)
    except (ConfigError, CheckpointError) as exc:
        print(f"evaluate: error: {exc}", file=sys.stderr)
        return 2
    result = algorithm.evaluate(model, config, args.episodes, args.seed)
    print(result.text)
    return 0
