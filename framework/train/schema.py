"""The config schema: `Field` (a value's kind, default and allowed values), `ConfigError`, and validation.

A schema is a nested mapping of section names to `Field`s. `validate_section`
checks a raw mapping against one and fills in defaults; every problem raises
`ConfigError` with a one-line message naming the key path, the value given and
what is allowed. This module imports nothing else of the project, so the
algorithm plugins can declare their sections with it.
"""
from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

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
            raise bad_value(path, value, self.allowed())
        converted = _convert(self.kind, value)
        if converted is _INVALID:
            raise bad_value(path, value, self.allowed())
        if self.choices is not None and converted not in self.choices:
            raise bad_value(path, value, self.allowed())
        items = converted if isinstance(converted, list) else [converted]
        if self.kind in ("int", "float", "int_list", "float_list"):
            for item in items:
                if not math.isfinite(item) or self._out_of_range(item):
                    raise bad_value(path, value, self.allowed())
        if self.check is not None:
            problem = self.check(converted)
            if problem:
                raise bad_value(path, value, problem)
        return converted

    def _out_of_range(self, x: float) -> bool:
        if self.low is not None and (x < self.low or (self.low_open and x == self.low)):
            return True
        return self.high is not None and x > self.high


_INVALID = object()
_FLOAT_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def bad_value(path: str, value: Any, allowed: str) -> ConfigError:
    """The ConfigError for `value` at key `path`, with what is allowed there."""
    return ConfigError(f"config key '{path}': got {short_repr(value)}; allowed: {allowed}")


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



def short_repr(value: Any) -> str:
    """repr(value) cut to 60 characters, for one-line messages."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate_section(schema: Mapping[str, Any], raw: Any, prefix: str = "") -> dict[str, Any]:
    """raw checked against schema (nested mappings of Fields), every missing key filled with its default."""
    if not isinstance(raw, dict):
        raise bad_value(prefix.rstrip("."), raw, "a mapping with keys " + ", ".join(schema))
    for key in raw:
        if key not in schema:
            raise ConfigError(f"config key '{prefix}{key}': unknown key; allowed here: " + ", ".join(schema))
    out: dict[str, Any] = {}
    for key, spec in schema.items():
        path = prefix + key
        if isinstance(spec, Field):
            out[key] = spec.validate(path, raw[key]) if key in raw else copy.deepcopy(spec.default)
        else:
            out[key] = validate_section(spec, raw.get(key, {}), path + ".")
    return out


def merge_schemas(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """base with extra's sections added; a section both have gets extra's keys added (or replaced)."""
    out = dict(base)
    for key, spec in extra.items():
        if isinstance(spec, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_schemas(out[key], spec)
        else:
            out[key] = spec
    return out
