"""IMPALA (Espeholt et al. 2018): actors acting with lagging parameters, learners correcting for it with V-trace.

The actors, the shared trajectory buffer and the learners' loop are
`framework.rl.actor_learner`'s. What is IMPALA's is the learner's loss: the
V-trace targets and policy-gradient advantages (`rl.vtrace`, truncation
levels `algorithm.rho_bar` and `c_bar`) in the actor-critic loss A3C uses
(`rl.losses.actor_critic_loss`). With `algorithm.vtrace: false` the targets
are the plain n-step returns of the lagged data, uncorrected (what the
correction buys can be measured against it).
"""
from __future__ import annotations

import numpy as np

import framework
from framework.runtime.schema import Field
from framework.rl.actor_learner import ACTOR_LEARNER_SCHEMA, ActorLearnerAlgorithm, Learner
from framework.rl.losses import actor_critic_loss


class ImpalaLearner(Learner):
    """A learner with IMPALA's loss: one update per batch of trajectories."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_terms = framework.compile(actor_critic_loss) if self.compiled else actor_critic_loss

    def learn(self, batch: dict[str, np.ndarray]) -> None:
        a = self.algo_cfg
        self.sync()
        self.local_arena.grad[...] = 0.0
        head, values = self.forward_trajectories(batch["obs"], self.state0(batch), batch["dones"])
        found = self.targets(batch, head, values, a["vtrace"])
        if found is None:
            self.ctx.stats.add_skipped()
            return
        advantages, targets, actions, ratio, _, explained, _ = found
        n = advantages.size
        loss, policy_loss, value_loss, entropy = self.loss_terms(
            self.action_head, self.local, head, values, actions, self.tensor(advantages.reshape(n).astype(np.float32)),
            self.tensor(targets.reshape(n).astype(np.float32)), n, a["value_coef"], a["entropy_coef"])
        loss.backward()
        parts = {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(), "entropy": entropy.item(),
                 "importance_ratio": ratio, "explained_variance": explained}
        self.apply(parts, self.lagged_version(batch), a["max_grad_norm"])


class Impala(ActorLearnerAlgorithm):
    """The `impala` algorithm plugin."""

    name = "impala"
    learner_class = ImpalaLearner
    schema = {
        **ACTOR_LEARNER_SCHEMA,
        "vtrace": Field("bool", True,
                        doc="V-trace targets and advantages; `false`: the plain n-step returns of the lagged data, "
                            "uncorrected (to measure what the correction does)"),
        "rho_bar": Field("float", 1.0, low=0.0, low_open=True,
                         doc="V-trace's truncation of the importance weights in the advantages and targets"),
        "c_bar": Field("float", 1.0, low=0.0, low_open=True,
                       doc="V-trace's truncation of the importance weights in the traces"),
    }
    metrics = ("policy_loss", "value_loss", "entropy", "grad_norm", "lr", "importance_ratio", "explained_variance")


ALGORITHM = Impala()
