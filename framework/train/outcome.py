"""What a run's end says: the final/ metrics of its summary (TensorBoard's hparams, the trackers'), and what `train`
(and `run()` from Python) prints: the outcome line, and the commands that use the run next."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from framework.runtime.algorithm import Algorithm
from framework.runtime.formatting import significant
from framework.train.run_checkpoint import BEST


def final_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """The final/ scalars of a run's summary (TensorBoard's hparams metrics, and the trackers')."""
    metrics = {"final/mean_return": summary["mean_return"], "final/env_steps_per_s": summary["steps_per_second"],
               "final/solved_at_seconds": summary["solved_at_seconds"]}
    metrics.update({f"final/{k}": v for k, v in summary.get("evaluation", {}).items()})
    return {k: v for k, v in metrics.items() if v is not None}


def outcome_line(s: dict, algorithm: Algorithm, config: dict) -> str:
    """The outcome line of `train`: why it stopped, the counts (in the algorithm's units), and the return or the
    final evaluation (3 significant figures)."""
    steps_unit, episodes_unit = algorithm.units
    done = algorithm.episodes_done(config, s["env_steps"], s["episodes"])
    line = (f"{s['stop_reason']}; {s['env_steps']} {steps_unit}, {s['updates']} updates, "
            f"{done if isinstance(done, int) else significant(done)} {episodes_unit} "
            f"in {s['wall_seconds']:.1f} s ({s['steps_per_second']:,.0f} {steps_unit}/s)")
    if s["episodes"] == 0 and s.get("evaluation"):
        return line + "; final evaluation: " + ", ".join(f"{k} {significant(v)}" for k, v in s["evaluation"].items())
    solved = ("not set" if s["target_return"] is None else "not reached" if s["solved_at_seconds"] is None
              else f"{significant(s['target_return'])} reached at {s['solved_at_seconds']:.1f} s")
    return (line + f"; mean return {significant(s['mean_return'])} over the last {s['target_window']} episodes; "
            f"target {solved}")


def profile_line(s: dict) -> str | None:
    """The run's profile in one line: each phase's share of the worker processes' wall time, the largest first,
    and the share no phase accounts for (the processes' start); None when the run has none (no worker ran here)."""
    profile = s.get("profile") or {}
    wall = profile.get("wall_seconds") or 0.0
    if wall <= 0:
        return None
    shares = sorted(((seconds / wall, name) for name, seconds in profile["seconds"].items() if seconds > 0),
                    reverse=True)
    unaccounted = max(0.0, 1.0 - sum(share for share, _ in shares))
    return (f"profile of the workers' {wall:.1f} s: " + ", ".join(f"{name} {_percent(share)}" for share, name in shares)
            + f"; {_percent(unaccounted)} in no phase (their processes' start)")


def _percent(share: float) -> str:
    """A share as a whole percentage, '<1%' for one that rounds to 0 but is not."""
    return "<1%" if 0 < share < 0.005 else f"{share:.0%}"


def next_steps(s: dict, config: dict, run_dir: Path, checkpoint: Path, trust_code: bool = False) -> str:
    """The lines after the outcome: where the checkpoint is and the commands that use the run next (a resume that
    would stop at once raises the budget that stopped it, to twice its value; --trust-code where the run's code
    needs it: its config.yaml could not be signed; no evaluation of a run that took no step: it learned nothing)."""
    run = shlex.quote(str(run_dir)) + " --trust-code" * trust_code
    more = {"total_steps reached": "total_steps", "max_seconds reached": "max_seconds"}.get(s["stop_reason"])
    doubled = None if more is None else config["trainer"][more] * 2
    budget = "" if more is None else f" --set trainer.{more}={doubled if isinstance(doubled, int) else f'{doubled:g}'}"
    saved = f"checkpoint: {checkpoint}" if checkpoint.is_file() else "checkpoint: none was written"
    evaluations = [f"evaluate --run {run}"] + [f"evaluate --run {run} --checkpoint best"] * (run_dir / BEST).is_file()
    commands = evaluations * (s["env_steps"] > 0) + [f"tensorboard --logdir {shlex.quote(str(run_dir.parent))}",
                                                    f"train --resume {run}{budget}"]
    return "\n".join([saved, *(("next: " if i == 0 else " " * 6) + command for i, command in enumerate(commands))])
