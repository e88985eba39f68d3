"""hogshare's training system, on top of the tensor library.

- `schema`: `Field`, `ConfigError` and validation (imports nothing else of the project);
- `config`: the core schema, YAML loading, `--set`, run directories' config.yaml;
- `cli`: the `train` and `evaluate` commands (`python -m framework.train` runs them too);
- `trainer`: builds and shares the model, restores checkpoints, runs the monitor;
- `monitor`: the main process's loop (logging, checkpoints, evaluation, stopping);
- `backends`: where workers run (`local`: processes on this machine);
- `run_stats`, `checkpoint`, `tensorboard_writer`, `progress`: what the monitor works with.

The algorithms it trains are plugins in `framework.algorithms`. Importing this
package imports none of these modules.
"""
