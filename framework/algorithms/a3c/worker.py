"""The A3C worker loop: sync from the shared arena, roll out n steps, compute the A3C loss, apply the gradient.

The rollout, the local model and the update tail are `framework.rl`'s
(`RolloutWorker`); what is A3C's is the loss over the whole (n_steps x envs)
rollout: GAE(lambda) advantages (lambda = 1 is the classic n-step return)
in `rl.losses.actor_critic_loss` (the policy gradient, an entropy bonus and a
value loss), with gradient clipping (`algorithm.max_grad_norm`). A loss or gradient that is not finite
is never applied. With `trainer.compile` the loss runs through
framework.compile (forward and backward), as the acting policy and the
rollout's forward do; with an LSTM only the loss is compiled. On a GPU an
update moves the rollout to the device once and the values back once (the
advantages are computed on the host).
"""
from __future__ import annotations

from typing import Any

import framework
from framework.device import to_host
from framework.runtime.algorithm import WorkerContext
from framework.rl.diagnostics import explained_variance
from framework.rl.losses import actor_critic_loss
from framework.rl.model import ActorCriticBase
from framework.rl.returns import gae
from framework.rl.rollout import RolloutWorker
from framework.rl.trajectories import Trajectory
from framework.runtime.profile import LEARN


class Worker(RolloutWorker):
    """One A3C worker: a `RolloutWorker` with the A3C loss over its own trajectory."""

    def __init__(self, local: ActorCriticBase, ctx: WorkerContext):
        super().__init__(local, ctx)
        self.loss_terms = framework.compile(actor_critic_loss) if self.compiled else actor_critic_loss
        layout, head = self.env.layout, self.action_head
        self.trajectory = Trajectory.allocate(self.T, self.E, layout.shape, layout.dtype, head.shape, head.dtype)

    def loss(self) -> tuple[Any, dict[str, float]] | None:
        """The A3C loss over the rollout and its parts (policy_loss, value_loss, entropy).

        None when the forward pass is not finite (a NaN or inf observation): no loss can be built from it.
        """
        a, n, trajectory = self.algo_cfg, self.T * self.E, self.trajectory
        head, values = self.forward_trajectories(trajectory.obs, self.state0, trajectory.dones)
        v = to_host(values.data_array).reshape(self.T + 1, self.E)
        if not self.finite(head, v):
            return None
        adv, targets = gae(trajectory.rewards, trajectory.dones, v, a["gamma"], a["gae_lambda"])
        explained = explained_variance(v[:-1], targets)
        if a["normalize_advantages"]:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        actions = self.tensor(trajectory.actions.reshape(n, *self.action_head.shape))
        loss, policy_loss, value_loss, entropy = self.loss_terms(
            self.action_head, self.local, head, values, actions, self.tensor(adv.reshape(n)),
            self.tensor(targets.reshape(n)), n, a["value_coef"], a["entropy_coef"])
        return loss, {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(), "entropy": entropy.item(),
                      "explained_variance": explained}

    def update(self) -> None:
        """Sync, roll out, compute the gradient, and apply it to the shared parameters if finite."""
        synced_at = self.sync()
        self.rollout(self.trajectory)
        self.profile.switch(LEARN)
        self.local_arena.grad[...] = 0.0
        result = self.loss()
        if result is None:
            self.ctx.stats.add_skipped()
            return
        loss, parts = result
        loss.backward()
        self.apply(parts, synced_at, self.algo_cfg["max_grad_norm"])
