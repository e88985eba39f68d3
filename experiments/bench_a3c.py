"""Benchmark: A3C on CartPole-v1 with `configs/a3c.yaml` against the PyTorch A3C reference, in one run.

Runs `train --config configs/a3c.yaml` once per seed (2 workers, the shipped
config) and `../shared/baselines/torch_a3c_cartpole.py 2 SECONDS` (2 workers),
one after the other on the same machine, and compares
  * env steps per second of training,
  * wall seconds until the mean of the last 100 episode returns reaches 475.
Writes experiments/results/a3c_cartpole.md and a3c_cartpole.png (mean of the
last 100 returns against wall time: hogshare's curves from its event files,
the reference's final figures from its printed output).

Run: python -m experiments.bench_a3c [--seeds 3] [--baseline-seconds 150]
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from experiments.common import (REPO, RESULTS, fmt_ratio, markdown_table, plot_return_curves, return_curve,
                                run_baseline, torch_available, write_result)

CONFIG = REPO / "configs" / "a3c.yaml"
TARGET_SPEED, TARGET_SOLVE = 10.0, 1 / 5
BASELINE_LINE = re.compile(r"wall=(?P<wall>[\d.]+)s steps=(?P<steps>\d+) steps_per_s=(?P<sps>\d+) "
                           r"episodes=(?P<episodes>\d+) last100=(?P<last100>[\d.]+) solved_s=(?P<solved>\S+)")


def run_ours(seed: int, logdir: Path) -> dict:
    """One `train` run of the shipped config; its summary plus the return curve (seconds, mean of last 100)."""
    command = [sys.executable, "-m", "framework.train", "train", "--config", str(CONFIG),
               "--logdir", str(logdir / f"seed{seed}"), "--set", f"seed={seed}", "--set", "logging.progress=false", "--set", "logging.log_every_s=0.25"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"train failed ({done.returncode}):\n{done.stderr[-2000:]}")
    run_dir = next(p for p in (logdir / f"seed{seed}").iterdir() if p.is_dir())
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"summary": summary, "curve": return_curve(run_dir, summary["started_at"])}


def run_torch(seconds: float) -> dict | None:
    """The reference's final figures, or None without torch."""
    if not torch_available():
        return None
    out = run_baseline("torch_a3c_cartpole.py", 2, seconds, timeout=seconds + 300)
    match = BASELINE_LINE.search(out)
    if match is None:
        raise RuntimeError(f"unexpected output of torch_a3c_cartpole.py: {out!r}")
    solved = match["solved"]
    return {"wall": float(match["wall"]), "steps": int(match["steps"]), "steps_per_s": float(match["sps"]),
            "episodes": int(match["episodes"]), "last100": float(match["last100"]),
            "solved_s": None if solved == "None" else float(solved)}


def plot(ours: list[dict], torch: dict | None, path: Path) -> None:
    def torch_marks(ax) -> None:
        if torch is None:
            return
        if torch["solved_s"] is not None:
            ax.plot([torch["solved_s"]], [475], "o", color="tab:red", label=f"torch: reached 475 at {torch['solved_s']:.0f} s")
        ax.plot([torch["wall"]], [torch["last100"]], "x", color="tab:red",
                label=f"torch: {torch['last100']:.0f} at the end ({torch['wall']:.0f} s)")

    plot_return_curves([("hogshare (one line per seed)", "tab:blue", [run["curve"] for run in ours])],
                       "A3C on CartPole-v1, 2 workers", "wall seconds since the run started", path,
                       extra=torch_marks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="hogshare runs, seeds 0..N-1 (default 3)")
    parser.add_argument("--baseline-seconds", type=float, default=150.0,
                        help="how long the torch reference trains (it does not stop at the target)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ours = []
        for seed in range(args.seeds):
            ours.append(run_ours(seed, Path(tmp)))
            s = ours[-1]["summary"]
            print(f"hogshare seed {seed}: {s['steps_per_second']:.0f} steps/s, solved at {s['solved_at_seconds']} s "
                  f"after {s['env_steps']} env steps", flush=True)
    torch = run_torch(args.baseline_seconds)
    print(f"torch: {torch}", flush=True)

    summaries = [r["summary"] for r in ours]
    speed = statistics.median(s["steps_per_second"] for s in summaries)
    solves = [s["solved_at_seconds"] for s in summaries]
    solved = [t for t in solves if t is not None]
    solve = statistics.median(solved) if len(solved) == len(solves) else None
    t_speed = torch["steps_per_s"] if torch else None
    t_solve = torch["solved_s"] if torch else None
    speed_ratio = speed / t_speed if t_speed else None
    # When the reference never got there, the length of its run bounds the ratio from above.
    solve_ratio = solve / (t_solve or torch["wall"]) if solve and torch else None
    solve_ratio_text = ("n/a" if solve_ratio is None else f"{'< ' if t_solve is None else ''}{solve_ratio:.2f}x")

    def fmt(x: float | None, unit: str = "") -> str:
        return "n/a" if x is None else f"{x:,.1f}{unit}"

    table = markdown_table(
        ["metric", "hogshare (median of seeds)", "torch reference", "hogshare / torch", "target"],
        [["env steps per second", f"{speed:,.0f}", "n/a" if t_speed is None else f"{t_speed:,.0f}",
          fmt_ratio(speed, t_speed), f">= {TARGET_SPEED:.0f}x"],
         ["seconds to mean(last 100) >= 475", fmt(solve, " s"),
          "n/a" if torch is None else fmt(t_solve, " s") if t_solve else f"not within {torch['wall']:.0f} s",
          solve_ratio_text, f"<= {TARGET_SOLVE:.2f}x"]])
    per_seed = markdown_table(
        ["seed", "env steps/s", "solved at (s)", "env steps at the stop", "updates", "episodes", "policy lag"],
        [[i, f"{s['steps_per_second']:,.0f}", fmt(s["solved_at_seconds"]), s["env_steps"], s["updates"],
          s["episodes"], f"{s['policy_lag_mean']:.2f}"] for i, s in enumerate(summaries)])
    torch_text = ("torch is not installed for the reference interpreter: its figures are n/a." if torch is None else
                  f"Reference (`torch_a3c_cartpole.py 2 {args.baseline_seconds:.0f}`): {torch['steps']:,} env steps "
                  f"in {torch['wall']:.1f} s ({torch['steps_per_s']:,.0f}/s), {torch['episodes']:,} episodes, mean of "
                  f"the last 100 returns {torch['last100']:.1f} at the end; "
                  + (f"reached 475 at {torch['solved_s']:.1f} s." if torch["solved_s"] else "never reached 475."))
    png = RESULTS / "a3c_cartpole.png"
    RESULTS.mkdir(parents=True, exist_ok=True)
    plot(ours, torch, png)
    met = [f"- env steps/s >= {TARGET_SPEED:.0f}x torch: "
           + ("n/a" if speed_ratio is None else "met" if speed_ratio >= TARGET_SPEED else "not met"),
           f"- time to solve <= {TARGET_SOLVE:.2f}x torch: "
           + ("n/a" if solve_ratio is None else "met" if solve_ratio <= TARGET_SOLVE else "not met")]
    path = write_result("a3c_cartpole", "A3C on CartPole-v1: hogshare against the PyTorch reference", [
        f"`train --config configs/a3c.yaml` ({len(ours)} seeds, 2 workers, 16 envs each, spawn) and "
        f"`torch_a3c_cartpole.py` (2 workers, one env each), run one after the other. Seconds count from "
        f"the start of training (after imports), as the reference counts them.",
        table, "\n".join(met), "Each hogshare run:", per_seed, torch_text,
        f"![mean return of the last 100 episodes against wall time]({png.name})"])
    print(f"wrote {path} and {png}")


if __name__ == "__main__":
    main()
