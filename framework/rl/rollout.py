"""A worker that rolls out n steps of a batch of environments with a local copy of the shared model.

`LocalModelWorker` is the local copy (sync, the rollout forward, the update
tail), which an actor-learner's learner has too; `RolloutWorker` adds the
environments and the rollout.

What every on-policy actor-critic worker does before its loss: sync the
local model from the shared parameter arena (one copy), step
`env.envs_per_worker` environments for `algorithm.n_steps` steps with one
batched no-grad forward pass per step, and keep the rollout (observations as
the envs give them: uint8 frames stay uint8; actions, rewards, dones) in
preallocated buffers; then one forward pass with grad over the whole
(n_steps + 1) x envs rollout (the body once over all its frames, an LSTM
unrolled as one op: `ActorCriticBase.forward_rollout`), and, once a subclass
has its loss and gradient, the shared update tail (`framework.runtime.update`).
A time limit is not an end: a truncated episode's last reward gets
gamma * V(last observation) added (the bootstrap); a termination gets none.

With `trainer.compile` (the default) the acting policy and the rollout's
forward run through framework.compile (captured once, then replayed as array
code), which is where a small network's time goes otherwise. On a GPU
(`trainer.device: cuda:N`) the local model, the sampling and the update run
on the device: each step moves the batch of observations there in one copy
and the sampled actions back in one.
"""
from __future__ import annotations

import abc
from typing import Any, Mapping

import numpy as np

import framework
from framework.device import array_module, to_device, to_host
from framework.runtime.algorithm import WorkerContext, learning_rate
from framework.runtime.update import apply_gradient
from framework.rl.envs.batch import EnvBatch
from framework.rl.model import ActorCriticBase
from framework.rl.normalization import Normalization
from framework.rl.spaces import ActionHead


def episode_keep(dones: np.ndarray, device: str) -> Any:
    """The (T+1, E) mask an LSTM's state is multiplied by before each step of a rollout with (T, E) dones: 0 after
    a step that ended an episode, 1 elsewhere (and at the first step), on the device."""
    keep = np.ones((dones.shape[0] + 1, dones.shape[1]), dtype=np.float32)
    keep[1:] -= dones
    return to_device(keep, device)


class LocalModelWorker:
    """A process with a local copy of the shared model: it syncs the copy from the shared arena, computes
    gradients on it and applies them to the shared parameters (an on-policy worker, an actor-learner's learner).

    With `trainer.compile` the acting policy and the rollout forward of a feed-forward model are compiled.
    """

    def __init__(self, local: ActorCriticBase, ctx: WorkerContext, action_head: ActionHead):
        cfg = ctx.config
        self.ctx, self.algo_cfg = ctx, cfg["algorithm"]
        self.opt_cfg, self.total_steps = cfg["optimizer"], cfg["trainer"]["total_steps"]
        self.device = ctx.device
        self.action_head = action_head
        self.local = local.to(self.device)
        self.local_arena = self.local.pack_parameters()
        self.shared_arena = ctx.model.arena
        self.compiled = cfg["trainer"]["compile"]
        # An LSTM's acting step and its unroll over a rollout are ops of their own (one pass on raw arrays;
        # a backward of a few large GEMMs), not captured primitives: with an LSTM neither is compiled.
        self.recurrent = self.local.initial_state(1) is not None
        feedforward = self.compiled and not self.recurrent
        self.policy = framework.compile(self.local.policy) if feedforward else self.local.policy
        self.forward_rollout = (framework.compile(self.local.forward_rollout) if feedforward
                                else self.local.forward_rollout)

    def tensor(self, array: np.ndarray) -> Any:
        """A host array as a tensor on the worker's device: itself on the CPU, one copy to a GPU."""
        return framework.as_tensor(to_device(array, self.device))

    def sync(self) -> int:
        """Copy the shared parameters into the local model (one copy); the run's update count at that moment."""
        self.local_arena.copy_from(self.shared_arena)
        return self.ctx.stats.global_updates()

    def forward_trajectories(self, obs: np.ndarray, state0: Any, dones: np.ndarray) -> tuple[Any, Any]:
        """Policy heads and values for all (T+1) x E observations of rollouts with (T, E) dones, with grad; an
        LSTM's state starts from state0 and is reset after every step that ended an episode."""
        keep = episode_keep(dones, self.device) if self.recurrent else None
        return self.forward_rollout(self.tensor(obs), state0, keep)

    def finite(self, head: Any, values: np.ndarray) -> bool:
        """Whether a forward pass's policy outputs and (host) values are all finite: a loss can be built."""
        xp = array_module(head.data_array)
        return bool(xp.isfinite(head.data_array).all()) and bool(np.isfinite(values).all())

    def apply(self, parts: Mapping[str, float], synced_at: int, max_grad_norm: float | None) -> bool:
        """The local gradient to the shared optimizer (`apply_gradient`: skipped when not finite, clipped, at the
        scheduled lr, one copy and one fused step); whether it was applied. synced_at: the update count of the
        parameters the data was acted with (the policy lag is counted from it)."""
        stats = self.ctx.stats
        lr = learning_rate(self.opt_cfg, stats.global_steps(), self.total_steps)
        return apply_gradient(stats, self.ctx.optimizer, self.local_arena.grad, parts, lr, synced_at,
                              max_grad_norm=max_grad_norm, shared_grad=self.shared_arena.grad)


class RolloutWorker(LocalModelWorker, abc.ABC):
    """One worker's environments, local model and rollout buffers; a subclass adds its loss and `update`."""

    def __init__(self, local: ActorCriticBase, ctx: WorkerContext):
        cfg = ctx.config
        framework.manual_seed(ctx.seed)  # the action noise comes from framework's generator for the device
        n = cfg["env"]["envs_per_worker"]
        self.envs = EnvBatch(cfg["env"]["id"], cfg["env"]["kwargs"], n, seed=ctx.seed % (2**31), rank=ctx.rank,
                             normalization=Normalization.for_model(ctx.model, cfg, n, update=True),
                             vectorize=cfg["env"]["vectorize"], sign_rewards=cfg["env"]["sign_reward"],
                             life_loss_done=cfg["env"]["life_loss_done"])
        super().__init__(local, ctx, self.envs.action_head)
        T, E = self.algo_cfg["n_steps"], len(self.envs)
        self.T, self.E = T, E
        self.obs = np.zeros((T + 1, E, *self.envs.obs_shape), dtype=self.envs.obs.dtype)
        self.actions = np.zeros((T, E, *self.action_head.shape), dtype=self.action_head.dtype)
        self.rewards = np.zeros((T, E), dtype=np.float32)
        self.dones = np.zeros((T, E), dtype=np.float32)
        self.heads: Any = None
        """When a subclass sets it (a (T, E, head size) array on the device), each step's policy outputs are kept
        there: the behaviour policy of an actor-learner's trajectory."""
        self.state = self.state0 = self.local.initial_state(E)

    def _action_noise(self) -> Any:
        """The noise of a whole rollout's actions, (T, E, size), drawn at once on the device (the same numbers
        as T draws of one step's: ActionHead.draw_noise)."""
        return self.action_head.draw_noise((self.T, self.E), self.local_arena.data.dtype, self.device)

    def _act(self, obs: np.ndarray, noise: Any) -> np.ndarray:
        """Sample actions on the device for a batch of host observations (no grad) with this step's noise;
        advances the LSTM state.

        Categorical actions use the Gumbel-max trick, continuous ones mean + std * noise (ActionHead.sample).
        """
        head, self.state = self.policy(self.tensor(obs), self.state)
        self._head = head.data_array
        log_std = None if self.local.log_std is None else self.local.log_std.data_array
        return to_host(self.action_head.sample(head.data_array, noise, log_std))

    def _values(self, obs: np.ndarray, state: tuple[Any, Any] | None) -> np.ndarray:
        """V(obs) on the host for host observations."""
        return to_host(self.local(self.tensor(obs), state)[1].data_array)

    def _mask_state(self, done: np.ndarray) -> None:
        if self.state is not None and done.any():
            keep = self.tensor((1.0 - done.astype(np.float32))[:, None])  # float32: the state stays float32
            self.state = tuple(s * keep for s in self.state)

    def rollout(self) -> None:
        """Collect n_steps from every env with the local model; count the steps and finished episodes."""
        gamma = self.algo_cfg["gamma"]
        self.state0 = self.state
        returns: list[float] = []
        lengths: list[int] = []
        noise = self._action_noise()
        with framework.no_grad():
            for t in range(self.T):
                self.obs[t] = self.envs.obs
                actions = self._act(self.obs[t], noise[t])
                if self.heads is not None:
                    self.heads[t] = self._head
                self.actions[t] = actions
                out = self.envs.step(actions)
                self.rewards[t] = out.rewards
                done = out.terminated | out.truncated | out.life_lost  # the end of an episode, for learning
                self.dones[t] = done
                if out.truncated_index.size:  # a time limit is not a real end: bootstrap from V(last obs)
                    rows = to_device(out.truncated_index, self.device)
                    sub = None if self.state is None else tuple(s[rows] for s in self.state)
                    self.rewards[t, out.truncated_index] += gamma * self._values(out.truncated_obs, sub)
                self._mask_state(done)
                returns += out.episode_returns
                lengths += out.episode_lengths
        self.obs[self.T] = self.envs.obs
        self.ctx.stats.add_steps(self.T * self.E)
        if returns:
            self.ctx.stats.add_episodes(returns, lengths)

    def _forward_rollout(self) -> tuple[Any, Any]:
        """Policy heads and values for all (T+1) x E observations of this worker's rollout, with grad."""
        return self.forward_trajectories(self.obs, self.state0, self.dones)

    @abc.abstractmethod
    def update(self) -> None:
        """One update: sync, roll out, the loss and its gradient, `apply`."""

    def run(self) -> None:
        """Update until the run stops; the envs are closed however it ends."""
        try:
            while not self.ctx.stats.should_stop():
                self.update()
        finally:
            self.envs.close()
