"""Benchmark: framework.compile against eager execution, on the A3C step and on A3C CartPole training.

1. The A3C step at its own size: an actor-critic 4-128-(2+1) (tanh body), forward
   and backward of the A3C loss (Categorical log-prob, entropy, value loss) at
   batch 1 and 32, compiled and eager in one process, interleaved (round robin;
   medians over the rounds, each ratio taken within a round, so that a change in
   the machine's speed hits both sides alike); and the acting forward (no grad, 16 observations), where
   compile replaced the hand-written array path. Goal: compiled <= 0.5x eager.
2. A3C CartPole training (configs/a3c.yaml: 2 workers, 16 envs each, no return
   target so runs last the budget): env steps/s with `trainer.compile` true and
   false and `env.vectorize` true and false (one vector env or a loop of
   envs), runs alternating, the rate read from TensorBoard's
   perf/env_steps_per_s after the first third of each run (past start-up);
   against the environments alone, stepped alike, with random actions in 2
   processes.
   Then where one worker's time goes, in one process (`worker_breakdown`, both
   env paths): what the worker's own work (acting, learning, the rest of an
   update) costs per env step next to stepping the envs, so the share of the
   envs alone a worker can give at most.
3. Guards during real training: the same runs with
   HOGSHARE_LOGS=recompiles,graph_breaks,guards, counting from the workers' logs
   the graphs captured, every guard failure (with its reason) and every break;
   and one in-process worker (MLP and LSTM) whose counters after its first
   update (warm-up) and after the rest say whether any guard fired later.

Writes experiments/results/compile.md. Bounded: about six minutes.
Run: python experiments/bench_compile.py [--seconds 15] [--runs 3]
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402 - after pinning BLAS to one thread, as workers do

from common import REPO, a3c_worker, load, markdown_table, worker_breakdown, write_result  # noqa: E402

sys.path.insert(0, str(REPO))
import framework  # noqa: E402
from framework import compiler  # noqa: E402
from framework.rl.model import ActorCritic  # noqa: E402
from framework.algorithms.a3c.worker import a3c_loss  # noqa: E402

CONFIG = REPO / "configs" / "a3c.yaml"
STEP_HEADER = ["", "eager us", "compiled us", "compiled / eager", "NumPy by hand us"]
LOG_LINE = re.compile(r"^\[hogshare framework\.compiler\.(?P<artifact>\w+)\] (?P<message>.*)$")


# ---- 1. the step ------------------------------------------------------------------------------------------

def interleaved(variants: dict, iterations: int, rounds: int) -> dict:
    """Seconds per call of each variant in each round, timed round robin so load changes hit them alike."""
    times: dict = {name: [] for name in variants}
    for fn in variants.values():
        for _ in range(20):
            fn()
    for _ in range(rounds):
        for name, fn in variants.items():
            start = time.perf_counter()
            for _ in range(iterations):
                fn()
            times[name].append((time.perf_counter() - start) / iterations)
    return times


def step_row(label: str, times: dict, by_hand: str = "") -> list:
    """A table row: median eager and compiled microseconds, and the median of the rounds' ratios."""
    ratio = statistics.median(c / e for c, e in zip(times["compiled"], times["eager"]))
    eager, compiled = (statistics.median(times[name]) * 1e6 for name in ("eager", "compiled"))
    return [label, f"{eager:.1f}", f"{compiled:.1f}", f"{ratio:.2f}x", by_hand]


def step_rows(rounds: int) -> list:
    rows = []
    for batch in (1, 32):
        framework.manual_seed(0)
        model = ActorCritic(4, [128], "tanh", False, 2, False)
        rng = np.random.default_rng(0)
        data = (framework.tensor(rng.standard_normal((batch, 4)).astype(np.float32)),
                framework.tensor(rng.integers(0, 2, batch)),
                framework.tensor(rng.standard_normal(batch).astype(np.float32)),
                framework.tensor(rng.standard_normal(batch).astype(np.float32)))

        def loss(obs, actions, adv, targets):
            head, values, _ = model(obs)
            return a3c_loss(model, head, values, actions, adv, targets, batch, 0.5, 0.01)
        compiled = framework.compile(loss)
        times = interleaved({"eager": lambda: loss(*data)[0].backward(),
                             "compiled": lambda: compiled(*data)[0].backward()}, 300, rounds)
        rows.append(step_row(f"A3C loss forward+backward, batch {batch}", times))
    obs = np.random.default_rng(1).standard_normal((16, 4)).astype(np.float32)
    acting = framework.compile(model.policy)
    (w1, b1), (w2, b2) = [(layer.weight.data_array, layer.bias.data_array) for layer in (model.body[0], model.pi)]

    def by_hand():  # what the retired Module.forward_array path computed, without its method calls
        return np.tanh(obs @ w1.T + b1) @ w2.T + b2
    with framework.no_grad():
        times = interleaved({"eager": lambda: model.policy(framework.as_tensor(obs)),
                             "compiled": lambda: acting(framework.as_tensor(obs))[0].data_array,
                             "by hand": by_hand}, 1000, rounds)
    rows.append(step_row("acting forward (no grad), 16 observations", times,
                         f"{statistics.median(times['by hand']) * 1e6:.1f}"))
    return rows


# ---- 2 and 3. training ------------------------------------------------------------------------------------

SETTINGS = [(True, True), (False, True), (True, False), (False, False)]
"""(trainer.compile, env.vectorize) of the training runs."""


def setting_name(compile_on: bool, vectorize: bool) -> str:
    return f"trainer.compile={str(compile_on).lower()}, env.vectorize={str(vectorize).lower()}"


def train(compile_on: bool, vectorize: bool, seconds: float, logdir: Path) -> dict:
    """One CartPole run; its steady env steps/s and what the compiler logged in the workers."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOGSHARE_LOGS": "recompiles,graph_breaks,guards"}
    command = [sys.executable, "-m", "framework.train", "train", "--config", str(CONFIG), "--logdir", str(logdir),
               "--set", f"trainer.compile={str(compile_on).lower()}",
               "--set", f"env.vectorize={str(vectorize).lower()}",
               "--set", f"trainer.max_seconds={seconds}",
               "--set", "trainer.target_return=null", "--set", "logging.progress=false",
               "--set", "logging.log_every_s=0.5", "--set", "trainer.checkpoint_every_s=1000"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120, env=env, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"train failed ({done.returncode}):\n{done.stderr[-3000:]}")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    run_dir = next(p for p in logdir.iterdir() if p.is_dir())
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    rates = [e.value for e in events.Scalars("perf/env_steps_per_s")]
    logs = collections.Counter()
    for line in done.stderr.splitlines():
        match = LOG_LINE.match(line)
        if match:
            message = match["message"]
            if match["artifact"] == "recompiles":
                message = "recompile: " + message.split("guard failed: ", 1)[-1]
            elif match["artifact"] == "guards":
                message = "graph captured: " + message.split(" (", 1)[0].replace("GUARDS for ", "")
            logs[message] += 1
    return {"rate": statistics.median(rates[len(rates) // 3:]), "logs": logs}


def _step_envs(seconds: float, vectorize: bool, queue: "multiprocessing.Queue") -> None:
    from framework.rl.envs import EnvBatch
    envs = EnvBatch("CartPole-v1", {}, 16, seed=0, vectorize=vectorize)
    rng = np.random.default_rng(0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        envs.step(rng.integers(0, 2, 16))
        steps += 16
    queue.put(steps / (time.perf_counter() - start))
    envs.close()


def envs_alone(seconds: float, vectorize: bool, processes: int = 2) -> float:
    """Env steps/s of EnvBatch(16 CartPole envs) stepping random actions in `processes` processes at once."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    workers = [context.Process(target=_step_envs, args=(seconds, vectorize, queue)) for _ in range(processes)]
    for w in workers:
        w.start()
    total = sum(queue.get() for _ in workers)
    for w in workers:
        w.join()
    return total


def vector_entry_point(seconds: float) -> float:
    """Env steps/s of gymnasium's CartPoleVectorEnv (16 envs) alone, in this process."""
    import gymnasium as gym
    envs = gym.make_vec("CartPole-v1", num_envs=16, vectorization_mode="vector_entry_point")
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        envs.step(rng.integers(0, 2, 16))
        steps += 16
    envs.close()
    return steps / (time.perf_counter() - start)


def time_split(seconds: float) -> tuple[list, dict]:
    """Rows of a worker's time per env step (configs/a3c.yaml, compiled, one process; see `worker_breakdown`)
    as one vector env and as a loop, and each path's breakdown with its share of the envs alone at most
    (env / update) and the own work that 80% would leave (a quarter of the env step), in us."""
    rows, split = [], {}
    for vectorize in (True, False):
        b = worker_breakdown("a3c.yaml", [f"env.vectorize={str(vectorize).lower()}"], seconds)
        us = {key[:-3]: b[key] * 1000 for key in ("env_ms", "act_ms", "learn_ms", "other_ms", "update_ms")}
        split[vectorize] = {**us, "own": us["update"] - us["env"], "share": us["env"] / us["update"],
                            "budget": us["env"] / 4}
        rows.append(["one vector env" if vectorize else "a loop of envs"] +
                    [f"{split[vectorize][key]:.1f}" for key in ("env", "act", "learn", "other", "update", "own")] +
                    [f"{split[vectorize]['share']:.0%}", f"{split[vectorize]['budget']:.1f}"])
    return rows, split


def worker_counters(lstm: bool, updates: int) -> list:
    """Compiler counters of one in-process A3C worker: after its first update, and after `updates` more."""
    worker = a3c_worker(CONFIG.name, [f"model.lstm={str(lstm).lower()}"])
    compiler.reset()  # before the first call: building a worker captures nothing
    worker.update()
    warm = dict(compiler.counters)
    for _ in range(updates):
        worker.update()
    worker.envs.close()
    after = dict(compiler.counters)
    keys = ("captures", "recompiles", "guard_failures", "graph_breaks", "cache_hits")
    return [[f"{'LSTM' if lstm else 'MLP'} worker, first update"] + [warm[k] for k in keys],
            [f"{'LSTM' if lstm else 'MLP'} worker, {updates} updates after it"] +
            [after[k] - warm[k] for k in keys]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="budget of each training run")
    parser.add_argument("--runs", type=int, default=3, help="training runs per setting (alternating)")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds of the step timings")
    args = parser.parse_args()
    started = load()

    steps = step_rows(args.rounds)
    print(markdown_table(STEP_HEADER, steps), flush=True)

    rates: dict[tuple[bool, bool], list[float]] = {setting: [] for setting in SETTINGS}
    logs: collections.Counter = collections.Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            for compile_on, vectorize in SETTINGS:
                result = train(compile_on, vectorize, args.seconds, Path(tmp) / f"{compile_on}-{vectorize}-{run}")
                rates[compile_on, vectorize].append(result["rate"])
                if compile_on:
                    logs.update(result["logs"])
                print(f"{setting_name(compile_on, vectorize)}: {result['rate']:.0f} env steps/s", flush=True)
    alone = {vectorize: envs_alone(5.0, vectorize) for vectorize in (True, False)}
    rows_split, split = time_split(5.0)
    vector = vector_entry_point(5.0)
    rows = []
    for (compile_on, vectorize), runs in rates.items():
        median = statistics.median(runs)
        rows.append([setting_name(compile_on, vectorize), f"{median:,.0f}", ", ".join(f"{r:,.0f}" for r in runs),
                     f"{median / alone[vectorize]:.0%}"])
    rows += [["environments alone: EnvBatch, 16 envs as one vector env, 2 processes", f"{alone[True]:,.0f}", "",
              "100%"],
             ["environments alone: EnvBatch, a loop of 16 envs, 2 processes", f"{alone[False]:,.0f}", "", "100%"]]
    training = markdown_table(
        ["setting", "env steps/s (median of runs)", "runs", "share of the envs alone, stepped alike"], rows)
    guard_rows = [[message, count] for message, count in sorted(logs.items())]
    counters = worker_counters(False, 40) + worker_counters(True, 10)
    finished = load()

    write_result("compile", "framework.compile: compiled against eager", [
        f"Load while measuring: {started} at the start, {finished} at the end (a machine shared with other "
        "work: figures are medians of interleaved rounds, ratios taken within a round, or medians of "
        "alternating runs).",
        "## The A3C step (actor-critic 4-128-(2+1), tanh), one process, interleaved\n\n" + markdown_table(
            STEP_HEADER, steps) +
        "\n\nGoal: compiled <= 0.5x eager. Forward and backward of the loss; eager builds a Tensor and a "
        "closure per op and walks the graph, compiled replays generated array code (guards, forward, one "
        "backward program). Acting is `ActorCritic.policy` under no_grad, which replaced the hand-written "
        "array path (`Module.forward_array`); NumPy by hand is that path's arithmetic alone, the floor any "
        "acting path pays (the array path added its method calls on top).",
        f"## A3C CartPole training, {args.seconds:g} s runs\n\n" + training +
        f"\n\nThe environments alone: EnvBatch stepping 16 CartPole envs with random actions, in 2 processes at "
        f"once (the workers' layout), as one vector env (gymnasium's CartPoleVectorEnv, resetting in the same "
        f"step) or as a loop of envs. gymnasium's CartPoleVectorEnv itself (16 envs, NEXT_STEP resets) steps "
        f"{vector:,.0f} steps/s in one process here. Goal: training at 80% or more of the environments alone.",
        "## Where one worker's time goes (configs/a3c.yaml, compiled, in one process)\n\n" + markdown_table(
            ["16 CartPole envs as", "env step us", "acting us", "rollout forward+backward us", "rest of the update us",
             "whole update us", "the worker's own work us", "share of the envs alone at most",
             "own work for 80% us"], rows_split) +
        f"\n\nMicroseconds per env step (see `worker_breakdown` in experiments/common.py): acting is the "
        f"rollout's noise, the policy forward and the sampling; the rest of an update (by difference) its sync, "
        f"advantages, gradient clipping, optimizer step and statistics. A worker gives at most env / update of "
        f"what the envs alone step: {split[True]['share']:.0%} as one vector env, {split[False]['share']:.0%} as "
        f"a loop. 80% would leave its own work a quarter of the env step (last column): "
        f"{split[True]['budget']:.1f} us as one vector env, where acting alone takes {split[True]['act']:.1f} us "
        f"and the rollout's forward+backward {split[True]['learn']:.1f} us.",
        "## Guards in real training (the workers' HOGSHARE_LOGS, all compile=true runs)\n\n" +
        markdown_table(["event", "count"], guard_rows or [["no graph captured", 0]]) +
        "\n\nEach worker captures its three graphs (acting policy, rollout forward, loss) once; any "
        "recompile or break would be listed with its reason.",
        "## Counters of one in-process worker (configs/a3c.yaml, LSTM variant too)\n\n" + markdown_table(
            ["", "captures", "recompiles", "guard failures", "graph breaks", "cache hits"], counters) +
        "\n\nRecompiles after warm-up should be 0: the LSTM forward captures twice in the first update "
        "(state without grad at the first step, with grad after), then only replays.",
    ])


if __name__ == "__main__":
    main()
