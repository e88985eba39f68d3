"""Registration on CuPy's import: nothing happens before it, the reducer and the pool right after (or at once)."""
from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

import pytest

from cuda_ipc.registration import when_imported

needs_cupy = pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="CuPy is not installed here")


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on sys.path for throwaway modules; sys.meta_path is restored and the modules forgotten after."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    yield tmp_path
    for name in [name for name in sys.modules if name.startswith(("late_", "flaky_"))]:
        del sys.modules[name]


def test_the_action_runs_once_right_after_the_import(package: Path) -> None:
    (package / "late_module.py").write_text("VALUE = 3\n")
    seen: list[ModuleType] = []
    when_imported("late_module", seen.append)
    assert seen == [] and "late_module" not in sys.modules, "nothing is imported ahead of time"
    module = importlib.import_module("late_module")
    assert seen == [module] and module.VALUE == 3
    assert type(module.__loader__).__name__ == "SourceFileLoader", "the module keeps its own loader"
    assert module.__spec__.loader is module.__loader__
    importlib.import_module("late_module")
    assert seen == [module]


def test_an_imported_module_gets_the_action_at_once(package: Path) -> None:
    seen: list[ModuleType] = []
    when_imported("json", seen.append)
    assert seen == [sys.modules["json"]]


def test_a_failed_import_runs_nothing_and_a_later_good_one_does(package: Path) -> None:
    path = package / "flaky_module.py"
    path.write_text("raise ImportError('not yet')\n")
    seen: list[ModuleType] = []
    when_imported("flaky_module", seen.append)
    with pytest.raises(ImportError, match="not yet"):
        importlib.import_module("flaky_module")
    assert seen == []
    path.write_text("VALUE = 4\n")
    importlib.invalidate_caches()
    sys.modules.pop("flaky_module", None)
    assert importlib.import_module("flaky_module").VALUE == 4 and len(seen) == 1


def test_submodules_and_other_modules_pass_untouched(package: Path) -> None:
    (package / "late_package").mkdir()
    (package / "late_package" / "__init__.py").write_text("")
    (package / "late_package" / "part.py").write_text("VALUE = 5\n")
    seen: list[str] = []
    when_imported("late_package", lambda module: seen.append(module.__name__))
    assert importlib.import_module("late_package.part").VALUE == 5
    assert seen == ["late_package"]


_REGISTERED = """
from multiprocessing.reduction import ForkingPickler
{before}
import cuda_ipc
import cupy
print(ForkingPickler._extra_reducers.get(cupy.ndarray) is cuda_ipc._reduce_cupy_array,
      cupy.cuda.get_allocator() == cuda_ipc.memory_pool().malloc)
"""


@needs_cupy
@pytest.mark.timeout(120)
@pytest.mark.parametrize("before, pool", [
    ("", True),
    ("import cupy", True),
    ("import cupy\ncupy.cuda.set_allocator(cupy.cuda.MemoryPool().malloc)", False),
], ids=["cupy-imported-later", "cupy-imported-first", "user-allocator"])
def test_cupy_arrays_are_registered_and_the_pool_installed_without_a_cuda_call(before: str, pool: bool,
                                                                                tmp_path: Path) -> None:
    # Here the CUDA driver may be missing: then any CUDA call would fail the subprocess.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", _REGISTERED.format(before=before)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=90)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", str(pool)]
