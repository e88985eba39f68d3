"""Hyperparameter search on Optuna: `tune(config, space, trials, ...)`, which the `tune` command runs.

A study is Optuna's, named NAME (default tune-<experiment>) and stored in SQLite at <logdir>/<NAME>/study.db, or
under any URL of Optuna's RDB storage (`storage`: PostgreSQL, MySQL, so that several machines share one study).
The study directory <logdir>/<NAME>/ holds the reports and each trial's run directory (<experiment>-trial<N>-
<time>: a normal run directory). A trial is a run of the config, with the overrides and the trial's values of
the space's keys (`tune_space`); its value is the run's `metric`: mean_return (summary.json's, over the last
target_window episodes) or eval (its final evaluation's return_mean: trainer.eval_every_s > 0). The value so far
goes to Optuna every log interval (every evaluation, for eval), at the interval's number, through a callback that
asks the run to stop when the pruner prunes the trial (`pruner`: Optuna's MedianPruner, or none). Its reports
are of wall time, every second by default, and the first seconds of an RL run say little of its end, so the
median pruner waits for WARMUP_REPORTS of a trial's reports (and, as Optuna's default, for 5 finished trials).

Trials count toward `trials` once complete or pruned, so the same command with more trials runs the difference
(a failed or interrupted trial runs again). `jobs` runs that many trials at once, each in a process of its own
with its own workers; they take trials from one shared count, so no more start than are missing. A stop signal
(Ctrl-C) stops the current trial as it stops any run (its checkpoint and summary are written) and marks it failed;
no trial starts after it, and the reports are written: the study keeps everything. With the default storage the
study directory is locked while a tune uses it (as a run directory is), so trials a killed tune left running are
marked failed by the next one.

The reports, made from the whole study at the end: best.yaml (the best trial's resolved config, for
`train --config`), trials.csv and trials.md (a row a trial), and Optuna's optimisation history and parameter
importances (history.png, importance.png). The plots are Optuna's matplotlib ones: its plotly ones need plotly
and, for a PNG, kaleido (a headless browser); importances come from PED-ANOVA, Optuna's own estimator, where its
default (fANOVA) needs scikit-learn. Optuna and matplotlib are the `tune` extra, imported when a study starts.
"""
from __future__ import annotations

import contextlib
import csv
import fcntl
import importlib.util
import io
import json
import multiprocessing
import os
import signal
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from framework import algorithms
from framework.runtime.formatting import significant
from framework.runtime.schema import ConfigError, one_line, printable, short_repr
from framework.train.callbacks import Callback
from framework.train.checkpoint import CheckpointError
from framework.train.config import MAX_NAME, Config, config_text, experiment_name, load_config, string_override
from framework.train.progress import Output
from framework.train.run_dir import write_atomically
from framework.train.startup import RunError
from framework.train.stop_signals import Interrupted, StopSignals
from framework.train.trainer import Trainer
from framework.train.tune_space import SearchSpace, load_space

METRICS = ("mean_return", "eval")
PRUNERS = ("median", "none")
MAX_TRIALS = 100_000
MAX_JOBS = 256
SQLITE_TIMEOUT_S = 60
"""How long a process of a tune waits for another's write to the SQLite study (jobs > 1)."""
WARMUP_REPORTS = 10
"""Reports of a trial before the median pruner may stop it."""


@dataclass
class TunePlan:
    """A checked tune: what each of its processes needs to run trials (it travels to them pickled)."""

    config: Any
    overrides: list[str]
    space: SearchSpace
    trials: int
    jobs: int
    name: str
    storage: str
    directory: Path
    metric: str
    pruner: str
    experiment: str
    hparams: list[str]

    @property
    def default_storage(self) -> bool:
        return self.storage == _sqlite_url(self.directory)


@dataclass
class TuneResult:
    """A tune's end: the study directory, Optuna's study, the best trial (None before one completed), and the
    stop signal that ended it early (None when it ran the trials it was asked for)."""

    directory: Path
    study: Any
    best_value: float | None
    best_params: dict[str, Any] | None
    best_config: Config | None
    best_run_dir: Path | None
    stopped_by: str | None
    reports: list[Path]


def _sqlite_url(directory: Path) -> str:
    return f"sqlite:///{directory.resolve() / 'study.db'}"


def check_count(label: str, value: Any, high: int) -> int:
    """value when it is an integer from 1 to high; ConfigError naming label otherwise."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
        raise ConfigError(f"{label}: got {short_repr(value)}; allowed: an integer from 1 to {high}")
    return value


def check_choice(label: str, value: Any, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ConfigError(f"{label}: got {short_repr(value)}; allowed: {' or '.join(choices)}")
    return value


def plan(config: str | Path | Mapping[str, Any], space: str | Path | Mapping[str, Any], trials: int, *,
         jobs: int = 1, overrides: Sequence[str] = (), logdir: str | Path | None = None, name: str | None = None,
         storage: str | None = None, metric: str = "mean_return", pruner: str = "median") -> TunePlan:
    """A checked TunePlan; ConfigError (one line) for a bad argument, config or space, before anything is
    written."""
    trials, jobs = check_count("trials", trials, MAX_TRIALS), check_count("jobs", jobs, MAX_JOBS)
    metric, pruner = check_choice("metric", metric, METRICS), check_choice("pruner", pruner, PRUNERS)
    if isinstance(overrides, (str, bytes)):
        raise ConfigError(f"overrides: got {short_repr(overrides)}; allowed: a list of key.path=value strings")
    if importlib.util.find_spec("optuna") is None or importlib.util.find_spec("matplotlib") is None:
        raise ConfigError("tune needs the tune extra (Optuna, matplotlib), which is not installed; allowed: "
                          "pip install -e '.[tune]'")
    overrides = list(overrides) + ([string_override("logging.logdir", os.fspath(logdir))] if logdir else [])
    base = load_config(config, overrides)
    algorithm = algorithms.get(base["algorithm"]["name"])
    if not algorithm.can_act():
        raise ConfigError(f"metric: got {metric!r} for algorithm {algorithm.name}, whose runs have no return; "
                          f"allowed: configs of an algorithm that plays an environment")
    if metric == "eval" and base["trainer"]["eval_every_s"] == 0:
        raise ConfigError("metric: got 'eval' with trainer.eval_every_s 0 (no evaluation); allowed: mean_return, "
                          "or set trainer.eval_every_s > 0")
    if name is None:
        name = experiment_name(f"tune-{base['experiment']}")
    elif name != experiment_name(name) or len(name) > MAX_NAME:
        raise ConfigError(f"name: got {short_repr(name)}; allowed: a name of lower-case letters, digits, '.', '_' "
                          f"and '-', at most {MAX_NAME} (it names the study and its directory)")
    tuned = load_space(space, config, overrides)
    directory = Path(base["logging"]["logdir"]) / name
    hparams = list(dict.fromkeys([*base["logging"]["hparams"], *tuned.keys]))
    return TunePlan(config, overrides, tuned, trials, jobs, name, storage or _sqlite_url(directory), directory,
                    metric, pruner, base["experiment"], hparams)


def tune(config: str | Path | Mapping[str, Any], space: str | Path | Mapping[str, Any], trials: int, *,
         jobs: int = 1, overrides: Sequence[str] = (), logdir: str | Path | None = None, name: str | None = None,
         storage: str | None = None, metric: str = "mean_return", pruner: str = "median") -> TuneResult:
    """Run the trials the study `name` lacks of `trials` (see the module docstring); the TuneResult.

    config and overrides as `run` takes them; space: a SPACE.yaml's path or a mapping; jobs: trials at once;
    logdir: the study directory's parent (logging.logdir); storage: an Optuna RDB URL; metric: mean_return or
    eval; pruner: median or none. ConfigError before anything is written for a bad argument, config or space.
    """
    checked = plan(config, space, trials, jobs=jobs, overrides=overrides, logdir=logdir, name=name, storage=storage,
                   metric=metric, pruner=pruner)
    with StopSignals() as signals:
        return run_study(checked, signals)


# -- the study -------------------------------------------------------------------------------------
@contextlib.contextmanager
def _quiet_optuna() -> Iterator[Any]:
    """optuna, its own log lines (a line per trial, beside ours) down to warnings while a tune runs."""
    import optuna

    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield optuna
    finally:
        optuna.logging.set_verbosity(before)


def _open_study(optuna: Any, tune_plan: TunePlan) -> Any:
    """The plan's study, made when missing; ConfigError naming the storage when it cannot be opened."""
    pruner = (optuna.pruners.MedianPruner(n_warmup_steps=WARMUP_REPORTS) if tune_plan.pruner == "median"
              else optuna.pruners.NopPruner())
    kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}} if tune_plan.storage.startswith("sqlite") else {}
    try:
        storage = optuna.storages.RDBStorage(tune_plan.storage, engine_kwargs=kwargs)
        return optuna.create_study(study_name=tune_plan.name, storage=storage, direction="maximize",
                                   load_if_exists=True, pruner=pruner)
    except Exception as exc:  # SQLAlchemy's errors for a bad URL, a missing driver, a refused connection
        raise ConfigError(f"storage {printable(repr(tune_plan.storage))}: cannot open the study "
                          f"({type(exc).__name__}: {printable(one_line(exc), limit=300)}); allowed: a URL Optuna's "
                          f"RDB storage opens (sqlite:///FILE, postgresql://..., mysql://...)") from None


def _lock(directory: Path) -> int:
    """An open descriptor holding an exclusive lock on the study directory; RunError when another tune holds it."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RunError(f"study directory '{printable(str(directory))}' is in use by another tune; allowed: one tune "
                       f"at a time on a study in SQLite (--jobs runs trials at once; --storage lets several "
                       f"machines share a study)") from None
    return fd


def run_study(tune_plan: TunePlan, signals: StopSignals, say: Callable[[str], None] | None = None) -> TuneResult:
    """Run the plan's missing trials (here, or in `jobs` processes), then write the reports; the TuneResult.
    RunError when the study directory cannot be made or is in use."""
    say = say or _stderr_line
    with _quiet_optuna() as optuna, contextlib.ExitStack() as held:
        study = None if tune_plan.default_storage else _open_study(optuna, tune_plan)  # refused before a mkdir
        try:
            tune_plan.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunError(f"cannot make the study directory '{printable(str(tune_plan.directory))}': "
                           f"{exc.strerror or exc}") from None
        if study is None:
            held.callback(os.close, _lock(tune_plan.directory))
            study = _open_study(optuna, tune_plan)
        if tune_plan.default_storage:
            for stale in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
                study.tell(stale.number, state=optuna.trial.TrialState.FAIL)
                say(f"trial {stale.number}: left running by a tune that did not finish it; marked failed")
        done = _count(study, optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
        missing = max(tune_plan.trials - done, 0)
        say(f"study {tune_plan.name} ({tune_plan.directory}): {done} of {tune_plan.trials} trials done, "
            f"{missing} to run" + (f", {min(tune_plan.jobs, missing)} at a time" if tune_plan.jobs > 1 and missing
                                   else ""))
        if missing and tune_plan.jobs > 1:
            _run_processes(tune_plan, missing, signals, say)
        elif missing:
            claimed = [0]
            run_trials(tune_plan, study, signals, lambda: _claim_local(claimed, missing), say)
        study = _open_study(optuna, tune_plan)  # what the other processes told too
        reports = write_reports(tune_plan, study, say)
        return _result(tune_plan, study, signals, reports)


def _stderr_line(text: str) -> None:
    Output(sys.stderr).line(text)


def _count(study: Any, *states: Any) -> int:
    return len(study.get_trials(deepcopy=False, states=states))


def _claim_local(claimed: list[int], missing: int) -> bool:
    if claimed[0] >= missing:
        return False
    claimed[0] += 1
    return True


def _claim_shared(claimed: Any, missing: int) -> bool:
    """Take one of the missing trials from the count the tune's processes share; False when none is left."""
    with claimed.get_lock():
        if claimed.value >= missing:
            return False
        claimed.value += 1
        return True


def _run_processes(tune_plan: TunePlan, missing: int, signals: StopSignals, say: Callable[[str], None]) -> None:
    """Run the missing trials in `jobs` spawned processes, passing a stop signal on to them (Ctrl-C reaches them
    from the terminal too; a signal sent to this process alone does not)."""
    context = multiprocessing.get_context("spawn")
    claimed = context.Value("q", 0)
    processes = [context.Process(target=_trial_process, args=(tune_plan, claimed, missing), name=f"tune-{i}")
                 for i in range(min(tune_plan.jobs, missing))]
    for process in processes:
        process.start()
    passed_on = False
    while any(process.is_alive() for process in processes):
        for process in processes:
            process.join(0.2)
        if signals.received is not None and not passed_on:
            passed_on = True
            for process in processes:
                if process.is_alive():
                    os.kill(process.pid, signals.received)
    for i, process in enumerate(processes):
        if process.exitcode != 0:
            say(f"tune process {i} ended with exit code {process.exitcode}")


def _trial_process(tune_plan: TunePlan, claimed: Any, missing: int) -> None:
    """A process of `jobs`: trials until the shared count says none is left or a stop signal came."""
    with StopSignals() as signals, _quiet_optuna() as optuna:
        study = _open_study(optuna, tune_plan)
        run_trials(tune_plan, study, signals, lambda: _claim_shared(claimed, missing), _stderr_line)


# -- trials ----------------------------------------------------------------------------------------
class OptunaPruning(Callback):
    """Reports a trial's value so far to Optuna every log interval (every evaluation, for metric eval), at the
    interval's number, and asks the run to stop once Optuna prunes the trial."""

    def __init__(self, trial: Any, metric: str):
        self.trial, self.metric = trial, metric
        self.reports = 0
        self.pruned = False

    def _report(self, value: float | None) -> None:
        self.reports += 1
        if value is not None:
            self.trial.report(value, self.reports)
            self.pruned = self.pruned or self.trial.should_prune()

    def on_log(self, metrics: dict[str, float]) -> bool:
        if self.metric == "mean_return":
            self._report(metrics.get("episode/return_window_mean"))
        return self.pruned

    def on_eval(self, result: Any) -> None:
        if self.metric == "eval":
            self._report(result.metrics.get("return_mean"))


def metric_value(summary: Mapping[str, Any], metric: str) -> float | None:
    """A finished run's value of metric (None when it has none: no episode ended, no evaluation)."""
    if metric == "eval":
        return (summary.get("evaluation") or {}).get("return_mean")
    return summary.get("mean_return")


def _shown(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={significant(v) if isinstance(v, float) else json.dumps(v)}" for key, v in values.items())


def run_trials(tune_plan: TunePlan, study: Any, signals: StopSignals, claim: Callable[[], bool],
               say: Callable[[str], None]) -> None:
    """Run trials of the study one after another while `claim` gives one and no stop signal came."""
    while signals.received is None and claim():
        run_trial(tune_plan, study, signals, say)


def run_trial(tune_plan: TunePlan, study: Any, signals: StopSignals, say: Callable[[str], None]) -> None:
    """One trial: a run of the config with the trial's values, told to the study as complete, pruned or failed.
    A run refused for want of room (RunError) stops the tune."""
    from optuna.trial import TrialState

    trial = study.ask()
    values = tune_plan.space.suggest(trial)
    say(f"trial {trial.number}: {_shown(values)}")
    overrides = [*tune_plan.overrides, *SearchSpace.overrides(values),
                 string_override("logging.logdir", str(tune_plan.directory)),
                 string_override("experiment", f"{tune_plan.experiment}-trial{trial.number}"),
                 f"logging.hparams={json.dumps(tune_plan.hparams)}",
                 *(["logging.progress=false"] if tune_plan.jobs > 1 else [])]
    pruning = OptunaPruning(trial, tune_plan.metric)
    try:
        trainer = Trainer(load_config(tune_plan.config, overrides), signals=signals, callbacks=[pruning])
        result = trainer.run()
    except (ConfigError, CheckpointError, RunError, Interrupted) as exc:
        study.tell(trial, state=TrialState.FAIL)
        say(f"trial {trial.number}: failed before it ran: {exc}")
        if isinstance(exc, RunError):
            raise
        return
    summary = result.summary
    for key in ("stop_reason", "env_steps", "wall_seconds"):
        trial.set_user_attr(key, summary[key])
    trial.set_user_attr("run_dir", str(trainer.run_dir))
    value = metric_value(summary, tune_plan.metric)
    if signals.received is not None:
        state, why = TrialState.FAIL, f"stopped by {summary['stop_reason']}; it runs again in the next tune"
    elif result.exit_code != 0:
        state, why = TrialState.FAIL, f"the run failed: {summary['failure']}"
    elif pruning.pruned:
        state, why = TrialState.PRUNED, f"pruned at log interval {pruning.reports}"
    elif value is None:
        state, why = TrialState.FAIL, f"the run has no {tune_plan.metric} (no episode ended)"
    else:
        state, why = TrialState.COMPLETE, f"{tune_plan.metric} {significant(value)}"
    study.tell(trial, value if state == TrialState.COMPLETE else None, state=state)
    say(f"trial {trial.number}: {why} ({trainer.run_dir})")


# -- reports ---------------------------------------------------------------------------------------
def _best(study: Any) -> Any | None:
    try:
        return study.best_trial
    except ValueError:  # no trial completed
        return None


def best_config(tune_plan: TunePlan, params: Mapping[str, Any]) -> Config:
    """The config of a trial's Optuna params: the plan's config and overrides with the trial's values."""
    return load_config(tune_plan.config, [*tune_plan.overrides,
                                          *SearchSpace.overrides(tune_plan.space.values(params))])


def trial_rows(tune_plan: TunePlan, study: Any) -> list[dict[str, Any]]:
    """The trials table: a row a trial, in the order they started."""
    rows = []
    for trial in study.get_trials(deepcopy=False):
        values = tune_plan.space.values(trial.params)
        rows.append({"number": trial.number, "state": trial.state.name.lower(), "value": trial.value,
                     **{key: values.get(key) for key in tune_plan.space.keys},
                     **{key: trial.user_attrs.get(key) for key in ("env_steps", "wall_seconds", "stop_reason",
                                                                   "run_dir")}})
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def _csv(rows: list[dict[str, Any]], columns: list[str]) -> bytes:
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(columns)
    writer.writerows([[_cell(row[column]) for column in columns] for row in rows])
    return text.getvalue().encode()


def _markdown(rows: list[dict[str, Any]], columns: list[str]) -> bytes:
    def cells(values: list[str]) -> str:
        return "| " + " | ".join(v.replace("|", "\\|") for v in values) + " |"

    lines = [cells(columns), cells(["---"] * len(columns))]
    for row in rows:
        lines.append(cells([significant(row[c]) if isinstance(row[c], float) else _cell(row[c]) for c in columns]))
    return ("\n".join(lines) + "\n").encode()


def write_reports(tune_plan: TunePlan, study: Any, say: Callable[[str], None]) -> list[Path]:
    """best.yaml (once a trial completed), trials.csv, trials.md and the plots, each written atomically; the
    files written. A plot Optuna cannot draw yet (too few trials) is said in one line."""
    directory = tune_plan.directory
    written = []

    def write(name: str, data: bytes) -> None:
        write_atomically(directory / name, lambda f: f.write(data))
        written.append(directory / name)

    best = _best(study)
    if best is not None:
        header = (f"# tune: trial {best.number} of study {tune_plan.name}, {tune_plan.metric} "
                  f"{significant(best.value)}: {_shown(tune_plan.space.values(best.params))}\n")
        write("best.yaml", (header + config_text(best_config(tune_plan, best.params))).encode())
    rows = trial_rows(tune_plan, study)
    columns = ["number", "state", "value", *tune_plan.space.keys, "env_steps", "wall_seconds", "stop_reason",
               "run_dir"]
    write("trials.csv", _csv(rows, columns))
    write("trials.md", _markdown(rows, columns))
    if best is None:
        say("no trial has completed yet: no best.yaml and no plots")
        return written
    for name, problem in _plots(study).items():
        if isinstance(problem, bytes):
            write(name, problem)
        else:
            say(f"no {name}: {problem}")
    return written


def _plots(study: Any) -> dict[str, bytes | str]:
    """history.png and importance.png as PNG bytes, or why Optuna could not draw one."""
    import matplotlib.pyplot as plt
    from optuna.importance import PedAnovaImportanceEvaluator
    from optuna.visualization import matplotlib as optuna_plots

    drawers = {"history.png": lambda: optuna_plots.plot_optimization_history(study),
               "importance.png": lambda: optuna_plots.plot_param_importances(
                   study, evaluator=PedAnovaImportanceEvaluator())}
    plots: dict[str, bytes | str] = {}
    for name, draw in drawers.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the plots are Optuna's "experimental" API; importances warn of few trials
            try:
                axes = draw()
            except (ValueError, RuntimeError) as exc:
                plots[name] = f"Optuna cannot draw it yet ({printable(one_line(exc), limit=200)})"
                continue
        figure = axes.figure
        data = io.BytesIO()
        figure.savefig(data, format="png", dpi=100, bbox_inches="tight")
        plt.close(figure)
        plots[name] = data.getvalue()
    return plots


def _result(tune_plan: TunePlan, study: Any, signals: StopSignals, reports: list[Path]) -> TuneResult:
    best = _best(study)
    stopped = None if signals.received is None else signal.Signals(signals.received).name
    if best is None:
        return TuneResult(tune_plan.directory, study, None, None, None, None, stopped, reports)
    run_dir = best.user_attrs.get("run_dir")
    return TuneResult(tune_plan.directory, study, best.value, tune_plan.space.values(best.params),
                      best_config(tune_plan, best.params), None if run_dir is None else Path(run_dir), stopped,
                      reports)


def outcome(result: TuneResult, tune_plan: TunePlan) -> str:
    """What `tune` prints at the end: the trials by state, the best one and where the reports are."""
    counts: dict[str, int] = {}
    for trial in result.study.get_trials(deepcopy=False):
        counts[trial.state.name.lower()] = counts.get(trial.state.name.lower(), 0) + 1
    states = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    lines = [f"{result.directory}: {sum(counts.values())} trials ({states or 'none'})"]
    if result.best_value is None:
        lines[0] += "; none completed"
    else:
        best_yaml = result.directory / "best.yaml"
        lines[0] += (f"; best: trial {result.study.best_trial.number}, {tune_plan.metric} "
                     f"{significant(result.best_value)} ({_shown(result.best_params)})")
        lines.append(f"best config: {best_yaml} (train --config {best_yaml})")
    lines.append("reports: " + ", ".join(path.name for path in result.reports))
    if result.stopped_by is not None:
        lines.append(f"stopped by {result.stopped_by}: the same command continues the study")
    return "\n".join(lines)


__all__ = ["OptunaPruning", "TunePlan", "TuneResult", "plan", "run_study", "tune"]
