"""Benchmark: framework.compile against eager execution, on the A3C step and on A3C CartPole training.

1. The A3C step at its own size: an actor-critic 4-128-(2+1) (tanh body), forward
   and backward of the A3C loss (`rl.losses.actor_critic_loss`: Categorical
   log-prob, entropy, value loss) at batch 1 and 32, compiled and eager in one
   process, interleaved (round robin; medians over the rounds, each ratio taken
   within a round, so that a change in the machine's speed hits both sides
   alike); and the acting forward (no grad, 16 observations), where compile
   replaced the hand-written array path. Goal: compiled <= 0.5x eager.
2. A3C CartPole training (configs/a3c.yaml: 2 workers, 16 envs each, no return
   target so runs last the budget): env steps/s with `trainer.compile` true and
   false and `env.vectorize` true and false (one vector env or a loop of
   envs), and compiled with `model.lstm`, runs alternating, the rate read from
   TensorBoard's perf/env_steps_per_s after the first third of each run (past
   start-up); against the environments alone, stepped alike, with random
   actions in 2 processes. Then where the workers' time went, from the runs'
   own profiles (summary.json's `profile`, seconds per phase summed over the
   worker processes; `common.run_profile`): what acting, learning and the rest
   cost per env step next to stepping the envs, so the share of the envs
   alone a worker can give at most.
3. Guards during real training: the same runs with
   HOGSHARE_LOGS=recompiles,graph_breaks,guards, counting from the workers' logs
   the graphs captured, every guard failure (with its reason) and every break,
   for the MLP and the LSTM model.

Writes experiments/results/compile.md. Bounded: about seven minutes.
Run: python -m experiments.bench_compile [--seconds 15] [--runs 3]
"""
from __future__ import annotations

import argparse
import collections
import json
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

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402 - after pinning BLAS to one thread, as workers do
import yaml  # noqa: E402

import framework  # noqa: E402
from experiments.common import REPO, load, markdown_table, run_profile, write_result  # noqa: E402
from framework.rl.losses import actor_critic_loss  # noqa: E402
from framework.rl.model import ActorCritic  # noqa: E402
from framework.rl.spaces import ActionHead  # noqa: E402

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
    """The A3C loss step at batch 1 and 32 and the acting forward, compiled against eager (and, for acting, the
    arithmetic by hand)."""
    actions_of = ActionHead(gymnasium.spaces.Discrete(2))
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
            return actor_critic_loss(actions_of, model, head, values, actions, adv, targets, batch, 0.5, 0.01)
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

SETTINGS = [(True, True, False), (False, True, False), (True, False, False), (False, False, False), (True, True, True)]
"""(trainer.compile, env.vectorize, model.lstm) of the training runs."""


def setting_name(compile_on: bool, vectorize: bool, lstm: bool) -> str:
    return (f"trainer.compile={str(compile_on).lower()}, env.vectorize={str(vectorize).lower()}"
            + (", model.lstm=true" if lstm else ""))


def train(setting: tuple[bool, bool, bool], seconds: float, logdir: Path) -> dict:
    """One CartPole run: its steady env steps/s, its summary, its workers, and what the compiler logged in them."""
    compile_on, vectorize, lstm = setting
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOGSHARE_LOGS": "recompiles,graph_breaks,guards"}
    command = [sys.executable, "-m", "framework.train", "train", "--config", str(CONFIG), "--logdir", str(logdir),
               "--set", f"trainer.compile={str(compile_on).lower()}",
               "--set", f"env.vectorize={str(vectorize).lower()}", "--set", f"model.lstm={str(lstm).lower()}",
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
    logs: collections.Counter = collections.Counter()
    for line in done.stderr.splitlines():
        match = LOG_LINE.match(line)
        if match:
            message = match["message"]
            if match["artifact"] == "recompiles":
                message = "recompile: " + message.split("guard failed: ", 1)[-1]
            elif match["artifact"] == "guards":
                message = "graph captured: " + message.split(" (", 1)[0].replace("GUARDS for ", "")
            logs[message] += 1
    summary = json.loads((run_dir / "summary.json").read_text())
    workers = yaml.safe_load((run_dir / "config.yaml").read_text())["trainer"]["workers"]
    return {"rate": statistics.median(rates[len(rates) // 3:]), "summary": summary, "workers": workers, "logs": logs}


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


def time_split(summaries: dict[tuple[bool, bool, bool], list[dict]]) -> str:
    """Where the workers' time went in each setting's runs (their profiles, per env step), and what the compiled
    settings' profiles say of the share of the envs alone a worker can give; a note where the runs have none."""
    profiles = {setting: run_profile(runs) for setting, runs in summaries.items()}
    if not all(profiles.values()):
        return ("These runs' summaries hold no `profile` (where the worker processes' time went, summary.json's "
                "`profile`): the framework that ran them did not report it, so nothing here says where their time "
                "went.")
    phases = list(dict.fromkeys(phase for profile in profiles.values() for phase in profile))
    rows = []
    for setting, profile in profiles.items():
        whole = sum(profile.values())
        rows.append([setting_name(*setting), *[f"{profile.get(phase, 0.0):.1f}" for phase in phases],
                     f"{whole:.1f}", f"{profile.get('env', 0.0) / whole:.0%}"])
    table = markdown_table(["setting", *[f"{phase} us" for phase in phases], "all us",
                            "share of the envs alone at most"], rows)
    shown = {vectorize: profiles[True, vectorize, False] for vectorize in (True, False)}
    share = {vectorize: profile.get("env", 0.0) / sum(profile.values()) for vectorize, profile in shown.items()}
    vector = shown[True]
    return (table + "\n\nMicroseconds per env step of a worker, from the runs' own profiles: each phase's "
            "seconds summed over the worker processes of a setting's runs, over their env steps. A worker gives at "
            "most env / all of what the envs alone step; compiled: "
            f"{share[True]:.0%} as one vector env, {share[False]:.0%} as a loop. 80% would leave all but the env "
            f"step a quarter of it: {vector.get('env', 0.0) / 4:.1f} us as one vector env, where acting takes "
            f"{vector.get('act', 0.0):.1f} us and learning {vector.get('learn', 0.0):.1f} us.")


def _times(n: float) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n:g} times")


def guard_section(logs: dict[bool, collections.Counter], workers: dict[bool, int]) -> str:
    """The compiler's logs of the compiled runs, MLP and LSTM, and what each worker captured, in words."""
    kinds = {False: "MLP", True: "LSTM"}
    events = sorted({event for counts in logs.values() for event in counts})
    table = markdown_table(["event", *[f"{kinds[lstm]} runs" for lstm in logs]],
                           [[event, *[counts[event] for counts in logs.values()]] for event in events]
                           or [["no graph captured", *[0 for _ in logs]]])
    said = []
    for lstm, counts in logs.items():
        captured = {event[len("graph captured: "):]: n for event, n in counts.items()
                    if event.startswith("graph captured: ")}
        per_worker = {name: n / workers[lstm] for name, n in captured.items()}
        graphs = ", ".join(f"{name} {_times(n)}" for name, n in per_worker.items())
        others = sum(n for event, n in counts.items() if not event.startswith("graph captured: "))
        said.append(f"the {kinds[lstm]} runs' {workers[lstm]} workers captured, each on average, "
                    f"{graphs or 'no graph'}, and logged {others} recompiles or breaks")
    return (table + "\n\nIn all: " + "; ".join(said) + ". A recompile or a break would be listed with its "
            "reason.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="budget of each training run")
    parser.add_argument("--runs", type=int, default=3, help="training runs per setting (alternating)")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds of the step timings")
    args = parser.parse_args()
    started = load()

    steps = step_rows(args.rounds)
    print(markdown_table(STEP_HEADER, steps), flush=True)

    rates: dict[tuple[bool, bool, bool], list[float]] = {setting: [] for setting in SETTINGS}
    summaries: dict[tuple[bool, bool, bool], list[dict]] = {setting: [] for setting in SETTINGS}
    logs: dict[bool, collections.Counter] = {False: collections.Counter(), True: collections.Counter()}
    workers: dict[bool, int] = {False: 0, True: 0}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            for setting in SETTINGS:
                result = train(setting, args.seconds, Path(tmp) / f"{'-'.join(map(str, setting))}-{run}")
                rates[setting].append(result["rate"])
                summaries[setting].append(result["summary"])
                compile_on, _, lstm = setting
                if compile_on:
                    logs[lstm].update(result["logs"])
                    workers[lstm] += result["workers"]
                print(f"{setting_name(*setting)}: {result['rate']:.0f} env steps/s", flush=True)
    alone = {vectorize: envs_alone(5.0, vectorize) for vectorize in (True, False)}
    vector = vector_entry_point(5.0)
    rows = []
    for (compile_on, vectorize, lstm), runs in rates.items():
        median = statistics.median(runs)
        rows.append([setting_name(compile_on, vectorize, lstm), f"{median:,.0f}", ", ".join(f"{r:,.0f}" for r in runs),
                     f"{median / alone[vectorize]:.0%}"])
    rows += [["environments alone: EnvBatch, 16 envs as one vector env, 2 processes", f"{alone[True]:,.0f}", "",
              "100%"],
             ["environments alone: EnvBatch, a loop of 16 envs, 2 processes", f"{alone[False]:,.0f}", "", "100%"]]
    training = markdown_table(
        ["setting", "env steps/s (median of runs)", "runs", "share of the envs alone, stepped alike"], rows)
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
        "## Where the workers' time went (the runs' profiles)\n\n" + time_split(summaries),
        "## Guards in real training (the workers' HOGSHARE_LOGS, all compile=true runs)\n\n"
        + guard_section(logs, workers),
    ])


if __name__ == "__main__":
    main()
