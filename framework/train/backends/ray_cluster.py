"""The `ray` backend: one node group per Ray node, exchanging parameters asynchronously through a server.

Inside a node, a group (`ray_node.NodeGroup`) is what the local backend is on
one machine: `trainer.ray.workers_per_node` worker processes updating the
node's shared model lock-free. Between nodes, every group pushes its delta
to a parameter-server actor (`ray_server`) and pulls the global parameters
every `trainer.ray.sync_every_s`, without waiting for the others. This
process stays what it is for the local backend: the monitor's. Every
`sync_every_s` (in `poll`) it copies the global parameters into the run's
shared model, which the monitor evaluates and checkpoints, and the groups'
counters, episodes and ended workers into the run's statistics, so that
checkpoints, TensorBoard, summary.json and `--resume` are the local ones:
a checkpoint of either backend resumes with the other.

`trainer.ray.address: null` starts a Ray of `nodes` simulated nodes on this
machine (`ray.cluster_utils.Cluster`: each its own raylet and 1 CPU) in a
temporary directory, and shuts all of it down at the end; a watcher process
(`sharing.watcher`: it stops every process whose RAY_TMPDIR is the
directory or that has a file open in it, where Ray's write their logs) does
it when `train` dies first (SIGKILL). An address joins a cluster, where
only the run's own actors are removed. Groups are pinned to nodes with a
hard node-affinity strategy (simulated nodes share one IP).

Faults: a group whose actor dies (its node lost) or that has not exchanged
for `trainer.ray.timeout_s` (a hung node) is reported as lost
(`WorkerExit.lost`): the run goes on without it, or the monitor restarts it
on the node with the fewest groups; `node_failures` goes into summary.json.
A lost group is fenced first (Note [fencing] in `ray_server`): a hung node's
actor, declared dead by Ray but still running where ray.kill cannot reach
it, changes neither the global parameters nor any count from then on, and
stops its workers at its next exchange. The run's counts are the reports the
server accepted, the same ones its step budget sums.
A parameter server that dies or does not answer within `timeout_s` stops
the run (BackendError): the last checkpoint stays as it was written.

An actor-learner run (IMPALA, APPO: a plugin with a central role) spreads its
actors over the nodes in feeding groups, as A3C's workers, and runs its
learners in one more group, the central one, at `trainer.ray.learner_node`
(the head by default), which the feeding groups send their trajectories to in
batches (see `ray_node`). A lost feeding group is fenced at the central group
too, so its later batches count nowhere; the central group lost stops the run
as the parameter server's loss does.
"""
from __future__ import annotations

import os
import shutil
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from framework.train.backends.base import Backend, BackendError, Launch, WorkerExit, set_environment
from framework.train.backends.ray_node import RELAY_COUNTS, NodeGroup, buffers_of, load_buffers
from framework.train.backends.ray_server import ParameterServer
from framework.runtime.run_stats import EPISODES, SEQ, SKIP_STREAK, STEPS, UPDATES
from framework.train.startup import RunError
from framework.train.stop_signals import STOP_SIGNALS
from sharing import watcher

INSTALL_HINT = "pip install -e '.[ray]'"
OBJECT_STORE_BYTES = 128 << 20
"""Object store of each simulated node, set explicitly: with a small /dev/shm Ray would fall back to /tmp."""
DIRECTORY_PREFIX = "hogshare-ray-"
DIRECTORY_PARENT = "/tmp"
"""Not $TMPDIR: Ray's socket paths under the simulated cluster's directory must stay under 108 characters."""
SIMULATED_CLUSTER_CONFIG = {"health_check_period_ms": 500, "health_check_timeout_ms": 500,
                            "health_check_failure_threshold": 3, "health_check_initial_delay_ms": 0,
                            "max_direct_call_object_size": 2 << 20, "worker_niceness": 0}
"""A simulated cluster's settings: a dead node is noticed in 1-3 s (not 15-66 s); objects under 2 MB travel
inside the call (an exchange of 400 KB takes half the time it takes through the object store); and the actors,
with the worker processes they start, run at the niceness of `train` itself, as the local backend's workers do.
Ray's default of 15 suits a cluster's own machines: on one shared with other programs, two busy processes left
the node groups 3% of the CPU (1,800 env steps/s instead of 18,000 on configs/a3c_ray.yaml)."""
PARAMS_EVERY_S = 0.5
"""How old the run's copy of the global parameters (evaluated, checkpointed) may grow; its statistics follow the
groups every trainer.ray.sync_every_s. The copy is taken afresh when the run stops."""
HEAD = "node:__internal_head__"
"""Ray's resource of the head node, where the parameter server runs: the node whose loss ends the cluster anyway."""
START_TIMEOUT_S = 120.0
"""How long the parameter server's actor may take to start."""
STOP_MARGIN_S = 5.0
"""What a group may take beyond trainer.join_timeout_s to stop: its last exchange, its actor's end."""


def import_ray() -> Any:
    """The ray package; RunError naming the pip command when it is not installed."""
    try:
        import ray
    except ImportError:
        raise RunError(f"trainer.backend ray needs Ray, which is not installed here: {INSTALL_HINT}") from None
    return ray


@dataclass
class Group:
    """One node group as the driver sees it: its ranks and, while it runs, its actor and `serve` call."""

    index: int
    ranks: range
    processes: str
    """How messages name its processes: 'workers 2-3', 'learners 0-0'."""
    central: bool = False
    """It runs the central roles (the learners), fed by the other groups."""
    incarnation: int = -1
    actor: Any = None
    serving: Any = None
    node: str = ""
    lost: bool = False
    running: set[int] = field(default_factory=set)

    @property
    def rows(self) -> slice:
        """The group's rows of the run's statistics."""
        return slice(self.ranks.start, self.ranks.stop)

    def describe(self) -> str:
        """How messages name the group."""
        return f"node group {self.index} ({self.processes})"


class RayBackend(Backend):
    """A run's node groups on a Ray cluster, and its parameter server."""

    def __init__(self, launch: Launch):
        super().__init__(launch)
        self.ray = import_ray()
        self.settings = launch.config["trainer"]["ray"]
        self.params = launch.model.arena.data
        self.node_failures = 0
        self._cluster: Any = None
        self._tmpdir: str | None = None
        self._watcher: Any = None
        self._server: Any = None
        self._stopped = False
        self._restore_env: list[Callable[[], None]] = []
        self.groups = self._plan()
        self._incarnations: dict[int, Group] = {}
        self._base_counters = launch.stats.counters.copy()
        self._base_sums = launch.stats.metric_sums.copy()
        """The run's statistics before the current start of each group, which counts from zero."""
        self._exits: list[WorkerExit] = []
        self._records: dict[int, dict[str, Any]] = {}
        self._sources: dict[str, int] = {}
        """The start of the group whose optimizer state, and of the one whose buffers, the run holds."""
        self._last_pull = self._params_pulled = 0.0
        self._logged: tuple[float, dict[int, dict[str, Any]]] = (time.monotonic(), {})
        try:
            self._connect()
            self._nodes()
            self._learner_node = self._find_learner_node() if self.central is not None else ""
        except BaseException:
            self._shut_down()
            raise

    def _plan(self) -> list[Group]:
        """The node groups: trainer.ray.workers_per_node processes of the first role on each node, and a central
        group of the central roles' processes (an actor-learner run's learners) when the plugin has some."""
        launch, per_node = self.launch, self.settings["workers_per_node"]

        def group(index: int, ranks: range, central: bool = False) -> Group:
            (role, first), (_, last) = launch.role_of(ranks.start), launch.role_of(ranks.stop - 1)
            return Group(index, ranks, f"{role.name}s {first}-{last}", central)

        nodes = self.settings["nodes"]
        groups = [group(i, range(i * per_node, (i + 1) * per_node)) for i in range(nodes)]
        central = sum(role.count for role in launch.roles if role.central)
        if central:
            groups.append(group(nodes, range(nodes * per_node, nodes * per_node + central), central=True))
        return groups

    @property
    def central(self) -> Group | None:
        """The central group (the learners'), or None for a run without central roles (A3C, Hogwild)."""
        return next((g for g in self.groups if g.central), None)

    def _find_learner_node(self) -> str:
        """The id of the live node trainer.ray.learner_node names (null: the head); RunError when there is none."""
        wanted = self.settings["learner_node"]
        for node in self.ray.nodes():
            if node["Alive"] and (node["NodeID"] == wanted or node["NodeManagerAddress"] == wanted
                                  or (wanted is None and HEAD in node["Resources"])):
                return node["NodeID"]
        raise RunError(f"config key 'trainer.ray.learner_node': got {wanted!r}; allowed: null (the head node), or "
                       f"the id or IP address of a live node of the Ray cluster")

    # -- the cluster ------------------------------------------------------------------------------------
    def _connect(self) -> None:
        """Start a simulated cluster (address null) or join one; RunError when that fails."""
        ray, address = self.ray, self.settings["address"]
        handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
        try:
            if address is None:
                self._start_simulated()
                address = self._cluster.address
            ray.init(address=address, logging_level="ERROR", log_to_driver=False, include_dashboard=False)
        except (ConnectionError, RuntimeError, ValueError, OSError) as exc:
            where = "start a local Ray" if self.settings["address"] is None else f"join the Ray cluster at {address!r}"
            raise RunError(f"cannot {where} (trainer.ray.address): {' '.join(str(exc).split())[:300]}") from None
        finally:  # a head node and ray.init each put their own SIGTERM handler (an exit, a crash dump) in place
            for signum, handler in handlers.items():
                signal.signal(signum, handler)

    def _start_simulated(self) -> None:
        from ray.cluster_utils import Cluster

        if "RAY_AUTH_MODE" not in os.environ:  # else Ray turns token auth on and writes ~/.ray/auth_token
            self._restore_env.append(set_environment({"RAY_AUTH_MODE": "disabled"}))
        self._watcher, self._tmpdir = watcher.watch_new(DIRECTORY_PARENT, DIRECTORY_PREFIX, "RAY_TMPDIR")
        os.makedirs(os.path.join(self._tmpdir, "ray"))  # RAY_TMPDIR must hold a ray/ folder
        self._restore_env.append(set_environment({"RAY_TMPDIR": self._tmpdir}))  # Ray's address file goes there
        common = {"object_store_memory": OBJECT_STORE_BYTES, "log_to_stderr": False}
        self._cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "temp_dir": self._tmpdir, "include_dashboard": False,
            "_system_config": SIMULATED_CLUSTER_CONFIG, **common})
        for _ in range(self.settings["nodes"]):
            self._cluster.add_node(num_cpus=1, **common)

    def _nodes(self) -> list[str]:
        """Ids of the live nodes with a CPU (a simulated head has none); RunError when fewer than trainer.ray.nodes."""
        alive = self._nodes_alive()
        if len(alive) < self.settings["nodes"]:
            raise RunError(f"config key 'trainer.ray.nodes': got {self.settings['nodes']}; allowed: at most "
                           f"{len(alive)}, the nodes with a CPU in the Ray cluster")
        return alive

    def _shut_down(self) -> None:
        """Remove the run's actors; disconnect; shut down a simulated cluster and remove its directory."""
        ray = self.ray
        if ray.is_initialized():
            for actor in [g.actor for g in self.groups if g.actor is not None] + [self._server]:
                if actor is not None:
                    ray.kill(actor)
            ray.shutdown()
        if self._cluster is not None:
            self._cluster.shutdown()
            self._cluster = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
        if self._watcher is not None:
            watcher.stop(self._watcher)
            self._watcher = None
        while self._restore_env:
            self._restore_env.pop()()

    # -- starting groups ----------------------------------------------------------------------------------
    def start(self, cancelled: Callable[[], bool] = lambda: False) -> None:

        ray = self.ray
        counters = self.launch.stats.counters
        self._server = ray.remote(ParameterServer).options(num_cpus=0, resources={HEAD: 0.001}).remote(
            self.params.copy(), int(counters[:, STEPS].sum()), int(counters[:, UPDATES].sum()))
        try:  # its start (a process, imports) is not an exchange: trainer.ray.timeout_s counts from its first answer
            ray.get(self._server.state.remote(False), timeout=START_TIMEOUT_S)
        except ray.exceptions.RayError as exc:
            raise OSError(f"the parameter server did not start within {START_TIMEOUT_S:g} s "
                          f"({type(exc).__name__})") from None
        if self.central is not None:  # first: the groups feeding it get its actor
            self._start_group(self.central, self._learner_node)
        for group, node in zip([g for g in self.groups if not g.central], self._nodes()):
            if cancelled():
                return
            self._start_group(group, node)

    def _start_group(self, group: Group, node: str) -> None:

        ray, launch = self.ray, self.launch
        strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(node, soft=False)
        generations = [launch.generations[r] for r in group.ranks]
        for rank in group.ranks:
            launch.generations[rank] += 1  # as the group's local backend does for its own copy
        group.incarnation = len(self._incarnations)
        self._incarnations[group.incarnation] = group
        central = self.central
        feeds = central is not None and not group.central
        group.actor = ray.remote(NodeGroup).options(  # the central group takes each feeding group's calls at once
            num_cpus=0, max_concurrency=4 + self.settings["nodes"], scheduling_strategy=strategy,
            max_restarts=0).remote(
            launch.config, group.incarnation, group.ranks, generations, self.params.copy(), buffers_of(launch.model),
            launch.optimizer.state_dict(), self._server, central.actor if feeds else None)
        group.serving = group.actor.serve.remote()
        group.node, group.lost, group.running = node, False, set(group.ranks)

    def restart(self, rank: int) -> None:
        self.restarts += 1
        group = self._group_of(rank)
        if group.lost:
            stats = self.launch.stats
            self._base_counters[group.rows] = stats.counters[group.rows]
            self._base_sums[group.rows] = stats.metric_sums[group.rows]
            self._start_group(group, self._least_used_node())
            return
        self.launch.generations[rank] += 1
        group.actor.restart.remote(rank)
        group.running.add(rank)

    def _group_of(self, rank: int) -> Group:
        return next(g for g in self.groups if rank in g.ranks)

    def _least_used_node(self) -> str:
        used = {node: 0 for node in self._nodes_alive()}
        for g in self.groups:
            if not g.lost and not g.central and g.actor is not None and g.node in used:
                used[g.node] += 1
        if not used:
            raise BackendError("no Ray node with a CPU is left to start the lost workers on")
        return min(used, key=lambda node: (used[node], node))

    def _nodes_alive(self) -> list[str]:
        return sorted(n["NodeID"] for n in self.ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) >= 1)

    @property
    def running(self) -> int:
        return sum(len(g.running) for g in self.groups if not g.lost)

    # -- polling ----------------------------------------------------------------------------------------
    def poll(self) -> list[WorkerExit]:
        ray = self.ray
        serving = {g.serving: g for g in self.groups if g.serving is not None}
        ended, _ = ray.wait(list(serving), num_returns=len(serving), timeout=0) if serving else ([], [])
        if ended or time.monotonic() - self._last_pull >= self.settings["sync_every_s"]:
            self._pull()  # first: a group that ended reported its last exits before it returned
        for ref in sorted(ended, key=lambda ref: not serving[ref].central):  # the central group's loss ends the run
            group = serving[ref]
            if group.serving is not ref:
                continue  # lost meanwhile
            group.serving = None
            try:
                why = ray.get(ref)
            except ray.exceptions.RayError as exc:
                why = f"its node or actor died ({type(exc).__name__})"
            if why is not None or group.running:
                self._lose(group, why or "it ended with workers still running")
        return self._take_exits()

    def _take_exits(self) -> list[WorkerExit]:
        exits, self._exits = self._exits, []
        return exits

    def _lose(self, group: Group, why: str) -> None:
        """Report the group lost, once its start is fenced at the server and the server's last record of it taken:
        what it does from now on (a hung node's actor, which ray.kill cannot reach, may run on) counts nowhere."""
        self.ray.kill(group.actor)
        self._take(group.incarnation, self._ask(self._server.fence.remote(group.incarnation)))
        group.lost, group.serving, group.running = True, None, set()
        self.node_failures += 1
        central = self.central
        if group is central:
            raise BackendError(f"{group.describe()}, the central one, was lost: {why}; the last checkpoint is kept, "
                               f"and train --resume continues from it")
        if central is not None and not central.lost:  # its batches sent from now on count nowhere either
            try:
                self.ray.get(central.actor.fence.remote(group.incarnation), timeout=self.settings["timeout_s"])
            except self.ray.exceptions.RayError:
                pass  # the central group is gone too: its own loss ends the run
        left = sum(1 for g in self.groups if not g.lost)
        self._exits.append(WorkerExit(group.ranks.start, False,
                                      f"{group.describe()} was lost: {why}; {left} of {len(self.groups)} groups go on",
                                      lost=True))

    def _pull(self, params: bool = False) -> None:
        """The groups' reports into the run's statistics; the global parameters into its model with `params`, or
        when the model's copy is PARAMS_EVERY_S old."""
        now = self._last_pull = time.monotonic()
        params = params or now - self._params_pulled >= PARAMS_EVERY_S
        state = self._ask(self._server.state.remote(params))
        if params:
            self.params[...] = state["params"]
            self._params_pulled = now
        for incarnation, report in state["groups"].items():  # the fenced ones, lost, are not there
            group = self._take(incarnation, report)
            if group.serving is not None and report["silent_s"] > self.settings["timeout_s"]:
                self._lose(group, f"no exchange for {report['silent_s']:.1f} s (trainer.ray.timeout_s)")

    def _ask(self, call: Any) -> Any:
        """What a call of the parameter server returns; BackendError when it died or did not answer in timeout_s."""
        try:
            return self.ray.get(call, timeout=self.settings["timeout_s"])
        except self.ray.exceptions.RayError as exc:
            raise BackendError(f"the parameter server was lost ({type(exc).__name__}); the last checkpoint is "
                               f"kept, and train --resume continues from it") from None

    def _take(self, incarnation: int, report: dict[str, Any]) -> Group:
        """A report of one start of a group, as the server accepted it, into the run's statistics; the group."""
        self._records[incarnation] = report
        if report["buffers"] is not None:
            self._take_state(incarnation, report)
        group = self._incarnations[incarnation]
        self._apply(group, report)
        return group

    def _take_state(self, incarnation: int, report: dict[str, Any]) -> None:
        """A group's optimizer state and buffers into the run's, each unless a group with more env steps sent the
        one the run holds (a group that barely ran has barely moved its normalisation statistics). A group feeding
        a central one sends no optimizer state: its workers step none."""
        if report["optimizer"] is not None and self._leads(incarnation, "optimizer"):
            self.launch.optimizer.load_state_dict(report["optimizer"])
            self._sources["optimizer"] = incarnation
        if self._leads(incarnation, "buffers"):
            load_buffers(self.launch.model, report["buffers"])
            self._sources["buffers"] = incarnation

    def _leads(self, incarnation: int, part: str) -> bool:
        source = self._sources.get(part)
        return source is None or source == incarnation or self._steps(incarnation) >= self._steps(source)

    def _steps(self, incarnation: int) -> int:
        counters = self._records[incarnation]["counters"]
        return 0 if counters is None else int(counters[:, STEPS].sum())

    def _apply(self, group: Group, report: dict[str, Any]) -> None:
        """One group's report into the run's statistics: its rows are the base plus the group's counters."""
        stats, rows = self.launch.stats, group.rows
        if report["counters"] is not None:  # episodes are counted as they are added, below; a streak is the group's
            columns = [c for c in range(stats.counters.shape[1]) if c not in (EPISODES, SEQ, SKIP_STREAK)]
            stats.counters[rows, columns] = self._base_counters[rows, columns] + report["counters"][:, columns]
            stats.counters[rows, SKIP_STREAK] = report["counters"][:, SKIP_STREAK]
            stats.metric_sums[rows] = self._base_sums[rows] + report["metric_sums"]
        for row, returns, lengths in report["episodes"]:
            stats.writer(group.ranks.start + row).add_episodes(returns, lengths)
        for rank, clean, summary, traceback in report["exits"]:
            group.running.discard(rank)
            self._exits.append(WorkerExit(rank, clean, summary, traceback))

    # -- stopping ---------------------------------------------------------------------------------------
    def stop(self, timeout_s: float) -> list[WorkerExit]:
        if self._stopped:
            return []
        self._stopped = True
        ray = self.ray
        try:
            live = {g.serving: g for g in self.groups if g.serving is not None}
            for group in live.values():
                group.actor.stop.remote()
            done, _ = (ray.wait(list(live), num_returns=len(live), timeout=timeout_s + STOP_MARGIN_S)
                       if live else ([], []))
            if self._server is not None:
                try:
                    self._pull(params=True)  # the groups' last deltas, counters and exits
                except BackendError:
                    pass  # the run keeps the parameters of the last pull
            for ref, group in live.items():
                if ref not in done:
                    self._exits.append(WorkerExit(
                        group.ranks.start, False, f"{group.describe()} did not stop within trainer.join_timeout_s "
                                                  f"({timeout_s:g} s) and was killed by the trainer"))
        finally:
            self._shut_down()
        return self._take_exits()

    # -- what the monitor logs --------------------------------------------------------------------------
    def _totals(self) -> dict[int, dict[str, float]]:
        return {inc: {"exchanges": r["exchanges"], "staleness": r["staleness"], "exchange_s": r["exchange_s"],
                      "steps": self._steps(inc), **dict.fromkeys(RELAY_COUNTS, 0.0), **r["relay"]}
                for inc, r in self._records.items()}

    def metrics(self) -> dict[str, float]:
        """Staleness, exchange time and rate since the last call, env steps/s of each group, groups running."""
        now, totals = time.monotonic(), self._totals()
        then, before = self._logged
        self._logged = (now, totals)
        seconds = max(now - then, 1e-9)
        zero = dict.fromkeys(("exchanges", "staleness", "exchange_s", "steps", *RELAY_COUNTS), 0)
        change = {inc: {k: v - before.get(inc, zero)[k] for k, v in t.items()} for inc, t in totals.items()}
        exchanges = sum(c["exchanges"] for c in change.values())
        values = {"ray/exchanges_per_s": exchanges / seconds,
                  "ray/groups_running": float(sum(1 for g in self.groups if not g.lost))}
        if exchanges:
            values["ray/staleness"] = sum(c["staleness"] for c in change.values()) / exchanges
            values["ray/exchange_ms"] = 1000 * sum(c["exchange_s"] for c in change.values()) / exchanges
        for group in self.groups:
            if not group.central:
                steps = change.get(group.incarnation, zero)["steps"]
                values[f"ray/group{group.index}/env_steps_per_s"] = steps / seconds
        if self.central is not None:
            batches = sum(c["batches"] for c in change.values())
            values["ray/relayed_per_s"] = sum(c["received"] for c in change.values()) / seconds
            values["ray/relay_batches_per_s"] = batches / seconds
            if batches:
                values["ray/relay_ms"] = 1000 * sum(c["relay_s"] for c in change.values()) / batches
            deliveries = sum(c["deliveries"] for c in change.values())
            if deliveries:
                values["ray/deliver_ms"] = 1000 * sum(c["deliver_s"] for c in change.values()) / deliveries
        return values

    def summary(self) -> dict[str, Any]:
        """node_failures, and the exchanges' count, mean staleness and mean time over the whole run."""
        totals = self._totals().values()
        exchanges = sum(t["exchanges"] for t in totals)
        entries = {"node_failures": self.node_failures, "exchanges": exchanges,
                   "staleness_mean": sum(t["staleness"] for t in totals) / exchanges if exchanges else None,
                   "exchange_ms_mean": (round(1000 * sum(t["exchange_s"] for t in totals) / exchanges, 3)
                                        if exchanges else None)}
        if self.central is not None:
            relay = {name: sum(t[name] for t in totals) for name in RELAY_COUNTS}
            entries["relay"] = {"sent": int(relay["sent"]), "received": int(relay["received"]),
                                "dropped": int(relay["dropped"]), "batches": int(relay["batches"]),
                                "ms_per_batch": (round(1000 * relay["relay_s"] / relay["batches"], 3)
                                                 if relay["batches"] else None),
                                "store_ms_per_batch": (round(1000 * relay["deliver_s"] / relay["deliveries"], 3)
                                                       if relay["deliveries"] else None)}
        return entries


BACKEND = RayBackend
