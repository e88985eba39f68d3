"""Actors and learners around a shared trajectory buffer: what IMPALA and APPO share.

A run has `trainer.workers` actors and `algorithm.learners` learners (the
plugin's two roles), each of which gets the run's `ActorCriticShared` (the
description of its environment, and the `TrajectoryBuffer`) as ctx.shared.
An actor is a `RolloutWorker` that, instead of computing a loss, rolls out
into one of its slots of the buffer (in place: the slot's views are the
rollout's `Trajectory`), with the log-probabilities of the actions it took,
recorded as it takes them (rl.actor), and the parameters' version it acted
with. A learner builds no environment. A learner takes batches of full slots (the oldest
first, from any actors), computes its algorithm's loss on a local copy of
the shared model and applies one fused optimizer step to the shared
parameters; with several learners they do so lock-free, as Hogwild workers
do. The policy lag of an update (perf/policy_lag) is the number of updates
applied between the parameters the batch was acted with and this one.

With `algorithm.synchronous` the actors and the learner take turns, as
PPO's collection and update do (sample-factory's `async_rl: false`): the
learner's batch is a trajectory of every slot, and it gives the slots back
only once its update is applied, so every trajectory is acted with the
parameters the previous batch's update left (a policy lag of 0 at the
batch's first update).

What each side waits on is bounded (`algorithm.max_actor_wait_s`,
`max_learner_wait_s`: see rl.trajectories; a synchronous learner waits for
all its slots) and counted: perf/actor_wait_s and
perf/learner_wait_s (seconds, all actors or learners together, since the run
started), perf/trajectories_dropped (rollouts an actor overwrote before a
learner took them, or that a learner died holding).

A policy output that is not finite (a NaN observation, NaN weights) never
stops an actor: it still acts (`ActionHead.sample`) and writes a NaN
behaviour log-probability for that step (`ActionHead.behaviour_log_prob`). A learner cuts every step that holds
a value that is not finite (an observation, a reward, that log-probability)
out of its batch's trajectories, bootstraps through it and learns from the
rest of them (`cut_nonfinite_steps`, `bridge_values`), counting them as perf/nonfinite_steps (summary.json's
`counts`); an update that is still not finite (NaN weights) is skipped and
counted as A3C's are, so a run of nothing else stops at
`algorithm.max_nonfinite_updates`.
"""
from __future__ import annotations

import abc
import math
from typing import Any, Callable, NamedTuple

import numpy as np

import framework
from framework.device import to_host
from framework.runtime.algorithm import Config, Role, WorkerContext
from framework.runtime.profile import COPY, LEARN, WAIT
from framework.runtime.schema import ConfigError, Field
from framework.rl.algorithm import ROLLOUT_SCHEMA, ActorCriticAlgorithm, ActorCriticShared
from framework.rl.diagnostics import explained_variance
from framework.rl.model import ActorCriticBase
from framework.rl.returns import gae
from framework.rl.rollout import LocalModelWorker, RolloutWorker
from framework.rl.trajectories import Trajectory, TrajectoryBuffer
from framework.rl.vtrace import vtrace

ACTOR_LEARNER_SCHEMA: dict[str, Field] = {
    **ROLLOUT_SCHEMA,
    "learners": Field("int", 1, low=1, high=256,
                      doc="learner processes; above 1 they update the shared model lock-free, as Hogwild workers do"),
    "batch_trajectories": Field("int", 4, low=1, high=4096,
                                doc="trajectories (slots) a learner takes for one batch, the oldest first"),
    "slots_per_actor": Field("int", 2, low=1, high=256,
                             doc="slots of the shared trajectory buffer per actor, each one rollout of `n_steps` "
                                 "steps of the actor's envs"),
    "max_actor_wait_s": Field("float", 2.0, low=0.0, high=3600.0,
                              doc="an actor waits this long for one of its slots to come back, then overwrites its "
                                  "oldest rollout no learner has taken (counted in `perf/trajectories_dropped`)"),
    "max_learner_wait_s": Field("float", 0.1, low=0.0, high=3600.0,
                                doc="a learner waits this long for `batch_trajectories` full slots, then takes those "
                                    "there are, as soon as there is one"),
    "synchronous": Field("bool", False,
                         doc="actors wait for the learner's update before their next rollout (PPO's turns, "
                             "sample-factory's `async_rl: false`): every batch is acted with the latest parameters; "
                             "needs one learner and `batch_trajectories` = trainer.workers x `slots_per_actor`"),
    "entropy_coef": Field("float", 0.01, low=0.0, doc="weight of the entropy bonus in the loss"),
    "value_coef": Field("float", 0.5, low=0.0, doc="weight of the value loss in the loss"),
    "max_grad_norm": Field("float", 40.0, low=0.0, low_open=True, doc="gradients are clipped to this global norm"),
}
"""`algorithm` keys of an actor-learner plugin: the rollout's, the learners and the buffer, the loss weights."""

COUNTS = ("actor_wait_s", "learner_wait_s", "trajectories_dropped", "nonfinite_steps")


def cut_nonfinite_steps(batch: dict[str, Any]) -> int:
    """Mark the batch's steps that hold a value that is not finite (an observation, a reward, or the NaN
    log-probability an actor writes for a step whose policy output was not finite), in place, so that the
    learner learns from the rest of their trajectories: their values become 0 so that no NaN reaches the forward
    pass (an LSTM's state stays finite); `Learner.targets` gives such a step no advantage and no value error, and
    bootstraps through it. batch["valid"] is the (T, N) mask of the steps learned from, batch["bad_obs"] the
    (T + 1, N) mask of observations that were not finite; returns how many steps were cut."""
    rewards, log_probs, obs = batch["rewards"], batch["log_probs"], batch["obs"]
    T, N = rewards.shape
    bad_obs = np.zeros((T + 1, N), dtype=bool)
    if np.issubdtype(obs.dtype, np.floating):
        bad_obs = ~np.isfinite(obs.reshape(T + 1, N, -1)).all(axis=2)
    bad = bad_obs[:T] | ~np.isfinite(rewards) | ~np.isfinite(log_probs)
    batch["valid"], batch["bad_obs"] = ~bad, bad_obs
    if not (bad.any() or bad_obs[T].any()):
        return 0
    np.nan_to_num(obs, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
    rewards[~np.isfinite(rewards)] = 0.0
    log_probs[bad] = 0.0  # Learner.targets puts the learner's own there: a ratio of 1
    batch["dones"][-1][bad_obs[T]] = 1.0  # no bootstrap from an observation that is not there
    return int(bad.sum())


def bridge_values(values: np.ndarray, batch: dict[str, Any], gamma: float) -> np.ndarray:
    """values (T + 1, N) with the value of each observation that was not finite replaced by its one-step target,
    r_t + gamma V(x_t+1), built backwards (0 for a missing bootstrap): the TD error there is 0, so the steps before
    it bootstrap through it to the next observation that is there (`cut_nonfinite_steps`)."""
    bad_obs = batch["bad_obs"]
    if not bad_obs.any():
        return values
    values = values.copy()
    values[-1][bad_obs[-1]] = 0.0
    keep = 1.0 - batch["dones"]
    for t in np.flatnonzero(bad_obs[:-1].any(axis=1))[::-1]:
        rows = bad_obs[t]
        values[t, rows] = batch["rewards"][t, rows] + gamma * keep[t, rows] * values[t + 1, rows]
    return values


class BatchTargets(NamedTuple):
    """What a learner's loss needs of a batch besides its data, from one forward pass at the batch's arrival."""

    advantages: np.ndarray  # (T, N)
    targets: np.ndarray  # (T, N) value targets
    actions: Any  # the batch's actions as a tensor on the learner's device, (T * N, *action shape)
    importance_ratio: float  # the mean of pi / mu over the batch
    values: np.ndarray  # (T, N) V(x_t) the targets were computed with
    explained_variance: float  # of the targets by those values (rl.diagnostics)
    log_probs: np.ndarray  # (T, N) log pi(a_t|x_t) of the actions taken, under the parameters at the batch's arrival


class TrajectoryActor(RolloutWorker):
    """An actor: rollouts with the shared parameters as they are at each rollout's start, into buffer slots."""

    def __init__(self, local: ActorCriticBase, ctx: WorkerContext):
        super().__init__(local, ctx)
        self.buffer: TrajectoryBuffer = ctx.shared.buffer
        self.buffer.reclaim("actor", ctx.index)
        self.writing = (-1, 0)
        """The slot being rolled out into and the parameters' version it is acted with."""

    def update(self) -> None:
        """Take a slot (bounded wait), sync, roll out into it, publish it (`written`)."""
        stats = self.ctx.stats
        self.profile.switch(WAIT)
        a = self.algo_cfg
        wait_s = math.inf if a["synchronous"] else a["max_actor_wait_s"]  # never drop what the learner waits for
        slot, waited, dropped = self.buffer.acquire(self.ctx.index, wait_s, stats.should_stop)
        stats.add_count("actor_wait_s", waited)
        if dropped:
            stats.add_count("trajectories_dropped", dropped)
        if slot is None:
            return
        self.writing = (slot, self.sync())
        self.rollout(self.buffer.slot_views(slot))

    def written(self, into: Trajectory) -> None:
        """Publish the slot just written, with the parameters' version it was acted with."""
        self.buffer.publish(*self.writing)


class Learner(LocalModelWorker, abc.ABC):
    """A learner: batches of trajectories from the buffer, a loss of its algorithm's, one shared update each."""

    def __init__(self, local: ActorCriticBase, ctx: WorkerContext):
        framework.manual_seed(ctx.seed)
        super().__init__(local, ctx, ctx.shared.env.action_head)
        self.buffer: TrajectoryBuffer = ctx.shared.buffer
        lost = self.buffer.reclaim("learner", ctx.index)
        if lost:
            ctx.stats.add_count("trajectories_dropped", lost)
        self.held = np.zeros(0, dtype=np.int64)
        """The slots of the batch taken last while they are not yet given back: until its update is applied
        with `algorithm.synchronous`, until it is copied out otherwise."""

    def take_batch(self) -> dict[str, np.ndarray] | None:
        """The next batch of trajectories (copied out of the buffer, whose slots go back to their actors at
        once, or, synchronous, once `run` has applied its update); None when the run stopped while waiting. The
        wait is the profile's `wait`, the copy its `copy`, and what follows (the learner's update) its `learn`."""
        a, stats = self.algo_cfg, self.ctx.stats
        self.profile.switch(WAIT)
        wait_s = math.inf if a["synchronous"] else a["max_learner_wait_s"]
        slots, waited = self.buffer.take(self.ctx.index, a["batch_trajectories"], wait_s, stats.should_stop)
        stats.add_count("learner_wait_s", waited)
        if slots.size == 0:
            return None
        self.profile.switch(COPY)
        try:
            batch = self.buffer.batch(slots)
        finally:
            self.held = slots
            if not a["synchronous"]:
                self.give_back()
        cut = cut_nonfinite_steps(batch)
        if cut:
            stats.add_count("nonfinite_steps", cut)
        self.profile.switch(LEARN)
        return batch

    def state0(self, batch: dict[str, Any], columns: Any = slice(None)) -> Any:
        """The recurrent state the batch's rollouts (its env columns `columns`) started from; None without one."""
        if not batch["state0"]:
            return None
        return tuple(self.tensor(np.ascontiguousarray(s[columns])) for s in batch["state0"])

    def targets(self, batch: dict[str, Any], head: Any, values: Any, vtrace_targets: bool,
                gae_lambda: float = 1.0) -> BatchTargets | None:
        """The advantages and value targets of a batch whose rollout forward gave head and values: V-trace's
        (`rho_bar`, `c_bar`), or GAE(gae_lambda) on the lagged data as it is. None when the forward pass is not
        finite (a NaN or inf observation)."""
        a = self.algo_cfg
        T, N = batch["rewards"].shape
        v = to_host(values.data_array).reshape(T + 1, N)
        if not self.finite(head, v):
            return None
        actions = self.tensor(batch["actions"].reshape(T * N, *self.action_head.shape))
        log_probs = self.target_log_probs(head, actions).reshape(T, N)
        valid = batch["valid"]
        batch["log_probs"][~valid] = log_probs[~valid]  # the steps cut_nonfinite_steps cut: a ratio of 1
        log_rhos = log_probs - batch["log_probs"]
        bridged = bridge_values(v, batch, a["gamma"])
        if vtrace_targets:
            targets, advantages = vtrace(log_rhos, batch["rewards"], batch["dones"], bridged, a["gamma"],
                                         a["rho_bar"], a["c_bar"])
        else:
            advantages, targets = gae(batch["rewards"], batch["dones"], bridged, a["gamma"], gae_lambda)
        advantages[~valid] = 0.0  # a cut step teaches neither the policy nor the value
        targets[~valid] = v[:-1][~valid]
        return BatchTargets(advantages, targets, actions, float(np.exp(np.minimum(log_rhos, 50.0)).mean()),
                            v[:-1], explained_variance(v[:-1], targets), log_probs)

    def target_log_probs(self, head: Any, actions: Any) -> np.ndarray:
        """log pi(a|x) under the local parameters for the policy outputs `head` (no grad), on the host."""
        with framework.no_grad():
            log_prob = self.action_head.log_prob(framework.as_tensor(head.data_array[:actions.shape[0]]), actions,
                                                 self.local.log_std)
        return to_host(log_prob.data_array)

    @abc.abstractmethod
    def learn(self, batch: dict[str, np.ndarray]) -> None:
        """Update the shared parameters from one batch (sync, loss, `apply`; a non-finite loss is skipped)."""

    def run(self) -> None:
        while not self.ctx.stats.should_stop():
            self.step()

    def step(self) -> None:
        """Take a batch (see take_batch), learn from it, give its slots back if they are still held."""
        batch = self.take_batch()
        if batch is None:
            return
        try:
            self.learn(batch)
        finally:
            self.give_back()

    def give_back(self) -> None:
        """Give the slots of the batch taken last back to their actors, if it still holds them."""
        if self.held.size:
            self.buffer.release(self.held)
            self.held = self.held[:0]

    def lagged_version(self, batch: dict[str, np.ndarray]) -> int:
        """The update count the batch's trajectories were acted with, on average (for the policy lag)."""
        return int(round(float(batch["version"].mean())))


class ActorLearnerAlgorithm(ActorCriticAlgorithm):
    """An actor-learner plugin: `actor` and `learner` roles around a TrajectoryBuffer; a subclass sets
    `learner_class` (its loss) and its `algorithm` keys (ACTOR_LEARNER_SCHEMA's among them)."""

    learner_class: type[Learner]
    actor_class: type[TrajectoryActor] = TrajectoryActor
    counts = COUNTS
    hparams = ("optimizer.name", "optimizer.lr", "algorithm.n_steps", "env.envs_per_worker", "trainer.workers",
               "algorithm.learners", "algorithm.batch_trajectories", "model.hidden")

    def roles(self, config: Config) -> tuple[Role, ...]:
        """`trainer.workers` actors (run_worker) and `algorithm.learners` learners (run_learner)."""
        return (Role("actor", config["trainer"]["workers"]),
                Role("learner", config["algorithm"]["learners"], "run_learner", "algorithm.learners", central=True))

    def check_config(self, config: Config) -> None:
        """ActorCriticAlgorithm's checks; a batch must fit in the buffer."""
        super().check_config(config)
        a, actors = config["algorithm"], config["trainer"]["workers"]
        if a["batch_trajectories"] > actors * a["slots_per_actor"]:
            raise ConfigError(f"config key 'algorithm.batch_trajectories': got {a['batch_trajectories']}; allowed: "
                              f"at most trainer.workers x algorithm.slots_per_actor = {actors * a['slots_per_actor']} "
                              f"(the trajectories the buffer holds)")
        if a["synchronous"]:
            self._check_synchronous(config)

    @staticmethod
    def _check_synchronous(config: Config) -> None:
        """A synchronous run's batch is every slot, learned from by its one learner, on one machine."""
        a, slots = config["algorithm"], config["trainer"]["workers"] * config["algorithm"]["slots_per_actor"]
        if a["learners"] != 1:
            raise ConfigError(f"config key 'algorithm.learners': got {a['learners']} with algorithm.synchronous; "
                              f"allowed: 1 (one update between two rounds of the actors' rollouts)")
        if a["batch_trajectories"] != slots:
            raise ConfigError(f"config key 'algorithm.batch_trajectories': got {a['batch_trajectories']} with "
                              f"algorithm.synchronous; allowed: trainer.workers x algorithm.slots_per_actor = {slots} "
                              f"(a batch of every actor's rollouts)")
        if config["trainer"]["backend"] != "local":
            raise ConfigError(f"config key 'algorithm.synchronous': got true with trainer.backend "
                              f"{config['trainer']['backend']!r}; allowed: false, or trainer.backend local")

    def build_shared(self, config: Config, context: Any, ranks: range) -> ActorCriticShared:
        """The environment's description and the trajectory buffer of `ranks`: algorithm.slots_per_actor slots per
        actor, of every actor where the learners run (a run on one machine, the learners' Ray node), of the node's
        own actors on a Ray node of actors alone."""
        env = self.env_info(config)
        layout, head = env.layout, env.action_head
        state = [to_host(s.data_array) for s in self.model_for(config, env).initial_state(1) or ()]
        actors = range(config["trainer"]["workers"])
        if ranks.stop <= actors.stop:  # no learner among them
            actors = ranks
        buffer = TrajectoryBuffer(len(actors), config["algorithm"]["slots_per_actor"], config["algorithm"]["n_steps"],
                                  env.envs_per_worker, layout.shape, layout.dtype, head.shape, head.dtype,
                                  tuple(s.shape[1:] for s in state), state[0].dtype if state else np.float32,
                                  first_actor=actors.start)
        return ActorCriticShared(env, buffer)

    def collect(self, config: Config, shared: ActorCriticShared,
                stopping: Callable[[], bool]) -> dict[str, Any] | None:
        """Up to `algorithm.batch_trajectories` of the node's full slots, the oldest first, as whole rollouts
        (waiting `max_learner_wait_s` for that many, as a learner does); their slots go back to their actors."""
        a, buffer = config["algorithm"], shared.buffer
        slots, _ = buffer.take(0, min(a["batch_trajectories"], buffer.status.size), a["max_learner_wait_s"], stopping)
        if slots.size == 0:
            return None
        try:
            return buffer.rollouts(slots)
        finally:
            buffer.release(slots)

    def deliver(self, config: Config, shared: ActorCriticShared, batch: dict[str, Any],
                stopping: Callable[[], bool]) -> tuple[int, int]:
        """A node's rollouts into their actors' slots of the learners' buffer, waiting `max_actor_wait_s` at most
        for room, as the actors would."""
        return shared.buffer.store(batch, config["algorithm"]["max_actor_wait_s"], stopping)

    def run_worker(self, ctx: WorkerContext) -> None:
        """An actor's loop."""
        self.actor_class(self.worker_model(ctx), ctx).run()

    def run_learner(self, ctx: WorkerContext) -> None:
        """A learner's loop."""
        self.learner_class(self.worker_model(ctx), ctx).run()
