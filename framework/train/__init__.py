"""hogshare's training system, on top of the tensor library.

- `schema`: `Field`, `ConfigError` and validation (imports nothing else of the project);
- `config`, `yaml_input`: the core schema, `--set`, run directories' config.yaml; YAML read in bounded time and memory;
- `cli`: the `train` and `evaluate` commands (`python -m framework.train` runs them too);
- `trainer`: start-up (model, shared memory, checks, checkpoint), then the run directory and the monitor;
- `startup`, `run_dir`, `resume`, `stop_signals`: room checks, the run directory, what a resume may change and what
  a checkpoint must hold, and what each phase does with a stop signal;
- `monitor`: the main process's loop (logging, checkpoints, evaluation, stopping);
- `backends`: where workers run (`local`: processes on this machine);
- `run_stats`, `checkpoint`, `tensorboard_writer`, `progress`: what the monitor works with.

The algorithms it trains are plugins in `framework.algorithms`. Importing this
package imports none of these modules.
"""
