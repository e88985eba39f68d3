"""Every shell and Python example in README.md and docs/ runs, as written, so none can go stale.

Each page's examples run in order in a sandbox of their own (a temporary
directory holding links to the checkout's configs/ and docs/), so a later
example can use the run directory an earlier one made. A ```bash block runs
under `bash -euo pipefail` with this interpreter's scripts (`train`,
`evaluate`, `tensorboard`) first on PATH; a ```python block runs as a script
file with this interpreter. Two kinds of line are not run as written, since a
test cannot do what they do:

- `pip install ... '.[EXTRA,...]' &&` or a line of its own: each extra named
  must exist in pyproject.toml (the install itself is what CI does);
- `tensorboard --logdir DIR` starts a server that never returns: it runs as
  `tensorboard --inspect --logdir DIR`, which reads the same event files and
  must find some.

A block that cannot run here (several machines, a GPU, hours of training) is
preceded by `<!-- not run: REASON -->`; every such marker must give its reason,
and the test lists them. A block that needs an optional extra (`tune`,
`mlflow`, `wandb`) is preceded by `<!-- needs: EXTRA -->`: it runs where that
extra is installed (CI's second configuration) and is left out elsewhere, the
page's test then skipped with the extras it lacked once its other examples
have run. Blocks in other languages (```text, ```yaml) are output or excerpts
and are not run.
"""
from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]
PAGES = [CHECKOUT / "README.md", *sorted((CHECKOUT / "docs").glob("*.md"))]
RUN_LANGUAGES = {"bash": "bash", "sh": "bash", "shell": "bash", "python": "python"}
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
NOT_RUN = re.compile(r"<!--\s*not run:?\s*(.*?)\s*-->\s*$")
NEEDS = re.compile(r"<!--\s*needs:\s*([\w,\s-]+?)\s*-->\s*$")
REQUIREMENT_NAME = re.compile(r"^[A-Za-z0-9_.-]+")
PIP_INSTALL = re.compile(r"^\s*pip install [^&\n]*?(?:&&\s*|$)")
EXTRAS = re.compile(r"\.\[([\w,-]+)\]")
TENSORBOARD = re.compile(r"^(\s*)tensorboard --logdir ", re.M)
BLOCK_TIMEOUT_S = 300


@dataclass
class Example:
    """One fenced block of a page: its language, its code, where it starts, and why it is not run (or None)."""

    language: str
    code: str
    line: int
    not_run: str | None
    needs: tuple[str, ...] = ()


def examples(page: Path) -> list[Example]:
    """The ```bash and ```python blocks of page, in order."""
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        language = RUN_LANGUAGES.get(match.group(1))
        if language is None:
            continue
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker, needs = NOT_RUN.search(before), NEEDS.search(before)
        found.append(Example(language, match.group(2), text.count("\n", 0, match.start()) + 1,
                             None if marker is None else marker.group(1),
                             () if needs is None else tuple(e.strip() for e in needs.group(1).split(","))))
    return found


def _extras() -> dict[str, list[str]]:
    return tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _declared_extras() -> set[str]:
    return set(_extras())


def extra_installed(extra: str) -> bool:
    """Whether every distribution the extra names (and those of hogshare's extras it names) is installed."""
    for requirement in _extras()[extra]:
        name = REQUIREMENT_NAME.match(requirement).group(0)
        if name == "hogshare":
            inner = re.search(r"\[([\w,-]+)\]", requirement).group(1).split(",")
            if not all(extra_installed(e) for e in inner):
                return False
            continue
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return False
    return True


def shell_script(code: str) -> str:
    """code as the test runs it: pip installs checked and dropped, tensorboard servers as --inspect."""
    lines = []
    for line in code.splitlines():
        if PIP_INSTALL.match(line):
            for extras in EXTRAS.findall(line):
                missing = set(extras.split(",")) - _declared_extras()
                assert not missing, f"{line!r} names extras that pyproject.toml lacks: {sorted(missing)}"
            line = PIP_INSTALL.sub("", line)
        lines.append(line)
    return TENSORBOARD.sub(r"\1tensorboard --inspect --logdir ", "\n".join(lines))


def _sandbox(tmp_path: Path) -> Path:
    for name in ("configs", "docs"):
        (tmp_path / name).symlink_to(CHECKOUT / name)
    return tmp_path


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(CHECKOUT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("PYTHONSAFEPATH", None)
    return env


def run_example(example: Example, cwd: Path) -> subprocess.CompletedProcess:
    """Run one example in cwd; the completed process, output captured."""
    if example.language == "bash":
        argv = ["bash", "-euo", "pipefail", "-c", shell_script(example.code)]
    else:
        script = cwd / f"example_{example.line}.py"
        script.write_text(example.code)
        argv = [sys.executable, script.name]
    return subprocess.run(argv, cwd=cwd, env=_environment(), capture_output=True, text=True,
                          timeout=BLOCK_TIMEOUT_S, stdin=subprocess.DEVNULL)


LONG_PAGES = {"docs/training.md", "docs/hogwild.md", "docs/monitoring.md", "docs/python-api.md", "docs/tuning.md"}


def _page_params() -> list:
    """One parameter per page; the pages whose examples train for minutes are marked slow."""
    params = []
    for page in PAGES:
        name = str(page.relative_to(CHECKOUT))
        params.append(pytest.param(page, id=name, marks=[pytest.mark.slow] if name in LONG_PAGES else []))
    return params


@pytest.mark.parametrize("page", _page_params())
def test_examples_run_as_written(page: Path, tmp_path: Path) -> None:
    cwd = _sandbox(tmp_path)
    lacking: set[str] = set()
    for example in examples(page):
        if example.not_run is not None:
            assert example.not_run, f"{page.name}:{example.line}: a 'not run' marker must say why"
            continue
        assert set(example.needs) <= _declared_extras(), f"{page.name}:{example.line}: needs {example.needs}"
        missing = {extra for extra in example.needs if not extra_installed(extra)}
        if missing:
            lacking |= missing
            continue
        done = run_example(example, cwd)
        where = f"{page.relative_to(CHECKOUT)}:{example.line}"
        assert done.returncode == 0, (f"{where}: the example exited {done.returncode}\n--- example\n{example.code}"
                                      f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}")
        assert "No event files found" not in done.stdout, f"{where}: tensorboard found no events\n{done.stdout}"
    if lacking:
        pytest.skip(f"examples needing the {', '.join(sorted(lacking))} extra were not run: not installed")


def test_pages_that_skip_an_example_say_why() -> None:
    skipped = [(page.name, ex.line, ex.not_run) for page in PAGES for ex in examples(page) if ex.not_run is not None]
    assert all(reason for _, _, reason in skipped), skipped


def test_the_example_reader_finds_fences_markers_and_installs(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("text\n```bash\necho hi\n```\n<!-- not run: needs a GPU -->\n```python\nprint(1)\n```\n"
                    "```text\nnot code\n```\n<!-- needs: tune, mlflow -->\n```bash\ntune\n```\n")
    found = examples(page)
    assert [(e.language, e.code, e.not_run, e.needs) for e in found] == [
        ("bash", "echo hi\n", None, ()), ("python", "print(1)\n", "needs a GPU", ()),
        ("bash", "tune\n", None, ("tune", "mlflow"))]
    assert extra_installed("test")  # pytest and the rest, and hogshare[video]'s packages: the suite runs with them
    assert shell_script("pip install -e '.[test]' && pytest -q\ntensorboard --logdir runs") == \
        "pytest -q\ntensorboard --inspect --logdir runs"
    with pytest.raises(AssertionError, match="no-such-extra"):
        shell_script("pip install -e '.[no-such-extra]'")
