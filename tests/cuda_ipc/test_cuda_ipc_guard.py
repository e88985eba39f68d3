"""The start-method guard, availability without CuPy, and the package importing without touching CUDA."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any, Callable

import pytest

import cuda_ipc
import sharing as mp
from cuda_ipc import guard
from cuda_ipc.limbo import Limbo
from cuda_ipc.pickling import IpcArray, rebuild, share
from cuda_ipc_host import device_array, host_backend

WAIT = 60


def _outcome(action: Callable[[], Any]) -> str:
    try:
        action()
    except RuntimeError as error:
        return str(error)
    return "allowed"


def _use_cuda(report: Any) -> None:
    report.put(_outcome(guard.check_cuda_allowed))


def _in_child(method: str, target: Callable[..., None], *args: Any) -> str:
    context = mp.get_context(method)
    report = context.SimpleQueue()
    child = context.Process(target=target, args=(report, *args))
    child.start()
    child.join(WAIT)
    assert child.exitcode == 0
    return report.get()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method, refused", [("fork", True), ("spawn", False), ("forkserver", False)])
def test_children_of_a_process_that_initialised_cuda(method: str, refused: bool) -> None:
    guard.check_cuda_allowed()  # what the CUDA path calls before its first CUDA use
    outcome = _in_child(method, _use_cuda)
    if refused:
        assert "forked" in outcome and "'spawn'" in outcome and "'forkserver'" in outcome
        assert str(os.getpid()) in outcome
    else:
        assert outcome == "allowed"


@pytest.mark.timeout(60)
def test_fork_is_fine_when_the_parent_never_initialised_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "_initialised_pid", None)
    assert _in_child("fork", _use_cuda) == "allowed"


def _fork_grandchild(report: Any) -> None:
    _use_cuda(report)
    report.put(_in_child("fork", _use_cuda))


@pytest.mark.timeout(60)
def test_a_refused_child_stays_refused_and_so_do_its_forks() -> None:
    guard.check_cuda_allowed()
    context = mp.get_context("fork")
    report = context.SimpleQueue()
    child = context.Process(target=_fork_grandchild, args=(report,))
    child.start()
    child.join(WAIT)
    assert child.exitcode == 0
    child_outcome, grandchild_outcome = report.get(), report.get()
    assert "'spawn'" in child_outcome and "'spawn'" in grandchild_outcome


def _send_and_receive(report: Any, message: IpcArray) -> None:
    report.put(_outcome(lambda: ForkingPickler.dumps(device_array([1.0]))))
    report.put(_outcome(lambda: rebuild(message)))
    report.put((cuda_ipc.is_available(), guard.forked_after_cuda()))


@pytest.mark.timeout(60)
def test_a_forked_child_can_neither_send_nor_receive_device_arrays(drained: Limbo) -> None:
    x = device_array([1.0, 2.0])
    message = share(x, host_backend())  # also marks this process as a CUDA user
    context = mp.get_context("fork")
    report = context.SimpleQueue()
    child = context.Process(target=_send_and_receive, args=(report, message))
    child.start()
    child.join(WAIT)
    assert child.exitcode == 0
    sent, received, (available, forked_after_cuda) = report.get(), report.get(), report.get()
    assert "'forkserver'" in sent and "'forkserver'" in received
    assert available is False and forked_after_cuda is True
    assert guard.forked_after_cuda() is False
    assert message.counts[message.slot] == 0, "a refused message still gives its slot back"
    assert cuda_ipc.ipc_collect() == 1


_WITHOUT_CUDA = """
import sys
import cuda_ipc
assert cuda_ipc.is_available() is False
assert cuda_ipc.register_reducers() is False
print(sorted(m for m in sys.modules if m.split(".")[0] == "cupy"))
"""


def _python(code: str, cwd: Path, *path: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, *sys.path])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=90)


@pytest.mark.timeout(120)
@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_without_cupy_everything_imports_and_nothing_is_available(tmp_path: Path) -> None:
    done = _python(_WITHOUT_CUDA, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.timeout(120)
def test_a_cupy_that_fails_to_import_means_not_available(tmp_path: Path) -> None:
    broken = tmp_path / "site" / "cupy"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('libcudart.so.12: cannot open shared object file')\n")
    done = _python(_WITHOUT_CUDA, tmp_path, str(tmp_path / "site"))
    assert done.returncode == 0, done.stderr
