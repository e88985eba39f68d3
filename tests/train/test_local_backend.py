"""The local backend: seeds per (rank, restart), BLAS threads pinned for the children it starts whatever the start
method, and a worker's traceback through a pipe of its own."""
import os
import time

import pytest

from framework import algorithms
from framework.train.backends.base import Launch, worker_seed
from framework.train.backends.local import BLAS_THREAD_VARS, LocalBackend, keep_freed_memory
from framework.train.config import validate
from framework.runtime.run_stats import RunStats
from run_configs import cartpole_config
from train_cli import train


def test_worker_seeds_are_deterministic_and_distinct():
    seeds = {worker_seed(0, rank, generation) for rank in range(4) for generation in range(1, 4)}
    assert len(seeds) == 12
    assert worker_seed(7, 1, 2) == worker_seed(7, 1, 2) != worker_seed(8, 1, 2)


def test_backend_pins_blas_threads_for_its_children_and_restores_the_environment(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    config = validate({"trainer": {"workers": 1, "start_method": "spawn"}})
    algo = algorithms.get("a3c")
    model = algo.build_model(config).share_memory()
    backend = LocalBackend(Launch(config, algo, model, algo.build_optimizer(model, config), RunStats(1, algo.metrics),
                                  generations=[0]))
    assert all(os.environ[name] == "1" for name in BLAS_THREAD_VARS)
    assert backend.stop(timeout_s=1.0) == []
    assert os.environ["OMP_NUM_THREADS"] == "8" and "MKL_NUM_THREADS" not in os.environ


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_every_worker_computes_with_one_blas_thread(tmp_path, method):
    """A forked worker inherits the BLAS pool numpy made in the main process before the thread variables were set
    (two threads on two cores): the worker limits it itself."""
    report = tmp_path / "threads"
    config = cartpole_config(total_steps=2000, trainer={"start_method": method, "workers": 1},
                             env={"id": "fault_envs:BlasThreadsCartPole-v0", "kwargs": {"report": str(report)}})
    done, _ = train(tmp_path, config)
    assert done.returncode == 0, done.stderr
    assert report.read_text().split() and set(report.read_text().split()) == {"1"}


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_worker_reuses_the_large_blocks_it_frees_instead_of_faulting_them_in_again(tmp_path, method):
    """By default glibc maps a block above 32 MB afresh each time, and gives a freed heap top back to the kernel:
    the pages fault in again every update (for these five rounds, about 100 faults in a worker where NumPy asks for
    huge pages, 50,000 where there are none; none at all once the worker keeps what it frees)."""
    if not keep_freed_memory():  # here too: harmless for the test process, and the same C library as the worker's
        pytest.skip("the C library has no mallopt that takes these thresholds (not glibc)")
    report = tmp_path / "faults"
    config = cartpole_config(total_steps=2000, trainer={"start_method": method, "workers": 1},
                             env={"id": "fault_envs:MemoryReuseCartPole-v0", "kwargs": {"report": str(report)}})
    done, _ = train(tmp_path, config)
    assert done.returncode == 0, done.stderr
    assert int(report.read_text()) < 20


def _named_semaphores() -> set[str]:
    """The named semaphores in /dev/shm (what a process killed outright leaves there)."""
    return {name for name in os.listdir("/dev/shm") if name.startswith("sem.")}


def test_a_spawned_worker_sends_its_traceback_through_a_pipe_and_nothing_is_named_in_dev_shm():
    """No queue, so no named semaphore a process killed outright (a Ray node) would leave behind."""
    config = validate({"env": {"id": "fault_envs:RaisingCartPole-v0", "kwargs": {"fail_after": 5}},
                       "trainer": {"workers": 1, "start_method": "spawn"}})
    algo = algorithms.get("a3c")
    model = algo.build_model(config).share_memory()
    before = _named_semaphores()
    backend = LocalBackend(Launch(config, algo, model, algo.build_optimizer(model, config).share_memory(),
                                  RunStats(1, algo.metrics), generations=[0]))
    backend.start()
    assert _named_semaphores() == before  # while the worker runs
    deadline = time.monotonic() + 60
    exits = []
    while not exits and time.monotonic() < deadline:
        exits = backend.poll()
        time.sleep(0.05)
    backend.stop(timeout_s=5.0)
    [ended] = exits
    assert not ended.clean and ended.summary.startswith("worker 0 raised an exception: ")
    assert "RuntimeError: injected" in ended.traceback and ended.traceback.startswith("Traceback")
