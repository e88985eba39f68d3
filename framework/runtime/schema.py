"""The config schema: `Field` (a value's kind, default and allowed values), `ConfigError`, and validation.

A schema is a nested mapping of section names to `Field`s. `validate_section`
checks a raw mapping against one and fills in defaults; every problem raises
`ConfigError` with a one-line message naming the key path, the value given and
what is allowed. This module imports nothing else of the project, so the
algorithm plugins can declare their sections with it.

Whatever a raw config holds, validating it takes bounded time and memory and
its message stays one short line: strings, lists and free-form mappings have
size limits, integers must fit int64, and values are shown by `short_repr`,
which never builds the full repr of a big value (a list that aliases itself a
million times over, an integer of 5000 digits).
"""
from __future__ import annotations

import copy
import math
import re
import reprlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

Config = dict[str, Any]
"""A config: a nested dict of plain values, sections to keys to values, as config.yaml holds it (the one
definition of the type; `framework.train.config` checks and fills it in)."""


MAX_TEXT = 4096
"""Characters in a string value (PATH_MAX: a path may be this long)."""
MAX_ITEMS = 1024
"""Items in a list value."""
MAX_MAPPING_VALUES = 10_000
"""Values (nested ones included) in a free-form mapping such as `env.kwargs`."""
MAX_MAPPING_DEPTH = 16
"""Nesting levels in a free-form mapping."""
INT64_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A config file, key or value that cannot be used; the message is one line for the user."""


@dataclass(frozen=True)
class Field:
    """One config value: its kind, default, the values allowed and what it does.

    kind is one of "int", "float", "bool", "str", "int_list", "float_list",
    "str_list", "mapping" (free-form dict). `choices` restricts the value to a
    set, `low`/`high` bound numbers (and each item of a number list), `nullable`
    allows null, and `check` is a final test returning an error text or None.
    `doc` says in a line what the value does (cleanrl's docstring on every
    knob): the configuration reference, docs/configuration.md, is generated
    from it (`framework.train.config_reference`).
    """

    kind: str
    default: Any
    choices: Sequence[Any] | None = None
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    nullable: bool = False
    check: Callable[[Any], str | None] | None = None
    doc: str = ""

    def allowed(self) -> str:
        """What this field accepts, in words."""
        if self.choices is not None:
            text = "one of " + ", ".join(str(c) for c in self.choices)
        else:
            text = {"int": "an integer", "float": "a number", "bool": "true or false",
                    "str": f"a string of at most {MAX_TEXT} characters", "int_list": "a list of integers",
                    "float_list": "a list of numbers", "str_list": "a list of strings",
                    "mapping": f"a mapping of keyword arguments (plain values, at most {MAX_MAPPING_VALUES} in "
                               f"all, nested at most {MAX_MAPPING_DEPTH} deep)"}[self.kind]
            bounds = []
            if self.low is not None:
                bounds.append(f"{'>' if self.low_open else '>='} {_num(self.low)}")
            high = INT64_MAX if self.high is None and self.kind in ("int", "int_list") else self.high
            if high is not None:
                bounds.append(f"<= {_num(high)}")
            if bounds:
                text += " " + " and ".join(bounds)
            if self.kind.endswith("_list"):
                text += f" (at most {MAX_ITEMS} items)"
        return text + (" or null" if self.nullable else "")

    def validate(self, path: str, value: Any) -> Any:
        """Return the value converted to its kind, or raise ConfigError naming path and value."""
        if value is None:
            if self.nullable:
                return None
            raise bad_value(path, value, self.allowed())
        converted = _convert(self.kind, value)
        if converted is _INVALID:
            raise bad_value(path, value, self.allowed())
        if self.choices is not None and converted not in self.choices:
            raise bad_value(path, value, self.allowed())
        items = converted if isinstance(converted, list) else [converted]
        if self.kind in ("int", "float", "int_list", "float_list"):
            for item in items:
                if self._out_of_range(item) or not math.isfinite(item):
                    raise bad_value(path, value, self.allowed())
        if self.check is not None:
            problem = self.check(converted)
            if problem:
                raise bad_value(path, value, problem)
        return converted

    def _out_of_range(self, x: float) -> bool:
        if isinstance(x, int) and abs(x) > INT64_MAX:
            return True
        if self.low is not None and (x < self.low or (self.low_open and x == self.low)):
            return True
        return self.high is not None and x > self.high


_INVALID = object()
_FLOAT_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def bad_value(path: str, value: Any, allowed: str) -> ConfigError:
    """The ConfigError for `value` at key `path`, with what is allowed there."""
    return ConfigError(f"config key '{printable(path)}': got {short_repr(value)}; allowed: {allowed}")


def _convert(kind: str, value: Any) -> Any:
    """value as the given kind, or _INVALID; ints pass as floats, and '1e-3' (YAML 1.1 leaves it a string) too."""
    if kind == "bool":
        return value if isinstance(value, bool) else _INVALID
    if kind == "int":
        return value if isinstance(value, int) and not isinstance(value, bool) else _INVALID
    if kind == "float":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value) if not isinstance(value, int) or abs(value) <= INT64_MAX else _INVALID
        if isinstance(value, str) and len(value) <= 64 and _FLOAT_TEXT.match(value.strip()):
            return float(value)
        return _INVALID
    if kind == "str":
        return value if isinstance(value, str) and 0 < len(value) <= MAX_TEXT else _INVALID
    if kind == "mapping":
        ok = isinstance(value, dict) and _plain_data(value, [MAX_MAPPING_VALUES], MAX_MAPPING_DEPTH)
        return dict(value) if ok else _INVALID
    if kind.endswith("_list"):
        if not isinstance(value, list) or len(value) > MAX_ITEMS:
            return _INVALID
        items = [_convert(kind[:-5], item) for item in value]
        return _INVALID if any(i is _INVALID for i in items) else items
    raise AssertionError(f"unknown field kind {kind}")


def _plain_data(value: Any, budget: list[int], depth: int) -> bool:
    """True when value is YAML-like data (str keys) within `depth` levels and `budget[0]` values (spent here)."""
    budget[0] -= 1
    if budget[0] < 0 or depth < 0:
        return False
    if isinstance(value, dict):
        return all(isinstance(k, str) and len(k) <= MAX_TEXT and _plain_data(v, budget, depth - 1)
                   for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_plain_data(v, budget, depth - 1) for v in value)
    if isinstance(value, str):
        return len(value) <= MAX_TEXT
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) <= INT64_MAX
    return value is None or isinstance(value, (bool, float))


class _ShortRepr(reprlib.Repr):
    """reprlib's bounded repr (a few items per level, a few levels), also for integers too long to print."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxdict, self.maxlist, self.maxtuple, self.maxset = 3, 4, 6, 6, 6
        self.maxstring, self.maxother = 50, 50

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 200:
            return f"<an integer of {x.bit_length()} bits>"
        return super().repr_int(x, level)


_SHORT_REPR = _ShortRepr()


def short_repr(value: Any) -> str:
    """A repr of value for one-line messages: at most 60 characters, built without a full repr of a big value."""
    text = printable(_SHORT_REPR.repr(value), limit=1000)
    return text if len(text) <= 60 else text[:57] + "..."


def one_line(exc: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(part.strip() for part in str(exc).splitlines() if part.strip())


def printable(text: str, limit: int = 200) -> str:
    """text with line breaks and other control characters escaped, cut in the middle beyond `limit` characters."""
    if len(text) > limit:
        text = text[:limit // 2] + "..." + text[-(limit // 2):]
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def validate_section(schema: Mapping[str, Any], raw: Any, prefix: str = "") -> dict[str, Any]:
    """raw checked against schema (nested mappings of Fields), every missing key filled with its default."""
    if not isinstance(raw, dict):
        raise bad_value(prefix.rstrip("."), raw, "a mapping with keys " + ", ".join(schema))
    for key in raw:
        if key not in schema:
            name = printable(key) if isinstance(key, str) else short_repr(key)
            raise ConfigError(f"config key '{prefix}{name}': unknown key; allowed here: " + ", ".join(schema))
    out: dict[str, Any] = {}
    for key, spec in schema.items():
        path = prefix + key
        if isinstance(spec, Field):
            out[key] = spec.validate(path, raw[key]) if key in raw else copy.deepcopy(spec.default)
        else:
            out[key] = validate_section(spec, raw.get(key, {}), path + ".")
    return out


def check_known_keys(schema: Mapping[str, Any], raw: Any, prefix: str = "") -> None:
    """ConfigError for the first value in raw that a key of schema refuses; keys schema lacks are not checked
    (they belong to a schema known later)."""
    if not isinstance(raw, dict):
        if prefix:
            raise bad_value(prefix.rstrip("."), raw, "a mapping with keys " + ", ".join(schema))
        return
    for key, spec in schema.items():
        if key in raw:
            if isinstance(spec, Field):
                spec.validate(prefix + key, raw[key])
            else:
                check_known_keys(spec, raw[key], prefix + key + ".")


def merge_schemas(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """base with extra's sections added; a section both have gets extra's keys added (or replaced)."""
    out = dict(base)
    for key, spec in extra.items():
        if isinstance(spec, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_schemas(out[key], spec)
        else:
            out[key] = spec
    return out
