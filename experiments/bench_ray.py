"""Benchmark: the ray backend on simulated nodes against the local backend, and what an exchange costs.

1. Training: `configs/a3c_ray.yaml` (CartPole-v1) with the same total workers
   (--workers, default 4) three ways: the local backend; the ray backend on 1
   simulated node; on 2 simulated nodes (each its own raylet with 1 CPU). Per
   run: env steps/s, seconds to mean(last 100) >= 475, staleness, exchange
   time, and env steps per CPU-second of the whole process tree (train, Ray's
   processes and the workers: simulated nodes share this machine's cores, so
   steps/s alone flatters nobody).
2. The exchange: a node actor on one simulated node pushes a delta to the
   parameter server (on the head) and pulls the parameters, for the CartPole
   model and a 10 MB model: the round trip as a node sees it, its share of a
   node's time at sync_every_s 0.05, and the server's throughput when 2
   nodes push back to back.
3. On paper: 10 and 100 nodes from the measured server throughput and bytes
   per exchange, and where one server stops keeping up (sharding).
4. Actor-learner: `configs/impala_ray.yaml` (IMPALA, CartPole-v1) with the
   same actors (--actors, default 2) and one learner, for a fixed time, three
   ways as in 1: env steps/s, the learner's updates/s and busy share, the
   policy lag, and the relay (ms per trajectory batch, node to learners).
5. On paper, from 4: N nodes of C cores feeding one learners' node, the
   env steps/s to expect and where the learners or the relay saturate.

Writes experiments/results/ray.md and ray.png (return against wall time of
each run). The figures mean something on a quiet machine only: the result
file records the load average before and after.

Run: python -m experiments.bench_ray [--seeds 3] [--max-seconds 120] [--reps 200] [--al-seconds 30]
     python -m experiments.bench_ray --seeds 1 --max-seconds 5 --reps 10 --al-seconds 5 --print-only
     (a check that it runs)
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from experiments.common import (REPO, RESULTS, markdown_table, plot_return_curves, return_curve, scalar_events,
                                steady_mean, write_result)

CONFIG = REPO / "configs" / "a3c_ray.yaml"
AL_CONFIG = REPO / "configs" / "impala_ray.yaml"
BIG_BATCH = 8
"""batch_trajectories of the actor-learner setup that measures how the relay's cost grows with a batch."""
SYNC_EVERY_S = 0.05
BIG_MODEL_BYTES = 10 << 20
LINK_BYTES_PER_S = 1.25e9
"""A 10 Gbit/s link, for the paper estimate of a server's network."""


# -- 1. training -------------------------------------------------------------------------------------
def setups(workers: int) -> dict[str, list[str]]:
    """The three ways to run the same total workers, as --set overrides of configs/a3c_ray.yaml."""
    return {
        "local": ["trainer.backend=local", f"trainer.workers={workers}"],
        "ray, 1 node": ["trainer.backend=ray", f"trainer.workers={workers}", "trainer.ray.nodes=1",
                        f"trainer.ray.workers_per_node={workers}"],
        "ray, 2 nodes": ["trainer.backend=ray", f"trainer.workers={workers}", "trainer.ray.nodes=2",
                         f"trainer.ray.workers_per_node={workers // 2}"],
    }


def cpu_seconds_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_train(overrides: list[str], seed: int, max_seconds: float, logdir: Path, config: Path = CONFIG) -> dict:
    """One `train` run; its summary, the CPU seconds of its process tree and its return curve."""
    command = [sys.executable, "-m", "framework.train", "train", "--config", str(config), "--logdir", str(logdir),
               "--set", f"seed={seed}", "--set", f"trainer.max_seconds={max_seconds}",
               "--set", "logging.progress=false", "--set", "logging.log_every_s=0.25"]
    for text in overrides:
        command += ["--set", text]
    before = cpu_seconds_of_children()
    done = subprocess.run(command, capture_output=True, text=True, timeout=max_seconds + 300, cwd=REPO)
    cpu = cpu_seconds_of_children() - before
    if done.returncode != 0:
        raise RuntimeError(f"train failed ({done.returncode}):\n{done.stderr[-2000:]}")
    run_dir = next(p for p in logdir.iterdir() if p.is_dir())
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"summary": summary, "cpu_s": cpu, "curve": return_curve(run_dir, summary["started_at"]), "run_dir": run_dir}


# -- 2. the exchange ---------------------------------------------------------------------------------
def cartpole_model_floats() -> int:
    from framework import algorithms
    from framework.train.config import load_config
    config = load_config(CONFIG)
    return algorithms.get("a3c").build_model(config).share_memory().arena.numel


def measure_exchange(floats_by_name: dict[str, int], reps: int) -> dict[str, dict[str, float]]:
    """Per model: median and 90th percentile round trip from a node actor, and the server's throughput."""
    import ray
    from ray.cluster_utils import Cluster
    from framework.train.backends.ray_cluster import HEAD, OBJECT_STORE_BYTES, SIMULATED_CLUSTER_CONFIG
    from framework.train.backends.ray_server import ParameterServer

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "log_to_stderr": False,
        "object_store_memory": OBJECT_STORE_BYTES, "_system_config": SIMULATED_CLUSTER_CONFIG})
    nodes = [cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE_BYTES, log_to_stderr=False)
             for _ in range(2)]
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)

    @ray.remote(num_cpus=0)
    class Pusher:
        """What a node group does in an exchange, timed."""

        def __init__(self, floats: int, server):
            self.server, self.delta = server, np.full(floats, 1e-6, dtype=np.float32)
            self.version = 0

        def round_trips(self, reps: int) -> list[float]:
            report = {"counters": np.zeros((2, 7), np.int64), "metric_sums": np.zeros((2, 5)), "episodes": [],
                      "exits": [], "exchange_s": 0.0, "relay": {}, "optimizer": None, "buffers": None}
            times = []
            for _ in range(reps):
                started = time.perf_counter()
                params, self.version, _, _ = ray.get(self.server.exchange.remote(id(self), self.delta, self.version,
                                                                                 report))
                times.append(time.perf_counter() - started)
            return times

    results = {}
    try:
        for name, floats in floats_by_name.items():
            server = ray.remote(ParameterServer).options(num_cpus=0, resources={HEAD: 0.001}).remote(
                np.zeros(floats, np.float32), 0)
            pushers = [Pusher.options(scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                node.node_id, soft=False)).remote(floats, server) for node in nodes]
            ray.get(pushers[0].round_trips.remote(3))  # warm up
            alone = ray.get(pushers[0].round_trips.remote(reps))
            started = time.perf_counter()
            both = ray.get([p.round_trips.remote(reps) for p in pushers])
            wall = time.perf_counter() - started
            results[name] = {"floats": floats, "bytes": 4 * floats,
                             "median_ms": 1000 * statistics.median(alone),
                             "p90_ms": 1000 * float(np.percentile(alone, 90)),
                             "server_per_s": sum(len(t) for t in both) / wall}
            for actor in [*pushers, server]:
                ray.kill(actor)
    finally:
        ray.shutdown()
        cluster.shutdown()
    return results


# -- 3. on paper -------------------------------------------------------------------------------------
def server_cost(exchange: dict[str, dict[str, float]]) -> tuple[float, float]:
    """(seconds per exchange whatever its size, bytes per second) of the server, fitted to the two models."""
    (small, big) = sorted(exchange.values(), key=lambda e: e["bytes"])
    t_small, t_big = 1 / small["server_per_s"], 1 / big["server_per_s"]
    rate = (big["bytes"] - small["bytes"]) / max(t_big - t_small, 1e-9)
    return max(t_small - small["bytes"] / rate, 0.0), rate


def estimate(model_bytes: int, nodes: int, fixed_s: float, rate: float) -> list[str]:
    """What `nodes` pushing every SYNC_EVERY_S ask of the server: its load alone, and the shards (parameter
    ranges, each its own actor) that bring each under half busy, or the sync period needed when the fixed cost
    of a call, which sharding does not divide, is too much already."""
    demand = nodes / SYNC_EVERY_S
    busy = demand * (fixed_s + model_bytes / rate)
    link = demand * 2 * model_bytes / LINK_BYTES_PER_S
    if demand * fixed_s >= 0.5:
        advice = (f"not enough: sync_every_s >= {2 * nodes * fixed_s:.2f} s with enough shards, "
                  f">= {2 * nodes * (fixed_s + model_bytes / rate):.2f} s with one server")
    else:
        shards = 1
        while demand * (fixed_s + model_bytes / (shards * rate)) > 0.5 or link / shards > 0.5:
            shards += 1
        advice = "no" if shards == 1 else f"{shards} shards"
    return [f"{demand:,.0f}", f"{busy:.0%}", f"{link:.0%}", advice]


# -- 4. actor-learner --------------------------------------------------------------------------------
def actor_learner_setups(actors: int) -> dict[str, list[str]]:
    """configs/impala_ray.yaml's actors and learner three ways, run for a fixed time (no return target)."""
    fixed = ["trainer.target_return=null", f"trainer.workers={actors}"]
    return {
        "local": [*fixed, "trainer.backend=local"],
        "ray, 1 node": [*fixed, "trainer.ray.nodes=1", f"trainer.ray.workers_per_node={actors}"],
        "ray, 2 nodes": [*fixed, "trainer.ray.nodes=2", f"trainer.ray.workers_per_node={actors // 2}"],
        f"ray, 2 nodes, batches of {BIG_BATCH}": [*fixed, "trainer.ray.nodes=2",
                                                 f"trainer.ray.workers_per_node={actors // 2}",
                                                 f"algorithm.batch_trajectories={BIG_BATCH}",
                                                 f"algorithm.slots_per_actor={BIG_BATCH}"],
    }


def actor_learner_figures(run_dir: Path, warmup_s: float, trajectory_steps: int,
                          batch: int) -> dict[str, float | None]:
    """What one run measured once past warmup_s of logging (start-up left out): env steps/s; the learner's
    updates/s and the share of the time it was not waiting for trajectories; the trajectories/s it would take when
    never waiting (its capacity); the policy lag; the relay's ms per batch (a node's round trip, and the learners'
    group's time storing it) and trajectories per batch (ray runs)."""
    waits = scalar_events(run_dir, "perf/learner_wait_s")
    waits = [e for e in waits if e.wall_time - waits[0].wall_time >= warmup_s]
    busy = max(1e-9, 1.0 - (waits[-1].value - waits[0].value) / max(waits[-1].wall_time - waits[0].wall_time, 1e-9))
    updates_per_s = steady_mean(run_dir, "perf/updates_per_s", warmup_s)
    relayed, batches = (steady_mean(run_dir, tag, warmup_s)
                        for tag in ("ray/relayed_per_s", "ray/relay_batches_per_s"))
    return {"steps_per_s": steady_mean(run_dir, "perf/env_steps_per_s", warmup_s), "updates_per_s": updates_per_s,
            "busy": busy, "capacity": updates_per_s * batch / busy, "trajectory_steps": trajectory_steps,
            "lag": steady_mean(run_dir, "perf/policy_lag", warmup_s),
            "relay_ms": steady_mean(run_dir, "ray/relay_ms", warmup_s),
            "store_ms": steady_mean(run_dir, "ray/deliver_ms", warmup_s),
            "per_batch": relayed / batches if relayed and batches else None}



# -- 5. on paper ------------------------------------------------------------------------------------
def scaling_rows(setup: str, per_core: float, figures: dict[str, float | None], cores: int,
                 plans: tuple[tuple[int, int], ...]) -> list[list[str]]:
    """For each (nodes, learners) plan: nodes of `cores` cores, an actor a core at the measured env steps/s per
    actor core, feeding `learners` Hogwild learners of the measured capacity (counted as if they added up) through
    the learners' group, which takes batches one after the other at the measured time per batch: between its own
    storing time (batches arriving back to back) and a node's whole round trip (each call waited out). The env
    steps/s the actors ask, the ceilings of the learners and of the relay, what to expect, and what limits it."""
    steps, per_batch = figures["trajectory_steps"], figures["per_batch"] * figures["trajectory_steps"]
    relay_low, relay_high = 1000 / figures["relay_ms"] * per_batch, 1000 / figures["store_ms"] * per_batch
    rows = []
    for nodes, learners in plans:
        asked = nodes * cores * per_core
        learner_cap = learners * figures["capacity"] * steps
        low, high = min(asked, learner_cap, relay_low), min(asked, learner_cap, relay_high)
        limit = ("actors" if low == asked else "learners" if learner_cap <= relay_low
                 else "relay" if relay_high <= learner_cap else "relay, then learners")
        rows.append([setup, f"{nodes}", f"{cores}", f"{learners}", f"{asked:,.0f}", f"{learner_cap:,.0f}",
                     f"{relay_low:,.0f} - {relay_high:,.0f}", f"{low:,.0f} - {high:,.0f}", limit])
    return rows


# -- the report --------------------------------------------------------------------------------------
def plot(runs: dict[str, list[dict]], path: Path) -> None:
    colors = ("tab:gray", "tab:blue", "tab:orange")
    series = [(name, color, [run["curve"] for run in seeds]) for (name, seeds), color in zip(runs.items(), colors)]
    plot_return_curves(series, "A3C on CartPole-v1, same total workers",
                       "wall seconds since the run started (node groups' start-up included)", path)


def fmt(x: float | None, spec: str = ",.1f", unit: str = "") -> str:
    return "n/a" if x is None else f"{x:{spec}}{unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="runs per setup, seeds 0..N-1 (default 3)")
    parser.add_argument("--max-seconds", type=float, default=120.0, help="trainer.max_seconds of each run")
    parser.add_argument("--workers", type=int, default=4, help="total workers of every setup (even; default 4)")
    parser.add_argument("--reps", type=int, default=200, help="exchanges timed per model (default 200)")
    parser.add_argument("--actors", type=int, default=2, help="actors of every actor-learner setup (even; default 2)")
    parser.add_argument("--al-seconds", type=float, default=30.0, help="seconds of each actor-learner run")
    parser.add_argument("--print-only", action="store_true", help="print the report; write no file")
    args = parser.parse_args()
    load_before = os.getloadavg()

    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, overrides in setups(args.workers).items():
            runs[name] = []
            for seed in range(args.seeds):
                logdir = Path(tmp) / f"{name.replace(' ', '').replace(',', '-')}-{seed}"
                runs[name].append(run_train(overrides, seed, args.max_seconds, logdir))
                s = runs[name][-1]["summary"]
                print(f"{name}, seed {seed}: {s['steps_per_second']:,.0f} steps/s, solved at "
                      f"{s['solved_at_seconds']} s, {runs[name][-1]['cpu_s']:.1f} CPU s", flush=True)
        from framework.train.config import load_config
        al_config = load_config(AL_CONFIG)
        trajectory_steps = al_config["algorithm"]["n_steps"] * al_config["env"]["envs_per_worker"]
        batch = al_config["algorithm"]["batch_trajectories"]
        al = {}
        for name, overrides in actor_learner_setups(args.actors).items():
            logdir = Path(tmp) / f"impala-{name.replace(' ', '').replace(',', '-')}"
            run = run_train(overrides, 0, args.al_seconds, logdir, AL_CONFIG)
            batch_set = [int(o.split("=")[1]) for o in overrides if o.startswith("algorithm.batch_trajectories=")]
            al[name] = actor_learner_figures(run["run_dir"], args.al_seconds / 3, trajectory_steps,
                                             batch_set[0] if batch_set else batch)
            print(f"IMPALA, {name}: {json.dumps(al[name])}", flush=True)
    floats = {"CartPole model": cartpole_model_floats(), "10 MB model": BIG_MODEL_BYTES // 4}
    exchange = measure_exchange(floats, args.reps)
    print(json.dumps(exchange, indent=1), flush=True)
    load_after = os.getloadavg()

    rows = []
    for name, seeds in runs.items():
        summaries = [r["summary"] for r in seeds]
        solves = [s["solved_at_seconds"] for s in summaries]
        staleness = [s["staleness_mean"] for s in summaries if s.get("staleness_mean") is not None]
        exchange_ms = [s["exchange_ms_mean"] for s in summaries if s.get("exchange_ms_mean") is not None]
        per_cpu = [s["env_steps"] / r["cpu_s"] for s, r in zip(summaries, seeds) if r["cpu_s"] > 0]
        rows.append([name, fmt(statistics.median(s["steps_per_second"] for s in summaries), ",.0f"),
                     fmt(statistics.median(solves) if None not in solves else None, ".1f", " s")
                     + ("" if None not in solves else f" ({sum(t is not None for t in solves)} of {len(solves)})"),
                     fmt(statistics.median(staleness) if staleness else None, ".2f"),
                     fmt(statistics.median(exchange_ms) if exchange_ms else None, ".2f", " ms"),
                     fmt(statistics.median(per_cpu) if per_cpu else None, ",.0f")])
    training = markdown_table(["setup", "env steps/s", "seconds to 475", "staleness (pushes)", "exchange",
                               "env steps per CPU-second"], rows)
    cost = markdown_table(
        ["model", "bytes", "round trip, median", "p90", "share of a node's time at 0.05 s",
         "server: exchanges/s (2 nodes back to back)"],
        [[name, f"{e['bytes']:,}", f"{e['median_ms']:.2f} ms", f"{e['p90_ms']:.2f} ms",
          f"{e['median_ms'] / (1000 * SYNC_EVERY_S + e['median_ms']):.1%}", f"{e['server_per_s']:,.0f}"]
         for name, e in exchange.items()])
    fixed_s, rate = server_cost(exchange)
    paper = markdown_table(
        ["model", "nodes", "exchanges/s asked of one server", "server busy", "server link (10 Gbit/s) busy",
         "shard the server?"],
        [[name, nodes, *estimate(e["bytes"], nodes, fixed_s, rate)] for name, e in exchange.items()
         for nodes in (10, 100)])
    al_table = markdown_table(
        ["setup", "env steps/s", "learner updates/s", "learner busy", "learner capacity (trajectories/s)",
         "policy lag (updates)", "relay: round trip per batch", "relay: storing per batch", "trajectories per batch"],
        [[name, fmt(f["steps_per_s"], ",.0f"), fmt(f["updates_per_s"], ",.1f"), f"{f['busy']:.0%}",
          fmt(f["capacity"], ",.0f"), fmt(f["lag"], ".1f"), fmt(f["relay_ms"], ".2f", " ms"),
          fmt(f["store_ms"], ".2f", " ms"), fmt(f["per_batch"], ".2f")] for name, f in al.items()])
    cores = os.cpu_count() or 1  # the local run's actors had the cores the learner left them
    per_core = al["local"]["steps_per_s"] / max(cores - al["local"]["busy"], 1.0)
    plans = ((1, 1), (4, 1), (4, 4), (16, 8), (64, 16))
    scaling = markdown_table(
        ["measured setup", "nodes", "cores each", "learners", "env steps/s the actors ask", "learners' ceiling",
         "relay's ceiling", "env steps/s to expect", "limited by"],
        [row for name in ("ray, 2 nodes", f"ray, 2 nodes, batches of {BIG_BATCH}")
         for row in scaling_rows(name, per_core, al[name], 16, plans)])
    sections = [
        f"`train --config configs/a3c_ray.yaml` with {args.workers} workers in all, {args.seeds} seed(s) per setup, "
        f"trainer.max_seconds {args.max_seconds:g}: the local backend, and the ray backend on 1 and 2 simulated "
        f"nodes of this machine (each its own raylet with 1 CPU). Seconds count from the start of the run, once "
        f"Ray runs (the node groups' own start-up included). CPU-seconds are those of the whole process tree. Load average (1, 5, 15 min) "
        f"before: {', '.join(f'{x:.2f}' for x in load_before)}; after: "
        f"{', '.join(f'{x:.2f}' for x in load_after)}.",
        training,
        "The exchange: a node actor on a simulated node pushes a delta and pulls the parameters from the "
        f"parameter server on the head ({args.reps} round trips alone; then 2 nodes back to back, which gives "
        "the server's throughput). The share of a node's time is round trip / (sync period + round trip).",
        cost,
        f"On paper: every node pushes every {SYNC_EVERY_S} s, so the server must apply nodes / {SYNC_EVERY_S} "
        "exchanges per second and move twice the model per exchange (delta in, parameters out). The server's "
        f"time per exchange, fitted to the two models' throughputs, is {1000 * fixed_s:.2f} ms whatever the "
        f"size plus {rate / 1e6:,.0f} MB/s. 'Busy' is the demand times that time (and twice the model over a "
        "10 Gbit/s link); past about half, pushes queue and staleness grows. Splitting the parameters into "
        "ranges, each its own server actor (on its own machine), divides the per-byte part and the link; the "
        "fixed part of a call it does not divide, since every node still calls every shard: then only a longer "
        "sync period (or fewer, bigger nodes) helps.",
        paper,
        "![mean return of the last 100 episodes against wall time](ray.png)",
        f"Actor-learner: `train --config configs/impala_ray.yaml` (IMPALA, CartPole-v1) with {args.actors} actors "
        f"and 1 learner, {args.al_seconds:g} s each, no return target: the local backend, and the ray backend with "
        "all actors on 1 simulated node or one on each of 2, the learner on the head. Every figure is the mean of "
        f"what the run logged past its first {args.al_seconds / 3:g} s (start-up left out). The learner is busy "
        "when it is not waiting for trajectories (perf/learner_wait_s); its capacity is the trajectories/s it takes "
        "(updates/s x batch_trajectories: a busy learner takes full batches) divided by that share: what it would "
        "take if it never waited. The relay is a node's call that hands a batch to the learners' group: its round "
        "trip as the node times it (ray/relay_ms), and the learners' group's time writing the batch into its buffer "
        f"(ray/deliver_ms). The last setup takes batches of {BIG_BATCH} trajectories (slots_per_actor "
        f"{BIG_BATCH}), to show how the relay's and the learner's costs grow with a batch. All of it shares this "
        "machine's 2 cores with other work: these are figures of a loaded machine, not of a cluster.",
        al_table,
        "On paper, from the two 2-node rows (a model, not a measurement): N nodes of 16 cores run an actor a core "
        f"at {per_core:,.0f} env steps/s each (the local run's env steps/s over the {cores} cores less the share "
        f"its learner was busy); a trajectory is {trajectory_steps} env steps. The learners take at most learners x "
        "the measured capacity of one (Hogwild learners counted as if they added up, which on one node's memory "
        "bandwidth they do not quite). The learners' group takes the nodes' batches one after the other: at best one "
        "per storing time (calls arriving back to back, their transfer overlapping the storing), at worst one per "
        "round trip (each call waited out); its ceiling is given as that range. Expected env steps/s is the least "
        "of the actors' demand and the two ceilings.",
        scaling,
    ]
    if args.print_only:
        print("\n\n".join(sections))
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    plot(runs, RESULTS / "ray.png")
    path = write_result("ray", "The ray backend on simulated nodes, and the cost of its exchange", sections)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
