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

An actor-learner run (a plugin with a central role: `Role.central`) has two
kinds of group. On each node a *feeding* group runs the node's actors into
the node's own trajectory buffer, exactly as on one machine; its relay
thread takes their rollouts out in batches (`Algorithm.collect`) and sends
each batch, NumPy arrays, in one call to the *central* group, which runs the
learners at `trainer.ray.learner_node` and writes the batch into its buffer
(`Algorithm.deliver`), where the learners take it as locally. A feeding
group's workers only read the parameters: it pushes no delta and takes the
global parameters, which the central group's learners move, at each
exchange. The central group refuses the batches of a group the driver
declared lost (`fence`, as the parameter server does), and takes none once it
stops. What went through counts in `relay` (RELAY_COUNTS), reported with the
exchange.
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
from framework.runtime.run_stats import STEPS, UPDATES

FENCED = "the parameter server refused its exchange (the driver had declared it lost)"
RELAY_COUNTS = ("sent", "batches", "relay_s", "received", "dropped", "deliveries", "deliver_s")
"""A feeding group's rollouts sent (that the central group stored), batches and seconds in those calls (round
trips); the central group's rollouts received (stored) and dropped (overwritten on arrival, their actors' slots
full), batches taken and seconds spent storing them."""


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
                 buffers: dict[str, np.ndarray], optimizer_state: dict[str, Any], server: Any, central: Any = None):
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
        launch = Launch(config, algorithm, model, optimizer, stats, list(generations), roles=algorithm.roles(config))
        self.backend = LocalBackend(launch, ranks)
        self.algorithm, self.shared = algorithm, self.backend.shared
        self.central = central
        """The central group's actor this group feeds (None: it feeds none, or is the central group)."""
        self.seen = np.zeros(len(ranks), dtype=np.int64)
        self.exits: list[WorkerExit] = []
        self.exchange_s = 0.0
        self.state_sent = time.monotonic()
        self.stopping = threading.Event()
        self.closing = threading.Event()
        """Set when `serve` ends: the relay stops, the central group takes no more batches."""
        self.restarts: queue.SimpleQueue[int] = queue.SimpleQueue()
        self.relay = dict.fromkeys(RELAY_COUNTS, 0.0)
        self.relay_failure: str | None = None
        self.gate = threading.Condition()
        """The central group's: guards `relay`, `fenced` and `delivering` against concurrent deliveries."""
        self.fenced: set[int] = set()
        self.delivering = 0

    def stop(self) -> None:
        """Ask `serve` to stop the workers, exchange a last time and return."""
        self.stopping.set()

    def restart(self, rank: int) -> None:
        """Start rank again (done by `serve`'s thread)."""
        self.restarts.put(rank)

    def fence(self, group: int) -> None:
        """The central group's: take no batch from group (one start of it) from now on; the driver declared it lost."""
        with self.gate:
            self.fenced.add(group)

    def deliver(self, group: int, batch: Any) -> int | None:
        """The central group's: a feeding group's batch into the learners' buffer; how many of its items were
        stored (none once this group stops), or None for a fenced group, whose batches count nowhere."""
        with self.gate:
            if group in self.fenced:
                return None
            if self.closing.is_set():
                return 0
            self.delivering += 1
        stored = dropped = 0
        started = time.monotonic()
        try:
            stored, dropped = self.algorithm.deliver(self.config, self.shared, batch, self.closing.is_set)
        finally:
            with self.gate:
                self.relay["received"] += stored
                self.relay["dropped"] += dropped
                self.relay["deliveries"] += 1
                self.relay["deliver_s"] += time.monotonic() - started
                self.delivering -= 1
                self.gate.notify_all()
        return stored

    def _relay_batches(self) -> None:
        """A feeding group's relay thread: the node's batches to the central group until `closing`."""
        import ray

        try:
            while not self.closing.is_set():
                batch = self.algorithm.collect(self.config, self.shared, self.closing.is_set)
                if batch is None:
                    continue
                started = time.monotonic()
                stored = ray.get(self.central.deliver.remote(self.group, batch), timeout=self.settings["timeout_s"])
                if stored is None:
                    raise Fenced
                with self.gate:
                    self.relay["sent"] += stored
                    self.relay["batches"] += 1
                    self.relay["relay_s"] += time.monotonic() - started
        except Fenced:
            self.relay_failure = FENCED
        except ray.exceptions.RayError as exc:  # the central group died or did not answer within timeout_s
            self.relay_failure = f"its relay to the central group failed ({type(exc).__name__})"

    def _close(self, relay: threading.Thread | None) -> None:
        """Stop relaying: the relay thread joined, deliveries under way finished (no later one is taken)."""
        with self.gate:
            self.closing.set()
            self.gate.wait_for(lambda: self.delivering == 0, timeout=self.config["trainer"]["join_timeout_s"])
        if relay is not None:
            relay.join()

    def serve(self) -> str | None:
        """Run the group until stopped or its workers ended; None, or why it gave up (a stalled exchange, a failed
        relay)."""
        import ray  # this module runs in a Ray actor: ray is there

        relay = None
        try:
            self._exchange(delta=False)  # registers the group and sets the step budget before any worker runs
            self.backend.start(cancelled=self.stopping.is_set)
            if self.central is not None:
                relay = threading.Thread(target=self._relay_batches, name="relay", daemon=True)
                relay.start()
            while not self.stopping.wait(self.settings["sync_every_s"]):
                while not self.restarts.empty():
                    self.backend.restart(self.restarts.get())
                self.exits += self.backend.poll()
                if self.backend.running == 0:
                    break
                if self.relay_failure is not None:
                    break
                self._exchange()
        except ray.exceptions.RayError as exc:  # the server died or did not answer within timeout_s
            self._close(relay)
            self._stop_workers()
            return f"its exchange with the parameter server failed ({type(exc).__name__})"
        except Fenced:
            self._close(relay)
            self._stop_workers()
            return FENCED
        self._close(relay)
        self._stop_workers()
        if self.relay_failure is not None:
            return self.relay_failure
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
        feeds = self.central is not None  # its workers only read the parameters: no delta, no optimizer state
        with self.gate:
            relay = dict(self.relay)
        report = {"counters": snap.counters, "metric_sums": snap.metric_sums,
                  "episodes": self.stats.new_episodes_by_worker(self.seen),
                  "exits": [(e.rank, e.clean, e.summary, e.traceback) for e in self.exits],
                  "exchange_s": self.exchange_s, "relay": relay,
                  "optimizer": self.optimizer.state_dict() if send_state and not feeds else None,
                  "buffers": buffers_of(self.model) if send_state else None}
        delta = delta and not feeds
        current = self.params.copy()
        started = time.monotonic()
        reply = ray.get(
            self.server.exchange.remote(self.group, current - self.base if delta else None, self.version, report),
            timeout=self.settings["timeout_s"])
        if reply is None:
            raise Fenced
        params, version, run_steps, run_updates = reply
        if delta:
            self.exchange_s += time.monotonic() - started
        if feeds:
            self.params[...] = params
        else:
            self.params += params - current  # keeps what the workers did during the exchange
        self.stats.set_updates_elsewhere(run_updates - snap.total(UPDATES))
        self.base, self.version = np.array(params, copy=True), version
        self.exits = []
        if send_state:
            self.state_sent = now
        own = snap.total(STEPS)
        self.stats.set_step_budget(own + max(0, self.config["trainer"]["total_steps"] - run_steps))
