"""Workers that ended: what the run says about them, and whether it restarts one or stops.

A worker that did not end cleanly is reported (with its traceback) and,
under `on_worker_failure: restart`, started again with a new seed, up to
`max_restarts`; but not once as many have failed as the run has processes
before its first step (an environment that fails in every worker's first
reset: a restart would fail alike). Workers lost with their machine (a Ray
node) are restarted under the same budget, or left out while others run.
Otherwise the run stops (`Restarts.handle` gives the failure).
"""
from __future__ import annotations

from typing import Any, Callable

from framework.train.backends.base import Backend, WorkerExit


def _ranges(numbers: list[int]) -> str:
    """Sorted numbers as runs: [0, 1, 2, 5] -> '0-2, 5'."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


_ALIKE_LIMIT = 3


def exit_lines(exits: list[WorkerExit]) -> list[str]:
    """What to say about workers that did not end cleanly: each report, but one line for more than _ALIKE_LIMIT
    that ended the same way without a traceback (hundreds of workers stopped while still starting)."""
    lines: list[str] = []
    alike: dict[tuple[str, str], list[int]] = {}
    for ended in exits:
        if ended.clean:
            continue
        how = ended.summary.removeprefix(f"{ended.name} ")
        if ended.traceback or how == ended.summary:
            lines.append(ended.report())
        else:
            alike.setdefault((ended.role, how), []).append(ended.position)
    for (role, how), indices in alike.items():
        if len(indices) > _ALIKE_LIMIT:
            lines.append(f"{role}s {_ranges(indices)} ({len(indices)} in all) each {how}")
        else:
            lines += [f"{role} {index} {how}" for index in indices]
    return lines


class Restarts:
    """The rule for workers that did not end cleanly (see the module docstring), over one run's session."""

    def __init__(self, trainer: dict[str, Any], processes: int, steps: Callable[[], int],
                 say: Callable[[str], None]):
        self.trainer, self.processes, self.steps, self.say = trainer, processes, steps, say
        self.first_steps = steps()  # a resumed run's restored count
        self.failures_before_a_step = 0
        """Workers that failed before this session took its first step."""

    def handle(self, exits: list[WorkerExit], backend: Backend) -> str | None:
        """Report each exit that was not clean and restart it where the rule allows; the failure that stops the
        run (the ended worker's summary, said with why), or None."""
        tcfg = self.trainer
        for ended in exits:
            if ended.clean:
                continue
            self.say(ended.report())
            if self.steps() == self.first_steps:
                self.failures_before_a_step += 1
            may_restart = (tcfg["on_worker_failure"] == "restart" and backend.restarts < tcfg["max_restarts"]
                           and self.failures_before_a_step < self.processes)
            if may_restart:
                backend.restart(ended.rank)
                what = "the lost workers on another node" if ended.lost else ended.name
                self.say(f"restarting {what} with a new seed "
                         f"(restart {backend.restarts} of at most {tcfg['max_restarts']})")
                continue
            if ended.lost and backend.running > 0:  # the machine's fault, not the workers': go on without them
                continue
            if ended.lost:
                why = "no workers left"
            elif tcfg["on_worker_failure"] == "abort":
                why = "on_worker_failure: abort"
            elif self.failures_before_a_step >= self.processes:
                why = (f"{self.failures_before_a_step} failures, as many as the run has processes, before its first "
                       f"step: a restart would fail alike")
            else:
                why = f"max_restarts ({tcfg['max_restarts']}) used up"
            self.say(f"stopping the run ({why}): {ended.summary}")
            return ended.summary
        return None
