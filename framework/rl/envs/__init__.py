"""Gymnasium environments for the actor-critic plugins, one module per idea:

- `ids`: what an env.id names (a gymnasium id, module:EnvId, module:Factory) and `make_env`;
- `faults`: `EnvError`, `EnvBuildError` (whose fault a failure to build is), `NoFrames`;
- `extras`: the optional extras some environments need, and what to install;
- `atari`: `hogshare/Atari-v0`, the ALE games preprocessed as in A3C/DQN (wrapper chain and vector env);
- `batch`: `EnvBatch`, n environments stepped together with auto-reset, over `vector` (one vector env that
  resets in the same step; `cartpole_vector`) or `loop` (a loop of envs, which also renders).
"""
from framework.rl.envs.atari import ATARI_ID, make_atari, make_atari_vector
from framework.rl.envs.batch import BatchStep, EnvBatch
from framework.rl.envs.faults import EnvBuildError, EnvError, NoFrames
from framework.rl.envs.ids import make_env

__all__ = ["ATARI_ID", "BatchStep", "EnvBatch", "EnvBuildError", "EnvError", "NoFrames", "make_atari",
           "make_atari_vector", "make_env"]
