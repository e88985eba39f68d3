"""The plugin interface between the trainer and a training algorithm.

The trainer owns processes, shared memory, monitoring and checkpoints; an
algorithm owns the model, the worker loop and evaluation:

- `build_model(config)` in the main process (the trainer then shares it),
- `build_optimizer(model, config)` (the default reads the `optimizer` section),
- `build_shared(config, context, ranks)` in the process that starts the
  workers of `ranks`: what each of them gets as `ctx.shared` (their shards of
  a dataset in shared memory, locks of the run's context),
- optionally `build_state(config)` in the main process: arrays of the
  plugin's own that the run carries across checkpoints and resumes (a second
  optimizer's moments, a learner's counters), in shared memory as
  `ctx.state`, saved in the checkpoint's `plugin` part and checked like the
  rest on resume,
- `run_worker(ctx)` in each worker process, until `ctx.stats.should_stop()`;
  a plugin whose run needs several kinds of process (actors and learners)
  declares them with `roles(config)`, each with its count and entry point;
  the process has `ctx.device` current, the shared model lives there and
  observations or batches move there (`framework.device.to_device`),
- `evaluate(model, config, episodes, seed)`, used by `evaluate --run` and, every
  `trainer.eval_every_s`, by the monitor (logged under `eval/`); episodes are
  bounded in steps and time (`EvaluationBounds`); an evaluation
  may stop the run (`Evaluation.stop`), and with `evaluate_at_end` the last
  one goes into summary.json as `evaluation`,
- `scalars(model, config)`: extra numbers about the shared model, logged with
  the monitor's scalars,
- optionally `record(model, config, episodes, seed, frames)`: the same
  greedy episodes, one after another, with each rendered frame sent to
  `frames` (`evaluate --record`, and `logging.video_every_s` in the monitor),
- optionally `actor(model, config)`: the trained model acting in its
  environment's spaces, as evaluation acts (`framework.train.load_policy`).
"""
from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, TypeVar

import numpy as np

from framework import nn, optim
from framework.runtime.run_stats import WorkerStats
from framework.runtime.schema import Config, Field

T = TypeVar("T")

FrameSink = Callable[[np.ndarray], bool]
"""Takes one rgb frame (height, width, 3) uint8 of a recording; returns False when it takes no more."""

DEFAULT_WINDOW = 100
"""Episodes in the window of recent returns that the monitor logs and summary.json reports."""

MLP_SCHEMA: dict[str, Field] = {
    "hidden": Field("int_list", [128], low=1, high=65536, doc="widths of the MLP body's layers"),
    "activation": Field("str", "relu", choices=("relu", "tanh"), doc="the MLP body's activation"),
}
"""The `model` keys of a plugin whose model is (or starts with) an MLP."""

COMMON_SCHEMA: dict[str, Field] = {
    "max_nonfinite_updates": Field("int", 100, low=1, high=10**9,
                                   doc="stop after this many non-finite updates in a row (none is ever applied)"),
}
"""`algorithm` keys every algorithm has: the run stops after this many non-finite updates in a row."""


@dataclass(frozen=True)
class Role:
    """One kind of process a run needs: `count` of them, each calling the plugin's method `entry` with its
    WorkerContext (A3C: `workers` processes that all run `run_worker`; an actor-learner plugin: actors and
    learners, each with its own entry point)."""

    name: str
    count: int
    entry: str = "run_worker"
    key: str = "trainer.workers"
    """The config key that sets count (named where a run's processes are refused: too many for the limits)."""
    central: bool = False
    """Its processes run together on one machine and learn from what the other roles' processes make, which only
    read the parameters (an actor-learner run's learners, fed by its actors): on the ray backend they run at
    `trainer.ray.learner_node`, the other roles spread over the nodes feeding them (`Algorithm.collect`,
    `Algorithm.deliver`)."""

    def __str__(self) -> str:
        """'16 actors', '1 learner'."""
        return f"{self.count} {self.name}{'s' if self.count != 1 else ''}"


@dataclass
class WorkerContext:
    """What a worker process gets: its rank and seed, the config, the shared model and optimizer, its stats row,
    and its role (the kind of process it is, and its index among that role's processes)."""

    rank: int
    seed: int
    config: Config
    model: nn.Module
    optimizer: Any
    stats: WorkerStats
    shared: Any = None
    state: dict[str, np.ndarray] = field(default_factory=dict)
    """The plugin's own arrays (`Algorithm.build_state`), in shared memory: every worker sees the same ones."""
    role: str = "worker"
    index: int = 0
    """This process's place among its role's processes (0 to that role's count - 1): for the one `worker`
    role, its rank."""

    @property
    def device(self) -> str:
        """Where the shared model lives and the worker computes: 'cpu' or 'cuda:N' (`trainer.device`)."""
        return self.config["trainer"]["device"]


@dataclass
class Evaluation:
    """Evaluation results: named numbers (logged as eval/<name>) and a line for the terminal."""

    metrics: dict[str, float]
    text: str
    stop: str | None = None
    """Set when the algorithm's own target was reached: the run stops with this as its stop reason."""


@dataclass(frozen=True)
class EvaluationBounds:
    """How far an evaluation goes: `max_steps` steps of each episode, `max_seconds` for the episodes played
    together (each one, where they are played one after another: a recording) (`trainer.eval_max_steps`,
    `trainer.eval_max_seconds`). An episode that never ends (an environment without a time limit) is cut there
    and counts its return so far."""

    max_steps: int
    max_seconds: float

    @classmethod
    def of(cls, config: Config) -> "EvaluationBounds":
        return cls(config["trainer"]["eval_max_steps"], config["trainer"]["eval_max_seconds"])

    def steps(self, stepping: Iterator[T]) -> Iterator[T]:
        """stepping's items until max_steps were taken or max_seconds have passed (the loop then ends early)."""
        deadline = time.monotonic() + self.max_seconds
        for taken, item in enumerate(stepping, 1):
            yield item
            if taken >= self.max_steps or time.monotonic() >= deadline:
                return


class Algorithm(abc.ABC):
    """A training algorithm the trainer can run; subclasses set the class attributes and the abstract methods."""

    name: str = ""
    schema: Mapping[str, Field] = {}
    """Keys of the `algorithm` section besides `name` (COMMON_SCHEMA is added)."""
    sections: Mapping[str, Any] = {}
    """Config sections this algorithm owns (e.g. `env`, `model`, `dataset`) and keys it adds to the core ones
    (e.g. `trainer.target_return`), as schema mappings merged into the core schema."""
    units: tuple[str, str] = ("env steps", "episodes")
    """What the run's step and episode counts are, as train's last line and progress bar name them (see
    `episodes_done`)."""
    hparams: tuple[str, ...] = ("optimizer.name", "optimizer.lr", "trainer.workers")
    """The default `logging.hparams`: config keys recorded as TensorBoard hparams."""
    metrics: tuple[str, ...] = ()
    """Names of the per-update numbers a worker reports with `stats.add_update`, logged as train/<name>."""
    counts: tuple[str, ...] = ()
    """Names of running totals the processes add to with `stats.add_count` (seconds waited, items dropped),
    logged as perf/<name>: the run's total so far (since its start or its resumption)."""
    evaluate_at_end: bool = False
    """Evaluate once more when the run ends and put the metrics into summary.json."""

    def full_schema(self) -> dict[str, Field]:
        """This algorithm's `algorithm` section keys, the common ones included."""
        return {**COMMON_SCHEMA, **self.schema}

    def check_config(self, config: Config) -> None:
        """Cross-key checks beyond the schema; raise ConfigError. Default: none."""

    def default_experiment(self, config: Config) -> str:
        """The `experiment` of a config that sets none (the run directory's prefix): what it trains on."""
        return self.name

    def episodes_done(self, config: Config, steps: int, episodes: int) -> float:
        """The run's count in `units[1]` after `steps` steps and `episodes` episodes. Default: the episodes."""
        return episodes

    def window(self, config: Config) -> int:
        """Episodes in the window of recent returns (logged, in summary.json, and the stopping criterion)."""
        return DEFAULT_WINDOW

    def target_return(self, config: Config) -> float | None:
        """Stop once the window's mean return reaches this; None (the default): never."""
        return None

    @abc.abstractmethod
    def build_model(self, config: Config) -> nn.Module:
        """A freshly initialised model for config, on the CPU (the trainer moves it to trainer.device, shares it)."""

    def build_optimizer(self, model: nn.Module, config: Config) -> Any:
        """The optimizer named in the `optimizer` section over the model's parameters."""
        return build_optimizer(model, config["optimizer"])

    def roles(self, config: Config) -> tuple[Role, ...]:
        """The kinds of process the run needs, in rank order: the ranks of the first role come first. Each
        process gets its row of the run statistics, its seed and its restarts as a worker does, and runs the
        method its role names. The local backend starts them; the ray backend spreads the first role
        (`trainer.workers` processes) over its nodes and runs central roles at one node, and refuses a plugin with
        another role. Default: `trainer.workers` processes that run `run_worker`."""
        return (Role("worker", config["trainer"]["workers"]),)

    def build_state(self, config: Config) -> dict[str, np.ndarray]:
        """Arrays of this plugin's own that a run carries across checkpoints and resumes, freshly initialised (a
        second optimizer's moments, a learner's counters; numeric, host arrays). The trainer moves them into
        shared memory, hands them to every worker as `ctx.state` (lock-free, as the parameters), saves them in
        the checkpoint's `plugin` part, and on resume restores the saved ones once their names, shapes and
        dtypes are these. The local backend carries them; a run on the ray backend is refused. Default: none."""
        return {}

    def build_shared(self, config: Config, context: Any, ranks: range) -> Any:
        """What the workers of `ranks` (all of the run's, or a Ray node's part) get as ctx.shared, made once with
        their multiprocessing context. Default: None."""
        return None

    def collect(self, config: Config, shared: Any, stopping: Callable[[], bool]) -> Any:
        """On a Ray node that feeds a central role: the next batch of what the node's processes made (an
        actor-learner run's trajectories), taken out of `shared` (build_shared's, for the node's ranks) as NumPy
        arrays, waiting a bounded time; None when there was none or stopping() became true. A plugin with a
        central role implements it and `deliver`."""
        raise NotImplementedError(f"algorithm {self.name} has no central role: nothing to collect")

    def deliver(self, config: Config, shared: Any, batch: Any, stopping: Callable[[], bool]) -> tuple[int, int]:
        """At the central role's node: a batch `collect` gave on another node into `shared` (build_shared's, for
        the central ranks); (items stored, items dropped to make room)."""
        raise NotImplementedError(f"algorithm {self.name} has no central role: nothing to deliver")

    @abc.abstractmethod
    def run_worker(self, ctx: WorkerContext) -> None:
        """Train on ctx.model with ctx.optimizer until ctx.stats.should_stop(); runs in a worker process."""

    @abc.abstractmethod
    def evaluate(self, model: nn.Module, config: Config, episodes: int, seed: int) -> Evaluation:
        """Measure the model (greedy episodes, test accuracy, ...) in the calling process, on the model's device."""

    def scalars(self, model: nn.Module, config: Config) -> dict[str, float]:
        """Numbers about the shared model that the monitor logs with each interval's scalars (TensorBoard
        tag -> value), e.g. running statistics it carries. Default: none."""
        return {}

    def record(self, model: nn.Module, config: Config, episodes: int, seed: int, frames: FrameSink) -> Evaluation:
        """`evaluate`'s greedy episodes played one after another, each rendered frame (from each reset to each
        last step) sent to frames; the play ends early where frames returns False (the cut episode counts as far
        as it went). Only algorithms with environments implement it (see can_record)."""
        raise NotImplementedError(f"algorithm {self.name} has no environment to record")

    def can_record(self) -> bool:
        """Whether this algorithm implements `record`."""
        return type(self).record is not Algorithm.record

    def actor(self, model: nn.Module, config: Config) -> Any:
        """What acts with a trained model in its environment, the way `evaluate` does: `observation_space`,
        `action_space`, `encode`, `act(batch, state, deterministic)`, `initial_state`, `named_arrays`,
        `normalization_settings` (see rl.actor); `framework.train.Policy` wraps it. Only algorithms with
        environments implement it (see can_act)."""
        raise NotImplementedError(f"algorithm {self.name} has no environment to act in")

    def can_act(self) -> bool:
        """Whether this algorithm implements `actor`."""
        return type(self).actor is not Algorithm.actor


def build_optimizer(model: nn.Module, section: Mapping[str, Any]) -> Any:
    """optim.Adam / RMSprop / RMSpropTFLike / SGD over model.parameters() from an `optimizer` config section."""
    params = list(model.parameters())
    name = section["name"]
    if name == "adam":
        return optim.Adam(params, lr=section["lr"], betas=tuple(section["betas"]), eps=section["eps"],
                          weight_decay=section["weight_decay"])
    if name in ("rmsprop", "rmsprop_tf_like"):
        kind = optim.RMSprop if name == "rmsprop" else optim.RMSpropTFLike
        return kind(params, lr=section["lr"], alpha=section["alpha"], eps=section["eps"],
                    momentum=section["momentum"], weight_decay=section["weight_decay"])
    return optim.SGD(params, lr=section["lr"], momentum=section["momentum"], weight_decay=section["weight_decay"])


def learning_rate(section: Mapping[str, Any], steps: int, total_steps: int) -> float:
    """The lr after `steps` of `total_steps`: constant, or linear from lr to lr * lr_end_factor."""
    if section["lr_decay"] == "none":
        return section["lr"]
    progress = min(1.0, steps / total_steps)
    return section["lr"] * (1.0 - (1.0 - section["lr_end_factor"]) * progress)
