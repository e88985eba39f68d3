"""The configuration reference: the tables of docs/configuration.md, generated from the schema.

Every `Field` carries its kind, bounds and choices (what `allowed()` says in
words) and a one-line `doc`; this module turns the full schema of each
built-in algorithm into one table per config section, so the page cannot
drift from what `train` accepts. A key that several algorithms share is one
row naming them (`all` when every algorithm has it); where its field differs
between them (A3C's `gae_lambda` 1.0, APPO's 0.95, each with its own
description) it is one row each, and where only the default differs (the run
name each algorithm gives a config without `experiment`) one row lists each
algorithm's. Defaults are those `default_config` resolves, the values a config
that leaves a key out gets.

The page keeps its hand-written prose; only the part between the two markers
is rewritten:

    python -m framework.train.config_reference            # rewrite docs/configuration.md's tables
    python -m framework.train.config_reference --check    # exit 1, naming the command, when they differ

tests/test_config_reference.py fails when the page and the schema differ.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Iterator, Mapping

import yaml

from framework.runtime.schema import Field
from framework.train.config import ALGORITHM_NAME, default_config, full_schema, get_path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
"""The page in a checkout (an installed copy has no docs/)."""
COMMAND = "python -m framework.train.config_reference"
BEGIN = f"<!-- begin generated configuration reference: edit the Field docs, then run `{COMMAND}` -->"
END = "<!-- end generated configuration reference -->"
ALGORITHMS = ("a3c", "impala", "appo", "hogwild")
"""The built-in algorithms, in the order the reference names them."""
SECTIONS = ("", "env", "model", "dataset", "algorithm", "optimizer", "trainer", "logging")
"""Section order of the page; "" is the top-level keys (experiment, seed)."""


def fields(schema: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Field]]:
    """(dotted key, Field) of every value of a nested schema, in its order."""
    for key, spec in schema.items():
        if isinstance(spec, Field):
            yield prefix + key, spec
        else:
            yield from fields(spec, f"{prefix}{key}.")


def yaml_value(value: Any) -> str:
    """value as a config.yaml would hold it, on one line: null, true, 0.001, [128], {}."""
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 20).strip()
    return text[:-len("...")].strip() if text.endswith("...") else text


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _allowed(field: Field) -> str:
    """field.allowed(), pointing to the description where a check of its own narrows it further."""
    return field.allowed() + ("; the form its description gives" if field.check is not None else "")


def _section_of(key: str) -> str:
    return key.split(".")[0] if "." in key else ""


def rows_by_section() -> dict[str, list[list[str]]]:
    """The reference's rows (key, algorithms, default, allowed, description), by section."""
    found: dict[str, list[tuple[Field, dict[str, Any]]]] = {}
    for name in ALGORITHMS:
        config = default_config(name)
        for key, field in fields(full_schema(name)):
            if key == "algorithm.name":
                field, value = ALGORITHM_NAME, ALGORITHM_NAME.default  # what a config that names none gets
            else:
                value = get_path(config, key)
            entries = found.setdefault(key, [])
            same = next((defaults for known, defaults in entries if _same(known, field)), None)
            if same is None:
                entries.append((field, {name: value}))
            else:
                same[name] = value
    sections: dict[str, list[list[str]]] = {section: [] for section in SECTIONS}
    for key, entries in found.items():
        for field, defaults in entries:
            sections[_section_of(key)].append([f"`{key}`", _algorithms(defaults), _defaults(defaults),
                                               _cell(_allowed(field)), _cell(field.doc)])
    return sections


def _same(a: Field, b: Field) -> bool:
    """Whether two algorithms' fields of a key are one row: the same but for the default (resolved apart)."""
    return a.doc == b.doc and a.allowed() == b.allowed() and (a.check is None) == (b.check is None)


def _algorithms(defaults: Mapping[str, Any]) -> str:
    return "all" if len(defaults) == len(ALGORITHMS) else ", ".join(defaults)


def _defaults(defaults: Mapping[str, Any]) -> str:
    """One default, or where they differ each algorithm's (those that share one named together)."""
    by_text: dict[str, list[str]] = {}
    for name, value in defaults.items():
        by_text.setdefault(f"`{_cell(yaml_value(value))}`", []).append(name)
    if len(by_text) == 1:
        return next(iter(by_text))
    return "; ".join(f"{', '.join(names)}: {text}" for text, names in by_text.items())


def reference() -> str:
    """The generated part of docs/configuration.md, markers included."""
    parts = [BEGIN, ""]
    header = ["key", "algorithms", "default", "allowed", "description"]
    for section, rows in rows_by_section().items():
        if not rows:
            continue
        parts += [f"### {f'`{section}`' if section else 'Top level'}", "",
                  "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        parts += ["| " + " | ".join(row) + " |" for row in rows]
        parts.append("")
    return "\n".join([*parts, END])


def rewritten(page: str) -> str:
    """page with the text between its markers replaced by `reference()`; ValueError when a marker is missing."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the page lacks the markers {BEGIN!r} and {END!r} around its tables")
    return page[:start] + reference() + page[end + len(END):]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Rewrite the tables of docs/configuration.md from the schema.")
    parser.add_argument("--check", action="store_true", help="only say whether the page is up to date (exit 1 if not)")
    parser.add_argument("--page", type=Path, default=PAGE, help=f"the page (default {PAGE})")
    args = parser.parse_args(argv)
    page = args.page.read_text()
    new = rewritten(page)
    if args.check:
        if new != page:
            print(f"{args.page} differs from the config schema; rewrite it with `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    if new != page:
        args.page.write_text(new)
        print(f"rewrote {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
