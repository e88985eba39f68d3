"""APPO: PPO's clipped surrogate on actor-learner trajectories, as sample-factory's asynchronous PPO.

The actors, the shared trajectory buffer and the learners' loop are
`framework.rl.actor_learner`'s, as IMPALA's are. What is APPO's is the
learner: per batch of trajectories it computes the targets once, with the
parameters as they are when the batch arrives (GAE(lambda) on the lagged
data, or V-trace: `algorithm.targets`), then runs `algorithm.epochs` passes
over it in `algorithm.minibatches` minibatches of whole trajectories (an
LSTM's state needs them whole), each one update of the shared parameters
with the clipped surrogate (`algorithm.clip_range`;
`rl.losses.clipped_surrogate_loss`) against the behaviour policy's
probabilities.
"""
from __future__ import annotations

import numpy as np

import framework
from framework.device import to_host
from framework.plugin.schema import Field
from framework.rl.actor_learner import ACTOR_LEARNER_SCHEMA, ActorLearnerAlgorithm, Learner
from framework.rl.losses import clipped_surrogate_loss


class AppoLearner(Learner):
    """A learner with PPO's clipped surrogate: epochs x minibatches updates per batch of trajectories."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_terms = framework.compile(clipped_surrogate_loss) if self.compiled else clipped_surrogate_loss
        self.rng = np.random.default_rng(self.ctx.seed)

    def learn(self, batch: dict[str, np.ndarray]) -> None:
        a = self.algo_cfg
        self.sync()
        with framework.no_grad():
            head, values = self.forward_trajectories(batch["obs"], self.state0(batch), batch["dones"])
        found = self.targets(batch, head, values, a["targets"] == "vtrace", a["gae_lambda"])
        if found is None:
            self.ctx.stats.add_skipped()
            return
        advantages, targets, _, ratio = found
        N = advantages.shape[1]
        version = self.lagged_version(batch)
        for _ in range(a["epochs"]):
            for columns in np.array_split(self.rng.permutation(N), min(a["minibatches"], N)):
                columns = np.sort(columns)
                self._minibatch(batch, columns, advantages[:, columns], targets[:, columns], ratio, version)

    def _minibatch(self, batch: dict[str, np.ndarray], columns: np.ndarray, advantages: np.ndarray,
                   targets: np.ndarray, ratio: float, version: int) -> None:
        """One clipped-surrogate update on the trajectories of the batch's env columns."""
        a = self.algo_cfg
        n = advantages.size
        self.sync()
        self.local_arena.grad[...] = 0.0
        head, values = self.forward_trajectories(batch["obs"][:, columns], self.state0(batch, columns),
                                                 batch["dones"][:, columns])
        if not self.finite(head, to_host(values.data_array)):
            self.ctx.stats.add_skipped()
            return
        if a["normalize_advantages"]:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        actions = self.tensor(batch["actions"][:, columns].reshape(n, *self.action_head.shape))
        loss, policy_loss, value_loss, entropy = self.loss_terms(
            self.action_head, self.local, head, values, actions,
            self.tensor(batch["log_probs"][:, columns].reshape(n)),
            self.tensor(advantages.reshape(n).astype(np.float32)), self.tensor(targets.reshape(n).astype(np.float32)),
            n, a["clip_range"], a["value_coef"], a["entropy_coef"])
        loss.backward()
        parts = {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(), "entropy": entropy.item(),
                 "importance_ratio": ratio}
        self.apply(parts, version, a["max_grad_norm"])


class Appo(ActorLearnerAlgorithm):
    """The `appo` algorithm plugin."""

    name = "appo"
    learner_class = AppoLearner
    schema = {
        **ACTOR_LEARNER_SCHEMA,
        "clip_range": Field("float", 0.2, low=0.0, low_open=True, high=10.0),
        "epochs": Field("int", 2, low=1, high=1000),
        "minibatches": Field("int", 2, low=1, high=4096),
        "targets": Field("str", "gae", choices=("gae", "vtrace")),
        "gae_lambda": Field("float", 0.95, low=0.0, high=1.0),
        "rho_bar": Field("float", 1.0, low=0.0, low_open=True),
        "c_bar": Field("float", 1.0, low=0.0, low_open=True),
        "normalize_advantages": Field("bool", True),
    }
    metrics = ("policy_loss", "value_loss", "entropy", "grad_norm", "lr", "importance_ratio")


ALGORITHM = Appo()
