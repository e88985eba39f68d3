"""Helpers for the trainer tests: small configs, and running the real `train`/`evaluate` commands."""
import os
import subprocess
import sys
from pathlib import Path

import yaml
from run_configs import cartpole_config

SUPPORT = Path(__file__).resolve().parents[1] / "support"
BIN = Path(sys.executable).parent


def tiny_config(**sections) -> dict:
    """A config for a few seconds of CartPole with forked workers, no progress bar; sections override keys."""
    return cartpole_config(**sections)


def write_config(path: Path, config: dict) -> Path:
    """Write config as YAML to path; returns path."""
    path.write_text(yaml.safe_dump(config))
    return path


def cli_env() -> dict:
    """The environment for CLI subprocesses: tests/support importable (fault_envs)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SUPPORT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def run_cli(command: str, *args, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the installed `train`/`evaluate` console script and wait for it."""
    return subprocess.run([str(BIN / command), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=cli_env())


def start_cli(command: str, *args) -> subprocess.Popen:
    """Start the installed console script without waiting."""
    return subprocess.Popen([str(BIN / command), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env())


def only_run_dir(logdir: Path) -> Path:
    """The one run directory under logdir."""
    runs = [p for p in logdir.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]
