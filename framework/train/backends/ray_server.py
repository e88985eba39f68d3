"""The parameter server of a Ray run: the global parameters, and what each node group last reported.

Note [the exchange]. A node group keeps `base`, the global parameters it last
received. Every `trainer.ray.sync_every_s` it pushes `delta = local - base`
(everything its workers changed since) and receives the global parameters
with its delta applied: `global += delta` is all the server computes, one
vectorised add, whatever optimizer the workers run. The group then moves its
own parameters by `global - local at the push`, which keeps what its workers
did while the exchange was under way, and makes `global` its new base. No
group waits for another: one actor applies pushes in arrival order, one call
at a time (Downpour SGD's asynchronous server, with deltas for gradients).

Staleness is measured in exchanges: the pushes of other groups applied
between a group's pull and its next push (the server's version counter
moves by one per push). With G groups pushing at the same period it hovers
near G - 1; much more means the server or a group is falling behind.

The server also holds each group's report of its last exchange (counters,
metric sums, new episodes, ended workers, exchange time, now and then its
optimizer state and its buffers: normalisation statistics, which each node
keeps for itself), so the driver learns everything with one call (`state`).
Its cost per exchange: one add and one copy of the parameters, plus the
transfer both ways (about 3.5 ms for 400 KB on one machine).

The reply also says how many updates the global parameters hold (the
accepted reports' updates, and a resumed run's before them): a group counts
the others' as its workers' `updates elsewhere` (RunStats), so that an
actor-learner run's actors, which take the learners' parameters from the
server, tag their trajectories with the learners' update count, and the policy
lag is counted across nodes as on one machine.

Note [fencing]. The reports the server accepted are the run's one source of
counts: the step budget it hands the groups sums them, and the driver's
statistics are their copy. A group the driver declares lost is fenced
(`fence`): the server hands over its last record and from then on refuses
its exchanges (None), applying neither its delta nor its report, so a group
whose node was declared dead but still runs (a hung raylet: Ray cannot kill
what it cannot reach) changes neither the global parameters nor any count.
A refused group stops its workers. A group is fenced by its incarnation (one
start of it), so a restarted group's new start is not.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from framework.runtime.run_stats import STEPS, UPDATES


@dataclass
class GroupRecord:
    """What the server keeps of one node group (one start of it: an incarnation)."""

    counters: np.ndarray | None = None
    metric_sums: np.ndarray | None = None
    episodes: list[tuple[int, np.ndarray, np.ndarray]] = field(default_factory=list)
    """(row, returns, lengths) not yet taken by the driver."""
    exits: list[tuple[int, bool, str, str]] = field(default_factory=list)
    """(rank, clean, summary, traceback) of workers that ended, not yet taken by the driver."""
    exchanges: int = 0
    staleness: int = 0
    """The sum over this group's pushes of the other groups' pushes since its pull."""
    exchange_s: float = 0.0
    """Seconds this group spent in exchanges, as it measured them (round trips)."""
    relay: dict[str, float] = field(default_factory=dict)
    """What the group relayed to a central group, or took from feeding ones (ray_node.RELAY_COUNTS)."""
    optimizer: dict[str, Any] | None = None
    buffers: dict[str, np.ndarray] | None = None
    """The group's optimizer state and buffers, not yet taken by the driver."""
    last_push: float = 0.0


class ParameterServer:
    """The global parameters (one flat float array), their version, and the groups' reports."""

    def __init__(self, params: np.ndarray, steps_before: int, updates_before: int = 0):
        self.params = np.array(params, copy=True)
        self.version = 0
        self.steps_before, self.updates_before = steps_before, updates_before
        """Env steps and updates of the run before these groups (a resumed run's, or those of groups that were
        replaced)."""
        self.groups: dict[int, GroupRecord] = {}
        self.fenced: set[int] = set()

    def exchange(self, group: int, delta: np.ndarray | None, pulled: int,
                 report: dict[str, Any]) -> tuple[np.ndarray, int, int, int] | None:
        """Apply a group's delta (None: only report) and report; (global parameters, version, run's env steps, run's
        updates), or None, applying nothing, for a fenced group."""
        if group in self.fenced:
            return None
        record = self.groups.setdefault(group, GroupRecord())
        if delta is not None:
            record.staleness += self.version - pulled
            record.exchanges += 1
            self.params += delta
            self.version += 1
        record.counters, record.metric_sums = report["counters"], report["metric_sums"]
        record.episodes += report["episodes"]
        record.exits += report["exits"]
        record.exchange_s, record.relay = report["exchange_s"], report["relay"]
        record.last_push = time.monotonic()
        if report["optimizer"] is not None:
            record.optimizer, record.buffers = report["optimizer"], report["buffers"]
        steps = sum(int(r.counters[:, STEPS].sum()) for r in self.groups.values())
        updates = sum(int(r.counters[:, UPDATES].sum()) for r in self.groups.values())
        return self.params.copy(), self.version, self.steps_before + steps, self.updates_before + updates

    def state(self, params: bool) -> dict[str, Any]:
        """For the driver: every group's record (episodes, exits, optimizer state and buffers handed over once),
        each group's seconds since its last push, and with `params` the global parameters."""
        groups = {group: self._hand_over(record) for group, record in self.groups.items() if group not in self.fenced}
        return {"params": self.params.copy() if params else None, "version": self.version, "groups": groups}

    def fence(self, group: int) -> dict[str, Any]:
        """Refuse the group's exchanges from now on; its record as `state` gives it, the last one (Note [fencing])."""
        self.fenced.add(group)
        return self._hand_over(self.groups.get(group, GroupRecord()))

    @staticmethod
    def _hand_over(record: GroupRecord) -> dict[str, Any]:
        """A group's record for the driver, with its seconds since its last push; episodes, exits, optimizer state
        and buffers are handed over once."""
        report = {"counters": record.counters, "metric_sums": record.metric_sums, "episodes": record.episodes,
                  "exits": record.exits, "exchanges": record.exchanges, "staleness": record.staleness,
                  "exchange_s": record.exchange_s, "relay": record.relay,
                  "silent_s": time.monotonic() - record.last_push,
                  "optimizer": record.optimizer, "buffers": record.buffers}
        record.episodes, record.exits, record.optimizer, record.buffers = [], [], None, None
        return report
