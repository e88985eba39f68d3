"""Running the real `train` and `evaluate` commands from tests, and reading what a run left behind.

Commands run as `python -m framework.train COMMAND` with this interpreter, so
they need no installed console script (a plain checkout works: the checkout
is put first on PYTHONPATH, with tests/support for the fault-injecting
environments). `test_train_cli` checks the installed console scripts themselves.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import yaml

SUPPORT = Path(__file__).resolve().parent
CHECKOUT = SUPPORT.parents[1]
CONFIGS = CHECKOUT / "configs"


def cli_command(command: str) -> list[str]:
    """The argv prefix that runs `train` or `evaluate`."""
    return [sys.executable, "-m", "framework.train", command]


def cli_env(base: dict | None = None) -> dict:
    """The environment for CLI subprocesses: the checkout and tests/support first on PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([str(CHECKOUT), str(SUPPORT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def run_cli(command: str, *args: Any, timeout: float = 120, env: dict | None = None,
            **popen: Any) -> subprocess.CompletedProcess:
    """Run `train`/`evaluate` with args and wait for it (output captured as text)."""
    return subprocess.run([*cli_command(command), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env or cli_env(), **popen)


def start_cli(command: str, *args: Any, env: dict | None = None, **popen: Any) -> subprocess.Popen:
    """Start `train`/`evaluate` without waiting (stdout and stderr piped as text)."""
    return subprocess.Popen([*cli_command(command), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env or cli_env(), **popen)


def write_config(path: Path, config: dict) -> Path:
    """Write config as YAML to path; returns path."""
    path.write_text(yaml.safe_dump(config))
    return path


def train(tmp_path: Path, config: dict, *extra: Any, timeout: float = 120,
          env: dict | None = None) -> tuple[subprocess.CompletedProcess, Path | None]:
    """Write config, run `train` on it with tmp_path/runs as logdir; (the process, its run directory or None)."""
    path = write_config(tmp_path / "config.yaml", config)
    logdir = tmp_path / "runs"
    done = run_cli("train", "--config", path, "--logdir", logdir, *extra, timeout=timeout, env=env)
    runs = sorted(p for p in logdir.iterdir() if p.is_dir()) if logdir.exists() else []
    return done, (runs[-1] if runs else None)


def only_run_dir(logdir: Path) -> Path:
    """The one run directory under logdir."""
    runs = [p for p in logdir.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def first_run_at_its_target(train: Callable[..., subprocess.CompletedProcess], directory: Path,
                            configs: dict[int, dict]) -> tuple:
    """`train(--config, PATH, --logdir, DIR)` (`run_cli` with its command, or a test's own) with each config (keyed
    by seed) in turn until one stops at its target_return: its completed process, run directory and summary.
    Tests of what a run that learned holds try the next seed when one does not learn (a lock-free optimizer race
    made rare loaded CartPole runs collapse until the optimizers bounded their steps; 80 of 80 loaded runs learned
    after it), and fail when none learns."""
    for seed, config in configs.items():
        logdir = directory / f"runs-{seed}"
        done = train("--config", write_config(directory / f"config-{seed}.yaml", config), "--logdir", logdir)
        assert done.returncode == 0, done.stderr
        run_dir = only_run_dir(logdir)
        summary = json.loads((run_dir / "summary.json").read_text())
        if summary["stop_reason"] == "target_return reached":
            return done, run_dir, summary
    raise AssertionError(f"no seed of {sorted(configs)} reached its target_return: {summary}")


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under directory with its bytes (to show that a refused command changed nothing)."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def summary(run_dir: Path) -> dict:
    """A run directory's summary.json."""
    return json.loads((run_dir / "summary.json").read_text())


def events(run_dir: Path) -> Any:
    """TensorBoard's own EventAccumulator over a run directory, loaded (every scalar and histogram kept)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    return acc


def scalars(run_dir: Path, tag: str) -> list[float]:
    """The values of one TensorBoard scalar series of a run, in order ([] when the tag is absent)."""
    acc = events(run_dir)
    return [event.value for event in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []


def call_main(main: Any, argv: list[str]) -> tuple[int, str, str]:
    """Run `train_main`/`evaluate_main` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own exit
            code = exc.code
    return code, out.getvalue(), err.getvalue()
