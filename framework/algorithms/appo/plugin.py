"""APPO: PPO's clipped surrogate on actor-learner trajectories, as sample-factory's asynchronous PPO.

The actors, the shared trajectory buffer and the learners' loop are
`framework.rl.actor_learner`'s, as IMPALA's are. What is APPO's is the
learner, which reads as cleanrl's PPO update:

1. per batch of trajectories, one forward pass with the parameters as they
   are when the batch arrives: the targets (GAE(lambda) on the lagged data,
   or V-trace: `algorithm.targets`), the values the value clip starts from,
   and the log-probabilities the KL early stop measures from;
2. `algorithm.epochs` passes over the batch, each in `algorithm.minibatches`
   minibatches (`algorithm.minibatch_split`: shuffled samples for a
   feed-forward model, whole trajectories for an LSTM, whose state needs
   them whole), each one update of the shared parameters with the clipped
   surrogate against the behaviour policy's probabilities
   (`algorithm.clip_range`), the value loss optionally clipped
   (`algorithm.clip_value`), advantages normalised per minibatch;
3. with `algorithm.target_kl`, the epochs stop early once a minibatch's
   approximate KL from the batch's starting parameters passes 1.5 x
   target_kl (Stable-Baselines3's rule). It is measured from where this
   batch's epochs started, not from the behaviour policy: a lagged batch
   still gets its first pass.

With `algorithm.decoupled` the objective is decoupled PPO's (Hilton et al.
2021, "Batch size-invariance for policy optimization"): the ratio the clip
acts on is to the proximal policy, the parameters the batch's epochs start
from, as in synchronous PPO, and the behaviour policy's lag behind it is
corrected by an importance weight pi_prox / mu on each advantage, truncated
at `algorithm.rho_bar`. Against the behaviour policy (the default, as
sample-factory's APPO), a batch acted many updates ago starts with most of
its ratios already past the clip, and those samples give no gradient: with 5
epochs of 16 minibatches per batch, an actor's data lags by about 200
updates.

Each update reports approx_kl and clip_fraction (of the ratio the clip acts
on) and the batch's explained_variance (rl.diagnostics).
"""
from __future__ import annotations

from typing import Any

import numpy as np

import framework
from framework.device import to_host
from framework.runtime.schema import Field
from framework.rl import diagnostics
from framework.rl.actor_learner import ACTOR_LEARNER_SCHEMA, ActorLearnerAlgorithm, Learner
from framework.rl.losses import clipped_surrogate_loss

KL_STOP_FACTOR = 1.5
"""The epochs stop once a minibatch's KL from the batch's start passes this times target_kl (SB3's factor)."""


class AppoLearner(Learner):
    """A learner with PPO's clipped surrogate: up to epochs x minibatches updates per batch of trajectories."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_terms = framework.compile(clipped_surrogate_loss) if self.compiled else clipped_surrogate_loss
        self.rng = np.random.default_rng(self.ctx.seed)
        split = self.algo_cfg["minibatch_split"]
        self.by_samples = split == "samples" or (split == "auto" and not self.recurrent)

    def learn(self, batch: dict[str, np.ndarray]) -> None:
        a = self.algo_cfg
        self.sync()
        with framework.no_grad():
            head, values = self.forward_trajectories(batch["obs"], self.state0(batch), batch["dones"])
        found = self.targets(batch, head, values, a["targets"] == "vtrace", a["gae_lambda"])
        if found is None:
            self.ctx.stats.add_skipped()
            return
        advantages, targets, _, ratio, old_values, explained, start_log_probs = found
        T, N = advantages.shape
        batch = {**batch, "advantages": advantages, "targets": targets, "old_values": old_values,
                 "start_log_probs": start_log_probs}
        if a["decoupled"]:  # clip against where the epochs start; the lag behind the actors corrected by a weight
            batch["weights"] = np.minimum(np.exp(np.minimum(start_log_probs - batch["log_probs"], 50.0)),
                                          a["rho_bar"])
            batch["log_probs"] = start_log_probs
        context = {"version": self.lagged_version(batch), "importance_ratio": ratio,
                   "explained_variance": explained}
        for _ in range(a["epochs"]):
            for rows in self._minibatches(T, N):
                if self._minibatch(batch, rows, context):
                    return  # the KL from the batch's start passed 1.5 x target_kl: no more epochs on it

    def _minibatches(self, T: int, N: int) -> list[Any]:
        """One epoch's minibatches: shuffled (t, env) samples, or whole trajectories (env columns)."""
        if self.by_samples:
            order = self.rng.permutation(T * N)
            return [np.sort(part) for part in np.array_split(order, min(self.algo_cfg["minibatches"], T * N))]
        order = self.rng.permutation(N)
        return [np.sort(part) for part in np.array_split(order, min(self.algo_cfg["minibatches"], N))]

    def _forward(self, batch: dict[str, np.ndarray], rows: np.ndarray, T: int) -> tuple[Any, Any]:
        """Policy outputs and values (with grad) of a minibatch: its samples' observations, or its trajectories
        (all T + 1 steps, the state carried through them)."""
        if self.by_samples:
            obs = batch["obs"][:T].reshape(-1, *batch["obs"].shape[2:])[rows]
            return self.forward_rollout(self.tensor(obs[None]), None, None)
        return self.forward_trajectories(batch["obs"][:, rows], self.state0(batch, rows), batch["dones"][:, rows])

    def _minibatch(self, batch: dict[str, np.ndarray], rows: np.ndarray, context: dict[str, Any]) -> bool:
        """One clipped-surrogate update on the minibatch's samples; whether the KL early stop was reached (the
        update then not applied)."""
        a = self.algo_cfg
        T = batch["rewards"].shape[0]

        def pick(array: np.ndarray) -> np.ndarray:  # the minibatch's entries of a (T, N, ...) array, flattened
            return (array.reshape(T * array.shape[1], *array.shape[2:])[rows] if self.by_samples
                    else array[:, rows].reshape(T * rows.size, *array.shape[2:]))

        advantages = pick(batch["advantages"])
        n = advantages.size
        self.sync()
        self.local_arena.grad[...] = 0.0
        head, values = self._forward(batch, rows, T)
        if not self.finite(head, to_host(values.data_array)):
            self.ctx.stats.add_skipped()
            return False
        if a["normalize_advantages"]:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        if a["decoupled"]:
            advantages = advantages * pick(batch["weights"])
        f32 = lambda x: self.tensor(x.astype(np.float32))  # noqa: E731
        loss, policy_loss, value_loss, entropy, log_ratio = self.loss_terms(
            self.action_head, self.local, head, values,
            self.tensor(pick(batch["actions"]).reshape(n, *self.action_head.shape)),
            self.tensor(pick(batch["log_probs"])), f32(advantages), f32(pick(batch["targets"])), n,
            a["clip_range"], a["value_coef"], a["entropy_coef"], f32(pick(batch["old_values"])), a["clip_value"])
        log_ratio = to_host(log_ratio.data_array)
        if a["target_kl"] is not None:
            moved = log_ratio if a["decoupled"] else log_ratio + pick(batch["log_probs"]) - pick(
                batch["start_log_probs"])
            if diagnostics.approx_kl(moved) > KL_STOP_FACTOR * a["target_kl"]:
                self.ctx.stats.add_count("kl_early_stops", 1)
                return True
        loss.backward()
        parts = {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(), "entropy": entropy.item(),
                 "importance_ratio": context["importance_ratio"], "approx_kl": diagnostics.approx_kl(log_ratio),
                 "clip_fraction": diagnostics.clip_fraction(log_ratio, a["clip_range"]),
                 "explained_variance": context["explained_variance"]}
        self.apply(parts, context["version"], a["max_grad_norm"])
        return False


class Appo(ActorLearnerAlgorithm):
    """The `appo` algorithm plugin."""

    name = "appo"
    learner_class = AppoLearner
    schema = {
        **ACTOR_LEARNER_SCHEMA,
        "clip_range": Field("float", 0.2, low=0.0, low_open=True, high=10.0,
                            doc="PPO's clipping of the ratio to the behaviour policy in the surrogate"),
        "clip_value": Field("float", None, low=0.0, low_open=True, nullable=True,
                            doc="clip the value loss around the values the targets were computed with (PPO2's); "
                                "`null`: no clipping"),
        "target_kl": Field("float", None, low=0.0, low_open=True, nullable=True,
                           doc="a batch's epochs stop once a minibatch's approximate KL from where they started "
                               "passes 1.5 x this (Stable-Baselines3's rule; counted as `perf/kl_early_stops`); "
                               "`null`: never"),
        "decoupled": Field("bool", False,
                           doc="decoupled PPO's objective (Hilton et al. 2021): the clip acts on the ratio to the "
                               "parameters the batch's epochs start from, the lag behind the actors corrected by "
                               "an importance weight truncated at `rho_bar`; `false`: the ratio to the behaviour "
                               "policy, as sample-factory's APPO"),
        "epochs": Field("int", 2, low=1, high=1000, doc="passes over each batch"),
        "minibatches": Field("int", 2, low=1, high=1 << 20, doc="updates per pass over a batch"),
        "minibatch_split": Field("str", "auto", choices=("auto", "samples", "trajectories"),
                                 doc="minibatches of shuffled samples or of whole trajectories; `auto`: samples for "
                                     "a feed-forward model, trajectories for an LSTM"),
        "targets": Field("str", "gae", choices=("gae", "vtrace"),
                         doc="targets computed once per batch with the parameters as they are when it arrives: GAE "
                             "on the lagged data, or V-trace"),
        "gae_lambda": Field("float", 0.95, low=0.0, high=1.0, doc="GAE(lambda) of `targets: gae`"),
        "rho_bar": Field("float", 1.0, low=0.0, low_open=True,
                         doc="V-trace's truncation of the importance weights in the advantages and targets "
                             "(`targets: vtrace`), and of `decoupled`'s weights"),
        "c_bar": Field("float", 1.0, low=0.0, low_open=True,
                       doc="V-trace's truncation of the importance weights in the traces (`targets: vtrace`)"),
        "normalize_advantages": Field("bool", True, doc="standardise advantages per minibatch"),
    }
    metrics = ("policy_loss", "value_loss", "entropy", "grad_norm", "lr", "importance_ratio", "approx_kl",
               "clip_fraction", "explained_variance")
    counts = (*ActorLearnerAlgorithm.counts, "kl_early_stops")


ALGORITHM = Appo()
