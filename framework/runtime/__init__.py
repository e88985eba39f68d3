"""The training system's runtime: what the trainer and every algorithm plugin share, at the bottom of the training
system (the plugin contract, and the parts of a run that live in every process).

- `algorithm`: `Algorithm` (what a plugin implements), `WorkerContext`, `Evaluation`, `EvaluationBounds`, the
  optimizer a config names and its learning-rate schedule;
- `schema`: `Field`, `ConfigError` and validation (imports nothing else of the project);
- `run_stats`: the counters and per-update numbers workers write to shared memory and the monitor reads;
- `update`: `apply_gradient`, the tail of every gradient update (skip what is not finite, clip, step, record);
- `user_code`: importing what a config names as `module:Name`, by the rule docs/security.md states;
- `formatting`: numbers as the terminal shows them.

framework.train (the trainer, monitor, checkpoints), framework.algorithms and framework.rl import this package;
it imports none of them.
"""
