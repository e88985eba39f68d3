"""The ray backend starting its own simulated cluster: configs/a3c_ray.yaml, impala_ray.yaml and appo_ray.yaml
solve CartPole on 2 nodes, log the exchange next to the run's metrics, stop on SIGTERM with a final checkpoint, and
leave nothing behind (no Ray process, no /dev/shm segment, no directory)."""
import json
import os
import signal
from pathlib import Path

import pytest

from framework.train.checkpoint import load_checkpoint
from reliability_support import Train, children, cmdline, run_cli, wait_for_file, wait_for_run_dir, wait_until
from train_cli import CONFIGS, scalars

pytest.importorskip("ray", reason="the ray backend's tests need Ray: pip install -e '.[ray]'")
pytestmark = pytest.mark.timeout(240)
SHM = Path("/dev/shm")


def _ray_dirs() -> set[Path]:
    return set(Path("/tmp").glob("hogshare-ray-*"))


def _segments() -> set[str]:
    """/dev/shm's entries but multiprocessing's named semaphores, which other programs of a shared machine make
    at any time (a run makes none: test_local_backend checks it)."""
    return {p.name for p in SHM.iterdir() if not p.name.startswith("sem.mp-")}


@pytest.fixture
def nothing_left():
    """The test's run leaves no simulated cluster directory and no /dev/shm segment (the watch fixture checks
    that it leaves no process, Ray's own included: they inherit the test's tag)."""
    segments_before, dirs_before = _segments(), _ray_dirs()
    yield
    assert _ray_dirs() == dirs_before, "the simulated cluster's directory was left behind"
    assert _segments() - segments_before == set(), "segments left in /dev/shm"


@pytest.mark.fault("R", "configs/a3c_ray.yaml run to the end on its own simulated cluster of 2 nodes",
                   "CartPole solved; the exchange in TensorBoard and summary.json; no process (Ray's included), "
                   "/dev/shm segment or directory left")
@pytest.mark.slow
def test_the_shipped_config_solves_cartpole_on_two_simulated_nodes_and_leaves_nothing(watch, logdir, nothing_left):
    done = run_cli(watch, "--config", CONFIGS / "a3c_ray.yaml", "--logdir", logdir, "--set", "logging.progress=false",
                   "--set", "trainer.max_seconds=150", timeout=220)
    assert done.returncode == 0, done.stderr
    run_dir = wait_for_run_dir(logdir)
    summary = json.loads((run_dir / "summary.json").read_text())
    # The window keeps moving while the nodes stop, so the end's mean may sit a little below the target.
    assert summary["stop_reason"] == "target_return reached" and summary["solved_at_seconds"] is not None
    assert summary["node_failures"] == 0 and summary["exchanges"] > 0
    assert 0 <= summary["staleness_mean"] < 4 and 0 < summary["exchange_ms_mean"] < 1000
    for tag in ("ray/staleness", "ray/exchange_ms", "ray/exchanges_per_s", "ray/group0/env_steps_per_s",
                "ray/group1/env_steps_per_s", "perf/env_steps_per_s"):
        assert scalars(run_dir, tag), f"no {tag} in TensorBoard"
    assert max(scalars(run_dir, "ray/group0/env_steps_per_s")) > 0 < max(scalars(run_dir, "ray/group1/env_steps_per_s"))


@pytest.mark.fault("R", "configs/impala_ray.yaml and appo_ray.yaml run to the end on their own simulated cluster of "
                   "2 nodes", "CartPole solved with trajectories relayed from both nodes to the learner on the head "
                   "(every one sent received once), the relay in TensorBoard; nothing left")
@pytest.mark.slow
@pytest.mark.parametrize("name", ["impala_ray.yaml", "appo_ray.yaml"])
def test_the_shipped_actor_learner_configs_solve_cartpole_on_two_simulated_nodes(watch, logdir, nothing_left, name):
    done = run_cli(watch, "--config", CONFIGS / name, "--logdir", logdir, "--set", "logging.progress=false",
                   "--set", "trainer.max_seconds=150", timeout=220)
    assert done.returncode == 0, done.stderr
    run_dir = wait_for_run_dir(logdir)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "target_return reached" and summary["node_failures"] == 0
    assert summary["relay"]["sent"] == summary["relay"]["received"] > 0 and summary["policy_lag_mean"] > 0
    for tag in ("ray/relay_ms", "ray/deliver_ms", "ray/relayed_per_s", "ray/group0/env_steps_per_s",
                "ray/group1/env_steps_per_s", "perf/policy_lag"):
        assert scalars(run_dir, tag), f"no {tag} in TensorBoard"
    assert max(scalars(run_dir, "ray/group0/env_steps_per_s")) > 0 < max(scalars(run_dir, "ray/group1/env_steps_per_s"))


def _niceness(pid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, pid)


@pytest.mark.fault("R", "SIGTERM to `train` running its own simulated cluster",
                   "the node groups and their workers run at train's niceness (not Ray's 15); exit 0 with SIGTERM "
                   "as stop reason and a final checkpoint; the cluster's processes, directory and /dev/shm "
                   "segments all gone")
@pytest.mark.slow
def test_sigterm_stops_a_run_and_its_own_cluster_with_a_final_checkpoint(watch, logdir, nothing_left):
    run = Train(watch, "--config", CONFIGS / "a3c_ray.yaml", "--logdir", logdir, "--set", "logging.progress=false",
                "--set", "trainer.target_return=null", "--set", "trainer.checkpoint_every_s=0.5")
    checkpoint = wait_for_file(wait_for_run_dir(logdir, timeout=120) / "checkpoints" / "checkpoint.npz")
    assert wait_until(lambda: load_checkpoint(checkpoint)["run"]["env_steps"] > 0, 60), run.stderr
    groups = [pid for pid in watch.tagged() if cmdline(pid).startswith("ray::NodeGroup")]
    assert len(groups) == 2, [cmdline(pid) for pid in watch.tagged()]
    workers = [pid for group in groups for pid in children(group)]
    assert len(workers) >= 4  # two per group, and multiprocessing's resource tracker
    assert {_niceness(pid) for pid in groups + workers} == {_niceness(run.proc.pid)}
    run.proc.send_signal(signal.SIGTERM)
    assert run.finish() == 0, run.stderr
    summary = json.loads((checkpoint.parents[1] / "summary.json").read_text())
    assert summary["stop_reason"] == "SIGTERM"
    assert load_checkpoint(checkpoint)["run"]["env_steps"] == summary["env_steps"]



@pytest.mark.fault("R", "SIGKILL of `train` running its own simulated cluster: while Ray starts, and mid-run (A3C's "
                   "node groups; IMPALA's actors on the nodes and its learner on the head, their trajectory buffers "
                   "in shared memory)",
                   "within 40 s no process of the run is left (Ray's agents included: they stayed 60-90 s), nor "
                   "its /tmp/hogshare-ray-* directory (it stayed for good), nor a /dev/shm segment")
@pytest.mark.parametrize("config, when", [("a3c_ray.yaml", "starting"),
                                          pytest.param("a3c_ray.yaml", "running", marks=pytest.mark.slow),
                                          ("impala_ray.yaml", "running")])
def test_sigkill_of_train_leaves_nothing_of_its_cluster(watch, logdir, nothing_left, config, when):
    dirs_before = _ray_dirs()
    run = Train(watch, "--config", CONFIGS / config, "--logdir", logdir, "--set", "logging.progress=false",
                "--set", "trainer.target_return=null", "--set", "trainer.total_steps=1000000000",
                "--set", "trainer.checkpoint_every_s=0.5")
    if when == "starting":  # its directory made, Ray's first processes started
        assert wait_until(lambda: _ray_dirs() - dirs_before and any(
            cmdline(pid).split("/")[-1].startswith("gcs_server") for pid in watch.tagged()), 60), run.stderr
    else:
        checkpoint = wait_for_file(wait_for_run_dir(logdir, timeout=120) / "checkpoints" / "checkpoint.npz")
        assert wait_until(lambda: load_checkpoint(checkpoint)["run"]["env_steps"] > 0, 60), run.stderr
    run.proc.kill()
    assert run.finish() == -signal.SIGKILL
    assert wait_until(lambda: not watch.tagged() and _ray_dirs() == dirs_before, 40), (
        [cmdline(pid) for pid in watch.tagged()], _ray_dirs() - dirs_before)
