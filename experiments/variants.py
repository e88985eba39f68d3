"""What a change of a shipped config does for A3C on its task, measured on the same seeds.

Every variant is the task's config (learning.py's TASKS) plus a few `--set`s,
run once per seed for the same wall-second budget (2 workers, one run at a
time), stopping at the task's target mean return over the last 100 episodes.
Each run's outcome is kept in experiments/results/TASK_variants.json (a variant
measured again replaces its runs), and experiments/results/TASK_variants.md is
written from all of them: per variant, the seeds that reached the target, the
wall seconds of those runs (they stop at the target), and the final mean returns.

usage: python -m experiments.variants --task lunarlander|pendulum [--seeds 5] [--first-seed 10]
           [--seconds 480] [--variants baseline,normalize_obs,...] [--report-only]
"""
from __future__ import annotations

import argparse
import json
import statistics

from experiments.common import RESULTS, load, markdown_table, write_result
from experiments.learning import TASKS, Task, available, mean_std, run_seed

REACHED = "target_return reached"

VARIANTS: dict[str, dict[str, tuple[str, ...]]] = {
    "lunarlander": {
        "baseline": (),
        "lr_decay": ("optimizer.lr_decay=linear",),
        "normalize_obs": ("env.normalize_obs=true",),
        "separate_value_body": ("model.shared_body=false",),
        "normalize_advantages": ("algorithm.normalize_advantages=true",),
        "entropy_0.01": ("algorithm.entropy_coef=0.01",),
        "total_steps_20M": ("trainer.total_steps=20000000",),  # the 900 s budget binds, not the 5 M steps
    },
    "pendulum": {
        "baseline": (),
        # the lr decays linearly to 0 over total_steps: 3 M run out at about 60 s of the 600 s budget
        "total_steps_10M": ("trainer.total_steps=10000000",),
        "total_steps_20M": ("trainer.total_steps=20000000",),
    },
}
"""Per task, each variant's overrides of the shipped config."""


def measure(task: Task, name: str, seeds: range, seconds: float) -> dict:
    """Run variant `name` of `task` on every seed; what the store keeps of it."""
    started = load()
    runs = []
    for seed in seeds:
        s = run_seed(task, seed, seconds, False, VARIANTS[task.name][name])["summary"]
        runs.append({"seed": seed, "stop_reason": s["stop_reason"], "wall_seconds": s["wall_seconds"],
                     "mean_return": s["mean_return"], "env_steps": s["env_steps"],
                     "steps_per_second": s["steps_per_second"]})
    return {"overrides": list(VARIANTS[task.name][name]), "budget_seconds": seconds,
            "load": f"{started} to {load()}", "runs": runs}


def row(name: str, variant: dict) -> list[str]:
    runs = variant["runs"]
    reached = [r["wall_seconds"] for r in runs if r["stop_reason"] == REACHED]
    finals = [r["mean_return"] for r in runs if r["mean_return"] is not None]
    return [name, " ".join(f"`{o}`" for o in variant["overrides"]) or "(the shipped config)",
            ", ".join(str(r["seed"]) for r in runs), f"{len(reached)} of {len(runs)}",
            mean_std(reached) + (" s" if reached else ""), mean_std(finals),
            f"{statistics.mean(r['steps_per_second'] for r in runs):,.0f}", f"{variant['budget_seconds']:g} s",
            variant["load"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", required=True, choices=sorted(VARIANTS), help="the task whose config varies")
    parser.add_argument("--seeds", type=int, default=5, help="runs per variant (default 5)")
    parser.add_argument("--first-seed", type=int, default=10, help="seeds first..first+N-1 (default 10)")
    parser.add_argument("--seconds", type=float, default=480, help="wall-second budget per run (default 480)")
    parser.add_argument("--variants", default="baseline", help="comma-separated subset of the task's variants")
    parser.add_argument("--report-only", action="store_true", help="rewrite the .md from the .json, run nothing")
    args = parser.parse_args()
    task, variants = next(t for t in TASKS if t.name == args.task), VARIANTS[args.task]
    if not available(task):
        parser.error(f"{task.env_id} needs an optional extra that is not installed (module {task.needs})")
    chosen = [] if args.report_only else args.variants.split(",")
    unknown = sorted(set(chosen) - set(variants))
    if unknown:
        parser.error(f"argument --variants: got {', '.join(unknown)}; allowed: {', '.join(variants)}")
    store_file = RESULTS / f"{task.name}_variants.json"
    store = json.loads(store_file.read_text()) if store_file.exists() else {}
    for name in chosen:
        store[name] = measure(task, name, range(args.first_seed, args.first_seed + args.seeds), args.seconds)
        store_file.write_text(json.dumps(store, indent=1) + "\n")
    target = f"{task.target:g}"
    table = markdown_table(["variant", "overrides", "seeds", f"seeds reaching {target}", "seconds to reach it",
                            "final mean return", "env steps/s", "budget", "load (1-min average, start to end)"],
                           [row(name, store[name]) for name in variants if name in store])
    notes = [f"Each run: 2 workers, one run at a time, stopped once the mean of its last 100 returns reached {target} "
             f"(its wall seconds are the seconds to reach it) or at the budget. Runs of every variant are in "
             f"{store_file.name}. Under a load above 2 other work shared the cores: seconds are longer "
             "than on a quiet machine, for every variant alike."]
    path = write_result(f"{task.name}_variants", f"A3C on {task.env_id}: changes of configs/{task.config}, one at "
                        "a time", [table, *notes],
                        command=f"python -m experiments.variants --task {task.name} --variants NAME,...")
    print(path.read_text())


if __name__ == "__main__":
    main()
