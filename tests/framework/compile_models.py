"""Models and steps the framework.compile tests run eagerly and compiled, and the comparison they share."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

import framework as F
from framework import nn
from framework.distributions import Categorical, Normal


class ActorCritic(nn.Module):
    """The A3C shape: a shared body, a policy head and a value head (4-128-(2+1) by default)."""

    def __init__(self, obs: int = 4, hidden: int = 128, actions: int = 2, continuous: bool = False) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs, hidden), nn.ReLU())
        self.pi = nn.Linear(hidden, actions)
        self.v = nn.Linear(hidden, 1)
        self.continuous = continuous
        self.log_std = nn.Parameter(F.zeros(actions)) if continuous else None

    def forward(self, x: Any) -> tuple:
        h = self.body(x)
        return self.pi(h), self.v(h)[:, 0]

    def distribution(self, head: Any) -> Any:
        return Normal(head, F.exp(self.log_std)) if self.continuous else Categorical(logits=head)


def a3c_loss(model: ActorCritic) -> Callable:
    """The A3C loss of `model` as a function of a rollout: (loss, policy loss, value loss, entropy)."""
    def loss(obs: Any, actions: Any, advantages: Any, targets: Any) -> tuple:
        head, values = model(obs)
        dist = model.distribution(head)
        log_prob, entropy = dist.log_prob(actions), dist.entropy()
        if model.continuous:
            log_prob, entropy = log_prob.sum(axis=1), entropy.sum(axis=1)
        policy_loss = -(log_prob * advantages).mean()
        value_loss = ((values - targets) ** 2).mean()
        entropy = entropy.mean()
        return policy_loss + 0.5 * value_loss - 0.01 * entropy, policy_loss, value_loss, entropy
    return loss


def rollout(batch: int, obs: int = 4, actions: int = 2, continuous: bool = False, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    acts = rng.standard_normal((batch, actions)).astype(np.float32) if continuous else rng.integers(0, actions, batch)
    return [F.tensor(rng.standard_normal((batch, obs)).astype(np.float32)), F.tensor(acts),
            F.tensor(rng.standard_normal(batch).astype(np.float32)),
            F.tensor(rng.standard_normal(batch).astype(np.float32))]


def grads_of(params: Sequence[Any], run: Callable[[], Any]) -> list:
    """The gradients `run()`'s first output puts into `params` (cleared before)."""
    for p in params:
        p.grad = None
    out = run()
    (out[0] if isinstance(out, (tuple, list)) else out).backward()
    return [None if p.grad is None else p.grad.cpu().numpy().copy() for p in params]


def assert_same(a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Tensors (or structures of them) equal within float rounding."""
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y, rtol, atol)
    elif a is None:
        assert b is None
    else:
        np.testing.assert_allclose(np.asarray(a.detach().numpy() if isinstance(a, F.Tensor) else a),
                                   np.asarray(b.detach().numpy() if isinstance(b, F.Tensor) else b),
                                   rtol=rtol, atol=atol)
