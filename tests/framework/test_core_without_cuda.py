"""CPU runs where CuPy is installed (and the CUDA driver perhaps missing): no CuPy import, no CUDA call, and the
same results as without CuPy, in the main process and in its spawned workers."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

HERE = Path(__file__).resolve().parent

_CPU_RUN = """
import json
import sys
{before}
import framework as F
import sharing
from cuda_ipc import guard
from framework import nn, optim
import core_workers

F.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).share_memory()
opt = optim.Adam(model.parameters(), lr=0.01).share_memory()
loss = (model(F.randn(5, 4)) ** 2).mean()
loss.backward()
opt.step()
report = sharing.get_context("spawn").SimpleQueue()
sharing.spawn(core_workers.train_locally_and_report, args=(model, opt, report), nprocs=2)
workers = sorted((report.get() for _ in range(2)), key=lambda r: r["rank"])
print(json.dumps({{"loss": float(loss.item()), "weights": model.arena.data.tolist(), "workers": workers,
                  "cupy": "cupy" in sys.modules, "cuda_user": guard._initialised_pid is not None}}))
"""


def _cpu_run(before: str, tmp_path: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    done = subprocess.run([sys.executable, "-c", _CPU_RUN.format(before=before)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=150)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_cpu_run_never_loads_cupy_nor_declares_cuda_use(tmp_path: Path) -> None:
    run = _cpu_run("", tmp_path)
    assert run["cupy"] is False and run["cuda_user"] is False
    assert [(w["cupy"], w["cuda_user"]) for w in run["workers"]] == [(False, False)] * 2
    assert run["workers"][0]["loss"] != run["workers"][1]["loss"], "each worker seeds with its rank"


@pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="CuPy is not installed here")
def test_with_cupy_imported_a_cpu_run_makes_no_cuda_call_and_matches(tmp_path: Path) -> None:
    # Without a driver, any CUDA call (seeding CuPy's generator, say) fails the run.
    with_cupy = _cpu_run("import cupy", tmp_path)
    assert with_cupy["cupy"] is True and with_cupy["cuda_user"] is False
    assert [w["cuda_user"] for w in with_cupy["workers"]] == [False, False]
    without = _cpu_run("", tmp_path)
    assert {k: with_cupy[k] for k in ("loss", "weights")} == {k: without[k] for k in ("loss", "weights")}
    assert [w["loss"] for w in with_cupy["workers"]] == [w["loss"] for w in without["workers"]]
