"""Untrusted YAML in bounded time and memory: what is refused, with the line (tests/reliability/test_fuzzing.py fuzzes documents)."""
import os
import threading
import time

import pytest

from framework.train import yaml_input
from framework.train.config import ConfigError, load_config, parse_override


def _laughs(levels: int, width: int = 9) -> str:
    """'Billion laughs': each level a list of `width` aliases of the one before; width**levels values expanded."""
    lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for n in range(1, levels + 1):
        lines.append(f"l{n}: &l{n} [" + ", ".join([f"*l{n - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text, problem, line", ids=["duplicate", "nested duplicate", "billion laughs",
                                                     "recursive alias", "deep nesting", "long integer",
                                                     "sexagesimal integer"], argvalues=[
    ("seed: 1\ntrainer: {workers: 2}\nseed: 2\n", "key 'seed' is given twice (first at line 1)", 3),
    ("trainer:\n  workers: 2\n  workers: 4\n", "key 'workers' is given twice (first at line 2)", 3),
    (_laughs(9), "more than 20000 values once aliases are expanded", None),
    ("a: &a [1, *a]\n", "alias *a is used inside its own anchor", 1),
    ("x: " + "[" * 100 + "]" * 100 + "\n", "values nested more than 64 levels deep", 1),
    ("seed: " + "1" * 5000 + "\n", "an integer of 5000 characters", 1),
    ("seed: " + ":".join(["1"] * 30000) + "\n", "an integer of 59999 characters", 1),
])
def test_refused_documents_name_the_problem_and_line(tmp_path, text, problem, line):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert message.startswith(f"config file '{path}' at line ") and f": {problem}; allowed: " in message, message
    if line is not None:
        assert message.startswith(f"config file '{path}' at line {line}: "), message
    assert "\n" not in message


def test_merge_keys_may_be_overridden_and_small_aliases_load():
    text = "base: &b {workers: 2, start_method: fork}\ntrainer:\n  <<: *b\n  workers: 3\nhidden: &h [8, 8]\nx: *h\n"
    assert yaml_input.parse(text) == {"base": {"workers": 2, "start_method": "fork"},
                                     "trainer": {"workers": 3, "start_method": "fork"}, "hidden": [8, 8],
                                     "x": [8, 8]}
    assert yaml_input.parse(_laughs(3)) is not None  # 9**3 values: within the bound


def test_non_regular_and_oversized_files_are_refused_without_reading_them(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * yaml_input.MAX_BYTES + "\n")
    cases = {fifo: "not a regular file", "/dev/zero": "not a regular file", tmp_path: "a directory",
             big: f"{big.stat().st_size} bytes; allowed: at most {yaml_input.MAX_BYTES} bytes"}
    for path, problem in cases.items():
        done = threading.Event()
        errors = []

        def read(path=path):
            try:
                load_config(path)
            except ConfigError as exc:
                errors.append(str(exc))
            done.set()

        threading.Thread(target=read, daemon=True).start()
        assert done.wait(10), f"reading {path} did not return"  # a FIFO without a writer must not block
        assert errors and errors[0].startswith(f"config file '{path}': {problem}"), errors


def test_file_that_is_not_utf8_is_refused(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("experiment: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"not UTF-8 text \(byte 15\)"):
        load_config(path)


def test_a_set_value_is_bounded_like_a_file():
    with pytest.raises(ConfigError, match=r"^--set 'env.kwargs=.*': more than 20000 values once aliases"):
        parse_override("env.kwargs=" + _laughs(9).replace("\n", ", ").join("{}").replace(", }", "}"))
    with pytest.raises(ConfigError, match=r"^--set 'x=\[\[\[.*': values nested more than 64 levels deep"):
        parse_override("x=" + "[" * 200)
