"""An algorithm's processes built in the test's own process: the shared model, optimizer, run statistics and
plugin state of a run, and a WorkerContext for each rank, so that a test drives a worker's, an actor's or a
learner's own code step by step (what is under test is the learning code, not the processes around it)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import framework
from framework import algorithms
from framework.runtime.algorithm import WorkerContext
from framework.runtime.run_stats import RunStats


@dataclass
class InProcessRun:
    """A run's shared parts for a validated config (2 ranks), its plugin, and contexts for its ranks."""
    config: dict
    first_seed: int

    def __post_init__(self) -> None:
        self.plugin = algorithms.get(self.config["algorithm"]["name"])
        framework.manual_seed(0)
        self.model = self.plugin.build_model(self.config).share_memory()
        self.optimizer = self.plugin.build_optimizer(self.model, self.config).share_memory()
        self.stats = RunStats(2, self.plugin.metrics, counts=self.plugin.counts)
        self.shared = self.plugin.build_shared(self.config, None, range(2))

    def context(self, rank: int, role: str) -> WorkerContext:
        """The context a process of `role` at `rank` gets, seeded first_seed + rank."""
        return WorkerContext(rank, self.first_seed + rank, self.config, self.model, self.optimizer,
                             self.stats.writer(rank), self.shared, {}, role, 0)

    def actor_and_learner(self) -> tuple[Any, Any]:
        """An actor-learner plugin's actor (rank 0) and learner (rank 1), each with a model of its own."""
        actor = self.plugin.actor_class(self.plugin.build_model(self.config), self.context(0, "actor"))
        learner = self.plugin.learner_class(self.plugin.build_model(self.config), self.context(1, "learner"))
        return actor, learner
