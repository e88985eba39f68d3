"""A3C: asynchronous n-step advantage actor-critic on gymnasium environments (plugin in `plugin`).

`ActorCriticBase` is the interface a `model.factory`'s network implements (docs/models.md).
"""
from framework.rl.model import ActorCriticBase

__all__ = ["ActorCriticBase"]
