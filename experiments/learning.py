"""Learning results of the classic-control A3C configs: each for a fixed budget, with several seeds.

Runs `train` on configs/a3c.yaml (CartPole-v1), a3c_acrobot.yaml,
a3c_lunarlander.yaml (only when the box2d extra is installed) and
a3c_pendulum.yaml, one run at a time, each seed for at most its budget of
wall seconds (never more than the config's own max_seconds; or the config's
total_steps). A run stops early once the mean of
its last 100 episode returns reaches the target, unless --full-budget is given.
Writes experiments/results/learning.md (per environment: the final mean
return over the last 100 episodes, mean ± std over seeds, wall time, env
steps, seconds to the target) and learning.png (the curves).

usage: python -m experiments.learning [--seeds 5] [--first-seed 0] [--tasks cartpole,acrobot,...]
           [--cartpole-seconds 60] [--acrobot-seconds 60] [--lunarlander-seconds 900]
           [--pendulum-seconds 150] [--full-budget] [--defaults]

--defaults runs the default configs (a3c.yaml, a3c_continuous.yaml) with only
env.id changed, 300 s each, and rewrites learning.md's last section with them.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from experiments.common import REPO, RESULTS, load, markdown_table, return_curve, train_run, write_result



@dataclass(frozen=True)
class Task:
    name: str
    env_id: str
    config: str
    target: float
    seconds: float
    needs: str | None = None  # a module that must be importable (an optional extra)


TASKS = (
    Task("cartpole", "CartPole-v1", "a3c.yaml", 475, 60),
    Task("acrobot", "Acrobot-v1", "a3c_acrobot.yaml", -100, 60),
    Task("lunarlander", "LunarLander-v3", "a3c_lunarlander.yaml", 200, 900, needs="Box2D"),
    Task("pendulum", "Pendulum-v1", "a3c_pendulum.yaml", -200, 150),
)
DEFAULT_TASKS = (
    Task("cartpole", "CartPole-v1", "a3c.yaml", 475, 300),
    Task("acrobot", "Acrobot-v1", "a3c.yaml", -100, 300),
    Task("lunarlander", "LunarLander-v3", "a3c.yaml", 200, 300, needs="Box2D"),
    Task("pendulum", "Pendulum-v1", "a3c_continuous.yaml", -200, 300),
)
"""--defaults: the two default configs (discrete and continuous actions) with only env.id changed, 5 minutes each."""
DEFAULTS_HEADING = "## Only env.id changed"


def task_overrides(task: Task) -> tuple[str, ...]:
    """What --set a task's config needs to train on the task: env.id and its target, where the config is a default."""
    shipped = yaml.safe_load((REPO / "configs" / task.config).read_text())
    if shipped["env"]["id"] == task.env_id:
        return ()
    return f"env.id={task.env_id}", f"trainer.target_return={task.target:g}"


def run(task: Task, seed: int, seconds: float, full_budget: bool, logdir: Path, overrides: tuple[str, ...] = ()) -> dict:
    """One training run (`overrides`: extra `--set key=value`s); its summary and its curve of (seconds since
    start, mean of the last 100 returns)."""
    sets = [f"seed={seed}", f"trainer.max_seconds={seconds}", "logging.progress=false", "logging.log_every_s=1",
            *task_overrides(task), *overrides]
    if full_budget:
        sets.append("trainer.target_return=null")
    run_dir = train_run(REPO / "configs" / task.config, sets, logdir, seconds + 300)
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"summary": summary, "curve": return_curve(run_dir, summary["started_at"])}


def reached_at(result: dict, target: float) -> float | None:
    """Seconds until the mean of the last 100 returns first reached the target (from the curve when the
    run did not stop there), or None."""
    solved = result["summary"]["solved_at_seconds"]
    if solved is not None:
        return solved
    return next((t for t, value in result["curve"] if value >= target), None)


def mean_std(values: list[float]) -> str:
    if not values:
        return "n/a"
    std = statistics.pstdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.1f} ± {std:.1f}"


def row(task: Task, runs: list[dict]) -> list[str]:
    summaries = [r["summary"] for r in runs]
    finals = [s["mean_return"] for s in summaries if s["mean_return"] is not None]
    solved = [t for t in (reached_at(r, task.target) for r in runs) if t is not None]
    verdict = "met on every seed" if len(solved) == len(runs) else "not met"
    return [task.env_id, f">= {task.target:g}", mean_std(finals), verdict, f"{len(solved)} of {len(runs)}",
            mean_std(solved) + (" s" if solved else ""), mean_std([s["wall_seconds"] for s in summaries]) + " s",
            f"{statistics.mean(s['env_steps'] for s in summaries):,.0f}",
            f"{statistics.mean(s['steps_per_second'] for s in summaries):,.0f}"]


def available(task: Task) -> bool:
    """Whether the optional extra the task needs (if any) is installed."""
    return task.needs is None or importlib.util.find_spec(task.needs) is not None


def plot(results: dict[Task, list[dict]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.6), squeeze=False)
    for ax, (task, runs) in zip(axes[0], results.items()):
        for r in runs:
            if r["curve"]:
                xs, ys = zip(*r["curve"])
                ax.plot(xs, ys, label=f"seed {r['seed']}")
        ax.axhline(task.target, color="gray", linestyle="--", linewidth=1, label=f"target {task.target:g}")
        ax.set_title(task.env_id)
        ax.set_xlabel("wall seconds")
        ax.set_ylabel("mean return, last 100 episodes")
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run_seed(task: Task, seed: int, seconds: float, full_budget: bool, overrides: tuple[str, ...] = ()) -> dict:
    """`run` in a temporary log directory, with the seed recorded and a line printed."""
    with tempfile.TemporaryDirectory() as logdir:
        result = run(task, seed, seconds, full_budget, Path(logdir), overrides)
    result["seed"] = seed
    s = result["summary"]
    print(f"{task.env_id} seed {seed} {' '.join(overrides)}: mean return {s['mean_return']}, {s['env_steps']} steps "
          f"in {s['wall_seconds']:.0f} s ({s['stop_reason']})", flush=True)
    return result


def defaults_section(results: dict[Task, list[dict]], seeds: range) -> str:
    """learning.md's section on the default configs with only env.id changed."""
    table = markdown_table(["environment", "config", "target", "seeds reaching it in 5 minutes", "seconds to reach it",
                            "final mean return (last 100 episodes)", "env steps/s"],
                           [[task.env_id, f"configs/{task.config}", f">= {task.target:g}",
                             f"{sum(reached_at(r, task.target) is not None for r in runs)} of {len(runs)}",
                             mean_std([t for r in runs if (t := reached_at(r, task.target)) is not None]) + " s",
                             mean_std([r["summary"]["mean_return"] for r in runs if r["summary"]["mean_return"] is not None]),
                             f"{statistics.mean(r['summary']['steps_per_second'] for r in runs):,.0f}"]
                            for task, runs in results.items()])
    return "\n\n".join([
        DEFAULTS_HEADING,
        "What a user gets by pointing a default config at another task: `configs/a3c.yaml` (discrete actions) and "
        "`configs/a3c_continuous.yaml` (continuous actions) with `--set env.id=ID` and, so that the run stops "
        "there, `--set trainer.target_return=` gymnasium's threshold for ID; no hyperparameter changed. "
        f"Budget 300 s per run, seeds {seeds.start}..{seeds.stop - 1}, 2 workers, one run at a time "
        f"(`python -m experiments.learning --defaults --seeds {len(seeds)} --first-seed {seeds.start}`); "
        f"load {load()} at the end.",
        table, "![default configs](learning_defaults.png)"]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="runs per environment (default 5)")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds first..first+N-1 (default 0)")
    parser.add_argument("--tasks", default=",".join(t.name for t in TASKS),
                        help=f"comma-separated subset of {', '.join(t.name for t in TASKS)} (default: all)")
    for task in TASKS:
        parser.add_argument(f"--{task.name}-seconds", type=float, default=None,
                            help=f"wall-second budget of each {task.env_id} run (default {task.seconds:g})")
    parser.add_argument("--full-budget", action="store_true",
                        help="run every budget to the end instead of stopping at the target")
    parser.add_argument("--defaults", action="store_true",
                        help="the default configs with only env.id changed (learning.md's last section)")
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error(f"argument --seeds: got {args.seeds}; allowed: an integer >= 1")
    chosen = args.tasks.split(",")
    unknown = sorted(set(chosen) - {t.name for t in TASKS})
    if unknown:
        parser.error(f"argument --tasks: got {', '.join(unknown)}; allowed: {', '.join(t.name for t in TASKS)}")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    started = load()
    results: dict[Task, list[dict]] = {}
    skipped = []
    budgets = {}
    for task in (t for t in (DEFAULT_TASKS if args.defaults else TASKS) if t.name in chosen):
        if not available(task):
            skipped.append(task)
            continue
        budgets[task] = getattr(args, f"{task.name}_seconds") or task.seconds
        results[task] = [run_seed(task, seed, budgets[task], args.full_budget) for seed in seeds]
    path = RESULTS / "learning.md"
    previous = path.read_text() if path.exists() else ""
    kept_head, _, kept_defaults = previous.partition(DEFAULTS_HEADING)
    if args.defaults:
        plot(results, RESULTS / "learning_defaults.png")
        path.write_text(kept_head.rstrip("\n") + "\n\n" + defaults_section(results, seeds))
        print(path.read_text())
        return
    plot(results, RESULTS / "learning.png")
    table = markdown_table(["environment", "target", "final mean return (last 100 episodes)", "target met",
                            "seeds reaching it", "seconds to reach it", "wall time", "env steps", "env steps/s"],
                           [row(task, runs) for task, runs in results.items()])
    budget_text = ", ".join(f"{t.env_id} {b:g} s" for t, b in budgets.items())
    notes = [f"Budgets per run: {budget_text}; seeds {seeds.start}..{seeds.stop - 1}, 2 workers, one run at a time. "
             + ("Every run used its whole budget." if args.full_budget else
                "A run stops as soon as the mean of its last 100 episode returns reaches the target, so the "
                "final mean return of a run that reached it is about the target."),
             "Final mean return: the mean of the last 100 episode returns when the run ended, as mean ± std "
             "over seeds; the target is met when every seed's mean of 100 returns reached it within the budget.",
             f"Load: {started} at the start, {load()} at the end (above 2, other work shared the cores and "
             "slowed these runs).",
             "![learning curves](learning.png)"]
    if skipped:
        notes.append("Not run (optional extra not installed): "
                     + ", ".join(f"{t.env_id} (pip install -e '.[box2d]')" for t in skipped) + ".")
    write_result("learning", "A3C learning results on classic control", [table, *notes])
    if kept_defaults:
        path.write_text(path.read_text().rstrip("\n") + "\n\n" + DEFAULTS_HEADING + kept_defaults)
    print(path.read_text())


if __name__ == "__main__":
    main()
