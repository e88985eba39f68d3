"""What actor-critic algorithms on gymnasium environments share (A3C's, IMPALA's and APPO's plugins stand on it): below
framework.algorithms, above the runtime (framework.runtime).

- `envs`: a batch of environments stepped together, built from an env id or a factory (one module per idea);
- `spaces`: how observation and action spaces are read (`ObservationLayout`, `ActionHead`);
- `normalization`: observation and return statistics shared by a run's workers;
- `model`, `model_factory`: `ActorCriticBase` (what a network implements), the built-in `ActorCritic`, a
  `model.factory`'s network;
- `rollout`: `RolloutWorker`, a worker's envs, local model, rollout and update tail;
- `returns`: GAE(lambda) advantages and value targets;
- `evaluation`, `actor`: greedy episodes and recordings; a trained model acting in its env's spaces;
- `algorithm`: `ActorCriticAlgorithm`, the plugin base (env and model sections, evaluation, acting).

`ActorCriticBase` is the interface a `model.factory`'s network implements (docs/models.md).
"""
from framework.rl.model import ActorCriticBase

__all__ = ["ActorCriticBase"]
