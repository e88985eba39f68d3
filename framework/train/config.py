"""Experiment configs: the core schema, YAML loading, `--set` overrides and the run directory's config.yaml.

A config is a nested dict of plain values. `load_config` reads a YAML file with
the bounded safe loader of `yaml_input` (or takes a mapping, from Python), applies `key.path=value` overrides, fills in defaults and
checks every key; anything wrong raises `ConfigError`, whose one-line message
names the key path, the value given and what is allowed.

The core schema holds what every run has: experiment, seed, optimizer,
trainer, logging. The algorithm a config names (`algorithm.name`, see
`framework.algorithms`) brings its own sections (`env` and `model` for A3C,
`dataset` for Hogwild), its `algorithm` keys, keys it adds to core sections
(A3C's `trainer.target_return`) and the defaults it prefers (`logging.hparams`,
and `experiment`, named after what it trains on: a3c-cartpole-v1).
"""
from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import yaml

from framework import algorithms
from framework.train import backends, video, yaml_input
from framework.runtime.schema import (MAX_TEXT, Config, ConfigError, Field, bad_value, check_known_keys,
                                     merge_schemas, printable, short_repr, validate_section)


def _check_device(value: str) -> str | None:
    if value == "cpu" or re.fullmatch(r"cuda:\d+", value):
        return None
    return "cpu or cuda:N (N a device index)"


MAX_NAME = 200
"""Characters of `experiment`: the run directory's name adds 20 to it, and a name may have 255."""


def _check_name(value: str) -> str | None:
    if len(value) <= MAX_NAME and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", value):
        return None
    return f"a name of letters, digits, '.', '_' and '-', at most {MAX_NAME} (it prefixes the run directory)"


def experiment_name(text: str) -> str:
    """text made a valid `experiment`: lower case, every run of other characters than letters, digits, '.', '_'
    and '-' one '-' (ALE/Pong-v5 -> ale-pong-v5), at most MAX_NAME characters."""
    name = re.sub(r"[^a-z0-9_.-]+", "-", text.lower()).strip("-._")[:MAX_NAME]
    return name or "run"


def _check_address(value: str) -> str | None:
    if value == "auto" or re.fullmatch(r"(ray://)?[A-Za-z0-9_.\[\]:-]+:\d{1,5}", value):
        return None
    return "null (start a local Ray), auto (join the cluster of this machine) or HOST:PORT / ray://HOST:PORT"


MAX_SECONDS = 1e9
"""Durations and intervals (about 31 years): longer means never, and it fits sleep and thread timeouts."""
MAX_JOIN_TIMEOUT_S = 86_400.0
"""`trainer.join_timeout_s`: joining a process waits in poll(), whose timeout (ms) must fit a C int (24.8 days)."""
MAX_STEPS = 2**62
"""Step and update counts: int64 counters, summed over workers, must not overflow."""
MAX_WORKERS = 1024
MAX_RESTARTS = 1_000_000
MAX_EVAL_EPISODES = 10_000
"""Episodes of one evaluation: an algorithm may run them all at once (A3C steps one environment per episode)."""
MAX_VIDEO_FRAMES = 10_000
"""Frames of one video of `logging.video_every_s`: a GIF holds them until it is written (240 kB a CartPole frame)."""


CORE_SCHEMA: dict[str, Any] = {
    "experiment": Field("str", "run", check=_check_name,
                        doc=f"run directory prefix: letters, digits, '.', '_' and '-', at most {MAX_NAME} "
                            f"characters; left out, the run is named after what it trains on (`a3c-cartpole-v1`)"),
    "seed": Field("int", 0, low=0, high=2**31 - 1,
                  doc="base seed; each worker start gets its own seed derived from it, its rank and its restart "
                      "count"),
    "optimizer": {
        "name": Field("str", "adam", choices=("adam", "rmsprop", "rmsprop_tf_like", "sgd"),
                      doc="`adam`, `rmsprop` (torch's), `rmsprop_tf_like` (TensorFlow's, as Stable-Baselines3's "
                          "RMSpropTFLike: eps inside the square root, the running average starting at 1, so the "
                          "first steps are not 10 x lr whatever the gradient; the Atari configs use it) or `sgd`"),
        "lr": Field("float", 0.001, low=0.0, low_open=True, doc="learning rate"),
        "betas": Field("float_list", [0.9, 0.999], low=0.0, high=1.0,
                       check=lambda v: None if len(v) == 2 and max(v) < 1.0 else "two numbers in [0, 1)",
                       doc="Adam's decay rates of its running averages of the gradient and of its square"),
        "eps": Field("float", 1e-8, low=0.0, low_open=True,
                     doc="added to the denominator of Adam's and RMSprop's steps"),
        "alpha": Field("float", 0.99, low=0.0, high=1.0,
                       doc="RMSprop's decay rate of its running average of the squared gradient"),
        "momentum": Field("float", 0.0, low=0.0, high=1.0, doc="momentum of SGD and RMSprop"),
        "weight_decay": Field("float", 0.0, low=0.0, doc="L2 penalty, added to the gradient"),
        "lr_decay": Field("str", "none", choices=("none", "linear"),
                          doc="`linear`: lr falls to `lr * lr_end_factor` at `trainer.total_steps`; `none`: it "
                              "stays"),
        "lr_end_factor": Field("float", 0.0, low=0.0, high=1.0,
                               doc="the share of `lr` that `lr_decay: linear` ends at"),
    },
    "trainer": {
        "workers": Field("int", 2, low=1, high=MAX_WORKERS,
                         doc="worker processes (an actor-learner run's actors)"),
        "start_method": Field("str", "spawn", choices=("spawn", "forkserver", "fork"),
                              doc="how worker processes start (`fork` is refused with a CUDA device)"),
        "sharing_strategy": Field("str", "file_descriptor", choices=("file_descriptor", "file_system"),
                                  doc="how shared memory travels between processes (see `sharing`)"),
        "device": Field("str", "cpu", check=_check_device,
                        doc="where the shared model lives and workers compute: `cpu` or `cuda:N`"),
        "backend": Field("str", "local", choices=backends.names(),
                         doc="where the workers run: `local` (processes on this machine) or `ray` (see "
                             "[Several machines](ray.md))"),
        "total_steps": Field("int", 2_000_000, low=1, high=MAX_STEPS,
                             doc="budget in env steps (Hogwild: samples); workers start no rollout once the run's "
                                 "steps reach it, so a run ends at most one rollout per worker past it "
                                 "(`workers x envs_per_worker x n_steps`; Hogwild: one batch per worker)"),
        "max_seconds": Field("float", 300.0, low=0.0, low_open=True, high=MAX_SECONDS,
                             doc="budget in wall seconds, counted across resumes"),
        "on_worker_failure": Field("str", "abort", choices=("abort", "restart"),
                                   doc="what a worker that raises or dies does to the run: end it, or be "
                                       "restarted"),
        "max_restarts": Field("int", 10, low=0, high=MAX_RESTARTS,
                              doc="with `on_worker_failure: restart`, the restarts a run allows in all"),
        "checkpoint_every_s": Field("float", 60.0, low=0.0, low_open=True, high=MAX_SECONDS,
                                    doc="seconds between checkpoints (one is always written at the end)"),
        "eval_every_s": Field("float", 0.0, low=0.0, high=MAX_SECONDS,
                              doc="the main process evaluates the shared model this often, logged as `eval/*` "
                                  "(0: never)"),
        "keep_best": Field("bool", False,
                           doc="keep `checkpoints/best.npz`, the parameters of the evaluation with the highest mean "
                               "return (needs `eval_every_s > 0`; see [the best checkpoint]"
                               "(python-api.md#the-best-checkpoint))"),
        "eval_episodes": Field("int", 10, low=1, high=MAX_EVAL_EPISODES,
                               doc="episodes of each of the run's evaluations"),
        "eval_max_steps": Field("int", 100_000, low=1, high=MAX_STEPS,
                                doc="steps of an evaluation episode at most (also `evaluate`'s default): one "
                                    "that never ends is cut there and counts its return so far"),
        "eval_max_seconds": Field("float", 60.0, low=0.0, low_open=True, high=MAX_SECONDS,
                                  doc="seconds of an evaluation's episodes, played together, at most (also "
                                      "`evaluate`'s default)"),
        "join_timeout_s": Field("float", 10.0, low=0.0, low_open=True, high=MAX_JOIN_TIMEOUT_S,
                                doc="how long stopping workers may take before they are terminated"),
        "compile": Field("bool", True,
                         doc="workers run their step through `framework.compile` (captured once, replayed as "
                             "array code); `false` runs it eagerly"),
        "ray": {
            "address": Field("str", None, nullable=True, check=_check_address,
                             doc="the ray backend's cluster: `null` starts a local Ray of `nodes` simulated nodes, "
                                 "`auto` joins the cluster of this machine, `HOST:PORT` or `ray://HOST:PORT` "
                                 "another"),
            "nodes": Field("int", 2, low=1, high=MAX_WORKERS,
                           doc="node groups, one per Ray node; `trainer.workers` must be `nodes x "
                               "workers_per_node`"),
            "workers_per_node": Field("int", 2, low=1, high=MAX_WORKERS, doc="worker processes of each node group"),
            "sync_every_s": Field("float", 0.05, low=0.0, low_open=True, high=3600.0,
                                  doc="how often a node exchanges parameters with the parameter server"),
            "timeout_s": Field("float", 10.0, low=0.0, low_open=True, high=3600.0,
                               doc="how long an exchange (or a node's silence) may last before the node counts as "
                                   "lost"),
            "learner_node": Field("str", None, nullable=True,
                                  doc="where an actor-learner run's learners run: `null` the head node, or a node's "
                                      "id or IP address (its actors run on the `nodes` nodes with a CPU)"),
        },
    },
    "logging": {
        "logdir": Field("str", "runs", doc="parent of run directories (`--logdir` overrides it)"),
        "tensorboard": Field("bool", True, doc="write TensorBoard event files into the run directory"),
        "progress": Field("bool", True,
                          doc="a tqdm progress bar on stderr when it is a terminal (in a Jupyter notebook, tqdm's "
                              "notebook bar), and `run()`'s outcome line"),
        "log_every_s": Field("float", 1.0, low=0.0, low_open=True, high=MAX_SECONDS,
                             doc="seconds between logged scalars"),
        "histogram_every": Field("int", 100, low=0, high=MAX_STEPS,
                                 doc="parameter histograms every this many updates (0: never)"),
        "hparams": Field("str_list", ["optimizer.name", "optimizer.lr", "trainer.workers"],
                         doc="config keys recorded as TensorBoard hparams next to the final return"),
        "video_every_s": Field("float", 0.0, low=0.0, high=MAX_SECONDS,
                               doc="record one greedy episode this often into `videos/` and TensorBoard (0: never; "
                                   "see [Watching the agent](monitoring.md#watching-the-agent))"),
        "video_max_frames": Field("int", 1000, low=1, high=MAX_VIDEO_FRAMES,
                                  doc="frames of one recorded episode at most"),
        # trackers beyond TensorBoard (framework.train.trackers), each on once one of its keys is set
        "mlflow": {
            "tracking_uri": Field("str", None, nullable=True,
                                  doc="send the run to this MLflow tracking server too ([MLflow and W&B]"
                                      "(monitoring.md#mlflow-and-weights--biases))"),
            "experiment": Field("str", None, nullable=True,
                                doc="the MLflow experiment the run goes into; either key sends the run to MLflow"),
        },
        "wandb": {
            "project": Field("str", None, nullable=True,
                             doc="send the run to this Weights & Biases project too; any key of this section does"),
            "entity": Field("str", None, nullable=True, doc="the W&B user or team that owns the project"),
            "mode": Field("str", None, nullable=True, choices=("online", "offline", "disabled"),
                          doc="W&B's mode (`null`: W&B's own default)"),
            "group": Field("str", None, nullable=True, doc="the W&B group the run joins"),
            "tags": Field("str_list", [], doc="W&B tags of the run"),
        },
    },
}
"""The sections every config has, whatever its algorithm; the algorithm adds its own (see full_schema)."""

LEGACY_KEYS: dict[str, Callable[[Any], bool]] = {
    "env": lambda value: True,
    "model.lstm": lambda value: value is False,
    "trainer.target_return": lambda value: True,
    "trainer.target_window": lambda value: True,
}
"""Keys that were core before the algorithms owned their sections, each with the values that every algorithm
accepted and the ones that do not own the key ignored: such a key is dropped (see drop_legacy_keys)."""


def _check_algorithm_name(value: str) -> str | None:
    if value in algorithms.names() or algorithms.is_spec(value):
        return None
    return "one of " + ", ".join(algorithms.names()) + ", or module:PluginClass"


ALGORITHM_NAME = Field("str", "a3c", check=_check_algorithm_name,
                       doc="the algorithm plugin: " + ", ".join(f"`{n}`" for n in algorithms.names())
                           + ", or `module:PluginClass` (your own, see [models.md](models.md)); it brings its own "
                           "sections and `algorithm` keys")
"""`algorithm.name`, which picks the rest of the schema (see full_schema)."""


def default_config(algorithm: str = "a3c") -> Config:
    """A complete config of the named algorithm holding every default."""
    return validate({"algorithm": {"name": algorithm}})


def full_schema(algorithm_name: str) -> dict[str, Any]:
    """CORE_SCHEMA with the named algorithm's sections, its `algorithm` keys and its preferred defaults.

    Sections come in the order a config.yaml shows them: experiment, seed, the
    algorithm's own sections, algorithm, then optimizer, trainer and logging.
    """
    algo = algorithms.get(algorithm_name)
    merged = merge_schemas(CORE_SCHEMA, algo.sections)
    schema: dict[str, Any] = {"experiment": dataclasses.replace(merged.pop("experiment"), default=algo.name),
                              "seed": merged.pop("seed")}
    schema.update({name: spec for name, spec in merged.items() if name not in CORE_SCHEMA})
    schema["algorithm"] = {"name": dataclasses.replace(ALGORITHM_NAME, default=algorithm_name),
                           **algo.full_schema()}
    schema.update({name: spec for name, spec in merged.items() if name in CORE_SCHEMA})
    hparams = dataclasses.replace(schema["logging"]["hparams"], default=list(algo.hparams))
    schema["logging"] = {**schema["logging"], "hparams": hparams}
    return schema




def _algorithm_name(raw: Any) -> str:
    """The config's algorithm.name; for module:PluginClass, only once the core keys it holds are valid (the
    plugin's module is imported next, as its schema is needed to check the rest)."""
    section = raw.get("algorithm", {}) if isinstance(raw, dict) else {}
    name = section.get("name", "a3c") if isinstance(section, dict) else "a3c"
    problem = _check_algorithm_name(name) if isinstance(name, str) else "a string"
    if problem:
        raise bad_value("algorithm.name", name, problem)
    if algorithms.is_spec(name):
        check_known_keys(CORE_SCHEMA, raw)
    return name


def validate(raw: Any) -> Config:
    """A complete, checked config from a raw (possibly partial) mapping; raises ConfigError.

    Nothing the config names is imported before every key that can be checked without an import is (see
    framework.runtime.user_code): the schema's checks of env.id and model.factory are of their form only;
    the env's and the factory's modules are imported by the algorithm's check_config, after the schema.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"config: got {short_repr(raw)}; allowed: a mapping of sections "
                          f"({', '.join([*CORE_SCHEMA, 'algorithm', '...'])})")
    name = _algorithm_name(raw)
    config = validate_section(full_schema(name), drop_legacy_keys(raw))
    algorithms.get(name).check_config(config)
    if "experiment" not in raw:  # named after what it trains on (config.yaml keeps the name: resumes keep it)
        config["experiment"] = experiment_name(algorithms.get(name).default_experiment(config))
    _check_combinations(config)
    return config


def drop_legacy_keys(raw: Any) -> Any:
    """raw without the LEGACY_KEYS its algorithm does not own, where they hold a value that was ignored.

    Every config.yaml that `train` wrote before the algorithms owned their
    sections holds all of them (resolved defaults), and configs written for
    those versions may set them; they keep working, with the same meaning.
    """
    if not isinstance(raw, dict):
        return raw
    schema = full_schema(_algorithm_name(raw))
    out = copy.deepcopy(raw)
    for dotted, ignored in LEGACY_KEYS.items():
        *parents, key = dotted.split(".")
        node, owner = out, schema
        for part in parents:
            node, owner = node.get(part), owner.get(part, {})
            if not isinstance(node, dict):
                break
        else:
            if key in node and key not in owner and ignored(node[key]):
                del node[key]
    return out


def _check_combinations(config: Config) -> None:
    for dotted in config["logging"]["hparams"]:
        try:
            value = get_path(config, dotted)
        except (KeyError, TypeError):
            value = {}
        if isinstance(value, dict):
            raise bad_value("logging.hparams", dotted, "key paths of config values, e.g. optimizer.lr")
    _check_video(config)
    trainer = config["trainer"]
    _check_keep_best(config)
    if trainer["backend"] == "ray":
        ray = trainer["ray"]
        total = ray["nodes"] * ray["workers_per_node"]
        if trainer["workers"] != total:
            raise ConfigError(f"config key 'trainer.workers': got {trainer['workers']} with trainer.backend ray; "
                              f"allowed: {total}, trainer.ray.nodes ({ray['nodes']}) times "
                              f"trainer.ray.workers_per_node ({ray['workers_per_node']})")
        if trainer["device"] != "cpu":
            raise ConfigError(f"config key 'trainer.device': got {trainer['device']!r} with trainer.backend ray; "
                              f"allowed: cpu (the ray backend exchanges parameters in host memory)")
    if trainer["device"].startswith("cuda") and trainer["start_method"] == "fork":
        raise ConfigError(f"config key 'trainer.start_method': got 'fork' with trainer.device "
                          f"'{trainer['device']}'; allowed: spawn or forkserver (CUDA cannot be used in a "
                          f"forked child)")


def _check_keep_best(config: Config) -> None:
    """trainer.keep_best needs periodic evaluations of a mean return: an algorithm that plays an environment."""
    trainer = config["trainer"]
    if not trainer["keep_best"]:
        return
    algorithm = algorithms.get(config["algorithm"]["name"])
    if not algorithm.can_act():
        raise ConfigError(f"config key 'trainer.keep_best': got true; allowed: false for algorithm {algorithm.name}, "
                          f"whose evaluations have no mean return")
    if trainer["eval_every_s"] == 0:
        raise ConfigError("config key 'trainer.keep_best': got true with trainer.eval_every_s 0 (no evaluation); "
                          "allowed: false, or set trainer.eval_every_s > 0")


def _check_video(config: Config) -> None:
    """Videos (logging.video_every_s > 0) need an algorithm that plays an environment, and the video extra."""
    every = config["logging"]["video_every_s"]
    if every == 0:
        return
    algorithm = algorithms.get(config["algorithm"]["name"])
    if not algorithm.can_record():
        raise ConfigError(f"config key 'logging.video_every_s': got {every:g}; allowed: 0 for algorithm "
                          f"{algorithm.name}, which plays no environment to record")
    missing = video.missing_extra()
    if missing:
        raise ConfigError(f"config key 'logging.video_every_s': got {every:g}, but {missing}; or set it to 0")


def read_yaml(path: str | Path) -> Any:
    """The parsed contents of a YAML file (safe, bounded: see yaml_input); ConfigError if missing or refused."""
    return yaml_input.read_file(path)


def _shown(text: str) -> str:
    return printable(repr(text), limit=200)


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b=value` as (["a", "b"], value), the value parsed as YAML (with the bounds of yaml_input)."""
    key, sep, value = text.partition("=")
    parts = key.strip().split(".")
    if not sep or len(key) > MAX_TEXT or not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p) for p in parts):
        raise ConfigError(f"--set {_shown(text)}: not of the form key.path=value; allowed: e.g. "
                          f"--set optimizer.lr=0.0005")
    if len(value) > yaml_input.MAX_BYTES:
        raise ConfigError(f"--set {_shown(text)}: a value of {len(value)} characters; allowed: at most "
                          f"{yaml_input.MAX_BYTES}")
    try:
        parsed = yaml_input.parse(value) if value.strip() else None
    except yaml_input.Refused as exc:
        raise ConfigError(f"--set {_shown(text)}: {exc.problem}; allowed: {exc.allowed}") from None
    except yaml.YAMLError:
        raise ConfigError(f"--set {_shown(text)}: value {short_repr(value)} is not a YAML value; allowed: a "
                          f"number, true/false, null, a string or a [list]") from None
    return parts, parsed


def apply_overrides(raw: Any, overrides: Sequence[str]) -> Any:
    """A copy of raw with each `key.path=value` override set (sections created as needed)."""
    out = copy.deepcopy(raw)
    if not isinstance(out, dict):
        return out  # validate() reports a file that is not a mapping
    for text in overrides:
        parts, value = parse_override(text)
        node = out
        for i, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {_shown(text)}: '{'.'.join(parts[:i + 1])}' is a value, not a section; "
                                  f"allowed: a key path that ends at a value")
        node[parts[-1]] = value
    return out


def load_config(source: str | Path | Mapping[str, Any], overrides: Sequence[str] = ()) -> Config:
    """Read (a YAML file's path) or take (a mapping: a config as a YAML file would hold it, or a checked one),
    override, fill in and check a config; raises ConfigError. A run pointed at another environment by an
    override is named after it (`named_after_its_env`)."""
    raw = read_yaml(source) if isinstance(source, (str, Path)) else source
    return validate(named_after_its_env(raw, apply_overrides(raw, overrides), overrides))


def _env_task(raw: Any) -> tuple[str, ...]:
    """The environment a raw config trains on, as a run name ends with it: its id without namespace, with and
    without its version (CartPole-v1: cartpole-v1, cartpole; ALE/Pong-v5: pong-v5, pong; for hogshare/Atari-v0,
    its game's); () without one."""
    env = raw.get("env") if isinstance(raw, dict) else None
    env_id = env.get("id") if isinstance(env, dict) else None
    game = (env.get("kwargs") or {}).get("game") if isinstance(env, dict) and isinstance(env.get("kwargs"), dict) \
        else None
    env_id = game if env_id == "hogshare/Atari-v0" and isinstance(game, str) else env_id
    if not isinstance(env_id, str):
        return ()
    name = env_id.rpartition(":")[2].rpartition("/")[2]
    return experiment_name(name), experiment_name(re.sub(r"-v\d+$", "", name))


def named_after_its_env(raw: Any, overridden: Any, overrides: Sequence[str]) -> Any:
    """overridden (raw with overrides applied) without its `experiment` where the overrides point the run at
    another environment than raw's and raw's experiment names raw's environment (it ends with it:
    a3c-cartpole for CartPole-v1), unless an override sets experiment too: validate then names the run after
    the new one (a3c-acrobot-v1). A name that does not name the config's environment is kept."""
    keys = {parse_override(text)[0][0] for text in overrides}
    task = _env_task(raw)
    experiment = raw.get("experiment") if isinstance(raw, dict) else None
    if "env" not in keys or "experiment" in keys or not isinstance(experiment, str) or _env_task(overridden) == task:
        return overridden
    name = experiment_name(experiment)
    if not any(name == t or name.endswith("-" + t) for t in task):
        return overridden
    return {key: value for key, value in overridden.items() if key != "experiment"}


def string_override(key: str, value: str) -> str:
    """The `key=value` override that sets value as a string, whatever YAML would make of it ('runs #2', 'yes')."""
    return f"{key}=" + yaml.safe_dump(value, default_style='"').strip()


def config_text(config: Config) -> str:
    """A resolved config as YAML text (what the run directory's config.yaml holds)."""
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=None)


def get_path(config: Config, dotted: str) -> Any:
    """config['a']['b'] for 'a.b'; KeyError if absent."""
    node: Any = config
    for part in dotted.split("."):
        node = node[part]
    return node
