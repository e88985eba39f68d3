"""The configuration reference: every config key described in its Field, and docs/configuration.md's tables
generated from the schema (the page fails this test the moment it differs, and says how to regenerate it)."""
import subprocess
import sys

import pytest

from framework.train import config_reference
from framework.train.config import full_schema


def test_the_page_is_what_the_schema_generates():
    page = config_reference.PAGE.read_text()
    assert config_reference.rewritten(page) == page, (
        f"docs/configuration.md differs from the config schema: run `{config_reference.COMMAND}` and commit the page")


@pytest.mark.parametrize("algorithm", config_reference.ALGORITHMS)
def test_every_key_of_every_algorithm_has_a_one_line_description(algorithm):
    undescribed = [key for key, field in config_reference.fields(full_schema(algorithm))
                   if not field.doc.strip() or "\n" in field.doc]
    assert undescribed == []


def test_the_reference_names_every_built_in_algorithm():
    names = subprocess.run([sys.executable, "-c", "from framework import algorithms; print(*algorithms.names())"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert sorted(config_reference.ALGORITHMS) == sorted(names)


def test_a_key_whose_field_differs_between_algorithms_gets_a_row_each():
    rows = [row for rows in config_reference.rows_by_section().values() for row in rows]
    gae = {row[1]: row[2] for row in rows if row[0] == "`algorithm.gae_lambda`"}
    assert gae == {"a3c": "`1.0`", "appo": "`0.95`"}
    (experiment,) = [row for row in rows if row[0] == "`experiment`"]
    assert experiment[1] == "all" and "a3c: `a3c-cartpole-v1`" in experiment[2]  # defaults as a config gets them
    (workers,) = [row for row in rows if row[0] == "`trainer.workers`"]
    assert workers[1:4] == ["all", "`2`", "an integer >= 1 and <= 1024"]


def test_the_command_rewrites_a_stale_page_and_check_says_so(tmp_path, capsys):
    page = tmp_path / "configuration.md"
    stale = f"# prose kept\n\n{config_reference.BEGIN}\n| a stale table |\n{config_reference.END}\n\nmore prose\n"
    page.write_text(stale)
    assert config_reference.main(["--check", "--page", str(page)]) == 1
    assert config_reference.COMMAND in capsys.readouterr().err
    assert page.read_text() == stale
    assert config_reference.main(["--page", str(page)]) == 0
    text = page.read_text()
    assert text.startswith("# prose kept\n\n") and text.endswith("\n\nmore prose\n") and "a stale table" not in text
    assert "| `trainer.workers` |" in text
    assert config_reference.main(["--check", "--page", str(page)]) == 0


def test_a_page_without_the_markers_is_refused(tmp_path):
    with pytest.raises(ValueError, match="markers"):
        config_reference.rewritten("# a page with a hand-written table\n")

