"""Training from Python: `run(config, overrides, logdir=, env=, model=, resume=, callbacks=) -> Run`, and
`read_checkpoint`.

`run` is the `train` command without the command line: the same config
checks (ConfigError, one line), start-up, run directory, TensorBoard,
checkpoints, stop conditions and exit reasons (it runs a `Trainer`), the
same progress bar (a notebook's widget in Jupyter) and, unless
`logging.progress: false`, the same outcome line at the end (on stdout).
`resume=RUN_DIR` continues a run as `train --resume` does, through the same
code (`resume.resumed_config`). `callbacks` are `Callback` instances the
monitor calls. It blocks until the run ends and returns a `Run`; a run that
fails (a worker or a callback raised, a checkpoint could not be written)
raises `RunFailed`, which carries the run directory and summary.

`env=` and `model=` take factories (an Env class or a function) and pass
them to the workers by name, as the config keys `env.id: module:Factory`
and `model.factory: module:function`: workers started with spawn import
them afresh, so a factory must be reachable by its module and qualified
name. One that is not (a lambda, a function defined inside another, one
defined in an interactive `__main__`: standard input, `python -c`, a
notebook) is refused before anything starts. One defined in the script
being run (`__main__` from a file) is named by the script's module name
(its file name), which the workers import from the script's directory; the
main process gets that name for the running script itself, so it does not
run twice here.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from framework.train.callbacks import Callback, check_callbacks
from framework.train.checkpoint import CheckpointError, load_checkpoint
from framework.train.config import ConfigError, load_config, string_override
from framework.train.outcome import outcome_line
from framework.runtime.schema import printable, short_repr
from framework.train.progress import Output
from framework.train.resume import resumed_config
from framework.train.run_checkpoint import checkpoint_path
from framework.train.trainer import Run, Trainer


class RunFailed(RuntimeError):
    """A run that failed once it had started (exit code 1 of `train`); its directory and summary.json are kept."""

    def __init__(self, run_dir: Path, summary: dict[str, Any]):
        reason = summary.get("failure") or summary.get("stop_reason") or "see its summary.json"
        super().__init__(f"run '{run_dir}' failed: {reason}")
        self.run_dir, self.summary = run_dir, summary


def run(config: str | Path | Mapping[str, Any] | None = None, overrides: Sequence[str] = (), *,
        logdir: str | Path | None = None, env: Callable[..., Any] | None = None,
        model: Callable[..., Any] | None = None, resume: str | Path | None = None,
        callbacks: Sequence[Callback] = (), trust_code: bool = False) -> Run:
    """Train until a stop condition, as `train --config` does; the finished Run (RunFailed if it failed).

    config: a YAML file's path, or a mapping (as the file would hold, or a config already checked); overrides:
    `key.path=value` strings as `--set` takes them; logdir: the run directory's parent (logging.logdir); env: an
    env factory (a gymnasium.Env subclass, or a callable returning an Env: env.kwargs go to it); model: a model
    factory `f(observation_space, action_space, model_section) -> nn.Module`; resume: a run directory to continue
    as `train --resume` does (instead of config, logdir, env and model; overrides apply as its --set); callbacks:
    Callback instances (framework.train.Callback); trust_code: with resume, import the code the run directory's
    config names although this user's train did not write it (framework.train.trust). Raises ConfigError before anything starts for a bad config or
    argument, or a factory the workers could not import.
    """
    if isinstance(overrides, (str, bytes)):
        raise ConfigError(f"overrides: got {short_repr(overrides)}; allowed: a list of key.path=value strings, "
                          f"e.g. ['trainer.max_seconds=10']")
    hooks = check_callbacks(callbacks)
    if resume is not None:
        given = [name for name, value in (("config", config), ("logdir", logdir), ("env", env), ("model", model))
                 if value is not None]
        if given:
            raise ConfigError(f"resume=: got it with {', '.join(f'{name}=' for name in given)}; allowed: resume= "
                              f"alone (a resumed run keeps its config, directory, environment and model; overrides "
                              f"apply as train --resume --set)")
        trainer = Trainer(resumed_config(resume, list(overrides), trust_code), resume, resume=True, callbacks=hooks)
    else:
        if config is None:
            raise ConfigError("config: got None; allowed: a YAML file's path or a mapping (or resume=RUN_DIR to "
                              "continue a run)")
        extra = list(overrides)
        if env is not None:
            extra.append(string_override("env.id", factory_name(env, "env")))
        if model is not None:
            extra.append(string_override("model.factory", factory_name(model, "model")))
        if logdir is not None:
            extra.append(string_override("logging.logdir", os.fspath(logdir)))
        trainer = Trainer(load_config(config, extra), callbacks=hooks)
    finished = trainer.run()
    if trainer.config["logging"]["progress"]:
        outcome = outcome_line(finished.summary, trainer.algorithm, trainer.config)
        Output(sys.stdout).line(f"{trainer.run_dir}: {outcome}")
    if finished.exit_code != 0:
        raise RunFailed(trainer.run_dir, finished.summary)
    return finished


def factory_name(factory: Any, argument: str) -> str:
    """'module:qualname' by which worker processes import factory; ConfigError saying what to do otherwise."""
    module, qualname = getattr(factory, "__module__", None), getattr(factory, "__qualname__", None)
    if not callable(factory) or not isinstance(module, str) or not isinstance(qualname, str):
        raise ConfigError(f"{argument}=: got {short_repr(factory)}; allowed: a class or function defined at the top "
                          f"level of a module")
    shown = f"{module}.{qualname}"
    if "<" in qualname:  # <lambda>, <locals>
        raise ConfigError(f"{argument}=: got {printable(shown)}, which worker processes cannot import by name (a "
                          f"lambda or a definition inside a function); allowed: a class or function defined at "
                          f"the top level of a module file")
    if module == "__main__":
        module = _main_module_name(argument, shown)
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        found = None
    if found is not factory:
        raise ConfigError(f"{argument}=: got {printable(shown)}, which is not found as {qualname} in module "
                          f"{module}; allowed: a class or function defined at the top level of a module file")
    return f"{module}:{qualname}"


def _main_module_name(argument: str, shown: str) -> str:
    """The name workers import the running `__main__` by: its module name (`python -m`) or its file's name (a
    script: its directory is first on sys.path); ConfigError when __main__ is no file (stdin, -c, a notebook)."""
    main = sys.modules["__main__"]
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name != "__main__":
        return spec.name
    path = getattr(main, "__file__", None)
    name = Path(path).stem if isinstance(path, str) and path.endswith(".py") and os.path.isfile(path) else None
    if name is not None and sys.modules.get(name) is main:  # named so by an earlier call
        return name
    found = importlib.util.find_spec(name) if name and name.isidentifier() else None
    if (found is None or found.origin is None or not os.path.samefile(found.origin, path)
            or sys.modules.get(name, main) is not main):
        raise ConfigError(f"{argument}=: got {printable(shown)}, defined in an interactive session (standard input, "
                          f"python -c or a notebook) that worker processes cannot import; allowed: a class or "
                          f"function defined in a module file: define it in a module file and import it")
    sys.modules[name] = main  # importing the script's name here is the running script, not a second copy
    return name


def read_checkpoint(path: str | Path, checkpoint: str = "latest") -> dict[str, np.ndarray]:
    """The model's parameters and buffers by name (as its state_dict names them) from a run directory's latest (or
    best) checkpoint, or a checkpoint file; CheckpointError naming the file when it is missing or not a
    checkpoint."""
    path = Path(path)
    file = checkpoint_path(path, checkpoint) if path.is_dir() else path
    saved = load_checkpoint(file)
    model = saved.get("model") if isinstance(saved, dict) else None
    if not isinstance(model, dict) or not all(isinstance(v, np.ndarray) for v in model.values()):
        raise CheckpointError(f"checkpoint '{printable(str(file))}' holds no model parameters")
    return dict(model)


__all__ = ["ConfigError", "Run", "RunFailed", "factory_name", "read_checkpoint", "run"]
