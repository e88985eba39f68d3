"""The actor-critic losses, given advantages and value targets (n-step, GAE or V-trace ones).

`actor_critic_loss` is A3C's and IMPALA's: the policy gradient with the
advantages as weights, the value's squared error to the targets, an entropy
bonus. `clipped_surrogate_loss` is PPO's (APPO's): the policy-gradient term
replaced by the clipped surrogate of the probability ratio to the behaviour
policy. Both take a rollout's flattened policy outputs and values (the
first n rows: the bootstrap row of the values is left out) and are written
in tensor ops only, so framework.compile captures them with their backward.
"""
from __future__ import annotations

from typing import Any

import framework
from framework.rl.model import ActorCriticBase
from framework.rl.spaces import ActionHead


def actor_critic_loss(action_head: ActionHead, model: ActorCriticBase, head: Any, values: Any, actions: Any,
                      advantages: Any, targets: Any, n: int, value_coef: float,
                      entropy_coef: float) -> tuple[Any, Any, Any, Any]:
    """(loss, policy loss, value loss, entropy) of the first n heads and values of a rollout."""
    log_prob, entropy = action_head.log_prob_entropy(head[:n], actions, model.log_std)
    policy_loss = -(log_prob * advantages).mean()
    value_loss = ((values[:n] - targets) ** 2).mean()
    entropy = entropy.mean()
    return policy_loss + value_coef * value_loss - entropy_coef * entropy, policy_loss, value_loss, entropy


def clipped_surrogate_loss(action_head: ActionHead, model: ActorCriticBase, head: Any, values: Any, actions: Any,
                           behaviour_log_probs: Any, advantages: Any, targets: Any, n: int, clip_range: float,
                           value_coef: float, entropy_coef: float, old_values: Any = None,
                           clip_value: float | None = None) -> tuple[Any, Any, Any, Any, Any]:
    """(loss, policy loss, value loss, entropy, log ratio) with PPO's clipped surrogate (Schulman et al. 2017,
    eq. 7); the log ratio log pi(a) - log mu(a) per sample (no grad needed) serves the diagnostics.

    min(r A, clip(r, 1 - eps, 1 + eps) A) with r = pi(a) / mu(a) is written as clamp(r, max=1 + eps) A where A
    >= 0 and clamp(r, min=1 - eps) A where A < 0: the same values and the same (zero past the clip) gradients.
    With clip_value (and old_values, the values the targets were computed with) the value loss is PPO2's
    clipped one: max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2), so one batch cannot move V far.
    """
    log_prob, entropy = action_head.log_prob_entropy(head[:n], actions, model.log_std)
    log_ratio = log_prob - behaviour_log_probs
    ratio = framework.exp(log_ratio)
    clipped = framework.where(advantages >= 0, framework.clamp(ratio, max=1.0 + clip_range),
                              framework.clamp(ratio, min=1.0 - clip_range))
    policy_loss = -(clipped * advantages).mean()
    squared = (values[:n] - targets) ** 2
    if clip_value is not None:
        moved = old_values + framework.clamp(values[:n] - old_values, min=-clip_value, max=clip_value)
        squared_clipped = (moved - targets) ** 2
        squared = framework.where(squared >= squared_clipped, squared, squared_clipped)
    value_loss = squared.mean()
    entropy = entropy.mean()
    return (policy_loss + value_coef * value_loss - entropy_coef * entropy, policy_loss, value_loss, entropy,
            log_ratio)
