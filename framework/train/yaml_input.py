"""YAML nobody vetted (config files, `--set` values, a run directory's config.yaml), read in bounded time and memory.

`yaml.safe_load` builds no Python object from a tag, but it reads whatever it
is given (a FIFO blocks, /dev/zero never ends), composes any nesting depth
(deep enough, Python's recursion limit ends it with a RecursionError), keeps
the last of two equal keys without a word, and lets aliases share nodes, so
that ten lines ("billion laughs") stand for billions of values once anything
walks them (a repr, a dump, a check of every list item). Here:

- only a regular file of at most MAX_BYTES is read, checked on the open file;
- composing stops past MAX_DEPTH nested levels, or past MAX_NODES values
  counted with every alias expanded (an alias inside its own anchor counts
  as endless);
- a key given twice in one mapping is refused, naming it and both lines
  (keys merged in with `<<` may be overridden, as YAML intends);
- an integer of more than MAX_INT_CHARS characters is refused before Python
  converts it (CPython refuses 4300 digits; sexagesimal `1:2:3:...` costs
  quadratic time).

The price: one dictionary entry per composed node, no more than what the
composer already keeps.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from framework.runtime.schema import ConfigError, printable, short_repr

MAX_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_NODES = 20_000
MAX_INT_CHARS = 64
_MERGE_TAG = "tag:yaml.org,2002:merge"


class Refused(yaml.MarkedYAMLError):
    """A document this reader will not load (too big, too deep, duplicate key); `allowed` says what would do."""

    def __init__(self, problem: str, mark: Any, allowed: str):
        super().__init__(problem=problem, problem_mark=mark)
        self.allowed = allowed


class _BoundedLoader(yaml.SafeLoader):
    """The safe loader with the bounds of this module."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0
        self._expanded: dict[int, int] = {}  # id(node) -> values it stands for, aliases expanded
        self._total = 0  # values composed so far, aliases expanded: the composer stops as soon as it is too many

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            node = self.anchors.get(event.anchor)
            if node is not None and id(node) not in self._expanded:
                raise Refused(f"alias *{printable(event.anchor)} is used inside its own anchor", event.start_mark,
                              "aliases of values that are complete where the alias appears")
        if self._depth >= MAX_DEPTH:
            raise Refused(f"values nested more than {MAX_DEPTH} levels deep", event.start_mark,
                          f"at most {MAX_DEPTH} levels")
        self._depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if id(node) in self._expanded:  # an alias: it stands for all its anchor's values once more
            self._total += self._expanded[id(node)]
        else:
            children = ([part for pair in node.value for part in pair] if isinstance(node, MappingNode)
                        else node.value if isinstance(node, SequenceNode) else [])
            self._expanded[id(node)] = 1 + sum(self._expanded[id(child)] for child in children)
            self._total += 1
        if self._total > MAX_NODES:
            raise Refused(f"more than {MAX_NODES} values once aliases are expanded", node.start_mark,
                          f"at most {MAX_NODES} values")
        return node

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node)
                if key in first_line:
                    raise Refused(f"key {short_repr(key)} is given twice (first at line {first_line[key]})",
                                  key_node.start_mark, "each key once per mapping")
                first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: Any) -> int:
        if len(node.value) > MAX_INT_CHARS:
            raise Refused(f"an integer of {len(node.value)} characters", node.start_mark,
                          f"integers of at most {MAX_INT_CHARS} characters")
        return super().construct_yaml_int(node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)


def parse(text: str) -> Any:
    """The value of one YAML document (None when empty); yaml.YAMLError (Refused for a bound) otherwise."""
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_text(path: Path) -> str:
    """The text of a regular file of at most MAX_BYTES; ConfigError otherwise (the file is never read past that)."""
    shown = printable(str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # O_NONBLOCK: a FIFO must not block open
    except FileNotFoundError:
        raise ConfigError(f"config file '{shown}': not found; allowed: a path to a YAML file") from None
    except OSError as exc:
        raise ConfigError(f"config file '{shown}': cannot be opened ({exc.strerror or exc}); allowed: a readable "
                          f"YAML file") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise ConfigError(f"config file '{shown}': {kind}; allowed: a regular YAML file")
        if info.st_size > MAX_BYTES:
            raise ConfigError(f"config file '{shown}': {info.st_size} bytes; allowed: at most {MAX_BYTES} bytes")
        with os.fdopen(fd, "rb") as f:
            fd = None
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"config file '{shown}': cannot be read ({exc.strerror or exc}); allowed: a readable "
                          f"YAML file") from None
    finally:
        if fd is not None:
            os.close(fd)
    if len(data) > MAX_BYTES:  # it grew while being read
        raise ConfigError(f"config file '{shown}': more than {MAX_BYTES} bytes; allowed: at most {MAX_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file '{shown}': not UTF-8 text (byte {exc.start}); allowed: a UTF-8 YAML "
                          f"file") from None


def read_file(path: str | Path) -> Any:
    """The parsed contents of a YAML file within the bounds above; ConfigError naming the file and the line."""
    path = Path(path)
    return parse_file(path, read_text(path))


def parse_file(path: Path, text: str) -> Any:
    """The parsed contents of text, read from the YAML file at path (read_text), within the bounds above;
    ConfigError naming the file and the line."""
    shown = printable(str(path))
    try:
        data = parse(text)
    except Refused as exc:
        raise ConfigError(f"config file '{shown}' at line {exc.problem_mark.line + 1}: {exc.problem}; "
                          f"allowed: {exc.allowed}") from None
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"config file '{shown}'{where}: {printable(str(exc.problem))}; allowed: plain YAML "
                          f"values (Python tags are refused)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "malformed"
        raise ConfigError(f"config file '{shown}'{where}: malformed YAML ({printable(str(problem))}); "
                          f"allowed: a YAML mapping of sections") from None
    return {} if data is None else data
