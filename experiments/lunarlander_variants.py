"""What each change of the strong A2C/PPO baselines does for A3C on LunarLander-v3, measured on the same seeds.

Every variant is configs/a3c_lunarlander.yaml plus a few `--set`s, run once per
seed for the same wall-second budget (2 workers, one run at a time), stopping
at a mean return of 200 over the last 100 episodes. Each run's outcome is kept
in experiments/results/lunarlander_variants.json (a variant measured again
replaces its runs), and experiments/results/lunarlander_variants.md is written
from all of them: per variant, the seeds that reached 200, the wall seconds of
those runs (they stop at the target), and the final mean returns.

usage: python experiments/lunarlander_variants.py [--seeds 5] [--first-seed 10] [--seconds 480]
           [--variants baseline,normalize_obs,...]
"""
from __future__ import annotations

import argparse
import json
import statistics

from common import RESULTS, load, markdown_table, write_result
from learning import TASKS, available, mean_std, run_seed

LUNARLANDER = next(t for t in TASKS if t.name == "lunarlander")
STORE = RESULTS / "lunarlander_variants.json"
REACHED = "target_return reached"

VARIANTS: dict[str, tuple[str, ...]] = {
    "baseline": (),
    "lr_decay": ("optimizer.lr_decay=linear",),
    "normalize_obs": ("env.normalize_obs=true",),
    "separate_value_body": ("model.shared_body=false",),
    "normalize_advantages": ("algorithm.normalize_advantages=true",),
    "entropy_0.01": ("algorithm.entropy_coef=0.01",),
    "total_steps_20M": ("trainer.total_steps=20000000",),  # the 900 s budget binds, not the 5 M steps
}
"""Each variant's overrides of the shipped config."""


def measure(name: str, seeds: range, seconds: float) -> dict:
    """Run variant `name` on every seed; what the store keeps of it."""
    started = load()
    runs = []
    for seed in seeds:
        s = run_seed(LUNARLANDER, seed, seconds, False, VARIANTS[name])["summary"]
        runs.append({"seed": seed, "stop_reason": s["stop_reason"], "wall_seconds": s["wall_seconds"],
                     "mean_return": s["mean_return"], "env_steps": s["env_steps"],
                     "steps_per_second": s["steps_per_second"]})
    return {"overrides": list(VARIANTS[name]), "budget_seconds": seconds, "load": f"{started} to {load()}",
            "runs": runs}


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
    parser.add_argument("--seeds", type=int, default=5, help="runs per variant (default 5)")
    parser.add_argument("--first-seed", type=int, default=10, help="seeds first..first+N-1 (default 10)")
    parser.add_argument("--seconds", type=float, default=480, help="wall-second budget per run (default 480)")
    parser.add_argument("--variants", default="baseline,normalize_obs", help="comma-separated subset of the variants")
    args = parser.parse_args()
    if not available(LUNARLANDER):
        parser.error("LunarLander needs the box2d extra: pip install -e '.[box2d]'")
    chosen = args.variants.split(",")
    unknown = sorted(set(chosen) - set(VARIANTS))
    if unknown:
        parser.error(f"argument --variants: got {', '.join(unknown)}; allowed: {', '.join(VARIANTS)}")
    store = json.loads(STORE.read_text()) if STORE.exists() else {}
    for name in chosen:
        store[name] = measure(name, range(args.first_seed, args.first_seed + args.seeds), args.seconds)
        STORE.write_text(json.dumps(store, indent=1) + "\n")
    table = markdown_table(["variant", "overrides", "seeds", "seeds reaching 200", "seconds to reach it",
                            "final mean return", "env steps/s", "budget", "load (1-min average, start to end)"],
                           [row(name, store[name]) for name in VARIANTS if name in store])
    notes = ["Each run: 2 workers, one run at a time, stopped once the mean of its last 100 returns reached 200 "
             "(its wall seconds are the seconds to reach it) or at the budget. Runs of every variant are in "
             "lunarlander_variants.json. Under a load above 2 other work shared the cores: seconds are longer "
             "than on a quiet machine, for every variant alike."]
    path = write_result("lunarlander_variants", "A3C on LunarLander-v3: the baselines' changes, one at a time",
                        [table, *notes], command="python experiments/lunarlander_variants.py --variants NAME,...")
    print(path.read_text())


if __name__ == "__main__":
    main()
