"""The A3C worker loop: sync from the shared arena, roll out n steps, compute the loss, apply the gradient.

Each worker steps `env.envs_per_worker` environments with one batched no-grad
forward pass per step, then runs one forward+backward pass over the whole
(n_steps x envs) rollout (the body once over all its frames, an LSTM unrolled
as one op: `ActorCritic.forward_rollout`): GAE(lambda) advantages (lambda = 1
is the classic n-step return), an entropy bonus, a value loss, gradient
clipping. Observations are stored as the envs give them (uint8 frames stay
uint8; with `env.normalize_obs` / `normalize_reward` the envs give them
normalised, with the run's shared statistics, see a3c.normalization). Bootstraps on truncation (time limits) but not on termination. The
local model syncs from the shared parameter arena with one copy; its gradient
goes to the shared optimizer with one copy and one fused step. A loss or
gradient that is not finite is never applied.

With `trainer.compile` (the default) the acting policy, the model's forward
over the rollout and the loss run through framework.compile: each is captured
once and then replayed as array code (forward and backward), which is where a
small network's time goes otherwise (Python's per-op work, not arithmetic).

On a GPU (`trainer.device: cuda:N`) the local model, the sampling and the
update run on the device: each step moves the batch of observations there in
one copy and the sampled actions back in one; an update moves the rollout
there once and the values back once (advantages are computed on the host).
"""
from __future__ import annotations

from typing import Any

import numpy as np

import framework
from framework.algorithms.a3c.envs import EnvBatch
from framework.algorithms.a3c.model import ActorCriticBase
from framework.algorithms.a3c.spaces import ActionHead
from framework.algorithms.a3c.normalization import Normalization
from framework.algorithms.base import WorkerContext, learning_rate
from framework.device import array_module, to_device, to_host
from framework.optim.clip import grad_norm


def a3c_loss(action_head: ActionHead, model: ActorCriticBase, head: Any, values: Any, actions: Any,
             advantages: Any, targets: Any, n: int, value_coef: float,
             entropy_coef: float) -> tuple[Any, Any, Any, Any]:
    """(loss, policy loss, value loss, entropy) of the first n heads and values of a rollout."""
    log_prob, entropy = action_head.log_prob_entropy(head[:n], actions, model.log_std)
    policy_loss = -(log_prob * advantages).mean()
    value_loss = ((values[:n] - targets) ** 2).mean()
    entropy = entropy.mean()
    return policy_loss + value_coef * value_loss - entropy_coef * entropy, policy_loss, value_loss, entropy


def advantages(rewards: np.ndarray, dones: np.ndarray, values: np.ndarray, gamma: float,
               lam: float) -> tuple[np.ndarray, np.ndarray]:
    """GAE(lambda) advantages and value targets for a (T, E) rollout; values is (T+1, E) with the bootstrap last."""
    keep = 1.0 - dones
    adv = rewards + gamma * keep * values[1:] - values[:-1]  # the one-step TD errors, then summed back in time
    decay = gamma * lam * keep
    carried = np.empty_like(adv[0])
    for t in range(rewards.shape[0] - 2, -1, -1):
        np.multiply(decay[t], adv[t + 1], out=carried)
        adv[t] += carried
    return adv, adv + values[:-1]


class Worker:
    """One worker's rollout buffers, local model and update step."""

    def __init__(self, local: ActorCriticBase, ctx: WorkerContext):
        cfg = ctx.config
        self.ctx, self.algo_cfg = ctx, cfg["algorithm"]
        self.opt_cfg, self.total_steps = cfg["optimizer"], cfg["trainer"]["total_steps"]
        self.device = ctx.device
        framework.manual_seed(ctx.seed)  # the action noise comes from framework's generator for the device
        n = cfg["env"]["envs_per_worker"]
        self.envs = EnvBatch(cfg["env"]["id"], cfg["env"]["kwargs"], n, seed=ctx.seed % (2**31), rank=ctx.rank,
                             normalization=Normalization.for_model(ctx.model, cfg, n, update=True),
                             vectorize=cfg["env"]["vectorize"])
        self.local = local.to(self.device)
        self.local_arena = self.local.pack_parameters()
        self.shared_arena = ctx.model.arena
        T, E = self.algo_cfg["n_steps"], len(self.envs)
        self.T, self.E = T, E
        self.obs = np.zeros((T + 1, E, *self.envs.obs_shape), dtype=self.envs.obs.dtype)
        self.action_head = self.envs.action_head
        self.actions = np.zeros((T, E, *self.action_head.shape), dtype=self.action_head.dtype)
        self.rewards = np.zeros((T, E), dtype=np.float32)
        self.dones = np.zeros((T, E), dtype=np.float32)
        self.state = self.state0 = self.local.initial_state(E)
        compiled = cfg["trainer"]["compile"]
        # An LSTM's acting step and its unroll over a rollout are ops of their own (one pass on raw arrays;
        # a backward of a few large GEMMs), not captured primitives: with an LSTM only the loss is compiled.
        self.recurrent = self.state0 is not None
        feedforward = compiled and not self.recurrent
        self.policy = framework.compile(self.local.policy) if feedforward else self.local.policy
        self.forward_rollout = (framework.compile(self.local.forward_rollout) if feedforward
                                else self.local.forward_rollout)
        self.loss_terms = framework.compile(a3c_loss) if compiled else a3c_loss

    def _tensor(self, array: np.ndarray) -> Any:
        """A host array as a tensor on the worker's device: itself on the CPU, one copy to a GPU."""
        return framework.as_tensor(to_device(array, self.device))

    def _action_noise(self) -> Any:
        """The noise of a whole rollout's actions, (T, E, size), drawn at once on the device (the same numbers
        as T draws of one step's: ActionHead.draw_noise)."""
        return self.action_head.draw_noise((self.T, self.E), self.local_arena.data.dtype, self.device)

    def _act(self, obs: np.ndarray, noise: Any) -> np.ndarray:
        """Sample actions on the device for a batch of host observations (no grad) with this step's noise;
        advances the LSTM state.

        Categorical actions use the Gumbel-max trick, continuous ones mean + std * noise (ActionHead.sample).
        """
        head, self.state = self.policy(self._tensor(obs), self.state)
        log_std = None if self.local.log_std is None else self.local.log_std.data_array
        return to_host(self.action_head.sample(head.data_array, noise, log_std))

    def _values(self, obs: np.ndarray, state: tuple[Any, Any] | None) -> np.ndarray:
        """V(obs) on the host for host observations."""
        return to_host(self.local(self._tensor(obs), state)[1].data_array)

    def _mask_state(self, done: np.ndarray) -> None:
        if self.state is not None and done.any():
            keep = self._tensor((1.0 - done.astype(np.float32))[:, None])  # float32: the state stays float32
            self.state = tuple(s * keep for s in self.state)

    def rollout(self) -> None:
        """Collect n_steps from every env with the local model."""
        gamma = self.algo_cfg["gamma"]
        self.state0 = self.state
        returns: list[float] = []
        lengths: list[int] = []
        noise = self._action_noise()
        with framework.no_grad():
            for t in range(self.T):
                self.obs[t] = self.envs.obs
                actions = self._act(self.obs[t], noise[t])
                self.actions[t] = actions
                out = self.envs.step(actions)
                self.rewards[t] = out.rewards
                done = out.terminated | out.truncated
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
        """Policy heads and values for all (T+1) x E observations, with grad; the LSTM state starts from the
        rollout's first state and is reset after every step that ended an episode."""
        keep = None
        if self.recurrent:
            keep = np.ones((self.T + 1, self.E), dtype=np.float32)
            keep[1:] -= self.dones
            keep = to_device(keep, self.device)
        return self.forward_rollout(self._tensor(self.obs), self.state0, keep)

    def loss(self) -> tuple[Any, dict[str, float]] | None:
        """The A3C loss over the rollout and its parts (policy_loss, value_loss, entropy).

        None when the forward pass is not finite (a NaN or inf observation): no loss can be built from it.
        """
        a, n = self.algo_cfg, self.T * self.E
        head, values = self._forward_rollout()
        v = to_host(values.data_array).reshape(self.T + 1, self.E)
        xp = array_module(head.data_array)
        if not (bool(xp.isfinite(head.data_array).all()) and np.isfinite(v).all()):
            return None
        adv, targets = advantages(self.rewards, self.dones, v, a["gamma"], a["gae_lambda"])
        if a["normalize_advantages"]:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        actions = self._tensor(self.actions.reshape(n, *self.actions.shape[2:]))
        loss, policy_loss, value_loss, entropy = self.loss_terms(
            self.action_head, self.local, head, values, actions, self._tensor(adv.reshape(n)), self._tensor(targets.reshape(n)), n,
            a["value_coef"], a["entropy_coef"])
        return loss, {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(), "entropy": entropy.item()}

    def update(self) -> None:
        """Sync, roll out, compute the gradient, and apply it to the shared parameters if finite."""
        stats = self.ctx.stats
        self.local_arena.copy_from(self.shared_arena)
        synced_at = stats.global_updates()
        self.rollout()
        grad = self.local_arena.grad
        grad[...] = 0.0
        result = self.loss()
        if result is None:
            stats.add_skipped()
            return
        loss, parts = result
        loss.backward()
        norm = grad_norm(grad)
        if not (np.isfinite(norm) and np.isfinite(list(parts.values())).all()):
            stats.add_skipped()
            return
        if norm > self.algo_cfg["max_grad_norm"]:
            grad *= self.algo_cfg["max_grad_norm"] / norm
        lr = learning_rate(self.opt_cfg, stats.global_steps(), self.total_steps)
        for group in self.ctx.optimizer.param_groups:
            group["lr"] = lr
        self.shared_arena.grad[...] = grad  # one device-to-device copy on a GPU
        self.ctx.optimizer.step()
        stats.add_update({**parts, "grad_norm": norm, "lr": lr}, stats.global_updates() - synced_at)

    def run(self) -> None:
        try:
            while not self.ctx.stats.should_stop():
                self.update()
        finally:
            self.envs.close()
