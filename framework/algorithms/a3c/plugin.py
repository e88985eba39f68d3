"""A3C: n-step advantage actor-critic, workers updating a shared model lock-free (the `a3c` plugin).

Environments, model, evaluation and acting are `framework.rl`'s
(`ActorCriticAlgorithm`); what is A3C's is its `algorithm` keys and its
worker loop (`a3c.worker`: a rollout, the A3C loss, one update of the shared
model per rollout). `model.factory: module:function` replaces the built-in
ActorCritic by the user's own network (docs/models.md).
"""
from __future__ import annotations

from framework.algorithms.a3c.worker import Worker
from framework.runtime.algorithm import WorkerContext
from framework.runtime.schema import Field
from framework.rl.algorithm import ROLLOUT_SCHEMA, ActorCriticAlgorithm


class A3C(ActorCriticAlgorithm):
    """The `a3c` algorithm plugin."""

    name = "a3c"
    schema = {
        **ROLLOUT_SCHEMA,
        "gae_lambda": Field("float", 1.0, low=0.0, high=1.0,
                            doc="GAE(lambda) of the advantages; 1.0 is the plain n-step return"),
        "entropy_coef": Field("float", 0.01, low=0.0, doc="weight of the entropy bonus in the loss"),
        "value_coef": Field("float", 0.5, low=0.0, doc="weight of the value loss in the loss"),
        "max_grad_norm": Field("float", 40.0, low=0.0, low_open=True,
                               doc="gradients are clipped to this global norm"),
        "normalize_advantages": Field("bool", False, doc="standardise advantages per rollout"),
    }
    hparams = ("optimizer.name", "optimizer.lr", "algorithm.n_steps", "env.envs_per_worker", "trainer.workers",
               "model.hidden")
    metrics = ("policy_loss", "value_loss", "entropy", "grad_norm", "lr", "explained_variance")

    def run_worker(self, ctx: WorkerContext) -> None:
        Worker(self.worker_model(ctx), ctx).run()


ALGORITHM = A3C()
