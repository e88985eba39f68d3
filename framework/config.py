"""Experiment configs: the schema (types, defaults, allowed values), YAML loading and `--set` overrides.

A config is a nested dict of plain values. `load_config` reads a YAML file with
`yaml.safe_load`, applies `key.path=value` overrides, fills in defaults and
checks every key against the schema; anything wrong raises `ConfigError`, whose
one-line message names the key path, the value given and what is allowed. The
`algorithm` section is checked against the schema of the algorithm it names
(see `framework.algorithms`).
"""
from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import yaml

from framework import algorithms

Config = dict[str, Any]


class ConfigError(ValueError):
    """A config file, key or value that cannot be used; the message is one line for the user."""


@dataclass(frozen=True)
class Field:
    """One config value: its kind, default and the values allowed.

    kind is one of "int", "float", "bool", "str", "int_list", "float_list",
    "str_list", "mapping" (free-form dict). `choices` restricts the value to a
    set, `low`/`high` bound numbers (and each item of a number list), `nullable`
    allows null, and `check` is a final test returning an error text or None.
    """

    kind: str
    default: Any
    choices: Sequence[Any] | None = None
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    nullable: bool = False
    check: Callable[[Any], str | None] | None = None

    def allowed(self) -> str:
        """What this field accepts, in words."""
        if self.choices is not None:
            text = "one of " + ", ".join(str(c) for c in self.choices)
        else:
            text = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
                    "int_list": "a list of integers", "float_list": "a list of numbers",
                    "str_list": "a list of strings", "mapping": "a mapping of keyword arguments"}[self.kind]
            bounds = []
            if self.low is not None:
                bounds.append(f"{'>' if self.low_open else '>='} {_num(self.low)}")
            if self.high is not None:
                bounds.append(f"<= {_num(self.high)}")
            if bounds:
                text += " " + " and ".join(bounds)
        return text + (" or null" if self.nullable else "")

    def validate(self, path: str, value: Any) -> Any:
        """Return the value converted to its kind, or raise ConfigError naming path and value."""
        if value is None:
            if self.nullable:
                return None
            raise _bad(path, value, self.allowed())
        converted = _convert(self.kind, value)
        if converted is _INVALID:
            raise _bad(path, value, self.allowed())
        if self.choices is not None and converted not in self.choices:
            raise _bad(path, value, self.allowed())
        items = converted if isinstance(converted, list) else [converted]
        if self.kind in ("int", "float", "int_list", "float_list"):
            for item in items:
                if not math.isfinite(item) or self._out_of_range(item):
                    raise _bad(path, value, self.allowed())
        if self.check is not None:
            problem = self.check(converted)
            if problem:
                raise _bad(path, value, problem)
        return converted

    def _out_of_range(self, x: float) -> bool:
        if self.low is not None and (x < self.low or (self.low_open and x == self.low)):
            return True
        return self.high is not None and x > self.high


_INVALID = object()
_FLOAT_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _bad(path: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f"config key '{path}': got {_short(value)}; allowed: {allowed}")


def _convert(kind: str, value: Any) -> Any:
    """value as the given kind, or _INVALID; ints pass as floats, and '1e-3' (YAML 1.1 leaves it a string) too."""
    if kind == "bool":
        return value if isinstance(value, bool) else _INVALID
    if kind == "int":
        return value if isinstance(value, int) and not isinstance(value, bool) else _INVALID
    if kind == "float":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str) and _FLOAT_TEXT.match(value.strip()):
            return float(value)
        return _INVALID
    if kind == "str":
        return value if isinstance(value, str) and value else _INVALID
    if kind == "mapping":
        ok = isinstance(value, dict) and all(isinstance(k, str) for k in value)
        return dict(value) if ok else _INVALID
    if kind.endswith("_list"):
        if not isinstance(value, list):
            return _INVALID
        items = [_convert(kind[:-5], item) for item in value]
        return _INVALID if any(i is _INVALID for i in items) else items
    raise AssertionError(f"unknown field kind {kind}")


def _check_device(value: str) -> str | None:
    if value == "cpu" or re.fullmatch(r"cuda:\d+", value):
        return None
    return "cpu or cuda:N (N a device index)"


def _check_name(value: str) -> str | None:
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", value):
        return None
    return "a name of letters, digits, '.', '_' and '-' (it prefixes the run directory)"


def _check_env_id(value: str) -> str | None:
    from framework.envs import env_id_problem  # gymnasium is imported only when a config is checked
    return env_id_problem(value)


SCHEMA: dict[str, Any] = {
    "experiment": Field("str", "a3c-cartpole", check=_check_name),
    "seed": Field("int", 0, low=0, high=2**31 - 1),
    "env": {
        "id": Field("str", "CartPole-v1", check=_check_env_id),
        "kwargs": Field("mapping", {}),
        "envs_per_worker": Field("int", 4, low=1, high=4096),
    },
    "model": {
        "hidden": Field("int_list", [128], low=1, high=65536),
        "activation": Field("str", "relu", choices=("relu", "tanh")),
        "lstm": Field("bool", False),
    },
    "optimizer": {
        "name": Field("str", "adam", choices=("adam", "rmsprop", "sgd")),
        "lr": Field("float", 0.001, low=0.0, low_open=True),
        "betas": Field("float_list", [0.9, 0.999], low=0.0, high=1.0,
                       check=lambda v: None if len(v) == 2 and max(v) < 1.0 else "two numbers in [0, 1)"),
        "eps": Field("float", 1e-8, low=0.0, low_open=True),
        "alpha": Field("float", 0.99, low=0.0, high=1.0),
        "momentum": Field("float", 0.0, low=0.0, high=1.0),
        "weight_decay": Field("float", 0.0, low=0.0),
        "lr_decay": Field("str", "none", choices=("none", "linear")),
        "lr_end_factor": Field("float", 0.0, low=0.0, high=1.0),
    },
    "trainer": {
        "workers": Field("int", 2, low=1, high=1024),
        "start_method": Field("str", "spawn", choices=("spawn", "forkserver", "fork")),
        "sharing_strategy": Field("str", "file_descriptor", choices=("file_descriptor", "file_system")),
        "device": Field("str", "cpu", check=_check_device),
        "total_steps": Field("int", 2_000_000, low=1),
        "max_seconds": Field("float", 300.0, low=0.0, low_open=True),
        "target_return": Field("float", 475.0, nullable=True),
        "target_window": Field("int", 100, low=1, high=100_000),
        "on_worker_failure": Field("str", "abort", choices=("abort", "restart")),
        "max_restarts": Field("int", 10, low=0),
        "checkpoint_every_s": Field("float", 60.0, low=0.0, low_open=True),
        "eval_every_s": Field("float", 0.0, low=0.0),
        "eval_episodes": Field("int", 10, low=1),
        "join_timeout_s": Field("float", 10.0, low=0.0, low_open=True),
    },
    "logging": {
        "logdir": Field("str", "runs"),
        "tensorboard": Field("bool", True),
        "progress": Field("bool", True),
        "log_every_s": Field("float", 1.0, low=0.0, low_open=True),
        "histogram_every": Field("int", 100, low=0),
        "hparams": Field("str_list", ["optimizer.name", "optimizer.lr", "algorithm.n_steps", "env.envs_per_worker",
                                      "trainer.workers", "model.hidden"]),
    },
}
"""The sections every config has; `algorithm` is added from the algorithm's own schema."""


def default_config(algorithm: str = "a3c") -> Config:
    """A complete config holding every default."""
    return validate({"algorithm": {"name": algorithm}})


def full_schema(algorithm_name: str) -> dict[str, Any]:
    """SCHEMA plus the `algorithm` section (and any extra sections) of the named algorithm."""
    algo = algorithms.get(algorithm_name)
    schema = dict(SCHEMA)
    schema.update(algo.extra_sections)
    schema["algorithm"] = {"name": Field("str", algorithm_name, choices=algorithms.names()), **algo.full_schema()}
    return schema


def validate(raw: Any) -> Config:
    """A complete, checked config from a raw (possibly partial) mapping; raises ConfigError."""
    if not isinstance(raw, dict):
        raise ConfigError(f"config: got {_short(raw)}; allowed: a mapping of sections "
                          f"({', '.join([*SCHEMA, 'algorithm'])})")
    section = raw.get("algorithm", {})
    name = section.get("name", "a3c") if isinstance(section, dict) else "a3c"
    if name not in algorithms.names():
        raise _bad("algorithm.name", name, "one of " + ", ".join(algorithms.names()))
    config = _validate_section(full_schema(name), raw, "")
    algorithms.get(name).check_config(config)
    _check_combinations(config)
    return config


def _validate_section(schema: Mapping[str, Any], raw: Any, prefix: str) -> Config:
    if not isinstance(raw, dict):
        raise _bad(prefix.rstrip("."), raw, "a mapping with keys " + ", ".join(schema))
    for key in raw:
        if key not in schema:
            raise ConfigError(f"config key '{prefix}{key}': unknown key; allowed here: " + ", ".join(schema))
    out: Config = {}
    for key, spec in schema.items():
        path = prefix + key
        if isinstance(spec, Field):
            out[key] = spec.validate(path, raw[key]) if key in raw else copy.deepcopy(spec.default)
        else:
            out[key] = _validate_section(spec, raw.get(key, {}), path + ".")
    return out


def _check_combinations(config: Config) -> None:
    for dotted in config["logging"]["hparams"]:
        try:
            value = get_path(config, dotted)
        except (KeyError, TypeError):
            value = {}
        if isinstance(value, dict):
            raise _bad("logging.hparams", dotted, "key paths of config values, e.g. optimizer.lr")
    trainer = config["trainer"]
    if trainer["device"].startswith("cuda") and trainer["start_method"] == "fork":
        raise ConfigError(f"config key 'trainer.start_method': got 'fork' with trainer.device "
                          f"'{trainer['device']}'; allowed: spawn or forkserver (CUDA cannot be used in a "
                          f"forked child)")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def read_yaml(path: str | Path) -> Any:
    """The parsed contents of a YAML file (safe loader only); ConfigError if missing or malformed."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file '{path}': not found; allowed: a path to a YAML file") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file '{path}': cannot be read ({type(exc).__name__}); "
                          f"allowed: a readable UTF-8 YAML file") from None
    try:
        data = yaml.safe_load(text)
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"config file '{path}'{where}: {exc.problem}; allowed: plain YAML values "
                          f"(Python tags are refused)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "malformed"
        raise ConfigError(f"config file '{path}'{where}: malformed YAML ({problem}); "
                          f"allowed: a YAML mapping of sections") from None
    return {} if data is None else data


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b=value` as (["a", "b"], value), the value parsed as a YAML scalar."""
    key, sep, value = text.partition("=")
    parts = key.strip().split(".")
    if not sep or not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p) for p in parts):
        raise ConfigError(f"--set {text!r}: not of the form key.path=value; allowed: e.g. "
                          f"--set optimizer.lr=0.0005")
    try:
        parsed = yaml.safe_load(value) if value.strip() else None
    except yaml.YAMLError:
        raise ConfigError(f"--set {text!r}: value {value!r} is not a YAML value; allowed: a number, "
                          f"true/false, null, a string or a [list]") from None
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
                raise ConfigError(f"--set {text!r}: '{'.'.join(parts[:i + 1])}' is a value, not a section; "
                                  f"allowed: a key path that ends at a value")
        node[parts[-1]] = value
    return out


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> Config:
    """Read, override, fill in and check a config file; raises ConfigError."""
    return validate(apply_overrides(read_yaml(path), overrides))


def dump_config(config: Config, path: str | Path) -> None:
    """Write a resolved config as YAML (the run directory's config.yaml)."""
    Path(path).write_text(yaml.safe_dump(config, sort_keys=False, default_flow_style=None))


def get_path(config: Config, dotted: str) -> Any:
    """config['a']['b'] for 'a.b'; KeyError if absent."""
    node: Any = config
    for part in dotted.split("."):
        node = node[part]
    return node
