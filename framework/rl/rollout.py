"""A worker that rolls out n steps of a batch of environments with a local copy of the shared model.

`LocalModelWorker` is the local copy (sync, the rollout forward, the update
tail), which an actor-learner's learner has too; `RolloutWorker` adds the
environments, the acting path and the rollout.

What every on-policy actor-critic worker does before its loss: sync the
local model from the shared parameter arena (one copy), step
`env.envs_per_worker` environments (built from the run's description of its
environment, `ctx.shared.env`: no other env is built) for `algorithm.n_steps`
steps, acting through its `Actor` (rl.actor: the one acting path, which
normalises the observations and samples with one batched no-grad forward
pass per step), and write the rollout into a `Trajectory` (rl.trajectories:
the worker's own, or an actor-learner's buffer slot) step by step:
observations as the model reads them (uint8 frames stay uint8), actions,
the behaviour log-probabilities where the trajectory records them, the
learning signal's rewards (with `env.sign_reward` their signs, with
`env.normalize_reward` scaled: rl.normalization) and dones (with
`env.life_loss_done` a lost life ends the learner's episode). Then one
forward pass with grad over the whole (n_steps + 1) x envs rollout (the body
once over all its frames, an LSTM unrolled as one op:
`ActorCriticBase.forward_rollout`), and, once a subclass has its loss and
gradient, the shared update tail (`framework.runtime.update`). A time limit
is not an end: a truncated episode's last reward gets gamma * V(last
observation) added (the bootstrap); a termination gets none.

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
from framework.rl import sde
from framework.rl.actor import Actor
from framework.rl.envs.batch import EnvBatch
from framework.rl.envs.info import EnvInfo
from framework.rl.model import ActorCriticBase
from framework.rl.normalization import Normalization
from framework.rl.spaces import ActionHead
from framework.rl.trajectories import Trajectory
from framework.runtime.algorithm import WorkerContext, learning_rate
from framework.runtime.profile import ACT, ENV, SYNC
from framework.runtime.update import apply_gradient


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
        self.profile = ctx.stats.profile
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

    def policy_array(self, obs: Any, state: Any) -> tuple[Any, Any]:
        """The (compiled) policy on an array of observations on the device, under the caller's no_grad: (output
        array, state). What this worker's Actor runs."""
        head, state = self.policy(framework.as_tensor(obs), state)
        return head.data_array, state

    def tensor(self, array: np.ndarray) -> Any:
        """A host array as a tensor on the worker's device: itself on the CPU, one copy to a GPU."""
        return framework.as_tensor(to_device(array, self.device))

    def sync(self) -> int:
        """Copy the shared parameters into the local model (one copy); the run's update count at that moment. Its
        time is the profile's `sync`."""
        interrupted = self.profile.switch(SYNC)
        self.local_arena.copy_from(self.shared_arena)
        self.profile.switch(interrupted)
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
    """One worker's environments, local model, acting path and rollout; a subclass adds its loss and `update`."""

    def __init__(self, local: ActorCriticBase, ctx: WorkerContext):
        framework.manual_seed(ctx.seed)  # the action noise comes from framework's generator for the device
        self.env: EnvInfo = ctx.shared.env
        n = self.env.envs_per_worker
        self.envs = EnvBatch(self.env, n, seed=ctx.seed % (2**31), rank=ctx.rank,
                             life_loss_done=self.env.life_loss_done)
        super().__init__(local, ctx, self.env.action_head)
        self.normalization = Normalization.for_model(ctx.model, self.env, n, self.algo_cfg["gamma"], update=True,
                                                     flush_every=self.algo_cfg["n_steps"])
        self.actor = Actor(self.local, self.env, self.normalization, self.policy_array)
        self.T, self.E = self.algo_cfg["n_steps"], n
        self.current_obs = self.actor.observe(self.envs.obs, update=True).copy()
        """The envs' current observations as the model reads them: where the next rollout starts."""
        self.state = self.state0 = self.local.initial_state(n)

    def _action_noise(self) -> Any:
        """The noise of a whole rollout's actions, (T, E, size), drawn at once on the device (the same numbers
        as T draws of one step's: ActionHead.draw_noise); with gSDE, (T, E, latent, size) exploration matrices,
        each env's kept for model.sde_sample_freq steps (rl.sde)."""
        every = self.ctx.config["model"]["sde_sample_freq"]
        return self.action_head.draw_noise((self.T, self.E), self.local_arena.data.dtype, self.device,
                                           latent=sde.latent_size(self.local.log_std),
                                           every=self.T if every < 0 else every)

    def _values(self, obs: np.ndarray, state: tuple[Any, Any] | None) -> np.ndarray:
        """V(obs) on the host for host observations."""
        return to_host(self.local(self.tensor(obs), state)[1].data_array)

    def _mask_state(self, done: np.ndarray) -> None:
        if self.state is not None and done.any():
            keep = self.tensor((1.0 - done.astype(np.float32))[:, None])  # float32: the state stays float32
            self.state = tuple(s * keep for s in self.state)

    def _learning_rewards(self, rewards: np.ndarray, done: np.ndarray) -> np.ndarray:
        """A step's rewards as the learner sees them: their signs with env.sign_reward, then scaled with
        env.normalize_reward (done: the envs whose episode ended, whose running returns start again)."""
        if self.env.sign_reward:
            rewards = np.sign(rewards)
        return rewards if self.normalization is None else self.normalization.rewards(rewards, done)

    def rollout(self, into: Trajectory) -> None:
        """Collect n_steps from every env with the local model into a trajectory (see the module docstring); call
        `written`, then count the steps and finished episodes. Each step is the profile's `act` (the observations
        to actions), then its `env` (the step, and writing it into the trajectory)."""
        gamma = self.algo_cfg["gamma"]
        self.state0 = self.state
        for view, state in zip(into.state0, self.state0 or ()):
            view[...] = to_host(state.data_array)
        behaviour = into.log_probs is not None
        returns: list[float] = []
        lengths: list[int] = []
        noise = self._action_noise()
        into.obs[0] = self.current_obs
        profile = self.profile
        with framework.no_grad():
            for t in range(self.T):
                profile.switch(ACT)
                choice = self.actor.choose(into.obs[t], self.state, noise=noise[t], log_probs=behaviour)
                self.state = choice.state
                into.actions[t] = choice.actions
                if behaviour:
                    into.log_probs[t] = choice.log_probs
                profile.switch(ENV)
                out = self.envs.step(choice.actions)
                into.obs[t + 1] = self.actor.observe(self.envs.obs, update=True)
                ended = out.terminated | out.truncated
                into.rewards[t] = self._learning_rewards(out.rewards, ended)
                done = ended | out.life_lost  # the end of an episode, for learning
                into.dones[t] = done
                if out.truncated_index.size:  # a time limit is not a real end: bootstrap from V(last obs)
                    rows = to_device(out.truncated_index, self.device)
                    sub = None if self.state is None else tuple(s[rows] for s in self.state)
                    last = self.actor.observe(out.truncated_obs)
                    into.rewards[t, out.truncated_index] += gamma * self._values(last, sub)
                self._mask_state(done)
                returns += out.episode_returns
                lengths += out.episode_lengths
        self.current_obs = into.obs[self.T].copy()
        self.written(into)
        self.ctx.stats.add_steps(self.T * self.E)
        if returns:
            self.ctx.stats.add_episodes(returns, lengths)

    def written(self, into: Trajectory) -> None:
        """Called by `rollout` once `into` holds the whole rollout, before its steps are counted (an actor
        publishes its slot here, so that the steps that reach the run's budget are never steps a learner cannot
        take yet); nothing by default."""

    @abc.abstractmethod
    def update(self) -> None:
        """One update: sync, roll out, the loss and its gradient, `apply`."""

    def run(self) -> None:
        """Update until the run stops; the normalisation's pending statistics are merged and the envs closed
        however it ends."""
        try:
            while not self.ctx.stats.should_stop():
                self.update()
        finally:
            if self.normalization is not None:
                self.normalization.flush()
            self.envs.close()
