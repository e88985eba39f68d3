"""A/B of this checkout against another commit: the same training runs, alternating, on the same machine.

A change that moves code (a refactor, a new acting path) must leave speed where it was. For each case (A3C and
IMPALA on CartPole, Hogwild's MLP, IMPALA on Pong) this trains the shipped config for a fixed time in a
worktree of `--base` and in this checkout, alternating which goes first in each round, and compares their
steady env steps/s: the env steps logged between the first log past the first seconds and the last, over
the time between them (start-up counts nowhere).
Hogwild's steps are training samples. Writes experiments/results/ab.md.

Run: python -m experiments.ab_checkouts --base REF [--rounds 3] [--seconds 20] [--cases a3c,impala,hogwild,pong]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
from pathlib import Path

from experiments.common import REPO, fmt_ratio, load, markdown_table, scalar_events, train_run, write_result

CASES = {  # name: (config, overrides)
    "a3c": ("a3c.yaml", ()),
    "impala": ("impala.yaml", ()),
    "hogwild": ("hogwild_mlp.yaml", ("algorithm.target_accuracy=1.0",)),
    "pong": ("impala_pong.yaml", ()),
}
WARMUP_S = 4.0


def steps_per_s(checkout: Path, case: str, seconds: float, seed: int) -> float:
    """Steady env steps/s of one run of `case` trained from `checkout` for `seconds`."""
    config, overrides = CASES[case]
    sets = [*overrides, f"seed={seed}", f"trainer.max_seconds={seconds}", "trainer.total_steps=1000000000",
            "trainer.target_return=null", "logging.progress=false", "logging.log_every_s=1"]
    with tempfile.TemporaryDirectory() as logdir:
        run_dir = train_run(checkout / "configs" / config, sets, Path(logdir), timeout=seconds + 300, cwd=checkout)
        events = scalar_events(run_dir, "perf/env_steps_per_s")  # its step axis counts env steps
    steady = [e for e in events if e.wall_time - events[0].wall_time >= WARMUP_S] if events else []
    if len(steady) < 2:
        raise RuntimeError(f"{case} in {checkout} logged too little past its first {WARMUP_S:g} s to time it")
    return (steady[-1].step - steady[0].step) / (steady[-1].wall_time - steady[0].wall_time)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit (or branch) to compare this checkout with")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side per case")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each run")
    parser.add_argument("--cases", default="a3c,impala,hogwild,pong", help=f"some of {', '.join(CASES)}")
    args = parser.parse_args()
    cases = args.cases.split(",")
    unknown = [case for case in cases if case not in CASES]
    if unknown:
        parser.error(f"--cases: got {', '.join(unknown)}; allowed: {', '.join(CASES)}")
    base_rev = subprocess.run(["git", "rev-parse", "--short", args.base], cwd=REPO, check=True, text=True,
                              capture_output=True).stdout.strip()
    head_rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, check=True, text=True,
                              capture_output=True).stdout.strip()
    with tempfile.TemporaryDirectory() as parent:
        base = Path(parent) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(base), base_rev], cwd=REPO, check=True,
                       capture_output=True)
        try:
            rates: dict[str, dict[str, list[float]]] = {case: {"base": [], "head": []} for case in cases}
            for round_ in range(args.rounds):
                for case in cases:
                    sides = [("base", base), ("head", REPO)]
                    for side, checkout in sides if round_ % 2 == 0 else sides[::-1]:
                        rate = steps_per_s(checkout, case, args.seconds, seed=round_)
                        rates[case][side].append(rate)
                        print(f"round {round_ + 1} {case} {side}: {rate:,.0f} env steps/s", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO, capture_output=True)
    rows = []
    for case in cases:
        base_median, head_median = (statistics.median(rates[case][side]) for side in ("base", "head"))
        rows.append([case, CASES[case][0], ", ".join(f"{r:,.0f}" for r in rates[case]["base"]),
                     ", ".join(f"{r:,.0f}" for r in rates[case]["head"]), fmt_ratio(head_median, base_median)])
    table = markdown_table(["case", "config", f"{base_rev} (env steps/s)", f"{head_rev} (env steps/s)",
                            f"{head_rev} / {base_rev} (medians)"], rows)
    prose = (f"Each run trains the shipped config for {args.seconds:g} s (Hogwild's until then, its accuracy target "
             f"out of reach); its rate is the env steps it logged past its first {WARMUP_S:g} s over the time they took. "
             f"{args.rounds} rounds, the side that goes first alternating, runs one at a time; {load()} when it ended.")
    path = write_result("ab", f"A/B: {head_rev} against {base_rev}", [prose, table])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
