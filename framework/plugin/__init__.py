"""The plugin contract: what an algorithm plugin implements and imports, below the training system that runs it.

- `algorithm`: `Algorithm` (what a plugin implements), `WorkerContext`, `Evaluation`, `EvaluationBounds`, the
  optimizer a config names and its learning-rate schedule;
- `schema`: `Field`, `ConfigError` and validation (imports nothing else of the project);
- `run_stats`: the counters and per-update numbers workers write to shared memory and the monitor reads;
- `update`: `apply_gradient`, the tail of every gradient update (skip what is not finite, clip, step, record);
- `user_code`: importing what a config names as `module:Name`, by the rule docs/security.md states;
- `formatting`: numbers as the terminal shows them.

framework.train (the trainer, monitor, checkpoints) and framework.algorithms import this package; it imports
neither.
"""
