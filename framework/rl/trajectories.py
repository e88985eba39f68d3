"""Trajectories in arrays: one rollout's (`Trajectory`), and a buffer of them in shared memory, where actors write
rollouts into slots and learners take them by index (`TrajectoryBuffer`).

A `Trajectory` is the arrays one rollout of T steps of E envs fills step by
step (rl.rollout): an A3C worker's own, allocated once, or the views of a
buffer slot an actor writes in place.

Every array is preallocated once, slot-major in time: `obs` is (T+1, slots,
envs, *obs_shape) in the envs' own dtype (uint8 frames stay uint8), then
actions, rewards, dones and the behaviour policy's log-probabilities
(T, slots, envs), a recurrent model's state at the rollout's start (each of
its arrays (slots, envs, ...)) and the policy version each rollout was acted with (the run's update
count when its actor read the shared parameters). An actor writes a rollout
in place, step by step, through views of its slot (`slot_views`, a
`Trajectory`): nothing is
pickled or copied per step, and a learner's batch is one gather along the
slot axis (`batch`), already (T+1, slots * envs, ...), the shape a rollout
forward takes.

Each slot belongs to one actor (actor i owns slots i*K .. i*K+K-1) and is in
one of four states, changed only under one robust lock (a holder's death
does not deadlock it): FREE -> WRITING (its actor took it) -> FULL (its
rollout is complete) -> READING (a learner took it) -> FREE. What each side
waits on, and for how long:

- an actor waits for one of its own slots to be FREE. Past `max_wait_s` it
  takes back its own oldest FULL slot instead (the oldest rollout not yet
  taken by a learner is dropped: counted, never blocking an actor for more
  than that bound behind a slow learner);
- a learner waits for `batch` FULL slots, the oldest first, from any actors
  (a slow actor holds back nobody's trajectories but its own). Past
  `max_wait_s` it takes the ones there are, as soon as there is one.

Both look at the slots without the lock while they wait (taking it only to
claim what they saw), and check their stop flag. A process that died holding
slots leaves them WRITING or READING; its restarted successor takes them
back first thing (`reclaim`).

Across Ray nodes (the ray backend) each node has a buffer of its own actors'
slots (`first_actor`: its first actor's index in the run) and the learners'
node one of every actor's: a node's relay takes FULL slots as a learner would,
as whole rollouts with their actors and versions (`rollouts`), and the
learners' node writes them into those actors' slots there (`store`), waiting
and dropping as the actor itself would.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import sharing

FREE, WRITING, FULL = 0, 1, 2
READING = 3
"""READING + i: held by learner i."""

ROLLOUT_ARRAYS = ("obs", "actions", "rewards", "dones", "log_probs")
"""The per-step arrays of a slot, one rollout of its actor's envs (state0, its first recurrent state, apart)."""

POLL_S, MAX_POLL_S = 0.0002, 0.005
"""A waiting process looks at the slots again after POLL_S, then after twice as long each time, up to MAX_POLL_S:
a short wait costs little latency, a long one little CPU (sixteen waiting actors on two cores)."""


@dataclass
class Trajectory:
    """The arrays of one rollout of T steps of E envs: observations (T+1, E, *obs_shape) as the model reads them,
    actions (T, E, *action_shape), rewards and dones (T, E) float32, the behaviour policy's log-probabilities
    (T, E) float32 where a learner needs them (None: not recorded), and room for a recurrent model's state at
    the rollout's start (its arrays, each (E, ...); empty: not kept)."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray
    log_probs: np.ndarray | None = None
    state0: list[np.ndarray] = field(default_factory=list)

    @classmethod
    def allocate(cls, steps: int, envs: int, obs_shape: tuple[int, ...], obs_dtype: Any,
                 action_shape: tuple[int, ...], action_dtype: Any) -> "Trajectory":
        """A rollout's arrays in this process's memory, without log-probabilities or a state (A3C's)."""
        return cls(np.zeros((steps + 1, envs, *obs_shape), dtype=obs_dtype),
                   np.zeros((steps, envs, *action_shape), dtype=action_dtype),
                   np.zeros((steps, envs), dtype=np.float32), np.zeros((steps, envs), dtype=np.float32))


class TrajectoryBuffer:
    """`actors` x `slots_per_actor` rollout slots of `steps` steps of `envs` environments in shared memory."""

    def __init__(self, actors: int, slots_per_actor: int, steps: int, envs: int, obs_shape: tuple[int, ...],
                 obs_dtype: Any, action_shape: tuple[int, ...], action_dtype: Any,
                 state_shapes: tuple[tuple[int, ...], ...] = (), state_dtype: Any = np.float32,
                 first_actor: int = 0):
        slots = actors * slots_per_actor
        self.slots_per_actor, self.steps, self.envs = slots_per_actor, steps, envs
        self.first_actor = first_actor
        """The run's index of the buffer's first actor: a Ray node's buffer holds its own actors' slots alone."""
        self.obs = sharing.empty_shared((steps + 1, slots, envs, *obs_shape), obs_dtype)
        self.actions = sharing.empty_shared((steps, slots, envs, *action_shape), action_dtype)
        self.rewards = sharing.empty_shared((steps, slots, envs), np.float32)
        self.dones = sharing.empty_shared((steps, slots, envs), np.float32)
        self.log_probs = sharing.empty_shared((steps, slots, envs), np.float32)
        self.state0 = [sharing.empty_shared((slots, envs, *shape), state_dtype) for shape in state_shapes]
        self.version = sharing.empty_shared((slots,), np.int64)
        self.filled_at = sharing.empty_shared((slots,), np.int64)  # monotonic ns: the oldest FULL slot goes first
        self.status = sharing.empty_shared((slots,), np.int64)
        for array in (self.version, self.filled_at, self.status):
            array[...] = 0
        self.lock = sharing.RobustLock()

    def own_slots(self, actor: int) -> range:
        """The slots actor (the run's index of it) writes into."""
        first = (actor - self.first_actor) * self.slots_per_actor
        return range(first, first + self.slots_per_actor)

    def slot_views(self, slot: int) -> Trajectory:
        """One slot as a Trajectory of writable views (its state0 empty for a feed-forward model)."""
        return Trajectory(self.obs[:, slot], self.actions[:, slot], self.rewards[:, slot], self.dones[:, slot],
                          self.log_probs[:, slot], [array[slot] for array in self.state0])

    # -- the actor's side ------------------------------------------------------------------------
    def acquire(self, actor: int, max_wait_s: float, stopping: Callable[[], bool]) -> tuple[int | None, float, int]:
        """(slot to write, seconds waited, rollouts dropped): one of actor's FREE slots, or past max_wait_s its
        oldest FULL one (whose rollout is dropped); slot None when stopping() became true while waiting."""
        own = self.own_slots(actor)
        start, poll = time.monotonic(), POLL_S
        while True:
            waited = time.monotonic() - start
            mine = self.status[own.start:own.stop]
            if (mine == FREE).any() or (waited >= max_wait_s and (mine == FULL).any()):  # a look without the lock
                with self.lock:
                    free = np.flatnonzero(mine == FREE)
                    dropped = 0
                    if free.size == 0 and waited >= max_wait_s:
                        free = np.flatnonzero(mine == FULL)
                        free = free[np.argsort(self.filled_at[own.start:own.stop][free])]
                        dropped = 1
                    if free.size:
                        slot = own.start + int(free[0])
                        self.status[slot] = WRITING
                        return slot, waited, dropped
            if stopping():
                return None, time.monotonic() - start, 0
            poll = _sleep(poll)

    def publish(self, slot: int, version: int) -> None:
        """Mark a written slot FULL, acted with the parameters of update count `version`."""
        with self.lock:
            self.version[slot] = version
            self.filled_at[slot] = time.monotonic_ns()
            self.status[slot] = FULL

    # -- the learner's side ----------------------------------------------------------------------
    def take(self, learner: int, batch: int, max_wait_s: float,
             stopping: Callable[[], bool]) -> tuple[np.ndarray, float]:
        """(slots, seconds waited): the `batch` oldest FULL slots, now READING by learner; fewer (at least one)
        once max_wait_s has passed; none when stopping() became true while waiting with fewer (a batch that was
        full when it became true is still taken)."""
        start, poll = time.monotonic(), POLL_S
        while True:
            waited = time.monotonic() - start
            stopped = stopping()  # before the look: an actor publishes a slot before counting its steps
            ready = int((self.status == FULL).sum())  # a look without the lock
            if ready >= batch or (ready and waited >= max_wait_s):
                with self.lock:
                    full = np.flatnonzero(self.status == FULL)
                    if full.size:
                        chosen = full[np.argsort(self.filled_at[full], kind="stable")[:batch]]
                        self.status[chosen] = READING + learner
                        return chosen, waited
            if stopped:
                return np.zeros(0, dtype=np.int64), time.monotonic() - start
            poll = _sleep(poll)

    def batch(self, slots: np.ndarray) -> dict[str, Any]:
        """Copies of the slots' rollouts side by side: obs (T+1, len(slots) * E, ...), actions, rewards, dones,
        log_probs (T, len(slots) * E, ...), state0 (a list of (len(slots) * E, ...) arrays), version
        (len(slots),): `rollouts` with each slot's envs joined to the next's (a reshape, no copy)."""
        def joined(array: np.ndarray, axis: int) -> np.ndarray:
            shape = array.shape
            return array.reshape(*shape[:axis], shape[axis] * shape[axis + 1], *shape[axis + 2:])

        whole = self.rollouts(slots)
        out: dict[str, Any] = {name: joined(whole[name], 1) for name in ROLLOUT_ARRAYS}
        out["state0"] = [joined(array, 0) for array in whole["state0"]]
        out["version"] = whole["version"]
        return out

    def rollouts(self, slots: np.ndarray) -> dict[str, Any]:
        """Copies of the slots' rollouts, each whole, for another node's buffer (`store`): obs (T+1, n, E, ...),
        actions, rewards, dones, log_probs (T, n, E, ...), state0 (a list of (n, E, ...)), version and actor (the
        run's index of the actor that wrote each, (n,))."""
        out: dict[str, Any] = {name: np.take(getattr(self, name), slots, axis=1) for name in ROLLOUT_ARRAYS}
        out["state0"] = [np.take(array, slots, axis=0) for array in self.state0]
        out["version"] = self.version[slots].copy()
        out["actor"] = slots // self.slots_per_actor + self.first_actor
        return out

    def store(self, rollouts: dict[str, Any], max_wait_s: float, stopping: Callable[[], bool]) -> tuple[int, int]:
        """Write rollouts (as `rollouts` gives them, from another node) into their actors' slots here, each as its
        actor would: a FREE slot, or past max_wait_s (one bound for them all) its oldest FULL one, dropped. (rollouts
        stored, rollouts dropped); the ones left when stopping() became true are not stored."""
        deadline = time.monotonic() + max_wait_s
        stored = dropped = 0
        for i, actor in enumerate(rollouts["actor"]):
            slot, _, lost = self.acquire(int(actor), max(0.0, deadline - time.monotonic()), stopping)
            if slot is None:
                break
            views = self.slot_views(slot)
            for name in ROLLOUT_ARRAYS:
                getattr(views, name)[...] = rollouts[name][:, i]
            for view, state in zip(views.state0, rollouts["state0"]):
                view[...] = state[i]
            self.publish(slot, int(rollouts["version"][i]))
            stored, dropped = stored + 1, dropped + lost
        return stored, dropped

    def release(self, slots: np.ndarray) -> None:
        """Give slots a learner has read back to their actors."""
        with self.lock:
            self.status[slots] = FREE

    # -- restarts --------------------------------------------------------------------------------
    def reclaim(self, role: str, index: int) -> int:
        """Free what a dead predecessor (`actor` or `learner` index) held: an actor's slot half written, a
        learner's slots taken and not yet read; how many slots."""
        with self.lock:
            if role == "actor":
                own = self.own_slots(index)
                held = own.start + np.flatnonzero(self.status[own.start:own.stop] == WRITING)
            else:
                held = np.flatnonzero(self.status == READING + index)
            self.status[held] = FREE
            return int(held.size)


def _sleep(poll: float) -> float:
    """Sleep poll seconds; the next poll interval."""
    time.sleep(poll)
    return min(2 * poll, MAX_POLL_S)
