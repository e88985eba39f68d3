"""What actor-critic algorithms on gymnasium environments share (A3C's, IMPALA's and APPO's plugins stand on it): below
framework.algorithms, above the runtime (framework.runtime).

- `envs`: the environments, one module per idea; `envs.info`: a run's environment described once in the main
  process and handed to every process (`EnvInfo`); `envs.batch`: `EnvBatch`, n environments stepped together;
- `spaces`: how observation and action spaces are read (`ObservationLayout`, `ActionHead`);
- `normalization`: observation and return statistics shared by a run's workers;
- `model`, `model_factory`: `ActorCriticBase` (what a network implements), the built-in `ActorCritic`, a
  `model.factory`'s network;
- `actor`: `Actor`, the one path from observation to action (workers, actors, evaluation, `Policy`);
- `trajectories`: a rollout's arrays (`Trajectory`) and the shared `TrajectoryBuffer` of actor-learner runs;
- `rollout`: `RolloutWorker`, a worker's envs, local model, rollout and update tail;
- `returns`, `vtrace`, `losses`, `diagnostics`: GAE(lambda), V-trace, the losses, explained variance;
- `actor_learner`: actors and learners around the trajectory buffer (IMPALA's and APPO's);
- `evaluation`: greedy episodes and recordings;
- `algorithm`: `ActorCriticAlgorithm`, the plugin base (env and model sections, evaluation, acting).

`ActorCriticBase` is the interface a `model.factory`'s network implements (docs/models.md).
"""
from framework.rl.model import ActorCriticBase

__all__ = ["ActorCriticBase"]
