"""Faults of the ray backend on a simulated cluster that this module starts once (3 nodes of 1 CPU) and runs
join: a node lost mid-run (the run goes on, or restarts its group), a stalled node group, the parameter server
lost, stop signals; checkpoints that resume across backends; and IMPALA's actors on the nodes relaying their
trajectories to its learner on the head: nothing lost or duplicated, the policy lag counted across nodes, a node
killed or hung, a resume."""
import contextlib
import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest

from framework.train.checkpoint import load_checkpoint
from run_configs import hogwild_config
from train_cli import cli_env
from reliability_support import (Train, children, cmdline, descendants, fast_config, run_cli, still_alive,
                                 wait_for_file, wait_for_run_dir, wait_until, write_config)

ray = pytest.importorskip("ray", reason="the ray backend's tests need Ray: pip install -e '.[ray]'")
from ray.cluster_utils import Cluster  # noqa: E402

from framework.train.backends.ray_cluster import SIMULATED_CLUSTER_CONFIG  # noqa: E402

pytestmark = pytest.mark.timeout(240)
NODES = 3


@contextlib.contextmanager
def starting_nodes():
    """Keep this process's SIGTERM handler: each node Ray starts here puts its own (an exit) in its place, which
    the suite's forked children would inherit. The nodes' processes get the CLI's PYTHONPATH (the checkout,
    tests/support: fault_envs), which the actors they start inherit."""
    handler = signal.getsignal(signal.SIGTERM)
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = cli_env()["PYTHONPATH"]
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, handler)
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def add_nodes(cluster, count: int) -> None:
    with starting_nodes():
        for _ in range(count):
            cluster.add_node(num_cpus=1, object_store_memory=100 << 20, log_to_stderr=False)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head without CPUs and NODES simulated nodes of 1 CPU, each its own raylet."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    with starting_nodes():
        made = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "include_dashboard": False, "log_to_stderr": False, "object_store_memory": 100 << 20,
            "_system_config": SIMULATED_CLUSTER_CONFIG})
    add_nodes(made, NODES)
    yield made
    made.shutdown()


@pytest.fixture
def full_cluster(cluster):
    """The module's cluster, with nodes added back up to NODES after a test removed some."""
    yield cluster
    add_nodes(cluster, NODES - len(cluster.worker_nodes))


def ray_config(address: str, **sections) -> dict:
    """2 node groups of 2 forked workers on the cluster at address, exchanging every 50 ms, checkpoint each 0.3 s;
    the tests end the runs they start (max_seconds is only a backstop)."""
    trainer = {"workers": 4, "backend": "ray", "max_seconds": 240, "checkpoint_every_s": 0.3,
               "ray": {"address": address, "nodes": 2, "workers_per_node": 2, "timeout_s": 3},
               **sections.pop("trainer", {})}
    return fast_config(trainer=trainer, **sections)


def _summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def _steps(run_dir: Path) -> int:
    return load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")["run"]["env_steps"]


def _raylet(node) -> int:
    return node.all_processes["raylet"][0].process.pid


def _groups(cluster) -> dict:
    """{node: (pid of its node group actor, pids of that actor's worker processes)} for nodes that run a group."""
    found = {}
    for node in cluster.worker_nodes:
        for pid in children(_raylet(node)):
            if cmdline(pid).startswith("ray::NodeGroup"):
                found[node] = (pid, descendants(pid))
    return found


def _start(watch, tmp_path, logdir, config: dict) -> tuple[Train, Path]:
    """train on config, once both groups run their workers and a checkpoint counts env steps."""
    run = Train(watch, "--config", write_config(tmp_path / "c.yaml", config), "--logdir", logdir)
    run_dir = wait_for_run_dir(logdir)
    wait_for_file(run_dir / "checkpoints" / "checkpoint.npz")
    assert wait_until(lambda: _steps(run_dir) > 0, 60), f"the run made no env step:\n{run.stderr}"
    return run, run_dir


def _running_groups(cluster, count: int) -> dict:
    groups = {}

    def ready() -> bool:
        nonlocal groups
        groups = _groups(cluster)
        return len(groups) == count and all(len(workers) >= 2 for _, workers in groups.values())

    assert wait_until(ready, 30), f"expected {count} node groups with their workers, found {groups}"
    return groups


@pytest.mark.fault("R", "the raylet and processes of a node running a group killed (`remove_node`, not graceful), "
                   "`on_worker_failure: abort`",
                   "one line naming the group; the group's actor and workers gone; training goes on; SIGTERM ends it"
                   " with exit 0 and `node_failures: 1`")
def test_a_lost_node_is_reported_once_and_the_run_goes_on(watch, tmp_path, logdir, full_cluster):
    run, run_dir = _start(watch, tmp_path, logdir, ray_config(full_cluster.address))
    groups = _running_groups(full_cluster, 2)
    node, (actor, workers) = next(iter(groups.items()))
    full_cluster.remove_node(node, allow_graceful=False)
    run.wait_for(r"^node group \d \(workers \d-\d\) was lost: .*; 1 of 2 groups go on$")
    assert still_alive([actor, *workers], 10) == [], "the lost node's processes outlived it"
    before = _steps(run_dir)
    assert wait_until(lambda: _steps(run_dir) > before + 2000, 30), "no progress after the loss"
    run.proc.send_signal(signal.SIGTERM)
    assert run.finish() == 0, run.stderr
    summary = _summary(run_dir)
    assert summary["node_failures"] == 1 and summary["worker_restarts"] == 0
    assert summary["stop_reason"] == "SIGTERM" and summary["failure"] is None
    assert len([line for line in run.stderr.splitlines() if "was lost" in line]) == 1


@pytest.mark.fault("R", "a node running a group killed, `on_worker_failure: restart`",
                   "the group starts again on a live node (two groups run again), training goes on; "
                   "`worker_restarts: 1`, `node_failures: 1`")
@pytest.mark.slow
def test_a_lost_node_group_restarts_on_another_node_under_on_worker_failure_restart(watch, tmp_path, logdir,
                                                                                    full_cluster):
    config = ray_config(full_cluster.address, trainer={"on_worker_failure": "restart"})
    run, run_dir = _start(watch, tmp_path, logdir, config)
    groups = _running_groups(full_cluster, 2)
    node = next(iter(groups))
    full_cluster.remove_node(node, allow_graceful=False)
    run.wait_for(r"was lost: ")
    run.wait_for(r"^restarting the lost workers on another node with a new seed \(restart 1 of at most 10\)$")
    _running_groups(full_cluster, 2)  # one on each of the two nodes left
    before = _steps(run_dir)
    assert wait_until(lambda: _steps(run_dir) > before + 2000, 30), "no progress after the restart"
    run.proc.send_signal(signal.SIGTERM)
    assert run.finish() == 0, run.stderr
    summary = _summary(run_dir)
    assert summary["node_failures"] == 1 and summary["worker_restarts"] == 1 and summary["failure"] is None


@pytest.mark.fault("R", "SIGSTOP of a node group's actor (a hung node), `trainer.ray.timeout_s: 3`",
                   "the group is declared lost after 3-10 s without an exchange; its processes are gone; the run "
                   "goes on and ends with exit 0")
@pytest.mark.slow
def test_a_stalled_node_group_times_out_and_the_run_goes_on(watch, tmp_path, logdir, full_cluster):
    run, run_dir = _start(watch, tmp_path, logdir, ray_config(full_cluster.address))
    actor, workers = next(iter(_running_groups(full_cluster, 2).values()))
    os.kill(actor, signal.SIGSTOP)  # a hung node: its processes stop answering
    try:
        match = run.wait_for(r"^node group \d \(workers \d-\d\) was lost: no exchange for ([\d.]+) s "
                             r"\(trainer.ray.timeout_s\); 1 of 2 groups go on$", timeout=30)
        assert 3 <= float(match.group(1)) < 10
    finally:
        os.kill(actor, signal.SIGCONT)
    assert still_alive([actor, *workers], 15) == [], "the stalled group's processes outlived it"
    run.proc.send_signal(signal.SIGTERM)
    assert run.finish() == 0, run.stderr
    assert _summary(run_dir)["node_failures"] == 1


HUNG_RUN_STEPS = 50_000
"""Env steps of at least 1 ms each on 4 workers: 12 s at the very least, much longer than a hung node takes to be
declared dead (1-3 s, SIMULATED_CLUSTER_CONFIG)."""


@pytest.mark.fault("R", "SIGSTOP of the raylet of a node running a group (a hung node: Ray declares it dead, its "
                   "actor, which ray.kill cannot reach, runs on), kept until the run ends; `trainer.total_steps` "
                   f"{HUNG_RUN_STEPS:,} with env steps of at least 1 ms",
                   "the group is reported lost once and fenced: its workers stop while the raylet is still stopped; "
                   "the run ends with `total_steps reached` at env_steps >= total_steps (its counts and the "
                   "server's step budget agree), exit 0, `node_failures: 1`")
@pytest.mark.slow
def test_a_hung_node_group_is_fenced_and_counts_nowhere(watch, tmp_path, logdir, full_cluster):
    config = ray_config(full_cluster.address, trainer={"total_steps": HUNG_RUN_STEPS},
                        env={"id": "fault_envs:SlowStepCartPole-v0", "kwargs": {"step_s": 0.001}})
    run, run_dir = _start(watch, tmp_path, logdir, config)
    _hang_a_node_until_the_run_ends(full_cluster, run, run_dir, HUNG_RUN_STEPS,
                                    r"^node group \d \(workers \d-\d\) was lost: .*; 1 of 2 groups go on$")


def _hang_a_node_until_the_run_ends(cluster, run: Train, run_dir: Path, total_steps: int, lost: str) -> None:
    """SIGSTOP the raylet of a node running one of 2 groups, kept until the run ends: the group is reported lost
    once (the line `lost`), its workers stop while the raylet is still stopped, and the run reaches total_steps
    with the counts of its checkpoint."""
    node, (actor, processes) = next(iter(_running_groups(cluster, 2).items()))
    workers = [pid for pid in processes if "resource_tracker" not in cmdline(pid)]  # the tracker ends with the actor
    raylet = _raylet(node)
    os.kill(raylet, signal.SIGSTOP)
    try:
        run.wait_for(lost, timeout=60)
        assert still_alive(workers, 20) == [], "the lost group's workers trained on"
        assert run.proc.poll() is None, "the run ended with the lost group's workers (its budget used up)"
        assert run.finish() == 0, run.stderr
    finally:
        os.kill(raylet, signal.SIGCONT)
        cluster.remove_node(node, allow_graceful=False)
    summary = _summary(run_dir)
    assert summary["stop_reason"] == "total_steps reached", run.stderr
    assert summary["env_steps"] >= total_steps and summary["node_failures"] == 1
    assert summary["env_steps"] == _steps(run_dir)
    assert len([line for line in run.stderr.splitlines() if "was lost" in line]) == 1


def _kill_the_actor_on_the_head(cluster, kind: str) -> None:
    """SIGKILL the one process on the head node whose command line starts with kind (`ray::ParameterServer`)."""
    head = cluster.head_node.all_processes["raylet"][0].process.pid
    [actor] = [pid for pid in children(head) if cmdline(pid).startswith(kind)]
    os.kill(actor, signal.SIGKILL)


@pytest.mark.fault("R", "SIGKILL of the parameter server's actor mid-run",
                   "exit 1 naming the server; the checkpoint holds the summary's counts; no group left; `--resume` "
                   "with the local backend continues")
def test_a_lost_parameter_server_stops_the_run_and_it_resumes(watch, tmp_path, logdir, full_cluster):
    run, run_dir = _start(watch, tmp_path, logdir, ray_config(full_cluster.address))
    _kill_the_actor_on_the_head(full_cluster, "ray::ParameterServer")
    assert run.finish() == 1, run.stderr
    assert "stopping the run: the parameter server was lost" in run.stderr
    summary = _summary(run_dir)
    assert summary["stop_reason"] == "backend failure" and summary["exit_code"] == 1
    state = load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")
    assert state["run"]["env_steps"] == summary["env_steps"] > 0
    assert wait_until(lambda: not _groups(full_cluster), 15), "node groups outlived the run"
    target = summary["env_steps"] + 3000  # a ray run's checkpoint resumes with the local backend
    done = run_cli(watch, "--resume", run_dir, "--set", f"trainer.total_steps={target}",
                   "--set", "trainer.backend=local")
    assert done.returncode == 0, done.stderr
    resumed = _summary(run_dir)
    assert resumed["env_steps"] >= target and resumed["updates"] > summary["updates"]
    assert resumed["wall_seconds"] > summary["wall_seconds"] and "node_failures" not in resumed


@pytest.mark.fault("20", "`--resume` of a local run with `--set trainer.backend=ray` on a joined cluster",
                   "counters, episodes and seeds' generations continue; the checkpoint holds the global parameters "
                   "and a node's normalisation statistics, which went on from the local run's")
@pytest.mark.slow
def test_a_local_run_resumes_on_ray_with_its_counters_parameters_and_statistics(watch, tmp_path, logdir, full_cluster):
    config = write_config(tmp_path / "c.yaml", fast_config(env={"normalize_obs": True},
                                                           trainer={"workers": 4, "total_steps": 4000}))
    done = run_cli(watch, "--config", config, "--logdir", logdir)
    assert done.returncode == 0, done.stderr
    run_dir = wait_for_run_dir(logdir)
    before = _summary(run_dir)
    saved = load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")
    done = run_cli(watch, "--resume", run_dir, "--set", "trainer.total_steps=12000", "--set", "trainer.backend=ray",
                   "--set", f"trainer.ray.address={full_cluster.address}")
    assert done.returncode == 0, done.stderr
    after = _summary(run_dir)
    assert after["env_steps"] >= 12000 and after["episodes"] > before["episodes"]
    assert after["updates"] > before["updates"] and after["node_failures"] == 0 and after["exchanges"] > 0
    resumed = load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")
    assert resumed["run"]["generations"] == [2, 2, 2, 2]  # each rank's second start
    moved = {k: not np.array_equal(saved["model"][k], resumed["model"][k]) for k in saved["model"]}
    assert all(moved.values()), moved  # the driver's model follows the global parameters, and a node's normalisation statistics
    assert resumed["model"]["obs_norm.count"][0] > saved["model"]["obs_norm.count"][0] > 4000 * 0.5


@pytest.mark.fault("R", "SIGINT or SIGTERM to `train` on a joined cluster",
                   "exit 0 with the signal as stop reason, a final checkpoint, every actor and worker of the run "
                   "gone, the cluster's nodes untouched")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_writes_a_final_checkpoint_and_removes_every_actor(watch, tmp_path, logdir, full_cluster,
                                                                         signum):
    run, run_dir = _start(watch, tmp_path, logdir, ray_config(full_cluster.address))
    groups = _running_groups(full_cluster, 2)
    run.proc.send_signal(signum)
    assert run.finish() == 0, run.stderr
    summary = _summary(run_dir)
    assert summary["stop_reason"] == signal.Signals(signum).name
    state = load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")
    assert state["run"]["env_steps"] == summary["env_steps"] and summary["node_failures"] == 0
    pids = [pid for actor, workers in groups.values() for pid in (actor, *workers)]
    assert still_alive(pids, 15) == [], "processes of the run outlived it"
    assert not _groups(full_cluster) and len(full_cluster.worker_nodes) == NODES  # the cluster itself stays


@pytest.mark.fault("R", "none: Hogwild with its dataset sharded over 2 node groups",
                   "the run reaches its target accuracy through the exchange")
@pytest.mark.slow
def test_hogwild_trains_on_shards_spread_over_the_nodes(watch, tmp_path, logdir, full_cluster):
    # 0.7: this small task (8,000 rows, 4,000 per node) peaks near 0.8 in a few seconds, then overfits
    config = hogwild_config(algorithm={"target_accuracy": 0.7}, trainer={
        "workers": 4, "backend": "ray", "max_seconds": 60,
        "ray": {"address": full_cluster.address, "nodes": 2, "workers_per_node": 2}})
    done = run_cli(watch, "--config", write_config(tmp_path / "c.yaml", config), "--logdir", logdir)
    assert done.returncode == 0, done.stderr
    summary = _summary(wait_for_run_dir(logdir))
    assert summary["stop_reason"] == "target_accuracy reached"
    assert summary["evaluation"]["test_accuracy"] >= 0.6  # the final model: the groups' last deltas came after
    assert summary["exchanges"] > 0 and summary["node_failures"] == 0


@pytest.mark.fault("10", "`trainer.ray.nodes` larger than the joined cluster's nodes with a CPU",
                   "exit 2, one line naming the key and the most allowed; no run directory")
def test_more_nodes_than_the_cluster_has_is_refused_before_anything_is_written(watch, tmp_path, logdir, full_cluster):
    config = ray_config(full_cluster.address, trainer={"workers": 8, "ray": {
        "address": full_cluster.address, "nodes": 4, "workers_per_node": 2}})
    done = run_cli(watch, "--config", write_config(tmp_path / "c.yaml", config), "--logdir", logdir)
    assert done.returncode == 2
    assert done.stderr == ("train: error: config key 'trainer.ray.nodes': got 4; allowed: at most 3, the nodes with "
                           "a CPU in the Ray cluster\n")
    assert list(logdir.iterdir()) == []


@pytest.mark.fault("R", "the only node running a group killed",
                   "the run stops with exit 1 (`no workers left`), `node_failures: 1`, the final checkpoint written")
@pytest.mark.slow
def test_losing_the_only_node_group_stops_the_run_as_failed(watch, tmp_path, logdir, full_cluster):
    config = ray_config(full_cluster.address, trainer={"workers": 2, "ray": {
        "address": full_cluster.address, "nodes": 1, "workers_per_node": 2, "timeout_s": 3}})
    run, run_dir = _start(watch, tmp_path, logdir, config)
    node = next(iter(_running_groups(full_cluster, 1)))
    full_cluster.remove_node(node, allow_graceful=False)
    assert run.finish() == 1, run.stderr
    run.wait_for(r"^stopping the run \(no workers left\): node group 0 \(workers 0-1\) was lost: .*; "
                 r"0 of 1 groups go on$")
    summary = _summary(run_dir)
    assert summary["node_failures"] == 1 and summary["stop_reason"] == "worker failure"
    assert load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")["run"]["env_steps"] == summary["env_steps"]


# -- an actor-learner run: actors on the nodes, the learner on the head ------------------------------------------
AL_STEPS = 10 * 4
"""Env steps of one trajectory of `impala_config` (n_steps x envs_per_worker)."""


def impala_config(address: str, **trainer) -> dict:
    """IMPALA with one actor on each of 2 nodes and its learner on the head node (which has no CPU), relaying
    batches of 2 trajectories; the module's exchange settings."""
    config = ray_config(address, trainer={"workers": 2, **trainer, "ray": {
        "address": address, "nodes": 2, "workers_per_node": 1, "timeout_s": 3}})
    config["algorithm"] = {"name": "impala", "n_steps": 10, "learners": 1, "batch_trajectories": 2,
                           "slots_per_actor": 2}
    return config


def _relay_accounts_for_every_trajectory(summary: dict, nodes: int = 2, slots_per_actor: int = 2,
                                        batch: int = 2) -> None:
    """Every trajectory the learners received was sent once, and every one the actors (one a node) made was
    received, dropped by its actor (counted), still in its node (its slots), or in the last batch of its node,
    which the learners' group, stopping, no longer took."""
    relay, dropped = summary["relay"], summary["counts"]["trajectories_dropped"]
    assert relay["sent"] == relay["received"] > 0 and relay["batches"] > 0 and relay["store_ms_per_batch"] > 0, relay
    made = summary["env_steps"] // AL_STEPS
    assert relay["received"] <= made <= relay["received"] + dropped + nodes * (slots_per_actor + batch), (
        made, relay, dropped)


@pytest.mark.fault("R", "none: IMPALA with an actor on each of 2 nodes and its learner on the head, run to its "
                   "step budget, then `--resume`d on the cluster with a larger one",
                   "every trajectory relayed once (sent = received, the env steps accounted for), the policy lag "
                   "counted across nodes (a few updates, not the run's update count); the resumed run continues "
                   "its counts, its lag still counted from the run's updates; resumed again with the local "
                   "backend, it continues there")
def test_impala_relays_every_trajectory_once_counts_the_policy_lag_and_resumes(watch, tmp_path, logdir,
                                                                              full_cluster):
    config = write_config(tmp_path / "c.yaml", impala_config(full_cluster.address, total_steps=40_000))
    done = run_cli(watch, "--config", config, "--logdir", logdir)
    assert done.returncode == 0, done.stderr
    run_dir = wait_for_run_dir(logdir)
    first = _summary(run_dir)
    assert first["stop_reason"] == "total_steps reached" and first["node_failures"] == 0
    _relay_accounts_for_every_trajectory(first)
    assert first["updates"] > 20 and 0 < first["policy_lag_mean"] < first["updates"] / 3, first
    done = run_cli(watch, "--resume", run_dir, "--set", "trainer.total_steps=80000")
    assert done.returncode == 0, done.stderr
    resumed = _summary(run_dir)
    assert resumed["env_steps"] >= 80_000 and resumed["updates"] > first["updates"] + 20
    assert resumed["episodes"] > first["episodes"] and resumed["relay"]["sent"] == resumed["relay"]["received"] > 0
    assert 0 < resumed["policy_lag_mean"] < first["updates"] / 3, (first, resumed)
    assert load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")["run"]["generations"] == [2, 2, 2]
    done = run_cli(watch, "--resume", run_dir, "--set", "trainer.total_steps=100000", "--set", "trainer.backend=local")
    assert done.returncode == 0, done.stderr  # and on one machine
    local = _summary(run_dir)
    assert local["env_steps"] >= 100_000 and local["updates"] > resumed["updates"] and "relay" not in local


@pytest.mark.fault("R", "the raylet and processes of a node running IMPALA actors killed mid-run",
                   "one line naming the actors' group; the other node's actor feeds the learner on (the run's "
                   "updates grow); SIGTERM ends it with exit 0 and `node_failures: 1`")
def test_impala_goes_on_with_the_actors_left_when_a_node_is_killed(watch, tmp_path, logdir, full_cluster):
    run, run_dir = _start(watch, tmp_path, logdir, impala_config(full_cluster.address))
    node = next(iter(_running_groups(full_cluster, 2)))
    full_cluster.remove_node(node, allow_graceful=False)
    run.wait_for(r"^node group \d \(actors \d-\d\) was lost: .*; 2 of 3 groups go on$")
    before = load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")["run"]
    assert wait_until(lambda: _steps(run_dir) > before["env_steps"] + 5 * AL_STEPS * 2, 30), run.stderr
    run.proc.send_signal(signal.SIGTERM)
    assert run.finish() == 0, run.stderr
    summary = _summary(run_dir)
    assert summary["node_failures"] == 1 and summary["failure"] is None and summary["updates"] > 0
    assert summary["relay"]["received"] > 0


@pytest.mark.fault("R", "SIGSTOP of the raylet of a node running IMPALA actors, kept until the run ends; "
                   f"`trainer.total_steps` {HUNG_RUN_STEPS:,} with env steps of at least 1 ms",
                   "the group is reported lost once and fenced at the server and at the learners' group: its "
                   "actor process runs on where Ray cannot reach it, yet its worker stops while the raylet is "
                   "still stopped; the run ends with `total_steps reached`, exit 0, `node_failures: 1`")
def test_a_hung_impala_node_is_fenced_and_its_later_trajectories_count_nowhere(watch, tmp_path, logdir,
                                                                             full_cluster):
    config = impala_config(full_cluster.address, total_steps=HUNG_RUN_STEPS // 2)
    config["env"] = {**config["env"], "id": "fault_envs:SlowStepCartPole-v0", "kwargs": {"step_s": 0.001}}
    run, run_dir = _start(watch, tmp_path, logdir, config)
    _hang_a_node_until_the_run_ends(full_cluster, run, run_dir, HUNG_RUN_STEPS // 2,
                                    r"^node group \d \(actors \d-\d\) was lost: .*; 2 of 3 groups go on$")


@pytest.mark.fault("R", "SIGKILL of the actor of IMPALA's learners' group (on the head) mid-run",
                   "exit 1 with one line naming the learners' group; the checkpoint holds the summary's counts; no "
                   "node group left")
def test_losing_the_learners_group_stops_the_run_with_its_checkpoint(watch, tmp_path, logdir, full_cluster):
    run, run_dir = _start(watch, tmp_path, logdir, impala_config(full_cluster.address))
    _kill_the_actor_on_the_head(full_cluster, "ray::NodeGroup")  # the learners' group
    assert run.finish() == 1, run.stderr
    run.wait_for(r"^stopping the run: node group 2 \(learners 0-0\), the central one, was lost: .*; the last "
                 r"checkpoint is kept, and train --resume continues from it$")
    summary = _summary(run_dir)
    assert summary["stop_reason"] == "backend failure" and summary["node_failures"] == 1
    assert load_checkpoint(run_dir / "checkpoints" / "checkpoint.npz")["run"]["env_steps"] == summary["env_steps"] > 0
    assert wait_until(lambda: not _groups(full_cluster), 15), "node groups outlived the run"


@pytest.mark.fault("10", "`trainer.ray.learner_node` naming a node the cluster does not have; then a node it has",
                   "exit 2, one line naming the key and what is allowed, no run directory; with a node's id the "
                   "learners' group runs on that node beside the actors' groups")
def test_the_learners_run_on_the_node_learner_node_names(watch, tmp_path, logdir, full_cluster):
    config = impala_config(full_cluster.address)
    config["trainer"]["ray"]["learner_node"] = "10.255.255.1"
    done = run_cli(watch, "--config", write_config(tmp_path / "c.yaml", config), "--logdir", logdir)
    assert done.returncode == 2 and list(logdir.iterdir()) == []
    assert done.stderr == ("train: error: config key 'trainer.ray.learner_node': got '10.255.255.1'; allowed: null "
                           "(the head node), or the id or IP address of a live node of the Ray cluster\n")
    chosen = max(full_cluster.worker_nodes, key=lambda node: node.node_id)  # the actors take the first two ids
    config["trainer"]["ray"]["learner_node"] = chosen.node_id
    run, _ = _start(watch, tmp_path, logdir, config)
    groups = _running_groups(full_cluster, 3)  # the actors' two and, on the chosen node, the learners'
    head = full_cluster.head_node.all_processes["raylet"][0].process.pid
    assert not [pid for pid in children(head) if cmdline(pid).startswith("ray::NodeGroup")]
    run.proc.send_signal(signal.SIGTERM)
    assert run.finish() == 0, run.stderr
    assert still_alive([pid for actor, workers in groups.values() for pid in (actor, *workers)], 15) == []
