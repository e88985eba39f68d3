"""experiments/ is a package of scripts: each imports here (those for another interpreter, torch's or
Stable-Baselines3's, import it only when they run), none edits sys.path, and each answers --help without
measuring or writing anything."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from extras import ATARI

CHECKOUT = Path(__file__).resolve().parents[1]
EXPERIMENTS = CHECKOUT / "experiments"
LIBRARIES = {"__init__", "common"}
"""Modules of the package that are not scripts."""
SCRIPTS = sorted(path.stem for path in EXPERIMENTS.glob("*.py") if path.stem not in LIBRARIES)

IMPORT_ALL = """
import importlib, json, sys
before = list(sys.path)
names = sys.argv[1:]
importlib.import_module("experiments.common")
for name in names:
    importlib.import_module(name)
print(json.dumps({"path_changed": sys.path != before,
                  "foreign": sorted(m for m in ("torch", "stable_baselines3", "rl_zoo3") if m in sys.modules),
                  "mains": [n for n in names if not callable(getattr(sys.modules[n], "main", None))]}))
"""


def _results() -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in (EXPERIMENTS / "results").iterdir()}


def test_the_scripts_are_found():
    assert {"bench_a3c", "bench_compile", "torch_core_reference", "sb3_speed"} <= set(SCRIPTS)


def test_every_module_imports_without_touching_sys_path_or_another_venvs_libraries():
    modules = [f"experiments.{name}" for name in SCRIPTS]
    done = subprocess.run([sys.executable, "-c", IMPORT_ALL, *modules], capture_output=True, text=True, cwd=CHECKOUT,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"path_changed": False, "foreign": [], "mains": []}


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_answers_help_and_does_nothing_else(script):
    results = _results()
    done = subprocess.run([sys.executable, "-m", f"experiments.{script}", "--help"], capture_output=True, text=True,
                          cwd=CHECKOUT, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("usage:") and done.stderr == ""
    assert _results() == results


@ATARI
def test_bench_atari_steps_a_shipped_configs_games_alone_as_its_actors_build_them():
    from experiments.bench_atari import env_alone_processes
    from framework.train.config import load_config

    config = load_config(CHECKOUT / "configs" / "impala_pong.yaml")
    assert env_alone_processes(config, 1, 0.5) > 0
    broken = {**config, "env": {**config["env"], "id": "NoSuchGame-v0"}}
    with pytest.raises(RuntimeError, match="stepping the env alone failed"):
        env_alone_processes(broken, 1, 0.5)


def _row(config: str, measured: str, seeds: dict[int, float], overrides: tuple[str, ...] = ()) -> dict:
    return {"config": config, "overrides": list(overrides), "measured": measured, "machine": "vm", "load": "quiet",
            "runs": [{"seed": seed, "score": score} for seed, score in seeds.items()]}


def test_a_zoo_row_scored_by_parts_keeps_each_seeds_latest_run_and_says_when_each_part_was_measured():
    from experiments.zoo import with_earlier_runs

    earlier = {**_row("impala_breakout.yaml", "2026-12-04", {0: 278.0, 1: 150.0}), "sb3": {"steps_per_second": 709}}
    row = with_earlier_runs(earlier, _row("impala_breakout.yaml", "2026-12-06", {1: 300.0}))
    assert [(r["seed"], r["score"]) for r in row["runs"]] == [(0, 278.0), (1, 300.0)]
    assert row["measured"] == "2026-12-04 (seed 0) and 2026-12-06 (seed 1)"
    assert row["machine"] == "vm" and row["sb3"] == {"steps_per_second": 709}
    assert with_earlier_runs(earlier, _row("impala_breakout.yaml", "2026-12-06", {0: 1.0, 1: 2.0}))["measured"] \
        == "2026-12-06"


@pytest.mark.parametrize("earlier", [None, _row("impala_pong.yaml", "2026-12-04", {0: 18.0}),
                                     _row("impala_breakout.yaml", "2026-12-04", {0: 278.0}, ("optimizer.lr=0.001",))])
def test_a_zoo_row_takes_runs_of_its_own_config_and_overrides_only(earlier):
    from experiments.zoo import with_earlier_runs

    with pytest.raises(ValueError, match="no earlier row of impala_breakout.yaml to add to"):
        with_earlier_runs(earlier, _row("impala_breakout.yaml", "2026-12-06", {1: 300.0}))


@pytest.mark.parametrize("task, scores, said", [
    ("pong", [20.9, 19.9], "met: mean at 20 or above, no seed below A2C's"),
    ("pong", [20.9, 17.1], "**not met**: mean -1.0 (95% of 20); 1 of 2 seeds below A2C's"),
    ("halfcheetah", [5019.0, 5149.0, 4475.0], "**not met**: mean -938.0 (84% of PPO's)"),
    ("hopper", [3339.0, 3449.0, 3508.0], "met: mean at PPO's or above, no seed below A2C's"),
    ("walker2d", [4000.0, 3400.0, 4900.0], "**not met**: 1 of 3 seeds below PPO's")])
def test_a_zoo_rows_verdict_is_against_rl_zoos_ppo_figure_or_the_tasks_own_goal(task, scores, said):
    from experiments.zoo import TASKS, verdict

    assert verdict(TASKS[task], scores) == said
