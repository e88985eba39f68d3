"""A node group: one Ray node's part of a run, a local run without its own monitor.

The actor builds the model and optimizer in the node's shared memory,
starting from the global parameters and the driver's buffers (normalisation
statistics, which each node then keeps for itself) and optimizer state, and
runs the local backend's worker processes on them for its contiguous ranks
(`trainer.ray.workers_per_node` of them) with their own run statistics. Its
`serve` call lasts as long as the group: it starts the workers, and every
`trainer.ray.sync_every_s` exchanges parameters with the parameter server
(see Note [the exchange] in `ray_server`), reporting the statistics, new
episodes and ended workers with them, and learning from the reply how many
env steps the whole run has taken (the workers' step budget).

Workers are started, restarted and joined from `serve`'s thread: the kernel
kills them when that thread's process dies (`die_with_parent`), so a node
killed outright leaves no orphan. An exchange that takes longer than
`trainer.ray.timeout_s` ends the group (its workers stopped): the driver
counts it as lost. So does an exchange the server refuses: the driver
declared the group lost and fenced it (Note [fencing] in `ray_server`), and
the group stops its workers without another exchange.
"""
from __future__ import annotations

import gc
import queue
import threading
import time
from typing import Any

import numpy as np

import sharing
from framework import algorithms
from framework.device import to_host
from framework.train.backends.base import Config, Launch, WorkerExit, share_model
from framework.train.backends.local import LocalBackend
from framework.runtime.run_stats import STEPS

FENCED = "the parameter server refused its exchange (the driver had declared it lost)"


class Fenced(Exception):
    """The parameter server refused the group's exchange: the driver declared it lost."""


def buffers_of(model: Any) -> dict[str, np.ndarray]:
    """Host copies of a model's buffers (normalisation statistics), by name."""
    return {name: to_host(buf.data_array, copy=True) for name, buf in model.named_buffers()}


def load_buffers(model: Any, buffers: dict[str, np.ndarray]) -> None:
    """Copy buffers (as buffers_of gives them) into the model's, in place."""
    for name, buf in model.named_buffers():
        buf.data_array[...] = buffers[name]


class NodeGroup:
    """Ranks `ranks` of a run on this node; made by the driver with the global parameters as `params`."""

    def __init__(self, config: Config, group: int, ranks: range, generations: list[int], params: np.ndarray,
                 buffers: dict[str, np.ndarray], optimizer_state: dict[str, Any], server: Any):
        sharing.set_sharing_strategy(config["trainer"]["sharing_strategy"])
        algorithm = algorithms.get(config["algorithm"]["name"])
        model, optimizer, stats = share_model(config, algorithm, algorithm.build_model(config), len(ranks))
        model.arena.data[...] = params
        load_buffers(model, buffers)
        optimizer.load_state_dict(optimizer_state)
        self.model = model
        self.config, self.group, self.server = config, group, server
        self.settings = config["trainer"]["ray"]
        self.optimizer, self.stats = optimizer, stats
        self.params = model.arena.data
        self.base, self.version = np.array(params, copy=True), 0  # both set again by the first exchange
        self.backend = LocalBackend(Launch(config, algorithm, model, optimizer, stats, list(generations)), ranks)
        self.seen = np.zeros(len(ranks), dtype=np.int64)
        self.exits: list[WorkerExit] = []
        self.exchange_s = 0.0
        self.state_sent = time.monotonic()
        self.stopping = threading.Event()
        self.restarts: queue.SimpleQueue[int] = queue.SimpleQueue()

    def stop(self) -> None:
        """Ask `serve` to stop the workers, exchange a last time and return."""
        self.stopping.set()

    def restart(self, rank: int) -> None:
        """Start rank again (done by `serve`'s thread)."""
        self.restarts.put(rank)

    def serve(self) -> str | None:
        """Run the group until stopped or its workers ended; None, or why it gave up (a stalled exchange)."""
        import ray  # this module runs in a Ray actor: ray is there

        try:
            self._exchange(delta=False)  # registers the group and sets the step budget before any worker runs
            self.backend.start(cancelled=self.stopping.is_set)
            while not self.stopping.wait(self.settings["sync_every_s"]):
                while not self.restarts.empty():
                    self.backend.restart(self.restarts.get())
                self.exits += self.backend.poll()
                if self.backend.running == 0:
                    break
                self._exchange()
        except ray.exceptions.RayError as exc:  # the server died or did not answer within timeout_s
            self._stop_workers()
            return f"its exchange with the parameter server failed ({type(exc).__name__})"
        except Fenced:
            self._stop_workers()
            return FENCED
        self._stop_workers()
        try:
            self._exchange(final=True)
        except ray.exceptions.RayError as exc:
            return f"its last exchange with the parameter server failed ({type(exc).__name__})"
        except Fenced:
            return FENCED
        return None

    def _stop_workers(self) -> None:
        """Stop the workers and drop their backend, whose locks (Hogwild's `locked`) then unlink their named semaphores
        (spawn and forkserver name them): multiprocessing's resource tracker, which would otherwise, goes down with
        the actor."""
        self.exits += self.backend.stop(self.config["trainer"]["join_timeout_s"])
        self.backend = None
        gc.collect()

    def _exchange(self, delta: bool = True, final: bool = False) -> None:
        """Push what changed since the last exchange with this group's report; take the global parameters."""
        import ray

        snap = self.stats.snapshot()
        now = time.monotonic()
        # the optimizer state (Adam's moments) and the buffers (normalisation statistics, each node's own) as
        # often as the run checkpoints them, and at the end
        send_state = final or now - self.state_sent >= self.config["trainer"]["checkpoint_every_s"]
        report = {"counters": snap.counters, "metric_sums": snap.metric_sums,
                  "episodes": self.stats.new_episodes_by_worker(self.seen),
                  "exits": [(e.rank, e.clean, e.summary, e.traceback) for e in self.exits],
                  "exchange_s": self.exchange_s,
                  "optimizer": self.optimizer.state_dict() if send_state else None,
                  "buffers": buffers_of(self.model) if send_state else None}
        current = self.params.copy()
        started = time.monotonic()
        reply = ray.get(
            self.server.exchange.remote(self.group, current - self.base if delta else None, self.version, report),
            timeout=self.settings["timeout_s"])
        if reply is None:
            raise Fenced
        params, version, run_steps = reply
        if delta:
            self.exchange_s += time.monotonic() - started
        self.params += params - current  # keeps what the workers did during the exchange
        self.base, self.version = np.array(params, copy=True), version
        self.exits = []
        if send_state:
            self.state_sent = now
        own = snap.total(STEPS)
        self.stats.set_step_budget(own + max(0, self.config["trainer"]["total_steps"] - run_steps))
