"""What each change of the strong A2C/PPO baselines does for A3C on LunarLander-v3, measured on the same seeds.

Every variant is configs/a3c_lunarlander.yaml plus a few `--set`s, run once per
seed for the same wall-second budget (2 workers, one run at a time), stopping
at a mean return of 200 over the last 100 episodes. Writes
experiments/results/lunarlander_variants.md: per variant, the seeds that reached
200, the seconds to reach it, and the final mean return.

usage: python experiments/lunarlander_variants.py [--seeds 5] [--first-seed 10] [--seconds 360]
           [--variants baseline,lr_decay,...]
"""
from __future__ import annotations

import argparse
import statistics

from common import load, markdown_table, write_result
from learning import TASKS, available, mean_std, reached_at, run_seed

LUNARLANDER = next(t for t in TASKS if t.name == "lunarlander")

VARIANTS: dict[str, tuple[str, ...]] = {
    "baseline": (),
    "lr_decay": ("optimizer.lr_decay=linear",),
    "normalize_obs": ("env.normalize_obs=true",),
    "separate_value_body": ("model.shared_body=false",),
    "normalize_advantages": ("algorithm.normalize_advantages=true",),
    "entropy_0.01": ("algorithm.entropy_coef=0.01",),
}
"""Each variant's overrides of the shipped config (see the README's "LunarLander" notes for what was kept)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="runs per variant (default 5)")
    parser.add_argument("--first-seed", type=int, default=10, help="seeds first..first+N-1 (default 10)")
    parser.add_argument("--seconds", type=float, default=LUNARLANDER.seconds, help="wall-second budget per run")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset of the variants")
    args = parser.parse_args()
    if not available(LUNARLANDER):
        parser.error("LunarLander needs the box2d extra: pip install -e '.[box2d]'")
    chosen = args.variants.split(",")
    unknown = sorted(set(chosen) - set(VARIANTS))
    if unknown:
        parser.error(f"argument --variants: got {', '.join(unknown)}; allowed: {', '.join(VARIANTS)}")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    started = load()
    rows = []
    for name in chosen:
        runs = [run_seed(LUNARLANDER, seed, args.seconds, False, VARIANTS[name]) for seed in seeds]
        solved = [t for t in (reached_at(r, LUNARLANDER.target) for r in runs) if t is not None]
        finals = [r["summary"]["mean_return"] for r in runs if r["summary"]["mean_return"] is not None]
        rows.append([name, " ".join(f"`{o}`" for o in VARIANTS[name]) or "(the shipped config)",
                     f"{len(solved)} of {len(runs)}", mean_std(solved) + (" s" if solved else ""),
                     f"{max(solved):.0f} s" if len(solved) == len(runs) else "n/a", mean_std(finals),
                     f"{statistics.mean(r['summary']['steps_per_second'] for r in runs):,.0f}"])
    table = markdown_table(["variant", "overrides", "seeds reaching 200", "seconds to reach it", "slowest seed",
                            "final mean return", "env steps/s"], rows)
    notes = [f"Seeds {seeds.start}..{seeds.stop - 1}, {args.seconds:g} s budget per run, 2 workers, one run at a "
             "time; a run stops once the mean of its last 100 returns reaches 200.",
             f"Load: {started} at the start, {load()} at the end (above 2, other work shared the cores and "
             "slowed these runs)."]
    path = write_result("lunarlander_variants", "A3C on LunarLander-v3: the baselines' changes, one at a time",
                        [table, *notes])
    print(path.read_text())


if __name__ == "__main__":
    main()
